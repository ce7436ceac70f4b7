"""The rules a batch of graph changes must obey before anyone applies it.

A `ChangeBatch` is replayed row by row by code that trusts it: `FlowGraph.apply` would stop
halfway at a bad row, and the solvers' compiled `apply_rows` would read and write out of
bounds (removing an arc that does not exist crashes the interpreter; a negative node id wraps
around to another node). So a batch is checked whole first, against the ids the graph or
residual network holds, and the first bad row is named; checking changes nothing.

`batch_problem` (changes) works in three steps, so that its cost follows the batch and not the
graph:
  1. every row on its own (operation code, id ranges, values), in one compiled pass;
  2. the rows' order (the one `changes.py` documents, which makes replay valid);
  3. a compiled replay of the rows, in order, that tracks only the ids the batch mentions:
     whether each existed before the batch (asked through two lookups, so that graphs and
     residual networks share this code) and what earlier rows of the batch did to it.
`snapshot_problem` (reset batches) needs no replay: only additions, to an empty graph.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from firmament_py.flow.changes import (
    ARC_CAP,
    ARC_COST,
    ARC_DST,
    ARC_KIND,
    ARC_LOW,
    ARC_OLD_COST,
    ARC_SRC,
    COL_ID,
    COL_OP,
    NODE_KIND,
    NODE_SUPPLY,
    OP_ADD_ARC,
    OP_ADD_NODE,
    OP_CHANGE_ARC,
    OP_REMOVE_ARC,
    OP_REMOVE_NODE,
    OP_SET_SUPPLY,
    ChangeOp,
)
from firmament_py.flow.limits import (
    MAX_ARC_KIND,
    MAX_CAPACITY,
    MAX_COST,
    MAX_ID,
    FlowGraphError,
    NodeKind,
    check_arc_kind,
    check_arc_values,
)
from firmament_py.jit import kernel

Int64Array = npt.NDArray[np.int64]
Int32Array = npt.NDArray[np.int32]
Int8Array = npt.NDArray[np.int8]

BoolArray = npt.NDArray[np.bool_]
# Which of these node ids (each within 1..MAX_ID - 1) name live nodes.
NodeLookup = Callable[[Int64Array], BoolArray]
# For these arc ids (each within 0..MAX_ID - 1): which are live, and their sources and
# destinations (anything where not live).
ArcLookup = Callable[[Int64Array], tuple[BoolArray, Int64Array, Int64Array]]

_NODE_OPS = (ChangeOp.REMOVE_NODE, ChangeOp.ADD_NODE, ChangeOp.SET_SUPPLY)
_OPS_WITH_ENDS = (ChangeOp.ADD_ARC, ChangeOp.CHANGE_ARC)
_ORDER = ", ".join(op.name.lower() for op in ChangeOp)

# The range of valid operation codes, and of node kinds, for the compiled checks.
_OP_FIRST = int(min(ChangeOp))
_OP_LAST = int(max(ChangeOp))
_MAX_NODE_KIND = int(max(NodeKind))

# What the replay can find wrong with a row.
_NODE_MISSING = 1
_NODE_EXISTS = 2
_ARC_MISSING = 3
_ARC_EXISTS = 4
_SRC_MISSING = 5
_DST_MISSING = 6
_OTHER_ENDS = 7
_TWICE = 8


def _op_name(op: int) -> str:
    return ChangeOp(op).name.lower()


def _row_label(row: list[int], i: int) -> str:
    """'row 7 (remove_arc, arc 42)': how every message about a row begins."""
    op, ident = row[COL_OP], row[COL_ID]
    if op not in ChangeOp._value2member_map_:
        return f"row {i} (operation code {op})"
    what = "node" if op in _NODE_OPS else "arc"
    return f"row {i} ({_op_name(op)}, {what} {ident})"


def _row_value_problem(row: list[int]) -> str | None:
    """What is wrong with one row taken on its own (operation, ids, values), or None."""
    op, ident = row[COL_OP], row[COL_ID]
    if op not in ChangeOp._value2member_map_:
        return f"unknown operation code {op} (expected 1-{len(ChangeOp)})"
    if op in _NODE_OPS:
        if not 1 <= ident < MAX_ID:
            return f"node id {ident} is not within 1..{MAX_ID - 1}"
        if op != ChangeOp.REMOVE_NODE and abs(row[NODE_SUPPLY]) > MAX_CAPACITY:
            return f"supply {row[NODE_SUPPLY]} exceeds the limit of {MAX_CAPACITY} in magnitude"
        if op == ChangeOp.ADD_NODE and row[NODE_KIND] not in NodeKind._value2member_map_:
            return f"unknown node kind {row[NODE_KIND]} (expected 0-{int(max(NodeKind))})"
        return None
    if not 0 <= ident < MAX_ID:
        return f"arc id {ident} is not within 0..{MAX_ID - 1}"
    if op not in _OPS_WITH_ENDS:
        return None
    src, dst = row[ARC_SRC], row[ARC_DST]
    for end in (src, dst):
        if not 1 <= end < MAX_ID:
            return f"arc end {end} is not a node id (1..{MAX_ID - 1})"
    if src == dst:
        return f"self-loop on node {src}: arcs must join two distinct nodes"
    try:
        check_arc_values(row[ARC_LOW], row[ARC_CAP], row[ARC_COST], f"arc {ident}")
        check_arc_kind(row[ARC_KIND], f"arc {ident}")
    except FlowGraphError as exc:
        return str(exc)
    if op == ChangeOp.CHANGE_ARC and abs(row[ARC_OLD_COST]) > MAX_COST:
        return f"old cost {row[ARC_OLD_COST]} exceeds the limit of {MAX_COST} in magnitude"
    return None


@kernel
def _first_bad_value_row(rows: Int64Array) -> int:  # pragma: no cover - compiled
    """The first row `_row_value_problem` objects to, or -1: one pass, no temporaries.

    Comparisons rather than abs(), which leaves -2**63 negative.
    """
    for i in range(rows.shape[0]):
        op = rows[i, COL_OP]
        ident = rows[i, COL_ID]
        if op < _OP_FIRST or op > _OP_LAST:
            return i
        if op in (OP_REMOVE_NODE, OP_ADD_NODE, OP_SET_SUPPLY):
            if ident < 1 or ident > MAX_ID - 1:
                return i
            if op != OP_REMOVE_NODE:
                supply = rows[i, NODE_SUPPLY]
                if supply < -MAX_CAPACITY or supply > MAX_CAPACITY:
                    return i
            if op == OP_ADD_NODE:
                kind = rows[i, NODE_KIND]
                if kind < 0 or kind > _MAX_NODE_KIND:
                    return i
            continue
        if ident < 0 or ident > MAX_ID - 1:
            return i
        if op != OP_ADD_ARC and op != OP_CHANGE_ARC:
            continue
        src, dst = rows[i, ARC_SRC], rows[i, ARC_DST]
        if src < 1 or src > MAX_ID - 1 or dst < 1 or dst > MAX_ID - 1 or src == dst:
            return i
        low, cap = rows[i, ARC_LOW], rows[i, ARC_CAP]
        if low < 0 or low > cap or cap > MAX_CAPACITY:
            return i
        cost = rows[i, ARC_COST]
        if cost < -MAX_COST or cost > MAX_COST:
            return i
        kind = rows[i, ARC_KIND]
        if kind < 0 or kind > MAX_ARC_KIND:
            return i
        if op == OP_CHANGE_ARC:
            old = rows[i, ARC_OLD_COST]
            if old < -MAX_COST or old > MAX_COST:
                return i
    return -1


def _first_value_problem(rows: Int64Array) -> str | None:
    """Step 1: the first row that is wrong on its own, as a message."""
    i = int(_first_bad_value_row(rows))
    if i < 0:
        return None
    row = rows[i].tolist()
    problem = _row_value_problem(row)
    assert problem is not None, f"row {i} {row} was flagged, but no problem was found"
    return f"{_row_label(row, i)}: {problem}"


def _first_order_problem(rows: Int64Array) -> str | None:
    """Step 2: rows must come in the order `ChangeOp` numbers them (see `flow/changes.py`)."""
    ops = rows[:, COL_OP]
    late = np.flatnonzero(ops[1:] < ops[:-1])
    if len(late) == 0:
        return None
    i = int(late[0]) + 1
    return (
        f"{_row_label(rows[i].tolist(), i)}: comes after row {i - 1} "
        f"({_op_name(int(ops[i - 1]))}), but a batch's rows must be ordered {_ORDER}"
    )


# Bits of the replay's per-id state.
_KNOWN = 1  # the state below has been set from the lookups (the id was seen)
_LIVE = 2  # node: alive now; arc: live now, unless it is an old arc whose end was removed
_REMOVED = 4  # node: removed by this batch
_RESUPPLIED = 8  # node: given a supply by this batch
_ADDED = 4  # arc: added by this batch
_CHANGED = 8  # arc: changed by this batch


@kernel
def _node_live(node_state: Int8Array, v: int, was_live: bool) -> bool:  # pragma: no cover
    """Whether node v is alive at this point of the replay (first sight: as it was)."""
    if node_state[v] == 0:
        node_state[v] = _KNOWN | (_LIVE if was_live else 0)
    return bool(node_state[v] & _LIVE)


@kernel
def _replay(
    rows: Int64Array,
    was_live: BoolArray,
    old_src: Int64Array,
    old_dst: Int64Array,
    src_was_live: BoolArray,
    dst_was_live: BoolArray,
    node_state: Int8Array,
    node_last: Int32Array,
    arc_state: Int8Array,
    arc_last: Int32Array,
) -> tuple[int, int, int]:  # pragma: no cover - compiled
    """Step 3: replay ordered rows, keeping the state of each id they mention.

    Per row i, from the lookups: `was_live[i]` says whether its node (node rows) or arc (arc
    rows) existed before the batch, `old_src[i]` / `old_dst[i]` are that arc's ends then, and
    `src_was_live[i]` / `dst_was_live[i]` whether the ends it names existed then (added and
    changed arcs). The state arrays are indexed by id, zero on entry: `*_state` holds the bits
    above, `*_last` one more than the last row about the id. Returns (row, problem, earlier row
    that explains it or -1), or (-1, 0, -1) when every row can be applied.
    """
    for i in range(len(rows)):
        op = rows[i, COL_OP]
        ident = rows[i, COL_ID]
        if op == OP_REMOVE_NODE or op == OP_ADD_NODE or op == OP_SET_SUPPLY:  # noqa: SIM109
            st = node_state[ident]
            if st == 0:
                st = _KNOWN | (_LIVE if was_live[i] else 0)
            earlier = node_last[ident] - 1
            if op == OP_ADD_NODE:
                if st & _LIVE:
                    return i, _NODE_EXISTS, earlier
                st |= _LIVE
            elif not st & _LIVE:
                return i, _NODE_MISSING, earlier
            elif op == OP_REMOVE_NODE:
                st = (st & ~_LIVE) | _REMOVED
            elif st & _RESUPPLIED:
                return i, _TWICE, earlier
            else:
                st |= _RESUPPLIED
            node_state[ident] = st
            node_last[ident] = i + 1
            continue
        st = arc_state[ident]
        if st == 0:
            st = _KNOWN | (_LIVE if was_live[i] else 0)
        earlier = arc_last[ident] - 1
        # An arc of the old graph dies with either end: removing a node removes its arcs.
        end_gone = -1
        if st & _LIVE and not st & _ADDED:
            if node_state[old_src[i]] & _REMOVED:
                end_gone = old_src[i]
            elif node_state[old_dst[i]] & _REMOVED:
                end_gone = old_dst[i]
        live = st & _LIVE and end_gone < 0
        if op == OP_ADD_ARC:
            if live:
                return i, _ARC_EXISTS, earlier
            u, v = rows[i, ARC_SRC], rows[i, ARC_DST]
            if not _node_live(node_state, u, src_was_live[i]):
                return i, _SRC_MISSING, node_last[u] - 1
            if not _node_live(node_state, v, dst_was_live[i]):
                return i, _DST_MISSING, node_last[v] - 1
            st = _KNOWN | _LIVE | _ADDED
        elif end_gone >= 0:
            return i, _ARC_MISSING, node_last[end_gone] - 1
        elif not live:
            return i, _ARC_MISSING, earlier
        elif op == OP_REMOVE_ARC:
            st = _KNOWN
        elif st & _CHANGED:
            return i, _TWICE, earlier
        else:
            if st & _ADDED:  # added earlier in this batch: its ends are that row's
                src, dst = rows[earlier, ARC_SRC], rows[earlier, ARC_DST]
            else:
                src, dst = old_src[i], old_dst[i]
            if src != rows[i, ARC_SRC] or dst != rows[i, ARC_DST]:
                return i, _OTHER_ENDS, earlier
            st |= _CHANGED
        arc_state[ident] = st
        arc_last[ident] = i + 1
    return -1, 0, -1


def batch_problem(rows: Int64Array, node_alive: NodeLookup, arc_ends: ArcLookup) -> str | None:
    """The first reason the rows of a (non-reset) batch cannot be applied in order, or None.

    `node_alive` and `arc_ends` describe the graph or network the batch is meant for; they are
    asked only about ids the batch mentions, so the work follows the batch, not the graph. The
    answer reads 'row I (OPERATION, ID): PROBLEM'.
    """
    if len(rows) == 0:
        return None
    problem = _first_value_problem(rows) or _first_order_problem(rows)
    if problem:
        return problem
    ops, ids = rows[:, COL_OP], rows[:, COL_ID]
    is_node = np.isin(ops, _NODE_OPS)
    has_ends = np.isin(ops, _OPS_WITH_ENDS)
    was_live = np.zeros(len(rows), dtype=np.bool_)
    old_src = np.zeros(len(rows), dtype=np.int64)
    old_dst = np.zeros(len(rows), dtype=np.int64)
    was_live[is_node] = node_alive(ids[is_node])
    arc_live, src, dst = arc_ends(ids[~is_node])
    was_live[~is_node] = arc_live
    old_src[~is_node] = np.where(arc_live, src, 0)
    old_dst[~is_node] = np.where(arc_live, dst, 0)
    src_was_live = np.zeros(len(rows), dtype=np.bool_)
    dst_was_live = np.zeros(len(rows), dtype=np.bool_)
    src_was_live[has_ends] = node_alive(rows[has_ends, ARC_SRC])
    dst_was_live[has_ends] = node_alive(rows[has_ends, ARC_DST])
    # Ids index the state arrays directly (ids were checked to lie below MAX_ID in step 1).
    node_ids = np.concatenate([ids[is_node], rows[has_ends, ARC_SRC], rows[has_ends, ARC_DST]])
    nodes = 1 + int(max(node_ids.max(initial=0), old_src.max(), old_dst.max()))
    arcs = 1 + int(ids[~is_node].max(initial=0))
    row, code, other = _replay(
        rows,
        was_live,
        old_src,
        old_dst,
        src_was_live,
        dst_was_live,
        np.zeros(nodes, dtype=np.int8),
        np.zeros(nodes, dtype=np.int32),
        np.zeros(arcs, dtype=np.int8),
        np.zeros(arcs, dtype=np.int32),
    )
    if row < 0:
        return None
    i, earlier = int(row), int(other)
    line = rows[i].tolist()
    ident = line[COL_ID]
    what = "node" if line[COL_OP] in _NODE_OPS else "arc"
    if code == _NODE_MISSING:
        problem = f"node {ident} does not exist"
    elif code == _NODE_EXISTS:
        problem = f"node {ident} already exists"
    elif code == _ARC_MISSING:
        problem = f"arc {ident} does not exist"
    elif code == _ARC_EXISTS:
        problem = f"arc id {ident} is already in use"
    elif code == _SRC_MISSING:
        problem = f"arc source {line[ARC_SRC]} does not exist"
    elif code == _DST_MISSING:
        problem = f"arc destination {line[ARC_DST]} does not exist"
    elif code == _TWICE:
        problem = f"{what} {ident} appears twice among the {_op_name(line[COL_OP])} rows"
    else:
        if earlier >= 0:  # added earlier in the batch
            joins = f"{int(rows[earlier, ARC_SRC])}->{int(rows[earlier, ARC_DST])}"
        else:
            joins = f"{int(old_src[i])}->{int(old_dst[i])}"
        problem = (
            f"arc {ident} joins other nodes than the batch says "
            f"({joins}, not {line[ARC_SRC]}->{line[ARC_DST]})"
        )
    if earlier >= 0:
        problem += f" (see row {earlier}, {_op_name(int(rows[earlier, COL_OP]))})"
    return f"{_row_label(line, i)}: {problem}"


def snapshot_problem(rows: Int64Array) -> str | None:
    """The first reason a reset batch (a snapshot) cannot be loaded, or None.

    A snapshot holds only node and arc additions to an empty graph, so no replay is needed:
    each id once, every arc end among the added nodes. Linear in the rows.
    """
    problem = _first_value_problem(rows)
    if problem:
        return problem
    if _orderly_snapshot(rows):
        return None
    return _snapshot_shape_problem(rows)


@kernel
def _orderly_snapshot(rows: Int64Array) -> bool:  # pragma: no cover - compiled
    """Whether a snapshot whose rows are each valid is loadable and laid out as
    `FlowGraph.snapshot` writes it: nodes, then arcs, ids increasing, every arc end among the
    nodes. One compiled pass for the common case; False only means `_snapshot_shape_problem`
    must look (it accepts everything this does, and other orders too)."""
    last_node = 0
    last_arc = -1
    nodes = 0
    for i in range(rows.shape[0]):
        op = rows[i, COL_OP]
        ident = rows[i, COL_ID]
        if op == OP_ADD_NODE:
            if last_arc >= 0 or ident <= last_node:
                return False
            last_node = ident
            nodes += 1
        elif op == OP_ADD_ARC:
            if ident <= last_arc:
                return False
            last_arc = ident
        else:
            return False
    present = np.zeros(last_node + 1, dtype=np.bool_)
    for i in range(nodes):
        present[rows[i, COL_ID]] = True
    for i in range(nodes, rows.shape[0]):
        src, dst = rows[i, ARC_SRC], rows[i, ARC_DST]
        if src > last_node or dst > last_node or not present[src] or not present[dst]:
            return False
    return True


def _snapshot_shape_problem(rows: Int64Array) -> str | None:
    """`snapshot_problem` past the value checks, for rows in any order, vectorised."""
    ops = rows[:, COL_OP]
    is_node = ops == ChangeOp.ADD_NODE
    other = np.flatnonzero(~is_node & (ops != ChangeOp.ADD_ARC))
    if len(other):
        i = int(other[0])
        label = _row_label(rows[i].tolist(), i)
        return f"{label}: a reset batch holds only add_node and add_arc rows"
    for which in (np.flatnonzero(is_node), np.flatnonzero(~is_node)):
        repeat = _first_repeat(rows[which, COL_ID])
        if repeat is not None:
            first, again = (int(which[j]) for j in repeat)
            return f"{_row_label(rows[again].tolist(), again)}: the id is taken by row {first}"
    nodes = rows[is_node, COL_ID]
    present = np.zeros(int(nodes.max(initial=0)) + 1, dtype=np.bool_)
    present[nodes] = True
    arc_rows = np.flatnonzero(~is_node)
    for col, name in ((ARC_SRC, "source"), (ARC_DST, "destination")):
        ends = rows[arc_rows, col]
        known = ends < len(present)
        known[known] = present[ends[known]]
        if not known.all():
            i = int(arc_rows[np.flatnonzero(~known)[0]])
            return (
                f"{_row_label(rows[i].tolist(), i)}: arc {name} {int(rows[i, col])} is not among "
                "the nodes the snapshot adds"
            )
    return None


def _first_repeat(ids: Int64Array) -> tuple[int, int] | None:
    """Positions (earlier, later) of the first id to occur twice, by its second occurrence."""
    if len(ids) < 2 or bool((ids[1:] > ids[:-1]).all()):  # snapshots list ids in order
        return None
    order = np.argsort(ids, kind="stable")
    ordered = ids[order]
    same = np.flatnonzero(ordered[1:] == ordered[:-1])
    if len(same) == 0:
        return None
    j = int(np.argmin(order[same + 1]))
    return int(order[same[j]]), int(order[same[j] + 1])
