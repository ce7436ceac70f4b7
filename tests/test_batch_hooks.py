"""The batch hooks as the scheduler asks them: only what changed is asked, timed costs move
without a question, answers that hold one round are asked again, the topology rebuilds only
what depends on it, and every bad value is named and leaves out only the task it is about."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import numpy as np
import pytest

from firmament_py.model import (
    MachineAdded,
    MachineRemoved,
    MachineUpdated,
    Resources,
    TaskSubmitted,
)
from firmament_py.scheduler import ArcType, Scheduler
from firmament_py.sdk import (
    CLUSTER_AGGREGATOR,
    MAX_COST,
    UNSCHEDULED_COST,
    ArcColumns,
    ArcDescriptor,
    Clock,
    ClusterView,
    EquivClassId,
    JobBatch,
    PolicyError,
    ResourceArcs,
    ResourceColumns,
    ResourceRef,
    StatsColumns,
    TaskArcs,
    TaskBatch,
    TaskView,
    TimedArcs,
    Topology,
    hookimpl,
)

SECOND = 1_000_000


def machine(name: str, *, slots: int = 4, time: int = 0, rack: str = "r0") -> MachineAdded:
    return MachineAdded(time=time, machine_id=name, capacity=Resources(), slots=slots, rack_id=rack)


def submit(task_id: int, time: int = 0) -> TaskSubmitted:
    return TaskSubmitted(time=time, task_id=task_id, job_id=f"j{task_id % 2}")


@pytest.fixture
def schedulers() -> Iterator[list[Scheduler]]:
    made: list[Scheduler] = []
    yield made
    for scheduler in made:
        scheduler.close()


def scheduler_for(policy: object, schedulers: list[Scheduler], machines: int = 2) -> Scheduler:
    scheduler = Scheduler(policy, solver="cost-scaling")
    schedulers.append(scheduler)
    for index in range(machines):
        scheduler.handle(machine(f"m{index}"))
    return scheduler


class Counting:
    """Counts the tasks each task batch hook is asked about, and answers as the defaults."""

    def __init__(self) -> None:
        self.asked: Counter[str] = Counter()
        self.tasks: dict[str, list[int]] = {}

    def _note(self, hook: str, tasks: TaskBatch) -> None:
        self.asked[hook] += 1
        self.tasks.setdefault(hook, []).extend(tasks.task_ids.tolist())

    @hookimpl
    def task_to_unscheduled_batch(self, tasks: TaskBatch) -> None:
        self._note("task_to_unscheduled_batch", tasks)

    @hookimpl
    def task_to_equiv_classes_batch(self, tasks: TaskBatch) -> None:
        self._note("task_to_equiv_classes_batch", tasks)


def unscheduled_arc_cost(scheduler: Scheduler, task_id: int) -> int:
    manager = scheduler.graph_manager
    node, job = manager.task_node(task_id), manager.job_node(f"j{task_id % 2}")
    assert node is not None and job is not None
    (arc,) = manager.graph.find_arcs(node, job)
    return manager.graph.arc_cost(arc)


# ---------------------------------------------------------------------- asking only what changed


def test_a_task_that_did_not_change_costs_no_question_and_its_waiting_cost_still_grows(
    schedulers: list[Scheduler],
) -> None:
    policy = Counting()
    scheduler = scheduler_for(policy, schedulers, machines=1)
    for task_id in range(6):  # 4 slots: two wait
        scheduler.handle(submit(task_id))
    scheduler.run_round(0)
    asked_first = dict(policy.tasks)
    waiting = sorted(scheduler.state.waiting_task_ids)
    assert len(waiting) == 2
    costs = []
    for second in (1, 2, 3):
        scheduler.run_round(second * SECOND)
        costs.append(unscheduled_arc_cost(scheduler, waiting[0]))
    # Nothing changed: no task was asked about again ...
    assert policy.tasks == asked_first
    # ... and yet the waiting cost grew by the defaults' one unit per second waited.
    assert costs == [UNSCHEDULED_COST + 1, UNSCHEDULED_COST + 2, UNSCHEDULED_COST + 3]


def test_the_tasks_asked_about_are_those_that_changed(schedulers: list[Scheduler]) -> None:
    policy = Counting()
    scheduler = scheduler_for(policy, schedulers, machines=1)
    for task_id in range(3):
        scheduler.handle(submit(task_id))
    scheduler.run_round(0)  # all three placed: they changed
    policy.tasks.clear()
    scheduler.handle(submit(10, SECOND))
    scheduler.run_round(SECOND)
    assert policy.tasks["task_to_unscheduled_batch"] == [10]
    # Placing 10 changed it again: it is asked about, as a running task now.
    policy.tasks.clear()
    scheduler.run_round(2 * SECOND)
    assert policy.tasks == {}


class Redrawn:
    """A waiting cost that follows something else than time: it holds for one round."""

    def __init__(self) -> None:
        self.asked: list[list[int]] = []
        self.price = 7

    @hookimpl
    def task_to_unscheduled_batch(self, tasks: TaskBatch) -> TimedArcs:
        self.asked.append(tasks.task_ids.tolist())
        return TimedArcs(self.price, this_round_only=True)


def test_an_answer_for_one_round_is_asked_again_every_round(schedulers: list[Scheduler]) -> None:
    policy = Redrawn()
    scheduler = scheduler_for(policy, schedulers, machines=0)
    scheduler.handle(machine("m0", slots=1))
    for task_id in range(3):
        scheduler.handle(submit(task_id))
    scheduler.run_round(0)
    policy.asked.clear()
    policy.price = 9
    scheduler.run_round(SECOND)
    waiting = sorted(scheduler.state.waiting_task_ids)
    assert [sorted(asked) for asked in policy.asked] == [waiting]
    assert {unscheduled_arc_cost(scheduler, t) for t in waiting} == {9}


# ---------------------------------------------------------------------- the topology


class Dependent:
    """Tasks with an even id depend on the topology; their class arcs are the defaults'."""

    def __init__(self) -> None:
        self.asked: list[list[int]] = []

    @hookimpl
    def task_to_equiv_classes_batch(self, tasks: TaskBatch) -> TaskArcs[EquivClassId]:
        self.asked.append(tasks.task_ids.tolist())
        return TaskArcs.one_each(
            [CLUSTER_AGGREGATOR] * len(tasks), cost=2, depends_on_topology=tasks.task_ids % 2 == 0
        )


class PerItemShapes:
    """Answers a task's classes per item: promised a rebuild of every task on topology change."""

    def __init__(self) -> None:
        self.asked: list[int] = []

    @hookimpl
    def task_equiv_classes(self, task: TaskView) -> tuple[EquivClassId, ...]:
        self.asked.append(task.task_id)
        return (CLUSTER_AGGREGATOR,)


@pytest.mark.parametrize(
    "change",
    [
        machine("m9", time=SECOND),
        MachineRemoved(time=SECOND, machine_id="m1"),
        MachineUpdated(time=SECOND, machine_id="m0", labels={"new": "label"}),
    ],
)
def test_a_topology_change_rebuilds_only_the_tasks_that_depend_on_it(
    schedulers: list[Scheduler], change: object
) -> None:
    batch, per_item = Dependent(), PerItemShapes()
    for policy in (batch, per_item):
        scheduler = scheduler_for(policy, schedulers, machines=2)
        for task_id in range(20):  # 8 slots: 12 wait
            scheduler.handle(submit(task_id))
        scheduler.run_round(0)
    batch.asked.clear()
    per_item.asked.clear()
    for scheduler in schedulers:
        scheduler.handle(change)  # type: ignore[arg-type]
        scheduler.run_round(SECOND)
    # Batch: the waiting tasks that depend on the topology (running ones have no class arcs),
    # plus those the change itself touched (evicted from a machine that left).
    asked = sorted(t for batch_ids in batch.asked for t in batch_ids)
    waiting = set(schedulers[0].state.waiting_task_ids)
    assert asked and all(t % 2 == 0 or t in waiting for t in asked)
    assert {t for t in waiting if t % 2 == 0} <= set(asked)
    # Per item: every waiting task, as the per-item hooks were promised.
    assert set(per_item.asked) >= set(schedulers[1].state.waiting_task_ids)


# ---------------------------------------------------------------------- bad answers


class BadRow:
    """One bad value, in the row of task 3, of the answer `hook` names."""

    def __init__(self, hook: str) -> None:
        self.hook = hook

    @hookimpl
    def task_to_unscheduled_batch(self, tasks: TaskBatch) -> TimedArcs | None:
        if self.hook == "capacity":
            return TimedArcs(UNSCHEDULED_COST, capacity=np.where(tasks.task_ids == 3, 0, 1))
        if self.hook == "cost":
            return TimedArcs(np.where(tasks.task_ids == 3, MAX_COST + 1, 5))
        if self.hook == "shape":
            return TimedArcs(np.zeros(len(tasks) + 1, dtype=np.int64))
        if self.hook == "min_flow":  # with the class arc's, 2 units for task 3's one
            return TimedArcs(5, min_flow=(tasks.task_ids == 3).astype(np.int64))
        return None

    @hookimpl
    def task_to_equiv_classes_batch(self, tasks: TaskBatch) -> TaskArcs[object] | None:
        if self.hook == "target":
            targets: list[object] = [
                1.5 if t == 3 else CLUSTER_AGGREGATOR for t in tasks.task_ids.tolist()
            ]
            return TaskArcs.one_each(targets, cost=2)
        if self.hook == "duplicate":
            rows = [row for row in range(len(tasks)) for _ in range(1 + (tasks[row].task_id == 3))]
            return TaskArcs(rows, [CLUSTER_AGGREGATOR] * len(rows), cost=2)
        if self.hook == "min_flow":
            return TaskArcs.one_each(
                [CLUSTER_AGGREGATOR] * len(tasks),
                cost=2,
                min_flow=(tasks.task_ids == 3).astype(np.int64),
            )
        return None

    @hookimpl
    def task_to_resources_batch(self, tasks: TaskBatch) -> TaskArcs[ResourceRef] | None:
        if self.hook == "dead":
            rows = [row for row in range(len(tasks)) if tasks[row].task_id == 3]
            return TaskArcs(rows, [ResourceRef.machine("gone")] * len(rows))
        return None


@pytest.mark.parametrize(
    ("hook", "message"),
    [
        ("capacity", r"task_to_unscheduled_batch for task 3 returned capacity 0"),
        (
            "cost",
            r"task_to_unscheduled_batch\(tasks=TaskBatch.*row \d \(task 3\): cost \d+ exceeds",
        ),
        ("target", r"\(task 3\): arc \d: target 1.5 is not an equivalence class"),
        ("duplicate", r"\(task 3\): arc \d: a second arc to 'cluster-aggregator'"),
        ("min_flow", r"the arcs out of task 3 ask for min_flow 2 in total"),
        ("dead", r"\(task 3\): arc 0: target ResourceRef.machine\('gone'\) is not a live"),
    ],
)
def test_a_bad_row_leaves_out_only_its_task_and_names_it(
    schedulers: list[Scheduler], hook: str, message: str
) -> None:
    scheduler = scheduler_for(BadRow(hook), schedulers)
    for task_id in range(6):
        scheduler.handle(submit(task_id))
    result = scheduler.run_round(0)
    (error,) = result.task_errors
    assert error.policy == "BadRow"
    assert re_search(message, str(error)), str(error)
    assert sorted(d.task for d in result.deltas) == [0, 1, 2, 4, 5]
    assert scheduler.graph_manager.task_node(3) is None
    # Tried again next round (alone, now), and left out again.
    (again,) = scheduler.run_round(SECOND).task_errors
    assert re_search(message, str(again)), str(again)


def re_search(pattern: str, text: str) -> bool:
    import re

    return re.search(pattern, text) is not None


def test_an_answer_of_the_wrong_shape_leaves_out_every_task_it_is_about(
    schedulers: list[Scheduler],
) -> None:
    scheduler = scheduler_for(BadRow("shape"), schedulers)
    for task_id in range(3):
        scheduler.handle(submit(task_id))
    result = scheduler.run_round(0)
    assert sorted(int(str(e).split("task ")[-1].split()[0]) for e in result.task_errors) == [
        0,
        1,
        2,
    ]
    assert all("cost has 4 values for 3 rows" in str(e) for e in result.task_errors)
    assert not result.deltas


class RaisesForOne:
    """Raises whenever task 13 is in the batch: only task 13 is left out."""

    def __init__(self) -> None:
        self.calls = 0

    @hookimpl
    def task_to_equiv_classes_batch(self, tasks: TaskBatch) -> TaskArcs[EquivClassId]:
        self.calls += 1
        if 13 in tasks.task_ids.tolist():
            raise ValueError("cannot read task 13's label")
        return TaskArcs.one_each([CLUSTER_AGGREGATOR] * len(tasks), cost=2)


def test_a_batch_hook_that_raises_about_one_task_leaves_out_only_that_task(
    schedulers: list[Scheduler],
) -> None:
    policy = RaisesForOne()
    scheduler = scheduler_for(policy, schedulers, machines=8)
    for task_id in range(32):
        scheduler.handle(submit(task_id))
    result = scheduler.run_round(0)
    (error,) = result.task_errors
    assert "cannot read task 13's label" in str(error) and "task 13 is left out" in str(error)
    assert len(result.deltas) == 31
    assert policy.calls <= 2 * 6 + 1  # halves down to one task: a path, not every task


class BadClassArcs:
    @hookimpl
    def equiv_class_to_resources_batch(self, topology: Topology) -> ResourceArcs:
        return ResourceArcs.to_machines([0, len(topology.machines)], 0, 1)


class BadJobs:
    @hookimpl
    def unscheduled_to_sink_batch(self, jobs: JobBatch) -> ArcColumns:
        return ArcColumns(0, capacity=jobs.incoming_tasks - 1)


class BadStats:
    @hookimpl
    def machine_stats_batch(self, machines: ResourceColumns) -> StatsColumns:
        stats = machines.model
        return StatsColumns(
            machines=stats.machines,
            slots=stats.slots[:-1],
            running_tasks=stats.running_tasks,
            capacity=stats.capacity,
            reserved=stats.reserved,
            measured_usage=stats.measured_usage,
        )


@pytest.mark.parametrize(
    ("policy", "message"),
    [
        (BadClassArcs(), r"equiv_class_to_resources_batch\(.*row 1: row 2 is not a resource"),
        (BadJobs(), r"unscheduled_to_sink_batch\(.*row 0: job 'j0': capacity 0 is below the 1"),
        (BadStats(), r"machine_stats_batch\(.*slots must be an int64 array of 2 values"),
    ],
)
def test_a_bad_answer_about_classes_jobs_or_machines_fails_the_round_naming_it(
    schedulers: list[Scheduler], policy: object, message: str
) -> None:
    scheduler = scheduler_for(policy, schedulers)
    scheduler.handle(submit(0))
    with pytest.raises(PolicyError, match=message):
        scheduler.run_round(0)
    assert not scheduler.state.tasks[0].machine_id  # nothing applied


# ---------------------------------------------------------------------- timed costs


class Credit:
    """Running costs fall by 10 a second of the current run; waiting grows 3 a second."""

    @hookimpl
    def preemption_enabled(self) -> bool:
        return True

    @hookimpl
    def task_continuation_batch(self, tasks: TaskBatch) -> TimedArcs:
        return TimedArcs(100, per_second=-10, clock=Clock.THIS_RUN)

    @hookimpl
    def task_preemption_batch(self) -> TimedArcs:
        return TimedArcs(1000, per_second=3, clock=Clock.WAITED)


def test_timed_costs_follow_their_clocks(schedulers: list[Scheduler]) -> None:
    scheduler = scheduler_for(Credit(), schedulers, machines=1)
    scheduler.handle(submit(0))
    scheduler.run_round(2 * SECOND)  # waited 2 s, then placed
    manager = scheduler.graph_manager
    node = manager.task_node(0)
    assert node is not None
    graph = manager.graph
    for second, stay in ((3, 90), (5, 70), (12, 0)):
        scheduler.run_round(second * SECOND)
        kinds = {graph.arc_kind(a): graph.arc_cost(a) for a in graph.out_arcs(node)}
        assert kinds[ArcType.RUNNING] == stay  # 100 - 10 x seconds run
        assert kinds[ArcType.PREEMPTION] == 1000 + 3 * 2  # waiting stood still: 2 s


def test_timed_cost_drops_the_fraction_towards_zero_and_stays_within_the_limits() -> None:
    from firmament_py.sdk.columns import timed_cost, timed_costs

    cases = [
        (5, 3, 1_500_000),
        (5, -3, 1_500_000),
        (0, 7, 0),
        (MAX_COST, 1, 10**7),
        (-MAX_COST, -5, 10**13),
    ]
    expected = [5 + 4, 5 - 4, 0, MAX_COST, -MAX_COST]
    assert [timed_cost(*case) for case in cases] == expected
    base, rate, elapsed = (np.array(column, dtype=np.int64) for column in zip(*cases, strict=True))
    assert timed_costs(base, rate, elapsed).tolist() == expected
    # Enormous clocks do not overflow: they saturate.
    assert timed_cost(0, MAX_COST, 2**62) == MAX_COST


def test_a_policy_with_both_forms_is_asked_in_batch(schedulers: list[Scheduler]) -> None:
    class Both:
        def __init__(self) -> None:
            self.per_item = 0

        @hookimpl
        def task_to_unscheduled(self) -> ArcDescriptor:
            self.per_item += 1
            return ArcDescriptor(11)

        @hookimpl
        def task_to_unscheduled_batch(self) -> TimedArcs:
            return TimedArcs(11)

    policy = Both()
    scheduler = scheduler_for(policy, schedulers, machines=0)
    scheduler.handle(submit(0))
    scheduler.run_round(0)
    scheduler.run_round(SECOND)
    assert policy.per_item == 0 and unscheduled_arc_cost(scheduler, 0) == 11


def test_the_cluster_view_serves_the_batch_statistics_to_per_item_hooks(
    schedulers: list[Scheduler],
) -> None:
    class Halved:
        """Statistics in batch (half the slots), arcs per item reading them."""

        def __init__(self) -> None:
            self.seen: dict[str, int] = {}

        @hookimpl
        def machine_stats_batch(self, machines: ResourceColumns) -> StatsColumns:
            model = machines.model
            return StatsColumns(
                machines=model.machines.copy(),
                slots=model.slots // 2,
                running_tasks=model.running_tasks.copy(),
                capacity=model.capacity.copy(),
                reserved=model.reserved.copy(),
                measured_usage=model.measured_usage.copy(),
            )

        @hookimpl
        def equiv_class_to_resource(self, resource: object, cluster: ClusterView) -> None:
            ref = resource.ref  # type: ignore[attr-defined]
            self.seen[ref.id] = cluster.stats(ref).slots

    policy = Halved()
    scheduler = scheduler_for(policy, schedulers, machines=2)
    scheduler.handle(submit(0))
    scheduler.run_round(0)
    assert policy.seen == {"m0": 2, "m1": 2}


class Evicting:
    """Staying on m0 is not allowed (continuation capacity 0), with preemption or not, and the
    cluster aggregator reaches every machine but m0: a drained machine."""

    def __init__(self, preemption: bool) -> None:
        self.preemption = preemption

    @hookimpl
    def preemption_enabled(self) -> bool:
        return self.preemption

    @hookimpl
    def task_continuation_batch(self, tasks: TaskBatch) -> TimedArcs:
        on_m0 = np.array([machine == "m0" for machine in tasks.machine_ids], dtype=np.int64)
        return TimedArcs(0, capacity=1 - on_m0, min_flow=0)

    @hookimpl
    def equiv_class_to_resources_batch(self, topology: Topology) -> ResourceArcs:
        machines = topology.machines
        rows = np.array([row for row, m in enumerate(machines.ids) if m != "m0"], np.int64)
        return ResourceArcs.to_machines(rows, 0, machines.stats.slots[rows])


def test_a_continuation_of_capacity_0_drains_a_machine_with_preemption_only(
    schedulers: list[Scheduler],
) -> None:
    with_preemption = scheduler_for(Evicting(True), schedulers, machines=0)
    without = scheduler_for(Evicting(False), schedulers, machines=0)
    for scheduler in (with_preemption, without):
        scheduler.handle(machine("m0", slots=1))
        scheduler.handle(submit(0))
        scheduler.state.place(0, "m0", time=0)  # as if placed before the drain
        scheduler.graph_manager.mark_changed([0])
        scheduler.handle(machine("m1", slots=1, time=SECOND))
    moved = with_preemption.run_round(SECOND)
    assert [(d.task, d.to_machine) for d in moved.deltas] == [(0, "m1")] and not moved.task_errors
    refused = without.run_round(SECOND)
    (error,) = refused.task_errors
    assert "task_continuation_batch for task 0 returned capacity 0" in str(error)
    assert "only arc" in str(error) and not refused.deltas
