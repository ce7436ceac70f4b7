"""Tests of the min-cost flow solvers from scratch (firmament_py/solvers/).

Every configuration in `conftest.SOLVERS` (successive shortest path; relaxation from scratch,
incremental, and without arc prioritisation; cost scaling with alpha 9 and 2) is checked on:

* hypothesis-generated problems (balanced random supplies, negative costs, lower bounds,
  parallel arcs, zero-capacity arcs, isolated nodes, zero supplies, freed node ids): the cost
  equals OR-Tools' `SimpleMinCostFlow` (and networkx's `network_simplex` on small graphs), and
  `optimality.verify` accepts the result (bounds, conservation, cost, reduced-cost certificate);
* random supplies that are often infeasible: the solver raises `InfeasibleError` exactly when
  the oracle finds no feasible flow; unbalanced supplies raise `InfeasibleError`;
* negative cycles: of uncapacitated arcs -> `UnboundedError`; with a finite arc -> solved;
* extreme values (costs at +-MAX_COST, huge capacities);
* Firmament-shaped scheduling graphs from `graphgen` (quincy and load-spreading, 20-50
  machines, normal and oversubscribed);
* the life cycle: `load` / `apply` / `solve` / `solve_graph` / `sync`, errors before loading,
  repeated solves, `SolveResult` fields;
* `verify` itself rejects broken results (so a passing check means something).
"""

from __future__ import annotations

import dataclasses
import mmap

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from firmament_py.flow.graph import INFINITE_CAPACITY, MAX_CAPACITY, MAX_COST, FlowGraph, NodeKind
from firmament_py.flow.graphgen import ClusterGraph, ClusterSpec
from firmament_py.solvers import network as network_module
from firmament_py.solvers.base import (
    InfeasibleError,
    SolverError,
    SolveResult,
    UnboundedError,
)
from firmament_py.solvers.cost_scaling import CostScalingSolver
from firmament_py.solvers.network import TOP, ResidualNetwork
from firmament_py.solvers.optimality import OptimalityError, verify
from firmament_py.solvers.relaxation import RelaxationSolver
from firmament_py.solvers.ssp import SuccessiveShortestPathSolver

from .conftest import SOLVERS, GraphSpec, graph_specs, networkx_cost, ortools_cost

SOLVER_NAMES = sorted(SOLVERS)
ALGORITHM = {
    "ssp": "ssp",
    "relax": "relaxation",
    "relax-incremental": "relaxation",
    "relax-no-prioritisation": "relaxation",
    "relax-sweeps": "relaxation",
    "relax-incremental-sweeps": "relaxation",
    "relax-sweeps-backward": "relaxation",
    "relax-pure": "relaxation",
    "cost-scaling": "cost-scaling",
    "cost-scaling-alpha2": "cost-scaling",
    "cost-scaling-global-updates": "cost-scaling",
    "cost-scaling-frequent-checks": "cost-scaling",
    "cost-scaling-no-global-updates": "cost-scaling",
    "cost-scaling-largest-change": "cost-scaling",
}


def examples(n: int) -> settings:
    return settings(
        max_examples=n,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )


def solve_checked(name: str, graph: FlowGraph) -> SolveResult:
    """Solve with a fresh solver and check the result's shape and certificate."""
    result = SOLVERS[name]().solve_graph(graph)
    assert result.algorithm == ALGORITHM[name]
    assert len(result.flow) == graph.arc_id_bound
    assert len(result.potentials) == graph.node_id_bound
    assert result.flow.dtype == np.int64
    assert result.wall_time >= 0
    verify(graph, result)
    return result


# ====================================================================== random problems


@pytest.mark.parametrize("name", SOLVER_NAMES)
@examples(200)
@given(spec=graph_specs(max_nodes=12, max_arcs=36))
def test_random_feasible_problems_match_the_oracles(name: str, spec: GraphSpec) -> None:
    g = spec.build()
    result = solve_checked(name, g)
    assert result.cost == ortools_cost(g)
    if g.num_nodes <= 8:
        assert result.cost == networkx_cost(g)


@pytest.mark.parametrize("name", SOLVER_NAMES)
@examples(40)
@given(spec=graph_specs(max_nodes=40, max_arcs=200, max_cap=30, max_cost=1000))
def test_larger_random_problems_match_or_tools(name: str, spec: GraphSpec) -> None:
    g = spec.build()
    assert solve_checked(name, g).cost == ortools_cost(g)


@pytest.mark.parametrize("name", SOLVER_NAMES)
@examples(120)
@given(spec=graph_specs(max_nodes=10, max_arcs=30, feasible=False))
def test_random_supplies_feasible_exactly_when_the_oracle_says_so(
    name: str, spec: GraphSpec
) -> None:
    g = spec.build()
    expected = ortools_cost(g)
    if expected is None:
        with pytest.raises(InfeasibleError):
            SOLVERS[name]().solve_graph(g)
    else:
        assert solve_checked(name, g).cost == expected


@pytest.mark.parametrize("name", SOLVER_NAMES)
@examples(40)
@given(
    spec=graph_specs(max_nodes=6, max_arcs=12, max_cap=10**5, max_cost=MAX_COST),
    scale=st.sampled_from([1, 100]),
)
def test_extreme_values(name: str, spec: GraphSpec, scale: int) -> None:
    g = spec.build()
    # Huge spare capacity on some arcs of non-negative cost (a negative cycle of huge arcs
    # would make the optimum overflow 64 bits).
    for k in g.arc_ids().tolist():
        if k % 2 and g.arc_cost(k) >= 0:
            g.change_arc(k, capacity=MAX_CAPACITY - 1 - k)
    for v in g.node_ids().tolist():
        g.set_supply(v, g.supply(v) * scale)
    expected = ortools_cost(g)
    assume(expected is not None)
    assert solve_checked(name, g).cost == expected


# ====================================================================== small fixed problems


def chain(supply: int = 4) -> FlowGraph:
    g = FlowGraph()
    g.add_nodes(4, supply=[supply, 0, 0, -supply])
    return g


@pytest.mark.parametrize("name", SOLVER_NAMES)
def test_degenerate_cases(name: str) -> None:
    # No nodes at all, nodes without arcs, arcs but no supply.
    empty = FlowGraph()
    assert solve_checked(name, empty).cost == 0
    g = FlowGraph()
    g.add_nodes(3)
    assert solve_checked(name, g).cost == 0
    g.add_arc(1, 2, capacity=5, cost=3)
    g.add_arc(2, 3, capacity=0, cost=-9)  # zero capacity: never used
    assert solve_checked(name, g).cost == 0
    # A negative cycle of finite arcs is saturated even with no supply anywhere.
    g.add_arc(2, 1, capacity=2, cost=-5)
    r = solve_checked(name, g)
    assert r.cost == -4
    assert r.flow.tolist() == [2, 0, 2]
    # Parallel arcs: the cheaper is filled first; the zero-capacity one stays empty.
    p = chain()
    cheap = p.add_arc(1, 2, capacity=3, cost=1)
    dear = p.add_arc(1, 2, capacity=3, cost=4)
    zero = p.add_arc(1, 2, capacity=0, cost=-100)
    p.add_arc(2, 4, capacity=10, cost=0)
    p.add_node()  # isolated
    r = solve_checked(name, p)
    assert (r.flow[cheap], r.flow[dear], r.flow[zero], r.cost) == (3, 1, 0, 7)
    # A lower bound forces flow around a cheaper path.
    lb = chain(2)
    lb.add_arc(1, 4, capacity=2, cost=0)
    forced = lb.add_arc(1, 3, capacity=2, cost=5, lower=1)
    lb.add_arc(3, 4, capacity=2, cost=5)
    r = solve_checked(name, lb)
    assert r.flow[forced] == 1
    assert r.cost == 10
    # A lower bound on an arc into a dead end (no way back) is infeasible.
    dead = chain(0)
    dead.add_arc(1, 2, capacity=3, cost=0, lower=1)
    with pytest.raises(InfeasibleError):
        SOLVERS[name]().solve_graph(dead)


@pytest.mark.parametrize("name", SOLVER_NAMES)
def test_infeasible_and_unbalanced(name: str) -> None:
    g = chain(5)
    g.add_arc(1, 2, capacity=3, cost=1)
    g.add_arc(2, 4, capacity=10, cost=1)
    with pytest.raises(InfeasibleError):
        SOLVERS[name]().solve_graph(g)
    g.set_supply(4, -3)
    g.set_supply(1, 3)
    assert solve_checked(name, g).cost == 6
    g.set_supply(1, 4)
    with pytest.raises(InfeasibleError, match="unbalanced"):
        SOLVERS[name]().solve_graph(g)


@pytest.mark.parametrize("name", SOLVER_NAMES)
@examples(30)
@given(spec=graph_specs(max_nodes=8, max_arcs=16), data=st.data(), finite=st.booleans())
def test_negative_cycles(name: str, spec: GraphSpec, data: st.DataObject, finite: bool) -> None:
    g = spec.build()
    live = g.node_ids().tolist()
    assume(len(live) >= 2)
    size = data.draw(st.integers(2, min(4, len(live))), label="cycle length")
    cycle = data.draw(st.permutations(live), label="cycle")[:size]
    costs = data.draw(st.lists(st.integers(-30, 30), min_size=size, max_size=size), label="costs")
    if sum(costs) >= 0:
        costs[0] -= sum(costs) + 1
    arcs = [
        g.add_arc(u, cycle[(i + 1) % len(cycle)], capacity=INFINITE_CAPACITY, cost=c)
        for i, (u, c) in enumerate(zip(cycle, costs, strict=True))
    ]
    if not finite:
        with pytest.raises(UnboundedError, match="unbounded"):
            SOLVERS[name]().solve_graph(g)
        return
    g.change_arc(arcs[0], capacity=7)
    assert solve_checked(name, g).cost == ortools_cost(g)


@pytest.mark.parametrize("name", SOLVER_NAMES)
def test_uncapacitated_arcs_without_a_negative_cycle(name: str) -> None:
    g = chain(6)
    g.add_arc(1, 2, capacity=INFINITE_CAPACITY, cost=3)
    g.add_arc(2, 1, capacity=INFINITE_CAPACITY, cost=-3)  # zero-cost cycle: bounded
    g.add_arc(2, 4, capacity=INFINITE_CAPACITY, cost=-1)
    g.add_arc(1, 3, capacity=INFINITE_CAPACITY, cost=1)
    g.add_arc(3, 4, capacity=4, cost=0)
    r = solve_checked(name, g)
    assert r.cost == 4 * 1 + 2 * 2
    assert r.cost == networkx_cost(g)


def test_cost_scaling_without_global_updates_reports_infeasibility() -> None:
    g = FlowGraph()
    g.add_nodes(3)
    g.add_arc(2, 1, capacity=100, cost=200)
    g.add_arc(1, 2, capacity=100, cost=200)
    g.add_arc(3, 2, capacity=3, cost=8, lower=2)  # node 3 must send 2 units it cannot get
    with pytest.raises(InfeasibleError):
        CostScalingSolver(global_updates=False).solve_graph(g)


@pytest.mark.parametrize("name", SOLVER_NAMES)
def test_many_tied_arcs(name: str) -> None:
    """Thousands of arcs tie at one reduced cost (relaxation's tight-arc buffer overflows)."""
    rng = np.random.default_rng(7)
    width, supply = 6000, 1000  # more than the cost-4 arcs can take
    g = FlowGraph()
    s = g.add_node(supply)
    t = g.add_node(-supply)
    mids = g.add_nodes(width)
    g.add_arcs(s, mids, capacity=1, cost=rng.choice([4, 5], width, p=[0.2, 0.8]))
    g.add_arcs(mids, t, capacity=rng.integers(0, 2, width), cost=0)
    g.add_arc(s, t, capacity=supply, cost=50)
    assert solve_checked(name, g).cost == ortools_cost(g)


def test_cost_scaling_refuses_costs_that_would_overflow_its_prices() -> None:
    g = FlowGraph()
    g.add_nodes(20_000)
    g.set_supply(1, 1)
    g.set_supply(2, -1)
    g.add_arc(1, 2, capacity=1, cost=MAX_COST)
    with pytest.raises(SolverError, match="overflow"):
        CostScalingSolver().solve_graph(g)
    assert SuccessiveShortestPathSolver().solve_graph(g).cost == MAX_COST


# ====================================================================== scheduling graphs

CLUSTERS = [
    ClusterSpec(machines=20, slots_per_machine=4, machines_per_rack=8, waiting=30, seed=1),
    ClusterSpec(machines=40, machines_per_rack=16, running=0.5, waiting=80, seed=2),
    ClusterSpec(machines=50, machines_per_rack=16, running=0.9, waiting=150, seed=3),  # oversub.
    ClusterSpec(machines=30, machines_per_rack=10, running=0.0, waiting=400, seed=4),
]


@pytest.mark.parametrize("name", SOLVER_NAMES)
@pytest.mark.parametrize("shape", ["quincy", "load-spreading"])
@pytest.mark.parametrize("spec", CLUSTERS, ids=lambda s: f"m{s.machines}-r{s.running}-w{s.waiting}")
def test_scheduling_graphs(name: str, shape: str, spec: ClusterSpec) -> None:
    cluster = ClusterGraph(dataclasses.replace(spec, shape=shape))
    g = cluster.graph
    result = solve_checked(name, g)
    assert result.cost == ortools_cost(g)
    # Every task is either placed or left unscheduled: one unit leaves each task node.
    for t in cluster.live_tasks()[:50].tolist():
        assert sum(int(result.flow[k]) for k in g.out_arcs(t)) == 1


def test_small_scheduling_graph_against_networkx() -> None:
    spec = ClusterSpec(machines=8, slots_per_machine=2, machines_per_rack=4, waiting=12, seed=5)
    for shape in ("quincy", "load-spreading"):
        g = ClusterGraph(dataclasses.replace(spec, shape=shape)).graph
        expected = networkx_cost(g)
        assert expected == ortools_cost(g)
        for name in SOLVER_NAMES:
            assert solve_checked(name, g).cost == expected


# ====================================================================== life cycle


@pytest.mark.parametrize("name", SOLVER_NAMES)
def test_solve_and_apply_before_load_are_errors(name: str) -> None:
    solver = SOLVERS[name]()
    with pytest.raises(SolverError, match="before load"):
        solver.solve()
    g = chain()
    with pytest.raises(SolverError, match="before load"):
        solver.apply(g.take_changes())


def test_network_load_needs_a_reset_batch() -> None:
    g = chain()
    with pytest.raises(ValueError, match="reset batch"):
        SuccessiveShortestPathSolver().network.load(g.take_changes())


# Infeasible problems whose unroutable part is larger than relaxation's tree limit: trees were
# abandoned (or surplus bounced between nodes) forever while prices climbed. Found by fuzzing.
_ENDLESS_RELAXATION = [
    (
        [7, 0, 0, -1, -1, -5],
        [
            (4, 5, 6, -16),
            (3, 1, 3, -20),
            (6, 2, 6, -14),
            (3, 2, 6, -14),
            (4, 2, 4, -7),
            (6, 4, 0, 13),
            (3, 5, 3, -20),
            (4, 1, 5, 16),
            (1, 6, 0, -20),
            (3, 2, 5, -13),
            (2, 5, 0, -5),
            (1, 4, 6, 1),
            (4, 2, 4, 19),
            (3, 5, 6, -8),
            (4, 2, 3, 14),
            (1, 4, 4, -13),
            (2, 1, 2, 15),
            (1, 3, 1, -12),
            (3, 6, 1, 10),
            (5, 4, 3, -7),
            (2, 5, 3, 16),
            (6, 4, 4, 15),
            (3, 6, 4, 7),
            (3, 4, 3, -3),
            (5, 2, 3, -19),
        ],
    ),
    (
        [0, 4, -6, 4, -2],
        [
            (3, 4, 1, 2),
            (1, 5, 5, -19),
            (2, 1, 6, 19),
            (1, 3, 0, 8),
            (2, 1, 6, -5),
            (3, 1, 4, 15),
            (1, 2, 2, 9),
            (4, 2, 4, -9),
            (3, 4, 4, -1),
            (5, 1, 1, -1),
            (2, 4, 3, -11),
            (2, 1, 1, 1),
            (2, 4, 4, -1),
            (5, 2, 2, 0),
            (1, 2, 0, 17),
            (3, 5, 6, 14),
            (1, 5, 4, -9),
            (2, 4, 5, 4),
            (5, 2, 5, -18),
            (4, 5, 4, 10),
            (2, 4, 0, -3),
            (3, 1, 3, 9),
            (1, 4, 2, -17),
            (5, 4, 0, -12),
            (3, 5, 4, 14),
            (4, 1, 0, 0),
            (4, 1, 6, -11),
        ],
    ),
]


@pytest.mark.parametrize("case", range(len(_ENDLESS_RELAXATION)))
@pytest.mark.parametrize("name", SOLVER_NAMES)
def test_infeasible_beyond_the_tree_limit_ends(name: str, case: int) -> None:
    supplies, arcs = _ENDLESS_RELAXATION[case]
    g = FlowGraph()
    nodes = [g.add_node(supply=b) for b in supplies]
    for src, dst, cap, cost in arcs:
        g.add_arc(nodes[src - 1], nodes[dst - 1], capacity=cap, cost=cost)
    assert ortools_cost(g) is None
    with pytest.raises(InfeasibleError):
        SOLVERS[name]().solve_graph(g)


@pytest.mark.parametrize("forward_reprice", [0, 64, 10**9])
def test_relaxation_reprices_both_ways_to_the_same_optimum(forward_reprice: int) -> None:
    # Trees of one member defer every waiting task; the repricing between sweeps searches
    # backwards while more than `forward_reprice` surplus nodes are left, forwards after.
    graph = ClusterGraph(ClusterSpec(machines=30, running=0.8, waiting=400, seed=5)).graph
    result = RelaxationSolver(tree_limit=1, forward_reprice=forward_reprice).solve_graph(graph)
    assert result.cost == ortools_cost(graph)
    verify(graph, result)
    dijkstras, forward = result.stats["dijkstras"], result.stats["dijkstras_forward"]
    assert dijkstras > 0
    if forward_reprice == 0:
        assert forward == 0
    elif forward_reprice == 64:
        assert 0 < forward < dijkstras
    else:
        assert forward == dijkstras


def test_relaxation_refuses_a_negative_forward_reprice() -> None:
    with pytest.raises(ValueError, match="forward_reprice"):
        RelaxationSolver(forward_reprice=-1)


@pytest.mark.parametrize("seed", range(3))
def test_snapshot_rows_load_alike_in_any_order(seed: int) -> None:
    # Snapshots list nodes first and load without copying; other orders load the same network.
    cluster = ClusterGraph(ClusterSpec(machines=10, running=0.5, waiting=20, seed=seed))
    snapshot = cluster.graph.snapshot()
    rows = snapshot.rows[np.random.default_rng(seed).permutation(len(snapshot.rows))]
    shuffled = dataclasses.replace(snapshot, rows=rows)
    costs = []
    for batch in (snapshot, shuffled):
        solver = SuccessiveShortestPathSolver()
        solver.load(batch)
        costs.append(solver.solve().cost)
    assert costs[0] == costs[1]


@examples(150)
@given(spec=graph_specs(max_nodes=15, max_arcs=50), rounds=st.integers(0, 2))
def test_a_network_built_from_a_graph_equals_one_loaded_from_its_snapshot(
    spec: GraphSpec, rounds: int
) -> None:
    # `solve_graph` builds from the graph's arrays (`load_graph`) rather than from a snapshot's
    # rows: the two must give the same arrays, slot for slot, with holes in the ids and lower
    # bounds; and so on a scheduling graph after rounds of churn.
    graphs = [spec.build()]
    cluster = ClusterGraph(ClusterSpec(machines=6, running=0.5, waiting=8, seed=rounds))
    for _ in range(rounds):
        cluster.next_round(churn=0.3)
    graphs.append(cluster.graph)
    for graph in graphs:
        from_rows, from_graph = ResidualNetwork(), ResidualNetwork()
        from_rows.load(graph.snapshot())
        from_graph.load_graph(graph)
        for name, array in from_rows.arrays._asdict().items():
            np.testing.assert_array_equal(getattr(from_graph.arrays, name), array, err_msg=name)
        from_graph.check()


def _one_arc_network() -> tuple[FlowGraph, int, int, ResidualNetwork]:
    """A task with one arc to the sink, and a network loaded from it (changes taken)."""
    g = FlowGraph()
    task, sink = g.add_node(1, NodeKind.TASK), g.add_node(-1, NodeKind.SINK)
    g.add_arc(task, sink, capacity=1, cost=1)
    network = ResidualNetwork()
    network.load(g.snapshot())
    g.discard_changes()
    return g, task, sink, network


def test_batches_that_grow_the_slot_arrays_leave_the_scratch_marks_at_zero() -> None:
    """`mark` is scratch that every kernel leaves at zero: price refinement uses it as its
    queue's flags and would skip a node left marked, proving a flow optimal that is not. A
    batch whose very first row must grow the slot arrays used to count its insertions twice."""
    g, task, sink, network = _one_arc_network()
    grown = 0
    for cost in range(64):
        slots = len(network.arrays.head)
        g.add_arc(task, sink, capacity=1, cost=cost)
        network.apply(g.take_changes())
        grown += len(network.arrays.head) > slots
        assert not network.arrays.mark.any(), f"marks left after batch {cost}"
        network.check()
    assert grown >= 2  # the batches did grow the arrays at their first row


@pytest.mark.parametrize("compacted", [False, True])
def test_a_laid_out_block_has_room_for_a_quarter_more_arcs_in(compacted: bool) -> None:
    """A machine with 40 arcs in takes 12 more where it is (a quarter, and the slack of 2: a
    job's preference arcs arriving); the 13th moves its block to the top. Tasks, with no arcs
    in, get only the slack."""
    g = FlowGraph()
    machine, sink = g.add_node(0, NodeKind.LEAF), g.add_node(-52, NodeKind.SINK)
    g.add_arc(machine, sink, capacity=60, cost=0)
    tasks = [g.add_node(1, NodeKind.TASK) for _ in range(52)]
    for t in tasks[:40]:
        g.add_arc(t, machine, capacity=1, cost=1)
    network = ResidualNetwork()
    network.load(g.snapshot())
    g.discard_changes()
    if compacted:
        network.compact()
    a = network.arrays
    assert a.room[machine] == 41 + 40 // 4 + 2
    assert a.room[tasks[0]] == 1 + 2
    first, top = int(a.first[machine]), int(a.meta[TOP])
    for t in tasks[40:]:
        g.add_arc(t, machine, capacity=1, cost=1)
        network.apply(g.take_changes())
    assert (int(network.arrays.first[machine]), int(network.arrays.meta[TOP])) == (first, top)
    extra = g.add_node(1, NodeKind.TASK)
    g.set_supply(sink, -53)
    g.add_arc(extra, machine, capacity=1, cost=1)
    network.apply(g.take_changes())
    assert int(network.arrays.first[machine]) >= top  # moved to the top
    network.check()
    assert SuccessiveShortestPathSolver().solve_graph(g).cost == ortools_cost(g) == 53


def _recounted_excess(network: ResidualNetwork) -> np.ndarray:
    """supply + inflow - outflow of every node, counted afresh from the arcs' slots."""
    a = network.arrays
    ids = np.flatnonzero(a.fwd >= 0)
    sf = a.fwd[ids]
    flow = a.low[ids] + a.paircap[sf] - a.rescap[sf]
    excess = np.where(a.alive != 0, a.supply, 0)
    np.subtract.at(excess, a.head[a.mate[sf]], flow)
    np.add.at(excess, a.head[sf], flow)
    return excess


@examples(100)
@given(spec=graph_specs(max_nodes=12, max_arcs=40), data=st.data())
def test_setting_flows_clips_them_and_keeps_every_excess(
    spec: GraphSpec, data: st.DataObject
) -> None:
    """`set_flows` writes only the arcs whose flow changes and moves their ends' excesses by
    the difference: after any sequence of flows (out of bounds, shorter or longer than the
    ids), every arc carries its flow clipped to its bounds and every excess is what a recount
    gives."""
    graph = spec.build()
    network = ResidualNetwork()
    network.load(graph.snapshot())
    bound = graph.arc_id_bound
    for _ in range(3):
        values = data.draw(st.lists(st.integers(-3, 15), max_size=bound + 3))
        flow = np.array(values, dtype=np.int64)
        network.set_flows(flow)
        got, _cost = network.flows_and_cost()
        for k in range(bound):
            if graph.has_arc(k):
                low, cap = graph.arc_lower(k), graph.arc_capacity(k)
                want = min(max(int(flow[k]), low), cap) if k < len(flow) else low
                assert got[k] == want, f"arc {k}"
        np.testing.assert_array_equal(network.arrays.excess, _recounted_excess(network))


@pytest.mark.parametrize("seed", [1, 2])
def test_a_synced_flow_after_a_batch_keeps_every_excess(seed: int) -> None:
    """The way a race worker adopts an answer: its own flow, a batch of churn (removals take
    their flow with them), then another solver's flow for the new graph."""
    cluster = ClusterGraph(ClusterSpec(machines=12, running=0.6, waiting=10, seed=seed))
    graph = cluster.graph
    solver = CostScalingSolver()
    solver.load(graph.snapshot())
    graph.discard_changes()
    cluster.observe(solver.solve().flow)
    cluster.next_round(churn=0.3)
    batch = graph.take_changes()
    solver.apply(batch)
    answer = RelaxationSolver().solve_graph(graph.copy())
    solver.sync(answer.flow, answer.potentials)
    network = solver.network
    np.testing.assert_array_equal(network.arrays.excess, _recounted_excess(network))
    assert not network.arrays.excess[network.arrays.alive != 0].any()
    np.testing.assert_array_equal(network.flows_and_cost()[0][: len(answer.flow)], answer.flow)
    assert solver.solve().cost == answer.cost == ortools_cost(graph)


def test_slot_arrays_grow_into_their_reserve_without_a_copy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A network's large arrays are the start of larger zeroed buffers: growing takes more of
    the same buffer (a copy of S90's slot arrays took 500 ms), new slots read as empty. Small
    arrays (under 8 MB) have no reserve: from the heap, theirs would be zeroed in full."""
    small = _one_arc_network()[3].arrays.head
    assert small.base is None or len(small.base) == len(small)
    monkeypatch.setattr(network_module, "_RESERVE_FROM_BYTES", 0)  # every array is "large"
    g, task, sink, network = _one_arc_network()
    before = network.arrays
    while len(network.arrays.head) == len(before.head):
        g.add_arc(task, sink, capacity=1, cost=2)
        network.apply(g.take_changes())
    a = network.arrays
    for name in ("head", "mate", "label", "cost", "rescap", "paircap"):
        assert np.shares_memory(getattr(a, name), getattr(before, name)), name
        # a mapping of its own, filled lazily by the kernel whatever the heap holds
        assert isinstance(getattr(a, name).base.base.obj, mmap.mmap), name
    top = int(a.meta[TOP])
    assert (a.label[top:] == -1).all() and not a.head[top:].any()
    network.check()
    solver = SuccessiveShortestPathSolver()
    assert solver.solve_graph(g).cost == ortools_cost(g) == 1


def test_cost_scaling_alpha_must_be_at_least_two() -> None:
    with pytest.raises(ValueError, match="alpha must be at least 2"):
        CostScalingSolver(alpha=1)


@pytest.mark.parametrize("name", SOLVER_NAMES)
def test_load_apply_solve_by_hand(name: str) -> None:
    g = chain()
    g.add_arc(1, 2, capacity=4, cost=2)
    g.add_arc(2, 4, capacity=4, cost=2)
    g.add_arc(1, 3, capacity=2, cost=1)
    g.add_arc(3, 4, capacity=2, cost=1)
    solver = SOLVERS[name]()
    solver.load(g.snapshot())
    g.discard_changes()
    first = solver.solve()
    assert first.cost == 2 * 2 + 2 * 4
    again = solver.solve()  # nothing changed: same answer
    assert again.cost == first.cost
    assert np.array_equal(again.flow[: g.arc_id_bound], first.flow[: g.arc_id_bound])
    g.change_arc(0, cost=0)
    solver.apply(g.take_changes())
    assert solver.solve().cost == 4 * 2  # both paths now cost 2 a unit
    # A reset batch passed to apply() reloads the whole graph.
    other = chain(1)
    other.add_arc(1, 4, capacity=1, cost=9)
    solver.apply(other.snapshot())
    assert solver.solve().cost == 9
    # Solve results are sized to the graph by solve_graph, whatever the solver holds.
    r = solver.solve_graph(g)
    assert r.cost == 8
    verify(g, r)


@pytest.mark.parametrize("name", SOLVER_NAMES)
@pytest.mark.parametrize("donor", ["ssp", "cost-scaling"])
def test_sync_adopts_another_solvers_solution(name: str, donor: str) -> None:
    cluster = ClusterGraph(ClusterSpec(machines=20, machines_per_rack=8, waiting=40, seed=6))
    g = cluster.graph
    reference = SOLVERS[donor]().solve_graph(g.copy())
    solver = SOLVERS[name]()
    solver.load(g.snapshot())
    g.discard_changes()
    solver.sync(reference.flow, reference.potentials)
    r = solver.solve()
    assert r.cost == reference.cost
    cluster.next_round(0.05)
    solver.apply(g.take_changes())
    r = solver.solve()
    assert r.cost == ortools_cost(g)


@pytest.mark.parametrize("name", SOLVER_NAMES)
def test_solver_recovers_after_an_infeasible_round(name: str) -> None:
    g = chain(3)
    g.add_arc(1, 2, capacity=3, cost=1)
    bottleneck = g.add_arc(2, 4, capacity=3, cost=1)
    g.add_arc(1, 3, capacity=1, cost=5)
    g.add_arc(3, 4, capacity=1, cost=5)
    solver = SOLVERS[name]()
    assert solver.solve_graph(g).cost == 6
    g.change_arc(bottleneck, capacity=1)
    with pytest.raises(InfeasibleError):
        solver.solve_graph(g)
    g.change_arc(bottleneck, capacity=2)
    r = solver.solve_graph(g)
    verify(g, r)
    assert r.cost == 2 * 2 + 10
    g.set_supply(1, 4)  # unbalanced
    with pytest.raises(InfeasibleError, match="unbalanced"):
        solver.solve_graph(g)
    g.set_supply(4, -4)
    g.change_arc(bottleneck, capacity=3)
    r = solver.solve_graph(g)
    verify(g, r)
    assert r.cost == 3 * 2 + 10


@pytest.mark.parametrize("name", SOLVER_NAMES)
def test_sparse_ids(name: str) -> None:
    """Results are indexed by id, whatever gaps the graph's free lists leave."""
    g = FlowGraph()
    a = g.add_node(2)
    b = g.add_node(-2, node=3000)
    c = g.add_node(0, node=1500)
    direct = g.add_arc(a, b, capacity=1, cost=7, arc=900)
    g.add_arc(a, c, capacity=2, cost=1, arc=5)
    g.add_arc(c, b, capacity=2, cost=1)
    solver = SOLVERS[name]()
    r = solver.solve_graph(g)
    verify(g, r)
    assert r.cost == 4
    assert len(r.flow) == 901
    assert len(r.potentials) == 3001
    g.change_arc(direct, cost=-1)
    g.remove_node(c)
    g.set_supply(a, 1)
    g.set_supply(b, -1)
    r = solver.solve_graph(g)
    verify(g, r)
    assert r.cost == -1
    assert r.flow[direct] == 1


# ====================================================================== the checker itself


def test_verify_rejects_broken_results() -> None:
    g = chain(2)
    g.add_arc(1, 2, capacity=2, cost=1)
    g.add_arc(2, 4, capacity=2, cost=1)
    g.add_arc(1, 4, capacity=2, cost=3)
    good = SuccessiveShortestPathSolver().solve_graph(g)
    verify(g, good)
    assert good.cost == 4

    def broken(**changes: object) -> SolveResult:
        return dataclasses.replace(good, **changes)  # type: ignore[arg-type]

    cases = [
        (broken(flow=np.array([2, 2], dtype=np.int64)), "entries"),
        (broken(potentials=np.zeros(2, dtype=np.int64)), "potentials"),
        (broken(flow=np.array([3, 3, -1], dtype=np.int64)), "outside"),
        (broken(flow=np.array([2, 1, 0], dtype=np.int64)), "not 0"),
        (broken(cost=5), "reported cost 5"),
        # Feasible but not optimal: the expensive direct arc.
        (broken(flow=np.array([0, 0, 2], dtype=np.int64), cost=6), "reduced cost"),
        (broken(potentials=np.array([0, 9, 0, 0, 0], dtype=np.int64)), "reduced cost"),
    ]
    for result, message in cases:
        with pytest.raises(OptimalityError, match=message):
            verify(g, result)
    g.remove_arc(2)
    with pytest.raises(OptimalityError, match="not in the graph"):
        verify(g, broken(flow=np.array([2, 2, 1], dtype=np.int64)))


def test_oracles_agree_with_each_other() -> None:
    """The test oracles themselves, with a lower bound shifted into the supplies."""
    g = chain(3)
    g.add_arc(1, 2, capacity=3, cost=2, lower=2)
    g.add_arc(2, 4, capacity=3, cost=1)
    g.add_arc(1, 4, capacity=3, cost=1)
    assert ortools_cost(g) == networkx_cost(g) == 2 * 2 + 2 * 1 + 1
    g.set_supply(1, 9)
    g.set_supply(4, -9)
    assert ortools_cost(g) is None
    assert networkx_cost(g) is None
