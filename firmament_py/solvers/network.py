"""The solver-side residual network: flows and potentials over a copy of a `FlowGraph`.

Each solver owns one `ResidualNetwork` and keeps it between solves; `ChangeBatch`es keep it in
step with the `FlowGraph`, so a solve after a small change starts from the previous flow.

Layout (arrays, not objects; every kernel is numba-compiled and reads `ResidualArrays`):

* Residual arcs live in *slots*. The residual pair of arc `k` is a forward slot (label `2k`) and a
  reverse slot (label `2k+1`); `mate[s]` is the other slot of the pair, `head[s]` the node the
  residual arc enters, so `tail(s) == head[mate[s]]`.
* Each node owns a contiguous block of slots `[first, first + room)`; the first `deg` are in use,
  forward slots before reverse ones (`nfwd` of them). Adding a slot is O(1) (a full block moves to
  the end of the slot arrays with doubled room); removing one is O(1) (the last slot of its
  segment fills the hole). Kernels therefore scan a node's arcs as a contiguous range, and a hub
  such as the cluster aggregator lists its few forward arcs apart from its many reverse ones.
* Lower bounds are folded in: slots carry the flow above the lower bound, and `excess` counts the
  lower bounds as if they were supplies.
* `paircap[s] == paircap[mate[s]] == rescap[s] + rescap[mate[s]]` (the arc's capacity above its
  lower bound), so a scan of a node's own block learns the residual capacity of the *opposite*
  arc, `paircap[s] - rescap[s]`, and its cost, `-cost[s]`, without touching the mate's slot in
  another node's block (a cache miss per arc on graphs of millions of slots).
* `meta[NEG_UNCAPACITATED]` counts arcs of infinite capacity and negative cost: only when it is
  non-zero can the problem be unbounded, and only then is a Bellman-Ford search worth running.
* `excess[v] = supply[v] + inflow(v) - outflow(v)`; a solved network has zero excess everywhere.
* `price[v]` is the potential pi(v); a residual arc's reduced cost is `cost - pi(tail) + pi(head)`.
  Optimality is: no residual arc has negative reduced cost.
* `mark` is scratch: every kernel leaves it all zero (price refinement's queue flags rely on it).
* A large array is the start of a zeroed buffer four times its length and grows into it without
  a copy (`_grow`); the untouched rest costs address space, not memory, and stays zero.

A batch records what it touched (`dirty` arc ids, `fresh` node ids) so that solvers repair
optimality only where it may have broken.
"""

from __future__ import annotations

import mmap
from typing import Any, NamedTuple, TypeVar

import numpy as np
import numpy.typing as npt

from firmament_py.flow.changes import (
    ARC_CAP,
    ARC_COST,
    ARC_DST,
    ARC_LOW,
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
    ChangeBatch,
)
from firmament_py.flow.graph import INFINITE_CAPACITY, FlowGraph
from firmament_py.jit import kernel

Int64Array = npt.NDArray[np.int64]
Int8Array = npt.NDArray[np.int8]

# meta[] entries
TOP = 0  # first slot never handed out
DEAD = 1  # slots in abandoned blocks
LIVE_NODES = 2
LIVE_ARCS = 3
N_DIRTY = 4  # used entries of dirty[]
N_FRESH = 5  # used entries of fresh[]
DIRTY_OVERFLOW = 6  # 1 if dirty[] overflowed: repair must scan everything
NEG_UNCAPACITATED = 7  # arcs with infinite capacity and negative cost
META_SIZE = 8

# apply_rows() status codes
APPLIED = 0
NEED_SLOTS = 1

_SLACK = 2  # extra room given to a block when it is (re)allocated

# A block laid out by a load or a compaction also gets room for 1/_IN_ROOM more arcs in than it
# has. New arcs arrive where arcs already come in (machines, aggregators; tasks have none in),
# and a block without room is moved to the top with every mate it points to rewritten: a random
# write per slot. A job of 10,000 tasks arriving at S90's cluster moved 634,000 slots that way.
_IN_ROOM = 4

# A loaded network has this fraction more node ids, arc ids and slots than its snapshot needs:
# the rounds after a load add nodes and arcs, and the first one to outgrow the arrays copies
# all of them (measured: a 10,000-task job's batch took 30 ms to apply on a load-spreading
# cluster without the room, 7 with it; the first incremental S90 round 63 ms against 13).
_LOAD_ROOM = 0.25


class ResidualArrays(NamedTuple):
    """All state of a residual network, as arrays numba kernels can take."""

    # by slot
    head: Int64Array
    mate: Int64Array
    label: Int64Array
    cost: Int64Array
    rescap: Int64Array
    paircap: Int64Array
    # by node id
    first: Int64Array
    nfwd: Int64Array
    deg: Int64Array
    room: Int64Array
    alive: Int8Array
    kind: Int8Array
    supply: Int64Array
    excess: Int64Array
    price: Int64Array
    mark: Int64Array  # scratch, all zero between kernel calls
    # by arc id
    fwd: Int64Array
    low: Int64Array
    # work lists and counters
    dirty: Int64Array
    fresh: Int64Array
    meta: Int64Array


class WholeNetwork(NamedTuple):
    """A whole network as columns, the i-th node or arc of each together: what `load` reads
    from a snapshot's rows and `load_graph` from a graph's arrays."""

    node_ids: Int64Array
    supply: Int64Array
    kind: Int64Array
    arc_ids: Int64Array
    src: Int64Array
    dst: Int64Array
    low: Int64Array
    cap: Int64Array
    cost: Int64Array


# A large array (from `_RESERVE_FROM_BYTES`) is the start of a zeroed buffer `_RESERVE` times
# its length, and grows by taking more of it, without a copy (`_grow`); only a buffer outgrown
# is copied. The buffer is an anonymous private mapping of its own (asking for huge pages, as
# numpy does for large arrays), which the kernel fills lazily whatever the allocator would do,
# so the reserve costs address space, not memory; from the heap, calloc would zero it in full.
# Copying incremental S90's six slot arrays as they grew took 500 ms in one round: each new 40 MB
# array took up to 83 ms to fault in while the kernel compacted memory for the huge pages numpy
# asks for (docs/benchmarks-history.md).
_RESERVE = 4
_RESERVE_FROM_BYTES = 8 << 20
_PRIVATE_ANONYMOUS = mmap.MAP_PRIVATE | getattr(mmap, "MAP_ANONYMOUS", getattr(mmap, "MAP_ANON", 0))


def empty_arrays(nodes: int = 2, arcs: int = 1, slots: int = 2) -> ResidualArrays:
    def z(n: int) -> Int64Array:
        return _reserved(n, np.int64, 0)

    return ResidualArrays(
        head=z(slots),
        mate=z(slots),
        label=_reserved(slots, np.int64, -1),
        cost=z(slots),
        rescap=z(slots),
        paircap=z(slots),
        first=z(nodes),
        nfwd=z(nodes),
        deg=z(nodes),
        room=z(nodes),
        alive=_reserved(nodes, np.int8, 0),
        kind=_reserved(nodes, np.int8, 0),
        supply=z(nodes),
        excess=z(nodes),
        price=z(nodes),
        mark=z(nodes),
        fwd=_reserved(arcs, np.int64, -1),
        low=z(arcs),
        dirty=z(64),
        fresh=z(64),
        meta=np.zeros(META_SIZE, dtype=np.int64),
    )


# ---------------------------------------------------------------------- slot primitives


@kernel
def _move_slot(net: ResidualArrays, src: int, dst: int) -> None:  # pragma: no cover - compiled
    net.head[dst] = net.head[src]
    net.cost[dst] = net.cost[src]
    net.rescap[dst] = net.rescap[src]
    net.paircap[dst] = net.paircap[src]
    lab = net.label[src]
    net.label[dst] = lab
    m = net.mate[src]
    net.mate[dst] = m
    net.mate[m] = dst
    if lab & 1 == 0:
        net.fwd[lab >> 1] = dst
    net.label[src] = -1


@kernel
def _relocate(net: ResidualArrays, v: int, new_room: int) -> None:  # pragma: no cover
    top = net.meta[TOP]
    old = net.first[v]
    for i in range(net.deg[v]):
        _move_slot(net, old + i, top + i)
    net.meta[DEAD] += net.room[v]
    net.first[v] = top
    net.room[v] = new_room
    net.meta[TOP] = top + new_room


@kernel
def _insert_slot(net: ResidualArrays, v: int, forward: bool) -> int:  # pragma: no cover
    base = net.first[v]
    end = base + net.deg[v]
    if forward:
        pos = base + net.nfwd[v]
        if end > pos:
            _move_slot(net, pos, end)
        net.nfwd[v] += 1
    else:
        pos = end
    net.deg[v] += 1
    return int(pos)


@kernel
def _remove_slot(net: ResidualArrays, v: int, s: int) -> None:  # pragma: no cover
    base = net.first[v]
    last = base + net.deg[v] - 1
    if s < base + net.nfwd[v]:
        last_fwd = base + net.nfwd[v] - 1
        if s != last_fwd:
            _move_slot(net, last_fwd, s)
        if last != last_fwd:
            _move_slot(net, last, last_fwd)
        net.nfwd[v] -= 1
    elif s != last:
        _move_slot(net, last, s)
    net.label[last] = -1
    net.deg[v] -= 1


@kernel
def _mark_dirty(net: ResidualArrays, arc: int) -> None:  # pragma: no cover
    n = net.meta[N_DIRTY]
    if n < len(net.dirty):
        net.dirty[n] = arc
        net.meta[N_DIRTY] = n + 1
    else:
        net.meta[DIRTY_OVERFLOW] = 1


# ---------------------------------------------------------------------- arc and node changes


@kernel
def _add_arc(
    net: ResidualArrays, k: int, u: int, v: int, low: int, cap: int, cost: int
) -> None:  # pragma: no cover
    sf = _insert_slot(net, u, True)
    sr = _insert_slot(net, v, False)
    net.head[sf] = v
    net.head[sr] = u
    net.cost[sf] = cost
    net.cost[sr] = -cost
    net.rescap[sf] = cap - low
    net.rescap[sr] = 0
    net.paircap[sf] = cap - low
    net.paircap[sr] = cap - low
    net.label[sf] = 2 * k
    net.label[sr] = 2 * k + 1
    net.mate[sf] = sr
    net.mate[sr] = sf
    net.fwd[k] = sf
    net.low[k] = low
    net.excess[u] -= low
    net.excess[v] += low
    net.meta[LIVE_ARCS] += 1
    net.meta[NEG_UNCAPACITATED] += _neg_uncapacitated(cap, cost)
    _mark_dirty(net, k)


@kernel
def _neg_uncapacitated(cap: int, cost: int) -> int:  # pragma: no cover - compiled
    return 1 if cap >= INFINITE_CAPACITY and cost < 0 else 0


@kernel
def _remove_arc(net: ResidualArrays, k: int) -> None:  # pragma: no cover
    sf = net.fwd[k]
    sr = net.mate[sf]
    u = net.head[sr]
    v = net.head[sf]
    net.meta[NEG_UNCAPACITATED] -= _neg_uncapacitated(net.low[k] + net.paircap[sf], net.cost[sf])
    moved = net.rescap[sr] + net.low[k]
    net.excess[u] += moved
    net.excess[v] -= moved
    _remove_slot(net, v, sr)
    _remove_slot(net, u, net.fwd[k])
    net.fwd[k] = -1
    net.low[k] = 0
    net.meta[LIVE_ARCS] -= 1


@kernel
def _change_arc(
    net: ResidualArrays, k: int, low: int, cap: int, cost: int
) -> None:  # pragma: no cover
    sf = net.fwd[k]
    sr = net.mate[sf]
    u = net.head[sr]
    v = net.head[sf]
    flow = net.low[k] + net.rescap[sr]
    kept = min(max(flow, low), cap)
    delta = kept - flow
    net.excess[u] -= delta
    net.excess[v] += delta
    net.meta[NEG_UNCAPACITATED] += _neg_uncapacitated(cap, cost) - _neg_uncapacitated(
        net.low[k] + net.paircap[sf], net.cost[sf]
    )
    net.rescap[sr] = kept - low
    net.rescap[sf] = cap - kept
    net.paircap[sf] = cap - low
    net.paircap[sr] = cap - low
    net.low[k] = low
    net.cost[sf] = cost
    net.cost[sr] = -cost
    _mark_dirty(net, k)


@kernel
def _cancel_source_flow(net: ResidualArrays, v: int) -> None:  # pragma: no cover
    """Firmament's efficient task removal (section 5.3.2).

    Before a source node goes, walk each unit of its flow along flow-carrying arcs to a node with
    negative supply (the sink) and take it off the whole path, so the removal leaves demand only
    at the sink, where the matching supply change cancels it, instead of at a machine.
    """
    limit = len(net.first)
    for _unit in range(net.supply[v]):
        cur = v
        steps = 0
        while steps < limit:
            base = net.first[cur]
            found = -1
            for s in range(base, base + net.nfwd[cur]):
                if net.paircap[s] > net.rescap[s]:  # carries flow
                    found = s
                    break
            if found < 0:
                break
            net.rescap[found] += 1
            net.rescap[net.mate[found]] -= 1
            _mark_dirty(net, net.label[found] >> 1)
            nxt = net.head[found]
            net.excess[cur] += 1
            net.excess[nxt] -= 1
            cur = nxt
            steps += 1
            if net.supply[cur] < 0:
                break
        if steps == 0:
            return


@kernel
def _remove_node(net: ResidualArrays, v: int) -> None:  # pragma: no cover
    if net.supply[v] > 0:
        _cancel_source_flow(net, v)
    while net.deg[v] > 0:
        s = net.first[v] + net.deg[v] - 1
        _remove_arc(net, net.label[s] >> 1)
    net.alive[v] = 0
    net.meta[DEAD] += net.room[v]
    net.room[v] = 0
    net.nfwd[v] = 0
    net.excess[v] = 0
    net.supply[v] = 0
    net.meta[LIVE_NODES] -= 1


@kernel
def _add_node(net: ResidualArrays, v: int, supply: int, kind: int) -> None:  # pragma: no cover
    net.alive[v] = 1
    net.kind[v] = kind
    net.supply[v] = supply
    net.excess[v] = supply
    net.price[v] = 0
    net.first[v] = net.meta[TOP]
    net.nfwd[v] = 0
    net.deg[v] = 0
    net.room[v] = 0
    net.meta[LIVE_NODES] += 1
    n = net.meta[N_FRESH]
    if n < len(net.fresh):
        net.fresh[n] = v
        net.meta[N_FRESH] = n + 1


@kernel
def _laid_out_room(deg: int, nfwd: int) -> int:  # pragma: no cover
    """Slots a block of `deg` slots, `nfwd` of them forward, gets when laid out afresh."""
    return int(deg + (deg - nfwd) // _IN_ROOM + _SLACK)


@kernel
def _make_room(net: ResidualArrays, v: int) -> int:  # pragma: no cover
    """Slots that must be free at the end before inserting into v (0 if its block has room)."""
    if net.deg[v] < net.room[v]:
        return 0
    return int(max(2 * net.room[v], net.deg[v] + net.mark[v] + _SLACK))


@kernel
def count_insertions(net: ResidualArrays, rows: Int64Array) -> None:  # pragma: no cover
    """Set `mark[v]` to the slots `rows` will insert into v, so that a block is relocated
    once with room for all of them; `apply_rows` counts them down to zero again."""
    for i in range(len(rows)):
        if rows[i, COL_OP] == OP_ADD_ARC:
            net.mark[rows[i, ARC_SRC]] += 1
            net.mark[rows[i, ARC_DST]] += 1


@kernel
def apply_rows(net: ResidualArrays, rows: Int64Array, start: int) -> tuple[int, int, int]:
    """Apply `rows[start:]` in order.

    Returns (APPLIED, len(rows), 0), or (NEED_SLOTS, row, slots) when the slot arrays must grow by
    `slots` before row `row` can be applied; every earlier row is then fully applied.
    `count_insertions(net, rows)` must have run once before the first call for `rows`.
    """  # pragma: no cover - compiled
    for i in range(start, len(rows)):
        op = rows[i, COL_OP]
        ident = rows[i, COL_ID]
        if op == OP_ADD_ARC:
            u = rows[i, ARC_SRC]
            v = rows[i, ARC_DST]
            need_u = _make_room(net, u)
            need_v = _make_room(net, v)
            if net.meta[TOP] + need_u + need_v > len(net.head):
                return NEED_SLOTS, i, need_u + need_v
            if need_u > 0:
                _relocate(net, u, need_u)
            if need_v > 0:
                _relocate(net, v, need_v)
            net.mark[u] -= 1
            net.mark[v] -= 1
            _add_arc(net, ident, u, v, rows[i, ARC_LOW], rows[i, ARC_CAP], rows[i, ARC_COST])
        elif op == OP_CHANGE_ARC:
            _change_arc(net, ident, rows[i, ARC_LOW], rows[i, ARC_CAP], rows[i, ARC_COST])
        elif op == OP_REMOVE_ARC:
            _remove_arc(net, ident)
        elif op == OP_REMOVE_NODE:
            _remove_node(net, ident)
        elif op == OP_ADD_NODE:
            _add_node(net, ident, rows[i, NODE_SUPPLY], rows[i, NODE_KIND])
        elif op == OP_SET_SUPPLY:
            net.excess[ident] += rows[i, NODE_SUPPLY] - net.supply[ident]
            net.supply[ident] = rows[i, NODE_SUPPLY]
    return APPLIED, len(rows), 0


@kernel
def compact_into(old: ResidualArrays, new: ResidualArrays) -> None:  # pragma: no cover
    """Copy the live blocks of `old` into the fresh slot arrays of `new`, without gaps.

    `new` shares every node and arc array with `old`; only its slot arrays are fresh.
    """
    n_nodes = len(old.first)
    new_first = np.empty(n_nodes, dtype=np.int64)
    top = 0
    for v in range(n_nodes):
        new_first[v] = top
        if old.alive[v]:
            top += _laid_out_room(old.deg[v], old.nfwd[v])
    for v in range(n_nodes):
        if not old.alive[v]:
            continue
        base = old.first[v]
        for i in range(old.deg[v]):
            s = base + i
            t = new_first[v] + i
            new.head[t] = old.head[s]
            new.cost[t] = old.cost[s]
            new.rescap[t] = old.rescap[s]
            new.paircap[t] = old.paircap[s]
            lab = old.label[s]
            new.label[t] = lab
            m = old.mate[s]
            owner = old.head[s]  # the mate's slot belongs to the node this arc enters
            new.mate[t] = new_first[owner] + (m - old.first[owner])
            if lab & 1 == 0:
                new.fwd[lab >> 1] = t
    for v in range(n_nodes):
        if old.alive[v]:
            new.first[v] = new_first[v]
            new.room[v] = _laid_out_room(old.deg[v], old.nfwd[v])
        else:
            new.first[v] = top
            new.room[v] = 0
    new.meta[TOP] = top
    new.meta[DEAD] = 0


@kernel
def load_flows(net: ResidualArrays, flow: Int64Array) -> None:  # pragma: no cover
    """Load a flow by arc id (clipped to the arcs' bounds); excesses follow.

    Only arcs whose flow changes are written, and their ends' excesses moved by the
    difference (the excess invariant holds before and after): adopting a race winner's flow
    changes a few thousand of a million arcs, and rewriting every arc's slots and excesses took
    64 ms on qjob10k's 1.48 million."""
    for k in range(len(net.fwd)):
        sf = net.fwd[k]
        if sf < 0:
            continue
        cap = net.paircap[sf]
        f = min(max(flow[k] - net.low[k], 0), cap) if k < len(flow) else 0
        moved = f - (cap - net.rescap[sf])
        if moved == 0:
            continue
        sr = net.mate[sf]
        net.rescap[sr] = f
        net.rescap[sf] = cap - f
        net.excess[net.head[sr]] -= moved
        net.excess[net.head[sf]] += moved


@kernel
def flows_and_cost(net: ResidualArrays, out: Int64Array) -> tuple[int, bool]:  # pragma: no cover
    """out[k] = flow on arc k for every arc id (0 for ids not in use; `out` is as long as
    `net.fwd`); returns the flow's cost, and False if it does not fit in int64. One pass: on
    S90 each walk of the arcs costs about 6 ms."""
    limit = 2**62
    total = 0
    fits = True
    for k in range(len(out)):
        sf = net.fwd[k]
        if sf < 0:
            out[k] = 0
            continue
        f = net.low[k] + net.paircap[sf] - net.rescap[sf]
        out[k] = f
        if f == 0 or not fits:
            continue
        c = net.cost[sf]
        if c != 0 and abs(c) > limit // f:
            fits = False
            continue
        total += c * f
        if abs(total) > limit:
            fits = False
    return total, fits


@kernel
def excess_summary(net: ResidualArrays) -> tuple[int, int, int]:  # pragma: no cover
    """(sum of excess over live nodes, total positive excess, nodes with non-zero excess)."""
    total = 0
    positive = 0
    unbalanced = 0
    for v in range(len(net.first)):
        if net.alive[v]:
            e = net.excess[v]
            total += e
            if e > 0:
                positive += e
            if e != 0:
                unbalanced += 1
    return total, positive, unbalanced


@kernel
def max_abs_cost(net: ResidualArrays) -> int:  # pragma: no cover
    best = 0
    for k in range(len(net.fwd)):
        s = net.fwd[k]
        if s >= 0:
            c = abs(net.cost[s])
            if c > best:
                best = c
    return best


@kernel
def check_structure(net: ResidualArrays) -> int:  # pragma: no cover
    """Return 0 if the slot layout invariants hold, else a code naming the first violation."""
    for v in range(len(net.first)):
        if net.mark[v] != 0:  # scratch, zero between kernel calls
            return 9
        if not net.alive[v]:
            continue
        if net.deg[v] > net.room[v] or net.nfwd[v] > net.deg[v]:
            return 1
        base = net.first[v]
        for s in range(base, base + net.deg[v]):
            lab = net.label[s]
            if lab < 0:
                return 2
            if (lab & 1 == 0) != (s < base + net.nfwd[v]):
                return 3
            m = net.mate[s]
            if net.mate[m] != s or net.label[m] != (lab ^ 1):
                return 4
            if net.head[m] != v:
                return 5
            if lab & 1 == 0 and net.fwd[lab >> 1] != s:
                return 6
            if net.rescap[s] < 0:
                return 7
            if net.paircap[s] != net.paircap[m] or net.rescap[s] + net.rescap[m] != net.paircap[s]:
                return 8
    return 0


class ResidualNetwork:
    """A solver's own copy of the graph, with flow and potentials, updated by change batches."""

    def __init__(self) -> None:
        self.arrays = empty_arrays()

    # ------------------------------------------------------------------ loading and changes

    def load(self, batch: ChangeBatch) -> None:
        """Drop everything and build the network a reset batch describes; flows start at 0."""
        if not batch.reset:
            raise ValueError("load() needs a reset batch (FlowGraph.snapshot())")
        rows = batch.rows
        k, nodes_first = _count_nodes(rows)
        if nodes_first:  # as snapshots list them: views, not copies
            nodes, arcs = rows[:k], rows[k:]
        else:
            is_node = rows[:, COL_OP] == OP_ADD_NODE
            nodes, arcs = rows[is_node], rows[~is_node]
        self._build(
            WholeNetwork(
                nodes[:, COL_ID],
                nodes[:, NODE_SUPPLY],
                nodes[:, NODE_KIND],
                arcs[:, COL_ID],
                *(arcs[:, col] for col in (ARC_SRC, ARC_DST, ARC_LOW, ARC_CAP, ARC_COST)),
            )
        )

    def load_graph(self, graph: FlowGraph) -> None:
        """Drop everything and build `graph`'s network from its arrays: the network its
        snapshot would give, without writing the snapshot and checking it (a `FlowGraph` only
        ever holds a valid graph)."""
        g = graph.arrays()
        nodes, arcs = graph.node_ids(), graph.arc_ids()
        self._build(
            WholeNetwork(
                nodes,
                g.supply[nodes],
                g.node_kind[nodes].astype(np.int64),
                arcs,
                *(column[arcs] for column in (g.src, g.dst, g.low, g.cap, g.cost)),
            )
        )

    def _build(self, whole: WholeNetwork) -> None:
        """Lay out a whole network, with room to grow by `_LOAD_ROOM`."""
        n, m, out_deg, in_deg = _id_bounds_and_degrees(whole)
        in_slots = int(in_deg.sum())
        slots = int(out_deg.sum()) + in_slots + in_slots // _IN_ROOM + _SLACK * n + 2
        self.arrays = empty_arrays(*(int(x * (1 + _LOAD_ROOM)) for x in (n, m, slots)))
        _build_network(self.arrays, whole, out_deg, in_deg)
        self.clear_work()

    def apply(self, batch: ChangeBatch) -> None:
        """Apply a batch of changes; flows and potentials of untouched arcs and nodes are kept."""
        if batch.reset:
            self.load(batch)
            return
        rows = batch.rows
        if len(rows) == 0:
            return
        nodes = rows[np.isin(rows[:, COL_OP], (OP_ADD_NODE, OP_REMOVE_NODE, OP_SET_SUPPLY))]
        arc_rows = rows[rows[:, COL_OP] == OP_ADD_ARC]
        max_node = max(
            int(nodes[:, COL_ID].max()) if len(nodes) else 0,
            int(arc_rows[:, ARC_SRC].max()) if len(arc_rows) else 0,
            int(arc_rows[:, ARC_DST].max()) if len(arc_rows) else 0,
        )
        max_arc = int(arc_rows[:, COL_ID].max()) if len(arc_rows) else 0
        self._ensure(max_node + 1, max_arc + 1)
        removals = int(np.count_nonzero(rows[:, COL_OP] == OP_REMOVE_NODE))
        self._ensure_work(2 * len(rows) + 16 * removals + 64)
        # Counted once: a restart after growing the slots (even at row 0) must not count again,
        # or marks would stay above zero, and the kernels that use them as scratch flags
        # (price refinement's queue) would skip those nodes.
        count_insertions(self.arrays, rows)
        start = 0
        while True:
            status, start, need = apply_rows(self.arrays, rows, start)
            if status == APPLIED:
                break
            self._grow_slots(need)
        a = self.arrays
        if a.meta[DEAD] > max(int(a.meta[TOP]) // 2, 1 << 16):
            self.compact()

    def clear_work(self) -> None:
        """Forget which arcs and nodes the last batches touched."""
        m = self.arrays.meta
        m[N_DIRTY] = 0
        m[N_FRESH] = 0
        m[DIRTY_OVERFLOW] = 0

    def compact(self) -> None:
        a = self.arrays
        alive = a.alive == 1
        in_slots = int((a.deg[alive] - a.nfwd[alive]).sum())
        live = int(a.nfwd[alive].sum()) + in_slots + in_slots // _IN_ROOM
        live += _SLACK * int(a.meta[LIVE_NODES])
        size = max(2, live + live // 2)
        new = a._replace(
            head=_reserved(size, np.int64, 0),
            mate=_reserved(size, np.int64, 0),
            label=_reserved(size, np.int64, -1),
            cost=_reserved(size, np.int64, 0),
            rescap=_reserved(size, np.int64, 0),
            paircap=_reserved(size, np.int64, 0),
        )
        compact_into(a, new)
        self.arrays = new

    # ------------------------------------------------------------------ reading results

    @property
    def node_bound(self) -> int:
        return len(self.arrays.first)

    @property
    def arc_bound(self) -> int:
        return len(self.arrays.fwd)

    def flows_and_cost(self) -> tuple[Int64Array, int]:
        """The flow on every arc id below the id bound, and the flow's cost; OverflowError if
        that cost does not fit in 64 bits."""
        out = np.empty(self.arc_bound, dtype=np.int64)
        value, fits = flows_and_cost(self.arrays, out)
        if not fits:
            raise OverflowError("the cost of this flow does not fit in 64 bits")
        return out, int(value)

    def set_flows(self, flow: Int64Array) -> None:
        """Replace every arc's flow (clipped to its bounds); excesses follow."""
        load_flows(self.arrays, np.ascontiguousarray(flow, dtype=np.int64))

    def potentials(self, size: int | None = None) -> Int64Array:
        a = self.arrays
        out = np.zeros(self.node_bound if size is None else size, dtype=np.int64)
        n = min(len(out), len(a.price))
        out[:n] = np.where(a.alive[:n] == 1, a.price[:n], 0)
        return out

    def live_nodes(self) -> int:
        return int(self.arrays.meta[LIVE_NODES])

    def live_arcs(self) -> int:
        return int(self.arrays.meta[LIVE_ARCS])

    def check(self) -> None:
        code = check_structure(self.arrays)
        if code:
            raise AssertionError(f"residual network layout broken (code {code})")
        for name, array in self.arrays._asdict().items():
            base = array.base
            if isinstance(base, np.ndarray) and base[len(array) :].any():
                raise AssertionError(f"the reserve beyond {name} is not zero (`_grow` needs it)")

    # ------------------------------------------------------------------ growth

    def _ensure(self, nodes: int, arcs: int) -> None:
        a = self.arrays
        repl: dict[str, Any] = {}
        if nodes > len(a.first):
            size = max(nodes, 2 * len(a.first))
            for name in ("first", "nfwd", "deg", "room", "supply", "excess", "price", "mark"):
                repl[name] = _grow(getattr(a, name), size, 0)
            repl["alive"] = _grow(a.alive, size, 0)
            repl["kind"] = _grow(a.kind, size, 0)
            repl["first"][len(a.first) :] = a.meta[TOP]
        if arcs > len(a.fwd):
            size = max(arcs, 2 * len(a.fwd))
            repl["fwd"] = _grow(a.fwd, size, -1)
            repl["low"] = _grow(a.low, size, 0)
        if repl:
            self.arrays = a._replace(**repl)

    def _ensure_work(self, entries: int) -> None:
        a = self.arrays
        used = int(a.meta[N_DIRTY])
        if used + entries > len(a.dirty):
            self.arrays = a._replace(dirty=_grow(a.dirty, max(used + entries, 2 * len(a.dirty)), 0))
        a = self.arrays
        if int(a.meta[N_FRESH]) + entries > len(a.fresh):
            size = max(int(a.meta[N_FRESH]) + entries, 2 * len(a.fresh))
            self.arrays = a._replace(fresh=_grow(a.fresh, size, 0))

    def _grow_slots(self, need: int) -> None:
        a = self.arrays
        size = max(len(a.head) + need, len(a.head) * 3 // 2 + 16)
        self.arrays = a._replace(
            head=_grow(a.head, size, 0),
            mate=_grow(a.mate, size, 0),
            label=_grow(a.label, size, -1),
            cost=_grow(a.cost, size, 0),
            rescap=_grow(a.rescap, size, 0),
            paircap=_grow(a.paircap, size, 0),
        )


@kernel
def _count_nodes(rows: Int64Array) -> tuple[int, bool]:  # pragma: no cover
    """How many rows add nodes, and whether they all come before the others."""
    count = 0
    first = True
    for i in range(rows.shape[0]):
        if rows[i, COL_OP] == OP_ADD_NODE:
            first = first and count == i
            count += 1
    return count, first


@kernel
def _id_bounds_and_degrees(
    whole: WholeNetwork,
) -> tuple[int, int, Int64Array, Int64Array]:  # pragma: no cover
    """Node and arc id bounds of a whole network, and every node's out- and in-degree."""
    n = 2
    for i in range(len(whole.node_ids)):
        n = max(n, whole.node_ids[i] + 1)
    m = 1
    for i in range(len(whole.arc_ids)):
        m = max(m, whole.arc_ids[i] + 1)
    out_deg = np.zeros(n, dtype=np.int64)
    in_deg = np.zeros(n, dtype=np.int64)
    for i in range(len(whole.arc_ids)):
        out_deg[whole.src[i]] += 1
        in_deg[whole.dst[i]] += 1
    return n, m, out_deg, in_deg


@kernel
def _build_network(
    net: ResidualArrays, whole: WholeNetwork, out_deg: Int64Array, in_deg: Int64Array
) -> None:  # pragma: no cover
    """Add every node, then lay out all blocks at once (a counting sort of the arcs by tail)."""
    node_ids, supply, kind, arc_ids, src, dst, low, cap, cost = whole
    for i in range(len(node_ids)):
        _add_node(net, node_ids[i], supply[i], kind[i])
    top = 0
    for v in range(len(net.first)):
        if net.alive[v]:
            net.first[v] = top
            net.room[v] = _laid_out_room(out_deg[v] + in_deg[v], out_deg[v])
            net.nfwd[v] = out_deg[v]
            net.deg[v] = out_deg[v] + in_deg[v]
            net.mark[v] = 0  # next forward position
            top += net.room[v]
    # reverse slots follow the forward ones; reuse `price` as the reverse cursor, reset below
    for v in range(len(net.first)):
        net.price[v] = 0
    for i in range(len(arc_ids)):
        k = arc_ids[i]
        u = src[i]
        v = dst[i]
        sf = net.first[u] + net.mark[u]
        net.mark[u] += 1
        sr = net.first[v] + net.nfwd[v] + net.price[v]
        net.price[v] += 1
        residual = cap[i] - low[i]
        net.head[sf] = v
        net.head[sr] = u
        net.cost[sf] = cost[i]
        net.cost[sr] = -cost[i]
        net.rescap[sf] = residual
        net.rescap[sr] = 0
        net.paircap[sf] = residual
        net.paircap[sr] = residual
        net.meta[NEG_UNCAPACITATED] += _neg_uncapacitated(cap[i], cost[i])
        net.label[sf] = 2 * k
        net.label[sr] = 2 * k + 1
        net.mate[sf] = sr
        net.mate[sr] = sf
        net.fwd[k] = sf
        net.low[k] = low[i]
        net.excess[u] -= low[i]
        net.excess[v] += low[i]
    for v in range(len(net.first)):
        net.mark[v] = 0
        net.price[v] = 0
    net.meta[TOP] = top
    net.meta[DEAD] = 0
    net.meta[LIVE_ARCS] = len(arc_ids)


_Scalar = TypeVar("_Scalar", bound=np.generic)


def _reserved(size: int, dtype: npt.DTypeLike, fill: int) -> npt.NDArray[Any]:
    """An array of `size` entries `fill`; if large, the start of a zeroed buffer `_RESERVE`
    times as long."""
    itemsize = np.dtype(dtype).itemsize
    if size * itemsize >= _RESERVE_FROM_BYTES:
        buffer = mmap.mmap(-1, size * _RESERVE * itemsize, flags=_PRIVATE_ANONYMOUS)
        if hasattr(mmap, "MADV_HUGEPAGE"):
            buffer.madvise(mmap.MADV_HUGEPAGE)
        view = np.frombuffer(buffer, dtype=dtype)[:size]
    else:
        view = np.zeros(size, dtype=dtype)
    if fill:
        view[:] = fill
    return view


def _grow(array: npt.NDArray[_Scalar], size: int, fill: int) -> npt.NDArray[_Scalar]:
    """`array` lengthened to `size`, new entries `fill`: a longer view of its buffer while that
    lasts (no copy), else the start of a new one."""
    if size <= len(array):  # never shorter: a shorter view's tail would later read as zeros
        return array
    base = array.base
    if (
        isinstance(base, np.ndarray)
        and base.ndim == 1
        and array.flags.c_contiguous
        and base.dtype == array.dtype
        and len(base) >= size
        and base.ctypes.data == array.ctypes.data
    ):
        bigger: npt.NDArray[_Scalar] = base[:size]  # the tail was never part of a view: zeros
    else:
        bigger = _reserved(size, array.dtype, 0)
        bigger[: len(array)] = array
    if fill:
        bigger[len(array) :] = fill
    return bigger
