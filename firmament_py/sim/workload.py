"""What a simulation replays: a time-ordered stream of workload items.

A workload (a Google trace replay, a synthetic generator, a test's list) is any iterable of
`WorkloadItem`s in non-decreasing time order. Most items are plain cluster events (machines
joining, failing, leaving or changing; tasks killed or updated by their users) that the
simulator hands to the scheduler at their time. New tasks come as `TaskArrival`s, which add what
the cluster does not know but a simulator must: how long the task runs once placed. The
simulator, not the workload, decides when a task starts and so when it completes.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TypeAlias

from firmament_py.model.events import (
    LatencySample,
    MachineAdded,
    MachineFailed,
    MachineRemoved,
    MachineStats,
    MachineUpdated,
    TaskFailed,
    TaskRemoved,
    TaskStats,
    TaskSubmitted,
    TaskUpdated,
)
from firmament_py.model.ids import Time

__all__ = ["TaskArrival", "WorkloadError", "WorkloadItem", "check_order"]


class WorkloadError(ValueError):
    """A workload item that cannot be replayed (out of time order, negative runtime)."""


@dataclass(frozen=True, slots=True)
class TaskArrival:
    """A task submitted at `submitted.time` that runs for `runtime` microseconds once placed
    (None: until the simulation ends, like a service). A task evicted and placed again runs its
    whole runtime again, as in Firmament's simulator."""

    submitted: TaskSubmitted
    runtime: int | None

    def __post_init__(self) -> None:
        if not isinstance(self.submitted, TaskSubmitted):
            raise TypeError(f"a TaskArrival needs a TaskSubmitted, got {self.submitted!r}")
        if self.runtime is not None and (
            isinstance(self.runtime, bool) or not isinstance(self.runtime, int) or self.runtime < 0
        ):
            raise WorkloadError(
                f"task {self.submitted.task_id}: runtime must be a non-negative int or None, "
                f"got {self.runtime!r}"
            )

    @property
    def time(self) -> Time:
        return self.submitted.time


WorkloadItem: TypeAlias = (
    TaskArrival
    | TaskRemoved
    | TaskFailed
    | TaskUpdated
    | TaskStats
    | MachineAdded
    | MachineFailed
    | MachineRemoved
    | MachineUpdated
    | MachineStats
    | LatencySample
)
"""Everything a workload may contain. Task completions are not among them: the simulator
derives them from runtimes and placements."""


def check_order(items: Iterable[WorkloadItem]) -> Iterator[WorkloadItem]:
    """Pass `items` through, raising WorkloadError at the first one earlier than the one before
    it (naming both), so that a bad workload fails where it is wrong, not later."""
    previous: Time = 0
    for position, item in enumerate(items):
        if item.time < previous:
            raise WorkloadError(
                f"workload item {position} ({type(item).__name__} at {item.time} µs) is earlier "
                f"than the item before it ({previous} µs); workloads must be in time order"
            )
        previous = item.time
        yield item
