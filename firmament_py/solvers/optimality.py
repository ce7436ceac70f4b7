"""Independent check that a result is a feasible, optimal flow for a `FlowGraph`.

It reads only the graph and the result (never solver internals), so it can judge any solver:
bounds on every arc, conservation at every node, the reported cost, and complementary slackness
under the reported potentials (an arc below capacity has reduced cost >= 0, an arc above its
lower bound has reduced cost <= 0), which by LP duality proves optimality.
"""

from __future__ import annotations

import numpy as np

from firmament_py.flow.graph import FlowGraph
from firmament_py.solvers.base import SolveResult


class OptimalityError(AssertionError):
    """The result is infeasible, mis-costed, or not certified optimal; the message says where."""


def verify(graph: FlowGraph, result: SolveResult) -> None:
    """Raise OptimalityError naming the first violation, or return if the result is optimal."""
    a = graph.arrays()
    arcs = graph.arc_ids()
    nodes = graph.node_ids()
    flow = np.asarray(result.flow, dtype=np.int64)
    pi = np.asarray(result.potentials, dtype=np.int64)
    if len(flow) < graph.arc_id_bound:
        raise OptimalityError(f"flow has {len(flow)} entries, graph has arc ids up to {len(a.src)}")
    if len(pi) < graph.node_id_bound:
        raise OptimalityError(f"{len(pi)} potentials for node ids up to {graph.node_id_bound - 1}")
    f = flow[arcs]
    low, cap, cost = a.low[arcs], a.cap[arcs], a.cost[arcs]
    src, dst = a.src[arcs], a.dst[arcs]
    bad = np.flatnonzero((f < low) | (f > cap))
    if len(bad):
        i = bad[0]
        raise OptimalityError(
            f"arc {arcs[i]} ({src[i]}->{dst[i]}) carries {f[i]}, outside [{low[i]}, {cap[i]}]"
        )
    dead = np.flatnonzero(~a.arc_alive)
    if len(dead) and np.any(flow[dead] != 0):
        raise OptimalityError("flow on an arc id that is not in the graph")
    balance = a.supply.copy()
    np.subtract.at(balance, src, f)
    np.add.at(balance, dst, f)
    unbalanced = nodes[balance[nodes] != 0]
    if len(unbalanced):
        v = unbalanced[0]
        raise OptimalityError(
            f"node {v}: supply {a.supply[v]} plus inflow minus outflow is {balance[v]}, not 0"
        )
    total = sum(int(x) for x in (f.astype(object) * cost.astype(object)))
    if total != result.cost:
        raise OptimalityError(f"reported cost {result.cost}, but the flow costs {total}")
    rc = cost - pi[src] + pi[dst]
    below_cap = np.flatnonzero((f < cap) & (rc < 0))
    if len(below_cap):
        i = below_cap[0]
        raise OptimalityError(
            f"arc {arcs[i]} ({src[i]}->{dst[i]}) has reduced cost {rc[i]} < 0 but spare capacity"
        )
    above_low = np.flatnonzero((f > low) & (rc > 0))
    if len(above_low):
        i = above_low[0]
        raise OptimalityError(
            f"arc {arcs[i]} ({src[i]}->{dst[i]}) has reduced cost {rc[i]} > 0 but carries flow"
        )
