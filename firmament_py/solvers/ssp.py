"""Successive shortest path with potentials: the simple reference solver.

It keeps reduced-cost optimality at every step and works towards feasibility: a Dijkstra search
from all nodes with excess (on reduced costs, which are never negative) stops at the nearest
node with a deficit, potentials move so that the path becomes tight, and flow is pushed along it.
Incremental use is natural: after a batch, arcs whose reduced cost turned negative are saturated
and the search resumes from the previous potentials.

Slow on big graphs (one search per augmentation, Firmament's Figure 7), but short and easy to
trust, which makes it the yardstick the fast solvers are tested against.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from firmament_py.jit import kernel
from firmament_py.solvers import kernels
from firmament_py.solvers.base import FlowSolver, InfeasibleError, SolverCancelled
from firmament_py.solvers.kernels import INF, heap_pop, heap_push
from firmament_py.solvers.network import ResidualArrays

Int64Array = npt.NDArray[np.int64]

_DONE = 0
_INFEASIBLE = 1
_CANCELLED = 2


@kernel
def _ssp(
    net: ResidualArrays,
    dist: Int64Array,
    pred: Int64Array,
    hkeys: Int64Array,
    hnodes: Int64Array,
    hpos: Int64Array,
    touched: Int64Array,
    cancel: Int64Array,
) -> tuple[int, int, int]:  # pragma: no cover - compiled
    n = len(net.first)
    augmentations = 0
    pops = 0
    while True:
        if kernels.is_cancelled(cancel):
            return _CANCELLED, augmentations, pops
        size = 0
        nt = 0
        for v in range(n):
            if net.alive[v] and net.excess[v] > 0:
                dist[v] = 0
                pred[v] = -1
                size = heap_push(hkeys, hnodes, hpos, size, v, 0)
                touched[nt] = v
                nt += 1
        if size == 0:
            return _DONE, augmentations, pops
        target = -1
        reach = 0
        while size > 0:
            u, du, size = heap_pop(hkeys, hnodes, hpos, size)
            pops += 1
            if net.excess[u] < 0:
                target = u
                reach = du
                break
            pu = net.price[u]
            base = net.first[u]
            for s in range(base, base + net.deg[u]):
                if net.rescap[s] <= 0:
                    continue
                w = net.head[s]
                nd = du + net.cost[s] - pu + net.price[w]
                if nd < dist[w]:
                    if dist[w] == INF:
                        touched[nt] = w
                        nt += 1
                    dist[w] = nd
                    pred[w] = s
                    size = heap_push(hkeys, hnodes, hpos, size, w, nd)
        status = _DONE
        if target < 0:
            status = _INFEASIBLE
        else:
            for i in range(nt):
                v = touched[i]
                if hpos[v] == -2:
                    net.price[v] += reach - dist[v]
            delta = -net.excess[target]
            v = target
            while pred[v] >= 0:
                s = pred[v]
                delta = min(delta, net.rescap[s])
                v = net.head[net.mate[s]]
            delta = min(delta, net.excess[v])
            v = target
            while pred[v] >= 0:
                s = pred[v]
                net.rescap[s] -= delta
                net.rescap[net.mate[s]] += delta
                v = net.head[net.mate[s]]
            net.excess[v] -= delta
            net.excess[target] += delta
            augmentations += 1
        for i in range(nt):
            v = touched[i]
            dist[v] = INF
            pred[v] = -1
            hpos[v] = -1
        if status == _INFEASIBLE:
            return _INFEASIBLE, augmentations, pops


class SuccessiveShortestPathSolver(FlowSolver):
    """Successive shortest path (reference): exact, incremental, slow on large graphs."""

    algorithm = "ssp"

    def __init__(self) -> None:
        super().__init__()
        self._full_repair = True
        self._work: list[Int64Array] = []

    def _after_load(self) -> None:
        self._full_repair = True

    def _run(self) -> dict[str, float]:
        a = self.network.arrays
        n = len(a.first)
        if not self._work or len(self._work[0]) != n:  # the kernels expect exactly n
            self._work = [
                np.full(n, INF, dtype=np.int64),  # dist
                np.full(n, -1, dtype=np.int64),  # pred
                np.zeros(n, dtype=np.int64),  # heap keys
                np.zeros(n, dtype=np.int64),  # heap nodes
                np.full(n, -1, dtype=np.int64),  # heap positions
                np.zeros(n, dtype=np.int64),  # touched
            ]
        kernels.seed_fresh_prices(a, 1)
        saturated = kernels.saturate_violations(a, 0, 1, self._full_repair)
        self._full_repair = False
        dist, pred, hkeys, hnodes, hpos, touched = self._work
        status, augmentations, pops = _ssp(
            a, dist, pred, hkeys, hnodes, hpos, touched, self._cancel
        )
        if status == _CANCELLED:
            self._full_repair = True
            raise SolverCancelled("successive shortest path was cancelled")
        if status == _INFEASIBLE:
            self._full_repair = True
            raise InfeasibleError("the supplies cannot be routed to the demands within capacities")
        return {"augmentations": augmentations, "node_pops": pops, "saturated": saturated}
