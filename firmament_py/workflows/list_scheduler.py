"""The UET List Scheduler of Rayward-Smith, generalised to limited bandwidth (Algorithm 1 and
section IV.A of Giroire et al., INFOCOM'19): the baseline the paper shows to be
Omega(m)-approximate once bandwidth is limited.

Two phases, as the paper describes them:

1. List scheduling with communication delays but unlimited bandwidth. A total order of the tasks
   compatible with the arcs is fixed (the lexicographically smallest topological order, by task
   order). Time advances from event to event; at each time t the machines are visited in order,
   and each idle machine p takes the first task in that order that is *available on p*: every
   parent has ended, on p itself, or on another machine at least one transfer time (data / rate,
   as if the network were unlimited) before t. This fixes each task's machine and each machine's
   order of tasks (for unit tasks and unit delays it is Algorithm 1 exactly).
2. The same placement and per-machine order when bandwidth is limited. The network tasks the
   placement needs are executed in the order the algorithm's run defines (by the consumer's start
   in phase 1, then by the producer's order), each as early as its data and its network machines
   allow, after the network tasks before it (no network task overtakes another on a network
   machine); each CPU task starts once its machine is done with the previous one and its data
   is there.

On section IV's instance this gives m^2 + 1 where the optimum is 2m + 1.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Sequence

from firmament_py.workflows.model import Platform, Workflow, check_instance
from firmament_py.workflows.schedule import Schedule, TaskRun, Transfer
from firmament_py.workflows.timeline import EPSILON

__all__ = ["bandwidth_replay", "list_placement", "list_schedule"]


def _delay(platform: Platform, source: int, target: int, data: float) -> float:
    """A transfer's time with unlimited bandwidth (the fastest route between the machines)."""
    if data <= 0 or source == target:
        return 0.0
    return data / max(rate for _, rate in platform.routes(source, target))


def list_placement(workflow: Workflow, platform: Platform) -> tuple[list[int], list[float]]:
    """Phase 1: each task's machine and start time under List Scheduling with communication
    delays and unlimited bandwidth."""
    n, m = workflow.n, platform.m
    position = {v: i for i, v in enumerate(workflow.topological)}
    machine = [-1] * n
    end = [0.0] * n
    start = [0.0] * n
    free = [0.0] * m
    missing = [len(workflow.parents[v]) for v in range(n)]
    # Tasks whose parents are all placed, by their position in the total order.
    pending = sorted((position[v], v) for v in range(n) if missing[v] == 0)
    events = [0.0]
    placed = 0
    while placed < n:
        t = heapq.heappop(events)
        while events and events[0] <= t + EPSILON:
            heapq.heappop(events)
        for p in range(m):
            if free[p] > t + EPSILON:
                continue
            for index, (_, v) in enumerate(pending):
                if not _available(workflow, platform, v, p, t, machine, end):
                    continue
                del pending[index]
                placed += 1
                machine[v], start[v] = p, t
                end[v] = t + workflow.sizes[v] / platform.speeds[p]
                free[p] = end[v]
                heapq.heappush(events, end[v])
                for child, data in workflow.children[v]:
                    for q in range(m):
                        if q != p and data > 0:
                            heapq.heappush(events, end[v] + _delay(platform, p, q, data))
                    missing[child] -= 1
                    if missing[child] == 0:
                        bisect.insort(pending, (position[child], child))
                break
        if placed < n and not events:
            raise AssertionError("list scheduling stalled")  # pragma: no cover
    return machine, start


def _available(
    workflow: Workflow,
    platform: Platform,
    v: int,
    p: int,
    t: float,
    machine: list[int],
    end: list[float],
) -> bool:
    for u, data in workflow.parents[v]:
        if machine[u] < 0:
            return False
        arrival = end[u] + _delay(platform, machine[u], p, data)
        if arrival > t + EPSILON:
            return False
    return True


def list_schedule(workflow: Workflow, platform: Platform) -> Schedule:
    """The List Scheduler's schedule when bandwidth is limited (phase 2 over phase 1)."""
    check_instance(workflow, platform)
    machine, planned = list_placement(workflow, platform)
    return bandwidth_replay(workflow, platform, machine, planned)


def bandwidth_replay(
    workflow: Workflow,
    platform: Platform,
    machine: Sequence[int],
    planned: Sequence[float],
    *,
    algorithm: str = "list",
) -> Schedule:
    """Phase 2: the placement `machine` and the per-machine order of the `planned` start times
    (a schedule made as if bandwidth were unlimited), executed with limited bandwidth."""
    check_instance(workflow, platform)
    n = workflow.n
    order = _run_order(workflow, machine, planned)
    position = {v: i for i, v in enumerate(workflow.topological)}
    network_free = [0.0] * len(platform.network_machines)
    cpu_free = [0.0] * platform.m
    start = [0.0] * n
    end = [0.0] * n
    transfers: list[Transfer] = []
    names = workflow.tasks
    for v in order:
        p = machine[v]
        ready = cpu_free[p]
        for u, data in sorted(workflow.parents[v], key=lambda pair: position[pair[0]]):
            q = machine[u]
            if q == p or data <= 0:
                ready = max(ready, end[u])
                continue
            best: tuple[float, tuple[int, ...], float] | None = None
            for links, rate in platform.routes(q, p):
                at = max([end[u], *(network_free[link] for link in links)])
                if best is None or at < best[0] - EPSILON:
                    best = (at, links, rate)
            assert best is not None  # check_instance: a network machine exists
            at, links, rate = best
            finish = at + data / rate
            for link in links:
                network_free[link] = finish
            transfers.append(Transfer(names[u], names[v], q, p, links, at, finish))
            ready = max(ready, finish)
        start[v] = ready
        end[v] = ready + workflow.sizes[v] / platform.speeds[p]
        cpu_free[p] = end[v]
    runs = {names[v]: TaskRun(names[v], machine[v], start[v], end[v]) for v in range(n)}
    return Schedule(algorithm, workflow, platform, runs, transfers)


def _run_order(workflow: Workflow, machine: Sequence[int], planned: Sequence[float]) -> list[int]:
    """The run's order: by planned start, then machine (the order Algorithm 1 allocated them),
    but never a task before one of its parents. A parent of no duration whose data needs no
    time starts when its child does, possibly on a machine of a higher number; sorted by start
    and machine alone, the child would then be executed first, before its parent's end is
    known (a case hypothesis found)."""
    missing = [len(workflow.parents[v]) for v in range(workflow.n)]
    ready = [(planned[v], machine[v], v) for v in range(workflow.n) if missing[v] == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        _, _, v = heapq.heappop(ready)
        order.append(v)
        for child, _ in workflow.children[v]:
            missing[child] -= 1
            if missing[child] == 0:
                heapq.heappush(ready, (planned[child], machine[child], child))
    return order
