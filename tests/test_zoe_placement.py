"""Tests of Zoe's placement through the flow scheduler: the `zoe` policy hook by hook, the
driver (`FlowPlacement`) end to end (Figure 1 again, never overcommitting a machine, the gang
of core components: all placed or none, cores never taken back), components with label
selectors only on machines that satisfy them, and the `zoe` command group."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from firmament_policies.zoe import (
    CLASS_LABEL,
    CORE_WAITING_COST,
    ZoePolicy,
    request_class,
)
from firmament_py.model import (
    ClusterState,
    LabelSelector,
    MachineAdded,
    Resources,
    TaskState,
    TaskSubmitted,
    matches,
)
from firmament_py.scheduler import Scheduler
from firmament_py.sdk import (
    UNSCHEDULED_COST,
    ArcDescriptor,
    EquivClassId,
    PolicyManager,
)
from firmament_py.sdk.testing import PolicyHarness
from firmament_py.sdk.types import ClusterView
from firmament_py.zoe.application import Application, Component, ComponentClass
from firmament_py.zoe.capacity import GIB, ClusterCapacity, Demand
from firmament_py.zoe.cli import zoe
from firmament_py.zoe.experiment import ZOE_PREEMPTION, ZOE_TURNAROUND
from firmament_py.zoe.placement import FlowPlacement
from firmament_py.zoe.simulator import ZoeSimulator

UNIT = Demand(1000, GIB)


def request(cpu: int, ram_gib: int) -> Resources:
    return Resources(cpu_millicores=cpu, ram_bytes=ram_gib * GIB)


def make(name: str, cores: int, elastic: int, work: float, *, size: Demand = UNIT) -> Application:
    components = (Component(ComponentClass.CORE, size),) * cores + (
        Component(ComponentClass.ELASTIC, size),
    ) * elastic
    return Application(name, 0.0, work, components)


def class_arcs(
    manager: PolicyManager, cluster: ClusterView, equiv_class: EquivClassId
) -> dict[str, ArcDescriptor]:
    """A request class's arcs to machines, by machine, as the per-item hooks give them."""
    return {
        ref.id: manager.equiv_class_to_resource(
            equiv_class=equiv_class, resource=cluster.resource(ref), cluster=cluster
        )
        for ref in manager.equiv_class_preference_arcs(equiv_class=equiv_class, cluster=cluster)
    }


def test_the_policy_routes_by_request_and_class_and_prices_waiting() -> None:
    state = ClusterState()
    state.apply(MachineAdded(time=0, machine_id="big", capacity=request(8000, 8), slots=100))
    state.apply(MachineAdded(time=0, machine_id="small", capacity=request(2000, 8), slots=100))
    core = {CLASS_LABEL: "core"}
    state.apply(TaskSubmitted(time=0, task_id=1, job_id="a", request=request(4000, 1), labels=core))
    state.apply(TaskSubmitted(time=0, task_id=2, job_id="a", request=request(1000, 1)))
    harness = PolicyHarness(ZoePolicy(), state)
    manager, cluster = harness.manager, harness.cluster
    core_class = request_class("core", request(4000, 1))
    assert manager.task_equiv_classes(task=cluster.task(1), cluster=cluster) == (core_class,)
    # A 4-core component fits only the big machine; the one waiting is dealt a slot there
    # first (core before elastic), and the elastic one gets room on both machines.
    # Its cost: what stays free there, half the cpu and 7/8 of the ram: 1000 x (0.5 + 0.875) / 2.
    assert class_arcs(manager, cluster, core_class) == {"big": ArcDescriptor(688, capacity=1)}
    elastic = class_arcs(manager, cluster, request_class("elastic", request(1000, 1)))
    assert {m: arc.capacity for m, arc in elastic.items()} == {"big": 1, "small": 1}
    # Best fit: the small machine would be left fuller, so it is the cheaper.
    assert elastic["small"].cost < elastic["big"].cost
    # Core components wait at a far higher price than elastic ones.
    waiting = [manager.task_to_unscheduled(task=cluster.task(t), cluster=cluster) for t in (1, 2)]
    assert [w.cost for w in waiting] == [CORE_WAITING_COST, UNSCHEDULED_COST]


def test_figure_1_through_the_flow_scheduler() -> None:
    apps = [make("A", 3, 4, 50), make("B", 3, 3, 40), make("C", 3, 5, 60), make("D", 3, 2, 30)]
    capacity = ClusterCapacity.uniform(1, 10, 10)
    with FlowPlacement(capacity, policy=ZoePolicy()) as placement:
        result = ZoeSimulator(apps, capacity, scheduler="flexible", placement=placement).run()
        placement.scheduler.state.validate()
        assert placement.refused_decisions == 0
    assert result.summary()["turnaround_mean"] == 21.875
    assert result.records["D"].finished == 33.5


def test_gang_check_removes_every_placed_core() -> None:
    capacity = ClusterCapacity.uniform(2, 4, 64)
    blocker = make("blocker", 3, 0, 100, size=Demand(1500, GIB))  # 4.5 cores: both machines
    wide = Application(
        "wide",
        0.0,
        3,
        (Component(ComponentClass.CORE, Demand(500, GIB)),) * 2
        + (Component(ComponentClass.CORE, Demand(3000, GIB)),),
    )
    with FlowPlacement(capacity, policy=ZoePolicy()) as placement:
        outcome = placement.realize(0.0, [blocker], {"blocker": 0})
        assert outcome.failed == ()
        # 3.5 cores are free in total, enough for wide's 4 cores?  No: and neither machine has
        # 3 free cores for its worker, while its two coordinators fit: they must not stay.
        outcome = placement.realize(1.0, [blocker, wide], {"blocker": 0, "wide": 0})
        assert outcome.failed == ("wide",)
        core, elastic = placement.tasks_of("wide")
        assert core == [] and elastic == []
        running = [t for t in placement.scheduler.state.tasks.values() if t.machine_id]
        assert {t.job_id for t in running} == {"blocker"} and len(running) == 3
        placement.scheduler.state.validate()


@st.composite
def small_workloads(draw: st.DrawFn) -> list[Application]:
    apps = []
    for index in range(draw(st.integers(1, 6))):
        size = Demand(draw(st.sampled_from([500, 1000, 2000, 3000])), draw(st.integers(1, 4)) * GIB)
        cores, elastic = draw(st.integers(3, 4)), draw(st.integers(0, 5))
        components = (Component(ComponentClass.CORE, size),) * cores + (
            Component(ComponentClass.ELASTIC, size),
        ) * elastic
        apps.append(
            Application(
                f"app{index}", draw(st.integers(0, 20)), draw(st.integers(1, 60)), components
            )
        )
    return apps


@settings(max_examples=25, deadline=None)
@given(small_workloads(), st.sampled_from(["flexible", "malleable", "rigid"]))
def test_random_workloads_through_the_flow_scheduler(
    apps: list[Application], scheduler: str
) -> None:
    capacity = ClusterCapacity.uniform(3, 4, 8)
    with FlowPlacement(capacity, policy=ZoePolicy()) as placement:

        class Checked(ZoeSimulator):
            def _realize(self) -> None:
                super()._realize()
                state = placement.scheduler.state
                state.validate()  # no machine over its cpu, ram or slots
                for application in self.scheduler.serving:
                    core, elastic = placement.tasks_of(application.app_id)
                    assert placement.running(core) == len(application.core)  # the whole gang
                    assert len(elastic) == self.elastic_running[application.app_id]
                    assert len(elastic) <= self.scheduler.grants[application.app_id]

        result = Checked(apps, capacity, scheduler=scheduler, placement=placement).run()
        assert placement.refused_decisions == 0
    for record in result.records.values():
        assert record.finished is not None or record.refused is not None


# ---------------------------------------------------------------------- label selectors

GPU = LabelSelector.equals("gpu", "true")


def test_tasks_with_selectors_get_classes_reaching_only_matching_machines() -> None:
    state = ClusterState()
    for machine_id, labels in (("plain", {"disk": "ssd"}), ("gpu", {"gpu": "true"})):
        state.apply(
            MachineAdded(
                time=0, machine_id=machine_id, capacity=request(8000, 8), slots=8, labels=labels
            )
        )
    core = {CLASS_LABEL: "core"}
    state.apply(TaskSubmitted(time=0, task_id=1, job_id="a", request=request(1000, 1), labels=core))
    state.apply(
        TaskSubmitted(
            time=0,
            task_id=2,
            job_id="a",
            request=request(1000, 1),
            labels=core,
            selectors=(GPU,),
        )
    )
    # A larger request, of tasks that want an SSD: the gpu machine's limit does not count it,
    # since no task with it may go there.
    state.apply(
        TaskSubmitted(
            time=0,
            task_id=3,
            job_id="b",
            request=request(4000, 1),
            selectors=(LabelSelector.equals("disk", "ssd"),),
        )
    )
    harness = PolicyHarness(ZoePolicy(), state)
    manager, cluster = harness.manager, harness.cluster
    plain_class = request_class("core", request(1000, 1))
    gpu_class = request_class("core", request(1000, 1), (GPU,))
    assert plain_class != gpu_class
    assert manager.task_equiv_classes(task=cluster.task(1), cluster=cluster) == (plain_class,)
    assert manager.task_equiv_classes(task=cluster.task(2), cluster=cluster) == (gpu_class,)
    shares = {
        equiv_class: {
            m: arc.capacity for m, arc in class_arcs(manager, cluster, equiv_class).items()
        }
        for equiv_class in (plain_class, gpu_class)
    }
    assert shares == {plain_class: {"plain": 1, "gpu": 1}, gpu_class: {"gpu": 1}}
    # The SSD request is dealt only the machine with an SSD.
    ssd_class = request_class("elastic", request(4000, 1), (LabelSelector.equals("disk", "ssd"),))
    assert list(class_arcs(manager, cluster, ssd_class)) == ["plain"]


@settings(max_examples=25, deadline=None)
@given(
    gpus=st.lists(st.booleans(), min_size=1, max_size=4),
    tasks=st.lists(
        st.tuples(
            st.sampled_from(["core", "elastic"]),
            st.sampled_from([500, 1000, 2000]),
            st.integers(1, 3),
            st.booleans(),
        ),
        min_size=1,
        max_size=30,
    ),
)
def test_hallmark_tasks_with_selectors_land_only_on_matching_machines(
    gpus: list[bool], tasks: list[tuple[str, int, int, bool]]
) -> None:
    """Tasks with label selectors only ever land on machines that satisfy them, nothing is
    refused, no machine is overcommitted, and once quiet no waiting task fits anywhere."""
    with Scheduler(ZoePolicy()) as scheduler:
        for index, gpu in enumerate(gpus):
            scheduler.handle(
                MachineAdded(
                    time=0,
                    machine_id=f"m{index}",
                    capacity=request(4000, 8),
                    slots=4,
                    labels={"gpu": "true"} if gpu else {},
                )
            )
        for task_id, (kind, cpu, ram_gib, gpu) in enumerate(tasks):
            scheduler.handle(
                TaskSubmitted(
                    time=0,
                    task_id=task_id,
                    job_id=f"app{task_id % 3}",
                    request=request(cpu, ram_gib),
                    labels={CLASS_LABEL: kind},
                    selectors=(GPU,) if gpu else (),
                )
            )
        rounds = scheduler.run_until_quiet(0, max_rounds=40)
        assert not rounds[-1].decided, "not quiet after 40 rounds"
        state = scheduler.state
        for result in rounds:
            assert not result.refused, result.refused
            assert not result.task_errors
            for delta in result.deltas:
                if state.tasks[delta.task].selectors:
                    assert delta.to_machine is not None
                    assert state.machines[delta.to_machine].labels.get("gpu") == "true"
        state.validate()
        for task in state.tasks.values():
            if task.state is TaskState.RUNNABLE:
                assert not any(
                    m.free_slots > 0
                    and task.request.fits_within(m.free)
                    and matches(task.selectors, m.labels)
                    for m in state.machines.values()
                ), task


# ---------------------------------------------------------------------- the command line


def test_cli_simulate_prints_a_summary() -> None:
    result = CliRunner().invoke(
        zoe, ["simulate", "--apps", "60", "--scheduler", "malleable", "--sort", "sjf-3d"]
    )
    assert result.exit_code == 0, result.output
    assert "zoe: malleable, sort sjf-3d" in result.output and "turnaround" in result.output


def test_cli_reads_a_workload_and_names_bad_fields(tmp_path: Path) -> None:
    good = tmp_path / "good.json"
    good.write_text(
        json.dumps(
            [
                {
                    "id": "A",
                    "arrival": 0,
                    "work": 50,
                    "components": [
                        {"class": "core", "cpu_millicores": 1000, "ram_bytes": GIB, "count": 3},
                        {"class": "elastic", "cpu_millicores": 1000, "ram_bytes": GIB, "count": 4},
                    ],
                }
            ]
        )
    )
    result = CliRunner().invoke(zoe, ["simulate", "--workload", str(good), "--preemptive"])
    assert result.exit_code == 0, result.output
    assert "1 finished" in result.output
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"id": "B", "arrival": 0, "work": 1, "components": [{}]}]))
    result = CliRunner().invoke(zoe, ["simulate", "--workload", str(bad)])
    assert result.exit_code != 0
    assert "application 'B': components[0].class is missing" in result.output


def test_cli_refuses_bad_options() -> None:
    result = CliRunner().invoke(zoe, ["simulate", "--sort", "lifo"])
    assert result.exit_code != 0 and "unknown sorting policy 'lifo'" in result.output
    result = CliRunner().invoke(zoe, ["simulate", "--scheduler", "rigid", "--preemptive"])
    assert result.exit_code != 0 and "only the flexible scheduler preempts" in result.output


def test_experiments_run_at_test_scale(tmp_path: Path) -> None:
    for experiment in (ZOE_TURNAROUND, ZOE_PREEMPTION):
        result = experiment.run(tmp_path, scale="test")
        assert {path.suffix for path in result.files} == {".csv", ".png", ".md"}
        assert result.claims and all(claim.ours for claim in result.claims)
        assert "turnaround_mean_s" in result.metrics()
