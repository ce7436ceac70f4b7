"""`Scheduler`: the scheduling core. Cluster events in, scheduling decisions out; no I/O.

The daemon, the simulator and the tests are thin drivers around this class: they hand it
events (`handle`) and ask for rounds (`run_round`). A round:

1. moves the cluster's clock to the round's time (waiting costs grow with it);
2. brings the flow graph in step with the cluster through the policy (`FlowGraphManager`);
3. sends the graph's changes to the solver and solves (optimally);
4. reads placements off the flow and compares them with where tasks run: PLACE, PREEMPT and
   MIGRATE decisions (Firmament's service only acted on PLACE);
5. applies the decisions to the cluster state: preemptions first (they free room), then
   migrations (as one move, so tasks may trade places between full machines), then
   placements. A decision the cluster state refuses (a policy that ignores resource requests
   may route a task to a machine it does not fit) is reported in `RoundResult.refused` and the
   task stays as it was;
6. applies the events that arrived while the round ran, as Firmament does after its solver
   returns. A decision about a task those events finish or remove, or a machine they take
   away, is skipped (`RoundResult.skipped`), not applied and then undone.

`run_round` is `start_round` (steps 1-4) then `finish_round` (steps 5-6); a simulator calls the
two halves itself to deliver, in between, the events that arrive during the round's simulated
duration. `decide` runs steps 1-4 only and `apply_decisions` step 5 for decisions made
elsewhere: the daemon's scheduling process decides on a replica of the state and applies what
the daemon's authoritative state accepted (`scheduler/decisions.py`).

`handle` may be called from another thread while a round runs: the event is queued (and
`handle` returns None); otherwise it is applied at once and its transitions returned. An event
the cluster state refuses raises `ClusterError` when applied at once; a queued one that is
refused is reported in the next `RoundResult.rejected_events`. Nothing is ever half-applied.
"""

from __future__ import annotations

import threading
import time as wallclock
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from firmament_py.flow.placement import DeltaKind, scheduling_deltas
from firmament_py.model.cluster import ClusterState
from firmament_py.model.errors import ClusterError
from firmament_py.model.events import (
    ClusterEvent,
    MachineFailed,
    MachineRemoved,
    MachineUpdated,
    TaskCompleted,
    TaskFailed,
    TaskRemoved,
    TaskSubmitted,
    TaskUpdated,
)
from firmament_py.model.ids import JobId, MachineId, TaskId, Time
from firmament_py.model.states import TaskTransition
from firmament_py.scheduler.decisions import (
    Decision,
    DecisionOutcome,
    UnappliedDecision,
    apply_decisions,
)
from firmament_py.scheduler.graph_manager import FlowGraphManager
from firmament_py.sdk.discovery import load_policy
from firmament_py.sdk.errors import PolicyError
from firmament_py.sdk.manager import PolicyManager
from firmament_py.solvers.base import FlowSolver
from firmament_py.solvers.registry import make_solver

__all__ = [
    "Decision",
    "PendingRound",
    "RejectedEvent",
    "RoundResult",
    "Scheduler",
    "UnappliedDecision",
]

DEFAULT_POLICY = "trivial"
DEFAULT_SOLVER = "cost-scaling"
"""Incremental cost scaling alone, not the race: measured at 12,500 machines and 135,000 tasks
with 1% churn (`docs/benchmarks-history.md`, issue 32), racing it against relaxation made a steady
Quincy round slower (the race's hand-offs between processes cost more than relaxation ever won
back) and a load-spreading round no faster, on this two-core machine. `solver="race"` races."""


@dataclass(frozen=True, slots=True)
class RejectedEvent:
    """An event queued during a round that the cluster state refused when it was applied."""

    event: ClusterEvent
    reason: str


@dataclass(frozen=True)
class PendingRound:
    """A round that has decided but not yet applied its decisions (`Scheduler.start_round`).
    `timings` holds the deciding half's wall-clock seconds (see `RoundResult`)."""

    time: Time
    decisions: tuple[Decision, ...]
    task_errors: tuple[PolicyError, ...]
    cost: int
    algorithm: str
    graph_changes: int
    timings: Mapping[str, float]


@dataclass(frozen=True)
class RoundResult:
    """What one scheduling round decided and did.

    `deltas` are the decisions applied to the cluster state; `transitions` every task
    transition the round caused (the decisions, then the queued events applied at its end).
    Timings are wall-clock seconds: `solver_seconds` is the solver's answer (for a race, its
    winner's `algorithm_seconds` plus the race's own work), `solve_seconds` adds sending the
    changes to the solver, `total_seconds` is the whole round.
    """

    time: Time
    deltas: tuple[Decision, ...]
    refused: tuple[UnappliedDecision, ...]
    skipped: tuple[UnappliedDecision, ...]
    rejected_events: tuple[RejectedEvent, ...]
    task_errors: tuple[PolicyError, ...]
    transitions: tuple[TaskTransition, ...]
    cost: int
    algorithm: str
    graph_nodes: int
    graph_arcs: int
    graph_changes: int
    waiting_tasks: int
    running_tasks: int
    timings: Mapping[str, float] = field(default_factory=dict)

    def count(self, kind: DeltaKind) -> int:
        """How many applied decisions are of `kind`."""
        return sum(1 for delta in self.deltas if delta.kind is kind)

    @property
    def decided(self) -> bool:
        """True if the round applied or refused at least one decision."""
        return bool(self.deltas or self.refused)


def _policy_manager(policy: str | PolicyManager | object) -> PolicyManager:
    if isinstance(policy, PolicyManager):
        return policy
    if isinstance(policy, str):
        return load_policy(policy)
    return PolicyManager(policy, name=type(policy).__name__)


class Scheduler:
    """One cluster, one policy, one solver: events in, decisions out.

    `policy` is an installed policy's name (entry-point group `firmament_py.policies`), a
    `PolicyManager`, or a policy object (module or instance) to register as is. `solver` is a
    solver name from `firmament_py.solvers.registry` (with `solver_options`) or a `FlowSolver`.
    """

    def __init__(
        self,
        policy: str | PolicyManager | object = DEFAULT_POLICY,
        *,
        solver: str | FlowSolver = DEFAULT_SOLVER,
        solver_options: Mapping[str, Any] | None = None,
        state: ClusterState | None = None,
    ) -> None:
        self.policy = _policy_manager(policy)
        if isinstance(solver, FlowSolver):
            if solver_options:
                raise ValueError("solver_options only apply to a solver given by name")
            self.solver = solver
        else:
            self.solver = make_solver(solver, **dict(solver_options or {}))
        self.state = ClusterState() if state is None else state
        self.graph_manager = FlowGraphManager(self.policy, self.state)
        self.graph_manager.mark_changed(self.state.tasks)
        self.rounds = 0
        self._lock = threading.Lock()
        self._in_round = False
        self._queued: list[ClusterEvent] = []
        self._carried: list[RejectedEvent] = []
        self._carried_transitions: list[TaskTransition] = []

    def __repr__(self) -> str:
        return f"Scheduler(policy={self.policy.name!r}, solver={self.solver.algorithm!r})"

    def close(self) -> None:
        """Release the solver (a race's worker processes)."""
        self.solver.close()

    def __enter__(self) -> Scheduler:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------------ events

    def handle(self, event: ClusterEvent) -> tuple[TaskTransition, ...] | None:
        """Apply `event` now and return its transitions, or queue it if a round is running.

        Raises ClusterError (the state unchanged) if the cluster state refuses it now.
        """
        with self._lock:
            if self._in_round:
                self._queued.append(event)
                return None
            return self._apply_event(event)

    def trusted_submit(self, time: Time, task_id: TaskId, job_id: JobId) -> None:
        """`handle(TaskSubmitted(time=time, task_id=task_id, job_id=job_id))` for values the
        caller has checked, without the event (`ClusterState.trusted_submit`): the daemon's
        replica replays most of its records this way."""
        with self._lock:
            if self._in_round:
                self._queued.append(TaskSubmitted(time=time, task_id=task_id, job_id=job_id))
                return
            self.state.trusted_submit(time, task_id, job_id)
            self.graph_manager.mark_changed((task_id,))

    def trusted_remove(self, time: Time, task_id: TaskId) -> None:
        """`handle(TaskRemoved(time=time, task_id=task_id))`, likewise."""
        with self._lock:
            if self._in_round:
                self._queued.append(TaskRemoved(time=time, task_id=task_id))
                return
            self.state.trusted_remove(time, task_id)
            self.graph_manager.mark_changed((task_id,))

    def _apply_event(self, event: ClusterEvent) -> tuple[TaskTransition, ...]:
        transitions = self.state.apply(event)
        self.graph_manager.mark_changed(t.task_id for t in transitions)
        if isinstance(event, TaskUpdated):
            self.graph_manager.mark_changed((event.task_id,))
        elif isinstance(event, MachineUpdated) and event.labels is not None:
            self.graph_manager.mark_topology_changed()
        return transitions

    # ------------------------------------------------------------------ rounds

    def run_round(self, time: Time | None = None) -> RoundResult:
        """Run one scheduling round at `time` (default: the cluster's current time).

        Raises ClusterError if `time` is before the cluster's time, and PolicyError or a
        SolverError if the policy or the solver fails; then no decision is applied, the events
        queued meanwhile are, and the next round starts from where this one left off.
        """
        return self.finish_round(self.start_round(time))

    def start_round(self, time: Time | None = None) -> PendingRound:
        """The first half of `run_round`: update the graph, solve, and decide, but apply
        nothing yet. Until `finish_round`, events given to `handle` are queued, as they are
        while a solver runs; a simulator uses this to deliver the events that arrive during
        the round's (simulated) duration. Raises as `run_round` does."""
        with self._lock:
            if self._in_round:
                raise RuntimeError("a scheduling round is already running")
            if time is not None:
                self.state.advance_to(time)
            round_time = self.state.now
            self._in_round = True
        started = wallclock.perf_counter()
        try:
            manager = self.graph_manager
            task_errors = manager.update()
            updated = wallclock.perf_counter()
            changes = manager.graph.pending_changes
            result = self.solver.solve_graph(manager.graph)
            solved = wallclock.perf_counter()
            moves = manager.placement_changes(result.flow)
            decisions = scheduling_deltas(
                {task: new for task, _, new in moves}, {task: old for task, old, _ in moves}
            )
            extracted = wallclock.perf_counter()
        except BaseException:
            self._end_round()
            raise
        return PendingRound(
            time=round_time,
            decisions=tuple(decisions),
            task_errors=tuple(task_errors),
            cost=result.cost,
            algorithm=result.algorithm,
            graph_changes=changes,
            timings={
                **{f"update_{part}": seconds for part, seconds in manager.timings.items()},
                "update_seconds": updated - started,
                "solve_seconds": solved - updated,
                "solver_seconds": result.wall_time,
                # A race's answer takes its winner's time plus the race's own work.
                "algorithm_seconds": result.stats.get("solver_time", result.wall_time),
                "extract_seconds": extracted - solved,
                "decide_seconds": extracted - started,
            },
        )

    def finish_round(self, pending: PendingRound) -> RoundResult:
        """The second half of `run_round`: apply `pending`'s decisions, then the events queued
        since `start_round`, and report."""
        if not self._in_round:
            raise RuntimeError("finish_round without a round in progress")
        started = wallclock.perf_counter()
        applied, refused, skipped, transitions, rejected = self._end_round(list(pending.decisions))
        finished = wallclock.perf_counter()
        self.rounds += 1
        timings = dict(pending.timings)
        timings["apply_seconds"] = finished - started
        timings["total_seconds"] = timings.pop("decide_seconds") + timings["apply_seconds"]
        return RoundResult(
            time=pending.time,
            deltas=tuple(applied),
            refused=tuple(refused),
            skipped=tuple(skipped),
            rejected_events=tuple(rejected),
            task_errors=pending.task_errors,
            transitions=tuple(transitions),
            cost=pending.cost,
            algorithm=pending.algorithm,
            graph_nodes=self.graph_manager.graph.num_nodes,
            graph_arcs=self.graph_manager.graph.num_arcs,
            graph_changes=pending.graph_changes,
            waiting_tasks=len(self.state.waiting_task_ids),
            running_tasks=self.state.running_task_count,
            timings=timings,
        )

    def decide(self, time: Time | None = None) -> PendingRound:
        """Decide a round without applying it: `start_round`, then the round ends with the
        decisions unapplied. A driver that keeps an authoritative state elsewhere (the daemon)
        applies the decisions there and hands the ones it applied back through
        `apply_decisions`. Events queued meanwhile are applied and reported with the next
        `finish_round`, so such a driver should not `handle` events while it decides. Raises
        as `run_round` does."""
        pending = self.start_round(time)
        self._end_round()
        self.rounds += 1
        return pending

    def apply_decisions(self, decisions: list[Decision]) -> DecisionOutcome:
        """Apply decisions decided earlier (by `decide`, here or in a replica) to the cluster
        state now, as a round applies its own; refused ones are reported, not raised. Raises
        RuntimeError while a round is running."""
        with self._lock:
            if self._in_round:
                raise RuntimeError("cannot apply decisions while a round is running")
            outcome = apply_decisions(self.state, decisions)
            self.graph_manager.mark_changed(outcome.changed_tasks)
            return outcome

    def run_until_quiet(
        self, time: Time | None = None, *, max_rounds: int = 100
    ) -> list[RoundResult]:
        """Run rounds at `time` until one applies and refuses nothing, or `max_rounds` ran.
        Returns every round's result (the last one is quiet unless `max_rounds` stopped it)."""
        results: list[RoundResult] = []
        for _ in range(max_rounds):
            results.append(self.run_round(time))
            if not results[-1].decided:
                break
        return results

    def _end_round(
        self, decisions: list[Decision] | None = None
    ) -> tuple[
        list[Decision],
        list[UnappliedDecision],
        list[UnappliedDecision],
        list[TaskTransition],
        list[RejectedEvent],
    ]:
        """Apply the decisions (if the round got that far), then the queued events, as one
        step that `handle` cannot interleave with."""
        applied: list[Decision] = []
        refused: list[UnappliedDecision] = []
        skipped: list[UnappliedDecision] = []
        transitions: list[TaskTransition] = []
        with self._lock:
            try:
                if decisions is not None:
                    live = self._skip_stale(decisions, skipped)
                    self._apply_decisions(live, applied, refused, transitions)
                    transitions = self._carried_transitions + transitions
                    self._carried_transitions = []
                rejected, self._carried = self._carried, []
                queued, self._queued = self._queued, []
                for event in queued:
                    try:
                        event_transitions = self._apply_event(event)
                    except (ClusterError, TypeError) as error:
                        rejected.append(RejectedEvent(event, str(error)))
                        continue
                    if decisions is None:
                        self._carried_transitions.extend(event_transitions)
                    else:
                        transitions.extend(event_transitions)
                if decisions is None:
                    self._carried = rejected
            finally:
                self._in_round = False
        return applied, refused, skipped, transitions, rejected

    def _skip_stale(
        self, decisions: list[Decision], skipped: list[UnappliedDecision]
    ) -> list[Decision]:
        """The decisions that no queued event makes moot; the others go to `skipped`."""
        if not self._queued:
            return decisions
        gone_tasks: dict[TaskId, str] = {}
        gone_machines: dict[MachineId, str] = {}
        for event in self._queued:
            if isinstance(event, TaskCompleted | TaskFailed | TaskRemoved):
                gone_tasks[event.task_id] = type(event).__name__
            elif isinstance(event, MachineFailed | MachineRemoved):
                gone_machines[event.machine_id] = type(event).__name__
        live: list[Decision] = []
        for decision in decisions:
            reason = None
            if decision.task in gone_tasks:
                reason = f"{gone_tasks[decision.task]} for task {decision.task} arrived meanwhile"
            elif decision.to_machine in gone_machines:
                reason = (
                    f"{gone_machines[decision.to_machine]} for machine "
                    f"{decision.to_machine!r} arrived meanwhile"
                )
            if reason is None:
                live.append(decision)
            else:
                skipped.append(UnappliedDecision(decision, reason))
        return live

    def _apply_decisions(
        self,
        decisions: list[Decision],
        applied: list[Decision],
        refused: list[UnappliedDecision],
        transitions: list[TaskTransition],
    ) -> None:
        outcome = apply_decisions(self.state, decisions)
        applied.extend(outcome.applied)
        refused.extend(outcome.refused)
        transitions.extend(outcome.transitions)
        self.graph_manager.mark_changed(outcome.changed_tasks)
