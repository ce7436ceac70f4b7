"""Cost scaling: Goldberg's push-relabel minimum-cost flow with epsilon scaling.

Costs are multiplied by a power of two `scale` above the node count, so that 1-optimality of the
scaled problem is exact optimality. Each phase divides epsilon by `alpha` (Firmament tuned 9,
Quincy's cs2 used 2) and *refines*: arcs with too negative a reduced cost are saturated, then
nodes with excess push along admissible arcs (negative reduced cost) and are relabelled when they
have none. Global price updates (a bucket-based Dijkstra from the deficit nodes, backwards) reset
prices to distances. Two schemes, each the faster where it is used: from scratch, OR-Tools'
(every negative arc saturated, active nodes in a stack, no global updates: they cost more than
they save on scheduling graphs, and a phase only checks every so often that all excess can still
reach a deficit, which is how infeasibility shows); on warm starts, cs2's (arcs below -epsilon
saturated, a FIFO queue, global updates), where epsilon restarts small and excess may need
paths far dearer than the prices allow.

Epsilon 1 is the guarantee, not the usual end: with integer costs the flow is often optimal
phases earlier, once epsilon is below a few cost units, and a proof in whole cost units (integer
potentials under which no residual arc is negative, found from the rounded prices) ends the
solve there (`CostScalingSolver._certify`).

Incremental use (Firmament section 5.2, 6.2): the network keeps flow and scaled prices between
solves; before a batch is applied, price refinement brings the prices to an exact complementary
slackness certificate for the previous optimum, so that after the batch only the changed arcs
violate optimality and epsilon restarts at the worst violation instead of at the largest cost
(Firmament restarts at no less than the largest cost change: `warm_epsilon`).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from firmament_py.flow.changes import ChangeBatch
from firmament_py.jit import kernel
from firmament_py.solvers import kernels
from firmament_py.solvers.base import FlowSolver, InfeasibleError, SolverCancelled, SolverError
from firmament_py.solvers.kernels import INF
from firmament_py.solvers.network import ResidualArrays, max_abs_cost

Int64Array = npt.NDArray[np.int64]

# Where epsilon restarts on a warm start: at the worst reduced-cost violation the batch left, or
# at least at the largest cost change in it, as Firmament does.
WARM_EPSILON_RULES = ("violation", "largest-change")

_OK = 0
_INFEASIBLE = 1
_CANCELLED = 2
_STUCK = 3

# stats[] entries
_PUSHES = 0
_RELABELS = 1
_UPDATES = 2
_PHASES = 3
_SATURATED = 4
_REFINES_SKIPPED = 5
_RELABEL_SCANS = 6
_HUB_RELABELS = 7
_CHECKS = 8
_CERTIFIED = 9


@kernel
def _move_to_bucket(
    x: int, old: int, new: int, bfirst: Int64Array, bnext: Int64Array, bprev: Int64Array
) -> None:  # pragma: no cover - compiled
    """Move node `x` from bucket `old` (INF: none) to the front of bucket `new`; the buckets
    are doubly linked lists with heads in `bfirst`."""
    if old < INF:
        p = bprev[x]
        q = bnext[x]
        if p >= 0:
            bnext[p] = q
        else:
            bfirst[old] = q
        if q >= 0:
            bprev[q] = p
    h = bfirst[new]
    bnext[x] = h
    bprev[x] = -1
    if h >= 0:
        bprev[h] = x
    bfirst[new] = x


@kernel
def _global_update(
    net: ResidualArrays,
    eps: int,
    scale: int,
    dist: Int64Array,
    bfirst: Int64Array,
    bnext: Int64Array,
    bprev: Int64Array,
    settled: Int64Array,
) -> bool:  # pragma: no cover - compiled
    """Raise prices by eps x (distance to a deficit); False if some excess cannot be routed."""
    n = len(net.first)
    nb = len(bfirst)
    active = 0
    for v in range(n):
        dist[v] = INF
        settled[v] = 0
        bnext[v] = -1
        bprev[v] = -1
        if net.alive[v]:
            if net.excess[v] > 0:
                active += 1
            elif net.excess[v] < 0:
                dist[v] = 0
                h = bfirst[0]
                bnext[v] = h
                if h >= 0:
                    bprev[h] = v
                bfirst[0] = v
    if active == 0:
        bfirst[0] = -1
        return True
    top = 0
    clipped = False
    level = 0
    while level <= top and active > 0:
        while bfirst[level] >= 0 and active > 0:
            u = bfirst[level]
            nxt = bnext[u]
            bfirst[level] = nxt
            if nxt >= 0:
                bprev[nxt] = -1
            settled[u] = 1
            if net.excess[u] > 0:
                active -= 1
            pu = net.price[u]
            base = net.first[u]
            for s in range(base, base + net.deg[u]):
                if net.paircap[s] <= net.rescap[s]:  # x -> u has no residual capacity
                    continue
                x = net.head[s]
                if settled[x]:
                    continue
                rc = -net.cost[s] * scale - net.price[x] + pu
                step = rc // eps + 1
                if step < 0:
                    step = 0
                nd = level + step
                if nd >= dist[x]:
                    continue
                if nd >= nb:
                    clipped = True
                    continue
                _move_to_bucket(x, dist[x], nd, bfirst, bnext, bprev)
                dist[x] = nd
                if nd > top:
                    top = nd
        if active > 0:
            level += 1
    if active > 0 and clipped:
        # Some excess lies beyond the n + 1 buckets (an incremental start can leave flow far
        # below the prices its new paths need): raising it by only n + 1 steps per update made
        # the refine crawl for millions of relabels. Find the exact distances instead.
        for d in range(min(top + 1, nb)):
            bfirst[d] = -1
        return _global_update_exact(net, eps, scale, dist, bnext, bprev, settled)
    # Unsettled nodes (still queued, possibly at this very level, or never reached) sit at
    # distance `level` or beyond; giving them all `level` keeps every arc epsilon-optimal.
    # (`level + 1`, as here until a reviewer found it, left arcs at -2 eps when the search
    # stopped with nodes still queued at `level`.)
    far = level
    for v in range(n):
        if not net.alive[v]:
            continue
        if settled[v]:
            net.price[v] += eps * dist[v]
        else:
            net.price[v] += eps * far
    for d in range(min(top + 1, nb)):
        bfirst[d] = -1
    return active == 0


@kernel
def _global_update_exact(
    net: ResidualArrays,
    eps: int,
    scale: int,
    dist: Int64Array,
    keys: Int64Array,
    nodes: Int64Array,
    pos: Int64Array,
) -> bool:  # pragma: no cover - compiled
    """`_global_update` with a heap instead of n + 1 buckets, so distances are unbounded;
    False if some excess cannot reach a deficit."""
    n = len(net.first)
    size = 0
    active = 0
    for v in range(n):
        dist[v] = INF
        pos[v] = -1
    for v in range(n):
        if net.alive[v]:
            if net.excess[v] > 0:
                active += 1
            elif net.excess[v] < 0:
                dist[v] = 0
                size = kernels.heap_push(keys, nodes, pos, size, v, 0)
    last = 0
    while size > 0 and active > 0:
        u, du, size = kernels.heap_pop(keys, nodes, pos, size)
        last = du
        if net.excess[u] > 0:
            active -= 1
        pu = net.price[u]
        base = net.first[u]
        for s in range(base, base + net.deg[u]):
            if net.paircap[s] <= net.rescap[s]:  # x -> u has no residual capacity
                continue
            x = net.head[s]
            if pos[x] == -2:
                continue
            rc = -net.cost[s] * scale - net.price[x] + pu
            step = rc // eps + 1
            if step < 0:
                step = 0
            nd = du + step
            if nd < dist[x]:
                dist[x] = nd
                size = kernels.heap_push(keys, nodes, pos, size, x, nd)
    if active > 0:
        return False
    # As in `_global_update`: nodes not popped lie at distance `last` or beyond.
    far = last
    for v in range(n):
        if net.alive[v]:
            net.price[v] += eps * (dist[v] if pos[v] == -2 else far)
    return True


@kernel
def _lift_prices(
    net: ResidualArrays,
    scale: int,
    dist: Int64Array,
    bfirst: Int64Array,
    bnext: Int64Array,
    bprev: Int64Array,
) -> None:  # pragma: no cover - compiled
    """Raise every price by `scale` times its node's residual distance to the demand nodes,
    with reduced costs in whole `scale` units as lengths (rounded down, negative ones as 0,
    distances capped at the last of the `len(bfirst)` buckets), and the nodes that reach none
    by the largest distance found. No residual arc's reduced cost goes down (a negative one can
    only rise), so an optimal flow stays optimal and a batch's violations get no worse.

    A bucket search as in `_global_update` (`bnext[v] == -2` marks a settled node): on job1k's
    cluster 4.5 ms, where a binary heap took 24. It takes the solver's own work arrays and
    leaves every bucket empty, as `_global_update` expects to find them."""
    n = len(net.first)
    nb = len(bfirst)
    for d in range(nb):
        bfirst[d] = -1
    for v in range(n):
        dist[v] = INF
        bnext[v] = -1
        bprev[v] = -1
    for v in range(n):
        if net.alive[v] and net.supply[v] < 0:
            _move_to_bucket(v, int(INF), 0, bfirst, bnext, bprev)
            dist[v] = 0
    far = 0
    level = 0
    top = 0
    while level <= top:
        u = bfirst[level]
        if u < 0:
            level += 1
            continue
        q = bnext[u]
        bfirst[level] = q
        if q >= 0:
            bprev[q] = -1
        bnext[u] = -2  # settled
        far = level
        pu = net.price[u]
        base = net.first[u]
        for s in range(base, base + net.deg[u]):
            if net.paircap[s] <= net.rescap[s]:
                continue
            x = net.head[s]
            if bnext[x] == -2:
                continue
            rc = -net.cost[s] * scale - net.price[x] + pu
            nd = level + (rc // scale if rc > 0 else 0)
            if nd > nb - 1:
                nd = nb - 1
            if nd >= dist[x]:
                continue
            _move_to_bucket(x, dist[x], nd, bfirst, bnext, bprev)
            dist[x] = nd
            if nd > top:
                top = nd
    for v in range(n):
        if net.alive[v]:
            net.price[v] += scale * (dist[v] if bnext[v] == -2 else far)


@kernel
def _all_excess_reaches_deficit(
    net: ResidualArrays, queue: Int64Array, seen: Int64Array
) -> bool:  # pragma: no cover - compiled
    """Backward search from deficit nodes over residual arcs, ignoring costs."""
    n = len(net.first)
    size = 0
    for v in range(n):
        seen[v] = 0
        if net.alive[v] and net.excess[v] < 0:
            seen[v] = 1
            queue[size] = v
            size += 1
    i = 0
    while i < size:
        u = queue[i]
        i += 1
        base = net.first[u]
        for s in range(base, base + net.deg[u]):
            x = net.head[s]
            if seen[x] == 0 and net.paircap[s] > net.rescap[s]:
                seen[x] = 1
                queue[size] = x
                size += 1
    for v in range(n):
        if net.alive[v] and net.excess[v] > 0 and seen[v] == 0:
            return False
    return True


@kernel
def _has_admissible(
    net: ResidualArrays, w: int, scale: int, cur: Int64Array
) -> bool:  # pragma: no cover - compiled
    """Whether `w` has an admissible arc; moves its current-arc pointer to the first one."""
    end = net.first[w] + net.deg[w]
    pw = net.price[w]
    t = cur[w]
    while t < end:
        if net.rescap[t] > 0 and net.cost[t] * scale - pw + net.price[net.head[t]] < 0:
            cur[w] = t
            return True
        t += 1
    cur[w] = t
    return False


@kernel
def _relabel(
    net: ResidualArrays, v: int, eps: int, scale: int, cur: Int64Array, stats: Int64Array
) -> bool:  # pragma: no cover - compiled
    """Raise `v`'s price so that it gets an admissible arc; False if it has no residual arc.

    Usually to eps above its cheapest residual arc. But the scan stops at the first arc whose
    reduced cost is below eps: a rise of exactly eps already makes that arc admissible and keeps
    every arc eps-optimal (all of v's arcs have reduced cost >= 0 when it is relabelled), so a
    hub with 10^5 residual arcs is rarely scanned whole (OR-Tools relabels the same way).
    """
    base = net.first[v]
    end = base + net.deg[v]
    pv = net.price[v]
    enough = pv + eps
    best = INF
    at = base  # the first slot at `best`
    before = INF  # the least value among slots before `at`
    for t in range(base, end):
        if net.rescap[t] > 0:
            p = net.cost[t] * scale + net.price[net.head[t]]
            if p < enough:
                net.price[v] = enough
                cur[v] = t
                stats[_RELABELS] += 1
                stats[_RELABEL_SCANS] += t - base + 1
                return True
            if p < best:
                before = best
                best = p
                at = t
    if best == INF:
        return False
    net.price[v] = best + eps
    # The scan can resume at `at` if no earlier slot became admissible (all stay >= best + eps).
    cur[v] = at if before >= best + eps else base
    stats[_RELABELS] += 1
    stats[_RELABEL_SCANS] += end - base
    if end - base > 1000:
        stats[_HUB_RELABELS] += 1
    return True


@kernel
def _refine(
    net: ResidualArrays,
    eps: int,
    scale: int,
    cur: Int64Array,
    queue: Int64Array,
    inq: Int64Array,
    dist: Int64Array,
    bfirst: Int64Array,
    bnext: Int64Array,
    bprev: Int64Array,
    settled: Int64Array,
    updates: bool,
    update_every: int,
    lookahead: bool,
    cancel: Int64Array,
    stats: Int64Array,
) -> int:  # pragma: no cover - compiled
    """One phase: make the flow eps-optimal (see the module docstring); returns a status.

    Without `updates` (OR-Tools' scheme, used from scratch): every residual arc with a negative
    reduced cost is saturated, so no arc is admissible until its tail is relabelled and every
    current-arc pointer can start at the end of its list (a hub's first discharge does not scan
    10^5 arcs to find nothing); active nodes are discharged last in, first out; and every
    `update_every` relabels a check that every excess can still reach a deficit (infeasibility
    shows no other way). With `updates` (cs2's scheme, used on warm starts): arcs below -eps are
    saturated, active nodes are taken first in, first out, and a global price update runs at
    the start and every `update_every` relabels. Each scheme was the faster one where it is
    used (docs/benchmarks-history.md).
    """
    n = len(net.first)
    floor = -eps if updates else 0
    # Make the pseudoflow eps-optimal.
    for v in range(n):
        if not net.alive[v]:
            continue
        pv = net.price[v]
        base = net.first[v]
        for s in range(base, base + net.deg[v]):
            r = net.rescap[s]
            if r > 0:
                w = net.head[s]
                if net.cost[s] * scale - pv + net.price[w] < floor:
                    net.rescap[s] = 0
                    net.rescap[net.mate[s]] += r
                    net.excess[v] -= r
                    net.excess[w] += r
                    stats[_SATURATED] += 1
    # Active nodes: a ring queue[qhead:qhead + qsize] (FIFO) with updates, else a stack
    # queue[:qsize] (qhead stays 0).
    qhead = 0
    qsize = 0
    for v in range(n):
        cur[v] = net.first[v] if updates else net.first[v] + net.deg[v]
        if net.alive[v] and net.excess[v] > 0:
            queue[qsize] = v
            qsize += 1
            inq[v] = 1
    if qsize == 0:
        return _OK
    if updates:
        stats[_UPDATES] += 1
        if not _global_update(net, eps, scale, dist, bfirst, bnext, bprev, settled):
            for i in range(qsize):
                inq[queue[(qhead + i) % n]] = 0
            return _INFEASIBLE
        for u in range(n):
            cur[u] = net.first[u]
    since_update = 0
    work = 0
    # Goldberg bounds relabels per refine by O(n^2); far beyond that something is wrong.
    relabel_cap = 16 * n * n + 1_000_000
    relabels = 0
    while qsize > 0:
        if updates:
            v = queue[qhead]
            qhead += 1
            if qhead == n:
                qhead = 0
        else:
            v = queue[qsize - 1]
        qsize -= 1
        inq[v] = 0
        while net.excess[v] > 0:
            end = net.first[v] + net.deg[v]
            s = cur[v]
            pv = net.price[v]
            while s < end:
                r = net.rescap[s]
                if r > 0:
                    w = net.head[s]
                    if net.cost[s] * scale - pv + net.price[w] < 0:
                        if (
                            lookahead
                            and net.excess[w] >= 0
                            and not _has_admissible(net, w, scale, cur)
                        ):
                            # Look ahead (Goldberg's cs2): w would only push the flow back, so
                            # relabel it now; the arc may stop being admissible.
                            if _relabel(net, w, eps, scale, cur, stats):
                                since_update += 1
                                relabels += 1
                                if net.cost[s] * scale - pv + net.price[w] >= 0:
                                    s += 1
                                    continue
                        d = net.excess[v] if net.excess[v] < r else r
                        net.rescap[s] = r - d
                        net.rescap[net.mate[s]] += d
                        net.excess[v] -= d
                        ew = net.excess[w]
                        net.excess[w] = ew + d
                        stats[_PUSHES] += 1
                        if ew + d > 0 and inq[w] == 0:
                            inq[w] = 1
                            tail = qhead + qsize
                            if tail >= n:
                                tail -= n
                            queue[tail] = w
                            qsize += 1
                        if net.excess[v] == 0:
                            break
                s += 1
            cur[v] = s
            if net.excess[v] == 0:
                break
            if not _relabel(net, v, eps, scale, cur, stats):
                for i in range(qsize):
                    inq[queue[(qhead + i) % n]] = 0
                return _INFEASIBLE
            relabels += 1
            if relabels > relabel_cap:
                for i in range(qsize):
                    inq[queue[(qhead + i) % n]] = 0
                return _STUCK
            since_update += 1
            if update_every > 0 and since_update >= update_every:
                since_update = 0
                if updates:
                    stats[_UPDATES] += 1
                    feasible = _global_update(net, eps, scale, dist, bfirst, bnext, bprev, settled)
                    # prices moved: restart every current-arc pointer
                    for u in range(n):
                        cur[u] = net.first[u]
                else:
                    stats[_CHECKS] += 1
                    feasible = _all_excess_reaches_deficit(net, dist, settled)
                if not feasible:
                    for i in range(qsize):
                        inq[queue[(qhead + i) % n]] = 0
                    return _INFEASIBLE
        work += 1
        if work >= 256:
            work = 0
            if kernels.is_cancelled(cancel):
                for i in range(qsize):
                    inq[queue[(qhead + i) % n]] = 0
                return _CANCELLED
    return _OK


@kernel
def _rounded_violations(
    net: ResidualArrays, scale: int, pot: Int64Array, nodes: Int64Array, limit: int
) -> int:  # pragma: no cover - compiled
    """Set `pot` to the prices rounded down to whole cost units; return how many nodes have a
    residual arc with a negative reduced cost under them (`limit + 1` once there are more),
    listed in `nodes`."""
    n = len(net.first)
    for v in range(n):
        pot[v] = net.price[v] // scale if net.alive[v] else 0
    found = 0
    for v in range(n):
        if not net.alive[v]:
            continue
        pv = pot[v]
        base = net.first[v]
        for s in range(base, base + net.deg[v]):
            if net.rescap[s] > 0 and net.cost[s] - pv + pot[net.head[s]] < 0:
                if found == limit:
                    return limit + 1
                nodes[found] = v
                found += 1
                break
    return found


@kernel
def _normalise(net: ResidualArrays) -> None:  # pragma: no cover - compiled
    """Shift prices so the smallest live one is 0 (prices are defined up to a constant)."""
    low = INF
    for v in range(len(net.first)):
        if net.alive[v] and net.price[v] < low:
            low = net.price[v]
    if low == INF:
        return
    for v in range(len(net.first)):
        if net.alive[v]:
            net.price[v] -= low


@kernel
def _unscaled(net: ResidualArrays, scale: int, out: Int64Array) -> None:  # pragma: no cover
    for v in range(len(net.first)):
        out[v] = net.price[v] // scale if net.alive[v] else 0


class CostScalingSolver(FlowSolver):
    """Goldberg's cost scaling; incremental between solves.

    `global_updates`: None (the default) runs them on warm starts only, True on every solve
    (each at the start of every phase and every `update_factor * n + 30` relabels), False
    never (a warm start may then crawl, see docs/solvers.md). Solves without them check every
    `check_factor * n + 30` relabels that all excess can still reach a deficit (n: live nodes).
    `warm_epsilon`: "violation" (the default) restarts epsilon on a warm start at the worst
    reduced-cost violation; "largest-change" at no less than the largest cost change in the
    batches since the last solve (Firmament's rule). `certify_early`: between phases, try to
    prove the flow optimal before epsilon reaches 1 and stop there (`_certify`); a solve that
    reaches epsilon 1 ends with that proof either way.
    """

    algorithm = "cost-scaling"

    def __init__(
        self,
        *,
        alpha: int = 9,
        incremental: bool = True,
        global_updates: bool | None = None,
        price_refine: bool = True,
        lookahead: bool = True,
        certify_early: bool = True,
        update_factor: float = 1.0,
        check_factor: float = 8.0,
        warm_epsilon: str = "violation",
    ) -> None:
        super().__init__()
        if alpha < 2:
            raise ValueError(f"alpha must be at least 2, got {alpha}")
        if warm_epsilon not in WARM_EPSILON_RULES:
            raise ValueError(
                f"warm_epsilon must be one of {', '.join(WARM_EPSILON_RULES)}, got {warm_epsilon!r}"
            )
        if update_factor < 0 or check_factor < 0:
            raise ValueError(
                f"update_factor and check_factor must be >= 0, got {update_factor}, {check_factor}"
            )
        self.alpha = alpha
        self.incremental = incremental
        self.global_updates = global_updates
        self.price_refine = price_refine
        self.lookahead = lookahead
        self.certify_early = certify_early
        self.update_factor = update_factor
        self.check_factor = check_factor
        self.warm_epsilon = warm_epsilon
        self._scale = 1
        self._fresh = True
        self._zero = True  # flow and prices are all zero (as a load leaves them)
        self._work: list[Int64Array] = []
        self._exact: Int64Array = np.zeros(0, dtype=np.int64)
        self._exact_valid = False
        # The prices are `scale` times integer potentials that certify the flow (proven early,
        # or at epsilon 1): no price refine is needed to read or keep them.
        self._scaled_exact = False
        self._max_change = 0  # largest cost change in the batches since the last solve
        self._lift_due = False  # prices adopted from another solver, not lifted yet (`_run`)

    # ------------------------------------------------------------------ hooks

    def _after_load(self) -> None:
        self._lift_due = False
        self._fresh = True
        self._zero = True
        self._exact_valid = False
        self._scaled_exact = False

    def _before_changes(self, changes: ChangeBatch) -> None:
        self._exact_valid = False
        exact, self._scaled_exact = self._scaled_exact, False  # the batch may break the proof
        self._max_change = max(self._max_change, changes.max_cost_change())
        if not self.incremental:
            self._fresh = True
            return
        if self.price_refine and not self._fresh and not exact:
            # Price refine on the previous optimum: bring prices to an exact certificate
            # (scaled reduced costs >= 0), so only arcs the batch touches can violate it.
            kernels.price_refine(self.network.arrays, self._scale, 0, 8 * self._slots())

    def _adopt_potentials(self, potentials: Int64Array) -> None:
        a = self.network.arrays
        self._rescale()
        n = min(len(potentials), len(a.price))
        a.price[:n] = potentials[:n] * self._scale
        self._lift_due = True  # see _run
        self._fresh = False
        self._zero = False
        self._exact_valid = False
        self._scaled_exact = False

    def potentials(self) -> Int64Array:
        a = self.network.arrays
        if not self._exact_valid or len(self._exact) != len(a.price):
            self._exact = np.zeros(len(a.price), dtype=np.int64)
            _unscaled(a, self._scale, self._exact)
            if self._scaled_exact:
                self._exact_valid = True
                return self._exact.copy()
            saved = a.price.copy()
            a.price[:] = self._exact
            ok = kernels.price_refine(a, 1, 0, 64 * self._slots() + 1024)
            self._exact = a.price.copy()
            a.price[:] = saved
            if not ok:
                raise SolverError("cost scaling could not certify its flow (internal error)")
            self._exact_valid = True
        return self._exact.copy()

    def load_proof_kernels(self) -> None:
        """Load (or compile) the early proof's kernels without changing anything: a graph too
        small to leave few violations may never try the proof (`solvers.warmup`)."""
        a = self.network.arrays
        n = len(a.first)
        pot, nodes = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
        _rounded_violations(a, self._scale, pot, nodes, 0)
        kernels.price_refine_from(a, 1, 0, 0, nodes, 0)

    # ------------------------------------------------------------------ solving

    def _certify(self, pot: Int64Array, nodes: Int64Array, limit: int, budget: int) -> int:
        """Try to prove the current flow (a refine has just left no excess) optimal, before
        epsilon reaches 1 or at 1: -1 if it is, and the prices are then exact (`scale` times
        integer potentials that certify it); otherwise how many nodes have an arc that violates
        the prices rounded down to whole cost units (more than `limit`: nothing else was tried).
        The prices are unchanged unless proven; `pot` and `nodes` are work arrays.

        With integer costs a flow is optimal exactly when some integer potentials leave every
        residual arc a reduced cost >= 0. The rounded prices come close once epsilon is below
        a few cost units; price refinement from them (lowering only) finds such potentials
        within `budget` arc scans, or gives up (a negative cycle, or too far). On
        the scheduling graphs the flow is optimal phases before epsilon reaches 1.
        """
        a = self.network.arrays
        found = int(_rounded_violations(a, self._scale, pot, nodes, limit))
        if found > limit:
            return found
        saved = a.price.copy()
        a.price[:] = pot
        if found > 0 and not kernels.price_refine_from(a, 1, 0, budget, nodes, found):
            a.price[:] = saved
            return found
        a.price[:] *= self._scale
        return -1

    def _slots(self) -> int:
        return int(self.network.arrays.meta[0])

    def _rescale(self) -> None:
        """Keep scale a power of two above the node count (prices follow when it grows)."""
        a = self.network.arrays
        nodes = self.network.live_nodes() + 1
        while self._scale <= nodes:
            self._scale *= 2
            a.price[:] *= 2

    def prepare(self) -> None:
        """Lift adopted prices now (see `_run`): a race's worker does it while the caller is
        away, instead of at the start of its next solve. Lifting before later batches is as
        good as after: no reduced cost goes down, so the prices still certify the flow."""
        if self._lift_due and self.incremental and not self._fresh:
            self._rescale()
            _, _, _, dist, bfirst, bnext, bprev, _ = self._work_arrays()
            _lift_prices(self.network.arrays, self._scale, dist, bfirst, bnext, bprev)
        self._lift_due = False

    def _work_arrays(self) -> list[Int64Array]:
        """The kernels' work arrays, exactly as long as the network's node arrays: current
        arc, queue, in queue, dist, bucket heads (one more), bucket next, bucket prev,
        settled."""
        n = len(self.network.arrays.first)
        if not self._work or len(self._work[0]) != n:
            self._work = [np.zeros(n, dtype=np.int64) for _ in range(8)]
            self._work[4] = np.full(n + 1, -1, dtype=np.int64)
        return self._work

    def _run(self) -> dict[str, float]:
        a = self.network.arrays
        self._rescale()
        scale = self._scale
        # Budgets and bounds count live nodes, not the arrays' length: a network keeps room to
        # grow, and the solve must not depend on how much (LS50 from scratch relabelled 9% more
        # when the price refine's budget followed a quarter more room).
        live = self.network.live_nodes()
        max_cost = int(max_abs_cost(a))
        if max_cost * scale * 8 * (live + 1) >= 2**62:
            raise SolverError(
                f"costs up to {max_cost} on {live} nodes overflow cost scaling's 64-bit prices; "
                "use relaxation or successive shortest path"
            )
        cur, queue, inq, dist, bfirst, bnext, bprev, settled = self._work_arrays()
        stats = np.zeros(10, dtype=np.int64)
        fresh = self._fresh or not self.incremental
        # Another solver's optimal potentials can be the lowest that certify its flow
        # (relaxation's are): from those, the job round of `bench/solvers.py`'s job1k took 3.4
        # times as many relabels' arc scans, 170 ms instead of 50. Raised to distances from the
        # demand nodes, where this solver's own prices end up, it does the same work as from
        # its own answer (57 ms with the lift). Done here unless idle time did it already.
        self.prepare()
        if fresh:
            if not self._zero:
                a.price[:] = 0
                self.network.set_flows(np.zeros(self.network.arc_bound, dtype=np.int64))
            eps = max(1, max_cost * scale)
        else:
            # Epsilon restarts at the worst violation, or (Firmament section 6.2) at least at
            # the costliest changed arc: new supply may need paths that expensive. Global
            # updates keep a small epsilon from crawling towards them, and the violation alone
            # was faster on every warm start measured (docs/solvers.md).
            kernels.seed_fresh_prices(a, scale)
            eps = max(1, int(kernels.worst_violation(a, scale, False)))
            if self.warm_epsilon == "largest-change":
                eps = max(eps, self._max_change * scale)
        self._zero = False
        self._scaled_exact = False
        self._max_change = 0
        # Global updates (see `global_updates`): on warm starts by default, where a small
        # epsilon would otherwise crawl towards paths far dearer than the prices allow; from
        # scratch a feasibility check every check_factor * n relabels instead.
        updates = self.global_updates if self.global_updates is not None else not fresh
        factor = self.update_factor if updates else self.check_factor
        update_every = int(factor * live) + 30
        # Between phases, once epsilon is below four cost units and few arcs violate the prices
        # rounded to whole units, try to prove the flow optimal (`_certify`).
        certify_below = max(1, live // 16) if self.certify_early else 0
        status = _OK
        while True:
            eps = max(1, eps // self.alpha)
            stats[_PHASES] += 1
            if self.price_refine and eps > 1 and kernels.price_refine(a, scale, eps, 2 * live):
                # The flow is already eps-optimal under refined prices: skip this phase.
                if kernels.excess_free(a):
                    stats[_REFINES_SKIPPED] += 1
                    continue
            status = _refine(
                a,
                eps,
                scale,
                cur,
                queue,
                inq,
                dist,
                bfirst,
                bnext,
                bprev,
                settled,
                updates,
                update_every,
                self.lookahead,
                self._cancel,
                stats,
            )
            if status != _OK:
                break
            if eps == 1:
                # Optimal (scale > n). Prove it now with integer potentials, as the early
                # proof does, from the few nodes that violate the rounded prices: cheaper than
                # `potentials()`'s refine from all nodes, and prices proven so spare the next
                # batch its price refine. Out of scans, `potentials()` refines as before.
                if self._certify(dist, bnext, live, 64 * self._slots() + 1024) < 0:
                    self._scaled_exact = True
                break
            if certify_below > 0 and eps < 4 * scale:
                found = self._certify(dist, bnext, certify_below, 4 * self._slots())
                if found < 0:  # optimal already: the phases left would only move prices
                    stats[_CERTIFIED] += 1
                    self._scaled_exact = True
                    break
                if found <= certify_below:  # tried in vain: again only with half as many
                    certify_below = found // 2
        self._exact_valid = False
        if status == _CANCELLED:
            self._fresh = True
            raise SolverCancelled("cost scaling was cancelled")
        if status == _STUCK:
            self._fresh = True
            # Without global updates, infeasibility shows only as endless relabelling.
            if not _all_excess_reaches_deficit(a, queue, settled):
                raise InfeasibleError(
                    "the supplies cannot be routed to the demands within capacities"
                )
            raise SolverError("cost scaling exceeded its relabel bound (internal error)")
        if status == _INFEASIBLE:
            self._fresh = True
            raise InfeasibleError("the supplies cannot be routed to the demands within capacities")
        _normalise(a)
        self._fresh = False
        return {
            "pushes": float(stats[_PUSHES]),
            "relabels": float(stats[_RELABELS]),
            "global_updates": float(stats[_UPDATES]),
            "feasibility_checks": float(stats[_CHECKS]),
            "phases": float(stats[_PHASES]),
            "phases_skipped": float(stats[_REFINES_SKIPPED]),
            "saturated": float(stats[_SATURATED]),
            "scale": float(scale),
            "relabel_scans": float(stats[_RELABEL_SCANS]),
            "hub_relabels": float(stats[_HUB_RELABELS]),
            "certified_early": float(stats[_CERTIFIED]),
        }
