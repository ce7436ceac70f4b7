"""The simulator's side of the dashboard: a `SimulationObserver` that tells a `Board` what the
simulated cluster does, event by event and round by round (`SimulationFeed`).

Times are simulated microseconds. A round's placements take effect when it ends, as the
simulator's task records count them, so the board's latencies are the run's own
(`TaskRecord.placement_latency` for a task's first wait). An event that arrives while a round
runs is queued by the scheduler and applied when the round ends: the board learns of it then
(a submitted task's wait still counts from its arrival; one the cluster refused never waits).
"""

from __future__ import annotations

from collections.abc import Sequence

from firmament_py.dashboard.board import Board, MachineRow, RoundFacts
from firmament_py.model.events import (
    MachineAdded,
    MachineFailed,
    MachineRemoved,
    MachineUpdated,
    TaskCompleted,
    TaskFailed,
    TaskRemoved,
    TaskSubmitted,
)
from firmament_py.model.ids import Time
from firmament_py.model.states import TaskState, TaskTransition, TransitionCause
from firmament_py.scheduler import RoundResult
from firmament_py.sim.simulator import RoundRecord

__all__ = ["SimulationFeed"]

_ENDED = (TaskState.COMPLETED, TaskState.FAILED, None)


class SimulationFeed:
    """Tells `board` what a simulation does (pass it as the simulator's `observer`)."""

    def __init__(self, board: Board) -> None:
        self.board = board
        self._events = 0
        self._arrivals: dict[int, Time] = {}  # submissions queued during a round: when

    def took_event(
        self, event: object, transitions: Sequence[TaskTransition] | None, time: Time
    ) -> None:
        board = self.board
        self._events += 1
        if isinstance(event, MachineAdded):
            board.machines_added(
                [MachineRow(event.machine_id, event.rack_id, event.pod_id, event.slots)]
            )
        elif isinstance(event, (MachineFailed, MachineRemoved)):
            board.machine_gone(event.machine_id, time)
        elif isinstance(event, MachineUpdated) and event.slots is not None:
            board.machine_slots(event.machine_id, event.slots)
        if transitions is None:  # queued: what it does comes with the round's transitions
            if isinstance(event, TaskSubmitted):
                self._arrivals[event.task_id] = event.time  # its wait begins now, if taken
            elif not isinstance(event, (TaskCompleted, TaskFailed, TaskRemoved)):
                board.event(time)  # (a submission or an end is counted when applied)
        elif not self._take(transitions, time):
            board.event(time)
        board.set_seq(self._events)

    def took_round(self, result: RoundResult, record: RoundRecord, end: Time) -> None:
        self._take(result.transitions, end)
        self._arrivals.clear()  # those not taken were refused: they never waited
        timings = result.timings
        self.board.round(
            RoundFacts(
                number=record.index + 1,
                time=end,
                algorithm=result.algorithm,
                phases={
                    "update": timings["update_seconds"] * 1e3,
                    "solve": timings["solve_seconds"] * 1e3,
                    "extract": timings["extract_seconds"] * 1e3,
                    "apply": timings["apply_seconds"] * 1e3,
                },
                algorithm_ms=timings.get("algorithm_seconds", timings["solver_seconds"]) * 1e3,
                answer_ms=timings["solver_seconds"] * 1e3,
                decisions=len(result.deltas),
            )
        )

    def _take(self, transitions: Sequence[TaskTransition], time: Time) -> bool:
        """Tell the board of `transitions` (placements at `time`); whether one was a task's
        submission or end (the board counts those as events)."""
        board = self.board
        counted = False
        for t in transitions:
            if t.cause is TransitionCause.SUBMITTED:
                board.submitted(t.task_id, self._arrivals.pop(t.task_id, t.time))
                counted = True
            elif t.cause in (TransitionCause.PLACED, TransitionCause.MIGRATED):
                assert t.to_machine_id is not None
                board.placed(t.task_id, t.to_machine_id, time)
            elif t.to_state in _ENDED:
                board.ended(t.task_id, t.time)
                counted = True
            elif t.from_state is TaskState.RUNNING:  # preempted, or its machine went
                board.unplaced(t.task_id, t.time, decision=t.cause is TransitionCause.PREEMPTED)
        return counted
