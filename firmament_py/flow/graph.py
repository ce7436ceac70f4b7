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
from collections.abc import Iterator
from typing import NamedTuple, SupportsIndex

import numpy as np
import numpy.typing as npt

from firmament_py.flow.batch_rules import batch_problem, snapshot_problem
from firmament_py.flow.change_log import arc_change_rows, change_arcs
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
    ROW_WIDTH,
    ChangeBatch,
    ChangeOp,
)
from firmament_py.flow.limits import (
    INFINITE_CAPACITY,
    MAX_ARC_KIND,
    MAX_CAPACITY,
    MAX_COST,
    MAX_ID,
    FlowGraphError,
    NodeKind,
    check_arc_kind,
    check_arc_values,
    check_index,
)
from firmament_py.jit import kernel

# The limits and the batch rules live in their own modules; importing them from here still works.
__all__ = [
    "INFINITE_CAPACITY",
    "MAX_ARC_KIND",
    "MAX_CAPACITY",
    "MAX_COST",
    "MAX_ID",
    "FlowGraph",
    "FlowGraphError",
    "GraphArrays",
    "NodeKind",
    "batch_problem",
    "snapshot_problem",
]

Int64Array = npt.NDArray[np.int64]


_LISTED_TOUCHES = 1 << 15
"""A round lists the ids it touches up to this many; beyond, `_touched` scans the stamps."""


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


def _walk(k: int, nxt: memoryview) -> list[int]:
    """The arc ids of a linked list from its first arc `k` along `nxt` (a memoryview)."""
    out: list[int] = []
    while k >= 0:
        out.append(k)
        k = nxt[k]
    return out


def _grown(array: npt.NDArray[np.generic], size: int, fill: int | bool) -> npt.NDArray[np.generic]:
    bigger = np.full(size, fill, dtype=array.dtype)
    bigger[: len(array)] = array
    return bigger


_LinkArrays = tuple[Int64Array, ...]
"""The arrays that hold each arc's ends and lists, for the kernels that link and unlink arcs:
src, dst, out_first, out_next, out_prev, in_first, in_next, in_prev, out_deg, in_deg."""


@kernel
def _link_arcs(ids: Int64Array, arrays: _LinkArrays) -> None:  # pragma: no cover - compiled
    """Put the arcs `ids` (ends set) at the heads of their lists, in order. The out-list and
    in-list steps are written out: a kernel call for each made linking a million arcs about 40%
    slower."""
    src, dst, out_first, out_next, out_prev, in_first, in_next, in_prev, out_deg, in_deg = arrays
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


@kernel
def _incident_arcs(
    nodes: Int64Array,
    out_first: Int64Array,
    out_next: Int64Array,
    in_first: Int64Array,
    in_next: Int64Array,
    out_deg: Int64Array,
    in_deg: Int64Array,
) -> Int64Array:  # pragma: no cover - compiled
    """Every arc leaving or entering one of `nodes` (an arc between two of them twice)."""
    total = 0
    for i in range(len(nodes)):
        total += out_deg[nodes[i]] + in_deg[nodes[i]]
    arcs = np.empty(total, dtype=np.int64)
    j = 0
    for i in range(len(nodes)):
        k = out_first[nodes[i]]
        while k >= 0:
            arcs[j] = k
            j += 1
            k = out_next[k]
        k = in_first[nodes[i]]
        while k >= 0:
            arcs[j] = k
            j += 1
            k = in_next[k]
    return arcs


@kernel
def _out_arcs_of(
    nodes: Int64Array, out_first: Int64Array, out_next: Int64Array, out_deg: Int64Array
) -> Int64Array:  # pragma: no cover - compiled
    """Every arc leaving one of the distinct `nodes`, node by node, each node's most recent
    arc first (the order of `out_arcs`)."""
    total = 0
    for i in range(len(nodes)):
        total += out_deg[nodes[i]]
    arcs = np.empty(total, dtype=np.int64)
    j = 0
    for i in range(len(nodes)):
        k = out_first[nodes[i]]
        while k >= 0:
            arcs[j] = k
            j += 1
            k = out_next[k]
    return arcs


@kernel
def _unlink_arcs(
    ids: Int64Array, arrays: _LinkArrays, arc_alive: npt.NDArray[np.bool_]
) -> None:  # pragma: no cover - compiled
    """Take the live arcs `ids` (each once) out of their lists and mark them dead (the two
    lists written out, as in `_link_arcs`)."""
    src, dst, out_first, out_next, out_prev, in_first, in_next, in_prev, out_deg, in_deg = arrays
    for i in range(len(ids)):
        k = ids[i]
        after, before = out_next[k], out_prev[k]
        if before >= 0:
            out_next[before] = after
        else:
            out_first[src[k]] = after
        if after >= 0:
            out_prev[after] = before
        after, before = in_next[k], in_prev[k]
        if before >= 0:
            in_next[before] = after
        else:
            in_first[dst[k]] = after
        if after >= 0:
            in_prev[after] = before
        out_deg[src[k]] -= 1
        in_deg[dst[k]] -= 1
        arc_alive[k] = False


@kernel
def _first_out_arcs(
    nodes: Int64Array,
    targets: Int64Array,
    kinds: Int64Array,
    out_first: Int64Array,
    out_next: Int64Array,
    dst: Int64Array,
    arc_kind: npt.NDArray[np.int8],
) -> Int64Array:  # pragma: no cover - compiled
    """For each i, the first arc out of `nodes[i]` to `targets[i]` of kind `kinds[i]`, or -1."""
    arcs = np.full(len(nodes), -1, dtype=np.int64)
    for i in range(len(nodes)):
        k = out_first[nodes[i]]
        while k >= 0:
            if dst[k] == targets[i] and arc_kind[k] == kinds[i]:
                arcs[i] = k
                break
            k = out_next[k]
    return arcs


def _claim_ids(
    free: list[int], alive: npt.NDArray[np.bool_], count: int, top: int
) -> tuple[Int64Array, int]:
    """`count` unused ids and the new top: first dead ids popped from the free list `free`, each
    once, in the order single pops would take them (a free list can hold an id twice, or a live
    one, after ids were claimed by number), then ids from `top` up."""
    claimed = np.zeros(0, dtype=np.int64)
    while len(claimed) < count and free:
        take = min(len(free), count - len(claimed))
        popped = np.array(free[-take:][::-1], dtype=np.int64)
        del free[-take:]
        popped = popped[~alive[popped]]
        _, first = np.unique(popped, return_index=True)
        popped = popped[np.sort(first)]
        claimed = np.concatenate([claimed, popped[~np.isin(popped, claimed)]])
    fresh = count - len(claimed)
    return np.concatenate([claimed, np.arange(top, top + fresh, dtype=np.int64)]), top + fresh


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
        self._node_views()
        self._arc_views()

    def _node_views(self) -> None:
        """Memoryviews over the node arrays, for one id at a time: indexing one reads and writes
        Python ints (bools for the masks), about twice as fast as a numpy array's scalar
        indexing. Made again whenever the arrays are (`_reset`, `_ensure_nodes`)."""
        self._m_node_alive = self._node_alive.data
        self._m_supply = self._supply.data
        self._m_node_kind = self._node_kind.data
        self._m_out_first = self._out_first.data
        self._m_in_first = self._in_first.data
        self._m_out_deg = self._out_deg.data
        self._m_in_deg = self._in_deg.data
        self._m_node_epoch = self._node_epoch.data
        self._m_node_was_alive = self._node_was_alive.data
        self._m_node_was_supply = self._node_was_supply.data
        self._m_node_killed = self._node_killed.data

    def _arc_views(self) -> None:
        """Memoryviews over the arc arrays (see `_node_views`); `_m_arc_was` is flat, six
        entries per arc."""
        self._m_arc_alive = self._arc_alive.data
        self._m_src = self._src.data
        self._m_dst = self._dst.data
        self._m_low = self._low.data
        self._m_cap = self._cap.data
        self._m_cost = self._cost.data
        self._m_arc_kind = self._arc_kind.data
        self._m_out_next = self._out_next.data
        self._m_out_prev = self._out_prev.data
        self._m_in_next = self._in_next.data
        self._m_in_prev = self._in_prev.data
        self._m_arc_epoch = self._arc_epoch.data
        self._m_arc_was_alive = self._arc_was_alive.data
        self._m_arc_was = self._arc_was.reshape(-1).data

    def __getstate__(self) -> dict[str, object]:
        # Memoryviews do not pickle or copy: drop them, and make them again on the way back.
        return {name: value for name, value in vars(self).items() if not name.startswith("_m_")}

    def __setstate__(self, state: dict[str, object]) -> None:
        vars(self).update(state)
        self._node_views()
        self._arc_views()

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
        return 0 < v < self._node_top and bool(self._m_node_alive[v])

    def has_arc(self, arc: SupportsIndex) -> bool:
        k = operator.index(arc)
        return 0 <= k < self._arc_top and bool(self._m_arc_alive[k])

    def node_ids(self) -> Int64Array:
        return np.flatnonzero(self._node_alive[: self._node_top]).astype(np.int64)

    def arc_ids(self) -> Int64Array:
        return np.flatnonzero(self._arc_alive[: self._arc_top]).astype(np.int64)

    def supply(self, node: SupportsIndex) -> int:
        return self._m_supply[self._live_node(node)]

    def node_kind(self, node: SupportsIndex) -> NodeKind:
        return NodeKind(self._m_node_kind[self._live_node(node)])

    def total_supply(self) -> int:
        alive = self._node_alive[: self._node_top]
        return int(self._supply[: self._node_top][alive].sum())

    def arc_src(self, arc: SupportsIndex) -> int:
        return self._m_src[self._live_arc(arc)]

    def arc_dst(self, arc: SupportsIndex) -> int:
        return self._m_dst[self._live_arc(arc)]

    def arc_lower(self, arc: SupportsIndex) -> int:
        return self._m_low[self._live_arc(arc)]

    def arc_capacity(self, arc: SupportsIndex) -> int:
        return self._m_cap[self._live_arc(arc)]

    def arc_cost(self, arc: SupportsIndex) -> int:
        return self._m_cost[self._live_arc(arc)]

    def arc_kind(self, arc: SupportsIndex) -> int:
        return self._m_arc_kind[self._live_arc(arc)]

    def out_arcs(self, node: SupportsIndex) -> list[int]:
        """Arcs leaving `node`, most recently added first."""
        return _walk(self._m_out_first[self._live_node(node)], self._m_out_next)

    def in_arcs(self, node: SupportsIndex) -> list[int]:
        """Arcs entering `node`, most recently added first."""
        return _walk(self._m_in_first[self._live_node(node)], self._m_in_next)

    def out_degree(self, node: SupportsIndex) -> int:
        return self._m_out_deg[self._live_node(node)]

    def in_degree(self, node: SupportsIndex) -> int:
        return self._m_in_deg[self._live_node(node)]

    def find_arcs(self, src: SupportsIndex, dst: SupportsIndex) -> list[int]:
        """All arcs from `src` to `dst` (parallel arcs are allowed), oldest id first."""
        u, v = self._live_node(src), self._live_node(dst)
        if self._m_out_deg[u] <= self._m_in_deg[v]:
            ends, want = self._m_dst, v
            arcs = _walk(self._m_out_first[u], self._m_out_next)
        else:
            ends, want = self._m_src, u
            arcs = _walk(self._m_in_first[v], self._m_in_next)
        return sorted(k for k in arcs if ends[k] == want)

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
        b = check_index(supply, "supply")
        if abs(b) > MAX_CAPACITY:
            raise FlowGraphError(f"supply {b} exceeds the limit of {MAX_CAPACITY} in magnitude")
        kind = self._node_kind_of(kind)
        v = self._claim_node_id(node)
        self._place_node(v, b, kind)
        return v

    @staticmethod
    def _node_kind_of(kind: object) -> NodeKind:
        """`kind` as a NodeKind; FlowGraphError naming it if it is none."""
        try:
            return NodeKind(operator.index(kind))  # type: ignore[arg-type]
        except (TypeError, ValueError):
            known = ", ".join(f"{k.value} ({k.name})" for k in NodeKind)
            raise FlowGraphError(f"node kind {kind!r} is not one of {known}") from None

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

    def _place_node(self, v: int, supply: int, kind: int) -> None:
        """Make the (free, allocated) id `v` a live node with this supply and kind."""
        self._touch_node(v)
        self._m_node_alive[v] = True
        self._m_supply[v] = supply
        self._m_node_kind[v] = kind
        self._m_out_first[v] = -1
        self._m_in_first[v] = -1
        self._m_out_deg[v] = 0
        self._m_in_deg[v] = 0
        self._num_nodes += 1
        self._raw_changes += 1

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
        self.trusted_remove_node(self._live_node(node))

    def set_supply(self, node: SupportsIndex, supply: SupportsIndex) -> None:
        v = self._live_node(node)
        b = check_index(supply, "supply")
        if abs(b) > MAX_CAPACITY:
            raise FlowGraphError(f"supply {b} exceeds the limit of {MAX_CAPACITY} in magnitude")
        if self._m_supply[v] == b:
            return
        self._touch_node(v)
        self._m_supply[v] = b
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
        low, cap, c = check_arc_values(lower, capacity, cost, f"arc {u}->{v}")
        kd = check_arc_kind(kind, f"arc {u}->{v}")
        k = self._claim_arc_id(arc)
        self._place_arc(k, u, v, low, cap, c, kd)
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
            check_arc_values(low[i], cap[i], c[i], f"arc #{i} {int(s[i])}->{int(d[i])}")
        bad_kinds = np.flatnonzero((kd < 0) | (kd > MAX_ARC_KIND))
        if len(bad_kinds):
            i = int(bad_kinds[0])
            check_arc_kind(int(kd[i]), f"arc #{i} {int(s[i])}->{int(d[i])}")
        first = self._arc_top
        self._ensure_arcs(first + count)
        ids = np.arange(first, first + count, dtype=np.int64)
        self._arc_top = first + count
        self._place_arcs(ids, s, d, low, cap, c, kd)
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
        low = self._m_low[k] if lower is None else lower
        cap = self._m_cap[k] if capacity is None else capacity
        c = self._m_cost[k] if cost is None else cost
        low, cap, c = check_arc_values(low, cap, c, f"arc {k}")
        if kind is None:
            self.trusted_change_arc(k, low, cap, c)
            return
        kd = check_arc_kind(kind, f"arc {k}")
        if (low, cap, c, kd) == (
            self._m_low[k],
            self._m_cap[k],
            self._m_cost[k],
            self._m_arc_kind[k],
        ):
            return
        self._touch_arc(k)
        self._m_low[k] = low
        self._m_cap[k] = cap
        self._m_cost[k] = c
        self._m_arc_kind[k] = kd
        self._raw_changes += 1

    def remove_arc(self, arc: SupportsIndex) -> None:
        self.trusted_remove_arc(self._live_arc(arc))

    # ------------------------------------------------------------------ trusted calls
    #
    # The same operations without checking their arguments, for an owner that got every id it
    # passes from this graph and every value from code that already applied the limits (the
    # scheduler's graph manager: its node ids come from `trusted_add_node(s)` and leave its
    # maps exactly when it removes them, its arc ids from `trusted_out_arcs` or
    # `trusted_find_out_arcs` of live nodes, and its values from `ArcDescriptor`s, checked
    # against the same limits by the policy manager; it makes most edits with the bulk calls
    # below). The invariant: a node id is live, an arc id is live, 0 <= lower <= capacity <=
    # MAX_CAPACITY, |cost| <= MAX_COST, 0 <= kind <= MAX_ARC_KIND, all plain ints (int64 arrays
    # for the bulk calls, ids distinct). Anything else corrupts the graph silently; the public
    # methods check all of it and then call these, so both paths make the same graph and the
    # same change log.

    def trusted_add_node(self, supply: int, kind: NodeKind) -> int:
        """`add_node(supply, kind)` without checks: |supply| <= MAX_CAPACITY."""
        v = self._claim_node_id(None)
        self._place_node(v, supply, kind)
        return v

    def trusted_remove_node(self, v: int) -> None:
        """`remove_node(v)` for a live node `v`, without checks."""
        arcs = _walk(self._m_out_first[v], self._m_out_next)
        arcs += _walk(self._m_in_first[v], self._m_in_next)
        alive = self._m_arc_alive
        for k in arcs:
            if alive[k]:
                self._remove_arc(k)
        self._touch_node(v)
        if self._m_node_was_alive[v]:
            self._m_node_killed[v] = True
        self._m_node_alive[v] = False
        self._free_nodes.append(v)
        self._num_nodes -= 1
        self._raw_changes += 1

    def trusted_add_arc(
        self, u: int, v: int, lower: int, capacity: int, cost: int, kind: int
    ) -> int:
        """`add_arc(u, v, lower=..., capacity=..., cost=..., kind=...)` for live nodes `u` and
        `v` and values within the limits; only the self-loop is still refused."""
        if u == v:
            raise FlowGraphError(f"self-loop on node {u}: arcs must join two distinct nodes")
        k = self._free_arc_id()
        self._place_arc(k, u, v, lower, capacity, cost, kind)
        return k

    def trusted_change_arc(self, k: int, lower: int, capacity: int, cost: int) -> None:
        """`change_arc(k, lower=..., capacity=..., cost=...)` (kind kept) for a live arc `k`
        and values within the limits, without checks."""
        low, cap, cst = self._m_low, self._m_cap, self._m_cost
        if low[k] == lower and cap[k] == capacity and cst[k] == cost:
            return
        self._touch_arc(k)
        low[k] = lower
        cap[k] = capacity
        cst[k] = cost
        self._raw_changes += 1

    def trusted_remove_arc(self, k: int) -> None:
        """`remove_arc(k)` for a live arc `k`, without checks."""
        self._remove_arc(k)
        self._raw_changes += 1

    def trusted_out_arcs(self, v: int) -> list[tuple[int, int, int, int, int, int]]:
        """`(arc, dst, kind, lower, capacity, cost)` of every arc leaving the live node `v`, most
        recently added first (the order of `out_arcs`), as Python ints read in one go."""
        dst, kind, low, cap, cost = (
            self._m_dst,
            self._m_arc_kind,
            self._m_low,
            self._m_cap,
            self._m_cost,
        )
        return [
            (k, dst[k], kind[k], low[k], cap[k], cost[k])
            for k in _walk(self._m_out_first[v], self._m_out_next)
        ]

    def trusted_in_degree(self, v: int) -> int:
        """`in_degree(v)` for a live node `v`, without checks."""
        return self._m_in_deg[v]

    # The same again for many at once (the graph manager's task pass): one call per round's
    # worth of edits instead of one per node or arc. The ids they take and free are the ones the
    # calls above would, in some order.

    def trusted_add_nodes(self, supplies: Int64Array, kinds: Int64Array) -> Int64Array:
        """`trusted_add_node(supply, kind)` for each pair at once; return the new ids."""
        ids, top = _claim_ids(self._free_nodes, self._node_alive, len(supplies), self._node_top)
        self._ensure_nodes(top)
        self._node_top = top
        self._place_nodes(ids, supplies, kinds)
        return ids

    def trusted_remove_nodes(self, nodes: Int64Array) -> None:
        """`trusted_remove_node(v)` for each of the distinct live `nodes` at once."""
        if not len(nodes):
            return
        incident = _incident_arcs(
            nodes,
            self._out_first,
            self._out_next,
            self._in_first,
            self._in_next,
            self._out_deg,
            self._in_deg,
        )
        self._unlink(np.unique(incident))
        self._touch_nodes(nodes)
        self._node_killed[nodes] |= self._node_was_alive[nodes]
        self._node_alive[nodes] = False
        self._free_nodes.extend(nodes.tolist())
        self._num_nodes -= len(nodes)
        self._raw_changes += len(nodes)

    def trusted_add_arcs(
        self,
        src: Int64Array,
        dst: Int64Array,
        lower: Int64Array,
        capacity: Int64Array,
        cost: Int64Array,
        kind: Int64Array,
    ) -> Int64Array:
        """`trusted_add_arc` for each arc at once (arrays of one length); return the new ids."""
        loops = np.flatnonzero(src == dst)
        if len(loops):
            v = int(src[loops[0]])
            raise FlowGraphError(f"self-loop on node {v}: arcs must join two distinct nodes")
        ids, top = _claim_ids(self._free_arcs, self._arc_alive, len(src), self._arc_top)
        self._ensure_arcs(top)
        self._arc_top = top
        self._place_arcs(ids, src, dst, lower, capacity, cost, kind)
        return ids

    def trusted_find_out_arcs(
        self, nodes: Int64Array, targets: Int64Array, kinds: Int64Array
    ) -> Int64Array:
        """For each i, the first arc (in `out_arcs` order) from the live node `nodes[i]` to
        `targets[i]` of kind `kinds[i]`, or -1 if it has none."""
        return _first_out_arcs(
            nodes, targets, kinds, self._out_first, self._out_next, self._dst, self._arc_kind
        )

    def trusted_out_arcs_of(self, nodes: Int64Array) -> Int64Array:
        """The ids of every arc leaving one of the distinct live `nodes`, node by node (each
        node's in `out_arcs` order); their ends and values are in `arrays`."""
        return _out_arcs_of(nodes, self._out_first, self._out_next, self._out_deg)

    def trusted_in_degrees(self, nodes: Int64Array) -> Int64Array:
        """`in_degree` of each of the live `nodes`."""
        return self._in_deg[nodes]

    def trusted_change_arcs(
        self, arcs: Int64Array, lower: Int64Array, capacity: Int64Array, cost: Int64Array
    ) -> None:
        """`trusted_change_arc(k, ...)` for each of the distinct live `arcs` at once."""
        fresh, changed = change_arcs(
            arcs,
            lower,
            capacity,
            cost,
            self._epoch,
            self._arc_epoch,
            self._arc_was_alive,
            self._arc_was,
            self._src,
            self._dst,
            self._low,
            self._cap,
            self._cost,
            self._arc_kind,
        )
        self._list_touched(self._touched_arcs, fresh)
        self._raw_changes += changed

    def trusted_remove_arcs(self, arcs: Int64Array) -> None:
        """`trusted_remove_arc(k)` for each of the distinct live `arcs` at once."""
        self._unlink(arcs)
        self._raw_changes += len(arcs)

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
        rows = np.zeros((len(nodes) + len(arcs), ROW_WIDTH), dtype=np.int64)
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
        v = check_index(node, "node id")
        if not (0 < v < self._node_top and self._m_node_alive[v]):
            raise FlowGraphError(f"node {v} does not exist")
        return v

    def _live_arc(self, arc: SupportsIndex) -> int:
        k = check_index(arc, "arc id")
        if not (0 <= k < self._arc_top and self._m_arc_alive[k]):
            raise FlowGraphError(f"arc {k} does not exist")
        return k

    def _claim_node_id(self, node: SupportsIndex | None) -> int:
        if node is None:
            free, alive = self._free_nodes, self._m_node_alive
            while free:
                v = free.pop()
                if not alive[v]:
                    return v
            v = self._node_top
        else:
            v = check_index(node, "node id")
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

    def _free_arc_id(self) -> int:
        """An unused arc id, claimed: the last one freed, or the next above the top."""
        free, alive = self._free_arcs, self._m_arc_alive
        while free:
            k = free.pop()
            if not alive[k]:
                return k
        k = self._arc_top
        self._ensure_arcs(k + 1)
        self._arc_top = k + 1
        return k

    def _claim_arc_id(self, arc: SupportsIndex | None) -> int:
        if arc is None:
            return self._free_arc_id()
        k = check_index(arc, "arc id")
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
        self._node_views()

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
        self._arc_views()

    def _touch_node(self, v: int) -> None:
        epoch = self._epoch
        if self._m_node_epoch[v] != epoch:
            self._m_node_epoch[v] = epoch
            self._m_node_was_alive[v] = self._m_node_alive[v]
            self._m_node_was_supply[v] = self._m_supply[v]
            self._m_node_killed[v] = False
            self._touched_nodes.append(v)

    def _touch_nodes(self, ids: Int64Array) -> None:
        fresh = ids[self._node_epoch[ids] != self._epoch]
        self._node_epoch[fresh] = self._epoch
        self._node_was_alive[fresh] = self._node_alive[fresh]
        self._node_was_supply[fresh] = self._supply[fresh]
        self._node_killed[fresh] = False
        self._list_touched(self._touched_nodes, fresh)

    def _touch_arc(self, k: int) -> None:
        epoch = self._epoch
        if self._m_arc_epoch[k] != epoch:
            self._m_arc_epoch[k] = epoch
            alive = self._m_arc_alive[k]
            self._m_arc_was_alive[k] = alive
            # Row k of `_arc_was`: src dst low cap cost kind. `_net_changes` reads the old values
            # of arcs that were alive only, so a dead arc's row is left as it is.
            if alive:
                w, i = self._m_arc_was, 6 * k
                w[i], w[i + 1], w[i + 2] = self._m_src[k], self._m_dst[k], self._m_low[k]
                w[i + 3], w[i + 4] = self._m_cap[k], self._m_cost[k]
                w[i + 5] = self._m_arc_kind[k]
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
        self._list_touched(self._touched_arcs, fresh)

    def _list_touched(self, touched: list[int], fresh: Int64Array) -> None:
        """Note ids stamped for the first time this round. Once a round has touched many, the
        stamps themselves say which (`_touched` scans them), and the list is not kept up: a
        Python int per id of a 135,000-arc repricing cost 3 ms to list and 4 ms to sort."""
        if len(touched) + len(fresh) <= _LISTED_TOUCHES:
            touched.extend(fresh.tolist())
        elif len(touched) <= _LISTED_TOUCHES:
            touched.extend([-1] * (_LISTED_TOUCHES + 1 - len(touched)))  # past the limit: scan

    def _place_arc(
        self, k: int, u: int, v: int, lower: int, capacity: int, cost: int, kind: int
    ) -> None:
        """Make the free, allocated id `k` a live arc from `u` to `v` with these values, at the
        head of `u`'s out-list and `v`'s in-list."""
        # `_touch_arc(k)`, inlined: `k` is free, so there are no old values to keep.
        epoch = self._epoch
        if self._m_arc_epoch[k] != epoch:
            self._m_arc_epoch[k] = epoch
            self._m_arc_was_alive[k] = False
            self._touched_arcs.append(k)
        self._m_arc_alive[k] = True
        self._m_src[k] = u
        self._m_dst[k] = v
        self._m_low[k] = lower
        self._m_cap[k] = capacity
        self._m_cost[k] = cost
        self._m_arc_kind[k] = kind
        first, nxt, prv = self._m_out_first, self._m_out_next, self._m_out_prev
        h = first[u]
        nxt[k] = h
        prv[k] = -1
        if h >= 0:
            prv[h] = k
        first[u] = k
        self._m_out_deg[u] += 1
        first, nxt, prv = self._m_in_first, self._m_in_next, self._m_in_prev
        h = first[v]
        nxt[k] = h
        prv[k] = -1
        if h >= 0:
            prv[h] = k
        first[v] = k
        self._m_in_deg[v] += 1
        self._num_arcs += 1
        self._raw_changes += 1

    def _place_arcs(
        self,
        ids: Int64Array,
        src: Int64Array,
        dst: Int64Array,
        lower: Int64Array,
        capacity: Int64Array,
        cost: Int64Array,
        kind: Int64Array,
    ) -> None:
        """`_place_arc` for each of the distinct free, allocated `ids` at once, in order."""
        self._touch_arcs(ids)
        self._arc_alive[ids] = True
        self._src[ids] = src
        self._dst[ids] = dst
        self._low[ids] = lower
        self._cap[ids] = capacity
        self._cost[ids] = cost
        self._arc_kind[ids] = kind
        _link_arcs(ids, self._link_arrays())
        self._num_arcs += len(ids)
        self._raw_changes += len(ids)

    def _link_arrays(self) -> _LinkArrays:
        """The arrays `_link_arcs` and `_unlink_arcs` work on (see `_LinkArrays`)."""
        return (
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

    def _unlink(self, ids: Int64Array) -> None:
        """`_remove_arc` for each of the distinct live arcs `ids` at once."""
        if not len(ids):
            return
        self._touch_arcs(ids)
        _unlink_arcs(ids, self._link_arrays(), self._arc_alive)
        self._free_arcs.extend(ids.tolist())
        self._num_arcs -= len(ids)

    def _remove_arc(self, k: int) -> None:
        """Unlink and free live arc `k` (the caller counts the raw change, if any)."""
        u, v = self._m_src[k], self._m_dst[k]
        # `_touch_arc(k)`, inlined: `k` is alive, so its old values are kept.
        epoch = self._epoch
        if self._m_arc_epoch[k] != epoch:
            self._m_arc_epoch[k] = epoch
            self._m_arc_was_alive[k] = True
            w, i = self._m_arc_was, 6 * k
            w[i], w[i + 1], w[i + 2] = u, v, self._m_low[k]
            w[i + 3], w[i + 4], w[i + 5] = self._m_cap[k], self._m_cost[k], self._m_arc_kind[k]
            self._touched_arcs.append(k)
        nxts, prvs = self._m_out_next, self._m_out_prev
        nxt, prv = nxts[k], prvs[k]
        if prv >= 0:
            nxts[prv] = nxt
        else:
            self._m_out_first[u] = nxt
        if nxt >= 0:
            prvs[nxt] = prv
        nxts, prvs = self._m_in_next, self._m_in_prev
        nxt, prv = nxts[k], prvs[k]
        if prv >= 0:
            nxts[prv] = nxt
        else:
            self._m_in_first[v] = nxt
        if nxt >= 0:
            prvs[nxt] = prv
        self._m_out_deg[u] -= 1
        self._m_in_deg[v] -= 1
        self._m_arc_alive[k] = False
        self._free_arcs.append(k)
        self._num_arcs -= 1

    def _touched(self, touched: list[int], epochs: Int64Array, top: int) -> Int64Array:
        """The ids touched this round, sorted: each is listed once (when first stamped), so a
        sort does; when they are many (or more than the list keeps), one scan of the stamps is
        cheaper than sorting them."""
        if 16 * len(touched) > top or len(touched) > _LISTED_TOUCHES:
            return np.flatnonzero(epochs[:top] == self._epoch)
        return np.sort(np.asarray(touched, dtype=np.int64))

    def _net_changes(self) -> ChangeBatch:
        nodes = self._touched(self._touched_nodes, self._node_epoch, self._node_top)
        arcs = self._touched(self._touched_arcs, self._arc_epoch, self._arc_top)
        alive_now = self._node_alive[nodes]
        was_alive = self._node_was_alive[nodes]
        killed = self._node_killed[nodes]
        removed_nodes = nodes[was_alive & killed]
        added_nodes = nodes[alive_now & (~was_alive | killed)]
        kept = alive_now & was_alive & ~killed
        resupplied = nodes[kept & (self._supply[nodes] != self._node_was_supply[nodes])]

        # A node removed in this round takes its incident arcs with it in the solver: those
        # arcs are gone already (`arc_change_rows`).
        removed_arcs, added_arcs, changed_arcs = arc_change_rows(
            arcs,
            self._epoch,
            self._node_epoch,
            self._node_killed,
            self._arc_alive,
            self._arc_was_alive,
            self._arc_was,
            self._src,
            self._dst,
            self._low,
            self._cap,
            self._cost,
            self._arc_kind,
        )

        parts: list[Int64Array] = []

        def node_rows(op: ChangeOp, ids: Int64Array) -> None:
            r = np.zeros((len(ids), ROW_WIDTH), dtype=np.int64)
            r[:, COL_OP] = op
            r[:, COL_ID] = ids
            r[:, NODE_SUPPLY] = self._supply[ids]
            r[:, NODE_KIND] = self._node_kind[ids]
            parts.append(r)

        node_rows(ChangeOp.REMOVE_NODE, removed_nodes)
        parts.append(removed_arcs)
        node_rows(ChangeOp.ADD_NODE, added_nodes)
        node_rows(ChangeOp.SET_SUPPLY, resupplied)
        parts += (added_arcs, changed_arcs)
        rows = np.concatenate(parts) if parts else np.zeros((0, ROW_WIDTH), dtype=np.int64)
        return ChangeBatch(rows, raw_changes=self._raw_changes)


# ---------------------------------------------------------------------- snapshots


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
    """Write a snapshot's rows (nodes, then arcs; `rows` comes zeroed) row by row: one pass."""
    for i in range(len(nodes)):
        v = nodes[i]
        rows[i, COL_OP] = OP_ADD_NODE
        rows[i, COL_ID] = v
        rows[i, NODE_SUPPLY] = supply[v]
        rows[i, NODE_KIND] = node_kind[v]
    base = len(nodes)
    for j in range(len(arcs)):
        a = arcs[j]
        i = base + j
        rows[i, COL_OP] = OP_ADD_ARC
        rows[i, COL_ID] = a
        rows[i, ARC_SRC] = src[a]
        rows[i, ARC_DST] = dst[a]
        rows[i, ARC_LOW] = low[a]
        rows[i, ARC_CAP] = cap[a]
        rows[i, ARC_COST] = cost[a]
        rows[i, ARC_KIND] = arc_kind[a]
        rows[i, ARC_OLD_COST] = cost[a]
