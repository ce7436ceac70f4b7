"""PARTITION (Algorithm 3 and section V.C of Giroire et al., INFOCOM'19): first decide
which tasks share a machine, then when everything runs.

Phase 1, PARTITIONING TO SCHEDULE. The workflow is taken as an undirected graph whose vertices
weigh their CPU time and whose edges weigh their transfer time. For each k = 1..m, the
k-balanced partitioning problem (parts of at most nu / k of the weight, nu = 2) is solved
approximately by recursive minimum bisection with Kernighan-Lin (`bisection.py`, which says what
the paper leaves open). Of the m partitions, the one minimising max part size + cut weight / k
is kept (Algorithm 3, line 5): the CPU work of the busiest machine plus the average work of the
network machines. The heaviest part goes to the fastest machine.

Phase 2, SCHEDULING WHEN PLACED, layer by layer (Theorem 3's generalisation of Hu's algorithm):
an event-driven list schedule of the placed tasks in which a machine never starts a task of a
later layer while one of an earlier layer is ready on it (layers count arcs from the sources;
ties go to the longer out-tree branch, then task order), and in which the network machines run
the pending transfers in the same priority order as soon as both their links are free.

`partition_placement` exposes phase 1 alone: it is what the flow scheduler example turns into
placement preferences.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass

from firmament_py.workflows.bisection import NU, BalancedBisector
from firmament_py.workflows.bounds import downward_branches
from firmament_py.workflows.model import Platform, Workflow, check_instance
from firmament_py.workflows.schedule import Schedule, TaskRun, Transfer
from firmament_py.workflows.timeline import EPSILON

__all__ = [
    "CHOOSE_K",
    "Partition",
    "balanced_partition",
    "partition_placement",
    "partition_schedule",
    "partition_schedules",
    "schedule_placed",
]


@dataclass(frozen=True)
class Partition:
    """The solution of the k-balanced partitioning problem for one k: the tasks (indices) in
    `parts` (at most k of them: a heavy task can leave a part empty), with its score's terms."""

    parts: tuple[frozenset[int], ...]
    max_part: float
    """The largest part's CPU time on the machine it gets."""
    cut: float
    """The total transfer time of the arcs between parts."""
    k: int
    """The problem's k (Algorithm 3, line 3); `parts` may hold fewer."""
    bound: float = math.inf
    """What a part may weigh: nu / k of the whole (or the heaviest task, if heavier)."""

    @property
    def score(self) -> float:
        """Algorithm 3's criterion (line 5): max part size + cut weight / k."""
        return self.max_part + self.cut / self.k


def _adjacency(workflow: Workflow, platform: Platform) -> list[dict[int, float]]:
    """The undirected graph of the workflow: edge u - v weighs the transfer time of the data
    between u and v at the platform's reference rate (0 without network limits)."""
    rate = platform.reference_rate
    adjacency: list[dict[int, float]] = [{} for _ in range(workflow.n)]
    for u, v, data in workflow.edges:
        weight = data / rate if math.isfinite(rate) else 0.0
        adjacency[u][v] = adjacency[u].get(v, 0.0) + weight
        adjacency[v][u] = adjacency[v].get(u, 0.0) + weight
    return adjacency


def _assign(parts: Sequence[frozenset[int]], workflow: Workflow, platform: Platform) -> list[int]:
    """Part i -> machine: the heaviest part on the fastest machine."""
    machines = sorted(range(platform.m), key=lambda p: (-platform.speeds[p], p))
    order = sorted(
        range(len(parts)),
        key=lambda i: (-sum(workflow.sizes[v] for v in parts[i]), min(parts[i], default=0)),
    )
    machine_of_part = [0] * len(parts)
    for rank, i in enumerate(order):
        machine_of_part[i] = machines[rank]
    return machine_of_part


def balanced_partition(
    workflow: Workflow, platform: Platform, *, nu: float = NU
) -> tuple[Partition, list[Partition]]:
    """Phase 1 (Algorithm 3): the k-balanced partitions for k = 1..m (non-empty parts only) and
    the best by line 5, max part size + cut weight / k."""
    bisector = BalancedBisector(
        workflow.sizes, _adjacency(workflow, platform), workflow.topological, nu
    )
    everything = frozenset(range(workflow.n))
    partitions: list[Partition] = []
    for k in range(1, platform.m + 1):
        parts = tuple(bisector.partition(everything, k))
        machines = _assign(parts, workflow, platform)
        max_part = max(
            (
                sum(workflow.sizes[v] for v in part) / platform.speeds[machines[i]]
                for i, part in enumerate(parts)
            ),
            default=0.0,
        )
        cut = sum(bisector.cut(a, b) for i, a in enumerate(parts) for b in parts[i + 1 :])
        partitions.append(Partition(parts, max_part, cut, k, bisector.bound(everything, k)))
        if k >= workflow.n:
            break  # a part per task: larger k cut nothing more, and score no better
    best = min(partitions, key=lambda p: (p.score - EPSILON * p.k, p.k))
    return best, partitions


def partition_placement(workflow: Workflow, platform: Platform) -> dict[str, int]:
    """Phase 1 alone: task id -> CPU machine, from the best k-balanced partition."""
    check_instance(workflow, platform)
    best, _ = balanced_partition(workflow, platform)
    machines = _assign(best.parts, workflow, platform)
    return {workflow.tasks[v]: machines[i] for i, part in enumerate(best.parts) for v in part}


CHOOSE_K = ("score", "makespan")
"""How PARTITION picks k: "score" is Algorithm 3's line 5 (max part size + cut weight / k), the
default; "makespan" is this project's variation, not the paper's: phase 2 is run on each of the
m partitions and the shortest schedule kept (the score ignores that the layers' work and their
transfers add up along the workflow, Theorem 3's sum)."""


def partition_schedule(
    workflow: Workflow, platform: Platform, *, choose_k: str = "score"
) -> Schedule:
    """PARTITION: the best k-balanced partition, then the layer-by-layer schedule; `choose_k`
    says how the best k is picked (`CHOOSE_K`)."""
    if choose_k not in CHOOSE_K:
        raise ValueError(f"choose_k must be one of {', '.join(CHOOSE_K)}, not {choose_k!r}")
    return partition_schedules(workflow, platform, (choose_k,))[choose_k]


def partition_schedules(
    workflow: Workflow, platform: Platform, choices: Sequence[str] = CHOOSE_K
) -> dict[str, Schedule]:
    """PARTITION's schedule for each way of choosing k in `choices` (`CHOOSE_K`), from one
    phase 1 (the experiment measures both without partitioning twice)."""
    check_instance(workflow, platform)
    best_by_score, partitions = balanced_partition(workflow, platform)
    out: dict[str, Schedule] = {}
    for choose_k in choices:
        if choose_k == "score":
            best = best_by_score
            schedule = schedule_placed(
                workflow, platform, _placement(best, workflow, platform), algorithm="partition"
            )
        elif choose_k == "makespan":
            candidates = [
                (
                    schedule_placed(
                        workflow,
                        platform,
                        _placement(p, workflow, platform),
                        algorithm="partition-makespan",
                    ),
                    p,
                )
                for p in partitions
            ]
            schedule, best = min(
                candidates, key=lambda pair: (pair[0].makespan, pair[1].score, pair[1].k)
            )
        else:
            raise ValueError(f"choose_k must be one of {', '.join(CHOOSE_K)}, not {choose_k!r}")
        schedule.notes = {
            "k": best.k,
            "parts": len(best.parts),
            "max_part": best.max_part,
            "cut": best.cut,
            "scores": {p.k: round(p.score, 6) for p in partitions},
        }
        out[choose_k] = schedule
    return out


def _placement(partition: Partition, workflow: Workflow, platform: Platform) -> list[int]:
    """Task index -> machine for a partition (`_assign`'s machine for each part)."""
    machines = _assign(partition.parts, workflow, platform)
    placement = [0] * workflow.n
    for i, part in enumerate(partition.parts):
        for v in part:
            placement[v] = machines[i]
    return placement


def schedule_placed(
    workflow: Workflow, platform: Platform, placement: Sequence[int], *, algorithm: str
) -> Schedule:
    """Phase 2: the layer-by-layer list schedule of tasks already placed (`placement[v]` is
    task v's machine)."""
    n = workflow.n
    rate = platform.reference_rate
    branch = downward_branches(workflow, max(platform.speeds), rate)
    position = {v: i for i, v in enumerate(workflow.topological)}
    layer = workflow.layers
    priority = [(layer[v], -branch[v], position[v]) for v in range(n)]
    start = [0.0] * n
    end = [0.0] * n
    done = [False] * n
    started = [False] * n
    arrived = [0.0] * n  # when the last input of each task is there (once all are)
    inputs_left = [0] * n
    cpu_free = [0.0] * platform.m
    network_free = [0.0] * len(platform.network_machines)
    transfers: list[Transfer] = []
    pending: list[tuple[tuple[int, float, int], int, int, float]] = []  # (priority, u, v, data)
    for v in range(n):
        inputs_left[v] = len(workflow.parents[v])
    ready_by_machine: list[list[tuple[tuple[int, float, int], int]]] = [
        [] for _ in range(platform.m)
    ]
    for v in range(n):
        if inputs_left[v] == 0:
            heapq.heappush(ready_by_machine[placement[v]], (priority[v], v))
    events = [0.0]
    # Per event: finished tasks deliver; transfers start; machines start tasks.
    finished_at: list[tuple[float, int, str, int, int]] = []  # (time, seq, kind, a, b)
    sequence = 0
    running = 0
    names = workflow.tasks

    def deliver(v: int, when: float) -> None:
        inputs_left[v] -= 1
        arrived[v] = max(arrived[v], when)
        if inputs_left[v] == 0:
            heapq.heappush(ready_by_machine[placement[v]], (priority[v], v))

    remaining = n
    while remaining > 0:
        t = heapq.heappop(events)
        while events and events[0] <= t + EPSILON:
            heapq.heappop(events)
        while finished_at and finished_at[0][0] <= t + EPSILON:
            when, _, kind, a, b = heapq.heappop(finished_at)
            if kind == "task":
                done[a] = True
                remaining -= 1
                running -= 1
                for child, data in workflow.children[a]:
                    if placement[child] == placement[a] or data <= 0:
                        deliver(child, when)
                    else:
                        heapq.heappush(pending, (priority[child], a, child, data))
            else:
                deliver(b, when)
        # Transfers, in priority order, on free network machines.
        postponed = []
        while pending:
            item = heapq.heappop(pending)
            _, u, v, data = item
            options = [
                (links, rate)
                for links, rate in platform.routes(placement[u], placement[v])
                if all(network_free[link] <= t + EPSILON for link in links)
            ]
            if not options:
                postponed.append(item)
                continue
            links, rate = max(options, key=lambda o: (o[1], [-x for x in o[0]]))
            finish = t + data / rate
            for link in links:
                network_free[link] = finish
            transfers.append(
                Transfer(names[u], names[v], placement[u], placement[v], links, t, finish)
            )
            sequence += 1
            heapq.heappush(finished_at, (finish, sequence, "transfer", u, v))
            heapq.heappush(events, finish)
        for item in postponed:
            heapq.heappush(pending, item)
        # CPU tasks: each idle machine starts its first ready task by priority.
        for p in range(platform.m):
            if cpu_free[p] > t + EPSILON or not ready_by_machine[p]:
                continue
            _, v = heapq.heappop(ready_by_machine[p])
            started[v] = True
            start[v] = max(t, arrived[v])
            end[v] = start[v] + workflow.sizes[v] / platform.speeds[p]
            cpu_free[p] = end[v]
            running += 1
            sequence += 1
            heapq.heappush(finished_at, (end[v], sequence, "task", v, v))
            heapq.heappush(events, end[v])
        if remaining > 0 and not events:
            raise AssertionError("the layer-by-layer schedule stalled")  # pragma: no cover
    runs = {names[v]: TaskRun(names[v], placement[v], start[v], end[v]) for v in range(n)}
    return Schedule(algorithm, workflow, platform, runs, transfers)
