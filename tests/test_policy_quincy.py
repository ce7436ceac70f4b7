"""Tests of the Quincy policy (policies/quincy.py): how it reads a task's input from a layout or
from labels, the preference arcs and costs it derives (checked against hand-computed values),
its waiting, continuation and preemption costs, and, end to end through the scheduler, the
hallmark: a task runs on the machine holding its data, else in that machine's rack, else
anywhere."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from firmament_policies.quincy import (
    BLOCKS_LABEL,
    CLUSTER_AGGREGATOR,
    INPUT_LABEL,
    REPLICAS_LABEL,
    DataLayout,
    QuincyPolicy,
    parse_blocks_label,
    parse_input_label,
    parse_replicas_label,
)
from firmament_py.model import (
    ClusterState,
    LabelSelector,
    MachineAdded,
    MachineRemoved,
    Resources,
    TaskSubmitted,
)
from firmament_py.scheduler import DeltaKind, Scheduler
from firmament_py.sdk import (
    ArcDescriptor,
    PolicyError,
    ResourceRef,
    load_policy,
    selector_class,
)
from firmament_py.sdk.testing import PolicyHarness

MIB = 1 << 20
GIB = 1 << 30
SECOND = 1_000_000
CPU = Resources(cpu_millicores=4000)

# Five machines in three racks; the task reads 1,000 MiB: b1 (600 MiB, replicas on m1 and m3),
# b2 (360 MiB on m2), b3 (40 MiB on m4). Nothing is in rack r3.
TOPOLOGY = [("m1", "r1"), ("m2", "r1"), ("m3", "r2"), ("m4", "r2"), ("m5", "r3")]
REPLICAS = {"b1": ["m1", "m3"], "b2": ["m2"], "b3": ["m4"]}
INPUT = {"b1": 600 * MIB, "b2": 360 * MIB, "b3": 40 * MIB}
# Costs in MiB through a rack switch (x1) or the core switch (x2):
#   m1: 360 in rack + 40 outside = 360 + 80     m2: 600 in rack + 40 outside = 600 + 80
#   m3: 40 in rack + 360 outside = 40 + 720     m4: 600 in rack + 360 outside = 600 + 720
#   r1: worst of m1, m2; r2: worst of m3, m4; X: r3 holds nothing, so all 1,000 MiB x 2.
MACHINE_COSTS = {"m1": 440, "m2": 680, "m3": 760, "m4": 1320, "m5": 2000}
RACK_COSTS = {"r1": 680, "r2": 1320}
CLUSTER_COST = 2000


class Hooks(PolicyHarness):
    """The policy over a cluster state, in a round, with shortcuts to its answers: what the
    scheduler's graph manager holds when it asks the hooks."""

    def __init__(self, policy: object, state: ClusterState) -> None:
        super().__init__(policy, state, name="quincy")

    def preferences(self, task_id: int) -> dict[ResourceRef, int]:
        """The task's preference arcs and their costs."""
        task = self.cluster.task(task_id)
        refs = self.manager.task_preference_arcs(task=task, cluster=self.cluster)
        return {
            ref: self.manager.task_to_resource(
                task=task, resource=self.cluster.resource(ref), cluster=self.cluster
            ).cost
            for ref in refs
        }


def make_state(
    *,
    machine_labels: dict[str, dict[str, str]] | None = None,
    task_labels: dict[str, str] | None = None,
) -> ClusterState:
    state = ClusterState()
    for machine_id, rack_id in TOPOLOGY:
        labels = (machine_labels or {}).get(machine_id, {})
        state.apply(
            MachineAdded(
                time=0, machine_id=machine_id, capacity=CPU, slots=2, rack_id=rack_id, labels=labels
            )
        )
    state.apply(TaskSubmitted(time=0, task_id=1, job_id="j", labels=task_labels or {}))
    return state


def expected_preferences() -> dict[ResourceRef, int]:
    machines = {ResourceRef.machine(m): MACHINE_COSTS[m] for m in ("m1", "m3", "m2")}
    racks = {ResourceRef.rack(r): RACK_COSTS[r] for r in ("r1", "r2")}
    return machines | racks


def with_layout() -> Hooks:
    return Hooks(QuincyPolicy(DataLayout(REPLICAS, {1: INPUT})), make_state())


def with_labels() -> Hooks:
    machine_labels: dict[str, dict[str, str]] = {}
    for block, machines in REPLICAS.items():
        for machine_id in machines:
            held = machine_labels.setdefault(machine_id, {}).get(BLOCKS_LABEL)
            machine_labels[machine_id][BLOCKS_LABEL] = f"{held},{block}" if held else block
    task_label = ",".join(f"{block}:{size}" for block, size in INPUT.items())
    state = make_state(machine_labels=machine_labels, task_labels={INPUT_LABEL: task_label})
    return Hooks(load_policy("quincy"), state)  # the entry point: made with no arguments


def with_replicas_label() -> Hooks:
    """The task says where its blocks are; the machines carry no labels."""
    task_labels = {
        INPUT_LABEL: ",".join(f"{block}:{size}" for block, size in INPUT.items()),
        REPLICAS_LABEL: json.dumps(REPLICAS),
    }
    return Hooks(load_policy("quincy"), make_state(task_labels=task_labels))


# ---------------------------------------------------------------------- describing data


def test_input_label_parses_blocks_and_sizes() -> None:
    assert parse_input_label(" a:10, b:2048 ,") == {"a": 10, "b": 2048}
    assert parse_input_label("") == {}
    assert parse_blocks_label("a, b,,c ") == {"a", "b", "c"}


@pytest.mark.parametrize("value", ["a", "a:", ":5", "a:x", "a:-1", "a:1,a:2", "a:²"])
def test_malformed_input_label_is_refused(value: str) -> None:
    with pytest.raises(ValueError, match=INPUT_LABEL):
        parse_input_label(value)


@pytest.mark.parametrize("value", ["[1]", "{", '{"b": "m1"}', '{"b": [1]}'])
def test_malformed_replicas_label_is_refused(value: str) -> None:
    with pytest.raises(ValueError, match=REPLICAS_LABEL):
        parse_replicas_label(value)
    labels = {INPUT_LABEL: "b1:600", REPLICAS_LABEL: value}
    hooks = Hooks(QuincyPolicy(), make_state(task_labels=labels))
    with pytest.raises(PolicyError, match=r"task 1: label 'quincy.replicas'"):
        hooks.preferences(1)


def test_named_replicas_on_machines_not_in_the_cluster_do_not_count() -> None:
    labels = {INPUT_LABEL: f"b9:{GIB}", REPLICAS_LABEL: json.dumps({"b9": ["m2", "gone"]})}
    setup = Hooks(QuincyPolicy(), make_state(task_labels=labels))
    assert setup.preferences(1) == {ResourceRef.machine("m2"): 0, ResourceRef.rack("r1"): 1024}


def test_malformed_label_fails_the_task_hooks_naming_the_task() -> None:
    hooks = Hooks(QuincyPolicy(), make_state(task_labels={INPUT_LABEL: "b1=600"}))
    with pytest.raises(PolicyError, match=r"task 1: label 'quincy.input'"):
        hooks.preferences(1)


def test_layout_checks_what_it_is_given() -> None:
    with pytest.raises(ValueError, match="non-empty"):
        DataLayout({"": ["m1"]})
    with pytest.raises(ValueError, match="int >= 0"):
        DataLayout(inputs={1: {"b": -1}})
    with pytest.raises(ValueError, match="machine_threshold"):
        QuincyPolicy(machine_threshold=1.5)
    with pytest.raises(ValueError, match="core_cost_per_mib"):
        QuincyPolicy(core_cost_per_mib=-2)


# ---------------------------------------------------------------------- arcs and costs


@pytest.mark.parametrize(
    "hooks", [with_layout, with_labels, with_replicas_label], ids=["layout", "labels", "replicas"]
)
def test_preferences_and_costs_follow_the_data(hooks: Callable[[], Hooks]) -> None:
    setup = hooks()
    assert setup.preferences(1) == expected_preferences()
    # Machines above the threshold first, by data held; m4 (4%) and m5 (none) have no arc.
    assert list(setup.preferences(1))[:3] == [ResourceRef.machine(m) for m in ("m1", "m3", "m2")]
    task = setup.cluster.task(1)
    assert setup.manager.task_equiv_classes(task=task, cluster=setup.cluster) == (
        CLUSTER_AGGREGATOR,
    )
    to_x = setup.manager.task_to_equiv_class(
        task=task, equiv_class=CLUSTER_AGGREGATOR, cluster=setup.cluster
    )
    assert to_x == ArcDescriptor(CLUSTER_COST)


def test_thresholds_decide_which_machines_and_racks_are_preferred() -> None:
    policy = QuincyPolicy(
        DataLayout(REPLICAS, {1: INPUT}), machine_threshold=0.5, rack_threshold=0.9
    )
    setup = Hooks(policy, make_state())
    # m2 holds 36% (< 50%), rack r2 64% (< 90%).
    assert setup.preferences(1) == {
        ResourceRef.machine("m1"): 440,
        ResourceRef.machine("m3"): 760,
        ResourceRef.rack("r1"): 680,
    }


def test_holding_exactly_the_threshold_is_enough() -> None:
    layout = DataLayout({"h1": ["m1"], "h2": ["m3"]}, {1: {"h1": GIB, "h2": GIB}})
    policy = QuincyPolicy(layout, machine_threshold=0.5, rack_threshold=0.5)
    assert Hooks(policy, make_state()).preferences(1) == {
        ResourceRef.machine("m1"): 1024 * 2,
        ResourceRef.machine("m3"): 1024 * 2,
        ResourceRef.rack("r1"): 1024 * 3,
        ResourceRef.rack("r2"): 1024 * 3,
    }


def test_cluster_cost_is_the_worst_machine_when_every_rack_holds_data() -> None:
    layout = DataLayout(REPLICAS | {"b4": ["m5"]}, {1: INPUT | {"b4": 1000 * MIB}})
    setup = Hooks(QuincyPolicy(layout), make_state())
    # 2,000 MiB, some in every rack. The worst machine is m4: 600 of r2's 640 MiB come through
    # the rack switch, the 1,360 MiB outside r2 through the core.
    task = setup.cluster.task(1)
    cost = setup.manager.task_to_equiv_class(
        task=task, equiv_class=CLUSTER_AGGREGATOR, cluster=setup.cluster
    ).cost
    assert cost == (640 - 40) + 2 * (2000 - 640)


def test_layout_input_wins_over_the_label_and_absent_replicas_do_not_count() -> None:
    layout = DataLayout({"b9": ["m2", "gone"]}, {1: {"b9": GIB}})
    state = make_state(task_labels={INPUT_LABEL: "b1:100"})
    setup = Hooks(QuincyPolicy(layout), state)
    assert setup.preferences(1) == {ResourceRef.machine("m2"): 0, ResourceRef.rack("r1"): 1024}
    # A machine that leaves takes its replicas with it, from the next round on.
    state.apply(MachineRemoved(time=1, machine_id="m2"))
    setup.new_round()
    assert setup.preferences(1) == {}
    task = setup.cluster.task(1)
    cost = setup.manager.task_to_equiv_class(
        task=task, equiv_class=CLUSTER_AGGREGATOR, cluster=setup.cluster
    )
    assert cost.cost == 2 * 1024


def test_a_task_without_input_goes_anywhere_for_free() -> None:
    setup = Hooks(QuincyPolicy(), make_state())
    task = setup.cluster.task(1)
    assert setup.preferences(1) == {}
    to_x = setup.manager.task_to_equiv_class(
        task=task, equiv_class=CLUSTER_AGGREGATOR, cluster=setup.cluster
    )
    assert to_x.cost == 0
    pods = setup.manager.equiv_class_preference_arcs(
        equiv_class=CLUSTER_AGGREGATOR, cluster=setup.cluster
    )
    assert pods == tuple(ResourceRef.pod(p) for p in setup.state.pods)


def test_a_task_with_selectors_gets_only_machines_and_racks_it_may_run_on() -> None:
    zone_b = LabelSelector.equals("zone", "b")
    state = make_state(machine_labels={m: {"zone": "b"} for m in ("m1", "m3", "m4")})
    state.apply(TaskSubmitted(time=0, task_id=2, job_id="j", selectors=(zone_b,)))
    setup = Hooks(QuincyPolicy(DataLayout(REPLICAS, {2: INPUT})), state)
    # m2 is not in zone b, so neither is it nor its rack r1 preferred.
    assert setup.preferences(2) == {
        ResourceRef.machine("m1"): 440,
        ResourceRef.machine("m3"): 760,
        ResourceRef.rack("r2"): 1320,
    }
    task = setup.cluster.task(2)
    (equiv_class,) = setup.manager.task_equiv_classes(task=task, cluster=setup.cluster)
    assert equiv_class == selector_class((zone_b,))
    to_class = setup.manager.task_to_equiv_class(
        task=task, equiv_class=equiv_class, cluster=setup.cluster
    )
    assert to_class.cost == CLUSTER_COST
    reached = setup.manager.equiv_class_preference_arcs(
        equiv_class=equiv_class, cluster=setup.cluster
    )
    assert reached == tuple(ResourceRef.machine(m) for m in ("m1", "m3", "m4"))


# ---------------------------------------------------------------------- waiting and running


def test_waiting_costs_grow_with_the_time_waited() -> None:
    setup = with_layout()
    task = setup.cluster.task(1)
    assert setup.manager.task_to_unscheduled(task=task, cluster=setup.cluster).cost == 1
    setup.state.advance_to(2 * SECOND + SECOND // 2)
    assert setup.manager.task_to_unscheduled(task=task, cluster=setup.cluster).cost == 1 + 1280


def test_a_running_task_pays_its_transfer_minus_the_work_a_move_would_lose() -> None:
    setup = with_layout()
    setup.state.place(1, "m2", time=SECOND)
    setup.state.advance_to(4 * SECOND)
    setup.new_round()
    task, m2 = setup.cluster.task(1), setup.cluster.machine("m2")
    continuation = setup.manager.task_continuation(task=task, machine=m2, cluster=setup.cluster)
    assert continuation == ArcDescriptor(MACHINE_COSTS["m2"] - 3 * 1024 - 1, capacity=1)
    # Preempting costs what its waiting would: it waited one second before it ran.
    preemption = setup.manager.task_preemption(task=task, cluster=setup.cluster)
    assert preemption == ArcDescriptor(1 + 512)
    # It keeps its other preference arcs (it may migrate); its own machine is its continuation.
    preferences = setup.preferences(1)
    assert ResourceRef.machine("m2") not in preferences
    assert preferences[ResourceRef.machine("m1")] == MACHINE_COSTS["m1"]
    assert setup.manager.preemption_enabled


# ---------------------------------------------------------------------- end to end


def scheduler_with_one_block(block_machine: str) -> tuple[Scheduler, DataLayout]:
    """Two racks of two one-slot machines; block "b" (1 GiB) is on `block_machine` only."""
    layout = DataLayout({"b": [block_machine]})
    scheduler = Scheduler(policy=QuincyPolicy(layout))
    for machine_id, rack_id in [("m1", "r1"), ("m2", "r1"), ("m3", "r2"), ("m4", "r2")]:
        scheduler.handle(
            MachineAdded(time=0, machine_id=machine_id, capacity=CPU, slots=1, rack_id=rack_id)
        )
    return scheduler, layout


def submit_reader(scheduler: Scheduler, layout: DataLayout, task_id: int, time: int) -> None:
    layout.set_input(task_id, {"b": GIB})
    scheduler.handle(TaskSubmitted(time=time, task_id=task_id, job_id="j"))


def machine_of(scheduler: Scheduler, task_id: int) -> str | None:
    return scheduler.state.tasks[task_id].machine_id


def test_hallmark_data_machine_then_its_rack_then_anywhere() -> None:
    scheduler, layout = scheduler_with_one_block("m1")
    try:
        # Every machine is free: the task goes where its data is.
        submit_reader(scheduler, layout, 1, 0)
        assert not scheduler.run_round(time=0).refused
        assert machine_of(scheduler, 1) == "m1"

        # m1 is full. Reading 1 GiB through the rack switch costs 1,024, waiting 512 a
        # second: after two seconds the task settles for m2, in m1's rack, although m3 and m4
        # (across the core switch, 2,048) are free too.
        submit_reader(scheduler, layout, 2, 0)
        assert not scheduler.run_round(time=SECOND).deltas
        scheduler.run_round(time=2 * SECOND + SECOND // 2)
        assert machine_of(scheduler, 2) == "m2"

        # The rack is full: the next reader waits until crossing the core is worth it.
        submit_reader(scheduler, layout, 3, 3 * SECOND)
        assert not scheduler.run_round(time=6 * SECOND).deltas  # waited 3 s: 1,537 < 2,048
        result = scheduler.run_round(time=7 * SECOND + SECOND // 2)  # 4.5 s: 2,305
        assert machine_of(scheduler, 3) in ("m3", "m4")
        assert [delta.kind for delta in result.deltas] == [DeltaKind.PLACE]
        assert [machine_of(scheduler, t) for t in (1, 2)] == ["m1", "m2"]
    finally:
        scheduler.close()


def test_labels_alone_describe_the_data_through_the_entry_point() -> None:
    with Scheduler(policy="quincy") as scheduler:
        for machine_id, rack_id in [("m1", "r1"), ("m2", "r1"), ("m3", "r2")]:
            labels = {BLOCKS_LABEL: "x,y"} if machine_id == "m3" else {}
            scheduler.handle(
                MachineAdded(
                    time=0,
                    machine_id=machine_id,
                    capacity=CPU,
                    slots=4,
                    rack_id=rack_id,
                    labels=labels,
                )
            )
        for task_id in (1, 2, 3):
            labels = {INPUT_LABEL: f"x:{GIB},y:{GIB // 2}"}
            scheduler.handle(TaskSubmitted(time=0, task_id=task_id, job_id="j", labels=labels))
        results = scheduler.run_until_quiet(time=0)
        assert not any(result.refused for result in results)
        assert [machine_of(scheduler, t) for t in (1, 2, 3)] == ["m3", "m3", "m3"]


def test_a_malformed_label_keeps_only_its_own_task_waiting() -> None:
    with Scheduler(policy="quincy") as scheduler:
        scheduler.handle(MachineAdded(time=0, machine_id="m1", capacity=CPU, slots=4))
        scheduler.handle(
            TaskSubmitted(time=0, task_id=1, job_id="j", labels={INPUT_LABEL: "x=100"})
        )
        scheduler.handle(TaskSubmitted(time=0, task_id=2, job_id="j"))
        result = scheduler.run_round()
        assert [delta.task for delta in result.deltas] == [2]
        (error,) = result.task_errors
        assert "task 1: label 'quincy.input'" in str(error)


def test_without_credit_for_time_run_a_task_moves_over_for_one_whose_data_is_there() -> None:
    layout = DataLayout()
    with Scheduler(policy=QuincyPolicy(layout, run_credit_per_second=0)) as scheduler:
        for machine_id in ("m1", "m2"):
            scheduler.handle(MachineAdded(time=0, machine_id=machine_id, capacity=CPU, slots=1))
        scheduler.handle(TaskSubmitted(time=0, task_id=1, job_id="j"))  # reads nothing
        scheduler.run_round(time=0)
        first = machine_of(scheduler, 1)
        assert first is not None
        other = "m2" if first == "m1" else "m1"
        # A task whose 10 GiB are on the machine task 1 took: after waiting a second, moving
        # task 1 (free: it reads nothing) beats waiting (513) and reading remotely (10,240).
        layout.store("big", [first])
        layout.set_input(2, {"big": 10 * GIB})
        scheduler.handle(TaskSubmitted(time=SECOND, task_id=2, job_id="k"))
        result = scheduler.run_round(time=2 * SECOND)
        assert sorted((d.kind.value, d.task, d.to_machine) for d in result.deltas) == [
            ("migrate", 1, other),
            ("place", 2, first),
        ]
        assert not result.refused
