"""The errors the cluster model raises when asked to do something the cluster state forbids.

Malformed values (a negative request, a time that is not an int) raise plain `ValueError` or
`TypeError` where they are constructed. `ClusterError` is for requests that are well-formed
but impossible in the current state: an unknown or duplicate id, a placement on a full machine,
a task state change the state machine does not allow. Whoever raises one has changed nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from firmament_py.model.ids import TaskId
    from firmament_py.model.states import TaskState


class ClusterError(ValueError):
    """A request the cluster state refuses; the state is exactly as it was before."""


class IllegalTransition(ClusterError):
    """A task state change that the transition table does not allow."""

    def __init__(self, task_id: TaskId, from_state: TaskState, to_state: TaskState) -> None:
        super().__init__(f"task {task_id} cannot go from {from_state.value} to {to_state.value}")
        self.task_id = task_id
        self.from_state = from_state
        self.to_state = to_state


class InvariantViolation(AssertionError):
    """The cluster state contradicts itself: a bug in the model, never a user error."""
