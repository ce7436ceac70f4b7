"""Tests of the binpack policy: its hooks on a hand-built cluster (PolicyManager, ClusterState
and a statistics pass), then its hallmark end to end, through firmament-py's scheduler, on small
fixture clusters: a round's tasks fill machines in packing order, so N tasks on an idle cluster
of S-slot machines use ceil(N / S) machines, and no task wakes an idle machine while a busy one
has room."""

from __future__ import annotations

import functools
import math
import random
from collections.abc import Iterator, Sequence

import pytest
from firmament_py.model import (
    ClusterEvent,
    ClusterState,
    LabelSelector,
    MachineAdded,
    MachineFailed,
    Resources,
    TaskCompleted,
    TaskState,
    TaskSubmitted,
)
from firmament_py.scheduler import DeltaKind, RoundResult, Scheduler
from firmament_py.sdk import (
    PolicyManager,
    ResourceRef,
    ResourceStats,
    available_policies,
    load_policy,
)

from firmament_binpack import PACK_CLASS, BinPackPolicy, pack_class

SECOND = 1_000_000
GPU = (LabelSelector.equals("gpu", "true"),)


def machine(name: str, *, slots: int = 4, time: int = 0, **labels: str) -> MachineAdded:
    return MachineAdded(
        time=time,
        machine_id=name,
        capacity=Resources(cpu_millicores=1000 * slots),
        slots=slots,
        labels=labels,
    )


def submit(
    first: int,
    count: int,
    *,
    time: int = 0,
    job: str = "job",
    selectors: tuple[LabelSelector, ...] = (),
) -> list[TaskSubmitted]:
    return [
        TaskSubmitted(time=time, task_id=t, job_id=job, selectors=selectors)
        for t in range(first, first + count)
    ]


@pytest.fixture
def binpack() -> Iterator[Scheduler]:
    with Scheduler(policy=BinPackPolicy()) as scheduler:
        yield scheduler


def feed(scheduler: Scheduler, events: Sequence[ClusterEvent]) -> None:
    for event in events:
        scheduler.handle(event)


def running(scheduler: Scheduler) -> dict[str, int]:
    """Tasks running on each live machine, in the order machines joined."""
    return {m.machine_id: len(m.running_task_ids) for m in scheduler.state.machines.values()}


def settle(scheduler: Scheduler, time: int | None = None) -> list[RoundResult]:
    results = scheduler.run_until_quiet(time)
    for result in results:
        assert not result.refused and not result.task_errors
        assert result.count(DeltaKind.PREEMPT) == result.count(DeltaKind.MIGRATE) == 0
    scheduler.state.validate()
    return results


# ---------------------------------------------------------------------- installation


def test_installed_as_the_binpack_policy() -> None:
    assert "binpack" in available_policies()
    manager = load_policy("binpack")
    assert manager.name == "binpack"
    assert manager.implemented_hooks == {
        "round_started",
        "task_equiv_classes",
        "equiv_class_preference_arcs",
        "equiv_class_to_resource",
    }
    assert manager.preemption_enabled is False


# ---------------------------------------------------------------------- hooks


def test_hooks_rank_busy_machines_fullest_first_then_idle_ones_largest_first() -> None:
    manager = PolicyManager(BinPackPolicy(), name="binpack")
    state = ClusterState()
    events: list[ClusterEvent] = [
        machine("idle-small", slots=2),
        machine("busy-roomy", slots=8),
        machine("idle-big", slots=8),
        machine("idle-big-2", slots=8),
        machine("busy-tight", slots=4),
        machine("full", slots=1),
        machine("busy-tight-2", slots=4),
        *submit(1, 7),
    ]
    for event in events:
        state.apply(event)
    for task_id, machine_id in [
        (1, "busy-roomy"),
        (2, "busy-tight"),
        (3, "busy-tight"),
        (4, "full"),
        (5, "busy-tight-2"),
        (6, "busy-tight-2"),
    ]:
        state.place(task_id, machine_id, time=0)
    stats: dict[ResourceRef, ResourceStats] = {}
    cluster = manager.cluster_view(state, stats)
    stats.update(manager.statistics_pass(cluster))

    waiting = cluster.task(7)
    assert manager.task_equiv_classes(task=waiting, cluster=cluster) == (PACK_CLASS,)
    arcs = manager.equiv_class_preference_arcs(equiv_class=PACK_CLASS, cluster=cluster)
    # Busy before idle; busy ones fewest free slots first, idle ones most slots first; then
    # the join order. "full" has no room.
    expected = ["busy-tight", "busy-tight-2", "busy-roomy", "idle-big", "idle-big-2", "idle-small"]
    assert arcs == tuple(ResourceRef.machine(m) for m in expected)
    for rank, ref in enumerate(arcs):
        descriptor = manager.equiv_class_to_resource(
            equiv_class=PACK_CLASS, resource=cluster.resource(ref), cluster=cluster
        )
        assert (descriptor.cost, descriptor.capacity, descriptor.min_flow) == (
            rank,
            stats[ref].free_slots,
            0,
        )


def test_tasks_with_selectors_get_a_pack_class_that_reaches_only_matching_machines() -> None:
    manager = PolicyManager(BinPackPolicy(), name="binpack")
    state = ClusterState()
    for event in [machine("m0"), machine("g0", gpu="true"), machine("g1", gpu="true")]:
        state.apply(event)
    state.apply(submit(1, 1, selectors=GPU)[0])
    stats: dict[ResourceRef, ResourceStats] = {}
    cluster = manager.cluster_view(state, stats)
    stats.update(manager.statistics_pass(cluster))
    (equiv_class,) = manager.task_equiv_classes(task=cluster.task(1), cluster=cluster)
    assert equiv_class == pack_class(GPU) != PACK_CLASS
    arcs = manager.equiv_class_preference_arcs(equiv_class=equiv_class, cluster=cluster)
    assert arcs == (ResourceRef.machine("g0"), ResourceRef.machine("g1"))


# ---------------------------------------------------------------------- end to end


@pytest.mark.parametrize("tasks", [1, 3, 4, 5, 11, 16, 17, 24])
def test_tasks_arriving_together_use_ceil_n_over_s_machines(binpack: Scheduler, tasks: int) -> None:
    slots, machines = 4, 6
    feed(binpack, [machine(f"m{i}", slots=slots) for i in range(machines)])
    feed(binpack, submit(1, tasks))
    (first, *rest) = settle(binpack)
    assert first.count(DeltaKind.PLACE) == tasks
    assert [r.decided for r in rest] == [False]
    used = math.ceil(tasks / slots)
    # Idle machines tie on load, so they are taken in the order they joined.
    expected = [slots] * (tasks // slots) + ([tasks % slots] if tasks % slots else [])
    expected += [0] * (machines - used)
    assert list(running(binpack).values()) == expected


def test_more_tasks_than_slots_fill_every_machine_and_the_rest_wait(binpack: Scheduler) -> None:
    feed(binpack, [machine(f"m{i}", slots=4) for i in range(3)])
    feed(binpack, submit(1, 15))
    result = settle(binpack)[0]
    assert (result.running_tasks, result.waiting_tasks) == (12, 3)
    assert set(running(binpack).values()) == {4}


def test_new_tasks_go_to_the_busiest_machine_with_room_never_to_an_idle_one(
    binpack: Scheduler,
) -> None:
    feed(binpack, [machine(f"m{i}", slots=4) for i in range(4)])
    feed(binpack, submit(1, 10))
    settle(binpack)
    assert running(binpack) == {"m0": 4, "m1": 4, "m2": 2, "m3": 0}
    # Three of m0's tasks finish: m0 runs 1 (3 free), m2 runs 2 (2 free), m3 is idle.
    for task_id in list(binpack.state.machines["m0"].running_task_ids)[:3]:
        binpack.handle(TaskCompleted(time=SECOND, task_id=task_id))
    feed(binpack, submit(11, 1, time=SECOND))
    settle(binpack)
    assert running(binpack) == {"m0": 1, "m1": 4, "m2": 3, "m3": 0}  # the tightest busy one
    feed(binpack, submit(12, 3, time=2 * SECOND))
    settle(binpack)
    assert running(binpack) == {"m0": 3, "m1": 4, "m2": 4, "m3": 0}  # m2 filled, then m0
    feed(binpack, submit(15, 3, time=3 * SECOND))
    settle(binpack)
    assert running(binpack) == {"m0": 4, "m1": 4, "m2": 4, "m3": 2}  # only now m3 wakes


def test_tasks_arriving_together_wake_the_fewest_machines_of_mixed_sizes(
    binpack: Scheduler,
) -> None:
    sizes = {"a": 2, "b": 8, "c": 4, "d": 8, "e": 1}
    feed(binpack, [machine(name, slots=slots) for name, slots in sizes.items()])
    feed(binpack, submit(1, 13))
    settle(binpack)
    # The largest idle machines first: two have the 13 slots needed.
    assert running(binpack) == {"a": 0, "b": 8, "c": 0, "d": 5, "e": 0}


def test_busy_machines_come_first_the_fullest_first(binpack: Scheduler) -> None:
    feed(binpack, [machine("small", slots=2), machine("big", slots=8)])
    feed(binpack, submit(1, 1))
    settle(binpack)
    assert running(binpack) == {"small": 0, "big": 1}  # idle: the largest first
    feed(binpack, submit(2, 3, time=SECOND))
    settle(binpack)
    # big is busy: it takes them all, although idle small has fewer free slots.
    assert running(binpack) == {"small": 0, "big": 4}
    feed(binpack, [machine("tiny", slots=1, time=2 * SECOND), *submit(5, 5, time=2 * SECOND)])
    settle(binpack)
    # big fills (4 free); then idle ones, largest first: small before tiny.
    assert running(binpack) == {"small": 1, "big": 8, "tiny": 0}


def test_tasks_with_selectors_pack_onto_matching_machines_only(binpack: Scheduler) -> None:
    feed(binpack, [machine("m0"), machine("g0", gpu="true"), machine("m1")])
    feed(binpack, [machine("g1", gpu="true"), machine("g2", gpu="true")])
    feed(binpack, [*submit(1, 5, job="ml", selectors=GPU), *submit(6, 2, job="web")])
    settle(binpack)
    assert running(binpack) == {"m0": 2, "g0": 4, "m1": 0, "g1": 1, "g2": 0}


def test_a_failed_machines_tasks_are_packed_again(binpack: Scheduler) -> None:
    feed(binpack, [machine(f"m{i}", slots=4) for i in range(3)])
    feed(binpack, submit(1, 6))
    settle(binpack)
    assert running(binpack) == {"m0": 4, "m1": 2, "m2": 0}
    binpack.handle(MachineFailed(time=SECOND, machine_id="m0"))
    settle(binpack)
    # Four re-queued tasks: two fill m1 (busy), then idle m2 takes the other two.
    assert running(binpack) == {"m1": 4, "m2": 2}
    assert all(t.state is TaskState.RUNNING for t in binpack.state.tasks.values())


def packing_key(load: dict[str, tuple[int, int]], machine_id: str) -> tuple[bool, int]:
    """The packing order, from (running tasks, slots) per machine: busy machines, fewest free
    slots first, then idle ones, most slots first. sorted() is stable, so machines with equal
    keys stay in the order they joined."""
    running_tasks, slots = load[machine_id]
    idle = running_tasks == 0
    return (idle, -slots if idle else slots - running_tasks)


# The policy gives each round one optimal placement (its ranks are distinct), so every solver
# must find the same one: the scheduler's default, incremental cost scaling, and relaxation.
SOLVERS = ["cost-scaling", "relaxation"]


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("seed", range(6))
def test_every_round_fills_machines_in_packing_order_under_churn(seed: int, solver: str) -> None:
    """Random arrivals, completions, machine joins and failures; after every round, a machine
    that received tasks has every machine before it in the round's packing order full."""
    rng = random.Random(seed)
    next_task, next_machine, time = 1, 0, 0
    with Scheduler(policy=BinPackPolicy(), solver=solver) as scheduler:
        for _ in range(rng.randint(3, 6)):
            scheduler.handle(machine(f"m{next_machine}", slots=rng.randint(1, 6)))
            next_machine += 1
        for _ in range(12):
            time += SECOND
            running_ids = [
                t.task_id for t in scheduler.state.tasks.values() if t.state is TaskState.RUNNING
            ]
            for task_id in rng.sample(running_ids, k=len(running_ids) // 3):
                scheduler.handle(TaskCompleted(time=time, task_id=task_id))
            if rng.random() < 0.2 and len(scheduler.state.machines) > 1:
                victim = rng.choice(list(scheduler.state.machines))
                scheduler.handle(MachineFailed(time=time, machine_id=victim))
            if rng.random() < 0.3:
                scheduler.handle(machine(f"m{next_machine}", slots=rng.randint(1, 6), time=time))
                next_machine += 1
            arrivals = rng.randint(0, 12)
            feed(scheduler, submit(next_task, arrivals, time=time, job=f"j{next_task}"))
            next_task += arrivals

            before = {
                m.machine_id: (len(m.running_task_ids), m.slots)
                for m in scheduler.state.machines.values()
            }
            candidates = [m for m, (run, slots) in before.items() if slots > run]
            order = sorted(candidates, key=functools.partial(packing_key, before))
            result = scheduler.run_round(time)
            assert not result.refused and not result.task_errors
            placed: dict[str, int] = {}
            for delta in result.deltas:
                assert delta.kind is DeltaKind.PLACE and delta.to_machine is not None
                placed[delta.to_machine] = placed.get(delta.to_machine, 0) + 1
            after = running(scheduler)
            for position, machine_id in enumerate(order):
                if placed.get(machine_id):
                    for earlier in order[:position]:
                        assert after[earlier] == before[earlier][1], (earlier, machine_id, order)
            if result.waiting_tasks:
                assert all(after[m] == before[m][1] for m in order)
            scheduler.state.validate()
