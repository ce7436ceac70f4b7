"""Tests of the synthetic Google-shaped workload: determinism, time order, the calibrated shape
(job sizes, runtimes, steady state by Little's law, requests), scaling, load and speedup,
machine churn, the single-job helper, and the errors bad specs raise."""

from __future__ import annotations

import dataclasses
import itertools
from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from firmament_policies.cpu_mem import CpuMemPolicy
from firmament_py.model import ClusterState, MachineAdded, MachineFailed
from firmament_py.scheduler import Scheduler
from firmament_py.sim.simulator import Accounting, SimulationConfig, Simulator
from firmament_py.sim.synthetic import (
    PRESETS,
    JobClass,
    JobSizes,
    LogNormal,
    SyntheticSpec,
    SyntheticWorkload,
    preset,
    single_job_workload,
)
from firmament_py.sim.workload import TaskArrival, WorkloadItem, check_order

S = 1_000_000
MINUTE = 60 * S


def arrivals(items: Iterable[WorkloadItem], job_class: str | None = None) -> list[TaskArrival]:
    tasks = [item for item in items if isinstance(item, TaskArrival)]
    return tasks if job_class is None else of_class(tasks, job_class)


def of_class(tasks: Iterable[TaskArrival], job_class: str) -> list[TaskArrival]:
    return [task for task in tasks if task.submitted.labels["class"] == job_class]


def live_counts(tasks: Sequence[TaskArrival], times: np.ndarray) -> np.ndarray:
    """How many of `tasks` run at each of `times`, had each started on submission (no
    scheduler: a task is live from its submission until submission + runtime)."""
    starts = np.sort([task.time for task in tasks])
    ends = np.sort([task.time + (task.runtime or 0) for task in tasks])
    live: np.ndarray = np.searchsorted(starts, times, side="right") - np.searchsorted(
        ends, times, side="right"
    )
    return live


def job_sizes(tasks: Iterable[TaskArrival]) -> np.ndarray:
    return np.array(list(Counter(task.submitted.job_id for task in tasks).values()))


# ------------------------------------------------------------------------- determinism, order


def test_the_same_seed_gives_the_same_items_and_another_seed_other_items() -> None:
    spec = preset("small", machine_failures_per_day=5.0)
    first = list(SyntheticWorkload(spec, seed=3).items(10 * MINUTE))
    again = list(SyntheticWorkload(spec, seed=3).items(10 * MINUTE))
    other = list(SyntheticWorkload(spec, seed=4).items(10 * MINUTE))
    assert first == again
    assert first != other
    assert any(isinstance(item, MachineFailed) for item in first)


def test_a_shorter_run_is_a_prefix_of_a_longer_one() -> None:
    spec = preset("small", speedup=50.0, machine_failures_per_day=5.0)
    longer = list(SyntheticWorkload(spec, seed=1).items(20 * MINUTE))
    shorter = list(SyntheticWorkload(spec, seed=1).items(7 * MINUTE))
    assert longer[: len(shorter)] == shorter
    assert len(longer) > len(shorter)
    assert all(item.time < 7 * MINUTE for item in shorter)
    assert longer[len(shorter)].time >= 7 * MINUTE


@settings(max_examples=25, deadline=None)
@given(
    machines=st.integers(1, 80),
    load=st.floats(0.1, 2.0),
    speedup=st.floats(1.0, 500.0),
    failures=st.sampled_from([0.0, 2.0]),
    seed=st.integers(0, 2**32),
)
def test_items_are_in_time_order_with_machines_first_and_the_steady_state_at_zero(
    machines: int, load: float, speedup: float, failures: float, seed: int
) -> None:
    spec = preset(
        "small", machines=machines, load=load, speedup=speedup, machine_failures_per_day=failures
    )
    items = list(check_order(SyntheticWorkload(spec, seed).items(2 * MINUTE)))
    added = [item for item in items[:machines] if isinstance(item, MachineAdded)]
    assert {item.machine_id for item in added} == {f"m{i}" for i in range(machines)}
    tasks = arrivals(items)
    at_zero = [task for task in tasks if task.time == 0]
    expected = sum(round(spec.live_tasks(job_class)) for job_class in spec.job_classes)
    assert len(at_zero) == expected
    assert len({task.submitted.task_id for task in tasks}) == len(tasks)
    largest = spec.largest_machine
    for task in tasks:
        assert task.submitted.request.fits_within(largest)
        assert task.submitted.request.cpu_millicores >= 1
        assert task.runtime is not None and task.runtime >= 1


def test_the_workload_replays_into_the_cluster_model_without_complaint() -> None:
    """Every event is one the cluster state accepts: unique task ids, a job's tasks together,
    machines failing only while up and coming back only after failing."""
    spec = preset("small", machines=20, speedup=20.0, machine_failures_per_day=50.0)
    state = ClusterState()
    kinds: Counter[str] = Counter()
    for item in SyntheticWorkload(spec, seed=5).items(60 * MINUTE):
        kinds[type(item).__name__] += 1
        state.apply(item.submitted if isinstance(item, TaskArrival) else item)
    assert kinds["MachineFailed"] > 0
    assert kinds["MachineAdded"] > 20  # some machines came back
    assert len(state.machines) >= 20 - kinds["MachineFailed"]


def test_the_simulator_runs_a_small_preset_end_to_end() -> None:
    """The real scheduler takes the whole workload; with a policy that respects requests
    (the slot-only defaults may route a task where it does not fit, and the cluster refuses
    it), every task of a cluster at 50% slot utilisation is placed."""
    items = list(SyntheticWorkload(preset("small", machines=10), seed=0).items(30 * S))
    simulator = Simulator(
        Scheduler(policy=CpuMemPolicy()),
        items,
        SimulationConfig(accounting=Accounting.NONE, end_time=30 * S),
    )
    result = simulator.run()
    simulator.scheduler.state.validate()
    assert result.rejected_events == 0, result.rejections
    placed = [task for task in result.tasks.values() if task.first_start is not None]
    assert len(placed) == len(arrivals(items)) > 100


def test_without_requests_slot_based_defaults_place_every_task() -> None:
    """The paper's slot-based setting: the same draws, no requests, and the SDK's slot-only
    defaults place everything."""
    with_requests = preset("small", machines=10)
    slots_only = preset("small", machines=10, resource_requests=False)
    items = list(SyntheticWorkload(slots_only, seed=0).items(30 * S))
    reference = arrivals(SyntheticWorkload(with_requests, seed=0).items(30 * S))
    assert [(t.time, t.runtime) for t in arrivals(items)] == [
        (t.time, t.runtime) for t in reference
    ]
    assert {task.submitted.request.as_tuple() for task in arrivals(items)} == {(0, 0, 0, 0, 0)}

    class Defaults:
        """The SDK's defaults alone: slots only."""

    simulator = Simulator(
        Scheduler(policy=Defaults()),
        items,
        SimulationConfig(accounting=Accounting.NONE, end_time=30 * S),
    )
    result = simulator.run()
    assert result.rejected_events == 0
    assert all(task.first_start is not None for task in result.tasks.values())


# ------------------------------------------------------------------------- calibrated shape


def test_batch_job_sizes_have_the_trace_shape() -> None:
    """Most jobs have one task, most tasks are in jobs of over 1,000 tasks, 1.2% of jobs have
    over 1,000 tasks [F §4.3], and the full-size cluster sees jobs that large."""
    batch = PRESETS["google"].job_class("batch")
    sizes = batch.sizes.sample(np.random.default_rng(0), 200_000)
    pmf = batch.sizes.pmf()
    k = np.arange(1, pmf.size + 1)
    assert np.mean(sizes == 1) == pytest.approx(0.75, abs=0.005)
    assert np.mean(sizes > 1000) == pytest.approx(0.012, abs=0.001)
    in_large = sizes[sizes > 1000].sum() / sizes.sum()
    assert in_large == pytest.approx((k * pmf)[1000:].sum() / (k * pmf).sum(), abs=0.05)
    assert in_large > 0.8
    assert sizes.max() > 1000
    assert sizes.max() <= 25_000
    assert sizes.mean() == pytest.approx(batch.sizes.mean(), rel=0.1)


def test_job_sizes_truncate_at_the_cap_and_renormalise() -> None:
    sizes = JobSizes(single=0.5, large=0.1, large_above=10, max_size=100)
    for cap in (1, 5, 10, 50, 100, 1000):
        pmf = sizes.pmf(cap)
        assert pmf.size == min(cap, 100)
        assert pmf.sum() == pytest.approx(1.0)
        assert (pmf >= 0).all()
    assert sizes.pmf(5)[0] / sizes.pmf(100)[0] > 1  # the lost mass went to what was left
    assert sizes.sample(np.random.default_rng(1), 1000, cap=7).max() <= 7


def test_arriving_jobs_in_a_run_have_the_shape_too() -> None:
    spec = preset("google-1k", speedup=100.0)
    tasks = [task for task in arrivals(SyntheticWorkload(spec, 2).items(5 * MINUTE), "batch")]
    sizes = job_sizes(task for task in tasks if task.time > 0)
    assert len(sizes) > 1000
    assert np.mean(sizes == 1) == pytest.approx(0.75, abs=0.04)
    assert sizes.max() <= spec.job_size_cap(spec.job_class("batch")) == 2000


def test_batch_runtimes_match_figure_18_at_200x_speedup() -> None:
    """At a 200x speedup the median batch task takes 2.1 s, the 90th and 99th percentiles
    18 s and 92 s [F §7.4]; the generated batch arrivals should match within 10%."""
    spec = preset("google-1k", speedup=200.0, machine_failures_per_day=0.0)
    tasks = arrivals(SyntheticWorkload(spec, 7).items(3 * MINUTE), "batch")
    runtimes_s = np.array([task.runtime for task in tasks if task.time > 0]) / S
    assert runtimes_s.size > 20_000
    for q, paper in ((50, 2.1), (90, 18.0), (99, 92.0)):
        assert np.percentile(runtimes_s, q) == pytest.approx(paper, rel=0.1), q


def test_services_outlive_a_run_and_keep_their_priorities() -> None:
    spec = preset("google-100")
    tasks = arrivals(SyntheticWorkload(spec, 0).items(MINUTE))
    services = [task for task in tasks if task.submitted.labels["class"] == "service"]
    batch = [task for task in tasks if task.submitted.labels["class"] == "batch"]
    assert {task.submitted.priority for task in services} <= {9, 10, 11, 12}
    assert {task.submitted.priority for task in batch} <= set(range(9))
    lasting = np.mean([task.runtime is not None and task.runtime > 3600 * S for task in services])
    assert lasting > 0.95


def test_the_steady_state_holds_by_littles_law() -> None:
    """Tracking submissions and runtimes without a scheduler, the live tasks of a 1,000-machine
    cluster stay at the target over ten simulated minutes (bursts of big jobs come and go, so
    average over time and seeds); the batch class, which turns over quickly at 50x speedup,
    too."""
    spec = preset("google-1k", speedup=50.0)
    times = np.linspace(0, 10 * MINUTE, 41).astype(np.int64)
    total, batch = [], []
    for seed in range(3):
        tasks = arrivals(SyntheticWorkload(spec, seed).items(10 * MINUTE + 1))
        total.append(live_counts(tasks, times).mean())
        batch.append(live_counts(of_class(tasks, "batch"), times).mean())
    assert np.mean(total) == pytest.approx(spec.expected_live_tasks, rel=0.05)
    assert np.mean(batch) == pytest.approx(spec.live_tasks(spec.job_class("batch")), rel=0.2)


def test_littles_law_is_exact_without_heavy_tails() -> None:
    """With single-task jobs and runtimes of a few minutes, live tasks are a Poisson count
    around the target at every instant: a tight check of the rates and the warm-up."""

    def quick(name: str, share: float, median_s: float, accelerated: bool) -> JobClass:
        return JobClass(
            name=name,
            live_share=share,
            runtime_s=LogNormal(median_s, 0.8),
            sizes=JobSizes(single=1.0, large=0.0),
            priorities=((0, 1.0),),
            cpu=LogNormal(0.01, 0.5),
            ram=LogNormal(0.01, 0.5),
            accelerated=accelerated,
        )

    spec = SyntheticSpec(
        machines=100,
        job_classes=(quick("batch", 0.4, 60.0, True), quick("service", 0.6, 120.0, False)),
        load=1.5,
        speedup=3.0,
        machine_failures_per_day=0.0,
    )
    tasks = arrivals(SyntheticWorkload(spec, 11).items(10 * MINUTE))
    times = np.linspace(0, 10 * MINUTE - 1, 21).astype(np.int64)
    for name in ("batch", "service"):
        expected = spec.live_tasks(spec.job_class(name))
        live = live_counts(of_class(tasks, name), times)
        assert live[0] == round(expected)
        assert np.abs(live - expected).max() < 5 * np.sqrt(expected), name
        assert live.mean() == pytest.approx(expected, rel=0.03), name
    submitted = [task for task in of_class(tasks, "batch") if task.time > 0]
    rate = spec.task_rate(spec.job_class("batch"))
    assert rate == pytest.approx(3 * 0.4 * 1.5 * 12 * 100 / LogNormal(60.0, 0.8).mean)
    assert len(submitted) == pytest.approx(rate * 10 * 60, rel=0.05)


def test_machines_have_the_trace_platform_mix_in_racks() -> None:
    machines = SyntheticWorkload(PRESETS["google"], 0).machines()
    assert len(machines) == 12_500
    shapes = Counter(
        (m.capacity.cpu_millicores // 1000, m.capacity.ram_bytes // 2**30) for m in machines
    )
    # Reiss et al.'s counts (6,732, 3,863, 1,001, 795, 126, 52 of 12,569) scaled to 12,500.
    assert shapes == {
        (32, 128): 6695,
        (32, 64): 3842,
        (32, 192): 995,
        (64, 256): 791,
        (16, 64): 125,
        (32, 30): 52,
    }
    racks = Counter(m.rack_id for m in machines)
    assert len(racks) == 313 and max(racks.values()) == 40
    assert {m.slots for m in machines} == {24}
    assert {m.capacity.net_rx_bytes_per_s for m in machines} == {1_250_000_000}


def test_requests_are_small_mostly_with_a_heavy_tail_and_fill_about_half() -> None:
    spec = PRESETS["google-1k"]
    items = list(SyntheticWorkload(spec, 0).items(1))
    tasks = arrivals(items)
    capacity = sum(m.capacity.cpu_millicores for m in items if isinstance(m, MachineAdded))
    cpu = np.array([task.submitted.request.cpu_millicores for task in tasks])
    assert np.median(cpu) < 2_000 < cpu.max()  # under 2 cores typically, some far above
    assert 0.3 < cpu.sum() / capacity < 0.7
    with_net = np.mean([task.submitted.request.net_rx_bytes_per_s > 0 for task in tasks])
    assert 0.1 < with_net < 0.9


# ------------------------------------------------------------------------- scaling, load, speed


@pytest.mark.parametrize("machines", [10, 100, 1_000, 12_500, 40_000])
def test_scaling_keeps_the_load_per_machine(machines: int) -> None:
    google = PRESETS["google"]
    spec = preset("google", machines=machines)
    assert spec.expected_live_tasks / machines == google.expected_live_tasks / 12_500 == 12
    assert spec.slot_utilisation == google.slot_utilisation == 0.5
    for job_class in spec.job_classes:
        assert spec.task_rate(job_class) / machines == pytest.approx(
            google.task_rate(job_class) / 12_500
        )
    cap = spec.job_size_cap(spec.job_class("batch"))
    assert cap == round(25_000 * machines / 12_500)


def test_a_scaled_run_starts_with_twelve_tasks_per_machine() -> None:
    for name, machines in (("google-100", 100), ("small", 50)):
        tasks = arrivals(SyntheticWorkload(PRESETS[name], 0).items(1))
        assert len(tasks) == 12 * machines


def test_load_and_slot_utilisation_set_the_live_tasks() -> None:
    spec = PRESETS["small"].with_slot_utilisation(0.97)
    assert spec.slot_utilisation == pytest.approx(0.97)
    tasks = arrivals(SyntheticWorkload(spec, 0).items(1))
    assert len(tasks) == pytest.approx(0.97 * 24 * 50, abs=1)


def test_speedup_accelerates_batch_only() -> None:
    slow, fast = PRESETS["google"], preset("google", speedup=300.0)
    batch, service = slow.job_class("batch"), slow.job_class("service")
    assert fast.task_rate(batch) == pytest.approx(300 * slow.task_rate(batch))
    assert fast.runtime(batch).median == pytest.approx(420 / 300)
    assert fast.task_rate(service) == slow.task_rate(service)
    assert fast.expected_live_tasks == slow.expected_live_tasks


def test_full_scale_rates_match_the_trace() -> None:
    """About 10 tasks a second (25 million in 29 days) and 150,000 live tasks."""
    google = PRESETS["google"]
    rate = sum(google.task_rate(job_class) for job_class in google.job_classes)
    assert rate == pytest.approx(25e6 / (29 * 86_400), rel=0.1)
    assert google.expected_live_tasks == 150_000


# ------------------------------------------------------------------------- churn, single job


def test_failed_machines_come_back_after_their_repair() -> None:
    spec = preset("small", machine_failures_per_day=100.0, machine_repair_s=120.0)
    items = list(SyntheticWorkload(spec, 9).items(60 * MINUTE))
    down: dict[str, int] = {}
    outages = []
    for item in items[spec.machines :]:
        if isinstance(item, MachineFailed):
            assert item.machine_id not in down
            down[item.machine_id] = item.time
        elif isinstance(item, MachineAdded):
            outages.append(item.time - down.pop(item.machine_id))
    expected_failures = 100.0 * spec.machines / 24
    assert len(outages) == pytest.approx(expected_failures, rel=0.35)
    assert np.mean(outages) / S == pytest.approx(120.0, rel=0.2)


def test_single_job_workload_is_a_steady_cluster_plus_one_job() -> None:
    items = single_job_workload(100, 3_000, slot_utilisation=0.9, seed=2, submit_time_us=5 * S)
    machines = [item for item in items if isinstance(item, MachineAdded)]
    tasks = arrivals(items)
    late = [task for task in tasks if task.time == 5 * S]
    assert len(machines) == 100
    assert len(tasks) - len(late) == round(0.9 * 24 * 100)
    assert len(late) == 3_000 and len({task.submitted.job_id for task in late}) == 1
    assert len({task.submitted.request for task in late}) == 1
    list(check_order(items))
    empty = single_job_workload(10, 50, slot_utilisation=0.0)
    assert len(arrivals(empty)) == 50 and len(empty) == 60


# ------------------------------------------------------------------------- bad specs


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: preset("google", load=-1.0), "load"),
        (lambda: preset("google", speedup=0.0), "speedup"),
        (lambda: preset("google", machines=0), "machines"),
        (lambda: preset("google", machine_failures_per_day=-0.1), "machine_failures_per_day"),
        (lambda: preset("google", slots_per_machine=0), "slots_per_machine"),
        (lambda: preset("gogle"), "unknown synthetic workload preset 'gogle'"),
        (lambda: preset("google", lode=2.0), "no field 'lode'"),
        (lambda: LogNormal(-1.0, 1.0), "median"),
        (lambda: JobSizes(single=0.9, large=0.2), "must not exceed 1"),
        (
            lambda: dataclasses.replace(
                PRESETS["small"],
                job_classes=(dataclasses.replace(PRESETS["small"].job_classes[0], live_share=0.5),),
            ),
            "live_share must sum to 1",
        ),
        (lambda: SyntheticWorkload(PRESETS["small"], seed=-1), "seed"),
        (lambda: SyntheticWorkload(PRESETS["small"]).items(-5), "duration"),
        (lambda: single_job_workload(10, 0), "job_size"),
        (lambda: single_job_workload(10, 5, job_class="interactive"), "no job class"),
    ],
)
def test_bad_specs_raise_value_errors_naming_the_problem(make: object, message: str) -> None:
    assert callable(make)
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        make()


def test_a_thousand_machines_for_ten_minutes_make_the_expected_number_of_items() -> None:
    # How fast this is belongs in bench/, not here.
    count = sum(1 for _ in SyntheticWorkload(PRESETS["google-1k"], 0).items(10 * MINUTE))
    assert count > 13_000


def test_presets_are_the_documented_scales() -> None:
    assert {name: spec.machines for name, spec in PRESETS.items()} == {
        "google": 12_500,
        "google-1k": 1_000,
        "google-100": 100,
        "small": 50,
    }
    assert PRESETS["small"].machine_failures_per_day == 0
    assert list(itertools.islice(SyntheticWorkload(PRESETS["small"]).items(0), 1)) == []
