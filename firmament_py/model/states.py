"""The task state machine: the states, the table of allowed transitions, and their records.

The states are the issue's six, a subset of Firmament's TaskDescriptor states (which also has
BLOCKING, ASSIGNED, ABORTED, DELEGATED and others that a scheduler without task dependencies or
delegation never uses)::

    CREATED --submit--> RUNNABLE --place--> RUNNING --complete--> COMPLETED
                           ^                   |
                           |                   +--preempt / machine lost--> EVICTED
                           +-----------re-queue------------------------------+

    CREATED, RUNNABLE, RUNNING and EVICTED can also go to FAILED. COMPLETED and FAILED are final.

`ClusterState` passes a new task through CREATED and an evicted one through EVICTED at once,
so between calls a live task is RUNNABLE, RUNNING, COMPLETED or FAILED; the two passing states
still appear in the `TaskTransition` records, so the history of every task is complete. Moving
a running task to another machine (migration) is not a state change.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from firmament_py.model.errors import IllegalTransition
from firmament_py.model.ids import MachineId, TaskId, Time


class TaskState(enum.Enum):
    """Where a task is in its life."""

    CREATED = "created"
    """Known to the scheduler, not yet eligible for placement."""
    RUNNABLE = "runnable"
    """Waiting for a machine (its unscheduled time grows)."""
    RUNNING = "running"
    """Placed on a machine, holding a slot and its requested resources there."""
    COMPLETED = "completed"
    """Finished successfully; final."""
    FAILED = "failed"
    """Finished unsuccessfully or abandoned; final."""
    EVICTED = "evicted"
    """Lost its machine (preempted, or the machine failed or left); about to be re-queued."""


ALLOWED_TRANSITIONS: Mapping[TaskState, frozenset[TaskState]] = MappingProxyType(
    {
        TaskState.CREATED: frozenset({TaskState.RUNNABLE, TaskState.FAILED}),
        TaskState.RUNNABLE: frozenset({TaskState.RUNNING, TaskState.FAILED}),
        TaskState.RUNNING: frozenset({TaskState.COMPLETED, TaskState.FAILED, TaskState.EVICTED}),
        TaskState.EVICTED: frozenset({TaskState.RUNNABLE, TaskState.FAILED}),
        TaskState.COMPLETED: frozenset(),
        TaskState.FAILED: frozenset(),
    }
)
"""For each state, the states a task in it may move to. Everything else is refused."""

FINAL_STATES = frozenset(state for state, nexts in ALLOWED_TRANSITIONS.items() if not nexts)


_ALLOWED_PAIRS = frozenset(
    (from_state.value, to_state.value)
    for from_state, nexts in ALLOWED_TRANSITIONS.items()
    for to_state in nexts
)
"""`ALLOWED_TRANSITIONS` as pairs of values: every change of every task is checked, and an
Enum member's hash is Python code where a string's is cached."""


def check_transition(task_id: TaskId, from_state: TaskState, to_state: TaskState) -> None:
    """Raise `IllegalTransition` (naming the task and both states) unless the table allows it."""
    # `_value_` is what the `value` property returns, without the property's call.
    if (from_state._value_, to_state._value_) not in _ALLOWED_PAIRS:
        raise IllegalTransition(task_id, from_state, to_state)


class TransitionCause(enum.Enum):
    """Why a task changed state (or machine), as recorded in a `TaskTransition`."""

    SUBMITTED = "submitted"
    PLACED = "placed"
    MIGRATED = "migrated"
    PREEMPTED = "preempted"
    MACHINE_FAILED = "machine failed"
    MACHINE_REMOVED = "machine removed"
    REQUEUED = "requeued"
    COMPLETED = "completed"
    FAILED = "failed"
    REMOVED = "removed"


@dataclass(frozen=True, slots=True)
class TaskTransition:
    """One change of a task's state or machine, as `ClusterState` reports it.

    `to_state` is None when the task was removed from the cluster state. A migration keeps the
    state (RUNNING to RUNNING) and changes the machine. `from_machine_id` is the machine the
    task left, `to_machine_id` the machine it went to (None for no machine).
    """

    time: Time
    task_id: TaskId
    from_state: TaskState
    to_state: TaskState | None
    cause: TransitionCause
    from_machine_id: MachineId | None = None
    to_machine_id: MachineId | None = None
