"""Kernels several solvers share: optimality repair after changes, exact potentials, heaps.

All functions take `ResidualArrays` (see `network.py` for the layout and its invariants).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from firmament_py.flow.graph import INFINITE_CAPACITY
from firmament_py.jit import kernel
from firmament_py.solvers.network import (
    DIRTY_OVERFLOW,
    N_DIRTY,
    N_FRESH,
    NEG_UNCAPACITATED,
    ResidualArrays,
)

Int64Array = npt.NDArray[np.int64]

INF = np.int64(2**62)


@kernel
def is_cancelled(flag: Int64Array) -> bool:  # pragma: no cover - compiled
    """The cancel test of `FlowSolver.cancel_flag`: [cancel up to, current solve]."""
    return bool(flag[0] != 0 and flag[0] >= flag[1])


# ---------------------------------------------------------------------- changes and optimality


@kernel
def seed_fresh_prices(net: ResidualArrays, scale: int) -> None:  # pragma: no cover
    """Give nodes added by the last batches a price that makes their cheapest residual arc tight.

    A new task then starts with its preferred arc at reduced cost zero and no violated arc,
    instead of violating every arc (as price 0 would next to high-priced aggregators).
    """
    for i in range(net.meta[N_FRESH]):
        v = net.fresh[i]
        if not net.alive[v]:
            continue
        base = net.first[v]
        best = INF
        for s in range(base, base + net.deg[v]):
            if net.rescap[s] > 0:
                p = net.cost[s] * scale + net.price[net.head[s]]
                if p < best:
                    best = p
        if best < INF:
            net.price[v] = best
            continue
        low = -INF
        for s in range(base, base + net.deg[v]):
            if net.paircap[s] > net.rescap[s]:  # the opposite arc has residual capacity
                p = net.price[net.head[s]] + net.cost[s] * scale
                if p > low:
                    low = p
        net.price[v] = low if low > -INF else 0


@kernel
def _saturate_slot(net: ResidualArrays, s: int, eps: int, scale: int) -> int:  # pragma: no cover
    r = net.rescap[s]
    if r <= 0:
        return 0
    m = net.mate[s]
    u = net.head[m]
    w = net.head[s]
    if net.cost[s] * scale - net.price[u] + net.price[w] >= -eps:
        return 0
    net.rescap[s] = 0
    net.rescap[m] += r
    net.excess[u] -= r
    net.excess[w] += r
    return 1


@kernel
def saturate_violations(
    net: ResidualArrays, eps: int, scale: int, everything: bool
) -> int:  # pragma: no cover
    """Saturate residual arcs with reduced cost below -eps; return how many.

    Scans only the arcs the last batches touched unless `everything` (or the dirty list
    overflowed). Costs are multiplied by `scale` (cost scaling keeps scaled prices).
    """
    count = 0
    if everything or net.meta[DIRTY_OVERFLOW] != 0:
        for v in range(len(net.first)):
            if not net.alive[v]:
                continue
            base = net.first[v]
            for s in range(base, base + net.deg[v]):
                count += _saturate_slot(net, s, eps, scale)
        return count
    for i in range(net.meta[N_DIRTY]):
        k = net.dirty[i]
        sf = net.fwd[k]
        if sf < 0:
            continue
        count += _saturate_slot(net, sf, eps, scale)
        count += _saturate_slot(net, net.mate[sf], eps, scale)
    return count


@kernel
def worst_violation(net: ResidualArrays, scale: int, everything: bool) -> int:  # pragma: no cover
    """Largest -(reduced cost) over residual arcs (dirty ones unless `everything`); 0 if none."""
    worst = 0
    if everything or net.meta[DIRTY_OVERFLOW] != 0:
        for v in range(len(net.first)):
            if not net.alive[v]:
                continue
            base = net.first[v]
            pv = net.price[v]
            for s in range(base, base + net.deg[v]):
                if net.rescap[s] > 0:
                    rc = net.cost[s] * scale - pv + net.price[net.head[s]]
                    if -rc > worst:
                        worst = -rc
        return worst
    for i in range(net.meta[N_DIRTY]):
        sf = net.fwd[net.dirty[i]]
        if sf < 0:
            continue
        for s in (sf, net.mate[sf]):
            if net.rescap[s] > 0:
                rc = net.cost[s] * scale - net.price[net.head[net.mate[s]]] + net.price[net.head[s]]
                if -rc > worst:
                    worst = -rc
    return worst


@kernel
def negative_infinite_cycle(net: ResidualArrays) -> int:  # pragma: no cover
    """A node on a negative-cost cycle of uncapacitated arcs, or -1 (Bellman-Ford on those arcs)."""
    if net.meta[NEG_UNCAPACITATED] == 0:  # no such arc: no such cycle
        return -1
    n = len(net.first)
    dist = np.zeros(n, dtype=np.int64)
    pred = np.full(n, -1, dtype=np.int64)
    changed_node = -1
    for _round in range(n + 1):
        changed_node = -1
        for v in range(n):
            if not net.alive[v]:
                continue
            base = net.first[v]
            for s in range(base, base + net.nfwd[v]):
                cap = net.low[net.label[s] >> 1] + net.paircap[s]
                if cap < INFINITE_CAPACITY:
                    continue
                w = net.head[s]
                if dist[v] + net.cost[s] < dist[w]:
                    dist[w] = dist[v] + net.cost[s]
                    pred[w] = v
                    changed_node = w
        if changed_node < 0:
            return -1
    # Walk back n steps to land on the cycle.
    v = changed_node
    for _ in range(n):
        v = pred[v]
    return v


@kernel
def price_refine(
    net: ResidualArrays, scale: int, slack: int, budget: int
) -> bool:  # pragma: no cover
    """Lower prices until every residual arc has reduced cost >= -slack; True on success.

    This is price refinement (Goldberg): it changes prices only, never the flow, and succeeds
    exactly when the flow is slack-optimal. Label-correcting from the current prices, so it is
    cheap when they are close already; gives up after `budget` arc scans, which also stops it on
    flows that are not slack-optimal (negative cycles). Costs are multiplied by `scale`.
    """
    n = len(net.first)
    queue = np.empty(n, dtype=np.int64)
    size = 0
    for v in range(n):
        if net.alive[v]:
            queue[size] = v
            size += 1
    return price_refine_from(net, scale, slack, budget, queue, size)


@kernel
def price_refine_from(
    net: ResidualArrays, scale: int, slack: int, budget: int, queue: Int64Array, size: int
) -> bool:  # pragma: no cover
    """`price_refine` starting from the nodes `queue[:size]` only: every other node must have
    no arc below -slack at the start. `queue` (n long) is the work queue."""
    n = len(net.first)
    inq = net.mark
    for i in range(size):
        inq[queue[i]] = 1
    head_q = 0
    scans = 0
    ok = True
    while size > 0:
        u = queue[head_q]
        head_q += 1
        if head_q == n:
            head_q = 0
        size -= 1
        inq[u] = 0
        base = net.first[u]
        best = net.price[u]
        for s in range(base, base + net.deg[u]):
            if net.rescap[s] > 0:
                p = net.cost[s] * scale + net.price[net.head[s]] + slack
                if p < best:
                    best = p
        scans += net.deg[u] + 1
        if best < net.price[u]:
            net.price[u] = best
            for s in range(base, base + net.deg[u]):
                if net.paircap[s] > net.rescap[s]:  # x -> u has residual capacity
                    x = net.head[s]
                    if inq[x] == 0:
                        inq[x] = 1
                        tail = head_q + size
                        if tail >= n:
                            tail -= n
                        queue[tail] = x
                        size += 1
        if scans > budget:
            ok = False
            break
    for i in range(size):
        j = head_q + i
        if j >= n:
            j -= n
        inq[queue[j]] = 0
    return ok


@kernel
def excess_free(net: ResidualArrays) -> bool:  # pragma: no cover - compiled
    """True if every live node is balanced (the pseudoflow is a flow)."""
    for v in range(len(net.first)):
        if net.alive[v] and net.excess[v] != 0:
            return False
    return True


# ---------------------------------------------------------------------- indexed binary heap


@kernel
def heap_push(
    keys: Int64Array, nodes: Int64Array, pos: Int64Array, size: int, node: int, key: int
) -> int:  # pragma: no cover
    """Insert `node` or lower its key; return the new heap size.

    `pos[node]` is -1 while the node was never pushed and -2 once popped (it is then left alone).
    """
    i = pos[node]
    if i == -2:
        return size
    if i < 0:
        i = size
        size += 1
    elif keys[i] <= key:
        return size
    while i > 0:
        parent = (i - 1) >> 1
        if keys[parent] <= key:
            break
        keys[i] = keys[parent]
        nodes[i] = nodes[parent]
        pos[nodes[i]] = i
        i = parent
    keys[i] = key
    nodes[i] = node
    pos[node] = i
    return size


@kernel
def heap_pop(
    keys: Int64Array, nodes: Int64Array, pos: Int64Array, size: int
) -> tuple[int, int, int]:  # pragma: no cover
    """Remove the minimum; return (node, key, new size). The popped node's pos becomes -2."""
    top = nodes[0]
    top_key = keys[0]
    pos[top] = -2
    size -= 1
    if size > 0:
        key = keys[size]
        node = nodes[size]
        i = 0
        while True:
            child = 2 * i + 1
            if child >= size:
                break
            if child + 1 < size and keys[child + 1] < keys[child]:
                child += 1
            if keys[child] >= key:
                break
            keys[i] = keys[child]
            nodes[i] = nodes[child]
            pos[nodes[i]] = i
            i = child
        keys[i] = key
        nodes[i] = node
        pos[node] = i
    return top, top_key, size
