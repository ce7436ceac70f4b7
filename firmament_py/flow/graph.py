"""The flow network as a mutable min-cost flow problem, with a change log.

`FlowGraph` is what the scheduler edits every round and what solvers read. It holds the problem
only (nodes with supplies, arcs with lower bound, capacity and cost); flows and potentials live in
the solvers, which receive the graph's changes as `ChangeBatch`es.

Invariants, stated once:

* Node ids start at 1, as in DIMACS and Firmament; id 0 is never a node. Arc ids start at 0.
  Ids of removed nodes and arcs are reused (free lists), so an id names an entity only while it
  is alive.
* Arc `k` stands for the residual pair `(2k, 2k+1)` in every solver: `2k` is the arc itself,
  `2k+1` its reverse.
* Every node keeps doubly linked lists of its outgoing and incoming arcs, so adding or removing
  an arc is O(1) and removing a node is O(degree).
* No self-loops; 0 <= lower <= capacity <= MAX_CAPACITY; |cost| <= MAX_COST.
* Every mutation is recorded against the state at the start of the round (the first time an
  entity is touched in a round its old state is stamped). `take_changes()` turns the stamps into
  the round's net changes, which merges repeated changes to an arc and drops changes to nodes
  that were removed later in the round (Firmament's change-manager cleanups) by construction.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator
from enum import IntEnum
from typing import NamedTuple, SupportsIndex

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
    ROW_WIDTH,
    ChangeBatch,
    ChangeOp,
)
from firmament_py.jit import kernel

MAX_COST = 2**31 - 1
MAX_CAPACITY = 2**40
# An arc at this capacity is uncapacitated: a negative-cost cycle of such arcs is unbounded.
INFINITE_CAPACITY = MAX_CAPACITY
# Arc kinds are stored in int8; ids are dense in practice, and an explicit id far beyond the
# ones in use would only allocate the gap, so both have a limit that names the mistake.
MAX_ARC_KIND = 127
MAX_ID = 2**28

Int64Array = npt.NDArray[np.int64]
Int32Array = npt.NDArray[np.int32]
Int8Array = npt.NDArray[np.int8]


class NodeKind(IntEnum):
    """Node types as Firmament's DIMACS exporter numbers them."""

    OTHER = 0
    TASK = 1
    LEAF = 2  # a processing unit / machine whose flow reaches the sink
    SINK = 3


class FlowGraphError(ValueError):
    """A mutation or query that names something that does not exist or breaks an invariant."""


class GraphArrays(NamedTuple):
    """Read-only views of the graph's arrays, indexed by node id and arc id.

    Entries of dead ids are meaningless; use `node_alive` / `arc_alive` as masks.
    """

    node_alive: npt.NDArray[np.bool_]
    supply: Int64Array
    node_kind: npt.NDArray[np.int8]
    arc_alive: npt.NDArray[np.bool_]
    src: Int64Array
    dst: Int64Array
    low: Int64Array
    cap: Int64Array
    cost: Int64Array
    arc_kind: npt.NDArray[np.int8]


def _index(value: SupportsIndex, what: str) -> int:
    if isinstance(value, bool):
        raise FlowGraphError(f"{what} must be an integer, got a bool")
    try:
        return operator.index(value)
    except TypeError:
        raise FlowGraphError(f"{what} must be an integer, got {value!r}") from None


def _arc_kind(kind: SupportsIndex, what: str) -> int:
    kd = _index(kind, f"{what}: kind")
    if not 0 <= kd <= MAX_ARC_KIND:
        raise FlowGraphError(f"{what}: kind {kd} is not within 0..{MAX_ARC_KIND}")
    return kd


def _grown(array: npt.NDArray[np.generic], size: int, fill: int | bool) -> npt.NDArray[np.generic]:
    bigger = np.full(size, fill, dtype=array.dtype)
    bigger[: len(array)] = array
    return bigger


@kernel
def _link_arcs(
    ids: Int64Array,
    src: Int64Array,
    dst: Int64Array,
    out_first: Int64Array,
    out_next: Int64Array,
    out_prev: Int64Array,
    in_first: Int64Array,
    in_next: Int64Array,
    in_prev: Int64Array,
    out_deg: Int64Array,
    in_deg: Int64Array,
) -> None:  # pragma: no cover - compiled
    for i in range(len(ids)):
        k = ids[i]
        u = src[k]
        v = dst[k]
        h = out_first[u]
        out_next[k] = h
        out_prev[k] = -1
        if h >= 0:
            out_prev[h] = k
        out_first[u] = k
        out_deg[u] += 1
        h = in_first[v]
        in_next[k] = h
        in_prev[k] = -1
        if h >= 0:
            in_prev[h] = k
        in_first[v] = k
        in_deg[v] += 1


class FlowGraph:
    """A min-cost flow problem that changes between solves."""

    def __init__(self, *, node_hint: int = 16, arc_hint: int = 16) -> None:
        self._reset(node_hint, arc_hint)

    def _reset(self, node_hint: int, arc_hint: int) -> None:
        n = max(2, node_hint + 1)
        m = max(1, arc_hint)
        # nodes
        self._node_alive = np.zeros(n, dtype=np.bool_)
        self._supply = np.zeros(n, dtype=np.int64)
        self._node_kind = np.zeros(n, dtype=np.int8)
        self._out_first = np.full(n, -1, dtype=np.int64)
        self._in_first = np.full(n, -1, dtype=np.int64)
        self._out_deg = np.zeros(n, dtype=np.int64)
        self._in_deg = np.zeros(n, dtype=np.int64)
        self._node_epoch = np.zeros(n, dtype=np.int64)
        self._node_was_alive = np.zeros(n, dtype=np.bool_)
        self._node_was_supply = np.zeros(n, dtype=np.int64)
        self._node_killed = np.zeros(n, dtype=np.bool_)
        self._node_top = 1
        self._free_nodes: list[int] = []
        self._num_nodes = 0
        # arcs
        self._arc_alive = np.zeros(m, dtype=np.bool_)
        self._src = np.zeros(m, dtype=np.int64)
        self._dst = np.zeros(m, dtype=np.int64)
        self._low = np.zeros(m, dtype=np.int64)
        self._cap = np.zeros(m, dtype=np.int64)
        self._cost = np.zeros(m, dtype=np.int64)
        self._arc_kind = np.zeros(m, dtype=np.int8)
        self._out_next = np.full(m, -1, dtype=np.int64)
        self._out_prev = np.full(m, -1, dtype=np.int64)
        self._in_next = np.full(m, -1, dtype=np.int64)
        self._in_prev = np.full(m, -1, dtype=np.int64)
        self._arc_epoch = np.zeros(m, dtype=np.int64)
        self._arc_was_alive = np.zeros(m, dtype=np.bool_)
        self._arc_was = np.zeros((m, 6), dtype=np.int64)  # src dst low cap cost kind
        self._arc_top = 0
        self._free_arcs: list[int] = []
        self._num_arcs = 0
        # change log
        self._epoch = 1
        self._touched_nodes: list[int] = []
        self._touched_arcs: list[int] = []
        self._raw_changes = 0

    # ------------------------------------------------------------------ sizes and queries

    @property
    def num_nodes(self) -> int:
        return self._num_nodes

    @property
    def num_arcs(self) -> int:
        return self._num_arcs

    @property
    def node_id_bound(self) -> int:
        """One more than the largest node id ever used (the size of arrays indexed by node id)."""
        return self._node_top

    @property
    def arc_id_bound(self) -> int:
        """One more than the largest arc id ever used."""
        return self._arc_top

    @property
    def pending_changes(self) -> int:
        """Raw mutations recorded since the last `take_changes()`."""
        return self._raw_changes

    def arrays(self) -> GraphArrays:
        """Read-only views over all ids below the id bounds."""

        def view(a: npt.NDArray[np.generic], top: int) -> npt.NDArray[np.generic]:
            v = a[:top]
            v.flags.writeable = False
            return v

        n, m = self._node_top, self._arc_top
        return GraphArrays(
            view(self._node_alive, n),  # type: ignore[arg-type]
            view(self._supply, n),  # type: ignore[arg-type]
            view(self._node_kind, n),  # type: ignore[arg-type]
            view(self._arc_alive, m),  # type: ignore[arg-type]
            view(self._src, m),  # type: ignore[arg-type]
            view(self._dst, m),  # type: ignore[arg-type]
            view(self._low, m),  # type: ignore[arg-type]
            view(self._cap, m),  # type: ignore[arg-type]
            view(self._cost, m),  # type: ignore[arg-type]
            view(self._arc_kind, m),  # type: ignore[arg-type]
        )

    def has_node(self, node: SupportsIndex) -> bool:
        v = operator.index(node)
        return 0 < v < self._node_top and bool(self._node_alive[v])

    def has_arc(self, arc: SupportsIndex) -> bool:
        k = operator.index(arc)
        return 0 <= k < self._arc_top and bool(self._arc_alive[k])

    def node_ids(self) -> Int64Array:
        return np.flatnonzero(self._node_alive[: self._node_top]).astype(np.int64)

    def arc_ids(self) -> Int64Array:
        return np.flatnonzero(self._arc_alive[: self._arc_top]).astype(np.int64)

    def supply(self, node: SupportsIndex) -> int:
        return int(self._supply[self._live_node(node)])

    def node_kind(self, node: SupportsIndex) -> NodeKind:
        return NodeKind(int(self._node_kind[self._live_node(node)]))

    def total_supply(self) -> int:
        alive = self._node_alive[: self._node_top]
        return int(self._supply[: self._node_top][alive].sum())

    def arc_src(self, arc: SupportsIndex) -> int:
        return int(self._src[self._live_arc(arc)])

    def arc_dst(self, arc: SupportsIndex) -> int:
        return int(self._dst[self._live_arc(arc)])

    def arc_lower(self, arc: SupportsIndex) -> int:
        return int(self._low[self._live_arc(arc)])

    def arc_capacity(self, arc: SupportsIndex) -> int:
        return int(self._cap[self._live_arc(arc)])

    def arc_cost(self, arc: SupportsIndex) -> int:
        return int(self._cost[self._live_arc(arc)])

    def arc_kind(self, arc: SupportsIndex) -> int:
        return int(self._arc_kind[self._live_arc(arc)])

    def out_arcs(self, node: SupportsIndex) -> list[int]:
        """Arcs leaving `node`, most recently added first."""
        out: list[int] = []
        k = int(self._out_first[self._live_node(node)])
        while k >= 0:
            out.append(k)
            k = int(self._out_next[k])
        return out

    def in_arcs(self, node: SupportsIndex) -> list[int]:
        """Arcs entering `node`, most recently added first."""
        out: list[int] = []
        k = int(self._in_first[self._live_node(node)])
        while k >= 0:
            out.append(k)
            k = int(self._in_next[k])
        return out

    def out_degree(self, node: SupportsIndex) -> int:
        return int(self._out_deg[self._live_node(node)])

    def in_degree(self, node: SupportsIndex) -> int:
        return int(self._in_deg[self._live_node(node)])

    def find_arcs(self, src: SupportsIndex, dst: SupportsIndex) -> list[int]:
        """All arcs from `src` to `dst` (parallel arcs are allowed), oldest id first."""
        u, v = self._live_node(src), self._live_node(dst)
        found: list[int] = []
        if self._out_deg[u] <= self._in_deg[v]:
            k = int(self._out_first[u])
            while k >= 0:
                if self._dst[k] == v:
                    found.append(k)
                k = int(self._out_next[k])
        else:
            k = int(self._in_first[v])
            while k >= 0:
                if self._src[k] == u:
                    found.append(k)
                k = int(self._in_next[k])
        return sorted(found)

    def iter_arcs(self) -> Iterator[tuple[int, int, int, int, int, int]]:
        """(arc, src, dst, lower, capacity, cost) for every live arc, by id."""
        ids = self.arc_ids()
        rows = zip(
            ids.tolist(),
            self._src[ids].tolist(),
            self._dst[ids].tolist(),
            self._low[ids].tolist(),
            self._cap[ids].tolist(),
            self._cost[ids].tolist(),
            strict=True,
        )
        yield from rows

    # ------------------------------------------------------------------ node mutations

    def add_node(
        self,
        supply: SupportsIndex = 0,
        kind: NodeKind | int = NodeKind.OTHER,
        *,
        node: SupportsIndex | None = None,
    ) -> int:
        """Add a node and return its id; `node` claims a specific free id (as DIMACS input does)."""
        b = _index(supply, "supply")
        if abs(b) > MAX_CAPACITY:
            raise FlowGraphError(f"supply {b} exceeds the limit of {MAX_CAPACITY} in magnitude")
        kind = NodeKind(int(kind))
        v = self._claim_node_id(node)
        self._touch_node(v)
        self._node_alive[v] = True
        self._supply[v] = b
        self._node_kind[v] = kind
        self._out_first[v] = -1
        self._in_first[v] = -1
        self._out_deg[v] = 0
        self._in_deg[v] = 0
        self._num_nodes += 1
        self._raw_changes += 1
        return v

    def add_nodes(
        self, count: int, supply: npt.ArrayLike = 0, kind: npt.ArrayLike = NodeKind.OTHER
    ) -> Int64Array:
        """Add `count` nodes at once (fresh ids above all used ones); return their ids."""
        if count < 0:
            raise FlowGraphError(f"node count must be non-negative, got {count}")
        supplies, kinds = self._node_values(count, supply, kind)
        first = self._node_top
        self._ensure_nodes(first + count)
        ids = np.arange(first, first + count, dtype=np.int64)
        self._node_top = first + count
        self._place_nodes(ids, supplies, kinds)
        return ids

    def add_nodes_with_ids(
        self, ids: npt.ArrayLike, supply: npt.ArrayLike = 0, kind: npt.ArrayLike = NodeKind.OTHER
    ) -> None:
        """Add nodes with the given free ids at once, as a DIMACS problem numbers them.

        Ids skipped over become free, as with `add_node(node=...)`. The cost follows the number
        of ids and the largest one, not any declared node count.
        """
        wanted = np.atleast_1d(np.asarray(ids, dtype=np.int64))
        if wanted.ndim != 1:
            raise FlowGraphError("add_nodes_with_ids: ids must be a flat list")
        count = len(wanted)
        if count == 0:
            return
        supplies, kinds = self._node_values(count, supply, kind)
        bad = np.flatnonzero((wanted <= 0) | (wanted >= MAX_ID))
        if len(bad):
            raise FlowGraphError(f"node id {int(wanted[bad[0]])} is not within 1..{MAX_ID - 1}")
        ordered = np.sort(wanted)
        twice = np.flatnonzero(ordered[1:] == ordered[:-1])
        if len(twice):
            raise FlowGraphError(f"node id {int(ordered[twice[0]])} is given twice")
        taken = np.flatnonzero(self._nodes_alive(wanted))
        if len(taken):
            raise FlowGraphError(f"node {int(wanted[taken[0]])} already exists")
        top = max(self._node_top, int(ordered[-1]) + 1)
        self._ensure_nodes(top)
        skipped = np.setdiff1d(np.arange(self._node_top, top, dtype=np.int64), ordered)
        self._free_nodes.extend(skipped[::-1].tolist())  # popped lowest first
        self._node_top = top
        self._place_nodes(wanted, supplies, kinds)

    def _node_values(
        self, count: int, supply: npt.ArrayLike, kind: npt.ArrayLike
    ) -> tuple[Int64Array, Int64Array]:
        """Supplies and kinds for `count` new nodes, broadcast and checked."""
        try:
            supplies = np.broadcast_to(np.asarray(supply, dtype=np.int64), (count,))
            kinds = np.broadcast_to(np.asarray(kind, dtype=np.int64), (count,))
        except ValueError:
            raise FlowGraphError(f"supplies and kinds must be 1 or {count} values") from None
        # Comparisons rather than np.abs, which leaves -2**63 negative.
        if count and (supplies.max() > MAX_CAPACITY or supplies.min() < -MAX_CAPACITY):
            raise FlowGraphError(f"a supply exceeds the limit of {MAX_CAPACITY} in magnitude")
        if count and (kinds.min() < 0 or kinds.max() > max(NodeKind)):
            raise FlowGraphError(f"node kinds must be within 0..{int(max(NodeKind))}")
        return supplies, kinds

    def _place_nodes(self, ids: Int64Array, supplies: Int64Array, kinds: Int64Array) -> None:
        """Make the (free, allocated) ids live nodes with these supplies and kinds."""
        self._touch_nodes(ids)
        self._node_alive[ids] = True
        self._supply[ids] = supplies
        self._node_kind[ids] = kinds
        self._out_first[ids] = -1
        self._in_first[ids] = -1
        self._out_deg[ids] = 0
        self._in_deg[ids] = 0
        self._num_nodes += len(ids)
        self._raw_changes += len(ids)

    def remove_node(self, node: SupportsIndex) -> None:
        """Remove a node and every arc incident to it."""
        v = self._live_node(node)
        for k in self.out_arcs(v) + self.in_arcs(v):
            if self._arc_alive[k]:
                self._remove_arc(k)
        self._touch_node(v)
        if self._node_was_alive[v]:
            self._node_killed[v] = True
        self._node_alive[v] = False
        self._free_nodes.append(v)
        self._num_nodes -= 1
        self._raw_changes += 1

    def set_supply(self, node: SupportsIndex, supply: SupportsIndex) -> None:
        v = self._live_node(node)
        b = _index(supply, "supply")
        if abs(b) > MAX_CAPACITY:
            raise FlowGraphError(f"supply {b} exceeds the limit of {MAX_CAPACITY} in magnitude")
        if self._supply[v] == b:
            return
        self._touch_node(v)
        self._supply[v] = b
        self._raw_changes += 1

    # ------------------------------------------------------------------ arc mutations

    def add_arc(
        self,
        src: SupportsIndex,
        dst: SupportsIndex,
        *,
        capacity: SupportsIndex,
        cost: SupportsIndex,
        lower: SupportsIndex = 0,
        kind: SupportsIndex = 0,
        arc: SupportsIndex | None = None,
    ) -> int:
        """Add an arc and return its id; `arc` claims a specific free id (batch replay)."""
        u, v = self._live_node(src), self._live_node(dst)
        if u == v:
            raise FlowGraphError(f"self-loop on node {u}: arcs must join two distinct nodes")
        low, cap, c = self._check_arc_values(lower, capacity, cost, f"arc {u}->{v}")
        kd = _arc_kind(kind, f"arc {u}->{v}")
        k = self._claim_arc_id(arc)
        self._touch_arc(k)
        self._arc_alive[k] = True
        self._src[k] = u
        self._dst[k] = v
        self._low[k] = low
        self._cap[k] = cap
        self._cost[k] = c
        self._arc_kind[k] = kd
        self._link(k)
        self._num_arcs += 1
        self._raw_changes += 1
        return k

    def add_arcs(
        self,
        src: npt.ArrayLike,
        dst: npt.ArrayLike,
        *,
        capacity: npt.ArrayLike,
        cost: npt.ArrayLike,
        lower: npt.ArrayLike = 0,
        kind: npt.ArrayLike = 0,
    ) -> Int64Array:
        """Add many arcs at once (fresh ids above all used ones); return their ids."""
        try:
            s, d, cap, c, low, kd = (
                np.atleast_1d(x)
                for x in np.broadcast_arrays(
                    *(
                        np.asarray(x, dtype=np.int64)
                        for x in (src, dst, capacity, cost, lower, kind)
                    )
                )
            )
        except ValueError:
            raise FlowGraphError("add_arcs: argument lengths do not match") from None
        count = len(s)
        if count == 0:
            return np.zeros(0, dtype=np.int64)
        for name, ends in (("source", s), ("destination", d)):
            bad = (ends <= 0) | (ends >= self._node_top)
            bad[~bad] = ~self._node_alive[ends[~bad]]
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                raise FlowGraphError(f"arc #{i}: {name} node {int(ends[i])} does not exist")
        loops = np.flatnonzero(s == d)
        if len(loops):
            i = int(loops[0])
            raise FlowGraphError(f"arc #{i}: self-loop on node {int(s[i])}")
        # Comparisons rather than np.abs, which leaves -2**63 negative.
        bad_cost = (c > MAX_COST) | (c < -MAX_COST)
        bad_values = (low < 0) | (low > cap) | (cap > MAX_CAPACITY) | bad_cost
        if bad_values.any():
            i = int(np.flatnonzero(bad_values)[0])
            self._check_arc_values(low[i], cap[i], c[i], f"arc #{i} {int(s[i])}->{int(d[i])}")
        bad_kinds = np.flatnonzero((kd < 0) | (kd > MAX_ARC_KIND))
        if len(bad_kinds):
            i = int(bad_kinds[0])
            _arc_kind(int(kd[i]), f"arc #{i} {int(s[i])}->{int(d[i])}")
        first = self._arc_top
        self._ensure_arcs(first + count)
        ids = np.arange(first, first + count, dtype=np.int64)
        self._arc_top = first + count
        self._touch_arcs(ids)
        self._arc_alive[ids] = True
        self._src[ids] = s
        self._dst[ids] = d
        self._low[ids] = low
        self._cap[ids] = cap
        self._cost[ids] = c
        self._arc_kind[ids] = kd
        _link_arcs(
            ids,
            self._src,
            self._dst,
            self._out_first,
            self._out_next,
            self._out_prev,
            self._in_first,
            self._in_next,
            self._in_prev,
            self._out_deg,
            self._in_deg,
        )
        self._num_arcs += count
        self._raw_changes += count
        return ids

    def change_arc(
        self,
        arc: SupportsIndex,
        *,
        capacity: SupportsIndex | None = None,
        cost: SupportsIndex | None = None,
        lower: SupportsIndex | None = None,
        kind: SupportsIndex | None = None,
    ) -> None:
        """Change an arc's bounds, cost or kind; arguments left out keep their value."""
        k = self._live_arc(arc)
        low = self._low[k] if lower is None else lower
        cap = self._cap[k] if capacity is None else capacity
        c = self._cost[k] if cost is None else cost
        low, cap, c = self._check_arc_values(low, cap, c, f"arc {k}")
        kd = int(self._arc_kind[k]) if kind is None else _arc_kind(kind, f"arc {k}")
        if (low, cap, c, kd) == (self._low[k], self._cap[k], self._cost[k], self._arc_kind[k]):
            return
        self._touch_arc(k)
        self._low[k] = low
        self._cap[k] = cap
        self._cost[k] = c
        self._arc_kind[k] = kd
        self._raw_changes += 1

    def remove_arc(self, arc: SupportsIndex) -> None:
        self._remove_arc(self._live_arc(arc))
        self._raw_changes += 1

    # ------------------------------------------------------------------ change log

    def take_changes(self) -> ChangeBatch:
        """Return the net changes since the last call and start a new round."""
        batch = self._net_changes()
        self.discard_changes()
        return batch

    def discard_changes(self) -> None:
        """Forget the changes recorded so far (after a full snapshot was handed to a solver)."""
        self._epoch += 1
        self._touched_nodes = []
        self._touched_arcs = []
        self._raw_changes = 0

    def snapshot(self) -> ChangeBatch:
        """The whole graph as a reset batch: every live node and arc as an addition."""
        nodes = self.node_ids()
        arcs = self.arc_ids()
        rows = np.empty((len(nodes) + len(arcs), ROW_WIDTH), dtype=np.int64)
        _fill_snapshot_rows(
            rows,
            nodes,
            arcs,
            self._supply,
            self._node_kind,
            self._src,
            self._dst,
            self._low,
            self._cap,
            self._cost,
            self._arc_kind,
        )
        return ChangeBatch(rows, reset=True, raw_changes=len(rows))

    def apply(self, batch: ChangeBatch) -> None:
        """Replay a batch (from `take_changes` or `snapshot` of a graph with the same history).

        The whole batch is checked first (`batch_problem`, `snapshot_problem`): a batch that does
        not fit this graph raises `FlowGraphError` naming the first bad row, and the graph and its
        change log stay exactly as they were.
        """
        if batch.reset:
            problem = snapshot_problem(batch.rows)
        else:
            problem = batch_problem(batch.rows, self._nodes_alive, self._arcs_alive)
        if problem:
            raise FlowGraphError(problem)
        if batch.reset:
            self._reset(len(batch), len(batch))
        for row in batch.rows.tolist():
            op, ident = ChangeOp(row[COL_OP]), row[COL_ID]
            if op is ChangeOp.REMOVE_NODE:
                self.remove_node(ident)
            elif op is ChangeOp.REMOVE_ARC:
                self.remove_arc(ident)
            elif op is ChangeOp.ADD_NODE:
                self.add_node(row[NODE_SUPPLY], row[NODE_KIND], node=ident)
            elif op is ChangeOp.SET_SUPPLY:
                self.set_supply(ident, row[NODE_SUPPLY])
            elif op is ChangeOp.ADD_ARC:
                self.add_arc(
                    row[ARC_SRC],
                    row[ARC_DST],
                    lower=row[ARC_LOW],
                    capacity=row[ARC_CAP],
                    cost=row[ARC_COST],
                    kind=row[ARC_KIND],
                    arc=ident,
                )
            else:
                self.change_arc(
                    ident,
                    lower=row[ARC_LOW],
                    capacity=row[ARC_CAP],
                    cost=row[ARC_COST],
                    kind=row[ARC_KIND],
                )

    def copy(self) -> FlowGraph:
        """An independent graph with the same nodes, arcs and ids (and no pending changes)."""
        other = FlowGraph()
        other.apply(self.snapshot())
        other.discard_changes()
        return other

    # ------------------------------------------------------------------ internals

    def _nodes_alive(self, ids: Int64Array) -> npt.NDArray[np.bool_]:
        """Which of these (non-negative) node ids are live: `batch_problem`'s node lookup."""
        inside = ids < self._node_top
        alive = np.zeros(len(ids), dtype=np.bool_)
        alive[inside] = self._node_alive[ids[inside]]
        return alive

    def _arcs_alive(self, ids: Int64Array) -> tuple[npt.NDArray[np.bool_], Int64Array, Int64Array]:
        """Which of these (non-negative) arc ids are live, and their ends: the arc lookup."""
        inside = ids < self._arc_top
        k = np.where(inside, ids, 0)
        return inside & self._arc_alive[k], self._src[k], self._dst[k]

    def _live_node(self, node: SupportsIndex) -> int:
        v = _index(node, "node id")
        if not (0 < v < self._node_top and self._node_alive[v]):
            raise FlowGraphError(f"node {v} does not exist")
        return v

    def _live_arc(self, arc: SupportsIndex) -> int:
        k = _index(arc, "arc id")
        if not (0 <= k < self._arc_top and self._arc_alive[k]):
            raise FlowGraphError(f"arc {k} does not exist")
        return k

    @staticmethod
    def _check_arc_values(
        lower: SupportsIndex, capacity: SupportsIndex, cost: SupportsIndex, what: str
    ) -> tuple[int, int, int]:
        low = _index(lower, f"{what}: lower bound")
        cap = _index(capacity, f"{what}: capacity")
        c = _index(cost, f"{what}: cost")
        if cap < 0:
            raise FlowGraphError(f"{what}: negative capacity {cap}")
        if cap > MAX_CAPACITY:
            raise FlowGraphError(f"{what}: capacity {cap} exceeds the limit of {MAX_CAPACITY}")
        if not 0 <= low <= cap:
            raise FlowGraphError(f"{what}: lower bound {low} is not within [0, capacity {cap}]")
        if abs(c) > MAX_COST:
            raise FlowGraphError(f"{what}: cost {c} exceeds the limit of {MAX_COST} in magnitude")
        return low, cap, c

    def _claim_node_id(self, node: SupportsIndex | None) -> int:
        if node is None:
            while self._free_nodes:
                v = self._free_nodes.pop()
                if not self._node_alive[v]:
                    return v
            v = self._node_top
        else:
            v = _index(node, "node id")
            if v <= 0:
                raise FlowGraphError(f"node ids start at 1, got {v}")
            if v >= MAX_ID:
                raise FlowGraphError(f"node id {v} exceeds the limit of {MAX_ID - 1}")
            if v < self._node_top and self._node_alive[v]:
                raise FlowGraphError(f"node {v} already exists")
            if v >= self._node_top:
                # Ids skipped over become free.
                self._free_nodes.extend(range(v - 1, self._node_top - 1, -1))
        self._ensure_nodes(v + 1)
        self._node_top = max(self._node_top, v + 1)
        return v

    def _claim_arc_id(self, arc: SupportsIndex | None) -> int:
        if arc is None:
            while self._free_arcs:
                k = self._free_arcs.pop()
                if not self._arc_alive[k]:
                    return k
            k = self._arc_top
        else:
            k = _index(arc, "arc id")
            if k < 0:
                raise FlowGraphError(f"arc ids start at 0, got {k}")
            if k >= MAX_ID:
                raise FlowGraphError(f"arc id {k} exceeds the limit of {MAX_ID - 1}")
            if k < self._arc_top and self._arc_alive[k]:
                raise FlowGraphError(f"arc {k} already exists")
            if k >= self._arc_top:
                self._free_arcs.extend(range(k - 1, self._arc_top - 1, -1))
        self._ensure_arcs(k + 1)
        self._arc_top = max(self._arc_top, k + 1)
        return k

    def _ensure_nodes(self, size: int) -> None:
        if size <= len(self._node_alive):
            return
        new = max(size, 2 * len(self._node_alive))
        for name, fill in (
            ("_node_alive", False),
            ("_supply", 0),
            ("_node_kind", 0),
            ("_out_first", -1),
            ("_in_first", -1),
            ("_out_deg", 0),
            ("_in_deg", 0),
            ("_node_epoch", 0),
            ("_node_was_alive", False),
            ("_node_was_supply", 0),
            ("_node_killed", False),
        ):
            setattr(self, name, _grown(getattr(self, name), new, fill))

    def _ensure_arcs(self, size: int) -> None:
        if size <= len(self._arc_alive):
            return
        new = max(size, 2 * len(self._arc_alive))
        for name, fill in (
            ("_arc_alive", False),
            ("_src", 0),
            ("_dst", 0),
            ("_low", 0),
            ("_cap", 0),
            ("_cost", 0),
            ("_arc_kind", 0),
            ("_out_next", -1),
            ("_out_prev", -1),
            ("_in_next", -1),
            ("_in_prev", -1),
            ("_arc_epoch", 0),
            ("_arc_was_alive", False),
        ):
            setattr(self, name, _grown(getattr(self, name), new, fill))
        was = np.zeros((new, 6), dtype=np.int64)
        was[: len(self._arc_was)] = self._arc_was
        self._arc_was = was

    def _touch_node(self, v: int) -> None:
        if self._node_epoch[v] != self._epoch:
            self._node_epoch[v] = self._epoch
            self._node_was_alive[v] = self._node_alive[v]
            self._node_was_supply[v] = self._supply[v]
            self._node_killed[v] = False
            self._touched_nodes.append(v)

    def _touch_nodes(self, ids: Int64Array) -> None:
        fresh = ids[self._node_epoch[ids] != self._epoch]
        self._node_epoch[fresh] = self._epoch
        self._node_was_alive[fresh] = self._node_alive[fresh]
        self._node_was_supply[fresh] = self._supply[fresh]
        self._node_killed[fresh] = False
        self._touched_nodes.extend(fresh.tolist())

    def _touch_arc(self, k: int) -> None:
        if self._arc_epoch[k] != self._epoch:
            self._arc_epoch[k] = self._epoch
            self._arc_was_alive[k] = self._arc_alive[k]
            w = self._arc_was[k]
            w[0], w[1], w[2] = self._src[k], self._dst[k], self._low[k]
            w[3], w[4], w[5] = self._cap[k], self._cost[k], self._arc_kind[k]
            self._touched_arcs.append(k)

    def _touch_arcs(self, ids: Int64Array) -> None:
        fresh = ids[self._arc_epoch[ids] != self._epoch]
        self._arc_epoch[fresh] = self._epoch
        self._arc_was_alive[fresh] = self._arc_alive[fresh]
        self._arc_was[fresh] = np.stack(
            [
                self._src[fresh],
                self._dst[fresh],
                self._low[fresh],
                self._cap[fresh],
                self._cost[fresh],
                self._arc_kind[fresh].astype(np.int64),
            ],
            axis=1,
        )
        self._touched_arcs.extend(fresh.tolist())

    def _link(self, k: int) -> None:
        u, v = int(self._src[k]), int(self._dst[k])
        h = int(self._out_first[u])
        self._out_next[k], self._out_prev[k] = h, -1
        if h >= 0:
            self._out_prev[h] = k
        self._out_first[u] = k
        self._out_deg[u] += 1
        h = int(self._in_first[v])
        self._in_next[k], self._in_prev[k] = h, -1
        if h >= 0:
            self._in_prev[h] = k
        self._in_first[v] = k
        self._in_deg[v] += 1

    def _remove_arc(self, k: int) -> None:
        self._touch_arc(k)
        u, v = int(self._src[k]), int(self._dst[k])
        nxt, prv = int(self._out_next[k]), int(self._out_prev[k])
        if prv >= 0:
            self._out_next[prv] = nxt
        else:
            self._out_first[u] = nxt
        if nxt >= 0:
            self._out_prev[nxt] = prv
        nxt, prv = int(self._in_next[k]), int(self._in_prev[k])
        if prv >= 0:
            self._in_next[prv] = nxt
        else:
            self._in_first[v] = nxt
        if nxt >= 0:
            self._in_prev[nxt] = prv
        self._out_deg[u] -= 1
        self._in_deg[v] -= 1
        self._arc_alive[k] = False
        self._free_arcs.append(k)
        self._num_arcs -= 1

    def _fill_arc_rows(self, rows: Int64Array, op: ChangeOp, arcs: Int64Array) -> None:
        rows[:, COL_OP] = op
        rows[:, COL_ID] = arcs
        rows[:, ARC_SRC] = self._src[arcs]
        rows[:, ARC_DST] = self._dst[arcs]
        rows[:, ARC_LOW] = self._low[arcs]
        rows[:, ARC_CAP] = self._cap[arcs]
        rows[:, ARC_COST] = self._cost[arcs]
        rows[:, ARC_KIND] = self._arc_kind[arcs]

    def _net_changes(self) -> ChangeBatch:
        nodes = np.unique(np.asarray(self._touched_nodes, dtype=np.int64))
        arcs = np.unique(np.asarray(self._touched_arcs, dtype=np.int64))
        alive_now = self._node_alive[nodes]
        was_alive = self._node_was_alive[nodes]
        killed = self._node_killed[nodes]
        removed_nodes = nodes[was_alive & killed]
        added_nodes = nodes[alive_now & (~was_alive | killed)]
        kept = alive_now & was_alive & ~killed
        resupplied = nodes[kept & (self._supply[nodes] != self._node_was_supply[nodes])]

        # A node removed in this round takes its incident arcs with it in the solver: drop them.
        def killed_now(ids: Int64Array) -> npt.NDArray[np.bool_]:
            mask: npt.NDArray[np.bool_] = (
                self._node_epoch[ids] == self._epoch
            ) & self._node_killed[ids]
            return mask

        was = self._arc_was[arcs]
        was_on = self._arc_was_alive[arcs] & ~killed_now(was[:, 0]) & ~killed_now(was[:, 1])
        now_on = self._arc_alive[arcs]
        same_ends = (self._src[arcs] == was[:, 0]) & (self._dst[arcs] == was[:, 1])
        removed_arcs = arcs[was_on & (~now_on | ~same_ends)]
        added_arcs = arcs[now_on & (~was_on | ~same_ends)]
        values_now = np.stack(
            [
                self._low[arcs],
                self._cap[arcs],
                self._cost[arcs],
                self._arc_kind[arcs].astype(np.int64),
            ],
            axis=1,
        )
        differs = (values_now != was[:, 2:6]).any(axis=1)
        changed = was_on & now_on & same_ends & differs
        changed_arcs = arcs[changed]

        parts: list[Int64Array] = []

        def node_rows(op: ChangeOp, ids: Int64Array) -> None:
            r = np.zeros((len(ids), ROW_WIDTH), dtype=np.int64)
            r[:, COL_OP] = op
            r[:, COL_ID] = ids
            r[:, NODE_SUPPLY] = self._supply[ids]
            r[:, NODE_KIND] = self._node_kind[ids]
            parts.append(r)

        node_rows(ChangeOp.REMOVE_NODE, removed_nodes)
        r = np.zeros((len(removed_arcs), ROW_WIDTH), dtype=np.int64)
        wr = self._arc_was[removed_arcs]
        r[:, COL_OP] = ChangeOp.REMOVE_ARC
        r[:, COL_ID] = removed_arcs
        r[:, ARC_SRC] = wr[:, 0]
        r[:, ARC_DST] = wr[:, 1]
        r[:, ARC_COST] = wr[:, 4]
        r[:, ARC_KIND] = wr[:, 5]
        r[:, ARC_OLD_COST] = wr[:, 4]
        parts.append(r)
        node_rows(ChangeOp.ADD_NODE, added_nodes)
        node_rows(ChangeOp.SET_SUPPLY, resupplied)
        r = np.zeros((len(added_arcs), ROW_WIDTH), dtype=np.int64)
        self._fill_arc_rows(r, ChangeOp.ADD_ARC, added_arcs)
        r[:, ARC_OLD_COST] = self._cost[added_arcs]
        parts.append(r)
        r = np.zeros((len(changed_arcs), ROW_WIDTH), dtype=np.int64)
        self._fill_arc_rows(r, ChangeOp.CHANGE_ARC, changed_arcs)
        r[:, ARC_OLD_COST] = self._arc_was[changed_arcs, 4]
        parts.append(r)
        rows = np.concatenate(parts) if parts else np.zeros((0, ROW_WIDTH), dtype=np.int64)
        return ChangeBatch(rows, raw_changes=self._raw_changes)


# ---------------------------------------------------------------------- checking a batch
#
# A `ChangeBatch` is replayed row by row by code that trusts it: `FlowGraph.apply` would stop
# halfway at a bad row, and the solvers' compiled `apply_rows` would read and write out of
# bounds (removing an arc that does not exist crashes the interpreter; a negative node id wraps
# around to another node). So a batch is checked whole first, against the ids the graph or
# residual network holds, and the first bad row is named; checking changes nothing.
#
# `batch_problem` (changes) works in three steps, so that its cost follows the batch and not the
# graph:
#   1. every row on its own (operation code, id ranges, values), vectorised;
#   2. the rows' order (the one `changes.py` documents, which makes replay valid);
#   3. a compiled replay of the rows, in order, that tracks only the ids the batch mentions:
#      whether each existed before the batch (asked through two lookups, so that graphs and
#      residual networks share this code) and what earlier rows of the batch did to it.
# `snapshot_problem` (reset batches) needs no replay: only additions, to an empty graph.

BoolArray = npt.NDArray[np.bool_]
# Which of these node ids (each within 1..MAX_ID - 1) name live nodes.
NodeLookup = Callable[[Int64Array], BoolArray]
# For these arc ids (each within 0..MAX_ID - 1): which are live, and their sources and
# destinations (anything where not live).
ArcLookup = Callable[[Int64Array], tuple[BoolArray, Int64Array, Int64Array]]

_NODE_OPS = (ChangeOp.REMOVE_NODE, ChangeOp.ADD_NODE, ChangeOp.SET_SUPPLY)
_OPS_WITH_ENDS = (ChangeOp.ADD_ARC, ChangeOp.CHANGE_ARC)
_ORDER = ", ".join(op.name.lower() for op in ChangeOp)

# Operation codes as plain ints for the compiled replay.
# Plain ints for the compiled code (numba freezes module globals as constants).
_OP_REMOVE_NODE = int(ChangeOp.REMOVE_NODE)
_OP_ADD_NODE = int(ChangeOp.ADD_NODE)
_OP_SET_SUPPLY = int(ChangeOp.SET_SUPPLY)
_OP_ADD_ARC = int(ChangeOp.ADD_ARC)
_OP_CHANGE_ARC = int(ChangeOp.CHANGE_ARC)
_OP_FIRST = int(min(ChangeOp))
_OP_LAST = int(max(ChangeOp))
_MAX_NODE_KIND = int(max(NodeKind))


@kernel
def _fill_snapshot_rows(
    rows: Int64Array,
    nodes: Int64Array,
    arcs: Int64Array,
    supply: Int64Array,
    node_kind: npt.NDArray[np.int8],
    src: Int64Array,
    dst: Int64Array,
    low: Int64Array,
    cap: Int64Array,
    cost: Int64Array,
    arc_kind: npt.NDArray[np.int8],
) -> None:  # pragma: no cover - compiled
    """Write a snapshot's rows (nodes, then arcs) row by row: one pass over memory."""
    for i in range(len(nodes)):
        v = nodes[i]
        rows[i, :] = 0
        rows[i, COL_OP] = _OP_ADD_NODE
        rows[i, COL_ID] = v
        rows[i, NODE_SUPPLY] = supply[v]
        rows[i, NODE_KIND] = node_kind[v]
    base = len(nodes)
    for j in range(len(arcs)):
        a = arcs[j]
        i = base + j
        rows[i, COL_OP] = _OP_ADD_ARC
        rows[i, COL_ID] = a
        rows[i, ARC_SRC] = src[a]
        rows[i, ARC_DST] = dst[a]
        rows[i, ARC_LOW] = low[a]
        rows[i, ARC_CAP] = cap[a]
        rows[i, ARC_COST] = cost[a]
        rows[i, ARC_KIND] = arc_kind[a]
        rows[i, ARC_OLD_COST] = cost[a]
        for c in range(ARC_OLD_COST + 1, rows.shape[1]):
            rows[i, c] = 0


_OP_REMOVE_NODE = int(ChangeOp.REMOVE_NODE)
_OP_REMOVE_ARC = int(ChangeOp.REMOVE_ARC)
_OP_ADD_NODE = int(ChangeOp.ADD_NODE)
_OP_SET_SUPPLY = int(ChangeOp.SET_SUPPLY)
_OP_ADD_ARC = int(ChangeOp.ADD_ARC)

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
        FlowGraph._check_arc_values(row[ARC_LOW], row[ARC_CAP], row[ARC_COST], f"arc {ident}")
        _arc_kind(row[ARC_KIND], f"arc {ident}")
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
        if op in (_OP_REMOVE_NODE, _OP_ADD_NODE, _OP_SET_SUPPLY):
            if ident < 1 or ident > MAX_ID - 1:
                return i
            if op != _OP_REMOVE_NODE:
                supply = rows[i, NODE_SUPPLY]
                if supply < -MAX_CAPACITY or supply > MAX_CAPACITY:
                    return i
            if op == _OP_ADD_NODE:
                kind = rows[i, NODE_KIND]
                if kind < 0 or kind > _MAX_NODE_KIND:
                    return i
            continue
        if ident < 0 or ident > MAX_ID - 1:
            return i
        if op != _OP_ADD_ARC and op != _OP_CHANGE_ARC:
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
        if op == _OP_CHANGE_ARC:
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
        if op == _OP_REMOVE_NODE or op == _OP_ADD_NODE or op == _OP_SET_SUPPLY:  # noqa: SIM109
            st = node_state[ident]
            if st == 0:
                st = _KNOWN | (_LIVE if was_live[i] else 0)
            earlier = node_last[ident] - 1
            if op == _OP_ADD_NODE:
                if st & _LIVE:
                    return i, _NODE_EXISTS, earlier
                st |= _LIVE
            elif not st & _LIVE:
                return i, _NODE_MISSING, earlier
            elif op == _OP_REMOVE_NODE:
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
        if op == _OP_ADD_ARC:
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
        elif op == _OP_REMOVE_ARC:
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
