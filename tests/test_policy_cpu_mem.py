"""Tests of the cpu-mem policy: request classes with arcs only where a request fits, Kubernetes'
least-requested plus balanced-allocation costs, the per-machine batch limit, and its hallmark, end
to end: no round overcommits a machine's cpu or ram, however many tasks of however many requests
it places at once, and no task that fits somewhere is left waiting."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from firmament_policies.cpu_mem import (
    OMEGA,
    CpuMemPolicy,
    how_many_fit,
    placement_cost,
    request_class,
)
from firmament_py.model import (
    ClusterState,
    LabelSelector,
    MachineAdded,
    Resources,
    TaskState,
    TaskSubmitted,
)
from firmament_py.scheduler import Scheduler
from firmament_py.sdk import (
    ArcDescriptor,
    EquivClassId,
    ResourceStats,
    load_policy,
)
from firmament_py.sdk.testing import PolicyHarness

GIB = 1 << 30
ZONE_B = LabelSelector.equals("zone", "b")


def resources(cpu: int, ram_gib: int) -> Resources:
    return Resources(cpu_millicores=cpu, ram_bytes=ram_gib * GIB)


def add_machine(
    state: ClusterState, machine_id: str, cpu: int, ram_gib: int, slots: int, zone: str = "a"
) -> None:
    state.apply(
        MachineAdded(
            time=0,
            machine_id=machine_id,
            capacity=resources(cpu, ram_gib),
            slots=slots,
            labels={"zone": zone},
        )
    )


def submit(
    state: ClusterState,
    task_id: int,
    cpu: int,
    ram_gib: int,
    *,
    selectors: tuple[LabelSelector, ...] = (),
) -> None:
    state.apply(
        TaskSubmitted(
            time=0,
            task_id=task_id,
            job_id="j",
            request=resources(cpu, ram_gib),
            selectors=selectors,
        )
    )


def run(state: ClusterState, task_id: int, machine_id: str, cpu: int, ram_gib: int) -> None:
    """A task with this request, already running on `machine_id`."""
    submit(state, task_id, cpu, ram_gib)
    state.place(task_id, machine_id, time=0)


def machine_stats(cpu: int, ram_gib: int, *, used_cpu: int = 0, used_gib: int = 0) -> ResourceStats:
    return ResourceStats(
        machines=1,
        slots=8,
        capacity=resources(cpu, ram_gib),
        reserved=resources(used_cpu, used_gib),
    )


class Hooks(PolicyHarness):
    """The policy over a cluster state, in a round, with shortcuts to its answers."""

    def __init__(self, state: ClusterState) -> None:
        super().__init__(CpuMemPolicy(), state, name="cpu-mem")

    def task_class(self, task_id: int) -> EquivClassId:
        (equiv_class,) = self.manager.task_equiv_classes(
            task=self.cluster.task(task_id), cluster=self.cluster
        )
        return equiv_class

    def arcs(self, equiv_class: EquivClassId) -> dict[str, ArcDescriptor]:
        """A class's arcs to machines, by machine, as the per-item hooks give them."""
        refs = self.manager.equiv_class_preference_arcs(
            equiv_class=equiv_class, cluster=self.cluster
        )
        return {
            ref.id: self.manager.equiv_class_to_resource(
                equiv_class=equiv_class, resource=self.cluster.resource(ref), cluster=self.cluster
            )
            for ref in refs
        }


# ---------------------------------------------------------------------- hooks


def test_tasks_with_the_same_request_and_selectors_share_a_class() -> None:
    state = ClusterState()
    submit(state, 1, 1000, 2)
    submit(state, 2, 1000, 2)
    submit(state, 3, 1000, 3)
    submit(state, 4, 1000, 2, selectors=(ZONE_B,))
    hooks = Hooks(state)
    classes = [hooks.task_class(task_id) for task_id in (1, 2, 3, 4)]
    assert classes[0] == classes[1] == request_class(resources(1000, 2), ())
    assert len(set(classes)) == 3
    assert classes[0] == f"request:cpu_millicores=1000,ram_bytes={2 * GIB}"
    assert request_class(Resources(), ()) == "request:none"
    assert hooks.manager.task_to_equiv_class(
        task=hooks.cluster.task(1), equiv_class=classes[0], cluster=hooks.cluster
    ) == ArcDescriptor(0)


def test_a_request_class_reaches_only_machines_where_one_task_fits() -> None:
    state = ClusterState()
    add_machine(state, "big", 4000, 8, slots=4)
    add_machine(state, "small", 1000, 8, slots=4)  # too little cpu
    add_machine(state, "lean", 8000, 1, slots=4)  # too little ram
    add_machine(state, "full", 8000, 16, slots=1)  # no free slot
    add_machine(state, "busy", 4000, 8, slots=4)  # 1000m left
    add_machine(state, "zone-b", 4000, 8, slots=4, zone="b")
    run(state, 10, "full", 100, 1)
    run(state, 11, "busy", 3000, 1)
    submit(state, 1, 2000, 2)
    submit(state, 2, 2000, 2, selectors=(ZONE_B,))
    hooks = Hooks(state)
    assert list(hooks.arcs(hooks.task_class(1))) == ["big", "zone-b"]
    assert list(hooks.arcs(hooks.task_class(2))) == ["zone-b"]
    # One task waits in each class, so each is dealt one slot where it fits; on "big" it
    # costs a half of its cpu and a quarter of its ram: least requested (0.5 + 0.25) / 2,
    # balanced allocation |0.5 - 0.25|.
    assert hooks.arcs(hooks.task_class(1))["big"] == ArcDescriptor(625, capacity=1)
    # Both classes may use "zone-b", and both fit there together: each is dealt one.
    assert hooks.arcs(hooks.task_class(1))["zone-b"].capacity == 1
    assert hooks.arcs(hooks.task_class(2))["zone-b"].capacity == 1


def test_emptier_and_better_balanced_machines_are_cheaper() -> None:
    task = resources(500, 2)
    empty = machine_stats(4000, 8)
    half_busy = machine_stats(4000, 8, used_cpu=2000, used_gib=4)
    assert placement_cost(task, empty) < placement_cost(task, half_busy)
    # Same mean use after placing, but the ram-heavy task evens out the cpu-heavy machine.
    cpu_heavy = machine_stats(4000, 8, used_cpu=2000)
    ram_heavy = machine_stats(4000, 8, used_gib=4)
    assert placement_cost(task, cpu_heavy) == round(OMEGA * ((0.625 + 0.25) / 2 + 0.375))
    assert placement_cost(task, ram_heavy) == round(OMEGA * ((0.125 + 0.75) / 2 + 0.625))
    assert placement_cost(task, cpu_heavy) < placement_cost(task, ram_heavy)
    assert placement_cost(Resources(), machine_stats(0, 0)) == 0


def test_how_many_fit_counts_slots_and_every_dimension() -> None:
    stats = machine_stats(4000, 8, used_cpu=1000, used_gib=1)
    assert how_many_fit(resources(1000, 1), stats) == 3
    assert how_many_fit(resources(0, 2), stats) == 3  # 7 GiB left
    assert how_many_fit(Resources(), stats) == 8  # slots only
    assert how_many_fit(Resources(disk_bytes=1), stats) == 0  # no disk at all
    assert how_many_fit(resources(5000, 1), stats) == 0


def test_a_machine_is_dealt_out_among_the_requests_so_that_their_shares_fit_together() -> None:
    state = ClusterState()
    add_machine(state, "m", 4000, 8, slots=8)
    add_machine(state, "tiny", 600, 8, slots=8)
    submit(state, 1, 3000, 1)
    for task_id in range(2, 7):
        submit(state, task_id, 500, 1)
    hooks = Hooks(state)
    # Alone, each request would be let in as often as it fits: 1 + 5 tasks, 5500m on 4000m.
    # Dealt one task each in turn, largest first: 3000 + 500, then 500 more; then nothing
    # fits. The shares fit together, and the machine is full.
    large, small = hooks.arcs(hooks.task_class(1)), hooks.arcs(hooks.task_class(2))
    assert large["m"].capacity == 1 and small["m"].capacity == 2
    # Only the small request fits "tiny", once.
    assert "tiny" not in large and small["tiny"].capacity == 1


def test_the_entry_point_is_this_policy() -> None:
    manager = load_policy("cpu-mem")
    assert manager.implemented_hooks == {
        "round_started",
        "task_equiv_classes",
        "equiv_class_preference_arcs",
        "equiv_class_to_resource",
        "task_to_equiv_classes_batch",
        "equiv_class_to_resources_batch",
    }


# ---------------------------------------------------------------------- end to end


@pytest.fixture
def schedulers() -> Iterator[list[Scheduler]]:
    made: list[Scheduler] = []
    yield made
    for scheduler in made:
        scheduler.close()


def waiting_task_fits_somewhere(state: ClusterState) -> bool:
    return any(
        state.placement_problem(task.task_id, machine_id) is None
        for task in state.runnable_tasks()
        for machine_id in state.machines
    )


def test_a_task_goes_to_the_best_fitting_machine(schedulers: list[Scheduler]) -> None:
    state = ClusterState()
    add_machine(state, "cpu-heavy", 4000, 8, slots=4)
    add_machine(state, "ram-heavy", 4000, 8, slots=4)
    add_machine(state, "busy", 4000, 8, slots=4)
    run(state, 10, "cpu-heavy", 2000, 0)
    run(state, 11, "ram-heavy", 0, 4)
    run(state, 12, "busy", 3000, 4)
    submit(state, 1, 500, 2)
    scheduler = Scheduler(policy="cpu-mem", state=state)
    schedulers.append(scheduler)
    result = scheduler.run_round()
    assert [(d.task, d.to_machine) for d in result.deltas] == [(1, "cpu-heavy")]


def test_mixed_requests_in_one_round_never_overcommit(schedulers: list[Scheduler]) -> None:
    state = ClusterState()
    add_machine(state, "m", 4000, 8, slots=10)
    for task_id in (1, 2):
        submit(state, task_id, 2000, 1)
    for task_id in range(3, 7):
        submit(state, task_id, 1000, 1)
    scheduler = Scheduler(policy=CpuMemPolicy(), state=state)
    schedulers.append(scheduler)
    first = scheduler.run_round()
    # Dealt largest first: one 2000m task and two 1000m ones fill the machine in one round.
    assert len(first.deltas) == 3 and not first.refused
    rounds = scheduler.run_until_quiet(max_rounds=10)
    assert not any(result.refused for result in rounds)
    assert scheduler.state.machines["m"].reserved.cpu_millicores == 4000
    assert not waiting_task_fits_somewhere(scheduler.state)


@st.composite
def clusters(draw: st.DrawFn) -> ClusterState:
    """A few machines of random capacities and slots (zone a or b) and tasks of a few request
    shapes, some wanting zone b."""
    state = ClusterState()
    for index in range(draw(st.integers(1, 4))):
        add_machine(
            state,
            f"m{index}",
            cpu=draw(st.sampled_from([1000, 2000, 4000, 8000])),
            ram_gib=draw(st.integers(1, 16)),
            slots=draw(st.integers(1, 8)),
            zone=draw(st.sampled_from("ab")),
        )
    shape = st.tuples(st.integers(0, 4000), st.integers(0, 8), st.booleans())
    shapes: Sequence[tuple[int, int, bool]] = draw(st.lists(shape, min_size=1, max_size=3))
    for task_id in range(1, draw(st.integers(1, 24)) + 1):
        cpu, ram_gib, zone_b = draw(st.sampled_from(shapes))
        submit(state, task_id, cpu, ram_gib, selectors=(ZONE_B,) if zone_b else ())
    return state


@settings(max_examples=25, deadline=None)
@given(state=clusters())
def test_hallmark_no_round_overcommits_and_whatever_fits_is_placed(state: ClusterState) -> None:
    with Scheduler(policy=CpuMemPolicy(), state=state) as scheduler:
        rounds = scheduler.run_until_quiet(max_rounds=40)
        assert not rounds[-1].decided, "not quiet after 40 rounds"
        for result in rounds:
            assert not result.refused, result.refused
            assert not result.task_errors
        scheduler.state.validate()
        for machine in scheduler.state.machines.values():
            assert machine.reserved.fits_within(machine.capacity)
        assert not waiting_task_fits_somewhere(scheduler.state)
        running = [t for t in scheduler.state.tasks.values() if t.state is TaskState.RUNNING]
        assert len(running) == sum(len(result.deltas) for result in rounds)
