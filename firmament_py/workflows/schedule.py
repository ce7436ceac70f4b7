"""Schedules of a workflow on a platform, and the validator every algorithm's output (and every
test) goes through.

A `Schedule` says, for every CPU task, on which CPU machine and when it runs (`TaskRun`), and,
for every network task the placement needs, on which network machines and when it runs
(`Transfer`). `schedule_problems` lists what is wrong with one, `validate_schedule` raises
`ScheduleError` if anything is. The rules (section III):

* every task runs exactly once, on a CPU machine of the platform, for size / speed;
* a CPU machine runs one task at a time, and a network machine one transfer at a time;
* for each arc (i, j): j starts after i ends; if i and j run on different machines and the arc
  carries data, exactly one transfer i -> j exists, from i's machine to j's, on network machines
  the platform allows for that pair (the sender's upload link and the receiver's download link
  together, or one shared channel), lasting data / rate, starting after i ends and ending before
  j starts (the data is there before it is used);
* no other transfer exists (network tasks only where a placement needs them).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from firmament_py.workflows.model import Platform, Workflow
from firmament_py.workflows.timeline import EPSILON

__all__ = [
    "Schedule",
    "ScheduleError",
    "TaskRun",
    "Transfer",
    "schedule_problems",
    "validate_schedule",
]


class ScheduleError(ValueError):
    """A schedule breaks the rules; `problems` lists every broken rule found."""

    def __init__(self, algorithm: str, problems: list[str]) -> None:
        shown = "; ".join(problems[:5])
        more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
        super().__init__(f"invalid {algorithm} schedule: {shown}{more}")
        self.problems = problems


@dataclass(frozen=True)
class TaskRun:
    """CPU task `task` runs on CPU machine `machine` during [start, end)."""

    task: str
    machine: int
    start: float
    end: float


@dataclass(frozen=True)
class Transfer:
    """The network task source -> target: the data of task `source` sent from CPU machine
    `from_machine` to `to_machine` (where `target` runs) on the network machines `network`
    (numbers, see `Platform`) during [start, end)."""

    source: str
    target: str
    from_machine: int
    to_machine: int
    network: tuple[int, ...]
    start: float
    end: float


@dataclass
class Schedule:
    """A schedule of `workflow` on `platform` made by `algorithm`."""

    algorithm: str
    workflow: Workflow
    platform: Platform
    runs: dict[str, TaskRun]
    transfers: list[Transfer] = field(default_factory=list)
    notes: dict[str, Any] = field(default_factory=dict)
    """What the algorithm wants to report (PARTITION's k, which G-LIST pass won, ...)."""

    @property
    def makespan(self) -> float:
        ends = [run.end for run in self.runs.values()]
        ends += [transfer.end for transfer in self.transfers]
        return max(ends, default=0.0)

    def machine_of(self, task: str) -> int:
        return self.runs[task].machine

    @property
    def placement(self) -> dict[str, int]:
        """Task id -> CPU machine."""
        return {task: run.machine for task, run in self.runs.items()}

    @property
    def network_time(self) -> float:
        """The total duration of the transfers."""
        return sum(t.end - t.start for t in self.transfers)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready description: makespan, the runs by task order, the transfers."""
        names = self.platform.network_machines
        return {
            "algorithm": self.algorithm,
            "makespan": self.makespan,
            "notes": dict(self.notes),
            "runs": [
                {"task": r.task, "machine": r.machine, "start": r.start, "end": r.end}
                for r in (self.runs[name] for name in self.workflow.tasks if name in self.runs)
            ],
            "transfers": [
                {
                    "source": t.source,
                    "target": t.target,
                    "from": t.from_machine,
                    "to": t.to_machine,
                    "network": [names[n] for n in t.network],
                    "start": t.start,
                    "end": t.end,
                }
                for t in self.transfers
            ],
        }


def _close(a: float, b: float, scale: float) -> bool:
    return abs(a - b) <= EPSILON * max(1.0, scale)


def _overlaps(intervals: Iterable[tuple[float, float, str]], scale: float) -> list[tuple[str, str]]:
    """Pairs of labels whose intervals overlap (positive-length ones only)."""
    clashes = []
    ordered = sorted((s, e, label) for s, e, label in intervals if e - s > EPSILON * scale)
    latest_end, latest = -math.inf, ""
    for start, end, label in ordered:
        if start < latest_end - EPSILON * max(1.0, scale):
            clashes.append((latest, label))
        if end > latest_end:
            latest_end, latest = end, label
    return clashes


def schedule_problems(schedule: Schedule) -> list[str]:
    """Everything wrong with `schedule` (empty if it is valid)."""
    workflow, platform = schedule.workflow, schedule.platform
    scale = max(1.0, schedule.makespan)
    problems: list[str] = []
    runs = schedule.runs
    for name in workflow.tasks:
        if name not in runs:
            problems.append(f"task {name!r} never runs")
    for name, run in runs.items():
        if name not in workflow.index:
            problems.append(f"unknown task {name!r} runs")
            continue
        if run.task != name:
            problems.append(f"the run of {name!r} names task {run.task!r}")
        if not 0 <= run.machine < platform.m:
            problems.append(f"task {name!r} runs on unknown machine {run.machine}")
            continue
        if not (math.isfinite(run.start) and run.start >= -EPSILON):
            problems.append(f"task {name!r} starts at {run.start}")
        expected = workflow.sizes[workflow.index[name]] / platform.speeds[run.machine]
        if not _close(run.end - run.start, expected, scale):
            problems.append(
                f"task {name!r} runs for {run.end - run.start:g}, not size / speed = {expected:g}"
            )
    if problems:
        return problems

    by_machine: dict[int, list[tuple[float, float, str]]] = {}
    for name, run in runs.items():
        by_machine.setdefault(run.machine, []).append((run.start, run.end, name))
    for machine, intervals in sorted(by_machine.items()):
        for a, b in _overlaps(intervals, scale):
            problems.append(f"machine {machine} runs tasks {a!r} and {b!r} at the same time")

    transfers: dict[tuple[str, str], Transfer] = {}
    by_network: dict[int, list[tuple[float, float, str]]] = {}
    names = platform.network_machines
    for transfer in schedule.transfers:
        key = (transfer.source, transfer.target)
        label = f"{transfer.source}->{transfer.target}"
        if key in transfers:
            problems.append(f"network task {label} runs twice")
            continue
        transfers[key] = transfer
        if not workflow.graph.has_edge(*key):
            problems.append(f"network task {label} belongs to no arc of the workflow")
            continue
        source, target = runs[transfer.source], runs[transfer.target]
        if source.machine == target.machine:
            problems.append(f"network task {label} runs though both tasks share a machine")
            continue
        if (transfer.from_machine, transfer.to_machine) != (source.machine, target.machine):
            problems.append(
                f"network task {label} goes {transfer.from_machine} -> {transfer.to_machine}, "
                f"not {source.machine} -> {target.machine}"
            )
            continue
        rates = dict(platform.routes(source.machine, target.machine))
        if transfer.network not in rates:
            problems.append(
                f"network task {label} runs on network machines {list(transfer.network)}, "
                "which do not join its machines"
            )
            continue
        data = workflow.graph.edges[key]["data"]
        expected = data / rates[transfer.network]
        if not _close(transfer.end - transfer.start, expected, scale):
            problems.append(
                f"network task {label} lasts {transfer.end - transfer.start:g}, "
                f"not data / rate = {expected:g}"
            )
        if transfer.start < source.end - EPSILON * scale:
            problems.append(f"network task {label} starts before {transfer.source!r} ends")
        if transfer.end > target.start + EPSILON * scale:
            problems.append(
                f"the data of {label} arrives after {transfer.target!r} starts (used before "
                "it is available)"
            )
        for n in transfer.network:
            by_network.setdefault(n, []).append((transfer.start, transfer.end, label))
    for n, intervals in sorted(by_network.items()):
        for a, b in _overlaps(intervals, scale):
            problems.append(f"network machine {names[n]} carries {a} and {b} at the same time")

    for u, v, data in workflow.edges:
        parent, child = workflow.tasks[u], workflow.tasks[v]
        if runs[child].start < runs[parent].end - EPSILON * scale:
            problems.append(f"task {child!r} starts before its parent {parent!r} ends")
        needed = runs[parent].machine != runs[child].machine and data > 0
        if needed and (parent, child) not in transfers:
            problems.append(
                f"arc {parent} -> {child} crosses machines {runs[parent].machine} -> "
                f"{runs[child].machine} with data {data:g} but no network task carries it"
            )
        if not needed and data == 0 and (parent, child) in transfers:
            problems.append(f"network task {parent}->{child} carries no data")
    return problems


def validate_schedule(schedule: Schedule) -> Schedule:
    """`schedule` itself if it is valid; ScheduleError listing the problems otherwise."""
    problems = schedule_problems(schedule)
    if problems:
        raise ScheduleError(schedule.algorithm, problems)
    return schedule
