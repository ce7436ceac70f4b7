"""Tests of placement extraction and scheduling deltas (firmament_py/flow/placement.py).

Covered:

* hand-built graphs: task -> machine -> sink; task -> X -> rack -> machine -> sink; the
  unscheduled aggregator; tasks sharing aggregators with split flow (several units, exact
  first-in-first-out tie-breaking, which follows arc ids); parallel arcs; an aggregator that
  routes to the sink around the machines; machines below machines; a cycle that carries flow;
  explicit and default task and machine nodes, and the array form;
* bad input: flows of the wrong length, shape or type, flow on a removed arc or outside an
  arc's bounds, unconserved flow (the node is named), task nodes that do not send exactly one
  unit of their own, and task and machine lists that name non-nodes, repeat a task or overlap;
* generated Firmament-shaped graphs (both shapes, before and after a round of churn) solved by
  real solvers: unplaced exactly when the unscheduled arc carries the unit, placements agree
  with the task's own arcs, no machine gets more tasks than the flow it drains to the sink;
* a hypothesis property over random scheduling-shaped graphs with random routed flows: the
  result equals a separate, Listing-1-style backward propagation of explicit machine lists
  under the same rule, machine counts equal their inflow, and every task's machine is reachable
  along arcs that carry flow;
* `scheduling_deltas`: PLACE, PREEMPT, MIGRATE, NOOPs omitted, order, absent tasks, a running
  task missing from the placements, and `SchedulingDelta`'s own consistency checks.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import FrozenInstanceError, dataclass
from typing import NamedTuple

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from firmament_py.flow.graph import FlowGraph, NodeKind
from firmament_py.flow.graphgen import ClusterGraph, ClusterSpec, Shape
from firmament_py.flow.placement import (
    UNPLACED,
    DeltaKind,
    PlacementError,
    SchedulingDelta,
    extract_placement_array,
    extract_placements,
    scheduling_deltas,
)
from firmament_py.solvers import make_solver

Int64Array = npt.NDArray[np.int64]


# ---------------------------------------------------------------------- helpers


class Net:
    """A small graph built arc by arc, each arc with the flow it carries."""

    def __init__(self) -> None:
        self.graph = FlowGraph(node_hint=2, arc_hint=2)
        self.flows: dict[int, int] = {}

    def node(self, supply: int = 0, kind: NodeKind = NodeKind.OTHER) -> int:
        return self.graph.add_node(supply, kind)

    def task(self) -> int:
        return self.node(1, NodeKind.TASK)

    def machine(self) -> int:
        return self.node(0, NodeKind.LEAF)

    def arc(self, src: int, dst: int, flow: int = 1, cap: int | None = None, cost: int = 0) -> int:
        k = self.graph.add_arc(src, dst, capacity=flow if cap is None else cap, cost=cost)
        self.flows[k] = flow
        return k

    def flow(self) -> Int64Array:
        out = np.zeros(self.graph.arc_id_bound, dtype=np.int64)
        for k, f in self.flows.items():
            out[k] = f
        return out

    def sink(self) -> int:
        """The sink, with the demand that balances all supplies added so far."""
        return self.node(-self.graph.total_supply(), NodeKind.SINK)


def fifo_reference(
    graph: FlowGraph, flow: Int64Array, tasks: list[int], machines: set[int]
) -> dict[int, int | None]:
    """The documented rule computed as Listing 1 does, backwards with explicit machine lists.

    `labels(v)` is the destination of each of v's outgoing units in matching order (its
    out-arcs by id, then the units its demand absorbs); an arc's units are the slice of its
    head's list that the rule gives it (after the head's supply and its smaller in-arcs). Only
    for flows without cycles.
    """
    a = graph.arrays()
    out_arcs: dict[int, list[int]] = defaultdict(list)
    in_arcs: dict[int, list[int]] = defaultdict(list)
    for k in graph.arc_ids().tolist():
        if flow[k] > 0:
            out_arcs[int(a.src[k])].append(k)
            in_arcs[int(a.dst[k])].append(k)
    memo: dict[int, list[int | None]] = {}

    def labels(v: int) -> list[int | None]:
        if v not in memo:
            supply = int(a.supply[v])
            if v in machines:
                units = max(supply, 0) + sum(int(flow[k]) for k in in_arcs[v])
                memo[v] = [v] * units
            else:
                seq: list[int | None] = []
                for k in out_arcs[v]:
                    seq += arc_labels(k)
                memo[v] = seq + [None] * max(-supply, 0)
        return memo[v]

    def arc_labels(k: int) -> list[int | None]:
        v = int(a.dst[k])
        start = max(int(a.supply[v]), 0) + sum(int(flow[j]) for j in in_arcs[v] if j < k)
        return labels(v)[start : start + int(flow[k])]

    return {t: labels(t)[0] for t in tasks}


def inflow(graph: FlowGraph, flow: Int64Array, v: int) -> int:
    return sum(int(flow[k]) for k in graph.in_arcs(v))


# ---------------------------------------------------------------------- hand-built graphs


def test_task_machine_sink() -> None:
    n = Net()
    t, m = n.task(), n.machine()
    n.arc(t, m)
    n.arc(m, n.sink())
    assert extract_placements(n.graph, n.flow()) == {t: m}


def test_task_through_cluster_aggregator_and_rack() -> None:
    n = Net()
    t = n.task()
    x, rack = n.node(), n.node()
    m1, m2 = n.machine(), n.machine()
    n.arc(t, x)
    n.arc(x, rack)
    n.arc(rack, m1, flow=0, cap=4)  # an idle machine in the same rack
    n.arc(rack, m2, cap=4)
    s = n.sink()
    n.arc(m1, s, flow=0, cap=4)
    n.arc(m2, s, cap=4)
    assert extract_placements(n.graph, n.flow()) == {t: m2}


def test_unscheduled_aggregator_leaves_the_task_unplaced() -> None:
    n = Net()
    t1, t2 = n.task(), n.task()
    unsched, m = n.node(), n.machine()
    n.arc(t1, m, flow=0)  # a preference arc the solution does not use
    n.arc(t1, unsched)
    n.arc(t2, m)
    s = n.sink()
    n.arc(unsched, s, cap=2)
    n.arc(m, s)
    assert extract_placements(n.graph, n.flow()) == {t1: None, t2: m}
    tasks, machines = extract_placement_array(n.graph, n.flow())
    assert tasks.tolist() == [t1, t2]
    assert machines.tolist() == [UNPLACED, m]


def test_two_tasks_split_across_machines_first_in_first_out() -> None:
    """The task on X's smaller in-arc id takes the units of X's smaller out-arc id."""
    for reverse in (False, True):
        n = Net()
        t1, t2 = n.task(), n.task()
        x, m1, m2 = n.node(), n.machine(), n.machine()
        n.arc(t1, x)
        n.arc(t2, x)
        first, second = (m2, m1) if reverse else (m1, m2)
        n.arc(x, first)
        n.arc(x, second)
        s = n.sink()
        n.arc(m1, s)
        n.arc(m2, s)
        assert extract_placements(n.graph, n.flow()) == {t1: first, t2: second}


def test_several_units_through_nested_aggregators() -> None:
    n = Net()
    tasks = [n.task() for _ in range(5)]
    x, r1, r2 = n.node(), n.node(), n.node()
    m1, m2, m3 = n.machine(), n.machine(), n.machine()
    for t in tasks:
        n.arc(t, x)
    n.arc(x, r1, flow=3, cap=10)
    n.arc(x, r2, flow=2, cap=10)
    n.arc(r1, m1, flow=2, cap=5)
    n.arc(r1, m2, flow=1, cap=5)
    n.arc(r2, m3, flow=2, cap=5)
    s = n.sink()
    for m, f in ((m1, 2), (m2, 1), (m3, 2)):
        n.arc(m, s, flow=f, cap=5)
    got = extract_placements(n.graph, n.flow())
    assert got == dict(zip(tasks, [m1, m1, m2, m3, m3], strict=True))


def test_supply_units_come_before_in_arcs() -> None:
    """A task's own unit is first among its node's units, so flow passing through a source
    node (which is not a task) is matched after the node's supply."""
    n = Net()
    t = n.task()
    src = n.node(supply=1)  # a source node that is not listed as a task
    mid = n.node(supply=1)  # another source, with flow passing through it
    m1, m2 = n.machine(), n.machine()
    n.arc(t, mid)
    n.arc(src, mid)
    n.arc(mid, m1)  # mid's first out-arc: takes mid's own unit
    n.arc(mid, m2, flow=2, cap=2)
    s = n.sink()
    n.arc(m1, s)
    n.arc(m2, s, flow=2, cap=2)
    # mid's units: its own, then t's (smaller in-arc id), then src's; m1 takes the first.
    got = extract_placements(n.graph, n.flow(), task_nodes=[t, src])
    assert got == {t: m2, src: m2}


def test_parallel_arcs() -> None:
    n = Net()
    t1, t2, t3 = n.task(), n.task(), n.task()
    x, m1, m2 = n.node(), n.machine(), n.machine()
    for t in (t1, t2, t3):
        n.arc(t, x)
    n.arc(x, m1, cost=5)
    n.arc(x, m2, cost=1)
    n.arc(x, m1, cost=7)  # parallel to the first arc, a larger id
    s = n.sink()
    # load-spreading style: one unit arc per slot, two parallel arcs into the sink
    n.arc(m1, s, cost=0)
    n.arc(m1, s, cost=10)
    n.arc(m2, s)
    assert extract_placements(n.graph, n.flow()) == {t1: m1, t2: m2, t3: m1}


def test_aggregator_that_bypasses_machines() -> None:
    """An equivalence class sends one unit to a machine and one straight to the sink."""
    n = Net()
    t1, t2 = n.task(), n.task()
    ec, m = n.node(), n.machine()
    n.arc(t1, ec)
    n.arc(t2, ec)
    s = n.sink()
    n.arc(ec, s)
    n.arc(ec, m)
    n.arc(m, s)
    assert extract_placements(n.graph, n.flow()) == {t1: None, t2: m}


def test_first_machine_node_on_the_path_wins() -> None:
    n = Net()
    t = n.task()
    machine, pu = n.machine(), n.machine()  # a machine node above a processing-unit leaf
    n.arc(t, machine)
    n.arc(machine, pu)
    n.arc(pu, n.sink())
    assert extract_placements(n.graph, n.flow()) == {t: machine}
    assert extract_placements(n.graph, n.flow(), machine_nodes=[pu]) == {t: pu}
    assert extract_placements(n.graph, n.flow(), machine_nodes=[]) == {t: None}


def test_flow_around_a_cycle() -> None:
    """Units matched first in, first out pass a cycle that carries flow and still end."""
    n = Net()
    t1, t2 = n.task(), n.task()
    a, b = n.node(), n.node()
    m1, m2 = n.machine(), n.machine()
    n.arc(t1, a)
    n.arc(t2, a)
    n.arc(a, b, flow=2, cap=2)
    n.arc(b, a)
    n.arc(a, m2)
    n.arc(b, m1)
    s = n.sink()
    n.arc(m1, s)
    n.arc(m2, s)
    # a's units: t1, t2, then b's unit; out: (a->b) x2, then a->m2. t1 goes round the cycle:
    # a->b unit 0 is b's unit 0, which b sends back on b->a, a's unit 2, which leaves to m2.
    assert extract_placements(n.graph, n.flow()) == {t1: m2, t2: m1}


def test_explicit_task_order_and_default_nodes() -> None:
    n = Net()
    t1, t2 = n.task(), n.task()
    m = n.machine()
    other = n.node(supply=1)  # not a TASK node: not reported by default
    n.arc(t1, m)
    n.arc(t2, m)
    n.arc(other, m)
    n.arc(m, n.sink(), flow=3, cap=3)
    flow = n.flow()
    assert list(extract_placements(n.graph, flow)) == [t1, t2]
    assert list(extract_placements(n.graph, flow, task_nodes=[t2, other, t1])) == [t2, other, t1]
    assert extract_placements(n.graph, flow, task_nodes=np.array([t2])) == {t2: m}
    assert extract_placements(n.graph, flow, task_nodes=[]) == {}


def test_idle_graph_without_tasks() -> None:
    g = FlowGraph()
    m = g.add_node(0, NodeKind.LEAF)
    s = g.add_node(0, NodeKind.SINK)
    g.add_arc(m, s, capacity=3, cost=0)
    assert extract_placements(g, np.zeros(1, dtype=np.int64)) == {}


# ---------------------------------------------------------------------- bad input


class Simple(NamedTuple):
    """t -> m -> s, plus an unused detour t -> u -> s."""

    net: Net
    task: int
    machine: int
    detour: int
    task_arc: int  # t -> m
    drain_arc: int  # m -> s


def simple() -> Simple:
    n = Net()
    t, m, u = n.task(), n.machine(), n.node()
    tm = n.arc(t, m)
    n.arc(t, u, flow=0)
    s = n.sink()
    ms = n.arc(m, s)
    n.arc(u, s, flow=0)
    return Simple(n, t, m, u, tm, ms)


@pytest.mark.parametrize("size", [0, 3, 5])
def test_flow_of_the_wrong_length(size: int) -> None:
    n = simple().net
    with pytest.raises(PlacementError, match=f"flow has {size} entries.*exactly 4"):
        extract_placements(n.graph, np.zeros(size, dtype=np.int64))


def test_flow_of_the_wrong_shape_or_type() -> None:
    n = simple().net
    with pytest.raises(PlacementError, match="one-dimensional"):
        extract_placements(n.graph, np.zeros((2, 2), dtype=np.int64))
    with pytest.raises(PlacementError, match="integers"):
        extract_placements(n.graph, n.flow().astype(np.float64))


def test_flow_on_a_removed_arc() -> None:
    x = simple()
    n = x.net
    extra = n.arc(x.detour, x.machine, flow=0)
    n.graph.remove_arc(extra)
    flow = n.flow()
    flow[extra] = 1
    with pytest.raises(PlacementError, match=f"1 on arc {extra}, which is not in the graph"):
        extract_placements(n.graph, flow)


@pytest.mark.parametrize("value", [-1, 2])
def test_flow_outside_an_arcs_bounds(value: int) -> None:
    x = simple()
    flow = x.net.flow()
    flow[x.task_arc] = value
    where = (
        rf"arc {x.task_arc} \({x.task}->{x.machine}\) carries {value}, outside its bounds \[0, 1\]"
    )
    with pytest.raises(PlacementError, match=where):
        extract_placements(x.net.graph, flow)


def test_unconserved_flow_names_the_node() -> None:
    x = simple()
    n, m = x.net, x.machine
    flow = n.flow()
    flow[x.drain_arc] = 0  # m -> s carries nothing: the unit stops at m
    with pytest.raises(
        PlacementError, match=f"not conserved at node {m}: .*inflow 1 minus outflow 0"
    ):
        extract_placements(n.graph, flow)


def test_task_with_supply_other_than_one() -> None:
    n = Net()
    t, m = n.node(2, NodeKind.TASK), n.machine()
    n.arc(t, m, flow=2, cap=2)
    n.arc(m, n.sink(), flow=2, cap=2)
    with pytest.raises(PlacementError, match=f"task node {t} has supply 2.*exactly one path"):
        extract_placements(n.graph, n.flow())
    x = n.node()
    with pytest.raises(PlacementError, match=f"task node {x} has supply 0"):
        extract_placements(n.graph, n.flow(), task_nodes=[x])


def test_flow_entering_a_task() -> None:
    n = Net()
    t1, t2, m = n.task(), n.task(), n.machine()
    n.arc(t1, t2)
    n.arc(t2, m, flow=2, cap=2)
    n.arc(m, n.sink(), flow=2, cap=2)
    with pytest.raises(PlacementError, match=f"flow enters task node {t2} \\(1 units\\)"):
        extract_placements(n.graph, n.flow())


def test_bad_task_and_machine_lists() -> None:
    x = simple()
    n, t, m = x.net, x.task, x.machine
    flow = n.flow()
    gone = n.node()
    n.graph.remove_node(gone)
    for bad in (0, -3, 99, gone):
        with pytest.raises(PlacementError, match=f"task node {bad} is not a node"):
            extract_placements(n.graph, flow, task_nodes=[t, bad])
        with pytest.raises(PlacementError, match=f"machine node {bad} is not a node"):
            extract_placements(n.graph, flow, machine_nodes=[bad])
    with pytest.raises(PlacementError, match=f"task node {t} is listed twice"):
        extract_placements(n.graph, flow, task_nodes=[t, t])
    with pytest.raises(PlacementError, match=f"node {t} is listed both as a task and as a machine"):
        extract_placements(n.graph, flow, machine_nodes=[m, t])
    with pytest.raises(PlacementError, match="integer node ids"):
        extract_placements(n.graph, flow, task_nodes=[1.5])  # type: ignore[list-item]


# ---------------------------------------------------------------------- generated graphs


def check_generated(cg: ClusterGraph, flow: Int64Array) -> tuple[dict[int, int | None], int]:
    """Check placements of a solved generated graph against its structure.

    Returns the placements and how many placed tasks reached their machine via an aggregator.
    """
    g = cg.graph
    a = g.arrays()
    placements = extract_placements(g, flow)
    live = cg.live_tasks().tolist()
    assert sorted(placements) == sorted(live)
    machines = set(cg.machines.tolist())
    machine_index = {v: i for i, v in enumerate(cg.machines.tolist())}
    rack_nodes = cg.racks.tolist()
    via_aggregator = 0
    for t in live:
        unplaced = flow[cg.tasks.unsched_arc[t]] == 1
        got = placements[t]
        assert (got is None) == unplaced, t
        if got is None:
            continue
        assert got in machines
        (first,) = [k for k in g.out_arcs(t) if flow[k] > 0]
        head = int(a.dst[first])
        if head in machines:
            assert got == head
            continue
        via_aggregator += 1
        if head in rack_nodes:
            assert rack_nodes[int(cg.rack_of[machine_index[got]])] == head
        else:
            assert head == cg.cluster_agg
    counts: dict[int, int] = defaultdict(int)
    for m in placements.values():
        if m is not None:
            counts[m] += 1
    for m in machines:
        drained = sum(int(flow[k]) for k in g.out_arcs(m))
        assert counts[m] <= drained
        assert counts[m] == inflow(g, flow, m)  # all flow into a machine comes from tasks
    assert fifo_reference(g, flow, live, machines) == placements
    return placements, via_aggregator


@pytest.mark.parametrize("shape", ["quincy", "load-spreading"])
@pytest.mark.parametrize("solver_name", ["relaxation", "cost-scaling"])
def test_generated_cluster_solved(shape: Shape, solver_name: str) -> None:
    # 40 machines x 12 slots = 480 in 5 racks; 300 running + 220 waiting: some tasks must
    # wait, and waiting ones reach machines through racks (quincy) or X (load-spreading).
    spec = ClusterSpec(
        machines=40, machines_per_rack=8, running=0.625, waiting=220, shape=shape, seed=7
    )
    cg = ClusterGraph(spec)
    solver = make_solver(solver_name)
    placements, via_aggregator = check_generated(cg, solver.solve_graph(cg.graph).flow)
    assert 0 < sum(m is None for m in placements.values()) < len(placements)
    assert via_aggregator > 0
    cg.next_round(churn=0.2)  # frees and reuses ids, so arc ids stop following build order
    _, via_aggregator = check_generated(cg, solver.solve_graph(cg.graph).flow)
    assert via_aggregator > 0


# ---------------------------------------------------------------------- random property


@dataclass(frozen=True)
class RoutedNet:
    """A scheduling-shaped graph with a routed flow, as plain data for hypothesis."""

    tasks: int
    aggregators: tuple[int, ...]  # the layer (1..3) of each aggregator
    machines: int
    arcs: tuple[tuple[int, int, int, int], ...]  # src, dst, flow, spare capacity (node indexes)

    def build(self) -> tuple[FlowGraph, Int64Array, list[int], list[int], int]:
        """(graph, flow, task nodes, machine nodes, sink); node i of the spec is id i + 1."""
        g = FlowGraph(node_hint=2, arc_hint=2)
        kinds = (
            [NodeKind.TASK] * self.tasks
            + [NodeKind.OTHER] * len(self.aggregators)
            + [NodeKind.LEAF] * self.machines
            + [NodeKind.SINK]
        )
        for i, kind in enumerate(kinds):
            supply = 1 if kind == NodeKind.TASK else -self.tasks if kind == NodeKind.SINK else 0
            assert g.add_node(supply, kind) == i + 1
        flow = []
        for src, dst, f, spare in self.arcs:
            g.add_arc(src + 1, dst + 1, capacity=f + spare, cost=0)
            flow.append(f)
        tasks = list(range(1, self.tasks + 1))
        first_machine = self.tasks + len(self.aggregators) + 1
        machines = list(range(first_machine, first_machine + self.machines))
        return g, np.array(flow, dtype=np.int64), tasks, machines, len(kinds)


@st.composite
def routed_nets(draw: st.DrawFn) -> RoutedNet:
    """Tasks route their unit along random downward paths: task -> aggregators (by layer) ->
    maybe a machine -> sink; arcs are reused or duplicated (parallel arcs), unused arcs are
    added, and the arc order is shuffled so that arc ids do not follow the paths."""
    n_tasks = draw(st.integers(1, 10))
    layers = tuple(draw(st.lists(st.integers(1, 3), max_size=6)))
    n_machines = draw(st.integers(1, 5))
    first_agg = n_tasks
    first_machine = first_agg + len(layers)
    sink = first_machine + n_machines
    layer = [0] * n_tasks + list(layers) + [4] * n_machines + [5]

    def below(v: int) -> list[int]:
        if first_machine <= v < sink:
            return [sink]
        return [w for w in range(first_agg, sink + 1) if layer[w] > layer[v]]

    arcs: list[list[int]] = []  # src, dst, flow, spare
    for t in range(n_tasks):
        v = t
        while v != sink:
            # Prefer aggregators and machines to the sink, and shared arcs to new ones, so that
            # several units meet on one arc and split again downstream.
            nexts = below(v)
            w = draw(st.sampled_from(nexts[:-1] * 3 + nexts[-1:]))
            same = [i for i, arc in enumerate(arcs) if arc[0] == v and arc[1] == w]
            reuse = draw(st.integers(0, 3)) > 0
            if same and reuse:
                arcs[draw(st.sampled_from(same))][2] += 1
            else:
                arcs.append([v, w, 1, 0])
            v = w
    for _ in range(draw(st.integers(0, 4))):
        v = draw(st.integers(0, sink - 1))
        arcs.append([v, draw(st.sampled_from(below(v))), 0, 1])
    for arc in arcs:
        arc[3] = draw(st.integers(0, 2))
    order = draw(st.permutations(range(len(arcs))))
    routed = tuple((arcs[i][0], arcs[i][1], arcs[i][2], arcs[i][3]) for i in order)
    return RoutedNet(n_tasks, layers, n_machines, routed)


@given(routed_nets())
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_random_routed_flows(net: RoutedNet) -> None:
    g, flow, tasks, machines, sink = net.build()
    placements = extract_placements(g, flow)
    assert list(placements) == tasks
    assert placements == fifo_reference(g, flow, tasks, set(machines))
    placed_on: dict[int, int] = defaultdict(int)
    for m in placements.values():
        if m is not None:
            placed_on[m] += 1
    for m in machines:
        assert placed_on[m] == inflow(g, flow, m)
    bypass = sum(int(flow[k]) for k in g.in_arcs(sink) if g.arc_src(k) not in machines)
    assert sum(m is None for m in placements.values()) == bypass
    a = g.arrays()
    for t, m in placements.items():
        if m is None:
            continue
        seen, stack = {t}, [t]
        while stack:
            v = stack.pop()
            for k in g.out_arcs(v):
                w = int(a.dst[k])
                if flow[k] > 0 and w not in seen:
                    seen.add(w)
                    stack.append(w)
        assert m in seen
    tasks_arr, machines_arr = extract_placement_array(g, flow)
    assert tasks_arr.tolist() == tasks
    assert machines_arr.tolist() == [UNPLACED if m is None else m for m in placements.values()]


# ---------------------------------------------------------------------- scheduling deltas


def test_deltas_place_preempt_migrate_and_noop() -> None:
    placements: dict[int, str | None] = {
        1: "a",  # waiting -> a: PLACE
        2: None,  # on b -> unscheduled: PREEMPT
        3: "c",  # on b -> c: MIGRATE
        4: "b",  # stays on b: nothing
        5: None,  # keeps waiting: nothing
        6: "d",  # new task, absent from current: PLACE
    }
    current: dict[int, str | None] = {1: None, 2: "b", 3: "b", 4: "b", 5: None}
    assert scheduling_deltas(placements, current) == [
        SchedulingDelta(DeltaKind.PLACE, 1, None, "a"),
        SchedulingDelta(DeltaKind.PREEMPT, 2, "b", None),
        SchedulingDelta(DeltaKind.MIGRATE, 3, "b", "c"),
        SchedulingDelta(DeltaKind.PLACE, 6, None, "d"),
    ]


def test_deltas_follow_the_order_of_placements() -> None:
    placements = {9: 1, 3: 2, 5: 3}
    deltas = scheduling_deltas(placements, {})
    assert [d.task for d in deltas] == [9, 3, 5]
    assert all(d.kind is DeltaKind.PLACE for d in deltas)
    assert scheduling_deltas(placements, placements) == []


def test_deltas_refuse_a_running_task_missing_from_placements() -> None:
    with pytest.raises(PlacementError, match="task 7 runs on 'm' but the placements"):
        scheduling_deltas({1: "m"}, {1: "m", 7: "m", 8: None})


def test_delta_records_are_consistent_and_frozen() -> None:
    for kind, old, new in (
        (DeltaKind.PLACE, "a", "b"),
        (DeltaKind.PLACE, None, None),
        (DeltaKind.PREEMPT, None, None),
        (DeltaKind.PREEMPT, "a", "b"),
        (DeltaKind.MIGRATE, None, "b"),
        (DeltaKind.MIGRATE, "a", None),
        (DeltaKind.MIGRATE, "a", "a"),
    ):
        with pytest.raises(ValueError, match=kind.name):
            SchedulingDelta(kind, 1, old, new)
    delta = SchedulingDelta(DeltaKind.MIGRATE, 1, "a", "b")
    with pytest.raises(FrozenInstanceError):
        delta.task = 2  # type: ignore[misc]


def test_deltas_from_extracted_placements() -> None:
    """End to end on node ids: a running task moves, one is preempted, one is placed."""
    n = Net()
    t1, t2, t3 = n.task(), n.task(), n.task()
    unsched, m1, m2 = n.node(), n.machine(), n.machine()
    n.arc(t1, m2)
    n.arc(t2, unsched)
    n.arc(t3, m1)
    s = n.sink()
    n.arc(unsched, s)
    n.arc(m1, s)
    n.arc(m2, s)
    placements = extract_placements(n.graph, n.flow())
    deltas = scheduling_deltas(placements, {t1: m1, t2: m1})
    assert [(d.kind, d.task, d.from_machine, d.to_machine) for d in deltas] == [
        (DeltaKind.MIGRATE, t1, m1, m2),
        (DeltaKind.PREEMPT, t2, m1, None),
        (DeltaKind.PLACE, t3, None, m1),
    ]
