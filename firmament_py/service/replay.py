"""How the daemon's records are replayed: into the scheduling process's replica (a `Scheduler`)
and into a bare cluster state (`StateReplica`, which `ServiceState` applies requests through
and recovers with).

Records are the only way the daemon's state changes, and applying equal records to equal
states gives equal states: that is what keeps the replica in step with the daemon, and what
recovery after a crash relies on. The record kinds are `state`'s (requests, a round's chunks of
decisions) and `rounds`' (a round's own record, which changes no task).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from firmament_py.model.cluster import ClusterState
from firmament_py.model.errors import ClusterError
from firmament_py.model.events import ClusterEvent
from firmament_py.model.ids import Time
from firmament_py.model.states import TaskTransition
from firmament_py.scheduler.decisions import Decision, DecisionOutcome, apply_decisions
from firmament_py.service.protocol import decision_from_wire, events_of, is_plain

__all__ = ["ReplayError", "Replica", "StateReplica", "advance_clock", "apply_plain", "replay"]


class ReplayError(Exception):
    """A record that does not apply to the state it is replayed on: the journal and the state
    (or the scheduling process's replica) disagree, which is a bug or a corrupt journal."""


class Replica(Protocol):
    """What records are replayed into: a `Scheduler`, or a bare cluster state (`StateReplica`)."""

    @property
    def state(self) -> ClusterState:
        """The cluster state the records change."""

    def handle(self, event: ClusterEvent) -> tuple[TaskTransition, ...] | None:
        """Apply one event (ClusterError if the state refuses it)."""

    def apply_decisions(self, decisions: list[Decision]) -> DecisionOutcome:
        """Apply decisions, reporting those the state refuses."""

    def trusted_submit(self, time: Time, task_id: int, job_id: str) -> None:
        """A plain submission, without the event (see `ClusterState.trusted_submit`)."""

    def trusted_remove(self, time: Time, task_id: int) -> None:
        """A plain removal, without the event."""


class StateReplica:
    """A cluster state as a `Replica`: events and decisions applied directly."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state

    def handle(self, event: ClusterEvent) -> tuple[TaskTransition, ...]:
        return self.state.apply(event)

    def apply_decisions(self, decisions: list[Decision]) -> DecisionOutcome:
        return apply_decisions(self.state, decisions)

    def trusted_submit(self, time: Time, task_id: int, job_id: str) -> None:
        self.state.trusted_submit(time, task_id, job_id)

    def trusted_remove(self, time: Time, task_id: int) -> None:
        self.state.trusted_remove(time, task_id)


def advance_clock(state: ClusterState, time: Time) -> None:
    if time > state.now:
        state.advance_to(time)


def replay(replica: Replica, record: Mapping[str, Any]) -> None:
    """Apply one record to `replica`; ReplayError if it does not apply."""
    kind = record.get("kind")
    time = record["time"]
    if kind == "request":
        advance_clock(replica.state, time)
        request_type, body = record["type"], record["body"]
        try:
            if is_plain(request_type, body):  # as `ServiceState` applied it
                apply_plain(replica, request_type, body, time)
                return
            for event in events_of(request_type, body, time):
                replica.handle(event)
        except (ClusterError, ValueError, TypeError) as error:
            raise ReplayError(f"record {record['seq']}: {error}") from error
    elif kind == "round":
        return  # the round's decisions change tasks through its chunks' records (`rounds`)
    elif kind == "epoch":  # a manager registered: fencing is the daemon's
        advance_clock(replica.state, time)  # as the registration moved the daemon's
    elif kind == "decisions":
        advance_clock(replica.state, time)
        try:
            decisions = [decision_from_wire(item) for item in record["deltas"]]
        except ValueError as error:
            raise ReplayError(f"record {record['seq']}: {error}") from error
        outcome = replica.apply_decisions(decisions)
        if outcome.refused:
            raise ReplayError(f"record {record['seq']}: refused {outcome.refused[0]}")
    else:
        raise ReplayError(f"record {record.get('seq')}: unknown kind {kind!r}")


def apply_plain(replica: Replica, kind: str, body: Mapping[str, Any], time: Time) -> None:
    """Apply a plain request (`protocol.is_plain`) through the replica's trusted calls, which
    take its checked values without building events."""
    if kind == "task_submitted":
        replica.trusted_submit(time, body["task_id"], body["job_id"])
    else:
        replica.trusted_remove(time, body["task_id"])
