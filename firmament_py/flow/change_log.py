"""The change log's compiled passes, for rounds that change many arcs at once.

`FlowGraph` stamps an arc the first time a round touches it, keeping its old values, and reads
the round's net effect off the stamps (`graph.py` explains the log). Repricing 135,000 arcs a
round (Quincy's run credits at 12,500 machines) made the numpy form of both steps, a gather and
a scatter per column, a tenth of the round; each is one pass here:

* `change_arcs`: new values for many arcs, stamping each that changes for the first time this
  round;
* `arc_change_rows`: the rows of a round's net arc changes (removals, additions, changes), in
  the format of `flow/changes.py`.
"""

from __future__ import annotations

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
    OP_ADD_ARC,
    OP_CHANGE_ARC,
    OP_REMOVE_ARC,
    ROW_WIDTH,
)
from firmament_py.jit import kernel

__all__ = ["arc_change_rows", "change_arcs"]

Int64Array = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


@kernel
def change_arcs(
    arcs: Int64Array,
    lower: Int64Array,
    capacity: Int64Array,
    cost: Int64Array,
    epoch: int,
    arc_epoch: Int64Array,
    arc_was_alive: BoolArray,
    arc_was: Int64Array,
    src: Int64Array,
    dst: Int64Array,
    low: Int64Array,
    cap: Int64Array,
    cst: Int64Array,
    arc_kind: npt.NDArray[np.int8],
) -> tuple[Int64Array, int]:  # pragma: no cover - compiled
    """Give the distinct live `arcs` these values. Returns the arcs stamped now (their first
    change this round; `arc_was` holds their values from before it) and how many changed."""
    fresh = np.empty(len(arcs), dtype=np.int64)
    stamped = 0
    changed = 0
    for i in range(len(arcs)):
        k = arcs[i]
        if low[k] == lower[i] and cap[k] == capacity[i] and cst[k] == cost[i]:
            continue
        if arc_epoch[k] != epoch:
            arc_epoch[k] = epoch
            arc_was_alive[k] = True
            arc_was[k, 0] = src[k]
            arc_was[k, 1] = dst[k]
            arc_was[k, 2] = low[k]
            arc_was[k, 3] = cap[k]
            arc_was[k, 4] = cst[k]
            arc_was[k, 5] = arc_kind[k]
            fresh[stamped] = k
            stamped += 1
        low[k] = lower[i]
        cap[k] = capacity[i]
        cst[k] = cost[i]
        changed += 1
    return fresh[:stamped], changed


@kernel
def arc_change_rows(
    arcs: Int64Array,
    epoch: int,
    node_epoch: Int64Array,
    node_killed: BoolArray,
    arc_alive: BoolArray,
    arc_was_alive: BoolArray,
    arc_was: Int64Array,
    src: Int64Array,
    dst: Int64Array,
    low: Int64Array,
    cap: Int64Array,
    cst: Int64Array,
    arc_kind: npt.NDArray[np.int8],
) -> tuple[Int64Array, Int64Array, Int64Array]:  # pragma: no cover - compiled
    """The rows of the net change of each of the touched `arcs` (sorted): arcs removed, arcs
    added, arcs changed, each group in the order of `arcs`. An arc that was alive, but whose
    end a node removal this round took, counts as gone already (the solver drops it with the
    node); one that was removed and re-added between other ends is removed and added."""
    kinds = np.zeros(len(arcs), dtype=np.int8)  # 1 removed, 2 added, 3 both, 4 changed
    counts = np.zeros(3, dtype=np.int64)
    for i in range(len(arcs)):
        k = arcs[i]
        u, v = arc_was[k, 0], arc_was[k, 1]
        was_on = arc_was_alive[k]
        if was_on and node_epoch[u] == epoch and node_killed[u]:
            was_on = False
        if was_on and node_epoch[v] == epoch and node_killed[v]:
            was_on = False
        now_on = arc_alive[k]
        same_ends = src[k] == u and dst[k] == v
        if was_on and (not now_on or not same_ends):
            kinds[i] |= 1
            counts[0] += 1
        if now_on and (not was_on or not same_ends):
            kinds[i] |= 2
            counts[1] += 1
        if was_on and now_on and same_ends:
            if (
                low[k] != arc_was[k, 2]
                or cap[k] != arc_was[k, 3]
                or cst[k] != arc_was[k, 4]
                or arc_kind[k] != arc_was[k, 5]
            ):
                kinds[i] = 4
                counts[2] += 1
    removed = np.zeros((counts[0], ROW_WIDTH), dtype=np.int64)
    added = np.zeros((counts[1], ROW_WIDTH), dtype=np.int64)
    changed = np.zeros((counts[2], ROW_WIDTH), dtype=np.int64)
    r = a = c = 0
    for i in range(len(arcs)):
        k = arcs[i]
        kind = kinds[i]
        if kind & 1:
            removed[r, COL_OP] = OP_REMOVE_ARC
            removed[r, COL_ID] = k
            removed[r, ARC_SRC] = arc_was[k, 0]
            removed[r, ARC_DST] = arc_was[k, 1]
            removed[r, ARC_COST] = arc_was[k, 4]
            removed[r, ARC_KIND] = arc_was[k, 5]
            removed[r, ARC_OLD_COST] = arc_was[k, 4]
            r += 1
        if kind == 4 or kind & 2:
            rows = changed if kind == 4 else added
            j = c if kind == 4 else a
            rows[j, COL_OP] = OP_CHANGE_ARC if kind == 4 else OP_ADD_ARC
            rows[j, COL_ID] = k
            rows[j, ARC_SRC] = src[k]
            rows[j, ARC_DST] = dst[k]
            rows[j, ARC_LOW] = low[k]
            rows[j, ARC_CAP] = cap[k]
            rows[j, ARC_COST] = cst[k]
            rows[j, ARC_KIND] = arc_kind[k]
            rows[j, ARC_OLD_COST] = arc_was[k, 4] if kind == 4 else cst[k]
            if kind == 4:
                c += 1
            else:
                a += 1
    return removed, added, changed
