"""Shared helpers for the flow graph, DIMACS and solver tests.

* `GraphSpec` / `graph_specs()`: a hypothesis strategy for random min-cost flow problems
  (negative costs, lower bounds, parallel arcs, zero-capacity arcs, isolated nodes, zero
  supplies, freed node ids), built into a `FlowGraph` by `GraphSpec.build()`.
* `ortools_cost()` / `networkx_cost()`: independent oracles (lower bounds are shifted into the
  supplies, as neither library has them); they return None when the problem is infeasible.
* `SOLVERS`: every solver configuration under test, by name.
* `graph_state()`: a comparable description of a graph's live nodes and arcs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import networkx as nx
import numpy as np
from hypothesis import strategies as st
from ortools.graph.python import min_cost_flow

from firmament_py.flow.graph import FlowGraph
from firmament_py.solvers import make_solver
from firmament_py.solvers.base import FlowSolver
from firmament_py.solvers.cost_scaling import CostScalingSolver
from firmament_py.solvers.relaxation import RelaxationSolver
from firmament_py.solvers.ssp import SuccessiveShortestPathSolver

# ---------------------------------------------------------------------- solvers

SOLVERS: dict[str, Callable[[], FlowSolver]] = {
    "ssp": SuccessiveShortestPathSolver,
    "relax": RelaxationSolver,
    "relax-incremental": lambda: RelaxationSolver(incremental=True),
    "relax-no-prioritisation": lambda: RelaxationSolver(arc_prioritisation=False),
    # Trees of more than one or three members go to blocking-flow sweeps and Dijkstra raises.
    "relax-sweeps": lambda: RelaxationSolver(tree_limit=1),
    "relax-incremental-sweeps": lambda: RelaxationSolver(incremental=True, tree_limit=3),
    # The same sweeps, repriced backwards from the deficits (small graphs reprice forwards).
    "relax-sweeps-backward": lambda: RelaxationSolver(tree_limit=1, forward_reprice=0),
    # The paper's relaxation, by the name the command line gives it: no tree limit at all.
    "relax-pure": lambda: make_solver("relaxation-pure"),
    "cost-scaling": CostScalingSolver,
    "cost-scaling-alpha2": lambda: CostScalingSolver(alpha=2),
    "cost-scaling-global-updates": lambda: CostScalingSolver(global_updates=True),
    # From scratch, a feasibility check every 30 relabels instead of every 8 n: it must never
    # call a feasible problem infeasible.
    "cost-scaling-frequent-checks": lambda: CostScalingSolver(check_factor=0.0),
    "cost-scaling-no-global-updates": lambda: CostScalingSolver(global_updates=False),
    "cost-scaling-largest-change": lambda: CostScalingSolver(warm_epsilon="largest-change"),
}


# ---------------------------------------------------------------------- graph state


def graph_state(graph: FlowGraph, *, arc_ids: bool = True) -> dict[str, object]:
    """Live nodes (id -> supply, kind) and live arcs, comparable with ==.

    With `arc_ids=False` arcs are a sorted multiset of (src, dst, low, cap, cost, kind): use it
    when ids are not expected to survive (DIMACS round trips renumber arcs).
    """
    a = graph.arrays()
    nodes = graph.node_ids().tolist()
    node_part = {v: (int(a.supply[v]), int(a.node_kind[v])) for v in nodes}
    columns = (a.src, a.dst, a.low, a.cap, a.cost, a.arc_kind)
    arcs = {k: tuple(int(c[k]) for c in columns) for k in graph.arc_ids().tolist()}
    arc_part: object = arcs if arc_ids else sorted(arcs.values())
    return {
        "nodes": node_part,
        "arcs": arc_part,
        "num_nodes": graph.num_nodes,
        "num_arcs": graph.num_arcs,
    }


# ---------------------------------------------------------------------- random problems


@dataclass(frozen=True)
class GraphSpec:
    """A min-cost flow problem as plain data (so hypothesis can print and shrink it).

    Nodes are 1..`nodes`; the ids in `removed` are removed after the arcs are added (taking their
    arcs with them), which leaves free ids in the graph. `supply` has one entry per node id.
    """

    nodes: int
    supply: tuple[int, ...]
    arcs: tuple[tuple[int, int, int, int, int], ...]  # src, dst, low, cap, cost
    removed: tuple[int, ...] = ()

    def build(self) -> FlowGraph:
        g = FlowGraph(node_hint=2, arc_hint=2)  # small hints: exercise array growth
        for v in range(1, self.nodes + 1):
            assert g.add_node(self.supply[v - 1]) == v
        for src, dst, low, cap, cost in self.arcs:
            g.add_arc(src, dst, lower=low, capacity=cap, cost=cost)
        for v in self.removed:
            g.remove_node(v)
        return g


@st.composite
def graph_specs(
    draw: st.DrawFn,
    *,
    max_nodes: int = 10,
    max_arcs: int = 30,
    max_cap: int = 12,
    max_cost: int = 20,
    lower_bounds: bool = True,
    feasible: bool = True,
    max_supply: int = 4,
) -> GraphSpec:
    """Random problems; with `feasible` the supplies are those of a random feasible flow.

    Otherwise a few units of supply are then moved between random nodes: the supplies stay
    balanced and the problem is infeasible about half the time.
    """
    n = draw(st.integers(1, max_nodes))
    arcs: list[tuple[int, int, int, int, int]] = []
    flows: list[int] = []
    if n >= 2:
        pairs = st.tuples(st.integers(1, n), st.integers(1, n)).filter(lambda p: p[0] != p[1])
        # Lists drawn plainly are mostly short: draw the arc count first to get dense graphs too.
        m = draw(st.integers(0, max_arcs))
        for src, dst in draw(st.lists(pairs, min_size=m, max_size=m)):
            cap = draw(st.one_of(st.just(0), st.integers(0, max_cap)))
            low = draw(st.integers(0, cap)) if lower_bounds and draw(st.booleans()) else 0
            cost = draw(st.integers(-max_cost, max_cost))
            arcs.append((src, dst, low, cap, cost))
            flows.append(draw(st.integers(low, cap)))
        # A few exact parallel copies of drawn arcs.
        if arcs and draw(st.booleans()):
            for i in draw(st.lists(st.integers(0, len(arcs) - 1), max_size=3)):
                arcs.append(arcs[i])
                flows.append(flows[i])
    removed = tuple(draw(st.sets(st.integers(1, n), max_size=n // 3)))
    alive = [v for v in range(1, n + 1) if v not in removed]
    supply = [0] * (n + 1)
    for (src, dst, _low, _cap, _cost), f in zip(arcs, flows, strict=True):
        if src in removed or dst in removed:
            continue
        supply[src] += f
        supply[dst] -= f
    if not feasible and alive:
        # Move a few units of supply between random nodes: often no longer routable.
        ends = st.sampled_from(alive)
        moves = st.tuples(ends, ends, st.integers(1, max_supply))
        for u, v, d in draw(st.lists(moves, min_size=1, max_size=3)):
            supply[u] += d
            supply[v] -= d
    for v in removed:
        supply[v] = draw(st.integers(-3, 3))  # removed anyway: must not matter
    return GraphSpec(n, tuple(supply[1:]), tuple(arcs), removed)


# ---------------------------------------------------------------------- oracles


def _shifted(graph: FlowGraph) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Supplies and capacities with lower bounds shifted out, and the cost of the lower bounds."""
    a = graph.arrays()
    arcs = graph.arc_ids()
    supply = np.where(a.node_alive, a.supply, 0).astype(np.int64)
    low = a.low[arcs]
    np.subtract.at(supply, a.src[arcs], low)
    np.add.at(supply, a.dst[arcs], low)
    fixed = sum(int(x) * int(c) for x, c in zip(low, a.cost[arcs], strict=True))
    return supply, a.cap[arcs] - low, arcs, fixed


def ortools_cost(graph: FlowGraph) -> int | None:
    """Optimal cost by OR-Tools' SimpleMinCostFlow, or None if infeasible or unbalanced."""
    supply, cap, arcs, fixed = _shifted(graph)
    a = graph.arrays()
    smcf = min_cost_flow.SimpleMinCostFlow()
    if len(arcs):
        smcf.add_arcs_with_capacity_and_unit_cost(
            a.src[arcs].astype(np.int32), a.dst[arcs].astype(np.int32), cap, a.cost[arcs]
        )
    smcf.set_nodes_supplies(np.arange(len(supply), dtype=np.int32), supply)
    status = smcf.solve()
    if status in (smcf.INFEASIBLE, smcf.UNBALANCED):
        return None
    assert status == smcf.OPTIMAL, f"OR-Tools returned {status}"
    return int(smcf.optimal_cost()) + fixed


def networkx_cost(graph: FlowGraph) -> int | None:
    """Optimal cost by networkx's network simplex, or None if infeasible."""
    supply, cap, arcs, fixed = _shifted(graph)
    a = graph.arrays()
    G = nx.MultiDiGraph()
    for v in graph.node_ids().tolist():
        G.add_node(v, demand=-int(supply[v]))
    for k, c in zip(arcs.tolist(), cap.tolist(), strict=True):
        G.add_edge(int(a.src[k]), int(a.dst[k]), capacity=c, weight=int(a.cost[k]))
    if sum(int(supply[v]) for v in G.nodes) != 0:
        return None
    try:
        cost, _flow = nx.network_simplex(G)
    except nx.NetworkXUnfeasible:
        return None
    return int(cost) + fixed
