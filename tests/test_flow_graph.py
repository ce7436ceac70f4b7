"""Tests of `FlowGraph` (firmament_py/flow/graph.py) and `ChangeBatch` (flow/changes.py).

Covered:

* ids: nodes from 1, arcs from 0, removed ids reused (free lists), explicit ids, `add_nodes` /
  `add_arcs` taking fresh ids, skipped explicit ids becoming free;
* structure: adding and removing nodes and arcs, incident arcs removed with their node, degrees,
  `out_arcs` / `in_arcs` / `find_arcs` with parallel arcs, queries, read-only `arrays()`;
* bad input: every mutation rejects unknown nodes and arcs, self-loops, negative or too large
  capacities, lower bounds outside [0, capacity], too large costs and supplies, duplicate and
  invalid explicit ids, non-integers; the error names what is wrong and the graph (including its
  change log and free lists) is exactly as before the call;
* the change log: merged changes to one arc, changes back to the old value vanish, add-then-
  remove cancels, changes to a node removed later in the round are dropped, id reuse within a
  round, row order, `discard_changes`, `snapshot` / `copy` / `apply`;
* a hypothesis property over random mutation sequences: the graph matches a plain Python model,
  every `take_changes()` batch is exactly the net change (checked against the model's record of
  entity generations) and replaying the batches on a second graph with `apply` reproduces the
  graph, ids included.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from firmament_py.flow import batch_rules
from firmament_py.flow.changes import (
    ARC_CAP,
    ARC_COST,
    ARC_DST,
    ARC_OLD_COST,
    ARC_SRC,
    COL_ID,
    COL_OP,
    NODE_SUPPLY,
    ROW_WIDTH,
    ChangeBatch,
    ChangeOp,
)
from firmament_py.flow.graph import (
    MAX_CAPACITY,
    MAX_COST,
    FlowGraph,
    FlowGraphError,
    NodeKind,
    snapshot_problem,
)

from .conftest import graph_state


def ops_of(batch: ChangeBatch) -> list[tuple[ChangeOp, int]]:
    return [(ChangeOp(int(r[COL_OP])), int(r[COL_ID])) for r in batch.rows]


def small_graph() -> FlowGraph:
    """Nodes 1..4 (supplies 3, 0, 0, -3), arcs 0: 1->2, 1: 2->4, 2: 1->3, 3: 3->4."""
    g = FlowGraph()
    g.add_node(3)
    g.add_node(0)
    g.add_node(0, NodeKind.LEAF)
    g.add_node(-3, NodeKind.SINK)
    g.add_arc(1, 2, capacity=5, cost=1)
    g.add_arc(2, 4, capacity=5, cost=2, lower=1)
    g.add_arc(1, 3, capacity=2, cost=-1)
    g.add_arc(3, 4, capacity=2, cost=0, kind=7)
    g.discard_changes()
    return g


# ====================================================================== ids and structure


def test_ids_start_at_one_for_nodes_and_zero_for_arcs() -> None:
    g = FlowGraph()
    assert g.add_node() == 1
    assert g.add_node() == 2
    assert g.add_arc(1, 2, capacity=1, cost=0) == 0
    assert g.add_arc(2, 1, capacity=1, cost=0) == 1
    assert g.num_nodes == 2
    assert g.num_arcs == 2
    assert g.node_id_bound == 3
    assert g.arc_id_bound == 2
    assert not g.has_node(0)
    assert g.node_ids().tolist() == [1, 2]
    assert g.arc_ids().tolist() == [0, 1]


def test_removed_ids_are_reused() -> None:
    g = FlowGraph()
    for _ in range(5):
        g.add_node()
    arcs = [g.add_arc(1, v, capacity=1, cost=0) for v in (2, 3, 4, 5)]
    assert arcs == [0, 1, 2, 3]
    g.remove_node(3)  # takes arc 1 with it
    g.remove_arc(2)
    assert not g.has_node(3)
    assert not g.has_arc(1)
    assert not g.has_arc(2)
    assert g.num_nodes == 4
    assert g.num_arcs == 2
    # Freed ids come back (most recently freed first) before the bounds grow.
    assert g.add_node() == 3
    assert g.add_node() == 6
    assert {g.add_arc(1, 3, capacity=1, cost=0), g.add_arc(1, 6, capacity=1, cost=0)} == {1, 2}
    assert g.add_arc(2, 3, capacity=1, cost=0) == 4
    assert g.node_id_bound == 7
    assert g.arc_id_bound == 5


def test_bulk_additions_take_fresh_ids_above_every_used_one() -> None:
    g = FlowGraph()
    g.add_nodes(3)
    g.remove_node(2)
    ids = g.add_nodes(2, supply=[4, -4], kind=NodeKind.TASK)
    assert ids.tolist() == [4, 5]
    assert [g.supply(v) for v in ids] == [4, -4]
    assert all(g.node_kind(v) is NodeKind.TASK for v in ids)
    arc = g.add_arc(1, 3, capacity=1, cost=0)
    g.remove_arc(arc)
    new = g.add_arcs([1, 4], [3, 5], capacity=[1, 2], cost=[3, -3], lower=[0, 1], kind=2)
    assert new.tolist() == [1, 2]
    assert [g.arc_capacity(k) for k in new] == [1, 2]
    assert [g.arc_cost(k) for k in new] == [3, -3]
    assert [g.arc_lower(k) for k in new] == [0, 1]
    assert [g.arc_kind(k) for k in new] == [2, 2]
    # The freed ids are still handed out by the single-item calls.
    assert g.add_node() == 2
    assert g.add_arc(3, 1, capacity=1, cost=0) == 0
    assert g.add_nodes(0).tolist() == []
    assert g.add_arcs([], [], capacity=1, cost=0).tolist() == []


def test_explicit_ids_and_skipped_ids_become_free() -> None:
    g = FlowGraph()
    assert g.add_node(node=5) == 5
    assert g.node_id_bound == 6
    assert g.num_nodes == 1
    assert sorted(g.add_node() for _ in range(4)) == [1, 2, 3, 4]
    assert g.add_node() == 6
    assert g.add_arc(1, 2, capacity=1, cost=0, arc=3) == 3
    assert sorted(g.add_arc(1, 2, capacity=1, cost=0) for _ in range(3)) == [0, 1, 2]
    assert g.add_arc(1, 2, capacity=1, cost=0) == 4
    # Claiming a free id explicitly takes it off the free list.
    g.remove_node(6)
    g.remove_node(2)  # takes every arc (all 1->2) with it
    assert g.num_arcs == 0
    assert g.add_node(node=6) == 6
    assert g.add_node() == 2
    assert g.add_node() == 7


def test_remove_node_removes_incident_arcs_and_fixes_degrees() -> None:
    g = small_graph()
    assert g.out_degree(1) == 2
    assert g.in_degree(4) == 2
    g.remove_node(3)
    assert g.num_nodes == 3
    assert g.num_arcs == 2
    assert sorted(g.out_arcs(1)) == [0]
    assert g.in_arcs(4) == [1]
    assert g.out_degree(1) == 1
    assert g.in_degree(4) == 1
    assert g.arc_ids().tolist() == [0, 1]
    for query in (g.supply, g.node_kind, g.out_arcs, g.in_arcs, g.out_degree):
        with pytest.raises(FlowGraphError, match="node 3 does not exist"):
            query(3)
    g.remove_node(2)
    assert g.num_arcs == 0
    assert g.out_arcs(1) == []
    assert g.in_arcs(4) == []


def test_parallel_arcs_and_queries() -> None:
    g = small_graph()
    extra = g.add_arc(1, 2, capacity=3, cost=4)
    assert g.find_arcs(1, 2) == [0, extra]
    assert g.find_arcs(2, 1) == []
    assert sorted(g.out_arcs(1)) == [0, 2, extra]
    assert g.out_arcs(1)[0] == extra  # most recently added first
    assert (g.arc_src(extra), g.arc_dst(extra)) == (1, 2)
    assert g.node_kind(3) is NodeKind.LEAF
    assert g.node_kind(4) is NodeKind.SINK
    assert g.arc_kind(3) == 7
    assert g.total_supply() == 0
    assert list(g.iter_arcs()) == [
        (0, 1, 2, 0, 5, 1),
        (1, 2, 4, 1, 5, 2),
        (2, 1, 3, 0, 2, -1),
        (3, 3, 4, 0, 2, 0),
        (extra, 1, 2, 0, 3, 4),
    ]
    g.remove_arc(0)
    assert g.find_arcs(1, 2) == [extra]
    # find_arcs scans whichever end has the smaller degree: both ways must agree.
    for v in range(5, 12):
        g.add_node()
        g.add_arc(v, 2, capacity=1, cost=0)
    assert g.find_arcs(1, 2) == [extra]
    for _ in range(3):
        g.add_arc(1, 5, capacity=1, cost=0)
    assert len(g.find_arcs(1, 5)) == 3


def test_arrays_are_read_only_views_over_the_id_range() -> None:
    g = small_graph()
    a = g.arrays()
    assert len(a.node_alive) == g.node_id_bound
    assert len(a.src) == g.arc_id_bound
    assert not a.node_alive[0]
    assert a.supply[1:].tolist() == [3, 0, 0, -3]
    assert a.cost.tolist() == [1, 2, -1, 0]
    with pytest.raises(ValueError):
        a.cost[0] = 5
    with pytest.raises(ValueError):
        a.supply[1] = 5
    assert g.arc_cost(0) == 1


def test_growth_keeps_contents() -> None:
    g = FlowGraph(node_hint=1, arc_hint=1)
    n = 300
    for i in range(n):
        g.add_node(i % 3 - 1)
    for v in range(2, n + 1):
        g.add_arc(v - 1, v, capacity=v, cost=-v)
    assert g.num_nodes == n
    assert g.num_arcs == n - 1
    assert [g.arc_capacity(k) for k in range(0, n - 1, 37)] == list(range(2, n + 1, 37))
    assert g.out_arcs(n - 1) == [n - 2]
    assert g.supply(n) == (n - 1) % 3 - 1


def test_set_supply_and_change_arc_values() -> None:
    g = small_graph()
    g.set_supply(1, 7)
    assert g.supply(1) == 7
    assert g.total_supply() == 4
    g.change_arc(1, cost=-9)
    assert (g.arc_lower(1), g.arc_capacity(1), g.arc_cost(1)) == (1, 5, -9)
    g.change_arc(1, lower=0, capacity=0)
    assert (g.arc_lower(1), g.arc_capacity(1)) == (0, 0)
    g.change_arc(1, kind=3)
    assert g.arc_kind(1) == 3
    g.change_arc(1, capacity=MAX_CAPACITY, lower=MAX_CAPACITY, cost=-MAX_COST)
    assert g.arc_capacity(1) == MAX_CAPACITY
    assert g.arc_cost(1) == -MAX_COST


# ====================================================================== bad input


def _fingerprint(g: FlowGraph) -> tuple[object, ...]:
    return (
        graph_state(g),
        g.pending_changes,
        g.node_id_bound,
        g.arc_id_bound,
        g.arrays().arc_alive.tolist(),
        g.arrays().node_alive.tolist(),
    )


def _graph_with_history() -> FlowGraph:
    """small_graph plus pending changes and free ids, so a failed call has things to spoil."""
    g = small_graph()
    g.add_node(2)
    g.remove_node(5)
    g.remove_arc(2)
    g.change_arc(0, cost=11)
    g.set_supply(2, -2)
    return g


BAD_CALLS: list[tuple[str, Callable[[FlowGraph], object], str]] = [
    ("arc to unknown node", lambda g: g.add_arc(1, 99, capacity=1, cost=0), "node 99 does not"),
    ("arc from unknown node", lambda g: g.add_arc(99, 1, capacity=1, cost=0), "node 99 does not"),
    ("arc from freed node", lambda g: g.add_arc(5, 1, capacity=1, cost=0), "node 5 does not"),
    ("arc from node 0", lambda g: g.add_arc(0, 1, capacity=1, cost=0), "node 0 does not"),
    ("self-loop", lambda g: g.add_arc(2, 2, capacity=1, cost=0), "self-loop on node 2"),
    ("negative capacity", lambda g: g.add_arc(1, 2, capacity=-1, cost=0), "negative capacity -1"),
    (
        "lower above capacity",
        lambda g: g.add_arc(1, 2, capacity=3, cost=0, lower=5),
        r"lower bound 5 is not within \[0, capacity 3\]",
    ),
    (
        "negative lower",
        lambda g: g.add_arc(1, 2, capacity=3, cost=0, lower=-1),
        "lower bound -1",
    ),
    (
        "capacity too large",
        lambda g: g.add_arc(1, 2, capacity=MAX_CAPACITY + 1, cost=0),
        f"capacity {MAX_CAPACITY + 1} exceeds",
    ),
    (
        "cost too large",
        lambda g: g.add_arc(1, 2, capacity=1, cost=-MAX_COST - 1),
        f"cost {-MAX_COST - 1} exceeds",
    ),
    ("float cost", lambda g: g.add_arc(1, 2, capacity=1, cost=1.5), "cost must be an integer"),
    ("bool capacity", lambda g: g.add_arc(1, 2, capacity=True, cost=0), "bool"),
    ("string node", lambda g: g.add_arc("1", 2, capacity=1, cost=0), "must be an integer"),
    (
        "duplicate explicit arc id",
        lambda g: g.add_arc(1, 2, capacity=1, cost=0, arc=1),
        "arc 1 already exists",
    ),
    (
        "negative explicit arc id",
        lambda g: g.add_arc(1, 2, capacity=1, cost=0, arc=-1),
        "arc ids start at 0",
    ),
    ("duplicate explicit node id", lambda g: g.add_node(node=2), "node 2 already exists"),
    ("explicit node id 0", lambda g: g.add_node(node=0), "node ids start at 1"),
    ("supply too large", lambda g: g.add_node(MAX_CAPACITY + 1), "supply"),
    ("float supply", lambda g: g.add_node(0.5), "supply must be an integer"),
    ("unknown node kind", lambda g: g.add_node(0, 9), "9"),
    ("negative node count", lambda g: g.add_nodes(-1), "non-negative"),
    ("bad kinds in bulk", lambda g: g.add_nodes(2, kind=[1, 7]), "node kinds"),
    ("bulk supply too large", lambda g: g.add_nodes(2, supply=-(2**41)), "supply"),
    (
        "bulk lengths differ",
        lambda g: g.add_arcs([1, 2], [2, 3, 4], capacity=1, cost=0),
        "lengths do not match",
    ),
    (
        "bulk unknown destination",
        lambda g: g.add_arcs([1, 2], [2, 99], capacity=1, cost=0),
        "arc #1: destination node 99 does not exist",
    ),
    (
        "bulk freed source",
        lambda g: g.add_arcs([5], [2], capacity=1, cost=0),
        "arc #0: source node 5 does not exist",
    ),
    (
        "bulk self-loop",
        lambda g: g.add_arcs([1, 3], [2, 3], capacity=1, cost=0),
        "arc #1: self-loop on node 3",
    ),
    (
        "bulk lower above capacity",
        lambda g: g.add_arcs([1, 1], [2, 3], capacity=[4, 2], cost=0, lower=[0, 3]),
        r"arc #1 1->3: lower bound 3 is not within \[0, capacity 2\]",
    ),
    (
        "bulk cost too large",
        lambda g: g.add_arcs([1], [2], capacity=1, cost=MAX_COST + 1),
        "cost",
    ),
    ("remove unknown node", lambda g: g.remove_node(99), "node 99 does not exist"),
    ("remove freed node", lambda g: g.remove_node(5), "node 5 does not exist"),
    ("remove node 0", lambda g: g.remove_node(0), "node 0 does not exist"),
    ("remove unknown arc", lambda g: g.remove_arc(99), "arc 99 does not exist"),
    ("remove removed arc", lambda g: g.remove_arc(2), "arc 2 does not exist"),
    ("change unknown arc", lambda g: g.change_arc(99, cost=1), "arc 99 does not exist"),
    ("change removed arc", lambda g: g.change_arc(2, cost=1), "arc 2 does not exist"),
    ("change to negative cap", lambda g: g.change_arc(0, capacity=-2), "negative capacity -2"),
    (
        "change lower above capacity",
        lambda g: g.change_arc(0, lower=6),
        r"lower bound 6 is not within \[0, capacity 5\]",
    ),
    (
        "change capacity below lower",
        lambda g: g.change_arc(1, capacity=0, cost=3),
        r"lower bound 1 is not within \[0, capacity 0\]",
    ),
    ("change cost too large", lambda g: g.change_arc(0, cost=MAX_COST + 1), "cost"),
    ("change kind to a string", lambda g: g.change_arc(0, kind="x"), "kind must be an integer"),
    ("supply of unknown node", lambda g: g.set_supply(99, 1), "node 99 does not exist"),
    ("supply too large", lambda g: g.set_supply(1, MAX_CAPACITY + 1), "supply"),
]


@pytest.mark.parametrize(
    ("call", "message"), [c[1:] for c in BAD_CALLS], ids=[c[0] for c in BAD_CALLS]
)
def test_bad_input_is_rejected_and_leaves_the_graph_unchanged(
    call: Callable[[FlowGraph], object], message: str
) -> None:
    g = _graph_with_history()
    twin = _graph_with_history()
    before = _fingerprint(g)
    with pytest.raises(ValueError, match=message) as info:
        call(g)
    if message != "9":  # NodeKind(9) raises a plain ValueError ("9 is not a valid NodeKind")
        assert isinstance(info.value, FlowGraphError)
    assert _fingerprint(g) == before
    # The change log and the free lists are untouched too.
    assert np.array_equal(g.take_changes().rows, twin.take_changes().rows)
    assert g.add_node() == twin.add_node()
    assert g.add_arc(1, 2, capacity=1, cost=0) == twin.add_arc(1, 2, capacity=1, cost=0)
    assert graph_state(g) == graph_state(twin)


def test_bulk_supply_shape_mismatch_is_rejected() -> None:
    g = _graph_with_history()
    before = _fingerprint(g)
    with pytest.raises(ValueError):
        g.add_nodes(2, supply=[1, 2, 3])
    assert _fingerprint(g) == before


@pytest.mark.parametrize("kind", ["x", 300])
def test_add_arc_with_bad_kind_leaves_the_graph_unchanged(kind: object) -> None:
    g = _graph_with_history()
    before = _fingerprint(g)
    with pytest.raises(FlowGraphError, match="kind"):
        g.add_arc(1, 2, capacity=1, cost=0, kind=kind)  # type: ignore[arg-type]
    assert _fingerprint(g) == before


@pytest.mark.parametrize("kind", ["x", 300, -1, 2.5])
def test_add_node_with_bad_kind_leaves_the_graph_unchanged(kind: object) -> None:
    g = _graph_with_history()
    before = _fingerprint(g)
    with pytest.raises(FlowGraphError, match="node kind"):
        g.add_node(1, kind=kind)  # type: ignore[arg-type]
    assert _fingerprint(g) == before


def test_change_arc_with_out_of_range_kind_leaves_the_arc_unchanged() -> None:
    g = _graph_with_history()
    before = _fingerprint(g)
    with pytest.raises(FlowGraphError, match="kind"):
        g.change_arc(0, cost=5, kind=300)
    assert _fingerprint(g) == before


def test_add_arcs_rejects_out_of_range_kind() -> None:
    g = _graph_with_history()
    with pytest.raises(FlowGraphError, match="kind"):
        g.add_arcs([1], [2], capacity=1, cost=0, kind=300)


# ====================================================================== the change log


def test_first_batch_lists_everything_added() -> None:
    g = FlowGraph()
    g.add_nodes(3, supply=[2, 0, -2])
    g.add_arc(1, 2, capacity=4, cost=3, lower=1, kind=5)
    g.add_arc(2, 3, capacity=4, cost=-1)
    assert g.pending_changes == 5
    batch = g.take_changes()
    assert not batch.reset
    assert batch.raw_changes == 5
    assert ops_of(batch) == [
        (ChangeOp.ADD_NODE, 1),
        (ChangeOp.ADD_NODE, 2),
        (ChangeOp.ADD_NODE, 3),
        (ChangeOp.ADD_ARC, 0),
        (ChangeOp.ADD_ARC, 1),
    ]
    assert batch.rows[:3, NODE_SUPPLY].tolist() == [2, 0, -2]
    assert batch.rows[3].tolist() == [ChangeOp.ADD_ARC, 0, 1, 2, 1, 4, 3, 5, 3]
    assert batch.counts == {"ADD_NODE": 3, "ADD_ARC": 2}
    assert g.pending_changes == 0
    assert len(g.take_changes()) == 0


def test_changes_to_one_arc_are_merged() -> None:
    g = small_graph()
    g.change_arc(0, cost=4)
    g.change_arc(0, capacity=9)
    g.change_arc(0, cost=6)
    assert g.pending_changes == 3
    batch = g.take_changes()
    assert ops_of(batch) == [(ChangeOp.CHANGE_ARC, 0)]
    row = batch.rows[0]
    assert (row[ARC_SRC], row[ARC_DST], row[ARC_CAP], row[ARC_COST]) == (1, 2, 9, 6)
    assert row[ARC_OLD_COST] == 1
    assert batch.raw_changes == 3


def test_changes_back_to_the_old_values_vanish() -> None:
    g = small_graph()
    g.change_arc(0, cost=4, capacity=1)
    g.change_arc(0, cost=1, capacity=5)
    g.set_supply(2, 5)
    g.set_supply(2, 0)
    g.change_arc(3, cost=0)  # no-op: not even recorded
    assert len(g.take_changes()) == 0


def test_add_then_remove_cancels() -> None:
    g = small_graph()
    k = g.add_arc(2, 3, capacity=1, cost=0)
    g.change_arc(k, cost=5)
    g.remove_arc(k)
    v = g.add_node(5)
    g.add_arc(v, 1, capacity=1, cost=0)
    g.add_arc(2, v, capacity=1, cost=0)
    g.set_supply(v, 1)
    g.remove_node(v)
    vs = g.add_nodes(2)
    g.add_arcs(vs, [1, 2], capacity=1, cost=0)
    g.remove_node(int(vs[0]))
    g.remove_node(int(vs[1]))
    assert g.pending_changes > 0
    assert len(g.take_changes()) == 0
    assert graph_state(g) == graph_state(small_graph())


def test_changes_to_a_node_removed_later_are_dropped() -> None:
    g = small_graph()
    g.set_supply(3, 4)
    g.change_arc(2, cost=7)  # 1->3
    g.change_arc(3, capacity=1)  # 3->4
    g.remove_arc(3)
    g.add_arc(3, 2, capacity=1, cost=0)
    g.remove_node(3)
    g.change_arc(0, cost=2)  # survives
    batch = g.take_changes()
    # The solver removes a node's arcs with it: no arc rows for 3's arcs, no supply row.
    assert ops_of(batch) == [(ChangeOp.REMOVE_NODE, 3), (ChangeOp.CHANGE_ARC, 0)]


def test_node_removed_and_readded_in_one_round() -> None:
    g = small_graph()
    g.remove_node(3)
    assert g.add_node(2, NodeKind.TASK, node=3) == 3
    g.add_arc(3, 1, capacity=2, cost=5)
    batch = g.take_changes()
    ops = ops_of(batch)
    assert ops[:2] == [(ChangeOp.REMOVE_NODE, 3), (ChangeOp.ADD_NODE, 3)]
    assert ops[2][0] is ChangeOp.ADD_ARC
    assert batch.rows[1, NODE_SUPPLY] == 2
    # The old node's arcs (2: 1->3, 3: 3->4) are not listed: the node's removal covers them.
    assert {i for op, i in ops if op is ChangeOp.REMOVE_ARC} == set()


def test_arc_id_reused_with_other_ends_is_remove_then_add() -> None:
    g = small_graph()
    g.remove_arc(1)
    assert g.add_arc(3, 2, capacity=4, cost=8) == 1
    batch = g.take_changes()
    assert ops_of(batch) == [(ChangeOp.REMOVE_ARC, 1), (ChangeOp.ADD_ARC, 1)]
    removed, added = batch.rows
    assert (removed[ARC_SRC], removed[ARC_DST]) == (2, 4)
    assert (added[ARC_SRC], added[ARC_DST], added[ARC_COST]) == (3, 2, 8)
    # Same ends and new values: merged into one change.
    g.remove_arc(1)
    assert g.add_arc(3, 2, capacity=1, cost=9) == 1
    assert ops_of(g.take_changes()) == [(ChangeOp.CHANGE_ARC, 1)]


def test_rows_are_ordered_so_that_replay_is_valid() -> None:
    g = small_graph()
    c = g.copy()
    g.change_arc(2, cost=3)  # 1->3
    g.add_arc(2, 3, capacity=1, cost=0)
    g.set_supply(1, 2)
    v = g.add_node(1)
    g.add_arc(v, 4, capacity=1, cost=0)
    g.remove_arc(3)
    g.remove_node(2)
    batch = g.take_changes()
    ops = batch.rows[:, COL_OP].tolist()
    assert ops == sorted(ops)
    assert set(ops) == {int(op) for op in ChangeOp}
    c.apply(batch)
    assert graph_state(c) == graph_state(g)


def test_discard_changes_and_pending_count() -> None:
    g = small_graph()
    assert g.pending_changes == 0
    g.change_arc(0, cost=2)
    g.add_node()
    assert g.pending_changes == 2
    g.discard_changes()
    assert g.pending_changes == 0
    assert len(g.take_changes()) == 0
    g.remove_node(5)
    assert ops_of(g.take_changes()) == [(ChangeOp.REMOVE_NODE, 5)]


def test_snapshot_copy_and_apply() -> None:
    g = _graph_with_history()
    snap = g.snapshot()
    assert snap.reset
    assert len(snap) == g.num_nodes + g.num_arcs
    assert g.pending_changes > 0  # a snapshot leaves the change log alone
    other = FlowGraph()
    other.add_nodes(7)  # a reset batch drops everything first
    other.apply(snap)
    assert graph_state(other) == graph_state(g)
    c = g.copy()
    assert graph_state(c) == graph_state(g)
    assert c.pending_changes == 0
    assert len(c.take_changes()) == 0
    c.change_arc(0, cost=-5)
    c.remove_node(1)
    assert g.arc_cost(0) == 11
    assert g.has_node(1)


def test_apply_rejects_a_change_to_an_arc_with_other_ends() -> None:
    g = small_graph()
    c = g.copy()
    g.change_arc(0, cost=2)
    batch = g.take_changes()
    rows = batch.rows.copy()
    rows[0, ARC_DST] = 3
    with pytest.raises(FlowGraphError, match="arc 0 joins other nodes"):
        c.apply(ChangeBatch(rows))


def test_change_batch_validation_and_helpers() -> None:
    with pytest.raises(ValueError, match="shape"):
        ChangeBatch(np.zeros((2, ROW_WIDTH - 1), dtype=np.int64))
    with pytest.raises(ValueError, match="int64"):
        ChangeBatch(np.zeros((2, ROW_WIDTH), dtype=np.int32))
    empty = ChangeBatch.empty()
    assert len(empty) == 0
    assert empty.describe() == "no changes"
    assert empty.max_cost_change() == 0
    g = small_graph()
    g.add_arc(2, 3, capacity=1, cost=-7)
    g.change_arc(0, cost=11)  # 1 -> 11
    batch = g.take_changes()
    assert batch.max_cost_change() == 10
    assert batch.describe() == "add_arc=1, change_arc=1"
    assert g.snapshot().describe().startswith("reset ")


# ====================================================================== random mutation sequences


@dataclass
class Model:
    """What the graph should hold, with a generation per entity to tell re-creations apart."""

    nodes: dict[int, tuple[int, int, int]] = field(default_factory=dict)  # id -> gen, supply, kind
    arcs: dict[int, tuple[int, tuple[int, ...]]] = field(default_factory=dict)  # id -> gen, values
    gen: int = 0

    def fresh(self) -> int:
        self.gen += 1
        return self.gen

    def remove_node(self, v: int) -> None:
        del self.nodes[v]
        for k in [k for k, (_g, vals) in self.arcs.items() if v in vals[:2]]:
            del self.arcs[k]


def expected_ops(before: Model, after: Model) -> set[tuple[ChangeOp, int]]:
    """The net change between two model states, as a set of (op, id)."""
    ops: set[tuple[ChangeOp, int]] = set()
    killed = set()
    before_nodes = before.nodes
    for v, (gen, supply, _kind) in before_nodes.items():
        now = after.nodes.get(v)
        if now is None or now[0] != gen:
            ops.add((ChangeOp.REMOVE_NODE, v))
            killed.add(v)
        elif now[1] != supply:
            ops.add((ChangeOp.SET_SUPPLY, v))
    for v, (gen, _s, _k) in after.nodes.items():
        was = before_nodes.get(v)
        if was is None or was[0] != gen:
            ops.add((ChangeOp.ADD_NODE, v))
    # An arc is the same arc while it keeps its id and its ends (its values may change, and a
    # re-added arc with the same id and ends is a change); a killed end takes it away.
    was_on = {
        k: vals
        for k, (_gen, vals) in before.arcs.items()
        if vals[0] not in killed and vals[1] not in killed
    }
    for k, vals in was_on.items():
        now_arc = after.arcs.get(k)
        if now_arc is None or now_arc[1][:2] != vals[:2]:
            ops.add((ChangeOp.REMOVE_ARC, k))
        elif now_arc[1] != vals:
            ops.add((ChangeOp.CHANGE_ARC, k))
    for k, (_gen, vals) in after.arcs.items():
        if k not in was_on or was_on[k][:2] != vals[:2]:
            ops.add((ChangeOp.ADD_ARC, k))
    return ops


def model_state(m: Model) -> dict[str, object]:
    return {
        "nodes": {v: (s, k) for v, (_g, s, k) in sorted(m.nodes.items())},
        "arcs": {k: vals for k, (_g, vals) in sorted(m.arcs.items())},
        "num_nodes": len(m.nodes),
        "num_arcs": len(m.arcs),
    }


def check_structure(g: FlowGraph, m: Model) -> None:
    assert graph_state(g) == model_state(m)
    for v in m.nodes:
        outs = sorted(k for k, (_g, vals) in m.arcs.items() if vals[0] == v)
        ins = sorted(k for k, (_g, vals) in m.arcs.items() if vals[1] == v)
        assert sorted(g.out_arcs(v)) == outs
        assert sorted(g.in_arcs(v)) == ins
        assert g.out_degree(v) == len(outs)
        assert g.in_degree(v) == len(ins)


def copy_model(m: Model) -> Model:
    return Model(dict(m.nodes), dict(m.arcs), m.gen)


# Operations with weights: arcs change more often than nodes, as in a scheduler.
OPS = (
    ["add_node", "add_node_explicit", "add_nodes", "remove_node", "set_supply", "add_arcs"]
    + ["trusted_add_nodes", "trusted_remove_nodes", "trusted_add_arcs", "trusted_remove_arcs"]
    + ["trusted_change_arcs", "trusted_find_out_arcs"]
    + ["add_arc", "add_arc_explicit", "remove_arc", "take_changes"] * 2
    + ["change_arc"] * 4
)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_mutations_replay_exactly(data: st.DataObject) -> None:
    g = FlowGraph(node_hint=1, arc_hint=1)
    mirror = FlowGraph()
    m = Model()
    start = copy_model(m)
    values = st.tuples(
        st.integers(0, 3),  # lower
        st.integers(0, 3),  # extra capacity
        st.integers(-5, 5),  # cost
        st.integers(0, 3),  # kind
    )

    def take_and_check() -> None:
        nonlocal start
        batch = g.take_changes()
        ops = ops_of(batch)
        assert len(set(ops)) == len(ops), ops
        assert batch.rows[:, COL_OP].tolist() == sorted(batch.rows[:, COL_OP].tolist())
        assert set(ops) == expected_ops(start, m)
        mirror.apply(batch)
        assert graph_state(mirror) == graph_state(g)
        start = copy_model(m)

    # A starting graph, handed over as the first batch, so later rounds change existing things.
    count = data.draw(st.integers(0, 6), label="initial nodes")
    for v in g.add_nodes(count, supply=1).tolist():
        m.nodes[v] = (m.fresh(), 1, 0)
    if count >= 2:
        pairs = st.lists(st.integers(1, count), min_size=2, max_size=2, unique=True)
        for u, v in data.draw(st.lists(pairs, max_size=12), label="initial arcs"):
            k = g.add_arc(u, v, capacity=2, cost=1)
            m.arcs[k] = (m.fresh(), (u, v, 0, 2, 1, 0))
    take_and_check()
    steps = data.draw(st.lists(st.sampled_from(OPS), min_size=1, max_size=50), label="ops")
    for op in steps:
        live = sorted(m.nodes)
        live_arcs = sorted(m.arcs)
        if op == "add_node":
            supply = data.draw(st.integers(-4, 4))
            v = g.add_node(supply, NodeKind.TASK)
            assert v not in m.nodes
            m.nodes[v] = (m.fresh(), supply, int(NodeKind.TASK))
        elif op == "add_node_explicit":
            free = [v for v in range(1, g.node_id_bound + 3) if v not in m.nodes]
            v = data.draw(st.sampled_from(free))
            assert g.add_node(1, node=v) == v
            m.nodes[v] = (m.fresh(), 1, 0)
        elif op == "add_nodes":
            count = data.draw(st.integers(0, 3))
            ids = g.add_nodes(count, supply=-1, kind=NodeKind.LEAF)
            assert all(v >= max(m.nodes, default=0) + 1 for v in ids.tolist())
            for v in ids.tolist():
                m.nodes[v] = (m.fresh(), -1, int(NodeKind.LEAF))
        elif op == "trusted_add_nodes":
            supplies = data.draw(st.lists(st.integers(-4, 4), max_size=4))
            ids = g.trusted_add_nodes(
                np.array(supplies, dtype=np.int64), np.full(len(supplies), 2, dtype=np.int64)
            ).tolist()
            assert len(set(ids)) == len(ids)
            for v, supply in zip(ids, supplies, strict=True):
                assert v not in m.nodes
                m.nodes[v] = (m.fresh(), supply, 2)
        elif op == "remove_node" and live:
            v = data.draw(st.sampled_from(live))
            g.remove_node(v)
            m.remove_node(v)
        elif op == "trusted_remove_nodes" and live:
            chosen = data.draw(st.lists(st.sampled_from(live), unique=True, min_size=1))
            g.trusted_remove_nodes(np.array(chosen, dtype=np.int64))
            for v in chosen:
                m.remove_node(v)
        elif op == "trusted_remove_arcs" and live_arcs:
            chosen = data.draw(st.lists(st.sampled_from(live_arcs), unique=True, min_size=1))
            g.trusted_remove_arcs(np.array(chosen, dtype=np.int64))
            for k in chosen:
                del m.arcs[k]
        elif op == "set_supply" and live:
            v = data.draw(st.sampled_from(live))
            supply = data.draw(st.integers(-4, 4))
            g.set_supply(v, supply)
            gen, _s, kind = m.nodes[v]
            m.nodes[v] = (gen, supply, kind)
        elif (
            op in ("add_arc", "add_arc_explicit", "add_arcs", "trusted_add_arcs") and len(live) >= 2
        ):
            count = data.draw(st.integers(1, 3)) if "add_arcs" in op else 1
            ends = [
                data.draw(st.lists(st.sampled_from(live), min_size=2, max_size=2, unique=True))
                for _ in range(count)
            ]
            vals = [data.draw(values) for _ in range(count)]
            rows = [
                (u, v, low, low + extra, cost, kind)
                for (u, v), (low, extra, cost, kind) in zip(ends, vals, strict=True)
            ]
            if op == "add_arcs":
                cols = list(zip(*rows, strict=True))
                ids = g.add_arcs(
                    cols[0], cols[1], lower=cols[2], capacity=cols[3], cost=cols[4], kind=cols[5]
                ).tolist()
            elif op == "trusted_add_arcs":
                src, dst, low, cap, cost, kind = (
                    np.array(col, dtype=np.int64) for col in zip(*rows, strict=True)
                )
                ids = g.trusted_add_arcs(src, dst, low, cap, cost, kind).tolist()
                assert len(set(ids)) == len(ids)
            else:
                u, v, low, cap, cost, kind = rows[0]
                explicit = None
                if op == "add_arc_explicit":
                    free = [k for k in range(g.arc_id_bound + 2) if k not in m.arcs]
                    explicit = data.draw(st.sampled_from(free))
                k = g.add_arc(u, v, lower=low, capacity=cap, cost=cost, kind=kind, arc=explicit)
                assert explicit is None or k == explicit
                ids = [k]
            for k, row in zip(ids, rows, strict=True):
                assert k not in m.arcs
                m.arcs[k] = (m.fresh(), row)
        elif op == "trusted_change_arcs" and live_arcs:
            chosen = data.draw(st.lists(st.sampled_from(live_arcs), unique=True, min_size=1))
            rows = []
            for k in chosen:
                gen, (u, v, _low, _cap, _cost, kind) = m.arcs[k]
                low, extra, cost, _kind = data.draw(values)
                m.arcs[k] = (gen, (u, v, low, low + extra, cost, kind))
                rows.append((k, low, low + extra, cost))
            g.trusted_change_arcs(*np.array(rows, dtype=np.int64).T.copy())
        elif op == "trusted_find_out_arcs" and live:
            nodes = data.draw(st.lists(st.sampled_from(live), min_size=1))
            targets = data.draw(st.lists(st.sampled_from(live), min_size=len(nodes)))
            kinds = data.draw(st.lists(st.integers(0, 3), min_size=len(nodes)))
            found = g.trusted_find_out_arcs(
                *(np.array(x[: len(nodes)], dtype=np.int64) for x in (nodes, targets, kinds))
            )
            for u, v, kind, k in zip(nodes, targets, kinds, found.tolist(), strict=False):
                first = [a for a in g.out_arcs(u) if g.arc_dst(a) == v and g.arc_kind(a) == kind]
                assert k == (first[0] if first else -1)
        elif op == "change_arc" and live_arcs:
            k = data.draw(st.sampled_from(live_arcs))
            gen, (u, v, low, cap, cost, kind) = m.arcs[k]
            new_low, extra, new_cost, new_kind = data.draw(values)
            which = data.draw(st.sets(st.sampled_from(["bounds", "cost", "kind"])))
            if "bounds" in which:
                low, cap = new_low, new_low + extra
            if "cost" in which:
                cost = new_cost
            if "kind" in which:
                kind = new_kind
            g.change_arc(k, lower=low, capacity=cap, cost=cost, kind=kind)
            m.arcs[k] = (gen, (u, v, low, cap, cost, kind))
        elif op == "remove_arc" and live_arcs:
            k = data.draw(st.sampled_from(live_arcs))
            g.remove_arc(k)
            del m.arcs[k]
        elif op == "take_changes":
            take_and_check()
        check_structure(g, m)
    take_and_check()
    # A copy reproduces the graph, and the copy's own change log replays onto the original's.
    c = g.copy()
    assert graph_state(c) == graph_state(g)
    if live := sorted(m.nodes):
        c.remove_node(live[0])
        g.apply(c.take_changes())
        assert graph_state(g) == graph_state(c)


# ====================================================================== replaying bad batches


def _rows(*rows: tuple[int, ...]) -> npt.NDArray[np.int64]:
    table = np.zeros((len(rows), ROW_WIDTH), dtype=np.int64)
    for i, r in enumerate(rows):
        table[i, : len(r)] = r
    return table


RN, RA, AN, SS, AA, CA = (int(op) for op in ChangeOp)

# Batches whose first rows are fine and whose later row is not: replayed row by row they used
# to leave the first rows applied.
HALF_GOOD_BATCHES: list[tuple[str, ChangeBatch, str]] = [
    (
        "add node, change missing arc",
        ChangeBatch(_rows((AN, 6, 1), (CA, 42, 1, 2, 0, 1, 0))),
        "row 1 .change_arc, arc 42.: arc 42 does not exist",
    ),
    (
        "add node, remove arc (out of order)",
        ChangeBatch(_rows((AN, 6, 1), (RA, 42))),
        "row 1 .remove_arc, arc 42.: comes after row 0",
    ),
    (
        "remove node, arc from it",
        ChangeBatch(_rows((RN, 1), (AA, 7, 1, 2, 0, 1, 0))),
        "row 1 .add_arc, arc 7.: arc source 1 does not exist",
    ),
    (
        "supply, negative node",
        ChangeBatch(_rows((RN, 3), (AN, -1, 0))),
        "row 1 .add_node, node -1.: node id -1 is not within",
    ),
    (
        "arcs, bad last cost",
        ChangeBatch(_rows((AA, 7, 1, 2, 0, 1, 0), (AA, 8, 2, 1, 0, 1, -(2**63)))),
        "row 1 .add_arc, arc 8.: arc 8: cost",
    ),
    (
        "reset with a dangling arc",
        ChangeBatch(_rows((AN, 1, 0), (AN, 2, 0), (AA, 0, 1, 3, 0, 1, 0)), reset=True),
        "row 2 .add_arc, arc 0.: arc destination 3 is not among",
    ),
    (
        "reset with a node twice",
        ChangeBatch(_rows((AN, 1, 0), (AN, 1, 0)), reset=True),
        "row 1 .add_node, node 1.: the id is taken by row 0",
    ),
]


@pytest.mark.parametrize(
    ("bad", "message"),
    [c[1:] for c in HALF_GOOD_BATCHES],
    ids=[c[0] for c in HALF_GOOD_BATCHES],
)
def test_a_failing_batch_leaves_the_graph_and_its_log_as_they_were(
    bad: ChangeBatch, message: str
) -> None:
    g = _graph_with_history()
    twin = _graph_with_history()
    before = _fingerprint(g)
    with pytest.raises(FlowGraphError, match=message):
        g.apply(bad)
    assert _fingerprint(g) == before
    assert np.array_equal(g.take_changes().rows, twin.take_changes().rows)
    assert g.add_node() == twin.add_node()  # the free lists are untouched too
    assert g.add_arc(1, 2, capacity=1, cost=0) == twin.add_arc(1, 2, capacity=1, cost=0)


def test_add_nodes_with_ids_frees_the_gaps_and_checks_everything_first() -> None:
    g = FlowGraph()
    g.add_node()  # node 1
    g.add_nodes_with_ids([7, 4], supply=[2, -2], kind=[NodeKind.TASK, NodeKind.SINK])
    assert g.node_ids().tolist() == [1, 4, 7]
    assert (g.supply(7), g.node_kind(4)) == (2, NodeKind.SINK)
    assert g.node_id_bound == 8
    assert [g.add_node() for _ in range(5)] == [2, 3, 5, 6, 8]  # gaps first, lowest first
    before = _fingerprint(g)
    for ids, message in (([9, 9], "given twice"), ([9, 4], "node 4 already exists"), ([0], "1..")):
        with pytest.raises(FlowGraphError, match=message):
            g.add_nodes_with_ids(ids)
        assert _fingerprint(g) == before


def test_bulk_additions_reject_the_most_negative_int64() -> None:
    # np.abs(-2**63) is still negative, so a magnitude check must not rely on it.
    g = small_graph()
    with pytest.raises(FlowGraphError, match="cost"):
        g.add_arcs([1], [2], capacity=1, cost=-(2**63))
    with pytest.raises(FlowGraphError, match="supply"):
        g.add_nodes(1, supply=-(2**63))
    assert graph_state(g) == graph_state(small_graph())


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_the_one_pass_snapshot_check_agrees_with_the_full_one(data: st.DataObject) -> None:
    # `snapshot_problem` accepts a snapshot laid out as `FlowGraph.snapshot` writes it in one
    # compiled pass and hands anything else to the vectorised check, which reads any order: on
    # snapshots bent in the ways that pass can miss, the two must say the same.
    g = FlowGraph()
    nodes = [g.add_node(supply=0) for _ in range(data.draw(st.integers(2, 6)))]
    for _ in range(data.draw(st.integers(0, 8))):
        src, dst = data.draw(st.permutations(nodes))[:2]
        g.add_arc(src, dst, capacity=1, cost=0)
    removed = data.draw(st.sets(st.sampled_from(nodes), max_size=2))
    for node in removed:
        g.remove_node(node)  # a hole in the node ids
    rows = g.snapshot().rows.copy()
    for how in data.draw(st.lists(st.sampled_from(["repeat", "swap", "end", "op"]), max_size=2)):
        i = data.draw(st.integers(0, len(rows) - 1)) if len(rows) else 0
        arcs = np.flatnonzero(rows[:, COL_OP] == ChangeOp.ADD_ARC)
        if how == "repeat" and len(rows):  # a row's id again, somewhere
            rows = np.insert(rows, data.draw(st.integers(0, len(rows))), rows[i], axis=0)
        elif how == "swap" and len(rows):
            j = data.draw(st.integers(0, len(rows) - 1))
            rows[[i, j]] = rows[[j, i]]
        elif how == "end" and len(arcs):  # an end at a removed node or beyond the last
            arc = data.draw(st.sampled_from(arcs.tolist()))
            end = data.draw(st.sampled_from(sorted({*removed, max(nodes) + 1})))
            rows[arc, data.draw(st.sampled_from([ARC_SRC, ARC_DST]))] = end
        elif how == "op" and len(rows):
            rows[i, COL_OP] = data.draw(st.sampled_from([ChangeOp.ADD_NODE, ChangeOp.ADD_ARC]))
    expected = batch_rules._first_value_problem(rows) or batch_rules._snapshot_shape_problem(rows)
    assert snapshot_problem(rows) == expected
