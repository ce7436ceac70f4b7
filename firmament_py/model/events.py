"""The events that change the cluster state, as immutable values.

They mirror the messages of Firmament's scheduler service (task submitted, completed, failed,
removed, updated; node added, failed, removed, updated; task and node statistics), plus the
network latency samples a PTPmesh or Pingmesh style measurement system reports between machines
(`LatencySample`, for latency-aware policies such as NoMora). A driver
(the daemon, the simulator, a test) builds them and hands them to `ClusterState.apply`; the
scheduler queues those that arrive while a solver runs. Each carries the time it happened, in
microseconds. Constructing an event checks its values (types, ranges, non-negative resources)
so a malformed event fails where it is made; whether it fits the cluster state (known ids, no
duplicates) is for `ClusterState` to decide. Fields are keyword-only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypeAlias

from firmament_py.model.entities import DEFAULT_POD, DEFAULT_RACK
from firmament_py.model.ids import (
    JobId,
    MachineId,
    PodId,
    RackId,
    TaskId,
    Time,
    check_int64,
    check_name,
    check_task_id,
    check_time,
)
from firmament_py.model.labels import LabelSelector, check_selectors, freeze_labels
from firmament_py.model.resources import NO_RESOURCES, Resources


def _check_resources(what: str, value: object) -> Resources:
    if not isinstance(value, Resources):
        raise TypeError(f"{what} must be Resources, not {type(value).__name__}")
    return value.require_non_negative(what)


def _check_slots(slots: object) -> None:
    if check_int64("slots", slots) < 0:
        raise ValueError(f"slots must not be negative, got {slots}")


@dataclass(frozen=True, kw_only=True)
class Event:
    """Something that happened in the cluster at `time` (microseconds)."""

    time: Time

    def __post_init__(self) -> None:
        check_time(self.time)


@dataclass(frozen=True, kw_only=True)
class TaskEvent(Event):
    """An event about one task."""

    task_id: TaskId

    def __post_init__(self) -> None:
        super().__post_init__()
        check_task_id(self.task_id)


@dataclass(frozen=True, kw_only=True)
class MachineEvent(Event):
    """An event about one machine."""

    machine_id: MachineId

    def __post_init__(self) -> None:
        super().__post_init__()
        check_name("machine", self.machine_id)


@dataclass(frozen=True, kw_only=True)
class TaskSubmitted(TaskEvent):
    """A new task of job `job_id`; the first task of an unknown job creates the job."""

    job_id: JobId
    request: Resources = NO_RESOURCES
    priority: int = 0
    labels: Mapping[str, str] = field(default_factory=dict)
    selectors: tuple[LabelSelector, ...] = ()

    def __post_init__(self) -> None:
        super().__post_init__()
        check_name("job", self.job_id)
        _check_resources("a task's request", self.request)
        check_int64("priority", self.priority)
        object.__setattr__(self, "labels", freeze_labels(self.labels))
        object.__setattr__(self, "selectors", check_selectors(self.selectors))


@dataclass(frozen=True, kw_only=True)
class TaskCompleted(TaskEvent):
    """A running task finished successfully."""


@dataclass(frozen=True, kw_only=True)
class TaskFailed(TaskEvent):
    """A task failed (while running) or was abandoned (before it ran)."""

    reason: str = ""


@dataclass(frozen=True, kw_only=True)
class TaskRemoved(TaskEvent):
    """A task leaves the cluster state, in whatever state it is (a running one is killed)."""


@dataclass(frozen=True, kw_only=True)
class TaskUpdated(TaskEvent):
    """New values for some of a task's attributes; None leaves an attribute as it is."""

    request: Resources | None = None
    priority: int | None = None
    labels: Mapping[str, str] | None = None
    selectors: tuple[LabelSelector, ...] | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.request is not None:
            _check_resources("a task's request", self.request)
        if self.priority is not None:
            check_int64("priority", self.priority)
        if self.labels is not None:
            object.__setattr__(self, "labels", freeze_labels(self.labels))
        if self.selectors is not None:
            object.__setattr__(self, "selectors", check_selectors(self.selectors))


@dataclass(frozen=True, kw_only=True)
class MachineAdded(MachineEvent):
    """A machine joins the cluster, in rack `rack_id` of pod `pod_id`."""

    capacity: Resources
    slots: int
    rack_id: RackId = DEFAULT_RACK
    pod_id: PodId = DEFAULT_POD
    labels: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_resources("a machine's capacity", self.capacity)
        _check_slots(self.slots)
        check_name("rack", self.rack_id)
        check_name("pod", self.pod_id)
        object.__setattr__(self, "labels", freeze_labels(self.labels))


@dataclass(frozen=True, kw_only=True)
class MachineFailed(MachineEvent):
    """A machine stopped unexpectedly; its running tasks are evicted and re-queued."""

    reason: str = ""


@dataclass(frozen=True, kw_only=True)
class MachineRemoved(MachineEvent):
    """A machine was taken out of the cluster; its running tasks are evicted and re-queued."""


@dataclass(frozen=True, kw_only=True)
class MachineUpdated(MachineEvent):
    """New values for some of a machine's attributes; None leaves an attribute as it is."""

    capacity: Resources | None = None
    slots: int | None = None
    labels: Mapping[str, str] | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.capacity is not None:
            _check_resources("a machine's capacity", self.capacity)
        if self.slots is not None:
            _check_slots(self.slots)
        if self.labels is not None:
            object.__setattr__(self, "labels", freeze_labels(self.labels))


@dataclass(frozen=True, kw_only=True)
class TaskStats(TaskEvent):
    """A measurement of what a task uses."""

    usage: Resources

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_resources("a task's measured usage", self.usage)


@dataclass(frozen=True, kw_only=True)
class MachineStats(MachineEvent):
    """A measurement of what a machine uses in total."""

    usage: Resources

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_resources("a machine's measured usage", self.usage)


@dataclass(frozen=True, kw_only=True)
class LatencySample(MachineEvent):
    """A network latency measured from machine `machine_id` to machine `peer_id`, in
    microseconds, over one network path (`path`: any non-negative number the measurement system
    uses to tell apart the equal-cost paths it probes, 0 if it does not).

    The cluster keeps the latest sample of every (direction, path) of a pair and serves the
    pair's latency as the largest of them: the worst case over the paths a flow could take
    (ECMP), as NoMora does. A sample of a pair with itself is refused when made."""

    peer_id: MachineId
    latency_us: float
    path: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        check_name("machine", self.peer_id)
        if self.peer_id == self.machine_id:
            raise ValueError(f"a latency sample needs two machines, got {self.machine_id!r} twice")
        if isinstance(self.latency_us, bool) or not isinstance(self.latency_us, int | float):
            raise TypeError(
                f"latency_us must be a number of microseconds, not "
                f"{type(self.latency_us).__name__}: {self.latency_us!r}"
            )
        if not math.isfinite(self.latency_us) or self.latency_us < 0:
            raise ValueError(f"latency_us must be finite and non-negative, got {self.latency_us!r}")
        object.__setattr__(self, "latency_us", float(self.latency_us))
        if check_int64("path", self.path) < 0:
            raise ValueError(f"path must not be negative, got {self.path}")


ClusterEvent: TypeAlias = (
    TaskSubmitted
    | TaskCompleted
    | TaskFailed
    | TaskRemoved
    | TaskUpdated
    | MachineAdded
    | MachineFailed
    | MachineRemoved
    | MachineUpdated
    | TaskStats
    | MachineStats
    | LatencySample
)
"""Every event `ClusterState.apply` accepts."""
