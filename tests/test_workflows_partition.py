"""PARTITION's phase 1 step by step, at small sizes (section V.C of the INFOCOM'19 paper): the
balance of a (k, 2)-balanced partition held, Kernighan-Lin's refinement respecting vertex
weights (not vertex counts) and never cutting more than it started with, and the number of parts
chosen by Algorithm 3's line 5."""

from __future__ import annotations

import random

import pytest

from firmament_py.workflows import Platform, Workflow, schedule_workflow
from firmament_py.workflows.bisection import NU, BalancedBisector
from firmament_py.workflows.generators import WorkflowShape, one_stage_mapreduce, random_dag
from firmament_py.workflows.partition import _adjacency, balanced_partition


def _bisector(workflow: Workflow, platform: Platform) -> BalancedBisector:
    return BalancedBisector(workflow.sizes, _adjacency(workflow, platform), workflow.topological)


def _varied(seed: int, n: int = 40) -> Workflow:
    """A random DAG of n tasks weighing 1 to 2, with data 0 to 2 on its arcs."""
    rng = random.Random(seed)
    sizes = [(f"t{i}", rng.uniform(1, 2)) for i in range(n)]
    arcs = [
        (f"t{i}", f"t{j}", rng.uniform(0, 2))
        for j in range(n)
        for i in range(j)
        if rng.random() < 0.15
    ]
    return Workflow.build(sizes, arcs)


@pytest.mark.parametrize("seed", range(4))
def test_every_part_weighs_at_most_nu_over_k_of_the_whole(seed: int) -> None:
    workflow = _varied(seed)
    platform = Platform.links(8)
    total = sum(workflow.sizes)
    _, partitions = balanced_partition(workflow, platform)
    assert [p.k for p in partitions] == list(range(1, 9))
    for partition in partitions:
        assert partition.bound == pytest.approx(NU * total / partition.k)
        covered = sorted(v for part in partition.parts for v in part)
        assert covered == list(range(workflow.n))  # a partition: every task once
        for part in partition.parts:
            assert sum(workflow.sizes[v] for v in part) <= partition.bound + 1e-9


def test_a_task_heavier_than_the_bound_gets_a_part_of_its_own_weight() -> None:
    """The trace's durations are heavy-tailed: a task may outweigh nu / k of the whole, and
    then the bound is its weight (the paper is silent on it)."""
    workflow = Workflow.build(
        [("big", 100.0), *((f"t{i}", 1.0) for i in range(6))],
        [("big", f"t{i}", 1.0) for i in range(6)],
    )
    _, partitions = balanced_partition(workflow, Platform.links(4))
    for partition in partitions:
        assert partition.bound == pytest.approx(max(100.0, NU * 106 / partition.k))
        heaviest_part = max(sum(workflow.sizes[v] for v in part) for part in partition.parts)
        assert heaviest_part <= partition.bound + 1e-9  # 100 from k = 3 on


@pytest.mark.parametrize("seed", range(6))
def test_refinement_respects_vertex_weights_and_never_cuts_more(seed: int) -> None:
    workflow = one_stage_mapreduce(
        random.Random(seed), WorkflowShape(max_tasks=30, rho=1.0, density=0.5)
    )
    bisector = _bisector(workflow, Platform.links(2))
    tasks = frozenset(range(workflow.n))
    total = bisector.weight_of(tasks)
    heaviest = max(workflow.sizes)
    cap = max(1.25 * total / 2, heaviest)
    start = bisector.start(bisector.topological_order(tasks), total / 2, cap, cap, total)
    overloaded = max(0.0, bisector.weight_of(start) - cap) + max(
        0.0, total - bisector.weight_of(start) - cap
    )
    refined = bisector.refine(tasks, set(start), cap, cap)
    assert refined and refined != set(tasks)
    rest = set(tasks) - refined
    assert bisector.cut(refined, rest) <= bisector.cut(set(start), set(tasks) - start) + 1e-9
    for side in (refined, rest):  # by weight, whatever the counts
        assert bisector.weight_of(side) <= cap + overloaded + 1e-9


def test_refinement_moves_a_single_heavy_vertex_where_a_swap_could_not() -> None:
    """Two tight groups joined by a light edge, started split across the groups: the least cut
    within the weight allowance moves vertices one at a time (Kernighan and Lin's dummy
    vertices), which pairwise swaps of equal counts cannot reach (3 tasks against 2)."""
    workflow = Workflow.build(
        [("a1", 1.0), ("a2", 1.0), ("a3", 1.0), ("b1", 1.5), ("b2", 1.5)],
        [("a1", "a2", 5.0), ("a2", "a3", 5.0), ("a3", "b1", 0.1), ("b1", "b2", 5.0)],
    )
    bisector = _bisector(workflow, Platform.links(2))
    tasks = frozenset(range(workflow.n))
    index = {name: v for v, name in enumerate(workflow.tasks)}
    start = {index["a1"], index["b1"]}
    refined = bisector.refine(tasks, start, 3.5, 3.5)
    groups = {
        frozenset(index[t] for t in ("a1", "a2", "a3")),
        frozenset({index["b1"], index["b2"]}),
    }
    assert {frozenset(refined), tasks - frozenset(refined)} == groups


def test_k_is_chosen_by_max_part_plus_cut_over_k() -> None:
    """Algorithm 3, line 5: independent tasks spread over every machine (no cut), tasks joined
    by heavy transfers stay on one (the cut outweighs the parallelism)."""
    independent = Workflow.build([(f"t{i}", 1.0) for i in range(4)], [])
    best, partitions = balanced_partition(independent, Platform.links(4))
    assert best.k == 4 and best.cut == 0
    assert best.score == min(p.score for p in partitions)
    chained = Workflow.build(
        [(f"t{i}", 1.0) for i in range(4)],
        [("t0", "t1", 50.0), ("t0", "t2", 50.0), ("t1", "t3", 50.0), ("t2", "t3", 50.0)],
    )
    best, partitions = balanced_partition(chained, Platform.links(4))
    assert best.k == 1 and best.score == pytest.approx(4.0)
    for seed in range(3):
        workflow = random_dag(random.Random(seed), WorkflowShape(max_tasks=20, density=0.3))
        best, partitions = balanced_partition(workflow, Platform.links(5))
        assert best.score == pytest.approx(min(p.score for p in partitions))
        schedule = schedule_workflow(workflow, Platform.links(5), "partition")  # validated
        assert schedule.notes["k"] == best.k


def test_choosing_k_by_makespan_is_never_longer_and_bad_choices_are_refused() -> None:
    """This project's variation (not the paper's): phase 2 on every k, the shortest kept."""
    from firmament_py.workflows.partition import partition_schedule

    workflow = one_stage_mapreduce(random.Random(3), WorkflowShape(max_tasks=25, density=0.8))
    platform = Platform.links(4)
    by_score = partition_schedule(workflow, platform)
    by_makespan = partition_schedule(workflow, platform, choose_k="makespan")
    assert by_makespan.makespan <= by_score.makespan + 1e-9
    assert by_makespan.algorithm == "partition-makespan"
    with pytest.raises(ValueError, match="choose_k must be one of score, makespan"):
        partition_schedule(workflow, platform, choose_k="best")
