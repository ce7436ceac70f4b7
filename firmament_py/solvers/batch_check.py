"""Checks a change batch against a solver's residual network before the solver applies it.

`ResidualNetwork.apply` hands batches to a compiled kernel that trusts them: removing an arc id
that does not exist reads and writes out of bounds (the interpreter crashes), a negative node id
wraps around to another node. `FlowSolver.apply` and `FlowSolver.load` therefore call
`check_batch` / `check_snapshot` first, and a bad batch raises `BatchError` naming its first bad
row while the network stays exactly as it was. The rules themselves (ids, values, row order, a
replay of the rows over the ids they mention) live beside the graph, in
`firmament_py.flow.batch_rules`, so that `FlowGraph.apply` enforces the same ones; this module
only tells them which ids a network holds.

`LiveIds` is for a solver that holds no network of its own (`RacingSolver`, whose networks live
in worker processes): it keeps just which ids are live, and checks and records each batch.
"""

from __future__ import annotations

from typing import TypeVar

import numpy as np
import numpy.typing as npt

from firmament_py.flow.batch_rules import batch_problem, snapshot_problem
from firmament_py.flow.changes import (
    ARC_DST,
    ARC_SRC,
    COL_ID,
    COL_OP,
    OP_ADD_ARC,
    OP_ADD_NODE,
    OP_REMOVE_ARC,
    OP_REMOVE_NODE,
    OP_SET_SUPPLY,
    ChangeBatch,
)
from firmament_py.jit import kernel
from firmament_py.solvers.network import ResidualNetwork

Int64Array = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


class BatchError(ValueError):
    """A change batch that does not fit the network it was given to; nothing was applied."""


def check_snapshot(batch: ChangeBatch) -> None:
    """Raise `BatchError` unless `batch` is a reset batch a network can load.

    Linear in the rows, vectorised: only additions, each id once, arc ends among the added nodes,
    ids and values within the graph's limits.
    """
    if not batch.reset:
        raise BatchError("a snapshot must be a reset batch (FlowGraph.snapshot())")
    problem = snapshot_problem(batch.rows)
    if problem:
        raise BatchError(f"bad snapshot: {problem}")


def check_batch(network: ResidualNetwork, batch: ChangeBatch) -> None:
    """Raise `BatchError` unless every row of `batch` can be applied, in order, to `network`.

    Reads the network only. The work follows the batch, not the network (about a millisecond
    for 30,000 rows), because only the ids the batch mentions are looked up.
    """
    if batch.reset:
        check_snapshot(batch)
        return
    a = network.arrays

    def nodes_alive(ids: Int64Array) -> BoolArray:
        inside = ids < len(a.alive)
        alive = np.zeros(len(ids), dtype=np.bool_)
        alive[inside] = a.alive[ids[inside]] == 1
        return alive

    def arcs_alive(ids: Int64Array) -> tuple[BoolArray, Int64Array, Int64Array]:
        # Arc k is live iff its forward slot fwd[k] >= 0; the slot's head is the arc's
        # destination, and the head of its mate (the reverse slot) is the source.
        inside = ids < len(a.fwd)
        slot = np.where(inside, a.fwd[np.where(inside, ids, 0)], -1)
        live = slot >= 0
        s = np.where(live, slot, 0)
        return live, a.head[a.mate[s]], a.head[s]

    problem = batch_problem(batch.rows, nodes_alive, arcs_alive)
    if problem:
        raise BatchError(problem)


class LiveIds:
    """The ids live in a network, kept without the network, to check batches meant for it.

    An arc is live when it was added, not removed since, and both its ends are live and are not
    younger than it: removing a node removes its arcs without listing them, and a node id that
    is removed and added again (even in one batch) must not revive the old node's arcs. Ages are
    counted in batches, so recording a batch is vectorised and never visits a node's arcs.
    """

    def __init__(self) -> None:
        self._clear()

    def _clear(self) -> None:
        self._batches = 0  # batches recorded: the age of what they add
        # by node id (id 0 is never a node) and by arc id; entry 0 is a harmless default
        self._node_alive = np.zeros(1, dtype=np.bool_)
        self._node_born = np.zeros(1, dtype=np.int64)
        self._arc_born = np.full(1, -1, dtype=np.int64)  # -1: not live
        self._src = np.zeros(1, dtype=np.int64)
        self._dst = np.zeros(1, dtype=np.int64)

    def load(self, snapshot: ChangeBatch) -> None:
        """Check a reset batch (`BatchError` if bad, nothing changed) and start over from it."""
        check_snapshot(snapshot)
        self._clear()
        self._record(snapshot.rows)

    def apply(self, batch: ChangeBatch) -> None:
        """Check a batch against the live ids (`BatchError` if bad, nothing changed), record it."""
        if batch.reset:
            self.load(batch)
            return
        problem = batch_problem(batch.rows, self._nodes_alive, self._arcs_alive)
        if problem:
            raise BatchError(problem)
        self._record(batch.rows)

    def _nodes_alive(self, ids: Int64Array) -> BoolArray:
        inside = ids < len(self._node_alive)
        alive = np.zeros(len(ids), dtype=np.bool_)
        alive[inside] = self._node_alive[ids[inside]]
        return alive

    def _arcs_alive(self, ids: Int64Array) -> tuple[BoolArray, Int64Array, Int64Array]:
        inside = ids < len(self._arc_born)
        k = np.where(inside, ids, 0)
        born, src, dst = self._arc_born[k], self._src[k], self._dst[k]
        live = inside & (born >= 0)
        for end in (src, dst):
            live &= self._node_alive[end] & (self._node_born[end] <= born)
        return live, src, dst

    def _record(self, rows: Int64Array) -> None:
        """Apply a checked batch to the ids, row by row (a snapshot's rows may come in any
        order, a batch's removals come before its additions)."""
        self._batches += 1
        node_bound, arc_bound = _id_bounds(rows)
        self._node_alive = _grown(self._node_alive, node_bound, False)
        self._node_born = _grown(self._node_born, node_bound, 0)
        self._arc_born = _grown(self._arc_born, arc_bound, -1)
        self._src = _grown(self._src, arc_bound, 0)
        self._dst = _grown(self._dst, arc_bound, 0)
        _record_rows(
            rows,
            self._batches,
            self._node_alive,
            self._node_born,
            self._arc_born,
            self._src,
            self._dst,
        )


@kernel
def _id_bounds(rows: Int64Array) -> tuple[int, int]:  # pragma: no cover - compiled
    """One more than the largest node id and arc id the rows mention (at least 1)."""
    nodes = 1
    arcs = 1
    for i in range(rows.shape[0]):
        op = rows[i, COL_OP]
        ident = rows[i, COL_ID] + 1
        if op in (OP_REMOVE_NODE, OP_ADD_NODE, OP_SET_SUPPLY):
            nodes = max(nodes, ident)
        else:
            arcs = max(arcs, ident)
    return nodes, arcs


@kernel
def _record_rows(
    rows: Int64Array,
    batch: int,
    node_alive: BoolArray,
    node_born: Int64Array,
    arc_born: Int64Array,
    src: Int64Array,
    dst: Int64Array,
) -> None:  # pragma: no cover - compiled
    """`LiveIds._record`'s pass over the rows, into arrays long enough for every id. One pass
    over the rows instead of one per column: S50's load-spreading snapshot (412,000 rows, 30
    MB) took 18 ms to record with numpy's masks and column indexing."""
    for i in range(rows.shape[0]):
        op = rows[i, COL_OP]
        ident = rows[i, COL_ID]
        if op == OP_REMOVE_NODE:
            node_alive[ident] = False
        elif op == OP_REMOVE_ARC:
            arc_born[ident] = -1
        elif op == OP_ADD_NODE:
            node_alive[ident] = True
            node_born[ident] = batch
        elif op == OP_ADD_ARC:
            arc_born[ident] = batch
            src[ident] = rows[i, ARC_SRC]
            dst[ident] = rows[i, ARC_DST]


_Scalar = TypeVar("_Scalar", bound=np.generic)


def _grown(array: npt.NDArray[_Scalar], size: int, fill: int | bool) -> npt.NDArray[_Scalar]:
    """`array`, or a copy at least `size` long with new entries `fill`.

    Room doubles, and is never less than 1.5 times `size`: a snapshot's load leaves room, so the
    rounds after it do not copy the arrays (copying a 1.2-million-arc network's took 10 ms of
    the first round).
    """
    if size <= len(array):
        return array
    bigger = np.full(max(size + size // 2, 2 * len(array)), fill, dtype=array.dtype)
    bigger[: len(array)] = array
    return bigger
