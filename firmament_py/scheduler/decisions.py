"""Applying scheduling decisions to a cluster state, the one way every driver does it.

Preemptions come first (they free room), then migrations (as one all-or-nothing move, so tasks
may trade places between full machines; if that move does not fit, those that fit are applied
one at a time while any do), then placements. A decision the cluster state refuses is
reported with the reason and the task stays as it was: nothing is half-applied.

The scheduler applies its own rounds' decisions this way. The daemon applies the decisions its
scheduling process sends back this way too, to its authoritative state, and then sends the
applied ones back to the scheduling process's replica: applying the same decisions to equal
states gives equal states, which is what keeps the two in step.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from firmament_py.flow.deltas import DeltaKind, SchedulingDelta
from firmament_py.model.cluster import ClusterState
from firmament_py.model.errors import ClusterError
from firmament_py.model.ids import MachineId, TaskId
from firmament_py.model.states import TaskTransition

__all__ = ["Decision", "DecisionOutcome", "UnappliedDecision", "apply_decisions"]

Decision = SchedulingDelta[TaskId, MachineId]
"""A PLACE, PREEMPT or MIGRATE of one task, in the cluster's ids."""


@dataclass(frozen=True, slots=True)
class UnappliedDecision:
    """A decision that was not applied, and why."""

    decision: Decision
    reason: str


@dataclass
class DecisionOutcome:
    """What `apply_decisions` did: the decisions applied (preemptions, migrations, placements,
    in that order), those refused with the reason, and the task transitions they caused."""

    applied: list[Decision] = field(default_factory=list)
    refused: list[UnappliedDecision] = field(default_factory=list)
    transitions: list[TaskTransition] = field(default_factory=list)

    @property
    def changed_tasks(self) -> list[TaskId]:
        """The tasks whose placement changed."""
        return [decision.task for decision in self.applied]


def apply_decisions(state: ClusterState, decisions: Iterable[Decision]) -> DecisionOutcome:
    """Apply `decisions` to `state` at its current time (see the module docstring)."""
    outcome = DecisionOutcome()
    now = state.now
    by_kind: dict[DeltaKind, list[Decision]] = {kind: [] for kind in DeltaKind}
    for decision in decisions:
        by_kind[decision.kind].append(decision)
    for decision in by_kind[DeltaKind.PREEMPT]:
        try:
            outcome.transitions.extend(state.preempt(decision.task, time=now))
        except ClusterError as error:
            outcome.refused.append(UnappliedDecision(decision, str(error)))
            continue
        outcome.applied.append(decision)
    _migrate(state, by_kind[DeltaKind.MIGRATE], outcome)
    _place(state, by_kind[DeltaKind.PLACE], outcome)
    return outcome


def _place(state: ClusterState, placements: list[Decision], outcome: DecisionOutcome) -> None:
    now = state.now
    machines = {d.task: d.to_machine for d in placements if d.to_machine is not None}
    if len(machines) == len(placements):  # one decision per task: all at once
        transitions, refused = state.place_many(machines, time=now)
        outcome.transitions.extend(transitions)
        for decision in placements:
            reason = refused.get(decision.task)
            if reason is None:
                outcome.applied.append(decision)
            else:
                outcome.refused.append(UnappliedDecision(decision, reason))
        return
    for decision in placements:  # the same task twice: the first that fits wins
        assert decision.to_machine is not None
        try:
            outcome.transitions.append(state.place(decision.task, decision.to_machine, time=now))
        except ClusterError as error:
            outcome.refused.append(UnappliedDecision(decision, str(error)))
            continue
        outcome.applied.append(decision)


def _migrate(state: ClusterState, migrations: list[Decision], outcome: DecisionOutcome) -> None:
    if not migrations:
        return
    now = state.now
    moves = {d.task: d.to_machine for d in migrations if d.to_machine is not None}
    try:
        outcome.transitions.extend(state.migrate_many(moves, time=now))
        outcome.applied.extend(migrations)
        return
    except ClusterError:
        pass
    # Some move does not fit: apply those that do, one at a time, as long as any do.
    pending = migrations
    while pending:
        left: list[Decision] = []
        for decision in pending:
            assert decision.to_machine is not None
            if _problem(state, decision) is None:
                outcome.transitions.append(
                    state.migrate(decision.task, decision.to_machine, time=now)
                )
                outcome.applied.append(decision)
            else:
                left.append(decision)
        if len(left) == len(pending):
            for decision in left:
                reason = _problem(state, decision) or "refused by the cluster state"
                outcome.refused.append(UnappliedDecision(decision, reason))
            return
        pending = left


def _problem(state: ClusterState, decision: Decision) -> str | None:
    """Why the state would refuse to move the decision's task to its machine now, or None."""
    assert decision.to_machine is not None
    try:
        return state.placement_problem(decision.task, decision.to_machine)
    except ClusterError as error:  # an unknown task or machine
        return str(error)
