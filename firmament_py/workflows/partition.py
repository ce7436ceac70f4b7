"""PARTITION (Algorithm 3 and section V.C of Giroire et al., INFOCOM'19): first decide
which tasks share a machine, then when everything runs.

Phase 1, PARTITIONING TO SCHEDULE. The workflow is taken as an undirected graph whose vertices
weigh their CPU time and whose edges weigh their transfer time. For each k = 1..m, a k-balanced
partition is computed by recursive bisection: a set meant for k parts is cut in two, for
ceil(k/2) and floor(k/2) parts, by Kernighan-Lin (networkx's `kernighan_lin_bisection`) started
from a split of the tasks in topological order at the right share of the weight; the start or
Kernighan-Lin's refinement of it is kept, whichever scores better (largest part per machine plus
the cut). Of the m partitions, the one minimising max part size + cut weight / k is kept
(Algorithm 3, line 5): the CPU work of the busiest machine plus the average work of the network
machines. The heaviest part goes to the fastest machine.

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
from typing import Any

import networkx as nx

from firmament_py.workflows.bounds import downward_branches
from firmament_py.workflows.model import Platform, Workflow, check_instance
from firmament_py.workflows.schedule import Schedule, TaskRun, Transfer
from firmament_py.workflows.timeline import EPSILON

__all__ = [
    "Partition",
    "balanced_partition",
    "partition_placement",
    "partition_schedule",
    "schedule_placed",
]


@dataclass(frozen=True)
class Partition:
    """A partition of the tasks (indices) into `parts`, with its score's two terms."""

    parts: tuple[frozenset[int], ...]
    max_part: float
    """The largest part's CPU time on the machine it gets."""
    cut: float
    """The total transfer time of the arcs between parts."""

    @property
    def k(self) -> int:
        return len(self.parts)

    @property
    def score(self) -> float:
        """Algorithm 3's criterion: max part size + cut weight / k."""
        return self.max_part + self.cut / self.k


def _weighted_graph(workflow: Workflow, platform: Platform) -> Any:
    rate = platform.reference_rate
    graph = nx.Graph()
    graph.add_nodes_from(range(workflow.n))
    for u, v, data in workflow.edges:
        weight = data / rate if math.isfinite(rate) else 0.0
        graph.add_edge(u, v, weight=weight)
    return graph


class _Bisector:
    """Recursive bisection with Kernighan-Lin, memoised on (tasks, split ratio)."""

    def __init__(self, workflow: Workflow, graph: Any) -> None:
        self.graph = graph
        self.weight = workflow.sizes
        self.position = {v: i for i, v in enumerate(workflow.topological)}
        self.memo: dict[tuple[frozenset[int], int, int], tuple[frozenset[int], frozenset[int]]] = {}

    def cut(self, a: frozenset[int], b: frozenset[int]) -> float:
        small, large = (a, b) if len(a) <= len(b) else (b, a)
        return sum(
            float(w)
            for u in small
            for v, w in ((v, d["weight"]) for v, d in self.graph[u].items())
            if v in large
        )

    def parts(self, tasks: frozenset[int], k: int) -> list[frozenset[int]]:
        if k <= 1 or len(tasks) <= 1:
            return [tasks]
        ka = (k + 1) // 2
        kb = k - ka
        a, b = self.bisect(tasks, ka, kb)
        return self.parts(a, ka) + self.parts(b, kb)

    def topological_order(self, tasks: frozenset[int]) -> list[int]:
        return sorted(tasks, key=self.position.__getitem__)

    def depth_first_order(self, tasks: frozenset[int]) -> list[int]:
        """Tasks in depth-first order of the undirected graph (neighbours in topological
        order), so that a prefix holds whole neighbourhoods, such as a map task and its
        reducer."""
        order: list[int] = []
        seen: set[int] = set()
        for root in self.topological_order(tasks):
            if root in seen:
                continue
            stack = [root]
            while stack:
                u = stack.pop()
                if u in seen:
                    continue
                seen.add(u)
                order.append(u)
                neighbours = [v for v in self.graph[u] if v in tasks and v not in seen]
                stack.extend(sorted(neighbours, key=self.position.__getitem__, reverse=True))
        return order

    def split(self, ordered: list[int], share: float) -> tuple[frozenset[int], frozenset[int]]:
        """The shortest prefix of `ordered` holding `share` of the weight, and the rest (both
        non-empty)."""
        total = sum(self.weight[v] for v in ordered)
        running = 0.0
        cut_at = len(ordered) - 1
        for index, v in enumerate(ordered):
            running += self.weight[v]
            if running >= total * share - EPSILON:
                cut_at = index + 1
                break
        cut_at = min(max(cut_at, 1), len(ordered) - 1)
        return frozenset(ordered[:cut_at]), frozenset(ordered[cut_at:])

    def bisect(
        self, tasks: frozenset[int], ka: int, kb: int
    ) -> tuple[frozenset[int], frozenset[int]]:
        g = math.gcd(ka, kb)
        key = (tasks, ka // g, kb // g)
        if key in self.memo:
            return self.memo[key]
        candidates = []
        for ordered in (self.topological_order(tasks), self.depth_first_order(tasks)):
            start = self.split(ordered, ka / (ka + kb))
            candidates.append(start)
            if self.graph.subgraph(tasks).number_of_edges() > 0:
                refined = nx.algorithms.community.kernighan_lin_bisection(
                    self.graph.subgraph(tasks),
                    partition=(set(start[0]), set(start[1])),
                    weight="weight",
                )
                # networkx does not keep the sides in the order given (3.6 swaps them), and
                # which side gets `ka` parts matters whenever ka != kb: both are candidates.
                one, other = frozenset(refined[0]), frozenset(refined[1])
                candidates += [(one, other), (other, one)]

        def score(pair: tuple[frozenset[int], frozenset[int]]) -> float:
            a, b = pair
            heavier = max(sum(self.weight[v] for v in a) / ka, sum(self.weight[v] for v in b) / kb)
            return heavier + self.cut(a, b) / (ka + kb)

        best = min(candidates, key=score)
        self.memo[key] = best
        return best


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


def balanced_partition(workflow: Workflow, platform: Platform) -> tuple[Partition, list[Partition]]:
    """Phase 1: the k-balanced partitions for k = 1..m (non-empty parts only) and the best."""
    graph = _weighted_graph(workflow, platform)
    bisector = _Bisector(workflow, graph)
    everything = frozenset(range(workflow.n))
    partitions: list[Partition] = []
    for k in range(1, platform.m + 1):
        parts = tuple(part for part in bisector.parts(everything, k) if part)
        machines = _assign(parts, workflow, platform)
        max_part = max(
            (
                sum(workflow.sizes[v] for v in part) / platform.speeds[machines[i]]
                for i, part in enumerate(parts)
            ),
            default=0.0,
        )
        cut = sum(bisector.cut(a, b) for i, a in enumerate(parts) for b in parts[i + 1 :])
        partitions.append(Partition(parts, max_part, cut))
        if len(parts) < k:
            break  # fewer tasks than parts: larger k change nothing
    best = min(partitions, key=lambda p: (p.score - EPSILON * p.k, p.k))
    return best, partitions


def partition_placement(workflow: Workflow, platform: Platform) -> dict[str, int]:
    """Phase 1 alone: task id -> CPU machine, from the best k-balanced partition."""
    check_instance(workflow, platform)
    best, _ = balanced_partition(workflow, platform)
    machines = _assign(best.parts, workflow, platform)
    return {workflow.tasks[v]: machines[i] for i, part in enumerate(best.parts) for v in part}


def partition_schedule(workflow: Workflow, platform: Platform) -> Schedule:
    """PARTITION: the best k-balanced partition, then the layer-by-layer schedule."""
    check_instance(workflow, platform)
    best, partitions = balanced_partition(workflow, platform)
    machines = _assign(best.parts, workflow, platform)
    placement = [0] * workflow.n
    for i, part in enumerate(best.parts):
        for v in part:
            placement[v] = machines[i]
    schedule = schedule_placed(workflow, platform, placement, algorithm="partition")
    schedule.notes = {
        "k": best.k,
        "max_part": best.max_part,
        "cut": best.cut,
        "scores": {p.k: round(p.score, 6) for p in partitions},
    }
    return schedule


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
