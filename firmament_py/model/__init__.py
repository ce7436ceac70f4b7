"""The cluster model: typed jobs, tasks, machines, resources, events, and the cluster state.

This room holds what the scheduler knows about the cluster and nothing about how it decides:
`ClusterState` applies events (`events`) and placement decisions to the entities (`entities`),
keeping the task state machine (`states`), resource bookkeeping (`resources`) and topology
consistent. It imports nothing from the rest of the package; later rooms build on it.
"""

from __future__ import annotations

from firmament_py.model.cluster import ClusterState
from firmament_py.model.entities import DEFAULT_POD, DEFAULT_RACK, Job, Machine, Pod, Rack, Task
from firmament_py.model.errors import ClusterError, IllegalTransition, InvariantViolation
from firmament_py.model.events import (
    ClusterEvent,
    Event,
    LatencySample,
    MachineAdded,
    MachineEvent,
    MachineFailed,
    MachineRemoved,
    MachineStats,
    MachineUpdated,
    TaskCompleted,
    TaskEvent,
    TaskFailed,
    TaskRemoved,
    TaskStats,
    TaskSubmitted,
    TaskUpdated,
)
from firmament_py.model.ids import (
    EquivClassId,
    JobId,
    MachineId,
    PodId,
    RackId,
    TaskId,
    Time,
)
from firmament_py.model.labels import (
    NO_LABELS,
    Labels,
    LabelSelector,
    SelectorOp,
    freeze_labels,
    matches,
)
from firmament_py.model.resources import NO_RESOURCES, Resources
from firmament_py.model.states import (
    ALLOWED_TRANSITIONS,
    FINAL_STATES,
    TaskState,
    TaskTransition,
    TransitionCause,
    check_transition,
)

__all__ = [
    "ALLOWED_TRANSITIONS",
    "DEFAULT_POD",
    "DEFAULT_RACK",
    "FINAL_STATES",
    "NO_LABELS",
    "NO_RESOURCES",
    "ClusterError",
    "ClusterEvent",
    "ClusterState",
    "EquivClassId",
    "Event",
    "IllegalTransition",
    "InvariantViolation",
    "Job",
    "JobId",
    "LabelSelector",
    "Labels",
    "LatencySample",
    "Machine",
    "MachineAdded",
    "MachineEvent",
    "MachineFailed",
    "MachineId",
    "MachineRemoved",
    "MachineStats",
    "MachineUpdated",
    "Pod",
    "PodId",
    "Rack",
    "RackId",
    "Resources",
    "SelectorOp",
    "Task",
    "TaskCompleted",
    "TaskEvent",
    "TaskFailed",
    "TaskId",
    "TaskRemoved",
    "TaskState",
    "TaskStats",
    "TaskSubmitted",
    "TaskTransition",
    "TaskUpdated",
    "Time",
    "TransitionCause",
    "check_transition",
    "freeze_labels",
    "matches",
]
