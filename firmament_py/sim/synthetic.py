"""Synthetic workloads shaped like the 2011 Google cluster trace, for the simulator.

No sample of the Google trace ships with this project, and replaying the real one needs 41 GB
of downloads. This module makes workloads with the trace's published shape instead, so that the
paper's experiments (Firmament, OSDI'16, Figures 7, 8, 9, 14, 16 and 18) can be rerun at any
scale, deterministically from a seed. A `SyntheticSpec` says what to generate (all of it
documented and checked); `PRESETS` holds the calibrated ones; a `SyntheticWorkload` (a spec and
a seed) yields the `WorkloadItem`s of `firmament_py.sim.workload` in time order:

1. at time 0, one `MachineAdded` per machine (racks of `machines_per_rack`, machine platforms in
   the trace's proportions and labelled `platform`, `slots_per_machine` slots, 10 Gbit/s
   network);
2. at time 0, the cluster's steady-state population: `TaskArrival`s for the tasks that would be
   running if the workload had been going on forever, each with its remaining runtime;
3. then Poisson job arrivals: a job's tasks are all submitted at its arrival time and share its
   priority and request (they are replicas) but have their own runtimes; every task is labelled
   `class` with its job class ("batch", "service");
4. with `machine_failures_per_day` > 0, `MachineFailed` events and the `MachineAdded` that
   brings the machine back after an exponential repair time.

Task completions are not emitted: the simulator derives them from runtimes and placements.

The model
---------
Jobs come in classes (`JobClass`): "batch" (the trace's free and middle priorities, 0-8) and
"service" (production 9-11 and monitoring 12), the priority-based classification Firmament
took from Omega. Each class holds a share of the steady-state live tasks and has its own
runtime, job-size, priority and request distributions. The arrival rate follows from Little's
law: a class with `L` live tasks and mean task runtime `R` gets tasks at `L / R` per second,
that is jobs at `L / (R * mean job size)`.

- Steady state at time 0. For each class, the arrival process is replayed over a warm-up window
  before time 0, long enough that at most 1% of the tasks alive at 0 arrived before it; the
  tasks still running at 0 are kept with their remaining runtimes (so job structure and the
  length bias of survivors are right). Jobs are then drawn from those survivors in random order
  until their tasks reach the class's target (the last one trimmed), so every run starts with
  exactly `round(expected live tasks)` tasks. The snapshot's jobs are all submitted at time 0,
  oldest first.
- `load` multiplies the live tasks (initial population and arrival rates): with the default 24
  slots, load 1 fills 50% of the slots (Figure 7), 1.8 fills 90% (Figure 14).
  `with_slot_utilisation(u)` picks the load for a slot utilisation; Figure 16 shrinks slots
  instead (`slots_per_machine`). Requests are tuned so that load 1 also requests about half of
  the cluster's CPU and RAM; `resource_requests=False` drops them for slot-based experiments.
- `speedup` divides batch runtimes and batch inter-arrival gaps (Figure 18: "dividing all task
  runtimes and interarrival times by a speedup factor ... while service jobs are still
  long-running"): live tasks stay the same, batch throughput grows `speedup` times. Service
  jobs are left alone: in the trace most span the whole trace, so dividing leaves them
  long-running, and here dividing would make them churn.
- Scaling (`scaled(machines)`, `preset(name, machines=...)`) keeps everything per machine:
  live tasks, slots, job mix. The largest job scales with the cluster (a 25,000-task job among
  12,500 machines is a 2,000-task job among 1,000), so the heaviest bursts take the same
  fraction of the cluster at every size; the job-size distribution is truncated there.

Calibration
-----------
Sources: [F] Firmament, OSDI'16
(https://www.usenix.org/conference/osdi16/technical-sessions/presentation/gog); [R] Reiss et al.,
"Heterogeneity and dynamicity of clouds at scale: Google trace analysis", SoCC'12, Table 1
(machine configurations, as reproduced in public analyses of the trace); [T] the ClusterData2011
documentation (github.com/google/cluster-data); [A] our assumption, where no published number
was at hand (change it in the spec).

=============================  ==============================  ===============================
quantity                       value                           source
=============================  ==============================  ===============================
machines                       12,500 ("google")               [F] §2, §7.1; [T] "about 12.5k"
live tasks, steady state       150,000 = 12 per machine        [F] §2 footnote 2
live jobs, steady state        about 1,800 (we get 1,700 to    [F] §2 footnote 2; service job
                               2,000, by seed)                 sizes [A] were tuned to it
slot utilisation at load 1     50%: 24 slots per machine       [F] Fig. 7 ("about 50%");
                                                               90% in Fig. 14, 97% in Fig. 16
machine platforms (CPU, RAM    (0.5, 0.5) 6,732; (0.5, 0.25)   [R] Table 1; 14 machines of 4
normalised to the largest      3,863; (0.5, 0.75) 1,001;       rarer shapes are left out
machine) and machine counts    (1, 1) 795; (0.25, 0.25) 126;
                               (0.5, 0.12) 52
largest machine                64 cores, 256 GiB               [A] (the trace normalises to
                                                               the largest machine, [T])
machines per rack              40                              [A]
network per machine            10 Gbit/s = 1.25e9 B/s each     [F] §7.1 (testbed NICs)
                               way
local disk per machine         1 TB (tasks request none)       [F] §7.1 (testbed disks)
priority bands                 free 0-1, middle 2-8,           [T]; batch = below 9, service
                               production 9-11, monitoring 12  = 9 and above [F] §7.1 (Omega)
batch task runtime             lognormal, median 420 s,        [F] §7.4: at 200x speedup the
                               sigma 1.64 (p90 3,440 s,        median batch task takes 2.1 s,
                               p99 19,000 s; mean 1,612 s)     p90 18 s, p99 92 s (x200: 420,
                                                               3,600, 18,400 s); sigma is the
                                                               least-squares fit of p90, p99
task submissions               about 10 per second at 12,500   [T] 29 days; 25 million tasks
                               machines                        (public descriptions of the
                                                               trace): 25e6 / 29 d = 9.98/s
batch share of live tasks      0.107                           9.98/s x 1,612 s = 16,090 of
                                                               150,000 (Little's law)
service task runtime           lognormal, median 2 days,       [A] long-running: about 1% of
                               sigma 1 (mean 3.3 days)         live services end in an hour
jobs over 1,000 tasks          1.2% of batch jobs              [F] §4.3
largest jobs                   "some even over 20,000": sizes  [F] §4.3; cap and the tail's
                               1,001-25,000 ~ k^-2.3           exponent [A]
single-task batch jobs         75% (2% of batch tasks)         [A] ("most jobs are small",
                                                               [R] in words)
batch jobs of 2-1,000 tasks    P(k) ~ k^-2; mean batch job     [A]; 25e6 tasks in roughly
                               35.9 tasks (0.28 jobs/s); 91%   670,000 jobs gives 37 (the job
                               of batch tasks are in jobs      count is from memory)
                               over 1,000 tasks
service jobs                   40% single, 2-1,000 ~ k^-1.3,   [A], tuned to the 1,800 live
                               20% 1,001-10,000 ~ k^-1.7       jobs of [F]
batch priorities               0: 20%, 1: 10%, 2-8: 10% each   [A]
service priorities             9: 50%, 10: 30%, 11: 15%,       [A]
                               12: 5%
requests (normalised, per      batch CPU median 0.010, RAM     [A], so that load 1 requests
job, lognormal sigma 1, CPU    0.008; service CPU 0.014, RAM   50% of CPU and RAM on average
and RAM correlated 0.5)        0.0125; capped at the largest   (35-60% by seed: a few huge
                               machine                         jobs weigh a lot); "small
                                                               mostly, heavy tail"
network requests               30% of batch jobs: rx median    [A] (a little bandwidth for
                               20 MB/s, tx 2 MB/s; 50% of      network-aware policies)
                               services: rx 5, tx 10 MB/s
machine failures               0.005 per machine per day,      [A] (Firmament's synthetic
                               back after ~10 minutes          loader: 1 per hour, 60 s)
=============================  ==============================  ===============================

Determinism: every random draw comes from a `numpy.random.Generator` seeded with the workload's
seed and the draw's place (machines, warm-up, arrivals of class c in block b, churn block b), so
a seed gives the same items (with the same numpy version), and `items(d1)` is a prefix of
`items(d2)` when d1 < d2. Arrivals are drawn a block of about 50,000 tasks at a time with
numpy, so memory stays bounded however long the run; Python objects are made one job at a time
as items are pulled. At one instant, machine events come before task arrivals, classes in spec
order. Task ids count from 0 and job ids are "job0", "job1", ... in the order items come.
"""

from __future__ import annotations

import dataclasses
import functools
import heapq
import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt

from firmament_py.model.events import MachineAdded, MachineFailed, TaskSubmitted
from firmament_py.model.ids import Time
from firmament_py.model.resources import Resources
from firmament_py.sim.workload import TaskArrival, WorkloadItem

__all__ = [
    "GOOGLE_JOB_CLASSES",
    "GOOGLE_PLATFORMS",
    "PRESETS",
    "JobClass",
    "JobSizes",
    "LogNormal",
    "Platform",
    "SyntheticSpec",
    "SyntheticWorkload",
    "preset",
    "single_job_workload",
]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

MICROSECONDS = 1_000_000
SECONDS_PER_DAY = 86_400
GIB = 2**30
MB = 1_000_000

_STANDARD_NORMAL = NormalDist()
_WARMUP_MISSING = 0.01  # at most this fraction of the live tasks arrived before the warm-up
_BLOCK_TASKS = 50_000  # tasks drawn per block, about
_CHURN_BLOCK_FAILURES = 100  # machine failures drawn per block, about
_MAX_WARMUP_REPLICAS = 100

MAX_MACHINES = 1_000_000
"""The most machines a synthetic cluster may have (80 times the 12,500 of Google's trace)."""

MAX_LIVE_TASKS = 10_000_000
"""The most tasks a synthetic workload may keep live (`SyntheticSpec.expected_live_tasks`: 65
times the Google trace's): the simulator holds every task in memory, and a spec past this would
run until it ran out of memory rather than fail."""

# The streams of random numbers, one per purpose (part of each generator's seed).
_MACHINES, _WARMUP, _QUOTA, _ARRIVALS, _CHURN, _SINGLE_JOB = range(6)

# At one instant, machine events come before task arrivals.
_MACHINE_RANK, _TASK_RANK = 0, 1


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise ValueError(message)


def _check_seed(seed: object) -> None:
    _require(
        isinstance(seed, int) and not isinstance(seed, bool) and seed >= 0,
        f"the seed must be a non-negative int, got {seed!r}",
    )


def _check_positive(what: str, value: float) -> None:
    _require(
        math.isfinite(value) and value > 0, f"{what} must be a finite number > 0, got {value!r}"
    )


def _check_non_negative(what: str, value: float) -> None:
    _require(
        math.isfinite(value) and value >= 0, f"{what} must be a finite number >= 0, got {value!r}"
    )


# ---------------------------------------------------------------------------- distributions


@dataclass(frozen=True)
class LogNormal:
    """A lognormal distribution, given by its median and by `sigma`, the standard deviation of
    its logarithm (0: always the median). Used for runtimes (seconds), requests (normalised to
    the largest machine) and bandwidths (bytes per second)."""

    median: float
    sigma: float

    def __post_init__(self) -> None:
        _check_positive("a lognormal's median", self.median)
        _check_non_negative("a lognormal's sigma", self.sigma)

    @property
    def mean(self) -> float:
        return self.median * math.exp(self.sigma**2 / 2)

    def quantile(self, p: float) -> float:
        """The value below which a fraction `p` (0 < p < 1) of samples fall."""
        return self.median * math.exp(self.sigma * _STANDARD_NORMAL.inv_cdf(p))

    def divided(self, factor: float) -> LogNormal:
        """This distribution with every value divided by `factor`."""
        return LogNormal(self.median / factor, self.sigma)

    def sample(self, rng: np.random.Generator, n: int) -> FloatArray:
        """`n` independent values."""
        return self.median * np.exp(self.sigma * rng.standard_normal(n))

    def warmup_horizon(self, missing: float) -> float:
        """The shortest window H such that, in the steady state of tasks arriving at a constant
        rate and running for times drawn from this distribution, at most a fraction `missing`
        of the tasks alive at any instant arrived more than H earlier.

        That fraction is E[(R - H)+] / E[R] = Phi(sigma - d) - (H / E[R]) Phi(-d), with
        d = (ln H - ln median) / sigma; it falls as H grows, so bisect on d."""
        if self.sigma == 0:
            return self.median
        sigma, cdf = self.sigma, _STANDARD_NORMAL.cdf

        def missing_at(d: float) -> float:
            return cdf(sigma - d) - math.exp(sigma * d - sigma**2 / 2) * cdf(-d)

        low, high = -10.0, 10.0 + 2 * sigma
        for _ in range(100):
            middle = (low + high) / 2
            if missing_at(middle) > missing:
                low = middle
            else:
                high = middle
        return self.median * math.exp(sigma * high)


@dataclass(frozen=True)
class JobSizes:
    """How many tasks a job has: a mixture of three parts, so that most jobs have a single
    task while most tasks belong to large jobs.

    - 1 task with probability `single`;
    - 2 to `large_above` tasks with probability 1 - `single` - `large`, P(k) ~ k^-(1 +
      `medium_exponent`);
    - `large_above` + 1 to `max_size` tasks with probability `large`, P(k) ~ k^-(1 +
      `large_exponent`) (a truncated power law).

    `max_size` applies to a cluster of the spec's `reference_machines`; a cluster of other size
    truncates the distribution at a cap scaled with it (`SyntheticSpec.job_size_cap`), and the
    parts left renormalise.
    """

    single: float
    large: float
    large_above: int = 1_000
    medium_exponent: float = 1.0
    large_exponent: float = 1.3
    max_size: int = 25_000

    def __post_init__(self) -> None:
        for name in ("single", "large"):
            value = getattr(self, name)
            _require(
                math.isfinite(value) and 0 <= value <= 1,
                f"JobSizes.{name} is a probability in [0, 1], got {value!r}",
            )
        _require(
            self.single + self.large <= 1 + 1e-12,
            f"JobSizes.single + JobSizes.large must not exceed 1, got {self.single + self.large}",
        )
        _require(
            isinstance(self.large_above, int) and self.large_above >= 2,
            f"JobSizes.large_above must be an int >= 2, got {self.large_above!r}",
        )
        _require(
            isinstance(self.max_size, int) and self.max_size > self.large_above,
            f"JobSizes.max_size must be an int above large_above ({self.large_above}), "
            f"got {self.max_size!r}",
        )
        for name in ("medium_exponent", "large_exponent"):
            _check_non_negative(f"JobSizes.{name}", getattr(self, name))

    def pmf(self, cap: int | None = None) -> FloatArray:
        """P(size = k) at index k - 1, for k = 1 .. min(cap, max_size)."""
        top = self.max_size if cap is None else max(1, min(cap, self.max_size))
        pmf = np.zeros(top)
        pmf[0] = self.single
        for first, last, mass, exponent in (
            (2, self.large_above, 1.0 - self.single - self.large, self.medium_exponent),
            (self.large_above + 1, self.max_size, self.large, self.large_exponent),
        ):
            # The part's weights over its whole range, then only those under the cap.
            weights = np.arange(first, last + 1, dtype=np.float64) ** -(1.0 + exponent)
            kept = weights[: max(0, min(last, top) - first + 1)]
            if kept.size:
                pmf[first - 1 : first - 1 + kept.size] = max(mass, 0.0) * kept / weights.sum()
        total = float(pmf.sum())
        if total <= 0:  # everything lay above the cap: the cap itself is the only size left
            pmf[-1] = total = 1.0
        return pmf / total

    def mean(self, cap: int | None = None) -> float:
        pmf = self.pmf(cap)
        return float(np.dot(np.arange(1, pmf.size + 1), pmf))

    def sample(self, rng: np.random.Generator, n: int, cap: int | None = None) -> IntArray:
        """`n` job sizes, truncated at `cap` tasks."""
        return _sample_pmf(rng, np.cumsum(self.pmf(cap)), n)


def _sample_pmf(rng: np.random.Generator, cdf: FloatArray, n: int) -> IntArray:
    """Values k >= 1 drawn with P(k) = cdf[k - 1] - cdf[k - 2] (inverse transform)."""
    index = np.searchsorted(cdf, rng.random(n) * cdf[-1], side="right")
    sizes: IntArray = np.minimum(index, cdf.size - 1).astype(np.int64) + 1
    return sizes


# ---------------------------------------------------------------------------- the spec


@dataclass(frozen=True)
class Platform:
    """A kind of machine: CPU and RAM as fractions of the largest machine's (the trace's
    normalisation), and `weight`, its share of the machines."""

    name: str
    cpu: float
    ram: float
    weight: float

    def __post_init__(self) -> None:
        _require(bool(self.name), "a platform needs a name")
        for name in ("cpu", "ram"):
            value = getattr(self, name)
            _require(
                math.isfinite(value) and 0 < value <= 1,
                f"platform {self.name!r}: {name} is a fraction of the largest machine, in "
                f"(0, 1], got {value!r}",
            )
        _check_positive(f"platform {self.name!r}: weight", self.weight)


@dataclass(frozen=True)
class JobClass:
    """One kind of job (batch, service): its share of the live tasks and the distributions
    its jobs are drawn from. Requests are per job (a job's tasks are replicas), CPU and RAM as
    fractions of the largest machine, drawn from lognormals whose logarithms are correlated by
    `cpu_ram_correlation`. A fraction `net_share` of the jobs also request network bandwidth
    (bytes per second each way). `accelerated`: whether `SyntheticSpec.speedup` divides this
    class's runtimes and inter-arrival gaps."""

    name: str
    live_share: float
    runtime_s: LogNormal
    sizes: JobSizes
    priorities: tuple[tuple[int, float], ...]
    """(priority, weight) pairs."""
    cpu: LogNormal
    ram: LogNormal
    cpu_ram_correlation: float = 0.5
    net_share: float = 0.0
    net_rx: LogNormal = LogNormal(10 * MB, 1.0)
    net_tx: LogNormal = LogNormal(10 * MB, 1.0)
    accelerated: bool = True

    def __post_init__(self) -> None:
        _require(bool(self.name), "a job class needs a name")
        _check_positive(f"job class {self.name!r}: live_share", self.live_share)
        _require(
            len(self.priorities) > 0
            and all(
                isinstance(p, int) and not isinstance(p, bool) and math.isfinite(w) and w > 0
                for p, w in self.priorities
            ),
            f"job class {self.name!r}: priorities must be (int priority, positive weight) "
            f"pairs, at least one, got {self.priorities!r}",
        )
        _require(
            math.isfinite(self.cpu_ram_correlation) and -1 <= self.cpu_ram_correlation <= 1,
            f"job class {self.name!r}: cpu_ram_correlation must lie in [-1, 1], got "
            f"{self.cpu_ram_correlation!r}",
        )
        _require(
            math.isfinite(self.net_share) and 0 <= self.net_share <= 1,
            f"job class {self.name!r}: net_share is a probability in [0, 1], got "
            f"{self.net_share!r}",
        )


# Reiss et al., Table 1: machines by (platform, CPU, RAM), normalised to the largest machine.
GOOGLE_PLATFORMS: tuple[Platform, ...] = (
    Platform("B", cpu=0.5, ram=0.5, weight=6732),
    Platform("B", cpu=0.5, ram=0.25, weight=3863),
    Platform("B", cpu=0.5, ram=0.75, weight=1001),
    Platform("C", cpu=1.0, ram=1.0, weight=795),
    Platform("A", cpu=0.25, ram=0.25, weight=126),
    Platform("B", cpu=0.5, ram=0.12, weight=52),
)

# The calibration table of the module docstring, as job classes.
GOOGLE_JOB_CLASSES: tuple[JobClass, ...] = (
    JobClass(
        name="batch",
        live_share=0.107,
        runtime_s=LogNormal(median=420.0, sigma=1.64),
        sizes=JobSizes(
            single=0.75, large=0.012, medium_exponent=1.0, large_exponent=1.3, max_size=25_000
        ),
        priorities=((0, 0.2), (1, 0.1), *((p, 0.1) for p in range(2, 9))),
        cpu=LogNormal(median=0.010, sigma=1.0),
        ram=LogNormal(median=0.008, sigma=1.0),
        net_share=0.3,
        net_rx=LogNormal(median=20 * MB, sigma=1.0),
        net_tx=LogNormal(median=2 * MB, sigma=1.0),
        accelerated=True,
    ),
    JobClass(
        name="service",
        live_share=0.893,
        runtime_s=LogNormal(median=2 * SECONDS_PER_DAY, sigma=1.0),
        sizes=JobSizes(
            single=0.4, large=0.2, medium_exponent=0.3, large_exponent=0.7, max_size=10_000
        ),
        priorities=((9, 0.5), (10, 0.3), (11, 0.15), (12, 0.05)),
        cpu=LogNormal(median=0.014, sigma=1.0),
        ram=LogNormal(median=0.0125, sigma=1.0),
        net_share=0.5,
        net_rx=LogNormal(median=5 * MB, sigma=1.0),
        net_tx=LogNormal(median=10 * MB, sigma=1.0),
        accelerated=False,
    ),
)


@dataclass(frozen=True)
class SyntheticSpec:
    """What to generate (see the module docstring for the model and the calibration).

    Cluster: `machines` in racks of `machines_per_rack`, of `platforms` in proportion to their
    weights; a platform's normalised CPU and RAM times `cpu_scale_millicores` and
    `ram_scale_bytes` give its capacity; every machine has `slots_per_machine` slots,
    `disk_bytes` of disk and `net_bytes_per_s` of network each way.
    Workload: `live_tasks_per_machine` x `load` tasks live in steady state, shared among
    `job_classes`; `speedup` accelerates the classes marked `accelerated`; job sizes are
    calibrated for a cluster of `reference_machines`.
    Churn: each machine fails `machine_failures_per_day` times a day on average and comes back
    after an exponentially distributed repair time of mean `machine_repair_s` seconds.
    `resource_requests`: False makes every task request nothing, so that only slots matter, as
    in the paper's simulations ("we use slot-based assignment", §7.1); use it with policies
    that ignore requests (trivial, load-spreading, quincy), which may otherwise send a task
    where it does not fit and see the cluster refuse it. The draws are the same either way.
    """

    machines: int
    job_classes: tuple[JobClass, ...] = GOOGLE_JOB_CLASSES
    platforms: tuple[Platform, ...] = GOOGLE_PLATFORMS
    live_tasks_per_machine: float = 12.0
    slots_per_machine: int = 24
    machines_per_rack: int = 40
    reference_machines: int = 12_500
    cpu_scale_millicores: int = 64_000
    ram_scale_bytes: int = 256 * GIB
    disk_bytes: int = 10**12
    net_bytes_per_s: int = 1_250_000_000
    load: float = 1.0
    speedup: float = 1.0
    machine_failures_per_day: float = 0.005
    machine_repair_s: float = 600.0
    resource_requests: bool = True

    def __post_init__(self) -> None:
        for name in (
            "machines",
            "slots_per_machine",
            "machines_per_rack",
            "reference_machines",
            "cpu_scale_millicores",
            "ram_scale_bytes",
        ):
            value = getattr(self, name)
            _require(
                isinstance(value, int) and not isinstance(value, bool) and value >= 1,
                f"SyntheticSpec.{name} must be a positive int, got {value!r}",
            )
        for name in ("disk_bytes", "net_bytes_per_s"):
            value = getattr(self, name)
            _require(
                isinstance(value, int) and not isinstance(value, bool) and value >= 0,
                f"SyntheticSpec.{name} must be a non-negative int, got {value!r}",
            )
        for name in ("live_tasks_per_machine", "load", "speedup", "machine_repair_s"):
            _check_positive(f"SyntheticSpec.{name}", getattr(self, name))
        _require(
            self.machines <= MAX_MACHINES,
            f"SyntheticSpec.machines must be at most {MAX_MACHINES:,}, got {self.machines:,}",
        )
        _require(
            self.expected_live_tasks <= MAX_LIVE_TASKS,
            f"this workload would keep about {self.expected_live_tasks:,.0f} tasks live (load "
            f"{self.load:g} x {self.live_tasks_per_machine:g} per machine x {self.machines:,} "
            f"machines), past the limit of {MAX_LIVE_TASKS:,}: lower the load or the machines",
        )
        _check_non_negative("SyntheticSpec.machine_failures_per_day", self.machine_failures_per_day)
        _require(len(self.platforms) > 0, "SyntheticSpec.platforms must not be empty")
        _require(len(self.job_classes) > 0, "SyntheticSpec.job_classes must not be empty")
        names = [job_class.name for job_class in self.job_classes]
        _require(len(set(names)) == len(names), f"job class names must differ, got {names}")
        shares = sum(job_class.live_share for job_class in self.job_classes)
        _require(
            abs(shares - 1.0) < 1e-6,
            f"the job classes' live_share must sum to 1, got {shares} ({', '.join(names)})",
        )

    # -------------------------------------------------------------- derived quantities

    def scaled(self, machines: int) -> SyntheticSpec:
        """The same workload shape on `machines` machines (everything per machine is kept)."""
        return dataclasses.replace(self, machines=machines)

    def with_slot_utilisation(self, utilisation: float) -> SyntheticSpec:
        """This spec with the `load` that fills a fraction `utilisation` of the slots."""
        _check_positive("slot utilisation", utilisation)
        load = utilisation * self.slots_per_machine / self.live_tasks_per_machine
        return dataclasses.replace(self, load=load)

    @property
    def expected_live_tasks(self) -> float:
        return self.load * self.live_tasks_per_machine * self.machines

    @property
    def slot_utilisation(self) -> float:
        """The fraction of the slots the live tasks fill (above 1: oversubscribed)."""
        return self.load * self.live_tasks_per_machine / self.slots_per_machine

    def job_class(self, name: str) -> JobClass:
        for job_class in self.job_classes:
            if job_class.name == name:
                return job_class
        known = ", ".join(job_class.name for job_class in self.job_classes)
        raise ValueError(f"no job class {name!r} in this spec (it has {known})")

    def job_size_cap(self, job_class: JobClass) -> int:
        """The most tasks a job of `job_class` has in this cluster: its `max_size`, scaled by
        machines / reference_machines."""
        scaled = job_class.sizes.max_size * self.machines / self.reference_machines
        return max(1, round(scaled))

    def runtime(self, job_class: JobClass) -> LogNormal:
        """The task runtime distribution (seconds) of `job_class`, after the speedup."""
        return job_class.runtime_s.divided(self.speedup if job_class.accelerated else 1.0)

    def live_tasks(self, job_class: JobClass) -> float:
        """The expected live tasks of `job_class` in steady state."""
        return self.expected_live_tasks * job_class.live_share

    def task_rate(self, job_class: JobClass) -> float:
        """Tasks of `job_class` submitted per second (Little's law: live / mean runtime)."""
        return self.live_tasks(job_class) / self.runtime(job_class).mean

    def job_rate(self, job_class: JobClass) -> float:
        """Jobs of `job_class` arriving per second."""
        return self.task_rate(job_class) / job_class.sizes.mean(self.job_size_cap(job_class))

    @property
    def largest_machine(self) -> Resources:
        """The capacity of the biggest machine the platforms allow (requests never exceed it)."""
        return Resources(
            cpu_millicores=_scale(max(p.cpu for p in self.platforms), self.cpu_scale_millicores),
            ram_bytes=_scale(max(p.ram for p in self.platforms), self.ram_scale_bytes),
            disk_bytes=self.disk_bytes,
            net_rx_bytes_per_s=self.net_bytes_per_s,
            net_tx_bytes_per_s=self.net_bytes_per_s,
        )


def _scale(fraction: float, unit: int) -> int:
    return max(1, round(fraction * unit))


PRESETS: dict[str, SyntheticSpec] = {
    "google": SyntheticSpec(machines=12_500),
    "google-1k": SyntheticSpec(machines=1_000),
    "google-100": SyntheticSpec(machines=100),
    "small": SyntheticSpec(machines=50, machine_failures_per_day=0.0),
}
"""The calibrated specs: the full Google cluster, scaled-down copies of it, and a small one
without machine failures for tests and examples."""


def preset(name: str, *, machines: int | None = None, **changes: Any) -> SyntheticSpec:
    """The preset `name`, scaled to `machines` if given, with any other field replaced
    (`preset("google-1k", load=1.8, speedup=200)`). ValueError names an unknown preset or
    field."""
    if name not in PRESETS:
        raise ValueError(f"unknown synthetic workload preset {name!r}; known: {sorted(PRESETS)}")
    fields = {f.name for f in dataclasses.fields(SyntheticSpec)}
    unknown = sorted(set(changes) - fields)
    if unknown:
        raise ValueError(f"SyntheticSpec has no field {', '.join(map(repr, unknown))}")
    spec = PRESETS[name]
    if machines is not None:
        changes["machines"] = machines
    return dataclasses.replace(spec, **changes) if changes else spec


# ---------------------------------------------------------------------------- generation


@dataclass(frozen=True)
class _Jobs:
    """Jobs of one class as parallel arrays: per job `times_us`, `sizes`, `priorities` and
    `requests` (one row of Resources.DIMENSIONS values each); per task `runtimes_us`, the
    tasks of job 0 first, then those of job 1, and so on."""

    times_us: IntArray
    sizes: IntArray
    priorities: IntArray
    requests: IntArray
    runtimes_us: IntArray

    def __len__(self) -> int:
        return int(self.times_us.size)

    @functools.cached_property
    def task_offsets(self) -> IntArray:
        """Where each job's tasks start in `runtimes_us`."""
        return np.concatenate(([0], np.cumsum(self.sizes)[:-1])).astype(np.int64)

    def survivors_at(self, time_us: int) -> _Jobs:
        """The tasks still running at `time_us` if each had started when its job arrived, with
        their remaining runtimes; jobs with no task left are dropped."""
        job_of_task = np.repeat(np.arange(len(self)), self.sizes)
        ends = self.times_us[job_of_task] + self.runtimes_us
        alive = ends > time_us
        sizes = np.bincount(job_of_task[alive], minlength=len(self)).astype(np.int64)
        kept = sizes > 0
        return _Jobs(
            times_us=self.times_us[kept],
            sizes=sizes[kept],
            priorities=self.priorities[kept],
            requests=self.requests[kept],
            runtimes_us=ends[alive] - time_us,
        )

    def take(self, jobs: IntArray, sizes: IntArray) -> _Jobs:
        """Jobs `jobs` (ascending indices), each cut to its first `sizes` tasks."""
        # The result's task i is task number i - starts[j] of its job j, that is of jobs[j].
        starts = np.cumsum(sizes) - sizes
        within = np.arange(int(sizes.sum())) - np.repeat(starts, sizes)
        tasks = np.repeat(self.task_offsets[jobs], sizes) + within
        return _Jobs(
            times_us=self.times_us[jobs],
            sizes=sizes.astype(np.int64),
            priorities=self.priorities[jobs],
            requests=self.requests[jobs],
            runtimes_us=self.runtimes_us[tasks],
        )

    @staticmethod
    def concatenate(parts: list[_Jobs]) -> _Jobs:
        return _Jobs(
            times_us=np.concatenate([p.times_us for p in parts]),
            sizes=np.concatenate([p.sizes for p in parts]),
            priorities=np.concatenate([p.priorities for p in parts]),
            requests=np.concatenate([p.requests for p in parts]),
            runtimes_us=np.concatenate([p.runtimes_us for p in parts]),
        )


class _ClassPlan:
    """What generating one job class needs, worked out once from the spec."""

    def __init__(self, spec: SyntheticSpec, index: int) -> None:
        job_class = spec.job_classes[index]
        self.index = index
        self.job_class = job_class
        self.labels = {"class": job_class.name}
        self.runtime = spec.runtime(job_class)
        self.size_cdf = np.cumsum(job_class.sizes.pmf(spec.job_size_cap(job_class)))
        self.target_live = round(spec.live_tasks(job_class))
        self.task_rate = spec.task_rate(job_class)  # per second
        self.job_rate = spec.job_rate(job_class)  # per second
        self.priorities = np.array([p for p, _ in job_class.priorities], dtype=np.int64)
        weights = np.array([w for _, w in job_class.priorities])
        self.priority_weights = weights / weights.sum()
        largest = spec.largest_machine
        self.cpu_scale, self.cpu_max = spec.cpu_scale_millicores, largest.cpu_millicores
        self.ram_scale, self.ram_max = spec.ram_scale_bytes, largest.ram_bytes
        self.net_max = spec.net_bytes_per_s
        self.requests_enabled = spec.resource_requests
        # Draw about _BLOCK_TASKS tasks per block; blocks are whole milliseconds.
        block_s = min(max(_BLOCK_TASKS / self.task_rate, 1e-3), 1e7)
        self.block_us = max(1_000, round(block_s * MICROSECONDS))
        horizon_us = self.runtime.warmup_horizon(_WARMUP_MISSING) * MICROSECONDS
        self.warmup_blocks = max(1, math.ceil(horizon_us / self.block_us))

    def sample(
        self, rng: np.random.Generator, times_us: IntArray, sizes: IntArray | None = None
    ) -> _Jobs:
        """Jobs arriving at `times_us` (sizes drawn unless given)."""
        n = int(times_us.size)
        job_class = self.job_class
        if sizes is None:
            sizes = _sample_pmf(rng, self.size_cdf, n)
        priorities = rng.choice(self.priorities, size=n, p=self.priority_weights)
        # CPU and RAM: correlated lognormals, capped at the largest machine.
        z_cpu = rng.standard_normal(n)
        rho = job_class.cpu_ram_correlation
        z_ram = rho * z_cpu + math.sqrt(1 - rho**2) * rng.standard_normal(n)
        cpu = job_class.cpu.median * np.exp(job_class.cpu.sigma * z_cpu) * self.cpu_scale
        ram = job_class.ram.median * np.exp(job_class.ram.sigma * z_ram) * self.ram_scale
        wants_net = rng.random(n) < job_class.net_share
        rx = np.where(wants_net, job_class.net_rx.sample(rng, n), 0.0)
        tx = np.where(wants_net, job_class.net_tx.sample(rng, n), 0.0)
        requests = np.zeros((n, len(Resources.DIMENSIONS)), dtype=np.int64)
        requests[:, 0] = np.clip(np.rint(cpu), 1, self.cpu_max)
        requests[:, 1] = np.clip(np.rint(ram), 1, self.ram_max)
        requests[:, 3] = np.clip(np.rint(rx), 0, self.net_max)
        requests[:, 4] = np.clip(np.rint(tx), 0, self.net_max)
        if not self.requests_enabled:
            requests[:] = 0
        runtimes = self.runtime.sample(rng, int(sizes.sum())) * MICROSECONDS
        return _Jobs(
            times_us=times_us.astype(np.int64),
            sizes=sizes.astype(np.int64),
            priorities=priorities.astype(np.int64),
            requests=requests,
            runtimes_us=np.maximum(np.rint(runtimes), 1).astype(np.int64),
        )

    def arrivals_in(self, rng: np.random.Generator, start_us: int) -> _Jobs:
        """The jobs of the Poisson arrival process in [start_us, start_us + block_us)."""
        n = int(rng.poisson(self.job_rate * self.block_us / MICROSECONDS))
        times = np.sort(rng.integers(start_us, start_us + self.block_us, size=n, dtype=np.int64))
        return self.sample(rng, times)


_JobRef: TypeAlias = "tuple[_ClassPlan, _Jobs, int]"
_Entry: TypeAlias = "tuple[Time, int, MachineAdded | MachineFailed | _JobRef]"
"""An item of a stream after time 0: (time, rank, a machine event or (plan, jobs, index))."""


class _Generation:
    """One generation of a spec's workload from a seed: machines, the steady-state population
    at time 0, and the streams of arrivals and machine churn after it. Task and job ids are
    handed out in the order items are made."""

    def __init__(self, spec: SyntheticSpec, seed: int) -> None:
        self.spec = spec
        self.seed = seed
        self.plans = [_ClassPlan(spec, index) for index in range(len(spec.job_classes))]
        self.machines = self._machines()
        self._task_ids = itertools.count()
        self._job_ids = itertools.count()

    def rng(self, *stream: int) -> np.random.Generator:
        """The generator of one stream of draws (see the module docstring on determinism)."""
        return np.random.default_rng(np.random.SeedSequence([self.seed, *stream]))

    # -------------------------------------------------------------- machines

    def _machines(self) -> list[MachineAdded]:
        """Platforms apportioned by weight (largest remainders), scattered over the racks."""
        spec = self.spec
        weights = np.array([p.weight for p in spec.platforms])
        quotas = weights / weights.sum() * spec.machines
        counts = np.floor(quotas).astype(np.int64)
        by_remainder = np.argsort(-(quotas - counts), kind="stable")
        counts[by_remainder[: spec.machines - int(counts.sum())]] += 1
        platform_of = np.repeat(np.arange(len(spec.platforms)), counts)
        platform_of = self.rng(_MACHINES).permutation(platform_of)
        machines = []
        for index, platform_index in enumerate(platform_of.tolist()):
            platform = spec.platforms[platform_index]
            capacity = Resources(
                cpu_millicores=_scale(platform.cpu, spec.cpu_scale_millicores),
                ram_bytes=_scale(platform.ram, spec.ram_scale_bytes),
                disk_bytes=spec.disk_bytes,
                net_rx_bytes_per_s=spec.net_bytes_per_s,
                net_tx_bytes_per_s=spec.net_bytes_per_s,
            )
            machines.append(
                MachineAdded(
                    time=0,
                    machine_id=f"m{index}",
                    capacity=capacity,
                    slots=spec.slots_per_machine,
                    rack_id=f"rack{index // spec.machines_per_rack}",
                    labels={"platform": platform.name},
                )
            )
        return machines

    # -------------------------------------------------------------- the steady state

    def steady_state(self, plan: _ClassPlan) -> _Jobs:
        """The class's jobs running at time 0 (see the module docstring): exactly
        `plan.target_live` tasks with their remaining runtimes, oldest job first; `times_us`
        are still the jobs' arrival times, before 0."""
        pool: list[_Jobs] = []
        alive = 0
        replica = 0
        while alive < plan.target_live:
            if replica == _MAX_WARMUP_REPLICAS:
                raise RuntimeError(
                    f"job class {plan.job_class.name!r}: {replica} warm-ups left only {alive} "
                    f"of {plan.target_live} tasks alive at time 0"
                )
            for block in range(plan.warmup_blocks):
                rng = self.rng(_WARMUP, plan.index, replica, block)
                jobs = plan.arrivals_in(rng, -(block + 1) * plan.block_us).survivors_at(0)
                pool.append(jobs)
                alive += int(jobs.sizes.sum())
            replica += 1
        if not pool:  # nothing is meant to be alive
            return plan.sample(self.rng(_WARMUP), np.zeros(0, dtype=np.int64))
        survivors = _Jobs.concatenate(pool)
        # Draw jobs in random order until their tasks reach the target; trim the last one.
        order = self.rng(_QUOTA, plan.index).permutation(len(survivors))
        reached = np.cumsum(survivors.sizes[order])
        count = int(np.searchsorted(reached, plan.target_live)) + 1
        chosen = order[:count]
        sizes = survivors.sizes[chosen].copy()
        sizes[-1] -= int(reached[count - 1]) - plan.target_live
        by_age = np.argsort(chosen, kind="stable")  # the pool is ordered by age
        return survivors.take(chosen[by_age], sizes[by_age])

    # -------------------------------------------------------------- streams after time 0

    def arrivals(self, plan: _ClassPlan) -> Iterator[_Entry]:
        """An entry for each job of the class arriving from time 0 on, in time order, forever."""
        for block in itertools.count():
            jobs = plan.arrivals_in(self.rng(_ARRIVALS, plan.index, block), block * plan.block_us)
            for index, time in enumerate(jobs.times_us.tolist()):
                yield time, _TASK_RANK, (plan, jobs, index)

    def churn(self) -> Iterator[_Entry]:
        """An entry for each machine failure and return, in time order, forever. A failure
        drawn for a machine that is down already is dropped."""
        spec = self.spec
        rate_per_us = spec.machine_failures_per_day * spec.machines / SECONDS_PER_DAY / 1e6
        if rate_per_us == 0:
            return
        block_us = max(1_000, min(round(_CHURN_BLOCK_FAILURES / rate_per_us), 10**13))
        returns: list[tuple[Time, int, MachineAdded]] = []  # a heap
        down_until: dict[int, Time] = {}
        order = itertools.count()
        for block in itertools.count():
            rng = self.rng(_CHURN, block)
            start = block * block_us
            n = int(rng.poisson(rate_per_us * block_us))
            times = np.sort(rng.integers(start, start + block_us, size=n, dtype=np.int64))
            machines = rng.integers(0, spec.machines, size=n)
            repairs_s = rng.exponential(spec.machine_repair_s, size=n)
            repairs_us = np.maximum(np.rint(repairs_s * MICROSECONDS), 1).astype(np.int64)
            for time, machine, repair in zip(
                times.tolist(), machines.tolist(), repairs_us.tolist(), strict=True
            ):
                while returns and returns[0][0] <= time:
                    back = heapq.heappop(returns)[2]
                    yield back.time, _MACHINE_RANK, back
                if down_until.get(machine, -1) > time:
                    continue
                failure = MachineFailed(time=time, machine_id=f"m{machine}", reason="synthetic")
                yield time, _MACHINE_RANK, failure
                down_until[machine] = time + repair
                back = dataclasses.replace(self.machines[machine], time=time + repair)
                heapq.heappush(returns, (time + repair, next(order), back))
            while returns and returns[0][0] < start + block_us:
                back = heapq.heappop(returns)[2]
                yield back.time, _MACHINE_RANK, back

    # -------------------------------------------------------------- items

    def job_items(self, plan: _ClassPlan, jobs: _Jobs, index: int, time: Time) -> list[TaskArrival]:
        """The TaskArrivals of job `index` of `jobs`, all submitted at `time`."""
        job_id = f"job{next(self._job_ids)}"
        request = Resources(*(int(value) for value in jobs.requests[index]))
        priority = int(jobs.priorities[index])
        start = int(jobs.task_offsets[index])
        runtimes = jobs.runtimes_us[start : start + int(jobs.sizes[index])].tolist()
        return [
            TaskArrival(
                TaskSubmitted(
                    time=time,
                    task_id=next(self._task_ids),
                    job_id=job_id,
                    request=request,
                    priority=priority,
                    labels=plan.labels,
                ),
                runtime,
            )
            for runtime in runtimes
        ]

    def population_items(self) -> Iterator[TaskArrival]:
        """The steady-state population of each class, in class order, all at time 0."""
        for plan in self.plans:
            jobs = self.steady_state(plan)
            for index in range(len(jobs)):
                yield from self.job_items(plan, jobs, index, 0)

    def items(self, end_us: Time) -> Iterator[WorkloadItem]:
        """Everything before `end_us`, in time order."""
        if end_us <= 0:
            return
        yield from self.machines
        yield from self.population_items()
        streams: list[Iterator[_Entry]] = [self.churn()]
        streams.extend(self.arrivals(plan) for plan in self.plans)
        for time, _, payload in heapq.merge(*streams, key=lambda entry: entry[:2]):
            if time >= end_us:
                return
            if isinstance(payload, tuple):
                yield from self.job_items(*payload, time)
            else:
                yield payload


# ---------------------------------------------------------------------------- the workload


@dataclass(frozen=True)
class SyntheticWorkload:
    """The workload of `spec` drawn with `seed`: the same seed gives the same items."""

    spec: SyntheticSpec
    seed: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.spec, SyntheticSpec):
            raise TypeError(f"a SyntheticWorkload needs a SyntheticSpec, got {self.spec!r}")
        _check_seed(self.seed)

    def items(self, duration_us: Time) -> Iterator[WorkloadItem]:
        """The items before `duration_us` microseconds, in time order: the machines and the
        steady-state population at time 0, then arrivals and machine churn. Items are made as
        they are pulled."""
        _require(
            isinstance(duration_us, int) and not isinstance(duration_us, bool) and duration_us >= 0,
            f"the duration must be a non-negative int of microseconds, got {duration_us!r}",
        )
        return _Generation(self.spec, self.seed).items(duration_us)

    def machines(self) -> list[MachineAdded]:
        """The machines the workload adds at time 0."""
        return list(_Generation(self.spec, self.seed).machines)


def single_job_workload(
    machines: int,
    job_size: int,
    *,
    slot_utilisation: float = 0.5,
    seed: int = 0,
    submit_time_us: Time = MICROSECONDS,
    spec: SyntheticSpec | None = None,
    job_class: str = "batch",
) -> list[WorkloadItem]:
    """Figures 8 and 9: `machines` machines in steady state at `slot_utilisation` (0: an empty
    cluster) and one job of `job_size` tasks of class `job_class` arriving at
    `submit_time_us`; nothing else arrives and no machine fails. The shape is `spec`'s
    (default: the "google" preset); the job's request, priority and runtimes are drawn as for
    any job of its class."""
    _require(
        isinstance(job_size, int) and not isinstance(job_size, bool) and job_size >= 1,
        f"the job needs at least one task, got job_size={job_size!r}",
    )
    _require(
        isinstance(submit_time_us, int) and submit_time_us >= 0,
        f"submit_time_us must be a non-negative int, got {submit_time_us!r}",
    )
    _check_non_negative("slot utilisation", slot_utilisation)
    _check_seed(seed)
    base = (spec if spec is not None else PRESETS["google"]).scaled(machines)
    if slot_utilisation > 0:
        base = base.with_slot_utilisation(slot_utilisation)
    generation = _Generation(base, seed)
    plan = generation.plans[base.job_classes.index(base.job_class(job_class))]
    items: list[WorkloadItem] = list(generation.machines)
    if slot_utilisation > 0:
        items.extend(generation.population_items())
    one_job = plan.sample(
        generation.rng(_SINGLE_JOB),
        np.array([submit_time_us], dtype=np.int64),
        np.array([job_size], dtype=np.int64),
    )
    items.extend(generation.job_items(plan, one_job, 0, submit_time_us))
    return items
