"""Relaxation (Bertsekas and Tseng's RELAX family): dual ascent with tree growth.

The flow always satisfies complementary slackness with the prices (no residual arc has negative
reduced cost); the algorithm works towards feasibility. For a node `s` with surplus it grows a
tree `S` over *balanced* residual arcs (reduced cost zero):

* if the tree reaches a node with a deficit, flow is augmented along the tree path;
* if the surplus of `S` exceeds the capacity of the balanced arcs leaving it (the ascent
  condition), raising the prices of `S` increases the dual cost: the balanced arcs leaving `S`
  are saturated and prices rise until the next arc leaving `S` becomes balanced, and the tree
  keeps growing from there.

When tasks have uncontested preferred destinations, most of the flow is routed in one pass,
which is why Firmament found relaxation fastest on scheduling graphs; contention (many tasks
after the same machines) makes trees large and price rises frequent, which is its weak spot.

Arc prioritisation (Firmament section 5.3.1): while growing the tree, heads with a deficit are
taken at once, and leaf nodes (machines, whose arcs reach the sink) go to the front of the scan
deque, so exploration runs depth-first towards demand and breadth-first otherwise.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from firmament_py.flow.graph import NodeKind
from firmament_py.jit import kernel
from firmament_py.solvers import kernels
from firmament_py.solvers.base import FlowSolver, InfeasibleError, SolverCancelled
from firmament_py.solvers.kernels import INF
from firmament_py.solvers.network import ResidualArrays

Int64Array = npt.NDArray[np.int64]

_OK = 0
_INFEASIBLE = 1
_CANCELLED = 2

# stats[] entries
_ITERATIONS = 0
_AUGMENTATIONS = 1
_PRICE_RISES = 2
_SCANNED = 3  # nodes added to trees
_ARC_SCANS = 4
_DEFERRED = 5  # surplus nodes left to the blocking-flow pass
_ROUTED = 6  # units the blocking-flow pass routed
_PHASES = 7  # blocking-flow phases
_DIJKSTRAS = 8  # price raises by Dijkstra between sweeps
_FORWARD = 9  # of which searched forwards from the surplus nodes

_LEAF = int(NodeKind.LEAF)

# Trees with more members than this are abandoned for the blocking-flow sweep (0: never).
DEFAULT_TREE_LIMIT = 2000

# Between sweeps, reprice forwards from the surplus nodes when at most this many are left, and
# backwards from the deficits otherwise. Measured (docs/benchmarks-history.md): on incremental S90
# rounds, where one to four surplus nodes are left, the forward search needs fewer searches
# and sweeps (relaxation 35-40% faster a round); on S105 from scratch, with thousands left,
# each forward search is slower than the backward one.
DEFAULT_FORWARD_REPRICE = 64


class _Work:
    """Scratch arrays of one relaxation solver, exactly as long as the node bound (the kernels
    rely on it: see `RelaxationSolver._run`)."""

    def __init__(self, n: int) -> None:
        self.in_tree = np.zeros(n, dtype=np.int64)  # stamp of the iteration that holds it in S
        self.labeled = np.zeros(n, dtype=np.int64)  # stamp of the iteration that labeled it
        self.pred = np.full(n, -1, dtype=np.int64)  # slot that labeled it
        self.deque = np.zeros(n, dtype=np.int64)
        self.members = np.zeros(n, dtype=np.int64)
        self.pending = np.zeros(n, dtype=np.int64)  # members whose reverse arcs await a scan
        self.rev_done = np.zeros(n, dtype=np.int64)  # stamp: reverse arcs scanned in this tree
        self.join_seq = np.zeros(n, dtype=np.int64)  # when a member joined S (its forward scan)
        self.rev_seq = np.zeros(n, dtype=np.int64)  # when its reverse arcs were scanned
        self.queue = np.zeros(n, dtype=np.int64)  # nodes with surplus
        self.queued = np.zeros(n, dtype=np.int64)
        self.tight = np.zeros(4096, dtype=np.int64)  # arcs at the minimum reduced cost
        self.stamp = np.zeros(1, dtype=np.int64)
        self.level = np.zeros(n, dtype=np.int64)  # blocking flow: arcs to the nearest deficit
        self.cur = np.zeros(n, dtype=np.int64)  # blocking flow: current-arc pointers
        self.dist = np.zeros(n, dtype=np.int64)  # Dijkstra between sweeps
        self.heap_keys = np.zeros(n, dtype=np.int64)
        self.heap_nodes = np.zeros(n, dtype=np.int64)
        self.heap_pos = np.zeros(n, dtype=np.int64)


@kernel
def _augment(net: ResidualArrays, s: int, t: int, pred: Int64Array) -> None:  # pragma: no cover
    delta = min(net.excess[s], -net.excess[t])
    v = t
    while v != s:
        slot = pred[v]
        if net.rescap[slot] < delta:
            delta = net.rescap[slot]
        v = net.head[net.mate[slot]]
    v = t
    while v != s:
        slot = pred[v]
        net.rescap[slot] -= delta
        net.rescap[net.mate[slot]] += delta
        v = net.head[net.mate[slot]]
    net.excess[s] -= delta
    net.excess[t] += delta


# queued[v] of a node deferred in this solve: `_enqueue` never queues it again.
_DEFERRED_MARK = 2


@kernel
def _enqueue(
    v: int, queue: Int64Array, queued: Int64Array, qstate: Int64Array
) -> None:  # pragma: no cover
    """Add v to the ring of nodes with surplus; qstate = [head, size]."""
    if queued[v]:  # queued already, or deferred
        return
    n = len(queue)
    queued[v] = 1
    tail = qstate[0] + qstate[1]
    if tail >= n:
        tail -= n
    queue[tail] = v
    qstate[1] += 1


@kernel
def _label(
    w: int,
    t: int,
    lstamp: int,
    labeled: Int64Array,
    pred: Int64Array,
    deque: Int64Array,
    ends: Int64Array,
    front: bool,
) -> None:  # pragma: no cover - compiled
    """Label w through slot t and queue it for scanning (front: depth-first towards demand)."""
    n = len(deque)
    labeled[w] = lstamp
    pred[w] = t
    if front:
        ends[0] -= 1
        deque[ends[0] % n] = w
    else:
        deque[ends[1] % n] = w
        ends[1] += 1


@kernel
def _relax(
    net: ResidualArrays,
    in_tree: Int64Array,
    labeled: Int64Array,
    pred: Int64Array,
    deque: Int64Array,
    members: Int64Array,
    pending: Int64Array,
    rev_done: Int64Array,
    join_seq: Int64Array,
    rev_seq: Int64Array,
    queue: Int64Array,
    queued: Int64Array,
    tight: Int64Array,
    stamp_box: Int64Array,
    prioritise: bool,
    tree_limit: int,
    cancel: Int64Array,
    stats: Int64Array,
) -> int:  # pragma: no cover - compiled
    n = len(net.first)
    qstate = np.zeros(2, dtype=np.int64)  # head, size of the surplus ring
    ends = np.zeros(2, dtype=np.int64)  # head, tail of the scan deque (modulo n)
    for v in range(n):
        queued[v] = 0
    surplus_units = 0
    for v in range(n):
        if net.alive[v] and net.excess[v] > 0:
            _enqueue(v, queue, queued, qstate)
            surplus_units += net.excess[v]
    # On a feasible problem iterations stay near the surplus units. On an infeasible one whose
    # unroutable part is larger than the tree limit, trees never grow enough to prove it, and
    # surplus can bounce between nodes forever while prices climb: past this budget every node
    # still queued is deferred, and the Dijkstra between sweeps reports the infeasibility.
    budget = 64 * (n + min(surplus_units, n))
    # Stamps instead of clearing flags: in_tree[v] == stamp means v is in this iteration's tree
    # S; labeled[v] == lstamp means v was labeled since the last price rise.
    stamp = stamp_box[0]
    seq = 0  # orders scans within a tree, so delx counts each arc leaving S once
    ntight_cap = len(tight)
    work = 0
    while qstate[1] > 0:
        s = queue[qstate[0]]
        qstate[0] += 1
        if qstate[0] == n:
            qstate[0] = 0
        qstate[1] -= 1
        queued[s] = 0
        if stats[_ITERATIONS] > budget:
            queued[s] = _DEFERRED_MARK
            stats[_DEFERRED] += 1
            continue
        while net.excess[s] > 0:
            work += 1
            if work >= 64:
                work = 0
                if kernels.is_cancelled(cancel):
                    stamp_box[0] = stamp
                    return _CANCELLED
            stats[_ITERATIONS] += 1
            stamp += 1
            lstamp = stamp
            ends[0] = 0
            ends[1] = 0
            _label(s, -1, lstamp, labeled, pred, deque, ends, False)
            nmem = 0
            npend = 0
            ppos = 0
            surplus = 0
            delx = 0  # residual capacity of balanced arcs leaving S
            target = -1
            deferred = False
            while target < 0:
                if nmem > tree_limit:
                    # A tree this large is wandering a web of balanced arcs: leave s to the
                    # blocking-flow pass, which routes all such nodes in one sweep.
                    deferred = True
                    break
                if ends[0] != ends[1] and surplus <= delx:
                    # Scan the next labeled node: it joins S. Only its forward arcs are
                    # scanned now; its reverse arcs (a hub's many, one per task whose flow
                    # passes through it) wait until the forward search runs dry.
                    i = deque[ends[0] % n]
                    ends[0] += 1
                    if in_tree[i] == stamp:
                        continue
                    in_tree[i] = stamp
                    seq += 1
                    join_seq[i] = seq
                    members[nmem] = i
                    nmem += 1
                    surplus += net.excess[i]
                    stats[_SCANNED] += 1
                    lo = net.first[i]
                    hi = lo + net.nfwd[i]
                    if net.deg[i] > net.nfwd[i]:
                        pending[npend] = i
                        npend += 1
                    forward = True
                elif ppos < npend:
                    i = pending[ppos]
                    ppos += 1
                    rev_done[i] = stamp
                    seq += 1
                    rev_seq[i] = seq
                    lo = net.first[i] + net.nfwd[i]
                    hi = net.first[i] + net.deg[i]
                    forward = False
                else:
                    lo = 0
                    hi = -1
                    forward = False
                if hi >= lo:
                    pi = net.price[i]
                    stats[_ARC_SCANS] += hi - lo
                    for t in range(lo, hi):
                        w = net.head[t]
                        if net.cost[t] - pi + net.price[w] != 0:
                            continue
                        if in_tree[w] == stamp:
                            # w's side of this balanced arc was counted as leaving S if it
                            # was scanned before i joined S; now the arc is internal. (The
                            # mate of a forward slot is one of w's reverse slots.)
                            if forward:
                                seen = rev_seq[w] if rev_done[w] == stamp else INF
                            else:
                                seen = join_seq[w]
                            if seen < join_seq[i]:
                                delx -= net.rescap[net.mate[t]]
                            continue
                        r = net.rescap[t]
                        if r <= 0:
                            continue
                        delx += r
                        if labeled[w] != lstamp:
                            _label(
                                w,
                                t,
                                lstamp,
                                labeled,
                                pred,
                                deque,
                                ends,
                                prioritise and net.kind[w] == _LEAF,
                            )
                            if net.excess[w] < 0:
                                target = w
                                break
                    continue
                # Ascent (S's surplus exceeds what its balanced arcs can carry away, or there
                # is nothing left to scan): saturate the balanced arcs leaving S and raise S's
                # prices to the next breakpoint; arcs reaching it become balanced.
                stats[_PRICE_RISES] += 1
                delta = INF
                ntight = 0
                overflow = False
                for j in range(nmem):
                    u = members[j]
                    pu = net.price[u]
                    base = net.first[u]
                    stats[_ARC_SCANS] += net.deg[u]
                    for t in range(base, base + net.deg[u]):
                        r = net.rescap[t]
                        if r <= 0:
                            continue
                        w = net.head[t]
                        if in_tree[w] == stamp:
                            continue
                        rc = net.cost[t] - pu + net.price[w]
                        if rc == 0:
                            net.rescap[t] = 0
                            net.rescap[net.mate[t]] += r
                            net.excess[u] -= r
                            ew = net.excess[w]
                            net.excess[w] = ew + r
                            surplus -= r
                            if ew + r > 0:
                                _enqueue(w, queue, queued, qstate)
                        elif rc < delta:
                            delta = rc
                            tight[0] = t
                            ntight = 1
                            overflow = False
                        elif rc == delta:
                            if ntight < ntight_cap:
                                tight[ntight] = t
                                ntight += 1
                            else:
                                overflow = True
                # Saturating may leave a member with a deficit: augment to it inside S.
                for j in range(nmem):
                    u = members[j]
                    if u != s and net.excess[u] < 0:
                        target = u
                        break
                if target >= 0 or net.excess[s] <= 0:
                    break
                if delta == INF:
                    stamp_box[0] = stamp
                    return _INFEASIBLE
                for j in range(nmem):
                    net.price[members[j]] += delta
                # Labels outside S came through arcs just saturated: start a new label epoch.
                stamp += 1
                lstamp = stamp
                seq += 1
                for j in range(nmem):
                    in_tree[members[j]] = stamp
                    labeled[members[j]] = lstamp
                    # The rise scanned every arc of S: all of it counts as seen now.
                    rev_done[members[j]] = stamp
                    join_seq[members[j]] = seq
                    rev_seq[members[j]] = seq
                npend = 0
                ppos = 0
                ends[0] = 0
                ends[1] = 0
                delx = 0
                if overflow:
                    ntight = 0
                    for j in range(nmem):
                        u = members[j]
                        pu = net.price[u]
                        base = net.first[u]
                        for t in range(base, base + net.deg[u]):
                            w = net.head[t]
                            if in_tree[w] == stamp or net.rescap[t] <= 0:
                                continue
                            if net.cost[t] - pu + net.price[w] == 0 and ntight < len(tight):
                                tight[ntight] = t
                                ntight += 1
                            elif net.cost[t] - pu + net.price[w] == 0:
                                # Buffer full even now: count it, label it directly.
                                delx += net.rescap[t]
                                if labeled[w] != lstamp:
                                    _label(w, t, lstamp, labeled, pred, deque, ends, False)
                                    if net.excess[w] < 0 and target < 0:
                                        target = w
                for j in range(ntight):
                    t = tight[j]
                    w = net.head[t]
                    delx += net.rescap[t]
                    if labeled[w] != lstamp:
                        _label(
                            w,
                            t,
                            lstamp,
                            labeled,
                            pred,
                            deque,
                            ends,
                            prioritise and net.kind[w] == _LEAF,
                        )
                        if net.excess[w] < 0 and target < 0:
                            target = w
            if deferred:
                # Never queue s again in this solve: left here, it could come back forever,
                # its tree abandoned each time while infeasible surplus drives prices up.
                queued[s] = _DEFERRED_MARK
                stats[_DEFERRED] += 1
                break
            if target >= 0 and net.excess[s] > 0:
                _augment(net, s, target, pred)
                stats[_AUGMENTATIONS] += 1
    stamp_box[0] = stamp
    return _OK


@kernel
def _route_balanced(
    net: ResidualArrays,
    level: Int64Array,
    cur: Int64Array,
    queue: Int64Array,
    path: Int64Array,
    cancel: Int64Array,
    stats: Int64Array,
) -> int:  # pragma: no cover - compiled
    """Route surplus to deficits along balanced residual arcs only, many paths per sweep.

    Dinic's blocking flow on the subgraph of arcs with reduced cost zero: a backward
    breadth-first search from every deficit node gives each node its distance in arcs, then a
    depth-first search with current-arc pointers sends each surplus node's units down arcs
    that lead one step closer. Prices do not change, so complementary slackness holds
    throughout. It replaces the huge trees relaxation would grow, one surplus node at a time,
    over the same web of balanced arcs when free capacity is scarce and far away.
    """
    n = len(net.first)
    routed = 0
    while True:
        if kernels.is_cancelled(cancel):
            return -1
        stats[_PHASES] += 1
        sources = 0
        size = 0
        for v in range(n):
            level[v] = INF
            if net.alive[v]:
                if net.excess[v] < 0:
                    level[v] = 0
                    queue[size] = v
                    size += 1
                elif net.excess[v] > 0:
                    sources += 1
        if sources == 0 or size == 0:
            return routed
        # Backward BFS over balanced arcs x -> u with residual capacity, seen from u's block.
        reached = 0
        i = 0
        while i < size and reached < sources:
            u = queue[i]
            i += 1
            pu = net.price[u]
            lu = level[u] + 1
            base = net.first[u]
            for s in range(base, base + net.deg[u]):
                if net.paircap[s] <= net.rescap[s]:
                    continue
                x = net.head[s]
                if level[x] != INF or -net.cost[s] - net.price[x] + pu != 0:
                    continue
                level[x] = lu
                queue[size] = x
                size += 1
                if net.excess[x] > 0:
                    reached += 1
        if reached == 0:
            return routed
        for v in range(n):
            cur[v] = net.first[v]
        # Depth-first augmentation from every reached surplus node.
        found = 0
        for j in range(size):
            src = queue[j]
            while net.excess[src] > 0 and level[src] != INF:
                depth = 0
                u = src
                while True:
                    if net.excess[u] < 0 and u != src:
                        delta = min(net.excess[src], -net.excess[u])
                        for d in range(depth):
                            if net.rescap[path[d]] < delta:
                                delta = net.rescap[path[d]]
                        for d in range(depth):
                            t = path[d]
                            net.rescap[t] -= delta
                            net.rescap[net.mate[t]] += delta
                        net.excess[src] -= delta
                        net.excess[u] += delta
                        routed += delta
                        found += 1
                        break
                    end = net.first[u] + net.deg[u]
                    pu = net.price[u]
                    want = level[u] - 1
                    t = cur[u]
                    while t < end:
                        w = net.head[t]
                        if (
                            level[w] == want
                            and net.rescap[t] > 0
                            and net.cost[t] - pu + net.price[w] == 0
                        ):
                            break
                        t += 1
                    cur[u] = t
                    if t < end:
                        path[depth] = t
                        depth += 1
                        u = net.head[t]
                        continue
                    # Dead end: no way closer from u in this phase.
                    level[u] = INF
                    if depth == 0:
                        break
                    depth -= 1
                    u = net.head[net.mate[path[depth]]]
                    cur[u] += 1
        if found == 0:
            return routed


# Dijkstra between sweeps: most nodes a search settles are reached over balanced arcs, at the
# distance being settled (on incremental S90 rounds, 100,000 of 160,000 labels). Those go on a
# stack rather than through the heap: `pos[v]` is then _ON_STACK, and the stack is drained
# before the heap's next minimum (every residual arc has a non-negative reduced cost, so no
# label found later is smaller). The order among equal distances changes, the distances and
# so the prices do not.
_ON_STACK = -3


@kernel
def _label_at(
    v: int,
    d: int,
    current: int,
    dist: Int64Array,
    keys: Int64Array,
    nodes: Int64Array,
    pos: Int64Array,
    size: int,
    same: Int64Array,
    top: int,
) -> tuple[int, int]:  # pragma: no cover - compiled
    """Give `v` the label `d < dist[v]`: on the stack if `d` is the distance being settled and
    `v` was never labelled, else in the heap; returns the heap's and the stack's new sizes."""
    if pos[v] == _ON_STACK:  # labelled at the settled distance already: nothing is smaller
        return size, top
    dist[v] = d
    if d == current and pos[v] == -1:
        pos[v] = _ON_STACK
        same[top] = v
        return size, top + 1
    return kernels.heap_push(keys, nodes, pos, size, v, d), top


@kernel
def _settle_next(
    keys: Int64Array,
    nodes: Int64Array,
    pos: Int64Array,
    size: int,
    same: Int64Array,
    top: int,
    current: int,
) -> tuple[int, int, int, int]:  # pragma: no cover - compiled
    """The next node to settle and its distance: from the stack while it holds any (all at
    `current`, the distance being settled), else the heap's minimum; with the heap's and the
    stack's new sizes."""
    if top > 0:
        top -= 1
        u = same[top]
        pos[u] = -2
        return u, current, size, top
    u, du, size = kernels.heap_pop(keys, nodes, pos, size)
    return u, du, size, top


@kernel
def _price_by_distance_to_deficit(
    net: ResidualArrays,
    dist: Int64Array,
    keys: Int64Array,
    nodes: Int64Array,
    pos: Int64Array,
    settled: Int64Array,
    same: Int64Array,
    cancel: Int64Array,
) -> int:  # pragma: no cover - compiled
    """Raise every node's price by its reduced-cost distance to the nearest deficit.

    A Dijkstra search backwards from every deficit node over residual arcs, stopped once every
    surplus node is settled (distance D). Settled nodes gain their distance, the others D,
    shifted by -D so that only settled nodes change. Reduced costs stay non-negative (the
    distances obey the triangle inequality) and every node's shortest path to a deficit
    becomes balanced, so one blocking-flow sweep can then route all surplus nodes at once,
    however different their path costs. Returns D, -1 if some surplus node reaches no
    deficit (infeasible), -2 if cancelled. `same` is scratch (see `_ON_STACK`).
    """
    n = len(net.first)
    size = 0
    top = 0
    sources = 0
    for v in range(n):
        pos[v] = -1
        dist[v] = INF
    for v in range(n):
        if net.alive[v]:
            if net.excess[v] < 0:
                size, top = _label_at(v, 0, 0, dist, keys, nodes, pos, size, same, top)
            elif net.excess[v] > 0:
                sources += 1
    nsettled = 0
    reached = 0
    last = 0
    while (top > 0 or size > 0) and reached < sources:
        u, du, size, top = _settle_next(keys, nodes, pos, size, same, top, last)
        settled[nsettled] = u
        nsettled += 1
        last = du
        if net.excess[u] > 0:
            reached += 1
        if nsettled % 1024 == 0 and kernels.is_cancelled(cancel):
            return -2
        pu = net.price[u]
        base = net.first[u]
        for s in range(base, base + net.deg[u]):
            if net.paircap[s] <= net.rescap[s]:  # x -> u has no residual capacity
                continue
            x = net.head[s]
            nd = du - net.cost[s] - net.price[x] + pu
            if nd < dist[x]:
                size, top = _label_at(x, nd, du, dist, keys, nodes, pos, size, same, top)
    if reached < sources:
        return -1
    for i in range(nsettled):
        v = settled[i]
        net.price[v] += dist[v] - last
    return last


@kernel
def _price_by_distance_from_surplus(
    net: ResidualArrays,
    dist: Int64Array,
    keys: Int64Array,
    nodes: Int64Array,
    pos: Int64Array,
    settled: Int64Array,
    same: Int64Array,
    cancel: Int64Array,
) -> int:  # pragma: no cover - compiled
    """Raise prices around the surplus nodes until a path to the nearest deficit is balanced.

    The forward counterpart of `_price_by_distance_to_deficit`: a Dijkstra search from every
    surplus node over residual arcs, stopped at the first deficit settled (distance D). Each
    settled node's price rises by D minus its distance, so reduced costs stay non-negative and
    the shortest path to that deficit becomes balanced; nodes farther than D keep their prices.
    Returns D, -1 if no surplus node reaches a deficit (infeasible), -2 if cancelled. `same`
    is scratch (see `_ON_STACK`).
    """
    n = len(net.first)
    size = 0
    top = 0
    for v in range(n):
        pos[v] = -1
        dist[v] = INF
    for v in range(n):
        if net.alive[v] and net.excess[v] > 0:
            size, top = _label_at(v, 0, 0, dist, keys, nodes, pos, size, same, top)
    nsettled = 0
    found = -1
    current = 0
    while top > 0 or size > 0:
        u, du, size, top = _settle_next(keys, nodes, pos, size, same, top, current)
        current = du
        settled[nsettled] = u
        nsettled += 1
        if net.excess[u] < 0:
            found = du
            break
        if nsettled % 1024 == 0 and kernels.is_cancelled(cancel):
            return -2
        pu = net.price[u]
        base = net.first[u]
        for s in range(base, base + net.deg[u]):
            if net.rescap[s] <= 0:
                continue
            w = net.head[s]
            nd = du + net.cost[s] - pu + net.price[w]
            if nd < dist[w]:
                size, top = _label_at(w, nd, du, dist, keys, nodes, pos, size, same, top)
    if found < 0:
        return -1
    for i in range(nsettled):
        v = settled[i]
        net.price[v] += found - dist[v]
    return found


@kernel
def _surplus_nodes(net: ResidualArrays) -> int:  # pragma: no cover - compiled
    """How many live nodes have surplus."""
    count = 0
    for v in range(len(net.first)):
        if net.alive[v] and net.excess[v] > 0:
            count += 1
    return count


class RelaxationSolver(FlowSolver):
    """Relaxation with arc prioritisation; from scratch each solve unless `incremental`."""

    algorithm = "relaxation"

    def __init__(
        self,
        *,
        incremental: bool = False,
        arc_prioritisation: bool = True,
        tree_limit: int = DEFAULT_TREE_LIMIT,
        forward_reprice: int = DEFAULT_FORWARD_REPRICE,
    ) -> None:
        super().__init__()
        if forward_reprice < 0:
            raise ValueError(f"forward_reprice must be at least 0, got {forward_reprice}")
        self.incremental = incremental
        self.arc_prioritisation = arc_prioritisation
        self.tree_limit = tree_limit
        self.forward_reprice = forward_reprice
        self._fresh = True
        self._work: _Work | None = None

    def _after_load(self) -> None:
        self._fresh = True

    def _adopt_potentials(self, potentials: Int64Array) -> None:
        super()._adopt_potentials(potentials)
        self._fresh = False

    def _run(self) -> dict[str, float]:
        a = self.network.arrays
        n = len(a.first)
        if self._work is None or len(self._work.in_tree) != n:
            # Exactly n long, never longer: the kernels wrap their rings at the length of the
            # array (`_enqueue`, `_label`) and at the node count (`_relax`) alike.
            self._work = _Work(n)
        w = self._work
        if self._fresh or not self.incremental:
            a.price[:] = 0
            self.network.set_flows(np.zeros(self.network.arc_bound, dtype=np.int64))
            saturated = kernels.saturate_violations(a, 0, 1, True)
        else:
            kernels.seed_fresh_prices(a, 1)
            saturated = kernels.saturate_violations(a, 0, 1, False)
        stats = np.zeros(10, dtype=np.int64)
        limit = self.tree_limit if self.tree_limit > 0 else n + 1
        status = _relax(
            a,
            w.in_tree,
            w.labeled,
            w.pred,
            w.deque,
            w.members,
            w.pending,
            w.rev_done,
            w.join_seq,
            w.rev_seq,
            w.queue,
            w.queued,
            w.tight,
            w.stamp,
            self.arc_prioritisation,
            limit,
            self._cancel,
            stats,
        )
        # Trees that grew past the limit were left alone: finish primal-dual style, routing
        # along balanced arcs in blocking-flow sweeps and repricing by Dijkstra in between.
        while status == _OK and stats[_DEFERRED] > 0:
            routed = _route_balanced(a, w.level, w.cur, w.deque, w.members, self._cancel, stats)
            if routed < 0:
                status = _CANCELLED
                break
            stats[_ROUTED] += routed
            surplus = _surplus_nodes(a)
            if surplus == 0:  # supplies sum to zero (checked), so no deficit is left either
                break
            stats[_DIJKSTRAS] += 1
            reprice = _price_by_distance_to_deficit
            if surplus <= self.forward_reprice:
                reprice = _price_by_distance_from_surplus
                stats[_FORWARD] += 1
            raised = reprice(
                a, w.dist, w.heap_keys, w.heap_nodes, w.heap_pos, w.members, w.deque, self._cancel
            )
            if raised == -1:
                status = _INFEASIBLE
            elif raised == -2:
                status = _CANCELLED
        if status == _CANCELLED:
            self._fresh = True
            raise SolverCancelled("relaxation was cancelled")
        if status == _INFEASIBLE:
            self._fresh = True
            raise InfeasibleError("the supplies cannot be routed to the demands within capacities")
        self._fresh = False
        return {
            "iterations": float(stats[_ITERATIONS]),
            "augmentations": float(stats[_AUGMENTATIONS]),
            "price_rises": float(stats[_PRICE_RISES]),
            "tree_nodes": float(stats[_SCANNED]),
            "arc_scans": float(stats[_ARC_SCANS]),
            "saturated": float(saturated),
            "deferred": float(stats[_DEFERRED]),
            "routed_in_sweeps": float(stats[_ROUTED]),
            "sweep_phases": float(stats[_PHASES]),
            "dijkstras": float(stats[_DIJKSTRAS]),
            "dijkstras_forward": float(stats[_FORWARD]),
        }
