"""Load (or compile) a solver's kernels, and those that read placements off its flow, before
the first real round.

numba loads a kernel's machine code from the cache the first time the kernel is called, and
compiles it if the cache is cold; an incremental round calls kernels a from-scratch solve never
does (batch checks, price seeding, the relaxation's sweeps and Dijkstra repricings). Measured
on incremental S90 rounds: the first round after a load took about 300 ms more than the next
ones with a warm cache (docs/benchmarks-history.md). `warm_up` takes a solver through every path a
round can take, on a cluster of four machines, so that a daemon or a race worker pays for
this when it starts and not in its first round.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from firmament_py.flow.graph import FlowGraph
from firmament_py.flow.graphgen import ClusterGraph, ClusterSpec
from firmament_py.flow.limits import NodeKind
from firmament_py.flow.placement import extract_placement_array
from firmament_py.solvers.algorithms import ALIASES, RACES, make_algorithm
from firmament_py.solvers.batch_check import LiveIds
from firmament_py.solvers.cost_scaling import CostScalingSolver

__all__ = ["warm_up"]

# Options that send a solver down paths a tiny graph would not otherwise take, tried after the
# solver's own options (their kernels are the same whatever the values).
_EXTRA_PATHS: Mapping[str, tuple[Mapping[str, Any], ...]] = {
    # Trees of one member: blocking-flow sweeps and Dijkstra repricing, forwards and backwards.
    "relaxation": ({"tree_limit": 1}, {"tree_limit": 1, "forward_reprice": 0}),
}


def warm_up(algorithm: str, options: Mapping[str, Any] | None = None) -> None:
    """Run `algorithm` (with `options`) through a load, a solve from scratch, a round of changes,
    an incremental solve, a `sync` and a solve from it on a tiny cluster. A race's workers warm
    up as they start: for a race this takes only the caller's side through a round (the graph's
    snapshot, and the batch checks a race makes while its workers apply a batch). Either way it
    also reads a placement off a flow, which every scheduling round does after its solve."""
    _read_a_placement()
    _edit_in_bulk()
    name = ALIASES.get(algorithm, algorithm)
    if name in RACES:
        cluster = _tiny_cluster()
        ids = LiveIds()
        ids.load(cluster.graph.snapshot())
        cluster.next_round(churn=0.5)
        ids.apply(cluster.graph.take_changes())
        return
    own = dict(options or {})
    for extra in ({}, *_EXTRA_PATHS.get(name, ())):
        cluster = _tiny_cluster()
        solver = make_algorithm(algorithm, **{**own, **extra})
        try:
            solver.load(cluster.graph.snapshot())  # how a race worker loads a graph
            cluster.observe(solver.solve_graph(cluster.graph).flow)  # how everyone else does
            cluster.next_round(churn=0.5)
            result = solver.solve_graph(cluster.graph)
            solver.sync(result.flow, result.potentials)  # how a race worker takes an answer
            solver.solve()  # and solves from it (cost scaling lifts adopted prices first)
            if isinstance(solver, CostScalingSolver):
                solver.load_proof_kernels()
        finally:
            solver.close()


def _tiny_cluster() -> ClusterGraph:
    return ClusterGraph(
        ClusterSpec(machines=4, slots_per_machine=2, machines_per_rack=2, waiting=6, seed=1)
    )


def _edit_in_bulk() -> None:
    """The graph's bulk edits a scheduler's graph manager makes every round (reading many
    nodes' arcs, changing, adding and removing arcs and nodes at once), and the round's change
    log: loads their kernels."""
    graph = FlowGraph()
    nodes = graph.trusted_add_nodes(
        np.array([1, 0, -1], dtype=np.int64),
        np.array([NodeKind.TASK, NodeKind.LEAF, NodeKind.SINK], dtype=np.int64),
    )
    ones = np.ones(2, dtype=np.int64)
    arcs = graph.trusted_add_arcs(nodes[:2], nodes[1:], 0 * ones, ones, ones, 0 * ones)
    graph.take_changes()
    graph.trusted_out_arcs_of(nodes[:2])
    graph.trusted_change_arcs(arcs, 0 * ones, ones, 2 * ones)
    graph.trusted_find_out_arcs(nodes[:1], nodes[1:2], np.zeros(1, dtype=np.int64))
    graph.trusted_remove_arcs(arcs[:1])
    graph.trusted_remove_nodes(nodes[:1])
    graph.take_changes()


def _read_a_placement() -> None:
    """One task placed on one machine: loads the kernels that check a flow and follow it."""
    graph = FlowGraph()
    task = graph.add_node(supply=1, kind=NodeKind.TASK)
    machine = graph.add_node(kind=NodeKind.LEAF)
    sink = graph.add_node(supply=-1, kind=NodeKind.SINK)
    graph.add_arc(task, machine, capacity=1, cost=0)
    graph.add_arc(machine, sink, capacity=1, cost=0)
    extract_placement_array(graph, [1, 1])
