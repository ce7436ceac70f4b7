"""Scheduling decisions as values: `DeltaKind` and `SchedulingDelta` (Firmament's PLACE, PREEMPT
and MIGRATE), and the check that a decision is a consistent change of placement.

They live apart from the flow extraction that makes them (`flow.placement`), so that a process
that only reads, writes and applies decisions (the daemon's request loop) does not load numpy's
arrays and the compiled kernels.
"""

from __future__ import annotations

import enum
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["DeltaKind", "MachineT", "SchedulingDelta", "TaskT", "delta_problem"]

TaskT = TypeVar("TaskT", bound=Hashable)
MachineT = TypeVar("MachineT", bound=Hashable)


class DeltaKind(enum.Enum):
    """A change of one task's placement (Firmament's SchedulingDelta types, NOOP left out)."""

    PLACE = "place"
    """The task was waiting and now runs on `to_machine`."""
    PREEMPT = "preempt"
    """The task ran on `from_machine` and is now unscheduled."""
    MIGRATE = "migrate"
    """The task ran on `from_machine` and now runs on `to_machine`, a different machine."""


@dataclass(frozen=True, slots=True)
class SchedulingDelta(Generic[TaskT, MachineT]):
    """One decision for one task; only consistent combinations of fields can be built."""

    kind: DeltaKind
    task: TaskT
    from_machine: MachineT | None
    to_machine: MachineT | None

    def __post_init__(self) -> None:
        problem = delta_problem(self.kind, self.task, self.from_machine, self.to_machine)
        if problem is not None:
            raise ValueError(problem)


_ENDS = {
    DeltaKind.PLACE: (False, True),
    DeltaKind.PREEMPT: (True, False),
    DeltaKind.MIGRATE: (True, True),
}


def delta_problem(kind: DeltaKind, task: object, source: object, target: object) -> str | None:
    """Why a delta of `kind` from `source` to `target` machine is not a valid change of
    placement; None if it is (the check `SchedulingDelta` makes, without building one)."""
    if (source is not None, target is not None) != _ENDS[kind]:
        return f"{kind.name} of task {task!r} cannot go from {source!r} to {target!r}"
    if kind is DeltaKind.MIGRATE and source == target:
        return f"MIGRATE of task {task!r} stays on machine {target!r}: not a move"
    return None
