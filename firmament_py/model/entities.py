"""The entities of the cluster: jobs and tasks, and machines in a pod / rack / machine topology.

These are plain records. `ClusterState` creates them, changes them, and keeps them consistent
with each other; everyone else reads them (policies, the graph manager, the simulator's
metrics) and changes them only through `ClusterState`, or its invariants stop holding.

Collections that must keep an order are dicts used as insertion-ordered sets (`dict[Id, None]`):
iterating over them gives the ids in the order they were added, and adding or removing an id
costs O(1). Iteration order never depends on hashing, so runs are reproducible.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field, fields
from typing import Any

from firmament_py.model.ids import JobId, MachineId, PodId, RackId, TaskId, Time
from firmament_py.model.labels import Labels, LabelSelector
from firmament_py.model.resources import NO_RESOURCES, Resources
from firmament_py.model.states import TaskState


@dataclass(slots=True)
class Job:
    """A group of tasks submitted together. Its first task is its root task (as in Firmament),
    and it lives as long as it has tasks in the cluster state."""

    job_id: JobId
    root_task_id: TaskId
    """The first task submitted for this job; the id stays even after that task is removed."""
    priority: int
    """The root task's priority when the job was submitted."""
    submit_time: Time
    task_ids: dict[TaskId, None] = field(default_factory=dict)
    """The job's tasks in the cluster state, in submission order."""


@dataclass(slots=True)
class Task:
    """One schedulable unit of work: a source of one unit of flow in the scheduling graph.

    Times are in microseconds. `total_unscheduled_time` and `total_run_time` count only the
    stretches that have ended; `unscheduled_time(now)` and `run_time(now)` include the current
    one. A task may run several times (after each eviction); `start_time` is its latest start.
    """

    task_id: TaskId
    job_id: JobId
    request: Resources
    """What the task reserves on the machine it runs on."""
    priority: int
    """Larger is more important (policies decide what that means)."""
    labels: Labels
    selectors: tuple[LabelSelector, ...]
    """Every selector must match a machine's labels for the task to be placed there. They are
    not re-checked while it runs (Kubernetes' "IgnoredDuringExecution")."""
    submit_time: Time
    state: TaskState = TaskState.CREATED
    machine_id: MachineId | None = None
    """The machine the task runs on; None unless RUNNING."""
    start_time: Time | None = None
    finish_time: Time | None = None
    """When it reached COMPLETED or FAILED."""
    runnable_since: Time | None = None
    """When it last became RUNNABLE; None unless RUNNABLE."""
    total_unscheduled_time: int = 0
    total_run_time: int = 0
    eviction_count: int = 0
    failure_reason: str = ""
    measured_usage: Resources | None = None
    """The latest usage reported by a TaskStats event, if any."""

    def unscheduled_time(self, now: Time) -> int:
        """Microseconds spent waiting for a machine, up to `now`."""
        if self.runnable_since is None:
            return self.total_unscheduled_time
        return self.total_unscheduled_time + max(0, now - self.runnable_since)

    def run_time(self, now: Time) -> int:
        """Microseconds spent running, up to `now`."""
        if self.state is not TaskState.RUNNING or self.start_time is None:
            return self.total_run_time
        return self.total_run_time + max(0, now - self.start_time)

    def __reduce__(self) -> tuple[type[Task], tuple[Any, ...]]:
        """Pickled as its fields in order, rebuilt by `__init__`: a daemon's snapshot, and the
        state its scheduling process is sent, hold every task, and this loads in half the time
        of a slotted dataclass's default (a `__setstate__` call per task) from half the bytes."""
        return (Task, _task_fields(self))


_task_fields = operator.attrgetter(*(f.name for f in fields(Task)))
"""A task's fields, in `__init__`'s order, as one tuple."""


@dataclass(slots=True)
class Machine:
    """A machine: the leaf of the resource topology and the place tasks run.

    It offers `slots` task slots (Quincy's slot-based model, and the capacity of its arc to the
    sink) and a `capacity` vector. `reserved` is the sum of the requests of the tasks running on
    it (Firmament's reserved resources); a placement must fit in both a free slot and
    `capacity - reserved`. `measured_usage` is what the machine last reported, which may differ.
    """

    machine_id: MachineId
    rack_id: RackId
    capacity: Resources
    slots: int
    labels: Labels
    added_time: Time
    reserved: Resources = NO_RESOURCES
    running_task_ids: dict[TaskId, None] = field(default_factory=dict)
    """The tasks running here, in the order they were placed."""
    measured_usage: Resources | None = None
    """The latest usage reported by a MachineStats event, if any."""

    @property
    def free(self) -> Resources:
        """The resources not reserved by running tasks."""
        return self.capacity - self.reserved

    @property
    def free_slots(self) -> int:
        """The number of slots not taken by running tasks."""
        return self.slots - len(self.running_task_ids)


@dataclass(slots=True)
class Rack:
    """A group of machines (Quincy's rack aggregator groups tasks' arcs by it); in one pod."""

    rack_id: RackId
    pod_id: PodId
    machine_ids: dict[MachineId, None] = field(default_factory=dict)


@dataclass(slots=True)
class Pod:
    """A group of racks, the topology's top level below the whole cluster."""

    pod_id: PodId
    rack_ids: dict[RackId, None] = field(default_factory=dict)


DEFAULT_RACK: RackId = "rack-0"
"""The rack of a machine added without one."""
DEFAULT_POD: PodId = "pod-0"
"""The pod of a rack created without one."""
