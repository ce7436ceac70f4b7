"""Tests of the trivial and random policies: their hooks' answers (Firmament's costs, the random
ranges, reproducibility from a seed) and what they schedule end to end."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from firmament_policies.random_policy import FIRMAMENT_MAX_ARC_COST, RandomPolicy
from firmament_policies.trivial import TRIVIAL_UNSCHEDULED_COST, TrivialPolicy
from firmament_py.model import (
    ClusterState,
    LabelSelector,
    MachineAdded,
    Resources,
    TaskCompleted,
    TaskState,
    TaskSubmitted,
)
from firmament_py.scheduler import DeltaKind, Scheduler
from firmament_py.sdk import (
    AGGREGATOR_COST,
    CLUSTER_AGGREGATOR,
    ArcDescriptor,
    ClusterView,
    PolicyManager,
    ResourceRef,
    ResourceStats,
    load_policy,
)

SECOND = 1_000_000
MACHINE = Resources(cpu_millicores=4000, ram_bytes=8 << 30)
TASK = Resources(cpu_millicores=500, ram_bytes=1 << 30)


def small_cluster(machines: int = 3, slots: int = 2, tasks: int = 4) -> ClusterState:
    """`machines` machines of `slots` slots in one rack, and `tasks` waiting tasks of job j."""
    state = ClusterState()
    for index in range(machines):
        state.apply(
            MachineAdded(
                time=0, machine_id=f"m{index}", capacity=MACHINE, slots=slots, rack_id="r1"
            )
        )
    for task_id in range(1, tasks + 1):
        state.apply(TaskSubmitted(time=SECOND, task_id=task_id, job_id="j", request=TASK))
    return state


class Harness:
    """A policy manager over a cluster state, with a completed statistics pass."""

    def __init__(self, manager: PolicyManager, state: ClusterState) -> None:
        self.manager = manager
        self.state = state
        self.stats: dict[ResourceRef, ResourceStats] = {}
        self.cluster: ClusterView = manager.cluster_view(state, self.stats)
        self.stats.update(manager.statistics_pass(self.cluster))

    def waiting_cost(self, task_id: int) -> ArcDescriptor:
        return self.manager.task_to_unscheduled(
            task=self.cluster.task(task_id), cluster=self.cluster
        )

    def class_cost(self, task_id: int) -> ArcDescriptor:
        return self.manager.task_to_equiv_class(
            task=self.cluster.task(task_id), equiv_class=CLUSTER_AGGREGATOR, cluster=self.cluster
        )

    def machine_cost(self, machine_id: str) -> ArcDescriptor:
        resource = self.cluster.resource(ResourceRef.machine(machine_id))
        return self.manager.equiv_class_to_resource(
            equiv_class=CLUSTER_AGGREGATOR, resource=resource, cluster=self.cluster
        )


def running_counts(scheduler: Scheduler) -> dict[str, int]:
    return {m: len(machine.running_task_ids) for m, machine in scheduler.state.machines.items()}


@pytest.fixture
def scheduler_factory() -> Iterator[list[Scheduler]]:
    """Schedulers made by a test, closed after it."""
    made: list[Scheduler] = []
    yield made
    for scheduler in made:
        scheduler.close()


# ---------------------------------------------------------------------- trivial


def test_trivial_has_firmaments_costs() -> None:
    harness = Harness(load_policy("trivial"), small_cluster())
    assert harness.manager.implemented_hooks == {"task_to_unscheduled", "task_to_unscheduled_batch"}
    assert harness.waiting_cost(1) == ArcDescriptor(TRIVIAL_UNSCHEDULED_COST) == ArcDescriptor(5)
    assert harness.manager.task_equiv_classes(
        task=harness.cluster.task(1), cluster=harness.cluster
    ) == (CLUSTER_AGGREGATOR,)
    assert harness.class_cost(1) == ArcDescriptor(AGGREGATOR_COST) == ArcDescriptor(2)
    assert harness.machine_cost("m0") == ArcDescriptor(0, capacity=2)
    # Waiting does not get dearer with time, as in Firmament.
    harness.state.advance_to(100 * SECOND)
    assert harness.waiting_cost(1).cost == 5


def test_trivial_fills_free_slots_and_the_rest_wait(scheduler_factory: list[Scheduler]) -> None:
    scheduler = Scheduler(policy=TrivialPolicy(), state=small_cluster(machines=2, tasks=5))
    scheduler_factory.append(scheduler)
    result = scheduler.run_round()
    assert result.count(DeltaKind.PLACE) == 4 and not result.refused
    assert sorted(running_counts(scheduler).values()) == [2, 2]
    waiting = [t for t in scheduler.state.tasks.values() if t.state is TaskState.RUNNABLE]
    assert len(waiting) == 1
    finished = next(iter(scheduler.state.machines["m0"].running_task_ids))
    scheduler.handle(TaskCompleted(time=2 * SECOND, task_id=finished))
    result = scheduler.run_round()
    assert [(d.task, d.to_machine) for d in result.deltas] == [(waiting[0].task_id, "m0")]


def test_trivial_respects_label_selectors(scheduler_factory: list[Scheduler]) -> None:
    state = small_cluster(machines=0, tasks=0)
    for machine_id, zone in [("a1", "a"), ("b1", "b"), ("a2", "a")]:
        state.apply(
            MachineAdded(
                time=0, machine_id=machine_id, capacity=MACHINE, slots=4, labels={"zone": zone}
            )
        )
    for task_id in range(1, 4):
        state.apply(
            TaskSubmitted(
                time=0, task_id=task_id, job_id="j", selectors=(LabelSelector.equals("zone", "b"),)
            )
        )
    scheduler = Scheduler(policy="trivial", state=state)
    scheduler_factory.append(scheduler)
    scheduler.run_until_quiet(max_rounds=5)
    assert running_counts(scheduler) == {"a1": 0, "b1": 3, "a2": 0}


# ---------------------------------------------------------------------- random


def every_answer(harness: Harness, *, backwards: bool = False) -> list[ArcDescriptor]:
    """The random policy's answer for every arc it prices, asked in a fixed order or the
    reverse, and listed in the fixed order."""
    questions: list[Callable[[], ArcDescriptor]] = []
    for task_id in harness.state.tasks:
        questions.append(partial(harness.waiting_cost, task_id))
        questions.append(partial(harness.class_cost, task_id))
    questions += [
        partial(harness.machine_cost, machine_id) for machine_id in harness.state.machines
    ]
    if backwards:
        return [ask() for ask in reversed(questions)][::-1]
    return [ask() for ask in questions]


def test_random_is_the_entry_point_with_seed_zero() -> None:
    from_entry_point = Harness(load_policy("random"), small_cluster())
    direct = Harness(PolicyManager(RandomPolicy(seed=0), name="random"), small_cluster())
    assert every_answer(from_entry_point) == every_answer(direct)
    assert from_entry_point.manager.implemented_hooks == {
        "task_to_unscheduled",
        "task_to_equiv_class",
        "equiv_class_to_resource",
        "task_to_unscheduled_batch",
        "task_to_equiv_classes_batch",
        "equiv_class_to_resources_batch",
    }


def test_random_costs_depend_on_the_seed_and_nothing_else() -> None:
    first = Harness(PolicyManager(RandomPolicy(seed=7), name="random"), small_cluster())
    again = Harness(PolicyManager(RandomPolicy(seed=7), name="random"), small_cluster())
    other = Harness(PolicyManager(RandomPolicy(seed=8), name="random"), small_cluster())
    answers = every_answer(first)
    assert every_answer(first) == answers  # asking again changes nothing
    assert every_answer(again) == answers
    assert every_answer(other) != answers
    reordered = Harness(PolicyManager(RandomPolicy(seed=7), name="random"), small_cluster())
    assert every_answer(reordered, backwards=True) == answers


def test_random_costs_are_drawn_afresh_when_time_moves() -> None:
    harness = Harness(PolicyManager(RandomPolicy(seed=3), name="random"), small_cluster())
    before = every_answer(harness)
    harness.state.advance_to(5 * SECOND)
    after = every_answer(harness)
    assert len(after) == len(before)
    assert sum(a != b for a, b in zip(after, before, strict=True)) > len(before) // 2


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(-(2**70), 2**70), top=st.integers(4, 5000), now=st.integers(0, 10**9))
def test_random_costs_stay_in_range_and_placing_beats_waiting(
    seed: int, top: int, now: int
) -> None:
    state = small_cluster(machines=3, tasks=3)
    state.advance_to(SECOND + now)
    harness = Harness(PolicyManager(RandomPolicy(seed, max_arc_cost=top), name="random"), state)
    dearest_path = 0
    for machine_id in state.machines:
        descriptor = harness.machine_cost(machine_id)
        assert 1 <= descriptor.cost <= top // 4
        assert descriptor.capacity == 2 and descriptor.min_flow == 0
        dearest_path = max(dearest_path, descriptor.cost)
    for task_id in state.tasks:
        to_class = harness.class_cost(task_id)
        waiting = harness.waiting_cost(task_id)
        assert 0 <= to_class.cost <= top // 4 - 1
        assert top // 2 + 1 <= waiting.cost <= top
        assert to_class.cost + dearest_path < waiting.cost


def test_random_rejects_bad_options() -> None:
    with pytest.raises(TypeError, match="seed"):
        RandomPolicy(seed="1")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="max_arc_cost"):
        RandomPolicy(max_arc_cost=10.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at least 4"):
        RandomPolicy(max_arc_cost=3)
    assert RandomPolicy().max_arc_cost == FIRMAMENT_MAX_ARC_COST == 1000


def random_schedule(seed: int, factory: list[Scheduler]) -> list[tuple[int, str | None]]:
    """Placements over three rounds, tasks arriving and finishing, under RandomPolicy(seed)."""
    scheduler = Scheduler(
        policy=PolicyManager(RandomPolicy(seed), name="random"),
        state=small_cluster(machines=6, slots=2, tasks=5),
    )
    factory.append(scheduler)
    placed = [(d.task, d.to_machine) for d in scheduler.run_round().deltas]
    scheduler.handle(TaskCompleted(time=2 * SECOND, task_id=placed[0][0]))
    for task_id in range(6, 12):
        scheduler.handle(TaskSubmitted(time=2 * SECOND, task_id=task_id, job_id="k", request=TASK))
    for time in (3 * SECOND, 4 * SECOND):
        result = scheduler.run_round(time)
        assert not result.refused
        placed += [(d.task, d.to_machine) for d in result.deltas]
    return placed


def test_random_schedules_are_reproducible(scheduler_factory: list[Scheduler]) -> None:
    schedules = {seed: random_schedule(seed, scheduler_factory) for seed in range(4)}
    for seed, schedule in schedules.items():
        # Every task is placed: 10 tasks in 12 slots, one finished.
        assert sorted(task for task, _ in schedule) == list(range(1, 12))
        assert random_schedule(seed, scheduler_factory) == schedule
    assert len({tuple(schedule) for schedule in schedules.values()}) > 1
