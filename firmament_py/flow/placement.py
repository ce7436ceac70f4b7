"""Reading scheduling decisions off an optimal flow: task placements, then scheduling deltas.

After a solve, every task node's unit of flow reaches the sink either through a machine node
(the task is placed there) or around all machines, typically through its job's unscheduled
aggregator (the task waits, or is preempted). Between the task and the machine the unit may pass
any number of aggregators (the cluster aggregator X, racks, equivalence classes, request
aggregators) that carry many units at once, so the flow alone does not say which task went to
which machine. Firmament's Listing 1 (OSDI'16, section 6) settles this by
propagating machine lists backwards from the machines; `extract_placements` computes the same
kind of decomposition, with counts instead of lists and one fixed tie-breaking rule:

**Flow is matched first in, first out at every node.** A node's incoming units, ordered as its
own supply first and then its in-arcs by increasing arc id (all units of one arc together), are
matched one to one with its outgoing units, ordered as its out-arcs by increasing arc id and then
the units its demand absorbs. A task's unit is followed through these matchings until it enters
a machine node (the task is placed on the first machine node on its way) or is absorbed by a
node with demand without having entered one (the task is unplaced). Parallel arcs are simply
different arcs in this order. Any such decomposition of an optimal flow is an optimal
assignment (a flow's cost does not depend on how it is split into paths); the rule only makes
the choice reproducible: the same graph and flow always give the same placements.

Cost: compiled passes over all arc ids (checking the flow, grouping the arcs that carry it),
then for each task one step per node on its path, a binary search among that node's arcs with
flow. Unlike Listing 1 nothing is copied per unit of flow, and a cycle that carries flow needs
no special case: the matchings are one to one, so a unit cannot go round forever.

`scheduling_deltas` compares placements with where tasks run now and yields Firmament's PLACE,
PREEMPT and MIGRATE decisions (NOOPs are left out). Both functions are pure: they read their
arguments and change nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from firmament_py.flow.deltas import DeltaKind, MachineT, SchedulingDelta, TaskT, delta_problem
from firmament_py.flow.graph import FlowGraph, NodeKind
from firmament_py.jit import kernel

__all__ = [
    "UNPLACED",
    "DeltaKind",
    "PlacementError",
    "SchedulingDelta",
    "delta_problem",
    "extract_placement_array",
    "extract_placements",
    "scheduling_deltas",
]
"""`DeltaKind`, `SchedulingDelta` and `delta_problem` live in `flow.deltas`; they are named here
too, where extraction makes them."""

Int64Array = npt.NDArray[np.int64]
IntArray = npt.NDArray[np.integer[Any]]
BoolArray = npt.NDArray[np.bool_]

UNPLACED = 0
"""The machine of an unplaced task in `extract_placement_array` (node ids start at 1)."""


class PlacementError(ValueError):
    """The flow cannot be read as placements: wrong shape, infeasible, or a task is malformed."""


# ---------------------------------------------------------------------- placements


def extract_placements(
    graph: FlowGraph,
    flow: npt.ArrayLike,
    task_nodes: Iterable[int] | IntArray | None = None,
    machine_nodes: Iterable[int] | IntArray | None = None,
) -> dict[int, int | None]:
    """Map each task node to the machine node its unit of flow reaches, or None if unplaced.

    `flow` is indexed by arc id (a `SolveResult.flow` for `graph`). `task_nodes` defaults to the
    graph's TASK nodes and `machine_nodes` to its LEAF nodes; the dict follows the order of
    `task_nodes`. Ties between tasks that share aggregators are broken by the module's rule
    (first in, first out at every node, by arc id). Raises `PlacementError` as
    `extract_placement_array` does.
    """
    tasks, machines = extract_placement_array(graph, flow, task_nodes, machine_nodes)
    return {
        t: (m if m != UNPLACED else None)
        for t, m in zip(tasks.tolist(), machines.tolist(), strict=True)
    }


def extract_placement_array(
    graph: FlowGraph,
    flow: npt.ArrayLike,
    task_nodes: Iterable[int] | IntArray | None = None,
    machine_nodes: Iterable[int] | IntArray | None = None,
) -> tuple[Int64Array, Int64Array]:
    """`extract_placements` as two aligned arrays: task nodes, and their machines or UNPLACED.

    For callers that go on in numpy (a graph manager mapping node ids back to tasks and
    machines in bulk): it skips building a dict of 10^5 entries.

    Raises `PlacementError` when `flow` does not have exactly one entry per arc id of the graph,
    carries flow on an arc id that is not in the graph, breaks an arc's bounds, is not conserved
    at some node (the first such node is named), or when a task node is not a live node, is
    listed twice, is also a machine node, or does not send exactly one unit of its own (its
    supply is not 1, or flow enters it).
    """
    a = graph.arrays()
    flow_arr = _flow_array(graph, flow)
    tasks = _node_array(
        graph, task_nodes, NodeKind.TASK, "task node", a.node_alive, a.node_kind, unique=True
    )
    machines = _node_array(
        graph, machine_nodes, NodeKind.LEAF, "machine node", a.node_alive, a.node_kind
    )
    is_machine = np.zeros(graph.node_id_bound, dtype=np.bool_)
    is_machine[machines] = True
    both = tasks[is_machine[tasks]]
    if len(both):
        raise PlacementError(f"node {int(both[0])} is listed both as a task and as a machine")
    code, where = _check_flow(
        a.node_alive, a.supply, a.arc_alive, a.low, a.cap, flow_arr, a.src, a.dst
    )
    _raise_flow_problem(int(code), int(where), graph, flow_arr)
    out = np.empty(len(tasks), dtype=np.int64)
    code, where = _follow_units(
        a.supply, a.arc_alive, a.src, a.dst, flow_arr, is_machine, tasks, out
    )
    _raise_task_problem(int(code), int(where), graph, flow_arr)
    return tasks, out


def _flow_array(graph: FlowGraph, flow: npt.ArrayLike) -> Int64Array:
    arr = np.asarray(flow)
    if arr.ndim != 1:
        raise PlacementError(f"the flow must be one-dimensional, got shape {arr.shape}")
    if len(arr) != graph.arc_id_bound:
        raise PlacementError(
            f"the flow has {len(arr)} entries, but the graph's arc ids need exactly "
            f"{graph.arc_id_bound} (one per arc id below its id bound)"
        )
    if len(arr) and not np.issubdtype(arr.dtype, np.integer):
        raise PlacementError(f"the flow must be integers, got dtype {arr.dtype}")
    return np.ascontiguousarray(arr, dtype=np.int64)


def _node_array(
    graph: FlowGraph,
    nodes: Iterable[int] | IntArray | None,
    default_kind: NodeKind,
    what: str,
    node_alive: BoolArray,
    node_kind: npt.NDArray[np.int8],
    *,
    unique: bool = False,
) -> Int64Array:
    """Node ids as a checked int64 array; all live nodes of `default_kind` when None."""
    if nodes is None:
        ids = np.flatnonzero(node_alive & (node_kind == int(default_kind)))
        return ids.astype(np.int64)
    raw = nodes if isinstance(nodes, np.ndarray) else np.asarray(list(nodes))
    if raw.ndim != 1 or (len(raw) and not np.issubdtype(raw.dtype, np.integer)):
        raise PlacementError(f"{what}s must be a sequence of integer node ids")
    ids = raw.astype(np.int64)
    bad = np.flatnonzero((ids <= 0) | (ids >= graph.node_id_bound))
    if len(bad) == 0:
        bad = np.flatnonzero(~node_alive[ids])
    if len(bad):
        raise PlacementError(f"{what} {int(ids[bad[0]])} is not a node of the graph")
    if unique and len(ids) > 1:
        order = np.argsort(ids, kind="stable")
        dup = np.flatnonzero(ids[order][1:] == ids[order][:-1])
        if len(dup):
            raise PlacementError(f"{what} {int(ids[order][dup[0]])} is listed twice")
    return ids


# Problems the kernels report, with the id they concern.
_OK = 0
_DEAD_ARC_FLOW = 1
_OUT_OF_BOUNDS = 2
_UNBALANCED = 3
_TASK_SUPPLY = 4
_TASK_INFLOW = 5
_NO_END = 6


def _raise_flow_problem(code: int, where: int, graph: FlowGraph, flow: Int64Array) -> None:
    if code == _OK:
        return
    if code == _DEAD_ARC_FLOW:
        raise PlacementError(
            f"the flow puts {flow[where]} on arc {where}, which is not in the graph"
        )
    if code == _OUT_OF_BOUNDS:
        raise PlacementError(
            f"arc {where} ({graph.arc_src(where)}->{graph.arc_dst(where)}) carries {flow[where]}, "
            f"outside its bounds [{graph.arc_lower(where)}, {graph.arc_capacity(where)}]"
        )
    if code == _UNBALANCED:
        inflow, outflow = _node_flows(graph, flow, where)
        raise PlacementError(
            f"the flow is not conserved at node {where}: supply {graph.supply(where)} plus "
            f"inflow {inflow} minus outflow {outflow} is {graph.supply(where) + inflow - outflow}"
            ", not 0"
        )
    raise AssertionError(f"unknown flow problem code {code}")  # pragma: no cover


def _raise_task_problem(code: int, where: int, graph: FlowGraph, flow: Int64Array) -> None:
    if code == _OK:
        return
    if code == _TASK_SUPPLY:
        raise PlacementError(
            f"task node {where} has supply {graph.supply(where)}: a task sends exactly one unit, "
            "so its flow cannot follow exactly one path to the sink"
        )
    if code == _TASK_INFLOW:
        inflow, _ = _node_flows(graph, flow, where)
        raise PlacementError(
            f"flow enters task node {where} ({inflow} units): a task only sends its own unit, so "
            "its flow cannot follow exactly one path to the sink"
        )
    if code == _NO_END:  # pragma: no cover - conservation makes every path end
        raise PlacementError(f"the unit of task node {where} never reaches a node with demand")
    raise AssertionError(f"unknown task problem code {code}")  # pragma: no cover


def _node_flows(graph: FlowGraph, flow: Int64Array, v: int) -> tuple[int, int]:
    inflow = sum(int(flow[k]) for k in graph.in_arcs(v))
    outflow = sum(int(flow[k]) for k in graph.out_arcs(v))
    return inflow, outflow


@kernel
def _check_flow(
    node_alive: BoolArray,
    supply: Int64Array,
    arc_alive: BoolArray,
    low: Int64Array,
    cap: Int64Array,
    flow: Int64Array,
    src: Int64Array,
    dst: Int64Array,
) -> tuple[int, int]:  # pragma: no cover - compiled
    """The first problem as (code, id): flow on a dead arc, outside bounds, or unbalanced."""
    balance = np.zeros(len(supply), dtype=np.int64)
    for k in range(len(flow)):
        f = flow[k]
        if not arc_alive[k]:
            if f != 0:
                return _DEAD_ARC_FLOW, k
            continue
        if f < low[k] or f > cap[k]:
            return _OUT_OF_BOUNDS, k
        balance[src[k]] -= f
        balance[dst[k]] += f
    for v in range(len(supply)):
        if node_alive[v] and supply[v] + balance[v] != 0:
            return _UNBALANCED, v
    return _OK, -1


@kernel
def _follow_units(
    supply: Int64Array,
    arc_alive: BoolArray,
    src: Int64Array,
    dst: Int64Array,
    flow: Int64Array,
    is_machine: BoolArray,
    tasks: Int64Array,
    out: Int64Array,
) -> tuple[int, int]:  # pragma: no cover - compiled
    """Follow each task's unit under the first-in-first-out rule; out[i] = machine or UNPLACED.

    Needs a bounded, conserved flow (`_check_flow`). Returns the first malformed task as
    (code, node), else (_OK, -1).
    """
    n = len(supply)
    # Out-arcs carrying flow, grouped by source in increasing arc id (a counting sort), with
    # the cumulative flow at the end of each: a node's outgoing units in matching order.
    out_ptr = np.zeros(n + 1, dtype=np.int64)
    carrying = 0
    for k in range(len(flow)):
        if arc_alive[k] and flow[k] > 0:
            out_ptr[src[k] + 1] += 1
            carrying += 1
    for v in range(n):
        out_ptr[v + 1] += out_ptr[v]
    fill = out_ptr[:n].copy()
    out_arc = np.empty(carrying, dtype=np.int64)
    # Where each arc's units start among its head's incoming units: after the head's own
    # supply and the units of its in-arcs with smaller ids.
    in_next = np.maximum(supply, 0)
    in_start = np.zeros(len(flow), dtype=np.int64)
    inflow = np.zeros(n, dtype=np.int64)
    for k in range(len(flow)):
        if arc_alive[k] and flow[k] > 0:
            u = src[k]
            out_arc[fill[u]] = k
            fill[u] += 1
            v = dst[k]
            in_start[k] = in_next[v]
            in_next[v] += flow[k]
            inflow[v] += flow[k]
    out_end = np.empty(carrying, dtype=np.int64)
    units = 0
    for v in range(n):
        total = 0
        for j in range(out_ptr[v], out_ptr[v + 1]):
            total += flow[out_arc[j]]
            out_end[j] = total
        units += total
    for i in range(len(tasks)):
        t = tasks[i]
        if supply[t] != 1:
            return _TASK_SUPPLY, t
        if inflow[t] != 0:
            return _TASK_INFLOW, t
    for i in range(len(tasks)):
        v = tasks[i]
        unit = 0  # the unit's index among v's incoming (and so outgoing) units
        placed = UNPLACED
        # Each (arc, unit) pair has at most one predecessor, so a path visits each at most once
        # (even around a cycle that carries flow) and takes at most `units` steps; the bound
        # only guards against inputs that skipped `_check_flow`.
        steps = 0
        while True:
            if is_machine[v]:
                placed = v
                break
            lo = out_ptr[v]
            hi = out_ptr[v + 1]
            if lo == hi or unit >= out_end[hi - 1]:
                break  # absorbed by v's demand
            while lo < hi:  # the first out-arc whose units end after `unit`
                mid = (lo + hi) // 2
                if out_end[mid] > unit:
                    hi = mid
                else:
                    lo = mid + 1
            k = out_arc[lo]
            unit = in_start[k] + unit - (out_end[lo] - flow[k])
            v = dst[k]
            steps += 1
            if steps > units:
                return _NO_END, tasks[i]
        out[i] = placed
    return _OK, -1


# ---------------------------------------------------------------------- scheduling deltas


def scheduling_deltas(
    placements: Mapping[TaskT, MachineT | None],
    current: Mapping[TaskT, MachineT | None],
) -> list[SchedulingDelta[TaskT, MachineT]]:
    """The decisions that turn `current` into `placements`, in the order of `placements`.

    `placements` says where every task in the flow graph should be (None: unscheduled);
    `current` where tasks run now (None or absent: waiting). A task that keeps its machine or
    keeps waiting yields nothing. A task that runs now but is missing from `placements` raises
    `PlacementError`: the graph should hold every running task, so silence about one is a bug
    upstream, not a decision.
    """
    missing = [t for t, m in current.items() if m is not None and t not in placements]
    if missing:
        raise PlacementError(
            f"task {missing[0]!r} runs on {current[missing[0]]!r} but the placements do not "
            f"mention it ({len(missing)} such task(s))"
        )
    deltas: list[SchedulingDelta[TaskT, MachineT]] = []
    for task, new in placements.items():
        old = current.get(task)
        if old == new:
            continue
        if old is None:
            kind = DeltaKind.PLACE
        elif new is None:
            kind = DeltaKind.PREEMPT
        else:
            kind = DeltaKind.MIGRATE
        deltas.append(_consistent_delta(kind, task, old, new))
    return deltas


def _consistent_delta(
    kind: DeltaKind, task: TaskT, source: MachineT | None, target: MachineT | None
) -> SchedulingDelta[TaskT, MachineT]:
    """A `SchedulingDelta` whose kind was derived from its machines, so consistent already:
    made without the check (a first round makes 10^5 of them)."""
    delta: SchedulingDelta[TaskT, MachineT] = object.__new__(SchedulingDelta)
    object.__setattr__(delta, "kind", kind)
    object.__setattr__(delta, "task", task)
    object.__setattr__(delta, "from_machine", source)
    object.__setattr__(delta, "to_machine", target)
    return delta
