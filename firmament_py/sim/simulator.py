"""`Simulator`: replays a workload against the real scheduler in simulated time.

The scheduler, its policy and its solver run unchanged; only the cluster is simulated, as in
Firmament's simulator (and Borg's Fauxmaster): task execution is a timer. A task placed at time
`t` completes at `t + runtime`; if it is evicted or preempted first, that completion is
cancelled and the task runs its whole runtime again when next placed. A migrated task keeps its
completion time (a live migration).

Rounds. The scheduler runs a round as soon as something happened since the last one and the
last one has finished; events at the same instant are delivered together first. While tasks
wait, a round also runs every `round_interval` without events, because waiting costs grow with
time (Quincy's tasks wait for locality, then settle). A round starting at `s` takes simulated
time `d`, measured as Firmament's `--solver_runtime_accounting_mode` does (`Accounting`): the
algorithm alone, the solver including sending it the changes, the whole round, or nothing
(deterministic runs). Events of the workload that fall in `[s, s + d)` arrive while the round
runs: they are queued by the scheduler and applied after its decisions, which take effect at
`s + d`; a decision about a task those events removed, or a machine they took away, is
skipped, as in the real scheduler.

What the workload gets wrong (an event the cluster refuses: a kill for a task it never
submitted, a machine added twice) is counted and the first few reported, never applied.
"""

from __future__ import annotations

import enum
import itertools
import time as wallclock
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from firmament_py.model.errors import ClusterError
from firmament_py.model.events import TaskCompleted, TaskSubmitted
from firmament_py.model.ids import JobId, MachineId, TaskId, Time
from firmament_py.model.states import TaskState, TaskTransition, TransitionCause
from firmament_py.scheduler import DeltaKind, RoundResult, Scheduler
from firmament_py.sim.core import EventQueue
from firmament_py.sim.workload import TaskArrival, WorkloadItem, check_order

__all__ = [
    "Accounting",
    "RoundRecord",
    "SimulationConfig",
    "SimulationObserver",
    "SimulationResult",
    "Simulator",
    "TaskRecord",
]

MICROSECONDS = 1_000_000
_COMPLETION_RANK = 0  # at one instant, tasks finish (freeing slots) before anything arrives
_WORKLOAD_RANK = 1
_KEPT_REJECTIONS = 20


class Accounting(enum.Enum):
    """How much simulated time a scheduling round takes (Firmament's accounting modes)."""

    ALGORITHM = "algorithm"
    """The solver's algorithm alone (`RoundResult.timings["solver_seconds"]`)."""
    SOLVER = "solver"
    """The algorithm plus handing the solver the round's graph changes ("solve_seconds")."""
    ROUND = "round"
    """The whole round up to its decisions: graph update, solve and extraction ("decide_seconds";
    the decisions take effect when it ends)."""
    NONE = "none"
    """No time at all: rounds are instantaneous and runs are deterministic."""

    def seconds(self, timings: Mapping[str, float]) -> float:
        if self is Accounting.ALGORITHM:
            return timings["solver_seconds"]
        if self is Accounting.SOLVER:
            return timings["solve_seconds"]
        if self is Accounting.ROUND:
            return timings["decide_seconds"]
        return 0.0


@dataclass(frozen=True)
class SimulationConfig:
    """`end_time`: stop once simulated time passes it (None: when the workload is exhausted
    and nothing is left to decide). `round_interval`: while tasks wait, run a round at least
    this often (µs; 0: only when something happens). `max_rounds`: a safety stop."""

    end_time: Time | None = None
    accounting: Accounting = Accounting.ALGORITHM
    round_interval: Time = MICROSECONDS
    max_rounds: int | None = None

    def __post_init__(self) -> None:
        if self.end_time is not None and self.end_time < 0:
            raise ValueError(f"end_time must not be negative, got {self.end_time}")
        if self.round_interval < 0:
            raise ValueError(f"round_interval must not be negative, got {self.round_interval}")
        if self.max_rounds is not None and self.max_rounds < 1:
            raise ValueError(f"max_rounds must be positive, got {self.max_rounds}")


@dataclass
class TaskRecord:
    """One task's life in the simulation (times in µs; None: did not happen).

    `machine_id` is the last machine it ran on; `finish_time` when it left the cluster
    (completed, failed or removed, whether or not it ever ran); `end_state` a `TaskState` value
    or "removed"."""

    task_id: TaskId
    job_id: JobId
    submit_time: Time
    runtime: Time | None
    first_start: Time | None = None
    last_start: Time | None = None
    finish_time: Time | None = None
    machine_id: MachineId | None = None
    end_state: str = TaskState.RUNNABLE.value
    placements: int = 0
    evictions: int = 0
    migrations: int = 0

    @property
    def placement_latency(self) -> Time | None:
        """From submission to first placement (Firmament's task placement latency)."""
        return None if self.first_start is None else self.first_start - self.submit_time


@dataclass(frozen=True)
class RoundRecord:
    """One scheduling round, as Firmament's scheduler_events rows: when it started, how long it
    took in simulated time, which algorithm answered (a race's winner), its wall-clock timings
    (`round_seconds` is the whole round, applying decisions included), what it decided, and the
    cluster after it (`machines` and their `slots`).

    The names are the simulator's, older than the scheduler's timing keys, and do not match
    them: `algorithm_seconds` (rounds.csv `algorithm_s`) holds the scheduler's `solver_seconds`
    (until the solver answered; for a race, the race's whole answer, as Firmament measures its
    algorithm runtime), and `solver_seconds` (`solver_s`) its `solve_seconds` (that plus
    loading the round's changes). The scheduler's own `algorithm_seconds` timing (a race's
    winner's time alone) is not recorded here; the dashboard shows it."""

    index: int
    start: Time
    duration: Time
    algorithm: str
    algorithm_seconds: float
    solver_seconds: float
    round_seconds: float
    placed: int
    preempted: int
    migrated: int
    refused: int
    skipped: int
    task_errors: int
    waiting: int
    running: int
    events: int
    graph_nodes: int
    graph_arcs: int
    graph_changes: int
    cost: int
    machines: int
    slots: int


@dataclass
class SimulationResult:
    """Everything a run produced; `firmament_py.sim.report` turns it into files and plots."""

    policy: str
    algorithm: str
    accounting: Accounting
    workload: str = ""
    rounds: list[RoundRecord] = field(default_factory=list)
    tasks: dict[TaskId, TaskRecord] = field(default_factory=dict)
    end_time: Time = 0
    events: int = 0
    rejected_events: int = 0
    rejections: list[str] = field(default_factory=list)
    wall_seconds: float = 0.0


class SimulationObserver(Protocol):
    """Told what happens as it happens (the dashboard, `firmament_py.dashboard.sim_feed`)."""

    def took_event(
        self, event: object, transitions: Sequence[TaskTransition] | None, time: Time
    ) -> None:
        """The scheduler took `event` at `time`: applied it (its `transitions`), or queued it
        while a round runs (None: its transitions come with the round's)."""

    def took_round(self, result: RoundResult, record: RoundRecord, end: Time) -> None:
        """A round ended at `end`; its decisions (and the events queued meanwhile) took effect."""


@dataclass(frozen=True, slots=True)
class _Completion:
    task_id: TaskId
    start: int  # which placement of the task this completion belongs to


class Simulator:
    """Runs `workload` through `scheduler` (see the module docstring)."""

    def __init__(
        self,
        scheduler: Scheduler,
        workload: Iterable[WorkloadItem],
        config: SimulationConfig | None = None,
        *,
        workload_name: str = "",
        observer: SimulationObserver | None = None,
    ) -> None:
        """`workload_name` describes the workload in the result (a preset, a trace path);
        `observer` is told every event and round as it happens."""
        self.scheduler = scheduler
        self.observer = observer
        self.config = config or SimulationConfig()
        self._workload: Iterator[WorkloadItem] = iter(check_order(workload))
        self._queue: EventQueue[WorkloadItem | _Completion] = EventQueue()
        self._runtimes: dict[TaskId, Time | None] = {}
        self._starts: dict[TaskId, int] = {}  # placements so far, to recognise stale completions
        self._start_numbers = itertools.count(1)
        self._unconfirmed: set[TaskId] = set()  # submissions queued during the current round
        self.result = SimulationResult(
            policy=scheduler.policy.name,
            algorithm=scheduler.solver.algorithm,
            accounting=self.config.accounting,
            workload=workload_name,
        )
        self._events_since_round = 0

    # ------------------------------------------------------------------ the loop

    def run(self, progress: Callable[[Time], None] | None = None) -> SimulationResult:
        """Run to the end (see `SimulationConfig`); `progress` is called with the simulated time
        after every round."""
        started = wallclock.perf_counter()
        config, queue = self.config, self._queue
        self._pull_workload()
        last_round_end: Time = 0
        happened = False  # something happened since the last round
        waiting = False  # tasks waited after the last round (or arrived since)
        while True:
            next_time = queue.peek_time()
            due: Time | None = None
            if happened:
                due = max(queue.now, last_round_end)
            elif waiting and config.round_interval > 0:
                due = max(queue.now, last_round_end + config.round_interval)
            if config.end_time is None:
                if next_time is None and not happened:
                    break  # nothing left to arrive and nothing new to decide
            else:
                horizon = config.end_time
                if due is not None and due > horizon:
                    due = None
                if due is None and (next_time is None or next_time > horizon):
                    queue.advance(max(queue.now, horizon))  # nothing more before the end
                    break
            if due is not None and (next_time is None or due < next_time):
                queue.advance(due)
                result, end = self._round(due)
                last_round_end = end
                happened = self._events_since_round > 0
                waiting = result.waiting_tasks > 0
                if progress is not None:
                    progress(end)
                if config.max_rounds is not None and len(self.result.rounds) >= config.max_rounds:
                    break
                continue
            if next_time is None:
                break
            _, item = queue.pop()
            self._deliver(item, during_round=False)
            happened = True
            waiting = waiting or isinstance(item, TaskArrival)
        self.result.end_time = queue.now
        self.result.wall_seconds = wallclock.perf_counter() - started
        return self.result

    def _pull_workload(self) -> None:
        """Keep the workload's next item in the queue (one at a time: workloads can be long)."""
        item = next(self._workload, None)
        if item is not None:
            self._queue.push(item.time, _WORKLOAD_RANK, item)

    def _round(self, start: Time) -> tuple[RoundResult, Time]:
        events_before = self._events_since_round
        self._events_since_round = 0
        pending = self.scheduler.start_round(start)
        seconds = self.config.accounting.seconds(pending.timings)
        end = start + round(seconds * MICROSECONDS)
        queue = self._queue
        while (next_time := queue.peek_time()) is not None and next_time < end:
            _, item = queue.pop()
            self._deliver(item, during_round=True)
        result = self.scheduler.finish_round(pending)
        queue.advance(end)
        self._take_transitions(result.transitions, placed_at=end)
        timings = result.timings
        record = RoundRecord(
            index=len(self.result.rounds),
            start=start,
            duration=end - start,
            algorithm=result.algorithm,
            algorithm_seconds=timings["solver_seconds"],
            solver_seconds=timings["solve_seconds"],
            round_seconds=timings["total_seconds"],
            placed=result.count(DeltaKind.PLACE),
            preempted=result.count(DeltaKind.PREEMPT),
            migrated=result.count(DeltaKind.MIGRATE),
            refused=len(result.refused),
            skipped=len(result.skipped),
            task_errors=len(result.task_errors),
            waiting=result.waiting_tasks,
            running=result.running_tasks,
            events=events_before,
            graph_nodes=result.graph_nodes,
            graph_arcs=result.graph_arcs,
            graph_changes=result.graph_changes,
            cost=result.cost,
            machines=len(self.scheduler.state.machines),
            slots=sum(m.slots for m in self.scheduler.state.machines.values()),
        )
        self.result.rounds.append(record)
        if self.observer is not None:
            self.observer.took_round(result, record, end)
        for rejected in result.rejected_events:
            self._reject(rejected.event, rejected.reason)
        self._unconfirmed.clear()
        return result, end

    # ------------------------------------------------------------------ events

    def _deliver(self, item: WorkloadItem | _Completion, *, during_round: bool) -> None:
        """Hand one item to the scheduler (queued by it while a round runs)."""
        if isinstance(item, _Completion):
            if self._starts.get(item.task_id) != item.start:
                return  # the task was evicted, preempted or removed since: stale
            event: object = TaskCompleted(time=self._queue.now, task_id=item.task_id)
        else:
            self._pull_workload()
            event = item.submitted if isinstance(item, TaskArrival) else item
        self.result.events += 1
        self._events_since_round += 1
        try:
            transitions = self.scheduler.handle(event)  # type: ignore[arg-type]
        except ClusterError as error:
            self._reject(event, str(error))
            return
        if self.observer is not None:
            self.observer.took_event(event, transitions, self._queue.now)
        if isinstance(item, TaskArrival) and item.submitted.task_id not in self.result.tasks:
            submitted = item.submitted
            self._runtimes[submitted.task_id] = item.runtime
            self.result.tasks[submitted.task_id] = TaskRecord(
                submitted.task_id, submitted.job_id, submitted.time, item.runtime
            )
            if transitions is None:  # queued: the cluster may still refuse it
                self._unconfirmed.add(submitted.task_id)
        if transitions is not None:
            self._take_transitions(transitions, placed_at=self._queue.now)

    def _reject(self, event: object, reason: str) -> None:
        if isinstance(event, TaskSubmitted) and event.task_id in self._unconfirmed:
            del self.result.tasks[event.task_id]  # the cluster never took it
            self._runtimes.pop(event.task_id, None)
        self.result.rejected_events += 1
        if len(self.result.rejections) < _KEPT_REJECTIONS:
            self.result.rejections.append(f"{event!r}: {reason}")

    def _take_transitions(self, transitions: Iterable[TaskTransition], *, placed_at: Time) -> None:
        """Keep the task records and the completion timers in step with what happened."""
        for t in transitions:
            record = self.result.tasks.get(t.task_id)
            if t.cause is TransitionCause.PLACED:
                start = next(self._start_numbers)
                self._starts[t.task_id] = start
                runtime = self._runtimes.get(t.task_id)
                if runtime is not None:
                    self._queue.push(
                        placed_at + runtime, _COMPLETION_RANK, _Completion(t.task_id, start)
                    )
                if record is not None:
                    record.placements += 1
                    record.last_start = placed_at
                    if record.first_start is None:
                        record.first_start = placed_at
                    record.machine_id = t.to_machine_id
                    record.end_state = TaskState.RUNNING.value
                continue
            if t.cause is TransitionCause.MIGRATED:
                if record is not None:
                    record.migrations += 1
                    record.machine_id = t.to_machine_id
                continue
            if t.from_state is TaskState.RUNNING:
                self._starts.pop(t.task_id, None)  # its completion is now stale
            if record is None:
                continue
            if t.to_state is TaskState.EVICTED:
                record.evictions += 1
            elif t.to_state is TaskState.RUNNABLE:
                record.end_state = TaskState.RUNNABLE.value
            elif t.to_state is None or t.to_state in (TaskState.COMPLETED, TaskState.FAILED):
                record.finish_time = t.time
                record.end_state = "removed" if t.to_state is None else t.to_state.value
                self._runtimes.pop(t.task_id, None)
