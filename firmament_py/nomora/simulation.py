"""NoMora's simulation setup (tech report section 6) on this port's simulator, and what it
measures: average application performance, algorithm runtime, placement latency, migrations.

The setup, and where ours differs:

* Workload: Google-shaped (`firmament_py.sim.synthetic`, the "google" preset scaled to the
  cluster, slots only, no machine failures) without single-task jobs, as the paper drops them
  ("they do not communicate with any other task"). Each job is given an application at random,
  50% Memcached, 25% STRADS, 25% TensorFlow (the task label `nomora.app`), from a hash of the
  seed and the job id. The paper replays 24 hours of the real trace on 12,500 machines; we
  replay minutes on hundreds (see `NomoraSetup` and the experiments' scales).
* Topology: racks of 48 machines and pods of 16 racks in the paper. A cluster of a few hundred
  machines would then be one pod, so the scaled-down setups keep racks of 48 and use fewer racks
  per pod (`racks_per_pod`), keeping most pairs of machines across pods, as in the paper.
* Latencies: a trace set replayed by tier with per-pair scaling (`TraceLatency`), one value per
  second. The paper's PTPmesh dataset is not at hand, so the traces are `synthetic_traces`
  (assumed tier medians of 25, 100 and 300 µs). The policy and the measurement read the same
  latencies, as in the paper. Every second the measurement system "reports" one `LatencySample`
  (a pair's value from the same traces): it exercises the scheduler's latency path and makes a
  round run at least every second, so that NoMora re-prices (and, with preemption, migrates) as
  latencies change.
* Average application performance (the paper's placement-quality metric): for each job, the
  time-weighted mean over its run of the mean performance of its running non-root tasks, each
  p(latency between its machine and the root's machine) from the job's 10 µs table; sampled
  after every round (rounds run at least every second). The paper plots the CDF over jobs and
  reports the area between it and y = 1, which is the mean over jobs. Beside it, the same with
  the job's slowest task instead of the mean over its tasks (`NomoraRun.job_slowest`): the
  paper does not say how a job's tasks combine, and a synchronous application is governed by
  its slowest worker.
"""

from __future__ import annotations

import dataclasses
import hashlib
import heapq
import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from firmament_py.model.events import LatencySample, MachineAdded
from firmament_py.model.ids import JobId, MachineId, Time
from firmament_py.model.states import TaskState
from firmament_py.nomora.baselines import RandomFixedArcCosts, RandomMachinePerTask
from firmament_py.nomora.latency import (
    TIERS,
    LatencySource,
    LatencyTraces,
    MachineIndex,
    TraceLatency,
    synthetic_traces,
)
from firmament_py.nomora.performance import BUILTIN_FUNCTIONS, PerformanceTable
from firmament_py.nomora.policy import NomoraPolicy
from firmament_py.nomora.settings import APPLICATION_LABEL, BetaMode, NomoraSettings
from firmament_py.scheduler import Scheduler
from firmament_py.sim.simulator import (
    MICROSECONDS,
    Accounting,
    SimulationConfig,
    SimulationResult,
    Simulator,
)
from firmament_py.sim.synthetic import SyntheticWorkload, preset
from firmament_py.sim.wording import plural
from firmament_py.sim.workload import TaskArrival, WorkloadItem

__all__ = [
    "APPLICATION_MIX",
    "POLICIES",
    "NomoraRun",
    "NomoraSetup",
    "PolicyVariant",
    "run_nomora",
]

APPLICATION_MIX: tuple[tuple[str, float], ...] = (
    ("memcached", 0.5),
    ("strads", 0.25),
    ("tensorflow", 0.25),
)
"""Section 6: the applications assigned to jobs, and in what proportions."""

SWEPT_UNITS: tuple[int, ...] = (10, 100)
"""Cost units per second for omega and beta beyond this port's 1 (the papers give none)."""


@dataclass(frozen=True)
class PolicyVariant:
    """A policy the experiments compare: a built-in baseline by name, or NoMora with settings."""

    name: str
    label: str
    baseline: str | None = None
    settings: NomoraSettings | None = None


POLICIES: Mapping[str, PolicyVariant] = {
    v.name: v
    for v in (
        PolicyVariant("random-arc", "random, fixed cost per arc (paper)", baseline="random-arc"),
        PolicyVariant("random", "random (Firmament's, per round)", baseline="random"),
        PolicyVariant("random-task", "random machine per task (ours)", baseline="random-task"),
        PolicyVariant("load-spreading", "load-spreading", baseline="load-spreading"),
        PolicyVariant("nomora", "NoMora 105/110", settings=NomoraSettings()),
        PolicyVariant(
            "nomora-our-arcs", "NoMora 105/110, this port's root arcs", settings=NomoraSettings()
        ),
        PolicyVariant(
            "nomora-110-115",
            "NoMora 110/115",
            settings=NomoraSettings(machine_threshold=110, rack_threshold=115),
        ),
        PolicyVariant(
            "nomora-preempt", "NoMora 105/110, preemption", settings=NomoraSettings(preemption=True)
        ),
        PolicyVariant(
            "nomora-preempt-beta0",
            "NoMora 105/110, preemption, beta 0",
            settings=NomoraSettings(preemption=True, beta=BetaMode.ZERO),
        ),
        *(
            PolicyVariant(
                f"nomora-preempt{suffix}-unit{unit}",
                f"NoMora 105/110, preemption{label}, {unit} units/s",
                settings=NomoraSettings(
                    preemption=True,
                    beta=beta,
                    wait_cost_per_second=unit,
                    run_credit_per_second=unit,
                ),
            )
            for unit in SWEPT_UNITS
            for suffix, label, beta in (
                ("", "", BetaMode.RUN_TIME),
                ("-beta0", ", beta 0", BetaMode.ZERO),
            )
        ),
        *(
            PolicyVariant(
                f"nomora-preempt{suffix}-tie",
                f"NoMora 105/110, preemption{label}, staying wins ties",
                settings=NomoraSettings(
                    preemption=True, beta=beta, paper_arcs=True, stay_tie_break=True
                ),
            )
            for suffix, label, beta in (
                ("", "", BetaMode.RUN_TIME),
                ("-beta0", ", beta 0", BetaMode.ZERO),
            )
        ),
    )
}
"""The series of the paper's Figures 6-9: the baselines and NoMora's variants, and NoMora with
preemption at each swept unit of omega and beta (`nomora-preempt-unit10`: 10 cost units per
second waited, and per second run for beta), and with this port's tie-break on staying
(`nomora-preempt-tie`: beside the papers' root arc, see `NomoraSettings.stay_tie_break`)."""


def with_paper_arcs(variant: PolicyVariant) -> PolicyVariant:
    """`variant` with the papers' root and stay arcs (`NomoraSettings.paper_arcs`); a baseline,
    and `nomora-our-arcs` (kept to show what the departure does), as they are."""
    if variant.settings is None or variant.name == "nomora-our-arcs":
        return variant
    return dataclasses.replace(
        variant, settings=dataclasses.replace(variant.settings, paper_arcs=True)
    )


@dataclass(frozen=True)
class NomoraSetup:
    """One simulated cluster and workload: `machines` in racks of `machines_per_rack`, pods of
    `racks_per_pod` racks, the synthetic Google-shaped workload with `live_tasks_per_machine`
    and as many slots per machine as keep `slot_utilisation` of them busy (0.5: twice as many
    slots as live tasks), `duration_s` of simulated time, latency traces with `series_per_tier`
    series per tier around `tier_medians_us` (within a rack, a pod, across pods; see
    `synthetic_traces`); while tasks wait, a round at least
    every `round_interval_s` (Firmament runs rounds back to back; a root placed in one round
    lets its tasks be placed in the next). Deterministic in `seed` but for the
    rounds' durations, which are the solver's measured runtimes (Firmament's accounting)."""

    machines: int
    duration_s: int
    seed: int = 0
    machines_per_rack: int = 48
    racks_per_pod: int = 16
    live_tasks_per_machine: float = 6.0
    slot_utilisation: float = 0.5
    series_per_tier: int = 42
    tier_medians_us: tuple[float, float, float] = (25.0, 100.0, 300.0)
    accounting: Accounting = Accounting.ALGORITHM
    round_interval_s: float = 0.1

    def describe(self) -> str:
        racks = -(-self.machines // self.machines_per_rack)
        pods = -(-racks // self.racks_per_pod)
        return (
            f"{plural(self.machines, 'machine')} ({plural(racks, 'rack')} of "
            f"{self.machines_per_rack}, {plural(pods, 'pod')} of "
            f"{plural(self.racks_per_pod, 'rack')}), {self.effective_live_tasks:.2g} live "
            f"tasks per machine in {self.slots_per_machine} slots "
            f"({self.slot_utilisation:.0%} busy), latency medians "
            f"{'/'.join(f'{m:g}' for m in self.tier_medians_us)} µs, {self.duration_s:,} s"
        )

    @property
    def effective_live_tasks(self) -> float:
        """Live tasks per machine once the workload's load is scaled to fill
        `slot_utilisation` of the slots (`SyntheticSpec.with_slot_utilisation`)."""
        return self.slot_utilisation * self.slots_per_machine

    @property
    def slots_per_machine(self) -> int:
        """The slots that hold the live tasks at about `slot_utilisation`."""
        return max(1, round(self.live_tasks_per_machine / self.slot_utilisation))

    def __post_init__(self) -> None:
        if not 0 < self.slot_utilisation <= 1:
            raise ValueError(f"slot_utilisation must be in (0, 1], got {self.slot_utilisation}")
        if len(self.tier_medians_us) != 3 or not all(m > 0 for m in self.tier_medians_us):
            raise ValueError(
                f"tier_medians_us must be three positive medians, got {self.tier_medians_us!r}"
            )


def _application(seed: int, job_id: JobId) -> str:
    digest = hashlib.blake2b(f"{seed}:{job_id}".encode(), digest_size=8).digest()
    u = int.from_bytes(digest, "little") / 2**64
    total = 0.0
    for name, share in APPLICATION_MIX:
        total += share
        if u < total:
            return name
    return APPLICATION_MIX[-1][0]


class NomoraWorkload:
    """The setup's workload items (see the module docstring) and its trace set."""

    def __init__(self, setup: NomoraSetup) -> None:
        self.setup = setup
        self.spec = preset(
            "google",
            machines=setup.machines,
            machines_per_rack=setup.machines_per_rack,
            live_tasks_per_machine=setup.live_tasks_per_machine,
            slots_per_machine=setup.slots_per_machine,
            resource_requests=False,
            machine_failures_per_day=0.0,
        ).with_slot_utilisation(setup.slot_utilisation)
        self.traces: LatencyTraces = synthetic_traces(
            max(1, setup.duration_s) + 1,
            seed=setup.seed,
            series_per_tier=setup.series_per_tier,
            medians_us=dict(zip(TIERS, setup.tier_medians_us, strict=True)),
        )
        self.latency = TraceLatency(self.traces, seed=setup.seed)
        machines = SyntheticWorkload(self.spec, setup.seed).machines()
        self.machines = [self._placed(m) for m in machines]
        self.index = MachineIndex([(m.machine_id, m.rack_id, m.pod_id) for m in self.machines])
        self.applications: dict[JobId, str] = {}

    def _placed(self, machine: MachineAdded) -> MachineAdded:
        rack = int(machine.rack_id.removeprefix("rack"))
        return dataclasses.replace(machine, pod_id=f"pod{rack // self.setup.racks_per_pod}")

    def _jobs(self, items: Iterator[WorkloadItem]) -> Iterator[WorkloadItem]:
        """Machines placed in pods; multi-task jobs labelled with an application; single-task
        jobs dropped (a job's tasks come together, at one time)."""
        pending: list[TaskArrival] = []

        def flush() -> list[TaskArrival]:
            if len(pending) < 2:
                return []
            job_id = pending[0].submitted.job_id
            application = _application(self.setup.seed, job_id)
            self.applications[job_id] = application
            return [
                TaskArrival(
                    dataclasses.replace(
                        arrival.submitted,
                        labels={**arrival.submitted.labels, APPLICATION_LABEL: application},
                    ),
                    arrival.runtime,
                )
                for arrival in pending
            ]

        for item in items:
            if isinstance(item, TaskArrival):
                if pending and pending[0].submitted.job_id != item.submitted.job_id:
                    yield from flush()
                    pending = []
                pending.append(item)
                continue
            yield from flush()
            pending = []
            yield self._placed(item) if isinstance(item, MachineAdded) else item
        yield from flush()

    def _probes(self, end_us: Time) -> Iterator[LatencySample]:
        """One latency report per second, for pairs of machines in turn."""
        ids = self.index.ids
        if len(ids) < 2:
            return
        for step in itertools.count(1):
            time = step * MICROSECONDS
            if time >= end_us:
                return
            a, b = ids[step % len(ids)], ids[(step * 7 + 1) % len(ids)]
            if a == b:
                b = ids[(step % len(ids) + 1) % len(ids)]
            value = self.latency.pair_latencies_us([a], [b], self.index, time)
            yield LatencySample(time=time, machine_id=a, peer_id=b, latency_us=float(value[0]))

    def items(self) -> Iterator[WorkloadItem]:
        end = self.setup.duration_s * MICROSECONDS
        jobs = self._jobs(iter(SyntheticWorkload(self.spec, self.setup.seed).items(end)))
        probes: Iterator[WorkloadItem] = self._probes(end)
        return heapq.merge(jobs, probes, key=lambda item: item.time)


@dataclass
class NomoraRun:
    """One simulation's result and the performance measured along it."""

    variant: PolicyVariant
    result: SimulationResult
    job_performance: dict[JobId, float] = field(default_factory=dict)
    """Each job's average application performance (time-weighted, 0-1)."""
    task_performance: float = float("nan")
    """The time-weighted mean over every running non-root task (big jobs weigh more)."""
    job_application: dict[JobId, str] = field(default_factory=dict)
    job_slowest: dict[JobId, float] = field(default_factory=dict)
    """Each job's slowest task's performance (time-weighted, 0-1)."""

    def mean_performance(self) -> float:
        """The area between the CDF over jobs and y = 1: the mean job performance."""
        values = list(self.job_performance.values())
        return float(np.mean(values)) if values else float("nan")

    def slowest_performance(self) -> float:
        """The mean over jobs of their slowest task's performance."""
        values = list(self.job_slowest.values())
        return float(np.mean(values)) if values else float("nan")

    def algorithm_seconds(self) -> list[float]:
        return [r.algorithm_seconds for r in self.result.rounds]

    def placement_latencies_s(self) -> list[float]:
        return [
            latency / MICROSECONDS
            for t in self.result.tasks.values()
            if (latency := t.placement_latency) is not None
        ]

    def migrated_percent(self) -> list[float]:
        """Per round, the tasks migrated as a percentage of the tasks running after it."""
        return [100 * r.migrated / r.running if r.running else 0.0 for r in self.result.rounds]


class PerformanceMeter:
    """Integrates each job's application performance over simulated time (see the module
    docstring), from the cluster state after every round."""

    def __init__(self, scheduler: Scheduler, workload: NomoraWorkload) -> None:
        self.scheduler = scheduler
        self.workload = workload
        self.tables: dict[str, PerformanceTable] = {
            name: function.table() for name, function in BUILTIN_FUNCTIONS.items()
        }
        self._last_time: Time | None = None
        self._last: dict[JobId, tuple[float, float]] = {}
        self.weighted: dict[JobId, float] = {}
        self.weighted_slowest: dict[JobId, float] = {}
        self.weights: dict[JobId, float] = {}
        self._last_tasks = (0.0, 0)  # the sum of task performances and their count
        self.task_weighted = 0.0
        self.task_weights = 0.0

    def snapshot(self, time: Time) -> dict[JobId, tuple[float, float]]:
        """Each job's mean task performance now and its slowest task's, for jobs with a running
        root and tasks."""
        state = self.scheduler.state
        applications = self.workload.applications
        jobs: list[JobId] = []
        roots: list[MachineId] = []
        machines: list[MachineId] = []
        for job_id, job in state.jobs.items():
            if job_id not in applications:
                continue
            root = state.tasks.get(job.root_task_id)
            if root is None or root.machine_id is None:
                continue
            for task_id in job.task_ids:
                if task_id == job.root_task_id:
                    continue
                task = state.tasks[task_id]
                if task.state is TaskState.RUNNING and task.machine_id is not None:
                    jobs.append(job_id)
                    roots.append(root.machine_id)
                    machines.append(task.machine_id)
        if not jobs:
            self._last_tasks = (0.0, 0)
            return {}
        latency = self.workload.latency.pair_latencies_us(
            roots, machines, self.workload.index, time
        )
        performance = np.empty(len(jobs))
        apps = np.asarray([applications[j] for j in jobs])
        for name, table in self.tables.items():
            chosen = apps == name
            if np.any(chosen):
                performance[chosen] = table.lookup(latency[chosen])
        sums: dict[JobId, list[float]] = {}
        for job_id, value in zip(jobs, performance.tolist(), strict=True):
            entry = sums.setdefault(job_id, [0.0, 0.0, value])
            entry[0] += value
            entry[1] += 1
            entry[2] = min(entry[2], value)
        self._last_tasks = (float(performance.sum()), len(jobs))
        return {job_id: (total / count, least) for job_id, (total, count, least) in sums.items()}

    def after_round(self, time: Time) -> None:
        if self._last_time is not None and time > self._last_time:
            weight = (time - self._last_time) / MICROSECONDS
            for job_id, (mean, slowest) in self._last.items():
                self.weighted[job_id] = self.weighted.get(job_id, 0.0) + weight * mean
                self.weighted_slowest[job_id] = (
                    self.weighted_slowest.get(job_id, 0.0) + weight * slowest
                )
                self.weights[job_id] = self.weights.get(job_id, 0.0) + weight
            self.task_weighted += weight * self._last_tasks[0]
            self.task_weights += weight * self._last_tasks[1]
        self._last_time = time
        self._last = self.snapshot(time)

    def job_performance(self) -> dict[JobId, float]:
        """Each job's time-weighted mean over its running tasks."""
        return {j: self.weighted[j] / w for j, w in self.weights.items() if w > 0}

    def job_slowest(self) -> dict[JobId, float]:
        """Each job's time-weighted performance of its slowest running task: a synchronous
        application (STRADS, TensorFlow) goes at the pace of its slowest worker."""
        return {j: self.weighted_slowest[j] / w for j, w in self.weights.items() if w > 0}


def nomora_policy(settings: NomoraSettings | None, latency: LatencySource) -> object:
    """The built-in NoMora policy (`firmament_py.nomora.policy.NomoraPolicy`) with `settings`
    and a latency source."""
    return NomoraPolicy(settings, latency=latency)


def _scheduler(variant: PolicyVariant, workload: NomoraWorkload, solver: str) -> Scheduler:
    if variant.baseline == "random-task":
        return Scheduler(RandomMachinePerTask(), solver=solver)
    if variant.baseline == "random-arc":
        return Scheduler(RandomFixedArcCosts(workload.setup.seed), solver=solver)
    if variant.baseline is not None:
        return Scheduler(variant.baseline, solver=solver)
    return Scheduler(nomora_policy(variant.settings, workload.latency), solver=solver)


def run_nomora(
    setup: NomoraSetup,
    variant: PolicyVariant,
    *,
    solver: str = "cost-scaling",
    progress: Callable[[Time], None] | None = None,
) -> NomoraRun:
    """Simulate `setup` under `variant` and measure it."""
    workload = NomoraWorkload(setup)
    config = SimulationConfig(
        end_time=setup.duration_s * MICROSECONDS,
        accounting=setup.accounting,
        round_interval=round(setup.round_interval_s * MICROSECONDS),
    )
    with _scheduler(variant, workload, solver) as scheduler:
        meter = PerformanceMeter(scheduler, workload)

        def after_round(time: Time) -> None:
            meter.after_round(time)
            if progress is not None:
                progress(time)

        items: Sequence[WorkloadItem] | Iterator[WorkloadItem] = workload.items()
        simulator = Simulator(scheduler, items, config, workload_name=f"nomora: {setup.describe()}")
        result = simulator.run(after_round)
        meter.after_round(result.end_time)
    performance = meter.job_performance()
    return NomoraRun(
        variant,
        result,
        performance,
        meter.task_weighted / meter.task_weights if meter.task_weights else float("nan"),
        {job_id: workload.applications[job_id] for job_id in performance},
        meter.job_slowest(),
    )
