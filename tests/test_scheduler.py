"""Tests of the scheduling core: rounds end to end (events -> graph -> solver -> decisions ->
cluster state), PLACE / PREEMPT / MIGRATE, machine loss, refusals, events that arrive during a
round, policy failures, and the incrementally kept graph against one built from scratch."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from firmament_py.model import (
    ClusterError,
    ClusterEvent,
    LabelSelector,
    MachineAdded,
    MachineFailed,
    MachineRemoved,
    MachineUpdated,
    Resources,
    TaskCompleted,
    TaskFailed,
    TaskRemoved,
    TaskState,
    TaskSubmitted,
    TaskUpdated,
)
from firmament_py.scheduler import ArcType, DeltaKind, FlowGraphManager, Scheduler
from firmament_py.sdk import (
    ArcDescriptor,
    ClusterView,
    EquivClassId,
    MachineView,
    PolicyError,
    ResourceRef,
    ResourceView,
    TaskView,
    hookimpl,
)
from firmament_py.sdk.defaults import UNSCHEDULED_COST
from firmament_py.solvers.optimality import verify

SECOND = 1_000_000


class Plain:
    """No hooks: the built-in defaults alone (Firmament's trivial model)."""


class Preempting:
    """The defaults, with preemption."""

    @hookimpl
    def preemption_enabled(self) -> bool:
        return True


def machine(
    name: str, *, slots: int = 2, rack: str = "r0", time: int = 0, **labels: str
) -> MachineAdded:
    return MachineAdded(
        time=time,
        machine_id=name,
        capacity=Resources(cpu_millicores=8000),
        slots=slots,
        rack_id=rack,
        labels=labels,
    )


def task(task_id: int, job: str = "j", *, time: int = 0, cpu: int = 0, **kw: Any) -> TaskSubmitted:
    return TaskSubmitted(
        time=time, task_id=task_id, job_id=job, request=Resources(cpu_millicores=cpu), **kw
    )


def feed(scheduler: Scheduler, events: Sequence[ClusterEvent]) -> None:
    for event in events:
        scheduler.handle(event)


def running_on(scheduler: Scheduler) -> dict[int, str | None]:
    return {t.task_id: t.machine_id for t in scheduler.state.tasks.values()}


def check_consistent(scheduler: Scheduler) -> None:
    """The cluster's invariants, and the graph in step with it (but for the tasks that changed
    since the last update, which the next round's update takes in)."""
    scheduler.state.validate()
    manager = scheduler.graph_manager
    in_graph = set(manager.task_ids)
    live = {
        t.task_id
        for t in scheduler.state.tasks.values()
        if t.state in (TaskState.RUNNABLE, TaskState.RUNNING)
    }
    assert in_graph ^ live <= set(manager.changed_tasks)
    assert manager.graph.supply(manager.sink) == -len(in_graph)


# ---------------------------------------------------------------------- rounds


def test_a_round_places_what_fits_and_leaves_the_rest_waiting() -> None:
    with Scheduler(Plain()) as s:
        feed(s, [machine(f"m{i}", rack=f"r{i % 2}") for i in range(3)])
        feed(s, [task(t, f"j{t % 2}", time=SECOND) for t in range(8)])
        result = s.run_round()
        assert result.count(DeltaKind.PLACE) == 6
        assert (result.running_tasks, result.waiting_tasks) == (6, 2)
        assert not result.refused and not result.skipped
        # Oldest first: the defaults' waiting cost grows with waiting time, and ties go to the
        # earlier task node; here all waited equally, so any six will do, but none twice.
        placed = [d.task for d in result.deltas]
        assert len(set(placed)) == 6
        for m in s.state.machines.values():
            assert len(m.running_task_ids) == 2
        check_consistent(s)
        # Nothing changed: the next round decides nothing and sends the solver few changes.
        quiet = s.run_round(2 * SECOND)
        assert not quiet.decided
        check_consistent(s)


def test_finished_tasks_free_slots_for_waiting_ones() -> None:
    with Scheduler(Plain()) as s:
        feed(s, [machine("m0", slots=1), task(1), task(2), task(3)])
        first = s.run_round()
        (placed,) = first.deltas
        s.handle(TaskCompleted(time=SECOND, task_id=placed.task))
        second = s.run_round()
        assert second.count(DeltaKind.PLACE) == 1
        assert second.deltas[0].task != placed.task
        assert s.state.tasks[placed.task].state is TaskState.COMPLETED
        check_consistent(s)


@pytest.mark.parametrize("solver", ["cost-scaling", "relaxation", "ssp", "race"])
def test_machine_failure_requeues_its_tasks_and_they_are_placed_again(solver: str) -> None:
    with Scheduler(Plain(), solver=solver) as s:
        feed(s, [machine("m0"), task(1), task(2)])
        s.run_round()
        assert set(s.state.machines["m0"].running_task_ids) == {1, 2}
        transitions = s.handle(MachineFailed(time=SECOND, machine_id="m0"))
        assert transitions is not None
        assert {t.task_id for t in transitions} == {1, 2}
        assert all(s.state.tasks[t].state is TaskState.RUNNABLE for t in (1, 2))
        nothing = s.run_round()
        assert not nothing.deltas and nothing.waiting_tasks == 2
        check_consistent(s)
        s.handle(machine("m1", time=2 * SECOND))
        again = s.run_round()
        assert {(d.kind, d.task, d.to_machine) for d in again.deltas} == {
            (DeltaKind.PLACE, 1, "m1"),
            (DeltaKind.PLACE, 2, "m1"),
        }
        assert s.state.tasks[1].eviction_count == 1
        check_consistent(s)


def test_label_selectors_route_tasks_only_to_matching_machines() -> None:
    gpu = (LabelSelector.equals("gpu", "yes"),)
    with Scheduler(Plain()) as s:
        feed(s, [machine("cpu0"), machine("gpu0", gpu="yes")])
        feed(s, [task(t, selectors=gpu) for t in range(3)] + [task(9)])
        s.run_round()
        assert s.state.machines["gpu0"].running_task_ids.keys() <= {0, 1, 2}
        assert len(s.state.machines["gpu0"].running_task_ids) == 2
        assert s.state.tasks[9].machine_id == "cpu0"
        check_consistent(s)


def test_waiting_costs_are_priced_again_every_round() -> None:
    with Scheduler(Plain()) as s:
        feed(s, [task(1)])
        s.run_round()
        manager = s.graph_manager
        node = manager.task_node(1)
        assert node is not None

        def waiting_cost() -> int:
            (arc,) = [
                a
                for a in manager.graph.out_arcs(node)
                if manager.graph.arc_kind(a) == ArcType.UNSCHEDULED
            ]
            return manager.graph.arc_cost(arc)

        first = waiting_cost()
        s.run_round(10 * SECOND)
        assert waiting_cost() == first + 10
        with pytest.raises(ClusterError, match="before the cluster's current time"):
            s.run_round(5 * SECOND)


def test_requests_the_policy_ignores_are_refused_not_overcommitted() -> None:
    with Scheduler(Plain()) as s:
        feed(s, [machine("m0", slots=4), task(1, cpu=6000), task(2, cpu=6000)])
        result = s.run_round()
        assert result.count(DeltaKind.PLACE) == 1
        (refusal,) = result.refused
        assert refusal.decision.kind is DeltaKind.PLACE
        assert "requests more than machine 'm0' has free" in refusal.reason
        assert [t.state for t in s.state.tasks.values()].count(TaskState.RUNNABLE) == 1
        check_consistent(s)


# ---------------------------------------------------------------------- preemption and migration


class Priorities(Preempting):
    """Waiting and preemption are cheap for priority 0 and ruinous for priority 9."""

    @hookimpl
    def task_to_unscheduled(self, task: TaskView) -> ArcDescriptor:
        return ArcDescriptor(cost=10_000_000 if task.priority >= 9 else 1_000)

    @hookimpl
    def task_preemption(self, task: TaskView) -> ArcDescriptor:
        return ArcDescriptor(cost=10_000_000 if task.priority >= 9 else 100)


def test_preemption_makes_room_for_an_urgent_task() -> None:
    with Scheduler(Priorities()) as s:
        feed(s, [machine("m0", slots=1), task(1, "batch")])
        s.run_round()
        assert s.state.tasks[1].machine_id == "m0"
        s.handle(task(2, "urgent", time=SECOND, priority=9))
        result = s.run_round()
        kinds = {(d.kind, d.task) for d in result.deltas}
        assert kinds == {(DeltaKind.PREEMPT, 1), (DeltaKind.PLACE, 2)}
        assert s.state.tasks[1].state is TaskState.RUNNABLE
        assert s.state.tasks[1].eviction_count == 1
        assert s.state.tasks[2].machine_id == "m0"
        check_consistent(s)
        assert not s.run_round().decided


def test_without_preemption_running_tasks_stay_put() -> None:
    class Urgent:
        @hookimpl
        def task_to_unscheduled(self, task: TaskView) -> ArcDescriptor:
            return ArcDescriptor(cost=10_000_000 if task.priority >= 9 else 1_000)

    with Scheduler(Urgent()) as s:
        feed(s, [machine("m0", slots=1), task(1)])
        s.run_round()
        s.handle(task(2, time=SECOND, priority=9))
        assert not s.run_round().decided
        assert s.state.tasks[1].machine_id == "m0"


class PreferLabelled(Preempting):
    """Each task prefers the machine named in its `want` label (cost 0); anything else costs
    50 through the cluster aggregator, and staying on a machine it does not want costs 49:
    moving pays only to reach the wanted machine, and ties never make a task move."""

    @hookimpl
    def task_preference_arcs(self, task: TaskView, cluster: ClusterView) -> Sequence[ResourceRef]:
        want = task.labels.get("want")
        if want is None or want not in cluster.machines:
            return []
        return [ResourceRef.machine(want)]

    @hookimpl
    def task_to_resource(self) -> ArcDescriptor:
        return ArcDescriptor(cost=0)

    @hookimpl
    def task_to_equiv_class(self) -> ArcDescriptor:
        return ArcDescriptor(cost=50)

    @hookimpl
    def task_continuation(self, task: TaskView, machine: MachineView) -> ArcDescriptor:
        return ArcDescriptor(cost=0 if task.labels.get("want") == machine.machine_id else 49)


def test_a_better_machine_joining_migrates_a_running_task() -> None:
    with Scheduler(PreferLabelled()) as s:
        feed(s, [machine("m0"), task(1, labels={"want": "m1"})])
        s.run_round()
        assert s.state.tasks[1].machine_id == "m0"
        s.handle(machine("m1", time=SECOND))
        result = s.run_round()
        (move,) = result.deltas
        assert (move.kind, move.from_machine, move.to_machine) == (DeltaKind.MIGRATE, "m0", "m1")
        assert s.state.tasks[1].machine_id == "m1"
        assert s.state.tasks[1].eviction_count == 0
        check_consistent(s)


def test_tasks_trade_places_between_full_machines() -> None:
    with Scheduler(PreferLabelled()) as s:
        feed(s, [machine("a", slots=1), task(1, labels={"want": "a"})])
        s.run_round()
        feed(s, [machine("b", slots=1, time=SECOND), task(2, time=SECOND, labels={"want": "b"})])
        s.run_round()
        assert (s.state.tasks[1].machine_id, s.state.tasks[2].machine_id) == ("a", "b")
        # Both now want the other's machine: only a simultaneous move can satisfy them.
        s.handle(TaskUpdated(time=2 * SECOND, task_id=1, labels={"want": "b"}))
        s.handle(TaskUpdated(time=2 * SECOND, task_id=2, labels={"want": "a"}))
        result = s.run_round()
        assert {(d.kind, d.task, d.to_machine) for d in result.deltas} == {
            (DeltaKind.MIGRATE, 1, "b"),
            (DeltaKind.MIGRATE, 2, "a"),
        }
        assert not result.refused
        check_consistent(s)


# ---------------------------------------------------------------------- events during a round


def inject_during_solve(scheduler: Scheduler, events: Sequence[ClusterEvent]) -> None:
    """Make the next solve deliver `events` through `handle` while the round runs (as the
    daemon's threads would)."""
    solve_graph = scheduler.solver.solve_graph

    def solve_and_inject(graph: Any) -> Any:
        result = solve_graph(graph)
        for event in events:
            assert scheduler.handle(event) is None  # queued, not applied
        scheduler.solver.solve_graph = solve_graph  # type: ignore[method-assign]
        return result

    scheduler.solver.solve_graph = solve_and_inject  # type: ignore[method-assign]


def test_events_during_a_round_are_queued_and_moot_decisions_skipped() -> None:
    with Scheduler(Plain()) as s:
        feed(s, [machine("m0", slots=1), machine("m1", slots=1), task(1), task(2)])
        inject_during_solve(
            s,
            [
                TaskRemoved(time=SECOND, task_id=1),
                MachineRemoved(time=SECOND, machine_id="m0"),
                MachineRemoved(time=SECOND, machine_id="m1"),
                TaskCompleted(time=SECOND, task_id=42),  # unknown: rejected, not a crash
            ],
        )
        result = s.run_round()
        # Both tasks were placed, one on each machine (which on which is a tie); task 1 and
        # both machines are gone by the time the round ends, so neither placement is made.
        skipped = {d.decision.task: d.reason for d in result.skipped}
        assert "TaskRemoved" in skipped[1] and "MachineRemoved" in skipped[2]
        assert not result.deltas
        assert 1 not in s.state.tasks and not s.state.machines
        assert s.state.tasks[2].machine_id is None
        (rejected,) = result.rejected_events
        assert rejected.event.task_id == 42  # type: ignore[union-attr]
        assert "unknown task 42" in rejected.reason
        check_consistent(s)
        feed(s, [machine("m2", time=2 * SECOND)])
        after = s.run_round()
        assert s.state.tasks[2].machine_id == "m2"
        assert not after.refused
        check_consistent(s)


def test_a_round_in_two_halves_queues_what_arrives_in_between() -> None:
    with Scheduler(Plain()) as s:
        feed(s, [machine("m0", slots=1), task(1)])
        pending = s.start_round()
        (decision,) = pending.decisions
        assert decision.kind is DeltaKind.PLACE
        assert s.state.tasks[1].state is TaskState.RUNNABLE  # decided, not applied
        assert s.handle(TaskFailed(time=1, task_id=1)) is None
        with pytest.raises(RuntimeError, match="already running"):
            s.start_round()
        result = s.finish_round(pending)
        assert not result.deltas and [d.decision for d in result.skipped] == [decision]
        assert s.state.tasks[1].state is TaskState.FAILED
        with pytest.raises(RuntimeError, match="without a round in progress"):
            s.finish_round(pending)


def test_unknown_ids_and_duplicates_raise_clear_errors_and_change_nothing() -> None:
    with Scheduler(Plain()) as s:
        feed(s, [machine("m0"), task(1)])
        with pytest.raises(ClusterError, match="unknown task 7"):
            s.handle(TaskCompleted(time=0, task_id=7))
        with pytest.raises(ClusterError, match="machine 'm0' already exists"):
            s.handle(machine("m0"))
        with pytest.raises(ClusterError, match="unknown machine 'nope'"):
            s.handle(MachineRemoved(time=0, machine_id="nope"))
        with pytest.raises(ClusterError, match="task 1 already exists"):
            s.handle(task(1))
        assert s.run_round().count(DeltaKind.PLACE) == 1
        check_consistent(s)


# ---------------------------------------------------------------------- policy failures


class FailsForOdd:
    @hookimpl
    def task_to_equiv_class(self, task: TaskView) -> ArcDescriptor:
        if task.task_id % 2:
            raise RuntimeError("odd task")
        return ArcDescriptor(cost=2)


def test_a_hook_failing_for_one_task_leaves_only_that_task_out() -> None:
    with Scheduler(FailsForOdd()) as s:
        feed(s, [machine("m0", slots=4)] + [task(t) for t in range(4)])
        result = s.run_round()
        assert {d.task for d in result.deltas} == {0, 2}
        assert len(result.task_errors) == 2
        assert all("odd task" in str(e) for e in result.task_errors)
        assert result.task_errors[0].hook == "task_to_equiv_class"
        # Tried again next round (and still failing): reported again, nothing lost.
        again = s.run_round()
        assert len(again.task_errors) == 2
        s.state.validate()


def test_a_task_whose_repricing_fails_is_left_out_alone() -> None:
    class FailsLater:
        @hookimpl
        def task_to_unscheduled(self, task: TaskView, cluster: ClusterView) -> None:
            if task.task_id == 1 and cluster.now > 0:
                raise RuntimeError("pricing backend down")

    with Scheduler(FailsLater()) as s:
        feed(s, [machine("m0", slots=1), task(0)])
        s.run_round()  # task 0 takes the only slot
        feed(s, [task(1), task(2)])
        s.run_round()  # 1 and 2 join the graph, waiting
        later = s.run_round(SECOND)  # and are priced again: 1 fails
        (error,) = later.task_errors
        assert "pricing backend down" in str(error)
        assert s.graph_manager.task_node(1) is None and s.graph_manager.task_node(2) is not None
        s.handle(
            TaskCompleted(time=SECOND, task_id=next(iter(s.state.machines["m0"].running_task_ids)))
        )
        again = s.run_round(2 * SECOND)
        assert len(again.task_errors) == 1
        assert {d.task for d in again.deltas} <= {0, 2} and again.count(DeltaKind.PLACE) == 1


def test_a_failing_resource_hook_fails_the_round_and_the_next_one_recovers() -> None:
    class Flaky:
        broken = True

        @hookimpl
        def leaf_to_sink(self, machine: MachineView) -> ArcDescriptor | None:
            if Flaky.broken:
                raise RuntimeError("stats backend down")
            return None

    with Scheduler(Flaky()) as s:
        feed(s, [machine("m0"), task(1)])
        with pytest.raises(PolicyError, match="stats backend down"):
            s.run_round()
        assert s.state.tasks[1].state is TaskState.RUNNABLE
        Flaky.broken = False
        assert s.run_round().count(DeltaKind.PLACE) == 1
        check_consistent(s)


def test_a_task_that_could_neither_wait_nor_run_is_refused_by_name() -> None:
    class NoWaiting:
        @hookimpl
        def task_to_unscheduled(self) -> ArcDescriptor:
            return ArcDescriptor(cost=5, capacity=0)

    with Scheduler(NoWaiting()) as s:
        feed(s, [task(1)])
        result = s.run_round()
        (error,) = result.task_errors
        assert "capacity 0" in str(error) and "task 1" in str(error)


def test_notifications_reach_the_policy() -> None:
    seen: list[tuple[str, object]] = []

    class Recorder:
        @hookimpl
        def round_started(self, cluster: ClusterView) -> None:
            seen.append(("round", cluster.now))

        @hookimpl
        def task_added(self, task: TaskView) -> None:
            seen.append(("task+", task.task_id))

        @hookimpl
        def task_removed(self, task_id: int) -> None:
            seen.append(("task-", task_id))

        @hookimpl
        def machine_added(self, machine: MachineView) -> None:
            seen.append(("machine+", machine.machine_id))

        @hookimpl
        def machine_removed(self, machine_id: str) -> None:
            seen.append(("machine-", machine_id))

    with Scheduler(Recorder()) as s:
        feed(s, [machine("m0"), task(1), task(2)])
        s.run_round()
        s.handle(TaskCompleted(time=1, task_id=1))
        s.handle(TaskFailed(time=1, task_id=2))
        s.handle(MachineRemoved(time=1, machine_id="m0"))
        s.run_round()
    assert seen == [
        ("round", 0),
        ("machine+", "m0"),
        ("task+", 1),
        ("task+", 2),
        ("round", 1),
        ("machine-", "m0"),
        ("task-", 1),
        ("task-", 2),
    ]


def test_new_machine_labels_make_every_task_ask_again_for_its_preferences() -> None:
    class SameData:
        @hookimpl
        def task_preference_arcs(
            self, task: TaskView, cluster: ClusterView
        ) -> Sequence[ResourceRef]:
            return [
                m.ref
                for m in cluster.machines.values()
                if m.labels.get("data") == task.labels.get("data")
            ]

    def preference_targets(s: Scheduler) -> list[int]:
        graph, node = s.graph_manager.graph, s.graph_manager.task_node(1)
        assert node is not None
        return [
            graph.arc_dst(a)
            for a in graph.out_arcs(node)
            if graph.arc_kind(a) == ArcType.PREFERENCE
        ]

    with Scheduler(SameData()) as s:
        feed(s, [machine("m0", slots=0), task(1, labels={"data": "x"})])
        s.run_round()
        assert preference_targets(s) == []
        s.handle(MachineUpdated(time=1, machine_id="m0", labels={"data": "x"}))
        s.run_round()
        assert preference_targets(s) == [s.graph_manager.machine_node("m0")]


def test_the_statistics_pass_sees_the_previous_passs_statistics() -> None:
    seen: list[int | None] = []

    class Remembers:
        @hookimpl
        def prepare_stats(self, resource: ResourceView) -> None:
            try:
                seen.append(resource.stats.running_tasks)
            except LookupError:
                seen.append(None)

    with Scheduler(Remembers()) as s:
        feed(s, [machine("m0"), task(1)])
        s.run_round()  # the first pass: nothing before it; task 1 is placed after it
        s.run_round()
    assert seen[::3] == [None, 0]  # the machine's entries (then its rack's and pod's)


def test_policies_are_selected_by_name_with_clear_errors() -> None:
    from firmament_py.sdk import UnknownPolicyError

    with pytest.raises(UnknownPolicyError, match=r"known policies: .*load-spreading"):
        Scheduler("load-spreding")
    with pytest.raises(ValueError, match="unknown solver"):
        Scheduler(Plain(), solver="simplex")


# ---------------------------------------------------------------------- class hierarchies


class Levels:
    """Tasks -> class "top" -> classes "a" and "b" -> one machine each (a class hierarchy)."""

    @hookimpl
    def task_equiv_classes(self) -> Sequence[EquivClassId]:
        return ["top"]

    @hookimpl
    def equiv_class_to_equiv_class_arcs(self, equiv_class: EquivClassId) -> Sequence[EquivClassId]:
        return ["a", "b"] if equiv_class == "top" else []

    @hookimpl
    def equiv_class_preference_arcs(
        self, equiv_class: EquivClassId, cluster: ClusterView
    ) -> Sequence[ResourceRef]:
        target = {"a": "m0", "b": "m1"}.get(str(equiv_class))
        return [ResourceRef.machine(target)] if target in cluster.machines else []

    @hookimpl
    def equiv_class_to_resource(self, resource: ResourceView) -> ArcDescriptor:
        return ArcDescriptor(cost=1, capacity=resource.stats.free_slots)


def test_classes_reached_through_classes_get_nodes_and_go_when_unused() -> None:
    with Scheduler(Levels()) as s:
        feed(s, [machine("m0"), machine("m1")] + [task(t) for t in range(3)])
        s.run_round()
        manager = s.graph_manager
        assert all(manager.class_node(c) is not None for c in ("top", "a", "b"))
        assert sum(len(m.running_task_ids) for m in s.state.machines.values()) == 3
        for t in range(3):
            s.handle(TaskCompleted(time=1, task_id=t))
        s.run_round()
        assert all(manager.class_node(c) is None for c in ("top", "a", "b"))
        assert manager.graph.num_nodes == 5  # the sink, a pod, a rack and two machines
        check_consistent(s)


# ---------------------------------------------------------------------- incremental = from scratch


def rebuilt_cost(scheduler: Scheduler) -> int:
    """The optimal cost of the graph a new manager builds from scratch for the same state."""
    fresh = FlowGraphManager(scheduler.policy, scheduler.state)
    fresh.mark_changed(scheduler.state.tasks)
    fresh.update()
    from firmament_py.solvers.ssp import SuccessiveShortestPathSolver

    result = SuccessiveShortestPathSolver().solve_graph(fresh.graph)
    verify(fresh.graph, result)
    return result.cost


steps = st.lists(
    st.tuples(
        st.sampled_from(
            [
                *("submit", "submit", "complete", "round", "round"),
                *("update_task", "remove_task", "fail_task"),
                *("add_machine", "fail_machine", "remove_machine", "update_machine"),
            ]
        ),
        st.integers(0, 10**6),
    ),
    min_size=1,
    max_size=25,
)


@pytest.mark.parametrize(
    ("policy", "solver"),
    [
        (Plain, "cost-scaling"),
        (Plain, "relaxation"),
        (Priorities, "cost-scaling"),
        (PreferLabelled, "cost-scaling"),
        (PreferLabelled, "relaxation"),
    ],
    ids=lambda p: getattr(p, "__name__", p),
)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(script=steps)
def test_random_event_sequences_keep_state_graph_and_optimum_consistent(
    policy: Callable[[], object], solver: str, script: list[tuple[str, int]]
) -> None:
    with Scheduler(policy(), solver=solver) as s:
        now, next_task, next_machine = 0, 0, 0
        feed(s, [machine("m0", slots=2)])
        next_machine = 1
        for action, pick in script:
            now += SECOND
            tasks = list(s.state.tasks.values())
            if action == "submit":
                labels = {"want": f"m{pick % (next_machine + 2)}"}  # perhaps a future one
                s.handle(
                    task(next_task, f"j{pick % 3}", time=now, priority=pick % 10, labels=labels)
                )
                next_task += 1
            elif action == "complete":
                running = [t for t in tasks if t.state is TaskState.RUNNING]
                if running:
                    s.handle(TaskCompleted(time=now, task_id=running[pick % len(running)].task_id))
            elif action in ("update_task", "remove_task", "fail_task") and tasks:
                chosen = tasks[pick % len(tasks)]
                if action == "update_task":
                    labels = {"want": f"m{pick % (next_machine + 1)}"}
                    s.handle(TaskUpdated(time=now, task_id=chosen.task_id, labels=labels))
                elif action == "remove_task":
                    s.handle(TaskRemoved(time=now, task_id=chosen.task_id))
                elif chosen.state in (TaskState.RUNNABLE, TaskState.RUNNING):
                    s.handle(TaskFailed(time=now, task_id=chosen.task_id))
            elif action in ("fail_machine", "remove_machine") and len(s.state.machines) > 1:
                name = list(s.state.machines)[pick % len(s.state.machines)]
                lose = MachineFailed if action == "fail_machine" else MachineRemoved
                s.handle(lose(time=now, machine_id=name))
            elif action == "update_machine":
                name, m = list(s.state.machines.items())[pick % len(s.state.machines)]
                slots = len(m.running_task_ids) + pick % 3
                s.handle(MachineUpdated(time=now, machine_id=name, slots=slots))
            elif action == "add_machine":
                s.handle(
                    machine(f"m{next_machine}", slots=1 + pick % 3, rack=f"r{pick % 2}", time=now)
                )
                next_machine += 1
            else:
                result = s.run_round(now)
                assert not result.refused and not result.task_errors
                check_consistent(s)
                assert s.graph_manager.graph.pending_changes == 0
        final = s.run_round(now + SECOND)
        check_consistent(s)
        assert not final.refused
        # After the decisions, the incremental graph and a fresh one agree on the optimum.
        s.graph_manager.update()
        incremental = s.solver.solve_graph(s.graph_manager.graph)
        verify(s.graph_manager.graph, incremental)
        assert incremental.cost == rebuilt_cost(s)


class Restless:
    """Preemption on, and every machine's price drawn afresh each round (staying costs what
    moving there would): rounds place, migrate and, with more tasks than slots, preempt."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.prices: dict[ResourceRef, int] = {}

    @hookimpl
    def preemption_enabled(self) -> bool:
        return True

    @hookimpl
    def round_started(self) -> None:
        self.prices.clear()

    def _price(self, ref: ResourceRef) -> int:
        return self.prices.setdefault(ref, self.rng.randrange(40))

    @hookimpl
    def equiv_class_to_resource(self, resource: ResourceView) -> ArcDescriptor:
        return ArcDescriptor(self._price(resource.ref), capacity=resource.stats.slots)

    @hookimpl
    def task_continuation(self, machine: MachineView) -> ArcDescriptor:
        return ArcDescriptor(self._price(machine.ref) + 2)


def test_a_rounds_moves_are_its_placements_against_where_tasks_run() -> None:
    """A round decides from `FlowGraphManager.placement_changes`, which reads only the tasks
    the flow moves; that must be exactly what comparing `placements` with every task's machine
    gives: for placements, migrations and preemptions, past the first 64 nodes, across a failed
    machine, a label change (every task rebuilt), a machine that joins, and tasks a hook keeps
    out of the graph."""

    class Picky(Restless):
        @hookimpl
        def task_to_unscheduled(self, task: TaskView) -> ArcDescriptor | None:
            if task.task_id % 29 == 0:
                raise RuntimeError("not this one")
            return None

        @hookimpl
        def task_preemption(self) -> ArcDescriptor:
            # A little under a fresh task's wait (the defaults' grows with the time a task has
            # run): once there are more tasks than slots every round preempts some, not only
            # when a round's prices happen to fall so.
            return ArcDescriptor(UNSCHEDULED_COST - 20)

    rng = random.Random(3)
    kinds: set[DeltaKind] = set()
    events: dict[int, ClusterEvent] = {
        6: MachineFailed(time=6 * SECOND, machine_id="m0"),
        9: MachineUpdated(time=9 * SECOND, machine_id="m1", labels={"zone": "x"}),
        11: MachineAdded(time=11 * SECOND, machine_id="m12", capacity=Resources(), slots=4),
    }
    with Scheduler(Picky(5), solver="cost-scaling") as scheduler:
        for index in range(12):
            added = MachineAdded(
                time=0,
                machine_id=f"m{index}",
                capacity=Resources(),
                slots=4,
                rack_id=f"r{index % 3}",
            )
            scheduler.handle(added)
        live: list[int] = []
        next_task = 1
        for round_number in range(1, 16):
            now = round_number * SECOND
            if round_number in events:
                scheduler.handle(events[round_number])
            for task_id in range(next_task, next_task + 8):
                scheduler.handle(TaskSubmitted(time=now, task_id=task_id, job_id=f"j{task_id % 3}"))
                live.append(task_id)
            next_task += 8
            while len(live) > 60:
                scheduler.handle(TaskRemoved(time=now, task_id=live.pop(rng.randrange(len(live)))))
            manager = scheduler.graph_manager
            manager.update()
            flow = scheduler.solver.solve_graph(manager.graph).flow
            tasks = scheduler.state.tasks
            expected = [
                (task, tasks[task].machine_id, machine)
                for task, machine in manager.placements(flow).items()
                if tasks[task].machine_id != machine
            ]
            assert manager.placement_changes(flow) == expected
            kinds.update(delta.kind for delta in scheduler.run_round(now).deltas)
        assert manager.graph.node_id_bound > 64
    assert kinds == {DeltaKind.PLACE, DeltaKind.MIGRATE, DeltaKind.PREEMPT}


def test_a_task_whose_task_added_fails_is_left_out_however_many_nodes_there_are() -> None:
    """The failing task's node is the 65th and more (past the graph manager's first sizing of
    its per-node arrays): the error is the task's, reported, and rounds go on."""

    class Unwelcoming:
        @hookimpl
        def task_added(self, task: TaskView) -> None:
            if task.task_id == 99:
                raise RuntimeError("no room for task 99")

    with Scheduler(Unwelcoming(), solver="cost-scaling") as scheduler:
        scheduler.handle(MachineAdded(time=0, machine_id="m", capacity=Resources(), slots=100))
        for task_id in range(100):
            scheduler.handle(TaskSubmitted(time=0, task_id=task_id, job_id="j"))
        manager, nodes = scheduler.graph_manager, []
        for round_number in (1, 2, 3):
            result = scheduler.run_round(round_number * SECOND)
            (error,) = result.task_errors
            assert "no room for task 99" in str(error) and error.hook == "task_added"
            assert result.waiting_tasks == 1 and manager.task_node(99) is None
            assert len(list(manager.task_ids)) == 99
            nodes.append(manager.graph.num_nodes)
        # No half-removed node left behind (round 1 still had the class and U(j) for waiting
        # tasks; once they run, only task 99 would need them, and it is not in the graph).
        assert nodes[1] == nodes[2] == nodes[0] - 2
