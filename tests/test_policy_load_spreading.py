"""Tests of the load-spreading policy: the class hierarchy its hooks describe (levels priced at
what a machine would run, only as many as the waiting tasks need) and its hallmark, end to end:
whenever a machine has a free slot, no machine runs more than one task more than it."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from firmament_policies.load_spreading import (
    SPREAD_CLASS,
    LoadSpreadingPolicy,
    MachineLoad,
    cheapest_cost_cap,
    level_class,
    spread_class,
)
from firmament_py.model import (
    ClusterState,
    LabelSelector,
    MachineAdded,
    Resources,
    TaskCompleted,
    TaskSubmitted,
)
from firmament_py.scheduler import Scheduler
from firmament_py.sdk import (
    MAX_CAPACITY,
    ArcDescriptor,
    EquivClassId,
    ResourceRef,
    load_policy,
    selector_class,
)
from firmament_py.sdk.testing import PolicyHarness

SECOND = 1_000_000
MACHINE = Resources(cpu_millicores=64_000, ram_bytes=256 << 30)
ZONE_B = LabelSelector.equals("zone", "b")


def cluster(slots: Sequence[int], *, zones: Sequence[str] = ()) -> ClusterState:
    """Machines m0, m1, ... with these slot counts (and zone labels, if given)."""
    state = ClusterState()
    for index, count in enumerate(slots):
        labels = {"zone": zones[index]} if zones else {}
        state.apply(
            MachineAdded(
                time=0, machine_id=f"m{index}", capacity=MACHINE, slots=count, labels=labels
            )
        )
    return state


def submit(
    state: ClusterState,
    first: int,
    count: int,
    *,
    time: int = 0,
    selectors: tuple[LabelSelector, ...] = (),
) -> None:
    """Tasks first, first + 1, ... of job j, waiting."""
    for task_id in range(first, first + count):
        state.apply(TaskSubmitted(time=time, task_id=task_id, job_id="j", selectors=selectors))


class Hooks(PolicyHarness):
    """The policy over a cluster state, in a round, with shortcuts to its answers."""

    def __init__(self, state: ClusterState) -> None:
        super().__init__(LoadSpreadingPolicy(), state, name="load-spreading")

    def levels(self, group: str) -> tuple[EquivClassId, ...]:
        return self.manager.equiv_class_to_equiv_class_arcs(equiv_class=group, cluster=self.cluster)

    def machines(self, equiv_class: EquivClassId) -> list[str]:
        refs = self.manager.equiv_class_preference_arcs(
            equiv_class=equiv_class, cluster=self.cluster
        )
        return [ref.id for ref in refs]

    def arc(self, equiv_class: EquivClassId, machine_id: str) -> ArcDescriptor:
        return self.manager.equiv_class_to_resource(
            equiv_class=equiv_class,
            resource=self.cluster.resource(ResourceRef.machine(machine_id)),
            cluster=self.cluster,
        )


# ---------------------------------------------------------------------- hooks


def test_levels_price_what_each_machine_would_run() -> None:
    state = cluster([4, 4])
    submit(state, 10, 1)
    state.place(10, "m0", time=0)
    submit(state, 1, 3)
    hooks = Hooks(state)
    task = hooks.cluster.task(1)
    assert hooks.manager.task_equiv_classes(task=task, cluster=hooks.cluster) == (SPREAD_CLASS,)
    assert hooks.manager.task_to_equiv_class(
        task=task, equiv_class=SPREAD_CLASS, cluster=hooks.cluster
    ) == ArcDescriptor(0)
    # Three tasks wait; the three cheapest arcs are m1 at 0, m0 at 1 and m1 at 1: two levels.
    assert hooks.levels(SPREAD_CLASS) == ("spread#0", "spread#1")
    assert hooks.manager.equiv_class_to_equiv_class(
        source=SPREAD_CLASS, target="spread#1", cluster=hooks.cluster
    ) == ArcDescriptor(0, capacity=MAX_CAPACITY)
    assert hooks.machines(SPREAD_CLASS) == []
    assert hooks.machines("spread#0") == ["m0", "m1"]
    assert hooks.machines("spread#1") == ["m1"]
    assert hooks.arc("spread#0", "m0") == ArcDescriptor(1, capacity=1)
    assert hooks.arc("spread#0", "m1") == ArcDescriptor(0, capacity=1)
    assert hooks.arc("spread#1", "m1") == ArcDescriptor(1, capacity=1)


def test_levels_go_only_as_deep_as_the_waiting_tasks_need() -> None:
    state = cluster([8] * 20)
    submit(state, 1, 5)
    hooks = Hooks(state)
    assert hooks.levels(SPREAD_CLASS) == (level_class(SPREAD_CLASS, 0),)
    assert len(hooks.machines("spread#0")) == 20
    submit(state, 6, 30)  # 35 tasks on 20 empty machines: two levels
    hooks = Hooks(state)
    assert hooks.levels(SPREAD_CLASS) == ("spread#0", "spread#1")
    assert len(hooks.machines("spread#1")) == 20
    submit(state, 36, 200)  # more than the 160 free slots: every slot, eight levels
    hooks = Hooks(state)
    assert len(hooks.levels(SPREAD_CLASS)) == 8
    assert hooks.arc("spread#7", "m3") == ArcDescriptor(7, capacity=1)


def test_levels_follow_the_statistics_of_each_round() -> None:
    state = cluster([1, 2])
    submit(state, 1, 3)
    hooks = Hooks(state)
    assert hooks.levels(SPREAD_CLASS) == ("spread#0", "spread#1")
    assert hooks.machines("spread#1") == ["m1"]
    state.place(1, "m1", time=0)
    state.place(2, "m1", time=0)
    # Until the next round the answers stay those of this round.
    assert hooks.machines("spread#1") == ["m1"]
    assert hooks.arc("spread#1", "m1") == ArcDescriptor(1, capacity=1)
    hooks.new_round()
    assert hooks.levels(SPREAD_CLASS) == ("spread#0",)
    assert hooks.machines("spread#0") == ["m0"]
    assert hooks.machines("spread#1") == []  # no longer a level: left to the defaults


def test_tasks_with_selectors_spread_over_matching_machines_only() -> None:
    state = cluster([2, 2, 2], zones=["a", "b", "b"])
    submit(state, 1, 2, selectors=(ZONE_B,))
    submit(state, 3, 1)
    hooks = Hooks(state)
    group = spread_class((ZONE_B,))
    assert group == f"spread|{selector_class((ZONE_B,))}" != SPREAD_CLASS
    task = hooks.cluster.task(1)
    assert hooks.manager.task_equiv_classes(task=task, cluster=hooks.cluster) == (group,)
    assert hooks.machines(level_class(group, 0)) == ["m1", "m2"]
    assert hooks.machines("spread#0") == ["m0", "m1", "m2"]


def test_an_unknown_class_is_left_to_the_defaults() -> None:
    hooks = Hooks(cluster([2]))
    assert hooks.levels("something-else") == ()
    assert hooks.machines("something-else") == []


def test_cheapest_cost_cap_edge_cases() -> None:
    loads = [
        MachineLoad(ResourceRef.machine("a"), 2, 3),
        MachineLoad(ResourceRef.machine("b"), 0, 1),
    ]
    assert cheapest_cost_cap(loads, 0) == -1
    assert cheapest_cost_cap([], 5) == -1
    assert cheapest_cost_cap(loads, 1) == 0
    assert cheapest_cost_cap(loads, 2) == 2
    assert cheapest_cost_cap(loads, 4) == cheapest_cost_cap(loads, 99) == 4


@settings(max_examples=60, deadline=None)
@given(
    loads=st.lists(st.tuples(st.integers(0, 6), st.integers(1, 6)), min_size=1, max_size=8),
    needed=st.integers(1, 60),
)
def test_cheapest_cost_cap_keeps_exactly_the_cheapest_arcs(
    loads: list[tuple[int, int]], needed: int
) -> None:
    machines = [MachineLoad(ResourceRef.machine(f"m{i}"), r, f) for i, (r, f) in enumerate(loads)]
    costs = sorted(running + level for running, free in loads for level in range(free))
    cap = cheapest_cost_cap(machines, needed)
    kept = [cost for cost in costs if cost <= cap]
    assert kept == costs[: len(kept)]
    assert len(kept) >= min(needed, len(costs))
    if needed < len(costs):
        assert costs[needed - 1] == cap  # no lower cap would keep enough


# ---------------------------------------------------------------------- end to end


@pytest.fixture
def schedulers() -> Iterator[list[Scheduler]]:
    made: list[Scheduler] = []
    yield made
    for scheduler in made:
        scheduler.close()


def loads(scheduler: Scheduler) -> dict[str, tuple[int, int]]:
    """Each machine's (running tasks, slots)."""
    return {
        machine_id: (len(machine.running_task_ids), machine.slots)
        for machine_id, machine in scheduler.state.machines.items()
    }


def assert_balanced(machines: dict[str, tuple[int, int]]) -> None:
    """The hallmark: while some machine has a free slot, no machine runs more than one task
    more than it."""
    open_loads = [running for running, slots in machines.values() if running < slots]
    if open_loads:
        busiest = max(running for running, _ in machines.values())
        assert busiest <= min(open_loads) + 1, machines


def test_the_entry_point_spreads_a_batch_in_one_round(schedulers: list[Scheduler]) -> None:
    state = cluster([4, 4, 4, 4])
    submit(state, 1, 10)
    scheduler = Scheduler(policy="load-spreading", state=state)
    schedulers.append(scheduler)
    result = scheduler.run_round()
    assert len(result.deltas) == 10 and not result.refused
    assert sorted(running for running, _ in loads(scheduler).values()) == [2, 2, 3, 3]


@settings(max_examples=25, deadline=None)
@given(
    slots=st.lists(st.integers(1, 5), min_size=1, max_size=6),
    tasks=st.integers(0, 30),
)
def test_hallmark_when_all_tasks_come_in_one_round(slots: list[int], tasks: int) -> None:
    state = cluster(slots)
    submit(state, 1, tasks)
    with Scheduler(policy=LoadSpreadingPolicy(), state=state) as scheduler:
        result = scheduler.run_round()
        assert not result.refused and not result.task_errors
        assert len(result.deltas) == min(tasks, sum(slots))
        assert_balanced(loads(scheduler))


@settings(max_examples=20, deadline=None)
@given(
    slots=st.lists(st.integers(1, 5), min_size=1, max_size=6),
    batches=st.lists(st.integers(0, 6), min_size=1, max_size=6),
)
def test_hallmark_over_many_rounds(slots: list[int], batches: list[int]) -> None:
    with Scheduler(policy=LoadSpreadingPolicy(), state=cluster(slots)) as scheduler:
        next_task = 1
        for round_number, batch in enumerate(batches, start=1):
            time = round_number * SECOND
            for task_id in range(next_task, next_task + batch):
                scheduler.handle(TaskSubmitted(time=time, task_id=task_id, job_id="j"))
            next_task += batch
            result = scheduler.run_round(time)
            assert not result.refused
            assert scheduler.state.runnable_tasks() == [] or all(
                running == capacity for running, capacity in loads(scheduler).values()
            )
            assert_balanced(loads(scheduler))


@settings(max_examples=25, deadline=None)
@given(
    start=st.lists(st.tuples(st.integers(0, 5), st.integers(1, 5)), min_size=1, max_size=6),
    tasks=st.integers(1, 25),
)
def test_each_task_goes_to_a_least_loaded_machine_from_any_start(
    start: list[tuple[int, int]], tasks: int
) -> None:
    """From an uneven start (tasks finished unevenly), a round's tasks fill the least loaded
    machines: a machine that got a task ran, before its last one, no more than any machine
    still left with a free slot."""
    state = cluster([max(running, slots) for running, slots in start])
    task_id = 1000
    for index, (running, _) in enumerate(start):
        for _ in range(running):
            submit(state, task_id, 1)
            state.place(task_id, f"m{index}", time=0)
            task_id += 1
    submit(state, 1, tasks, time=SECOND)
    before = {m: len(machine.running_task_ids) for m, machine in state.machines.items()}
    free = sum(machine.free_slots for machine in state.machines.values())
    with Scheduler(policy=LoadSpreadingPolicy(), state=state) as scheduler:
        result = scheduler.run_round()
        assert not result.refused
        assert len(result.deltas) == min(tasks, free)
        after = loads(scheduler)
        open_loads = [running for running, slots in after.values() if running < slots]
        for machine_id, (running, _) in after.items():
            if running > before[machine_id] and open_loads:
                assert running - 1 <= min(open_loads), (before, after)


def test_tasks_that_finish_make_room_that_is_refilled_evenly(schedulers: list[Scheduler]) -> None:
    state = cluster([3, 3, 3])
    submit(state, 1, 9)
    scheduler = Scheduler(policy="load-spreading", state=state)
    schedulers.append(scheduler)
    scheduler.run_round()
    for machine_id in ("m0", "m1"):
        for task_id in list(scheduler.state.machines[machine_id].running_task_ids)[:2]:
            scheduler.handle(TaskCompleted(time=SECOND, task_id=task_id))
    for task_id in range(10, 12):
        scheduler.handle(TaskSubmitted(time=SECOND, task_id=task_id, job_id="k"))
    scheduler.run_round()
    assert {m: running for m, (running, _) in loads(scheduler).items()} == {
        "m0": 2,
        "m1": 2,
        "m2": 3,
    }


def test_selector_tasks_balance_over_their_machines(schedulers: list[Scheduler]) -> None:
    state = cluster([4, 4, 4, 4], zones=["a", "b", "b", "b"])
    submit(state, 1, 7, selectors=(ZONE_B,))
    scheduler = Scheduler(policy=load_policy("load-spreading"), state=state)
    schedulers.append(scheduler)
    assert not scheduler.run_round().refused
    assert [running for running, _ in loads(scheduler).values()] in (
        [0, 3, 2, 2],
        [0, 2, 3, 2],
        [0, 2, 2, 3],
    )
