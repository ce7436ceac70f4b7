"""PARTITION's recursive bisection: Kernighan-Lin's refinement must serve uneven splits too
(three machines split 2 + 1), whichever order networkx hands the two sides back in."""

from __future__ import annotations

import random

import networkx as nx
import pytest

from firmament_py.workflows import Platform
from firmament_py.workflows.generators import WorkflowShape, one_stage_mapreduce
from firmament_py.workflows.partition import _Bisector, _weighted_graph


@pytest.mark.parametrize("seed", range(12))
def test_an_uneven_split_is_as_good_as_the_refinement_oriented_either_way(seed: int) -> None:
    workflow = one_stage_mapreduce(
        random.Random(seed), WorkflowShape(max_tasks=30, rho=1.0, density=0.5)
    )
    graph = _weighted_graph(workflow, Platform.links(3))
    bisector = _Bisector(workflow, graph)
    tasks = frozenset(range(workflow.n))

    def score(a: frozenset[int], b: frozenset[int]) -> float:  # Algorithm 3's, for 2 + 1 parts
        weight = bisector.weight
        heavier = max(sum(weight[v] for v in a) / 2, sum(weight[v] for v in b) / 1)
        return heavier + bisector.cut(a, b) / 3

    reachable = []
    for ordered in (bisector.topological_order(tasks), bisector.depth_first_order(tasks)):
        start = bisector.split(ordered, 2 / 3)
        reachable.append(start)
        if graph.number_of_edges():
            one, other = nx.algorithms.community.kernighan_lin_bisection(
                graph, partition=(set(start[0]), set(start[1])), weight="weight"
            )
            reachable += [(frozenset(one), frozenset(other)), (frozenset(other), frozenset(one))]
    chosen = bisector.bisect(tasks, 2, 1)
    assert chosen[0] | chosen[1] == tasks and not chosen[0] & chosen[1]
    assert score(*chosen) <= min(score(*pair) for pair in reachable) + 1e-9
