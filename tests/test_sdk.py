"""Tests of the policy SDK: the hook list, the defaults, how a policy overrides them, policy
discovery through entry points, and every check on what a policy returns."""

from __future__ import annotations

import importlib.metadata
import sys
import types
from collections.abc import Generator, Sequence
from typing import Any

import numpy as np
import pluggy
import pytest
from hypothesis import given
from hypothesis import strategies as st

from firmament_py.model import (
    ClusterError,
    ClusterState,
    LabelSelector,
    MachineAdded,
    MachineStats,
    MachineUpdated,
    Resources,
    TaskState,
    TaskSubmitted,
)
from firmament_py.sdk import (
    AGGREGATOR_COST,
    ALL_HOOKS,
    ANSWER_HOOKS,
    BATCH_HOOKS,
    CLUSTER_AGGREGATOR,
    DEFAULTS_PLUGIN_NAME,
    MAX_CAPACITY,
    MAX_COST,
    NOTIFICATION_HOOKS,
    POLICY_ENTRY_POINT_GROUP,
    UNSCHEDULED_COST,
    ArcDescriptor,
    ClusterView,
    EquivClassId,
    MachineView,
    PolicyError,
    PolicyManager,
    ResourceKind,
    ResourceRef,
    ResourceStats,
    ResourceView,
    TaskView,
    UnknownPolicyError,
    available_policies,
    hookimpl,
    hookspecs,
    load_policy,
    selector_class,
)
from firmament_py.sdk.columns import JobBatch, TaskBatch, timed_costs
from firmament_py.sdk.testing import PolicyHarness
from firmament_py.sdk.types import arc_descriptor_problem

SECOND = 1_000_000
CPU = Resources(cpu_millicores=4000, ram_bytes=8 << 30)
ZONE_B = LabelSelector.equals("zone", "b")


def make_cluster() -> ClusterState:
    """Two pods, three racks, four machines; job "j" with three tasks, one running on m1 and
    one constrained to zone b; job "k" with one task. The clock ends at 10 s."""
    state = ClusterState()
    for machine_id, rack_id, pod_id, slots, zone in [
        ("m1", "r1", "p1", 2, "a"),
        ("m2", "r1", "p1", 3, "a"),
        ("m3", "r2", "p1", 1, "b"),
        ("m4", "r3", "p2", 4, "b"),
    ]:
        state.apply(
            MachineAdded(
                time=0,
                machine_id=machine_id,
                rack_id=rack_id,
                pod_id=pod_id,
                capacity=CPU,
                slots=slots,
                labels={"zone": zone},
            )
        )
    request = Resources(cpu_millicores=1000)
    state.apply(TaskSubmitted(time=0, task_id=1, job_id="j", request=request))
    state.apply(TaskSubmitted(time=0, task_id=2, job_id="j"))
    state.apply(TaskSubmitted(time=0, task_id=3, job_id="j", selectors=(ZONE_B,)))
    state.apply(TaskSubmitted(time=0, task_id=4, job_id="k"))
    state.place(1, "m1", time=4 * SECOND)
    state.apply(MachineStats(time=10 * SECOND, machine_id="m2", usage=Resources(cpu_millicores=7)))
    return state


class Setup:
    """A cluster, a policy manager over it, and a cluster view with a completed statistics
    pass, as the scheduler would hold them."""

    def __init__(self, policy: object, *, name: str = "test-policy") -> None:
        self.state = make_cluster()
        self.policy = PolicyManager(policy, name=name)
        self.stats: dict[ResourceRef, ResourceStats] = {}
        self.cluster = self.policy.cluster_view(self.state, self.stats)
        self.stats.update(self.policy.statistics_pass(self.cluster))

    def task(self, task_id: int) -> TaskView:
        return self.cluster.task(task_id)

    def machine(self, machine_id: str) -> MachineView:
        return self.cluster.machine(machine_id)

    def resource(self, ref: ResourceRef) -> ResourceView:
        return self.cluster.resource(ref)


class NoPolicy:
    """A policy that implements nothing: the defaults answer everything."""


class Preemptive:
    @hookimpl
    def preemption_enabled(self) -> bool:
        return True


def ask_every_answer_hook(setup: Setup) -> dict[str, object]:
    """Ask every answer hook once through the facade, on representative arguments."""
    policy, cluster = setup.policy, setup.cluster
    waiting, running = setup.task(2), setup.task(1)
    m1 = setup.resource(ResourceRef.machine("m1"))
    r1 = setup.resource(ResourceRef.rack("r1"))
    return {
        "preemption_enabled": policy.preemption_enabled,
        "task_equiv_classes": policy.task_equiv_classes(task=waiting, cluster=cluster),
        "task_preference_arcs": policy.task_preference_arcs(task=waiting, cluster=cluster),
        "equiv_class_preference_arcs": policy.equiv_class_preference_arcs(
            equiv_class=CLUSTER_AGGREGATOR, cluster=cluster
        ),
        "equiv_class_to_equiv_class_arcs": policy.equiv_class_to_equiv_class_arcs(
            equiv_class=CLUSTER_AGGREGATOR, cluster=cluster
        ),
        "task_to_unscheduled": policy.task_to_unscheduled(task=waiting, cluster=cluster),
        "unscheduled_to_sink": policy.unscheduled_to_sink(
            job=cluster.job("j"), incoming_tasks=2, cluster=cluster
        ),
        "task_to_resource": policy.task_to_resource(task=waiting, resource=m1, cluster=cluster),
        "resource_to_resource": policy.resource_to_resource(parent=r1, child=m1, cluster=cluster),
        "leaf_to_sink": policy.leaf_to_sink(machine=setup.machine("m1"), cluster=cluster),
        "task_to_equiv_class": policy.task_to_equiv_class(
            task=waiting, equiv_class=CLUSTER_AGGREGATOR, cluster=cluster
        ),
        "equiv_class_to_resource": policy.equiv_class_to_resource(
            equiv_class=CLUSTER_AGGREGATOR, resource=m1, cluster=cluster
        ),
        "equiv_class_to_equiv_class": policy.equiv_class_to_equiv_class(
            source="a", target="b", cluster=cluster
        ),
        "task_continuation": policy.task_continuation(
            task=running, machine=setup.machine("m1"), cluster=cluster
        ),
        "task_preemption": policy.task_preemption(task=running, cluster=cluster),
        "prepare_stats": policy.prepare_stats(resource=m1, cluster=cluster),
        "gather_stats": policy.gather_stats(
            parent=r1,
            accumulated=ResourceStats(slots=1),
            child=m1,
            child_stats=ResourceStats(slots=2, running_tasks=1),
            cluster=cluster,
        ),
        "update_stats": policy.update_stats(
            resource=m1, stats=ResourceStats(machines=1), cluster=cluster
        ),
    }


# ---------------------------------------------------------------------- the hook list


def test_hook_lists_name_every_hookspec_once() -> None:
    specs = {
        name: getattr(value, f"{hookspecs.PROJECT_NAME}_spec")
        for name, value in vars(hookspecs).items()
        if hasattr(value, f"{hookspecs.PROJECT_NAME}_spec")
    }
    assert len(ALL_HOOKS) == len(set(ALL_HOOKS))
    assert set(ALL_HOOKS) == set(specs)
    assert {name for name, opts in specs.items() if opts["firstresult"]} == set(ANSWER_HOOKS)
    assert set(NOTIFICATION_HOOKS) == set(ALL_HOOKS) - set(ANSWER_HOOKS)


def test_defaults_implement_every_answer_hook_and_no_notification() -> None:
    policy = PolicyManager(NoPolicy(), name="nothing")
    defaults = policy.plugin_manager.get_plugin(DEFAULTS_PLUGIN_NAME)
    implemented = {caller.name for caller in policy.plugin_manager.get_hookcallers(defaults) or ()}
    assert implemented == set(ANSWER_HOOKS)
    assert policy.implemented_hooks == frozenset()


# ---------------------------------------------------------------------- the defaults


def test_defaults_answer_every_hook() -> None:
    setup = Setup(NoPolicy())
    answers = ask_every_answer_hook(setup)
    assert set(answers) == set(ANSWER_HOOKS) - set(BATCH_HOOKS)
    machines = tuple(ResourceRef.machine(m) for m in ("m1", "m2", "m3", "m4"))
    # Task 2 was submitted at 0 and the clock is at 10 s.
    assert answers == {
        "preemption_enabled": False,
        "task_equiv_classes": (CLUSTER_AGGREGATOR,),
        "task_preference_arcs": (),
        "equiv_class_preference_arcs": machines,
        "equiv_class_to_equiv_class_arcs": (),
        "task_to_unscheduled": ArcDescriptor(UNSCHEDULED_COST + 10),
        "unscheduled_to_sink": ArcDescriptor(0, capacity=2),
        "task_to_resource": ArcDescriptor(0),
        "resource_to_resource": ArcDescriptor(0, capacity=1),  # m1: 2 slots, 1 running
        "leaf_to_sink": ArcDescriptor(0, capacity=2),
        "task_to_equiv_class": ArcDescriptor(AGGREGATOR_COST),
        "equiv_class_to_resource": ArcDescriptor(0, capacity=1),
        "equiv_class_to_equiv_class": ArcDescriptor(0, capacity=MAX_CAPACITY),
        "task_continuation": ArcDescriptor(0, capacity=1, min_flow=1),
        # Task 1 waited 4 s and has run 6 s.
        "task_preemption": ArcDescriptor(UNSCHEDULED_COST + 10),
        "prepare_stats": ResourceStats(
            machines=1,
            slots=2,
            running_tasks=1,
            capacity=CPU,
            reserved=Resources(cpu_millicores=1000),
        ),
        "gather_stats": ResourceStats(slots=3, running_tasks=1),
        "update_stats": ResourceStats(machines=1),
    }


def test_defaults_with_preemption_use_every_slot_and_do_not_pin() -> None:
    setup = Setup(Preemptive())
    answers = ask_every_answer_hook(setup)
    assert answers["preemption_enabled"] is True
    assert setup.cluster.preemption_enabled is True
    assert answers["resource_to_resource"] == ArcDescriptor(0, capacity=2)
    assert answers["equiv_class_to_resource"] == ArcDescriptor(0, capacity=2)
    assert answers["task_continuation"] == ArcDescriptor(0, capacity=1, min_flow=0)


def test_default_statistics_pass_sums_up_the_topology() -> None:
    setup = Setup(NoPolicy())
    assert list(setup.stats) == [
        ResourceRef.machine("m1"),
        ResourceRef.machine("m2"),
        ResourceRef.machine("m3"),
        ResourceRef.machine("m4"),
        ResourceRef.rack("r1"),
        ResourceRef.rack("r2"),
        ResourceRef.rack("r3"),
        ResourceRef.pod("p1"),
        ResourceRef.pod("p2"),
    ]
    p1 = setup.stats[ResourceRef.pod("p1")]
    assert (p1.machines, p1.slots, p1.running_tasks, p1.free_slots) == (3, 6, 1, 5)
    assert p1.capacity == CPU + CPU + CPU
    assert p1.reserved == Resources(cpu_millicores=1000)
    assert p1.measured_usage == Resources(cpu_millicores=7)
    assert setup.stats[ResourceRef.rack("r1")].slots == 5
    assert setup.stats[ResourceRef.pod("p2")] == setup.stats[ResourceRef.machine("m4")]
    assert setup.resource(ResourceRef.rack("r3")).stats.slots == 4


@pytest.mark.parametrize("policy", [NoPolicy(), Preemptive()])
def test_the_defaults_batch_forms_answer_as_their_per_item_hooks(policy: object) -> None:
    """The scheduler asks the defaults in batch whenever a policy leaves a question to them;
    every batch answer must be what asking the per-item defaults gives, row by row."""
    harness = PolicyHarness(policy, make_cluster())
    manager, cluster, topology = harness.manager, harness.cluster, harness.topology
    harness.state.advance_to(10 * SECOND)
    waiting, running = harness.tasks([2, 3, 4]), harness.tasks([1])
    now = cluster.now

    def timed(answer: Any, tasks: TaskBatch) -> list[ArcDescriptor]:
        costs = timed_costs(answer.cost, answer.per_second, tasks.elapsed(answer.clock, now))
        return [
            ArcDescriptor(int(c), capacity=int(k), min_flow=int(m))
            for c, k, m in zip(costs, answer.capacity, answer.min_flow, strict=True)
        ]

    wait, errors, _ = manager.task_to_unscheduled_batch(tasks=waiting, cluster=cluster)
    assert not errors and timed(wait, waiting) == [
        manager.task_to_unscheduled(task=task, cluster=cluster) for task in waiting
    ]
    stay, _, _ = manager.task_continuation_batch(tasks=running, cluster=cluster)
    preempt, _, _ = manager.task_preemption_batch(tasks=running, cluster=cluster)
    m1 = cluster.machine("m1")
    assert timed(stay, running) == [
        manager.task_continuation(task=running[0], machine=m1, cluster=cluster)
    ]
    assert timed(preempt, running) == [manager.task_preemption(task=running[0], cluster=cluster)]
    classes, _, _ = manager.task_to_equiv_classes_batch(tasks=waiting, cluster=cluster)
    assert classes is not None
    per_item = [
        (row, c, manager.task_to_equiv_class(task=task, equiv_class=c, cluster=cluster))
        for row, task in enumerate(waiting)
        for c in manager.task_equiv_classes(task=task, cluster=cluster)
    ]
    assert [
        (int(r), t, ArcDescriptor(int(c)))
        for r, t, c in zip(classes.rows, classes.targets, classes.cost, strict=True)
    ] == per_item
    preferences, _, _ = manager.task_to_resources_batch(tasks=waiting, cluster=cluster)
    assert preferences is not None and not preferences.targets
    for equiv_class in (CLUSTER_AGGREGATOR, classes.targets[1], "other"):
        arcs, kinds, rows = manager.equiv_class_to_resources_batch(
            equiv_class=equiv_class, topology=topology, cluster=cluster
        )
        refs = [ResourceRef.machine(topology.machines.ids[row]) for row in rows.tolist()]
        assert kinds.tolist() == [0] * len(refs)
        asked = manager.equiv_class_preference_arcs(equiv_class=equiv_class, cluster=cluster)
        assert tuple(refs) == asked
        assert [
            ArcDescriptor(int(c), capacity=int(k))
            for c, k in zip(arcs.cost, arcs.capacity, strict=True)
        ] == [
            manager.equiv_class_to_resource(
                equiv_class=equiv_class, resource=cluster.resource(ref), cluster=cluster
            )
            for ref in refs
        ]
    to_machines, to_racks = manager.resource_to_resource_batch(topology=topology, cluster=cluster)
    for level, parents, arcs in (
        (topology.machines, topology.racks, to_machines),
        (topology.racks, topology.pods, to_racks),
    ):
        for row, ref in enumerate(level.refs):
            parent = cluster.resource(parents.refs[int(level.parents[row])])
            asked = manager.resource_to_resource(
                parent=parent, child=cluster.resource(ref), cluster=cluster
            )
            assert asked == ArcDescriptor(int(arcs.cost[row]), capacity=int(arcs.capacity[row]))
    leaves = manager.leaf_to_sink_batch(topology=topology, cluster=cluster)
    assert [
        ArcDescriptor(int(c), capacity=int(k))
        for c, k in zip(leaves.cost, leaves.capacity, strict=True)
    ] == [
        manager.leaf_to_sink(machine=cluster.machine(m), cluster=cluster)
        for m in topology.machines.ids
    ]
    jobs = JobBatch(["j", "k"], np.array([2, 1]), harness.state.jobs)
    sinks = manager.unscheduled_to_sink_batch(jobs=jobs, cluster=cluster)
    assert [
        ArcDescriptor(int(c), capacity=int(k))
        for c, k in zip(sinks.cost, sinks.capacity, strict=True)
    ] == [
        manager.unscheduled_to_sink(job=cluster.job(j), incoming_tasks=n, cluster=cluster)
        for j, n in (("j", 2), ("k", 1))
    ]
    # The statistics: the batch form's (the model's, summed) are the per-item pass's.
    assert dict(harness.stats) == manager.statistics_pass(cluster)


def test_the_default_leaf_arcs_refuse_what_the_hooks_refuse() -> None:
    """A machine with more tasks pinned than slots: the batch answer is refused as the
    per-item one is, naming the problem."""
    harness = PolicyHarness(NoPolicy(), make_cluster())
    with pytest.raises(ClusterError):  # the model never lets it happen ...
        harness.state.apply(MachineUpdated(time=10 * SECOND, machine_id="m1", slots=0))
    harness.state.machines["m1"].slots = 0  # ... so this test breaks the state by hand
    harness.new_round()
    with pytest.raises(PolicyError, match=r"leaf_to_sink_batch.*machine 'm1'.*pinned"):
        harness.manager.leaf_to_sink_batch(topology=harness.topology, cluster=harness.cluster)
    with pytest.raises(PolicyError, match=r"leaf_to_sink.*pinned"):
        harness.manager.leaf_to_sink(machine=harness.cluster.machine("m1"), cluster=harness.cluster)


def test_default_selector_class_reaches_only_matching_machines() -> None:
    setup = Setup(NoPolicy())
    policy, cluster = setup.policy, setup.cluster
    classes = policy.task_equiv_classes(task=setup.task(3), cluster=cluster)
    assert classes == (selector_class([ZONE_B]),)
    assert policy.equiv_class_preference_arcs(equiv_class=classes[0], cluster=cluster) == (
        ResourceRef.machine("m3"),
        ResourceRef.machine("m4"),
    )
    arc = policy.task_to_equiv_class(task=setup.task(3), equiv_class=classes[0], cluster=cluster)
    assert arc == ArcDescriptor(AGGREGATOR_COST)
    # A class the defaults did not make reaches nothing, and costs nothing to enter.
    assert policy.equiv_class_preference_arcs(equiv_class="other", cluster=cluster) == ()
    assert policy.task_to_equiv_class(
        task=setup.task(3), equiv_class="other", cluster=cluster
    ) == ArcDescriptor(0)


def test_default_unscheduled_cost_grows_with_waiting_and_is_capped() -> None:
    setup = Setup(NoPolicy())
    setup.state.apply(MachineStats(time=70 * SECOND, machine_id="m1", usage=Resources()))
    arc = setup.policy.task_to_unscheduled(task=setup.task(2), cluster=setup.cluster)
    assert arc.cost == UNSCHEDULED_COST + 70
    setup.state.apply(MachineStats(time=2**62, machine_id="m1", usage=Resources()))
    arc = setup.policy.task_to_unscheduled(task=setup.task(2), cluster=setup.cluster)
    assert arc.cost == MAX_COST


# ---------------------------------------------------------------------- overriding


class CheapWaiting:
    @hookimpl
    def task_to_unscheduled(self, task: TaskView) -> ArcDescriptor | None:
        """Only task 2 is cheap to leave waiting; the defaults price the others."""
        return ArcDescriptor(7) if task.task_id == 2 else None


def test_minimal_policy_overriding_one_hook_wins_over_the_default() -> None:
    setup = Setup(CheapWaiting())
    assert setup.policy.implemented_hooks == frozenset({"task_to_unscheduled"})
    cheap = setup.policy.task_to_unscheduled(task=setup.task(2), cluster=setup.cluster)
    assert cheap == ArcDescriptor(7)
    deferred = setup.policy.task_to_unscheduled(task=setup.task(4), cluster=setup.cluster)
    assert deferred == ArcDescriptor(UNSCHEDULED_COST + 10)
    # Every other hook still gets the default answer.
    defaults = ask_every_answer_hook(Setup(NoPolicy()))
    answers = ask_every_answer_hook(setup)
    assert {k: v for k, v in answers.items() if k != "task_to_unscheduled"} == {
        k: v for k, v in defaults.items() if k != "task_to_unscheduled"
    }


def test_a_trylast_policy_implementation_is_still_asked_before_the_defaults() -> None:
    """pluggy calls the trylast implementation registered last, last: the defaults."""

    class Late:
        @hookimpl(trylast=True)
        def leaf_to_sink(self) -> ArcDescriptor:
            return ArcDescriptor(3, capacity=9)

    setup = Setup(Late())
    assert setup.policy.leaf_to_sink(
        machine=setup.machine("m2"), cluster=setup.cluster
    ) == ArcDescriptor(3, capacity=9)


def test_a_wrapper_adjusts_the_default_answer() -> None:
    class Doubling:
        @hookimpl(wrapper=True)
        def task_to_equiv_class(self) -> Generator[None, ArcDescriptor, ArcDescriptor]:
            default = yield
            return ArcDescriptor(default.cost * 2, default.capacity)

    setup = Setup(Doubling())
    arc = setup.policy.task_to_equiv_class(
        task=setup.task(2), equiv_class=CLUSTER_AGGREGATOR, cluster=setup.cluster
    )
    assert arc == ArcDescriptor(2 * AGGREGATOR_COST)


class Mixed:
    """One implementation of each kind the manager may call directly or must leave to pluggy."""

    @hookimpl
    def task_to_unscheduled(self, task: TaskView) -> ArcDescriptor | None:
        return ArcDescriptor(7) if task.task_id == 2 else None  # plain: asked directly

    @hookimpl(wrapper=True)
    def task_to_equiv_class(self) -> Generator[None, ArcDescriptor, ArcDescriptor]:
        default = yield
        return ArcDescriptor(default.cost + 1)

    @hookimpl(hookwrapper=True)
    def task_preemption(self) -> Generator[None, Any, None]:
        yield

    @hookimpl(specname="task_continuation")
    def stay(self) -> ArcDescriptor:
        return ArcDescriptor(5, capacity=1, min_flow=1)

    @hookimpl
    def task_continuation(self) -> None:  # with `stay`, two implementations: pluggy orders them
        return None

    @hookimpl
    def task_added(self, task: TaskView) -> None:  # a plain notification
        pass


def test_plain_implementations_are_asked_directly_and_answer_as_through_pluggy() -> None:
    setup = Setup(Mixed())
    through_pluggy: list[str] = []
    setup.policy.plugin_manager.add_hookcall_monitoring(
        lambda name, impls, kwargs: through_pluggy.append(name), lambda *args: None
    )
    hook = setup.policy.plugin_manager.hook
    ask = setup.policy
    for task_id in (2, 4):
        task = setup.task(task_id)
        arguments: dict[str, Any] = {"task": task, "cluster": setup.cluster}
        assert ask.task_to_unscheduled(**arguments) == hook.task_to_unscheduled(**arguments)
        ask.task_added(**arguments)
        assert ask.task_preemption(**arguments) == hook.task_preemption(**arguments)
        arguments["equiv_class"] = CLUSTER_AGGREGATOR
        assert ask.task_to_equiv_class(**arguments) == hook.task_to_equiv_class(**arguments)
    assert ask.task_to_unscheduled(task=setup.task(2), cluster=setup.cluster) == ArcDescriptor(7)
    machine = setup.machine("m2")
    continuation: dict[str, Any] = {"task": setup.task(2), "machine": machine}
    continuation["cluster"] = setup.cluster
    assert ask.task_continuation(**continuation) == ArcDescriptor(5, capacity=1, min_flow=1)
    # Through pluggy went the test's own calls of `hook` and the calls pluggy must make; the
    # manager asked the plain `task_to_unscheduled` and `task_added` directly.
    assert "task_added" not in through_pluggy
    assert through_pluggy.count("task_to_unscheduled") == 2
    assert through_pluggy.count("task_to_equiv_class") == 4
    assert through_pluggy.count("task_preemption") == 4
    assert through_pluggy.count("task_continuation") == 1


def test_a_policy_may_take_any_subset_of_the_arguments_and_sees_the_stats() -> None:
    class LoadSpreading:
        @hookimpl
        def equiv_class_to_resource(self, resource: ResourceView) -> ArcDescriptor:
            stats = resource.stats
            return ArcDescriptor(100 * stats.running_tasks, capacity=stats.free_slots)

    setup = Setup(LoadSpreading())
    costs = {
        machine_id: setup.policy.equiv_class_to_resource(
            equiv_class=CLUSTER_AGGREGATOR,
            resource=setup.resource(ResourceRef.machine(machine_id)),
            cluster=setup.cluster,
        )
        for machine_id in ("m1", "m2")
    }
    assert costs == {"m1": ArcDescriptor(100, capacity=1), "m2": ArcDescriptor(0, capacity=3)}


def test_a_policy_statistics_override_reaches_the_arc_hooks() -> None:
    class CountRacks:
        @hookimpl
        def update_stats(self, resource: ResourceView, stats: ResourceStats) -> ResourceStats:
            # Give every rack one extra slot, which its pod then gathers.
            if resource.kind is ResourceKind.RACK:
                return ResourceStats(
                    machines=stats.machines, slots=stats.slots + 1, running_tasks=1
                )
            return stats

    setup = Setup(CountRacks())
    assert setup.stats[ResourceRef.rack("r2")].slots == 2
    assert setup.stats[ResourceRef.pod("p1")].slots == 6 + 2
    p1, r2 = setup.resource(ResourceRef.pod("p1")), setup.resource(ResourceRef.rack("r2"))
    arc = setup.policy.resource_to_resource(parent=p1, child=r2, cluster=setup.cluster)
    assert arc == ArcDescriptor(0, capacity=1)


def test_notifications_reach_the_policy() -> None:
    seen: list[tuple[str, object]] = []

    class Listener:
        @hookimpl
        def machine_added(self, machine: MachineView) -> None:
            seen.append(("machine_added", machine.machine_id))

        @hookimpl
        def machine_removed(self, machine_id: str) -> None:
            seen.append(("machine_removed", machine_id))

        @hookimpl
        def task_added(self, task: TaskView, cluster: ClusterView) -> None:
            seen.append(("task_added", (task.task_id, cluster.now)))

        @hookimpl
        def task_removed(self, task_id: int) -> None:
            seen.append(("task_removed", task_id))

    setup = Setup(Listener())
    setup.policy.machine_added(machine=setup.machine("m1"), cluster=setup.cluster)
    setup.policy.machine_removed(machine_id="m9", cluster=setup.cluster)
    setup.policy.task_added(task=setup.task(2), cluster=setup.cluster)
    setup.policy.task_removed(task_id=2, cluster=setup.cluster)
    assert seen == [
        ("machine_added", "m1"),
        ("machine_removed", "m9"),
        ("task_added", (2, 10 * SECOND)),
        ("task_removed", 2),
    ]
    # With no implementation a notification is simply delivered to nobody.
    Setup(NoPolicy()).policy.task_removed(task_id=2, cluster=setup.cluster)


# ---------------------------------------------------------------------- views


def test_views_are_live_and_read_only() -> None:
    setup = Setup(NoPolicy())
    task, machine = setup.task(2), setup.machine("m2")
    assert (task.state, task.machine_id, machine.free_slots) == (TaskState.RUNNABLE, None, 3)
    setup.state.place(2, "m2", time=11 * SECOND)
    assert (task.state, task.machine_id, machine.free_slots) == (TaskState.RUNNING, "m2", 2)
    assert list(machine.running_task_ids) == [2]
    with pytest.raises(AttributeError):
        task.priority = 5  # type: ignore[misc]
    with pytest.raises(AttributeError):
        machine.slots = 9  # type: ignore[misc]
    with pytest.raises(AttributeError):
        machine.running_task_ids.add(3)  # type: ignore[attr-defined]
    with pytest.raises(TypeError):
        setup.cluster.tasks[9] = task  # type: ignore[index]
    assert list(setup.cluster.jobs["j"].task_ids) == [1, 2, 3]
    assert list(setup.cluster.racks) == ["r1", "r2", "r3"]
    assert setup.cluster.pods["p1"].children == (
        ResourceRef.rack("r1"),
        ResourceRef.rack("r2"),
    )
    m3 = setup.resource(ResourceRef.machine("m3"))
    assert m3.parent == ResourceRef.rack("r2")
    assert setup.resource(ResourceRef.rack("r2")).parent == ResourceRef.pod("p1")
    assert setup.resource(ResourceRef.pod("p1")).parent is None
    assert m3.machine is not None and m3.machine.labels == {"zone": "b"}
    assert setup.resource(ResourceRef.rack("r2")).machine is None


def test_waiting_tasks_are_the_runnable_ones_in_the_order_they_became_runnable() -> None:
    setup = Setup(NoPolicy())
    waiting = setup.cluster.waiting_tasks
    assert list(waiting) == [2, 3, 4] and len(waiting) == 3  # task 1 runs
    setup.state.place(2, "m2", time=11 * SECOND)
    assert list(waiting) == [3, 4] and 2 not in waiting  # a live view
    with pytest.raises(KeyError):
        waiting[2]
    setup.state.preempt(2, time=12 * SECOND)
    assert list(waiting) == [3, 4, 2]
    assert waiting[2].task_id == 2 and waiting[2].state is TaskState.RUNNABLE
    setup.state.validate()


def test_stats_of_a_resource_no_pass_reached_raise_lookup_error() -> None:
    state = make_cluster()
    cluster = ClusterView(state, preemption_enabled=False)
    with pytest.raises(LookupError, match="no statistics for machine 'm1'"):
        _ = cluster.resource(ResourceRef.machine("m1")).stats
    with pytest.raises(ValueError, match="unknown rack 'r9'"):
        cluster.resource(ResourceRef.rack("r9"))


# ---------------------------------------------------------------------- discovery


@pytest.fixture
def installed(monkeypatch: pytest.MonkeyPatch) -> list[importlib.metadata.EntryPoint]:
    """Fake installed policies: the returned list is what the entry-point group holds, and
    module `fake_policies` (importable) holds their objects."""
    module = types.ModuleType("fake_policies")

    class ClassPolicy:
        @hookimpl
        def preemption_enabled(self) -> bool:
            return True

    module.ClassPolicy = ClassPolicy  # type: ignore[attr-defined]
    module.instance_policy = CheapWaiting()  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "fake_policies", module)
    entry_points: list[importlib.metadata.EntryPoint] = []
    real_entry_points = importlib.metadata.entry_points

    def fake_entry_points(**selection: Any) -> Any:
        if selection == {"group": POLICY_ENTRY_POINT_GROUP}:
            return importlib.metadata.EntryPoints(entry_points)
        return real_entry_points(**selection)

    monkeypatch.setattr(importlib.metadata, "entry_points", fake_entry_points)
    return entry_points


def entry_point(name: str, value: str) -> importlib.metadata.EntryPoint:
    return importlib.metadata.EntryPoint(name=name, value=value, group=POLICY_ENTRY_POINT_GROUP)


def test_policies_are_discovered_and_loaded_by_name(
    installed: list[importlib.metadata.EntryPoint],
) -> None:
    installed += [
        entry_point("spread", "fake_policies:ClassPolicy"),
        entry_point("cheap", "fake_policies:instance_policy"),
        entry_point("cheap", "fake_policies:instance_policy"),  # seen twice, same target
    ]
    assert available_policies() == ["cheap", "spread"]
    spread = load_policy("spread")
    assert (spread.name, spread.preemption_enabled) == ("spread", True)
    cheap = load_policy("cheap")
    assert cheap.implemented_hooks == frozenset({"task_to_unscheduled"})


def test_unknown_policy_name_lists_the_known_names(
    installed: list[importlib.metadata.EntryPoint],
) -> None:
    installed += [
        entry_point("quincy", "fake_policies:ClassPolicy"),
        entry_point("load-spreading", "fake_policies:ClassPolicy"),
    ]
    with pytest.raises(UnknownPolicyError) as raised:
        load_policy("quincey")
    assert raised.value.known == ("load-spreading", "quincy")
    assert "'quincey'" in str(raised.value)
    assert "known policies: load-spreading, quincy" in str(raised.value)


def test_unknown_policy_name_when_none_are_installed(
    installed: list[importlib.metadata.EntryPoint],
) -> None:
    with pytest.raises(UnknownPolicyError, match="none are installed"):
        load_policy("trivial")


def test_policy_errors_survive_pickling() -> None:
    import pickle

    error = PolicyError("quincy", "leaf_to_sink(...) returned -1", hook="leaf_to_sink")
    copy = pickle.loads(pickle.dumps(error))
    assert (type(copy), str(copy), copy.policy, copy.problem, copy.hook) == (
        PolicyError,
        str(error),
        "quincy",
        error.problem,
        "leaf_to_sink",
    )
    unknown = pickle.loads(pickle.dumps(UnknownPolicyError("quincey", ["quincy"])))
    assert type(unknown) is UnknownPolicyError and unknown.known == ("quincy",)
    assert "known policies: quincy" in str(unknown)


def test_conflicting_and_broken_entry_points_are_named(
    installed: list[importlib.metadata.EntryPoint],
) -> None:
    installed += [
        entry_point("twice", "fake_policies:ClassPolicy"),
        entry_point("twice", "fake_policies:instance_policy"),
        entry_point("missing", "fake_policies:NoSuchPolicy"),
        entry_point("unimportable", "no_such_module_anywhere:Policy"),
    ]
    with pytest.raises(PolicyError, match="several entry points claim this name"):
        load_policy("twice")
    with pytest.raises(PolicyError, match=r"'missing'.*cannot load 'fake_policies:NoSuchPolicy'"):
        load_policy("missing")
    with pytest.raises(PolicyError, match=r"cannot load.*ModuleNotFoundError"):
        load_policy("unimportable")


# ---------------------------------------------------------------------- registration errors


def test_a_misspelled_hook_is_refused() -> None:
    class Typo:
        @hookimpl
        def task_to_unschedule(self) -> ArcDescriptor:
            return ArcDescriptor(1)

    with pytest.raises(PolicyError, match=r"'typo'.*unknown hook 'task_to_unschedule'"):
        PolicyManager(Typo(), name="typo")


def test_an_argument_the_hook_does_not_have_is_refused() -> None:
    class WrongArgument:
        @hookimpl
        def task_to_unscheduled(self, machine: MachineView) -> ArcDescriptor:
            return ArcDescriptor(1)

    with pytest.raises(PolicyError, match=r"(?s)'wrong'.*task_to_unscheduled.*\{'machine'\}"):
        PolicyManager(WrongArgument(), name="wrong")


def test_a_hook_named_function_without_the_marker_is_refused() -> None:
    class Unmarked:
        def leaf_to_sink(self) -> ArcDescriptor:
            return ArcDescriptor(1)

    with pytest.raises(PolicyError, match="defines leaf_to_sink without marking it"):
        PolicyManager(Unmarked(), name="unmarked")


class Defaulted:
    @hookimpl
    def task_to_unscheduled(self, task: TaskView, cluster: ClusterView | None = None) -> None:
        return None


class Extra:
    @hookimpl
    def task_to_unscheduled(self, task: TaskView, weight: int = 2) -> None:
        return None


class Starred:
    @hookimpl
    def task_to_unscheduled(self, *arguments: object) -> None:
        return None


class Keywords:
    @hookimpl
    def task_to_unscheduled(self, task: TaskView, **more: object) -> None:
        return None


class Selfless:
    @hookimpl
    def task_to_unscheduled(task: TaskView) -> None:  # type: ignore[misc]  # noqa: N805
        return None


class Typo:
    def task_to_unschedueld(self, task: TaskView) -> None:
        return None


@pytest.mark.parametrize(
    ("policy", "message"),
    [
        (
            Defaulted(),
            r"task_to_unscheduled: argument 'cluster' has a default, which pluggy never passes",
        ),
        (
            Extra(),
            r"task_to_unscheduled: argument 'weight' has a default, which the hook does not have",
        ),
        (Starred(), r"hook task_to_unscheduled: takes \*arguments, which is never filled"),
        (Keywords(), r"hook task_to_unscheduled: takes \*\*more, which is never filled"),
        (Selfless(), r"hook task_to_unscheduled: its first parameter 'task' takes the instance"),
        (Typo(), r"defines task_to_unschedueld \(did you mean task_to_unscheduled\?\)"),
    ],
)
def test_an_implementation_that_would_never_be_called_is_refused_when_loaded(
    policy: object, message: str
) -> None:
    """pluggy accepts these, and they would never answer as their author meant: the policy is
    refused when it is loaded, naming the hook and the argument."""
    with pytest.raises(PolicyError, match=message) as refused:
        PolicyManager(policy, name="broken")
    assert str(refused.value).startswith("policy 'broken': ")


def test_a_class_and_the_reserved_name_are_refused() -> None:
    with pytest.raises(PolicyError, match="NoPolicy is a class; register an instance"):
        PolicyManager(NoPolicy, name="cls")
    with pytest.raises(PolicyError, match="reserved for the built-in defaults"):
        PolicyManager(NoPolicy(), name=DEFAULTS_PLUGIN_NAME)


# ---------------------------------------------------------------------- answer checks


def bypassed(cost: object, capacity: object, min_flow: object) -> ArcDescriptor:
    """An ArcDescriptor made around its constructor's checks."""
    descriptor = object.__new__(ArcDescriptor)
    object.__setattr__(descriptor, "cost", cost)
    object.__setattr__(descriptor, "capacity", capacity)
    object.__setattr__(descriptor, "min_flow", min_flow)
    return descriptor


def answering(hook: str, answer: Any) -> object:
    """A policy whose `hook` returns `answer` (called if callable) for everything."""

    def implementation() -> Any:
        return answer() if callable(answer) else answer

    implementation.__name__ = hook
    return type("Answering", (), {hook: staticmethod(hookimpl(implementation))})()


ARC_ERRORS: list[tuple[str, Any, str]] = [
    ("task_to_unscheduled", (5, 1, 0), r"returned \(5, 1, 0\): expected an ArcDescriptor"),
    ("leaf_to_sink", 3, r"returned 3: expected an ArcDescriptor, got int"),
    (
        "resource_to_resource",
        lambda: ArcDescriptor(0, capacity=-1),
        r"raised ValueError: invalid ArcDescriptor: capacity -1 is negative",
    ),
    (
        "equiv_class_to_resource",
        lambda: ArcDescriptor(0, capacity=1, min_flow=2),
        r"raised ValueError: .*min_flow 2 exceeds capacity 1",
    ),
    (
        "task_to_equiv_class",
        lambda: ArcDescriptor(MAX_COST + 1),
        rf"raised ValueError: .*cost {MAX_COST + 1} exceeds the limit of {MAX_COST}",
    ),
    (
        "equiv_class_to_equiv_class",
        lambda: ArcDescriptor(-MAX_COST - 1),
        rf"cost {-MAX_COST - 1} exceeds the limit",
    ),
    (
        "task_preemption",
        lambda: ArcDescriptor(1.5),  # type: ignore[arg-type]
        r"raised TypeError: cost must be an integer, not float \(1.5\)",
    ),
    ("task_continuation", bypassed(0, -1, 0), r"capacity -1 is negative"),
    ("task_continuation", bypassed(0, 1, 2), r"min_flow 2 exceeds capacity 1"),
    ("task_continuation", bypassed(MAX_COST + 1, 1, 0), r"exceeds the limit of"),
    ("task_continuation", bypassed(0, MAX_CAPACITY + 1, 0), r"exceeds the limit of"),
    ("task_continuation", bypassed(0, 1, -1), r"min_flow -1 is negative"),
    ("task_continuation", bypassed(True, 1, 0), r"cost True is not an int"),
    (
        "task_to_resource",
        ArcDescriptor(0, capacity=2, min_flow=2),
        r"min_flow 2 exceeds the one unit a task carries",
    ),
]


def ask(setup: Setup, hook: str) -> object:
    """Ask `hook` (and, on the way, every answer hook before it in the list)."""
    return ask_every_answer_hook(setup)[hook]


@pytest.mark.parametrize(("hook", "answer", "message"), ARC_ERRORS)
def test_a_bad_arc_descriptor_is_a_policy_error_naming_policy_hook_and_value(
    hook: str, answer: Any, message: str
) -> None:
    setup = Setup(answering(hook, answer), name="bad")
    with pytest.raises(PolicyError, match=message) as raised:
        ask(setup, hook)
    assert raised.value.policy == "bad"
    assert raised.value.hook == hook
    assert str(raised.value).startswith(f"policy 'bad': {hook}(")


def test_unscheduled_capacity_below_the_waiting_tasks_is_refused() -> None:
    setup = Setup(answering("unscheduled_to_sink", ArcDescriptor(0)))
    with pytest.raises(PolicyError, match="capacity 1 is below the 3 tasks that may wait") as e:
        setup.policy.unscheduled_to_sink(
            job=setup.cluster.job("j"), incoming_tasks=3, cluster=setup.cluster
        )
    assert "job=JobView('j'), incoming_tasks=3" in str(e.value)
    assert "ArcDescriptor(cost=0, capacity=1, min_flow=0)" in str(e.value)


def test_leaf_capacity_below_the_pinned_tasks_is_refused_without_preemption() -> None:
    class TooSmall:
        @hookimpl
        def preemption_enabled(self) -> bool:
            return False

        @hookimpl
        def leaf_to_sink(self) -> ArcDescriptor:
            return ArcDescriptor(0, capacity=0)

    setup = Setup(TooSmall())
    with pytest.raises(PolicyError, match=r"capacity 0 is below the 1 tasks pinned"):
        setup.policy.leaf_to_sink(machine=setup.machine("m1"), cluster=setup.cluster)
    # m2 runs nothing, so capacity 0 is fine there.
    assert setup.policy.leaf_to_sink(
        machine=setup.machine("m2"), cluster=setup.cluster
    ) == ArcDescriptor(0, capacity=0)


def test_a_bad_default_answer_says_the_defaults_gave_it() -> None:
    setup = Setup(NoPolicy())
    with pytest.raises(PolicyError, match="answered by the built-in defaults") as raised:
        setup.policy.unscheduled_to_sink(
            job=setup.cluster.job("j"), incoming_tasks=-1, cluster=setup.cluster
        )
    assert isinstance(raised.value.__cause__, ValueError)


SEQUENCE_ERRORS: list[tuple[str, Any, str]] = [
    ("task_equiv_classes", "cluster", r"returned 'cluster': expected a list or tuple"),
    ("task_equiv_classes", {1, 2}, r"expected a list or tuple"),
    ("task_equiv_classes", [1, 1], r"item 1, 1, is a duplicate"),
    ("task_equiv_classes", [True], r"item 0, True, is not an equivalence class"),
    ("task_equiv_classes", [1.5], r"item 0, 1.5, is not an equivalence class"),
    ("task_equiv_classes", ["a", ""], r"item 1, '', is an empty str"),
    ("task_equiv_classes", [["a"]], r"item 0, \['a'\], is not an equivalence class"),
    ("equiv_class_to_equiv_class_arcs", [CLUSTER_AGGREGATOR], r"item 0 is the class itself"),
    ("task_preference_arcs", ["m1"], r"item 0, 'm1', is not a ResourceRef"),
    (
        "task_preference_arcs",
        [ResourceRef.machine("m1"), ResourceRef.machine("m1")],
        r"item 1, ResourceRef.machine\('m1'\), is a duplicate",
    ),
    (
        "equiv_class_preference_arcs",
        (ResourceRef.rack("r1"), ResourceRef.rack("r9")),
        r"item 1, ResourceRef.rack\('r9'\), is not a live resource",
    ),
    ("prepare_stats", {"slots": 1}, r"expected ResourceStats, got dict"),
    (
        "update_stats",
        lambda: ResourceStats(slots=-1),
        r"raised ValueError: slots must not be negative, got -1",
    ),
    ("preemption_enabled", 1, r"preemption_enabled\(\) returned 1: expected a bool"),
    ("gather_stats", lambda: 1 // 0, r"raised ZeroDivisionError: integer division"),
]


@pytest.mark.parametrize(("hook", "answer", "message"), SEQUENCE_ERRORS)
def test_a_bad_answer_is_a_policy_error_naming_policy_hook_and_value(
    hook: str, answer: Any, message: str
) -> None:
    # Statistics hooks fail in the pass Setup runs, preemption_enabled when the policy is
    # selected, the others when asked.
    with pytest.raises(PolicyError, match=message) as raised:
        ask(Setup(answering(hook, answer), name="bad"), hook)
    assert raised.value.policy == "bad"
    assert raised.value.hook == hook


def test_a_notification_that_returns_something_is_refused() -> None:
    setup = Setup(answering("task_added", "done"))
    with pytest.raises(PolicyError, match=r"task_added\(task=TaskView\(2\)\) returned \['done'\]"):
        setup.policy.task_added(task=setup.task(2), cluster=setup.cluster)


def test_an_exception_in_a_hook_becomes_a_policy_error_with_its_cause() -> None:
    class Broken:
        @hookimpl
        def task_preference_arcs(self, task: TaskView) -> Sequence[ResourceRef]:
            raise KeyError(task.task_id)

    setup = Setup(Broken())
    with pytest.raises(
        PolicyError, match=r"task_preference_arcs\(task=TaskView\(2\)\) raised"
    ) as e:
        setup.policy.task_preference_arcs(task=setup.task(2), cluster=setup.cluster)
    assert isinstance(e.value.__cause__, KeyError)


def test_a_valid_answer_comes_back_normalised() -> None:
    class Good:
        @hookimpl
        def task_equiv_classes(self) -> Sequence[EquivClassId]:
            return [7, "gpu"]

        @hookimpl
        def task_to_resource(self) -> ArcDescriptor:
            # Typed int, but numpy integers are accepted and stored as int.
            return ArcDescriptor(np.int64(-3), capacity=np.int32(1))  # type: ignore[arg-type]

    setup = Setup(Good())
    classes = setup.policy.task_equiv_classes(task=setup.task(2), cluster=setup.cluster)
    assert classes == (7, "gpu")
    arc = setup.policy.task_to_resource(
        task=setup.task(2), resource=setup.resource(ResourceRef.pod("p2")), cluster=setup.cluster
    )
    assert arc == ArcDescriptor(-3) and type(arc.cost) is int


# ---------------------------------------------------------------------- the property

INTEGERS = st.integers(min_value=-(2**64), max_value=2**64) | st.sampled_from(
    [0, 1, -1, MAX_COST, MAX_COST + 1, -MAX_COST, -MAX_COST - 1, MAX_CAPACITY, MAX_CAPACITY + 1]
)
FIELDS = INTEGERS | st.booleans() | st.floats(allow_nan=False) | st.none()


@given(cost=FIELDS, capacity=FIELDS, min_flow=FIELDS)
def test_every_accepted_descriptor_is_within_the_flow_graph_limits(
    cost: object, capacity: object, min_flow: object
) -> None:
    candidate = bypassed(cost, capacity, min_flow)
    accepted = arc_descriptor_problem(candidate) is None
    if accepted:
        assert isinstance(candidate.cost, int) and abs(candidate.cost) <= MAX_COST
        assert isinstance(candidate.capacity, int) and isinstance(candidate.min_flow, int)
        assert 0 <= candidate.min_flow <= candidate.capacity <= MAX_CAPACITY
    # The constructor accepts exactly what the validator accepts.
    try:
        ArcDescriptor(cost, capacity, min_flow)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        assert not accepted
    else:
        assert accepted


@given(cost=INTEGERS, capacity=INTEGERS, min_flow=INTEGERS)
def test_every_descriptor_the_manager_accepts_is_within_the_limits(
    cost: int, capacity: int, min_flow: int
) -> None:
    policy = PolicyManager(answering("leaf_to_sink", bypassed(cost, capacity, min_flow)), name="p")
    state = ClusterState()
    state.apply(MachineAdded(time=0, machine_id="m", capacity=CPU, slots=1))
    cluster = ClusterView(state, preemption_enabled=False)
    try:
        arc = policy.leaf_to_sink(machine=cluster.machine("m"), cluster=cluster)
    except PolicyError:
        return
    assert 0 <= arc.min_flow <= arc.capacity <= MAX_CAPACITY and abs(arc.cost) <= MAX_COST


def test_plugin_manager_is_pluggy() -> None:
    assert isinstance(PolicyManager(NoPolicy(), name="n").plugin_manager, pluggy.PluginManager)
