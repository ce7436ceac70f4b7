"""Tests of the simulator: the event core's ordering, task lifetimes from runtimes and
placements, evictions restarting tasks, events during a round, time accounting, bad workload
items, and consistency of the cluster after random workloads."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from firmament_py.model import (
    MachineAdded,
    MachineFailed,
    Resources,
    TaskRemoved,
    TaskState,
    TaskSubmitted,
)
from firmament_py.scheduler import Scheduler
from firmament_py.sim.core import EventQueue
from firmament_py.sim.simulator import Accounting, SimulationConfig, Simulator
from firmament_py.sim.workload import TaskArrival, WorkloadError, WorkloadItem

S = 1_000_000


class Plain:
    """The SDK's defaults alone."""


def machine(name: str, *, slots: int = 1, time: int = 0) -> MachineAdded:
    return MachineAdded(
        time=time, machine_id=name, capacity=Resources(cpu_millicores=1000), slots=slots
    )


def arrival(task_id: int, time: int, runtime: int | None, job: str = "j") -> TaskArrival:
    return TaskArrival(TaskSubmitted(time=time, task_id=task_id, job_id=job), runtime)


def simulate(
    items: Sequence[WorkloadItem], **config: object
) -> tuple[Simulator, dict[int, tuple[int | None, int | None, str]]]:
    options: dict[str, object] = {"accounting": Accounting.NONE, **config}
    sim = Simulator(Scheduler(Plain()), items, SimulationConfig(**options))  # type: ignore[arg-type]
    result = sim.run()
    sim.scheduler.state.validate()
    lives = {t.task_id: (t.first_start, t.finish_time, t.end_state) for t in result.tasks.values()}
    return sim, lives


def test_the_event_core_orders_by_time_then_rank_then_insertion() -> None:
    queue: EventQueue[str] = EventQueue()
    queue.push(5, 1, "late arrival")
    queue.push(5, 0, "completion")
    queue.push(2, 1, "first")
    queue.push(5, 0, "second completion")
    popped = [queue.pop() for _ in range(4)]
    assert popped == [
        (2, "first"),
        (5, "completion"),
        (5, "second completion"),
        (5, "late arrival"),
    ]
    assert queue.now == 5 and queue.peek_time() is None
    with pytest.raises(ValueError, match="simulation is at 5"):
        queue.push(4, 0, "the past")
    with pytest.raises(ValueError, match="cannot go back"):
        queue.advance(3)


def test_tasks_run_for_their_runtime_and_free_their_slot() -> None:
    sim, lives = simulate(
        [machine("m0"), arrival(1, 0, 3 * S), arrival(2, 1 * S, 2 * S), arrival(3, 2 * S, None)]
    )
    # One slot: 1 runs 0-3 s, then 2 (which waited longest) 3-5 s, then the service 3 for ever.
    assert lives == {
        1: (0, 3 * S, "completed"),
        2: (3 * S, 5 * S, "completed"),
        3: (5 * S, None, "running"),
    }
    assert sim.result.tasks[2].placement_latency == 2 * S
    assert sim.result.end_time == 5 * S
    assert sim.scheduler.state.tasks[3].state is TaskState.RUNNING


def test_an_evicted_task_runs_its_whole_runtime_again() -> None:
    sim, _ = simulate(
        [
            machine("m0"),
            machine("m1", time=0),
            arrival(1, 0, 4 * S),
            arrival(2, 0, 4 * S),
            MachineFailed(time=1 * S, machine_id="m0"),
            machine("m2", time=2 * S),
        ]
    )
    evicted = next(t for t in sim.result.tasks.values() if t.evictions)
    other = next(t for t in sim.result.tasks.values() if not t.evictions)
    assert (evicted.first_start, evicted.last_start, evicted.finish_time) == (0, 2 * S, 6 * S)
    assert (other.first_start, other.finish_time) == (0, 4 * S)
    assert evicted.placements == 2 and evicted.machine_id == "m2"


def test_rounds_take_their_accounted_time_and_what_arrives_meanwhile_waits() -> None:
    sim, _ = simulate(
        [machine("m0", slots=4), arrival(1, 0, S), arrival(2, 1, S)],
        accounting=Accounting.ROUND,
    )
    first, *rest = sim.result.rounds
    assert first.start == 0 and first.duration > 0
    assert first.placed == 1  # task 2 arrived while the first round ran
    task1, task2 = sim.result.tasks[1], sim.result.tasks[2]
    assert task1.first_start == first.duration
    assert task2.first_start is not None and task2.first_start >= first.duration
    assert rest and rest[0].start == first.start + first.duration


def test_a_kill_at_the_same_instant_comes_before_the_round() -> None:
    _, lives = simulate([machine("m0"), arrival(1, 0, S), TaskRemoved(time=0, task_id=1)])
    assert lives == {1: (None, 0, "removed")}


def test_a_kill_during_a_round_skips_its_placement() -> None:
    # Under Accounting.ROUND the first round takes its real duration (far more than 1 µs), so
    # the kill at 1 µs arrives while it runs: the decision to place task 1 is skipped.
    sim, lives = simulate(
        [machine("m0"), arrival(1, 0, S), TaskRemoved(time=1, task_id=1)],
        accounting=Accounting.ROUND,
    )
    assert sim.result.rounds[0].skipped == 1 and sim.result.rounds[0].placed == 0
    assert lives == {1: (None, 1, "removed")}


def test_waiting_tasks_get_periodic_rounds_until_the_end() -> None:
    sim, lives = simulate(
        [machine("m0"), arrival(1, 0, None), arrival(2, S, 5 * S)],
        end_time=10 * S,
        round_interval=2 * S,
    )
    # Rounds for the two arrivals, then every 2 s while task 2 waits, up to the end.
    assert [r.start for r in sim.result.rounds] == [0, S, 3 * S, 5 * S, 7 * S, 9 * S]
    assert lives[2][0] is None  # task 1 never ends, so task 2 never runs
    assert sim.result.end_time == 10 * S  # the simulation ran to its end, events or not


@pytest.mark.parametrize("accounting", [Accounting.NONE, Accounting.ROUND])
def test_bad_workload_items_are_counted_not_applied(accounting: Accounting) -> None:
    # Under Accounting.ROUND the duplicate at 1 µs arrives during the first round (queued).
    sim, lives = simulate(
        [
            machine("m0"),
            machine("m0"),
            arrival(1, 0, S),
            arrival(1, 1, 5 * S),
            TaskRemoved(time=S, task_id=7),
        ],
        accounting=accounting,
    )
    assert sim.result.rejected_events == 3
    assert "already exists" in sim.result.rejections[0]
    assert "task 1 already exists" in sim.result.rejections[1]
    assert "unknown task 7" in sim.result.rejections[2]
    assert list(lives) == [1] and lives[1][2] == "completed"
    assert sim.result.tasks[1].runtime == S


def test_workloads_out_of_time_order_are_refused() -> None:
    with pytest.raises(WorkloadError, match="earlier than the item before it"):
        simulate([machine("m0", time=5), arrival(1, 1, S)])
    with pytest.raises(WorkloadError, match="runtime must be a non-negative int"):
        arrival(1, 0, -1)


def test_bad_configurations_are_named() -> None:
    with pytest.raises(ValueError, match="round_interval"):
        SimulationConfig(round_interval=-1)
    with pytest.raises(ValueError, match="max_rounds"):
        SimulationConfig(max_rounds=0)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    machines=st.integers(1, 4),
    tasks=st.lists(
        st.tuples(st.integers(0, 20), st.one_of(st.none(), st.integers(0, 10))), max_size=25
    ),
    failures=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 20)), max_size=3),
)
def test_random_workloads_keep_every_task_accounted_for(
    machines: int, tasks: list[tuple[int, int | None]], failures: list[tuple[int, int]]
) -> None:
    items: list[WorkloadItem] = [machine(f"m{i}", slots=2) for i in range(machines)]
    items += [
        arrival(i, at * S, None if run is None else run * S, job=f"j{i % 3}")
        for i, (at, run) in enumerate(tasks)
    ]
    items += [MachineFailed(time=at * S, machine_id=f"m{m}") for m, at in failures if m < machines]
    items.sort(key=lambda item: (item.time, not isinstance(item, MachineAdded)))
    # A machine fails once: later failures of the same machine are bad items, counted.
    sim, lives = simulate(items, end_time=60 * S)
    assert len(lives) == len(tasks)
    for task_id, (start, finish, state) in lives.items():
        runtime = sim.result.tasks[task_id].runtime
        if state == "completed":
            assert start is not None and finish is not None and runtime is not None
            assert finish - (sim.result.tasks[task_id].last_start or 0) == runtime
        assert state == sim.scheduler.state.tasks[task_id].state.value
