"""The NoMora policy: its costs against values worked out by hand from the papers' equations,
root first, the thresholds, the waiting and staying costs, and end to end through the scheduler:
tasks land on the machines closest to their root, costs follow new latency samples, and a
latency change moves a running task only when preemption is on; and the hallmark for tasks with
label selectors: they only ever land on machines that satisfy them, and nothing is refused."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from firmament_py.model import (
    ClusterState,
    LabelSelector,
    MachineAdded,
    MachineFailed,
    Resources,
    TaskCompleted,
    TaskState,
    TaskSubmitted,
    matches,
)
from firmament_py.model.events import LatencySample
from firmament_py.nomora.policy import (
    CLUSTER_AGGREGATOR,
    NomoraPolicy,
    NomoraPreemptionPolicy,
    job_class,
    selector_aggregator,
)
from firmament_py.nomora.settings import BetaMode, NomoraSettings
from firmament_py.scheduler import DeltaKind, Scheduler
from firmament_py.sdk.testing import PolicyHarness

SECOND = 1_000_000
TOPOLOGY = [  # machine, rack, pod
    ("m0", "r0", "p0"),
    ("m1", "r0", "p0"),
    ("m2", "r0", "p0"),
    ("m3", "r1", "p0"),
    ("m4", "r2", "p1"),
    ("m5", "r2", "p1"),
]
# Memcached (eq. 2) at each latency from m0, and its cost (100 / p, two digits):
#   m1 100 µs: 0.7966 -> 130;  m2 30 µs: 1 -> 100;  m3 200 µs: 0.5966 -> 170;
#   m4 500 µs: 0.304 -> 330;  m5 1,200 µs: beyond the table, its worst p(1000) = 0.16 -> 630;
#   m0 itself: 2 µs -> 100.
FROM_M0 = {"m1": 100.0, "m2": 30.0, "m3": 200.0, "m4": 500.0, "m5": 1200.0}


def _state(slots: int = 4) -> ClusterState:
    state = ClusterState()
    for machine, rack, pod in TOPOLOGY:
        state.apply(
            MachineAdded(
                time=0,
                machine_id=machine,
                capacity=Resources(),
                slots=slots,
                rack_id=rack,
                pod_id=pod,
            )
        )
    for peer, latency in FROM_M0.items():
        state.apply(LatencySample(time=0, machine_id="m0", peer_id=peer, latency_us=latency))
    return state


def _job(state: ClusterState, tasks: int, *, app: str = "memcached", time: int = 0) -> None:
    for task_id in range(tasks):
        state.apply(
            TaskSubmitted(time=time, task_id=task_id, job_id="j", labels={"nomora.app": app})
        )


def _arcs(harness: PolicyHarness, equiv_class: str) -> dict[str, int]:
    manager, cluster = harness.manager, harness.cluster
    arcs = {}
    for ref in manager.equiv_class_preference_arcs(equiv_class=equiv_class, cluster=cluster):
        arc = manager.equiv_class_to_resource(
            equiv_class=equiv_class, resource=cluster.resource(ref), cluster=cluster
        )
        arcs[f"{ref.kind.value}:{ref.id}"] = arc.cost
    for target in manager.equiv_class_to_equiv_class_arcs(equiv_class=equiv_class, cluster=cluster):
        arc = manager.equiv_class_to_equiv_class(source=equiv_class, target=target, cluster=cluster)
        arcs[f"class:{target}"] = arc.cost
    return arcs


def test_costs_follow_the_papers_equations_with_wide_thresholds() -> None:
    state = _state()
    _job(state, 3)
    state.place(0, "m0", time=0)
    policy = NomoraPolicy(NomoraSettings(machine_threshold=200, rack_threshold=200))
    harness = PolicyHarness(policy, state)
    for task_id in (1, 2):
        harness.manager.task_equiv_classes(
            task=harness.cluster.task(task_id), cluster=harness.cluster
        )
    prices = policy.prices("j", harness.cluster)
    assert prices is not None
    assert {m: prices.cost_on(m) for m, _, _ in TOPOLOGY} == {
        "m0": 100, "m1": 130, "m2": 100, "m3": 170, "m4": 330, "m5": 630,
    }  # fmt: skip
    # Racks cost their worst machine: r0 130, r1 170, r2 630; X the worst rack, 630. An arc no
    # cheaper than another path to the same machines is left out (m1 = r0, m3 = r1, r2 = X).
    assert _arcs(harness, job_class("j")) == {
        "machine:m0": 100,
        "machine:m2": 100,
        "rack:r0": 130,
        "rack:r1": 170,
        f"class:{CLUSTER_AGGREGATOR}": 630,
    }


def test_the_papers_thresholds_keep_only_the_best_machines() -> None:
    state = _state()
    _job(state, 3)
    state.place(0, "m0", time=0)
    harness = PolicyHarness(NomoraPolicy(), state)  # p_m 105, p_r 110
    harness.manager.task_equiv_classes(task=harness.cluster.task(1), cluster=harness.cluster)
    # r0's worst machine (m1, 130) is over 110: no rack arc; only the machines costing 100.
    assert _arcs(harness, job_class("j")) == {
        "machine:m0": 100,
        "machine:m2": 100,
        f"class:{CLUSTER_AGGREGATOR}": 630,
    }
    wider = PolicyHarness(
        NomoraPolicy(NomoraSettings(machine_threshold=110, rack_threshold=130)), state
    )
    wider.manager.task_equiv_classes(task=wider.cluster.task(1), cluster=wider.cluster)
    assert _arcs(wider, job_class("j")) == {
        "machine:m0": 100,
        "machine:m2": 100,
        "rack:r0": 130,
        f"class:{CLUSTER_AGGREGATOR}": 630,
    }


def test_the_root_goes_first_and_its_tasks_have_nowhere_to_go_until_it_runs() -> None:
    state = _state()
    _job(state, 3)
    harness = PolicyHarness(NomoraPolicy(), state)
    manager, cluster = harness.manager, harness.cluster
    root, other = cluster.task(0), cluster.task(1)
    assert manager.task_equiv_classes(task=root, cluster=cluster) == (CLUSTER_AGGREGATOR,)
    assert (
        manager.task_to_equiv_class(task=root, equiv_class=CLUSTER_AGGREGATOR, cluster=cluster).cost
        == 1
    )
    preferred = manager.task_preference_arcs(task=root, cluster=cluster)
    assert len(preferred) == 1 and preferred[0].kind.value == "rack"
    assert (
        manager.task_to_resource(
            task=root, resource=cluster.resource(preferred[0]), cluster=cluster
        ).cost
        == 0
    )
    assert manager.task_equiv_classes(task=other, cluster=cluster) == (job_class("j"),)
    assert _arcs(harness, job_class("j")) == {}
    state.place(0, "m0", time=0)
    harness.new_round()
    assert _arcs(harness, job_class("j"))  # now it has arcs


def test_waiting_costs_omega_per_second_plus_gamma() -> None:
    state = _state()
    _job(state, 2)
    harness = PolicyHarness(NomoraPolicy(NomoraSettings(wait_cost_per_second=3)), state)
    state.advance_to(7 * SECOND + SECOND // 2)
    arc = harness.manager.task_to_unscheduled(task=harness.cluster.task(1), cluster=harness.cluster)
    assert arc.cost == 22 + 1001  # omega x 7.5 s, the fraction dropped
    sink = harness.manager.unscheduled_to_sink(
        job=harness.cluster.job("j"), incoming_tasks=2, cluster=harness.cluster
    )
    assert sink.capacity == 2  # the least the scheduler accepts (see the policy's docstring)


def test_staying_costs_the_machine_minus_beta_minus_one() -> None:
    for beta, expected in ((BetaMode.RUN_TIME, 130 - 42 - 1), (BetaMode.ZERO, 130 - 1)):
        state = _state()
        _job(state, 2)
        state.place(0, "m0", time=0)
        state.place(1, "m1", time=0)
        policy = NomoraPolicy(NomoraSettings(preemption=True, beta=beta))
        harness = PolicyHarness(policy, state)
        state.advance_to(42 * SECOND)
        manager, cluster = harness.manager, harness.cluster
        manager.task_equiv_classes(task=cluster.task(1), cluster=cluster)
        arc = manager.task_continuation(
            task=cluster.task(1), machine=cluster.machine("m1"), cluster=cluster
        )
        assert (arc.cost, arc.min_flow) == (expected, 0)
        preempt = manager.task_preemption(task=cluster.task(1), cluster=cluster)
        assert preempt.cost == 1001  # it never waited


def _scheduler(policy: object, slots: int = 2) -> Scheduler:
    scheduler = Scheduler(policy)
    for machine, rack, pod in TOPOLOGY:
        scheduler.handle(
            MachineAdded(
                time=0,
                machine_id=machine,
                capacity=Resources(),
                slots=slots,
                rack_id=rack,
                pod_id=pod,
            )
        )
    return scheduler


def _report(scheduler: Scheduler, root: str, latencies: dict[str, float], time: int) -> None:
    for peer, latency in latencies.items():
        if peer != root:
            scheduler.handle(
                LatencySample(time=time, machine_id=root, peer_id=peer, latency_us=latency)
            )


def _where(scheduler: Scheduler) -> dict[int, str | None]:
    return {t.task_id: t.machine_id for t in scheduler.state.tasks.values()}


def test_end_to_end_tasks_land_next_to_their_root_and_follow_new_samples() -> None:
    with _scheduler(NomoraPolicy(), slots=2) as scheduler:
        for task_id in range(4):
            scheduler.handle(
                TaskSubmitted(
                    time=0, task_id=task_id, job_id="j", labels={"nomora.app": "memcached"}
                )
            )
        first = scheduler.run_round(0)
        assert [d.task for d in first.deltas] == [0]  # the root alone
        root = _where(scheduler)[0]
        assert root is not None
        # Every other machine far (cross-pod class: 300 µs, cost 220), one close (cost 100).
        others = [m for m, _, _ in TOPOLOGY if m != root]
        close, far = others[0], others[1:]
        _report(scheduler, root, {m: 300.0 for m in far} | {close: 15.0}, SECOND)
        scheduler.run_round(SECOND)
        where = _where(scheduler)
        # Two slots next to the root (one is its own), two on the close machine: the three
        # other tasks take the root's free slot and the close machine's two.
        assert sorted(where[t] for t in (1, 2, 3)) == sorted([root, close, close])
        scheduler.state.validate()
        # A new sample makes a far machine close: a new task of the job goes there, the
        # cheapest with room (the others are full).
        target = far[0]
        _report(scheduler, root, {target: 10.0}, 2 * SECOND)
        scheduler.handle(
            TaskSubmitted(
                time=2 * SECOND, task_id=4, job_id="j", labels={"nomora.app": "memcached"}
            )
        )
        result = scheduler.run_round(2 * SECOND)
        assert not result.task_errors and not result.refused
        assert _where(scheduler)[4] == target


def test_the_threshold_keeps_tasks_waiting_for_nothing_but_x() -> None:
    # With every machine beyond the threshold, tasks still run: through X, at the worst cost.
    with _scheduler(NomoraPolicy(), slots=1) as scheduler:
        for task_id in range(3):
            scheduler.handle(
                TaskSubmitted(time=0, task_id=task_id, job_id="j", labels={"nomora.app": "strads"})
            )
        scheduler.run_round(0)
        root = _where(scheduler)[0]
        assert root is not None
        _report(scheduler, root, {m: 400.0 for m, _, _ in TOPOLOGY}, SECOND)
        result = scheduler.run_round(SECOND)
        assert result.count(DeltaKind.PLACE) == 2
        scheduler.state.validate()


def _moved_after_latency_change(policy: object) -> bool:
    """Root and one task placed close together; then the task's machine becomes far and another
    close: does the task move?"""
    with _scheduler(policy, slots=1) as scheduler:
        for task_id in range(2):
            scheduler.handle(
                TaskSubmitted(
                    time=0, task_id=task_id, job_id="j", labels={"nomora.app": "memcached"}
                )
            )
        scheduler.run_round(0)
        root = _where(scheduler)[0]
        assert root is not None
        others = [m for m, _, _ in TOPOLOGY if m != root]
        first, second = others[0], others[1]
        _report(scheduler, root, {m: 300.0 for m in others} | {first: 10.0}, SECOND)
        scheduler.run_round(SECOND)
        assert _where(scheduler)[1] == first
        _report(scheduler, root, {first: 600.0, second: 10.0}, 2 * SECOND)
        result = scheduler.run_round(2 * SECOND)
        assert not result.task_errors and not result.refused
        scheduler.state.validate()
        return _where(scheduler)[1] == second


def test_a_latency_change_moves_a_task_only_with_preemption() -> None:
    assert not _moved_after_latency_change(NomoraPolicy())
    beta_zero = NomoraSettings(preemption=True, beta=BetaMode.ZERO)
    assert _moved_after_latency_change(NomoraPolicy(beta_zero))
    # With beta = time run, a task that ran long enough stays: here it ran 1 s (credit 1), and
    # moving saves 630 - 100, so it still moves; the credit only holds back small gains.
    assert _moved_after_latency_change(NomoraPreemptionPolicy())


def test_unknown_applications_are_reported_per_task() -> None:
    with _scheduler(NomoraPolicy(), slots=1) as scheduler:
        scheduler.handle(
            TaskSubmitted(time=0, task_id=0, job_id="j", labels={"nomora.app": "minecraft"})
        )
        result = scheduler.run_round(0)
        assert len(result.task_errors) == 1
        assert "unknown NoMora application 'minecraft'" in str(result.task_errors[0])


def test_the_policy_loads_function_files(tmp_path: object) -> None:
    from pathlib import Path

    from firmament_py.nomora.performance import PerformanceFunction, save_function

    path = save_function(
        PerformanceFunction("kv", 10.0, (1.0, -1e-3)), Path(str(tmp_path)) / "kv.json"
    )
    policy = NomoraPolicy(function_files=[path])
    assert policy.table("kv").cost_of(500.0) == 200  # p = 0.5


# ---------------------------------------------------------------------- label selectors

GPU = LabelSelector.equals("gpu", "true")
GPU_MACHINES = {"m2", "m3", "m4"}  # m2 shares r0 with m0 and m1; m3 is all of r1; m4 half r2


def _labelled_state() -> ClusterState:
    state = ClusterState()
    for machine, rack, pod in TOPOLOGY:
        state.apply(
            MachineAdded(
                time=0,
                machine_id=machine,
                capacity=Resources(),
                slots=4,
                rack_id=rack,
                pod_id=pod,
                labels={"gpu": "true"} if machine in GPU_MACHINES else {},
            )
        )
    for peer, latency in FROM_M0.items():
        state.apply(LatencySample(time=0, machine_id="m0", peer_id=peer, latency_us=latency))
    return state


def test_a_task_with_selectors_reaches_only_matching_machines() -> None:
    state = _labelled_state()
    state.apply(TaskSubmitted(time=0, task_id=0, job_id="j", labels={"nomora.app": "memcached"}))
    state.apply(
        TaskSubmitted(
            time=0, task_id=1, job_id="j", labels={"nomora.app": "memcached"}, selectors=(GPU,)
        )
    )
    state.place(0, "m0", time=0)
    policy = NomoraPolicy(NomoraSettings(machine_threshold=200, rack_threshold=200))
    harness = PolicyHarness(policy, state)
    manager, cluster = harness.manager, harness.cluster
    classes = manager.task_equiv_classes(task=cluster.task(1), cluster=cluster)
    assert classes == (job_class("j", (GPU,)),)
    # Matching: m2 100, m3 170, m4 330; X_S costs the worst of them, 330. r1 (all gpu) gets its
    # rack arc (170 <= 200), m3 none (its rack's arc costs as much); r0 and r2 have machines
    # without the label, so no rack arc; m4 is over p_m and reached through X_S.
    aggregator = selector_aggregator((GPU,))
    assert _arcs(harness, classes[0]) == {
        "machine:m2": 100,
        "rack:r1": 170,
        f"class:{aggregator}": 330,
    }
    reached = manager.equiv_class_preference_arcs(equiv_class=aggregator, cluster=cluster)
    assert {ref.id for ref in reached} == GPU_MACHINES
    # The job's tasks without selectors keep J, unchanged.
    assert _arcs(harness, job_class("j")) == {
        "machine:m0": 100,
        "machine:m2": 100,
        "rack:r0": 130,
        "rack:r1": 170,
        f"class:{CLUSTER_AGGREGATOR}": 630,
    }


def test_a_root_with_selectors_starts_on_a_matching_machine() -> None:
    state = _labelled_state()
    harness = PolicyHarness(NomoraPolicy(), state)
    manager, cluster = harness.manager, harness.cluster
    for job in range(12):  # enough jobs to draw every rack
        state.apply(TaskSubmitted(time=0, task_id=job, job_id=f"j{job}", selectors=(GPU,)))
        root = cluster.task(job)
        aggregator = selector_aggregator((GPU,))
        assert manager.task_equiv_classes(task=root, cluster=cluster) == (aggregator,)
        assert (
            manager.task_to_equiv_class(task=root, equiv_class=aggregator, cluster=cluster).cost
            == 1
        )
        for ref in manager.task_preference_arcs(task=root, cluster=cluster):
            below = cluster.resource(ref).children if ref.kind.value == "rack" else (ref,)
            assert {m.id for m in below} <= GPU_MACHINES, ref


def _random_jobs(
    scheduler: Scheduler, jobs: list[tuple[bool, int, bool]], *, time: int, first: int
) -> int:
    """Submit jobs given as (root has selectors, other tasks, others have selectors)."""
    task_id = first
    for number, (root_gpu, others, others_gpu) in enumerate(jobs):
        for index in range(others + 1):
            gpu = root_gpu if index == 0 else others_gpu
            scheduler.handle(
                TaskSubmitted(
                    time=time,
                    task_id=task_id,
                    job_id=f"j{first}-{number}",
                    labels={"nomora.app": "memcached"},
                    selectors=(GPU,) if gpu else (),
                )
            )
            task_id += 1
    return task_id


@settings(max_examples=25, deadline=None)
@given(
    gpus=st.sets(st.sampled_from([m for m, _, _ in TOPOLOGY]), min_size=1),
    waves=st.lists(
        st.lists(st.tuples(st.booleans(), st.integers(0, 5), st.booleans()), max_size=4),
        min_size=1,
        max_size=3,
    ),
    preemption=st.booleans(),
    slots=st.integers(1, 3),
)
def test_hallmark_tasks_with_selectors_land_only_on_matching_machines(
    gpus: set[str], waves: list[list[tuple[bool, int, bool]]], preemption: bool, slots: int
) -> None:
    """Whatever the labels, the jobs and the thresholds' verdicts, a task with selectors is only
    ever placed on (or moved to) a machine that satisfies them, no decision is refused, and
    once quiet no waiting task whose root runs (nor a waiting root) has a matching free slot."""
    policy = NomoraPolicy(NomoraSettings(preemption=preemption))
    with Scheduler(policy) as scheduler:
        for machine, rack, pod in TOPOLOGY:
            scheduler.handle(
                MachineAdded(
                    time=0,
                    machine_id=machine,
                    capacity=Resources(),
                    slots=slots,
                    rack_id=rack,
                    pod_id=pod,
                    labels={"gpu": "true"} if machine in gpus else {},
                )
            )
        next_task = 0
        for wave, jobs in enumerate(waves):
            time = wave * 40 * SECOND
            next_task = _random_jobs(scheduler, jobs, time=time, first=next_task)
            rounds = []
            for step in range(30):
                rounds.append(scheduler.run_round(time + step * SECOND))
                if not rounds[-1].decided:
                    break
            # With preemption a root may keep being moved to make room for its own tasks (its
            # move costs only beta + 1) until it has run long enough: no quiet round is promised.
            quiet = not rounds[-1].decided
            assert quiet or preemption, "not quiet after 30 rounds"
            for result in rounds:
                assert not result.refused, result.refused
                assert not result.task_errors, result.task_errors
                for delta in result.deltas:
                    task = scheduler.state.tasks[delta.task]
                    if task.selectors and delta.to_machine is not None:
                        assert delta.to_machine in gpus, (delta, gpus)
            scheduler.state.validate()
            machines = scheduler.state.machines
            for task in scheduler.state.tasks.values():
                if task.state is TaskState.RUNNING and task.selectors:
                    assert task.machine_id in gpus
                if quiet and task.state is TaskState.RUNNABLE:
                    job = scheduler.state.jobs[task.job_id]
                    root = scheduler.state.tasks[job.root_task_id]
                    if root.state is TaskState.RUNNING or task.task_id == root.task_id:
                        assert not any(
                            m.free_slots > 0 and matches(task.selectors, m.labels)
                            for m in machines.values()
                        ), task


def test_tasks_of_a_finished_root_whose_machine_left_run_anywhere() -> None:
    """The root ran, finished, and its machine failed: its tasks have no latency to be priced
    by any more, so they go anywhere (through X, or X_S with selectors) rather than wait."""
    with _scheduler(NomoraPolicy(), slots=1) as scheduler:
        scheduler.handle(
            TaskSubmitted(time=0, task_id=0, job_id="j", labels={"nomora.app": "memcached"})
        )
        scheduler.run_round(0)
        root = _where(scheduler)[0]
        assert root is not None
        for task_id in (1, 2):
            scheduler.handle(
                TaskSubmitted(
                    time=SECOND, task_id=task_id, job_id="j", labels={"nomora.app": "memcached"}
                )
            )
        scheduler.handle(TaskCompleted(time=SECOND, task_id=0))
        scheduler.handle(MachineFailed(time=SECOND, machine_id=root, reason="test"))
        result = scheduler.run_round(SECOND)
        assert result.count(DeltaKind.PLACE) == 2 and not result.refused
