"""Applications sampled from the shape of the paper's workload (section 4.1, Figure 2).

The paper samples empirical distributions computed from Google's traces, which it does not
publish; we use parametric distributions with the ranges and shapes its Figure 2 and text give:

* mix: 80% batch, 20% interactive; batch applications are 80% elastic (B-E: Spark-like, a few
  core components and many elastic ones) and 20% rigid (B-R: TensorFlow-like, core only);
* inter-arrival times: bimodal, bursts of quick arrivals (log-normal, median 1 s) mixed with
  long gaps (log-normal, median 5 minutes), 60% / 40%; then scaled so that the offered load
  (the sum over applications of full demand x nominal runtime, over cluster capacity x span,
  in whichever of cpu and ram is larger) is `load`;
* nominal runtime: log-normal, median 30 minutes, from 30 s to 5 weeks (batch); interactive
  sessions median 10 minutes, at most a day;
* per application, its workers share one shape: cpu log-normal with median 1 core, from 10
  millicores to 6 cores; ram log-normal with median 2 GiB, from 16 MiB to 32 GiB; the two
  coordinators ask for 0.5 cores and 1 GiB each;
* components: B-E have 2 coordinators and 1 core worker (occasionally up to 4), plus elastic
  workers log-normal with median 16, from 1 to 2,000; B-R have 2 coordinators plus core workers
  log-normal with median 10, from 1 to 1,000; interactive applications have 3 core components
  and elastic ones log-normal with median 5, up to 200, and priority 1 (batch 0), so that the
  preemptive scheduler serves them ahead of batch;
* no application's core components take more than a quarter of the cluster (in cpu or ram),
  nor all of its components more than half (halving the counts until they fit): the paper's
  traces hold none that would not fit, and the rigid baseline would refuse those.

Work is nominal runtime x (C - 2 + E). Everything is drawn from one seeded numpy generator.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from firmament_py.zoe.application import Application, Component, ComponentClass
from firmament_py.zoe.capacity import GIB, ClusterCapacity, Demand

__all__ = [
    "BATCH_ELASTIC",
    "BATCH_RIGID",
    "CATEGORIES",
    "INTERACTIVE",
    "MAX_APPLICATIONS",
    "WorkloadSpec",
    "generate",
]

BATCH_ELASTIC = "B-E"
BATCH_RIGID = "B-R"
INTERACTIVE = "Int"
CATEGORIES = (BATCH_ELASTIC, BATCH_RIGID, INTERACTIVE)

MIB = 1 << 20
MAX_APPLICATIONS = 1_000_000
"""The most applications a `WorkloadSpec` asks for: past it a typo runs until memory runs out."""
_COORDINATOR = Demand(500, GIB)


@dataclass(frozen=True)
class WorkloadSpec:
    """How many applications, the offered load, and the mix (see the module docstring)."""

    applications: int = 1000
    load: float = 0.9
    interactive_fraction: float = 0.2
    rigid_fraction_of_batch: float = 0.2
    burst_fraction: float = 0.6

    def __post_init__(self) -> None:
        if self.applications <= 0:
            raise ValueError(f"applications must be positive, got {self.applications}")
        if self.applications > MAX_APPLICATIONS:
            raise ValueError(
                f"applications must be at most {MAX_APPLICATIONS:,}, got {self.applications:,}"
            )
        if not self.load > 0 or not math.isfinite(self.load):
            raise ValueError(f"load must be a positive number, got {self.load}")
        for name in ("interactive_fraction", "rigid_fraction_of_batch", "burst_fraction"):
            value = getattr(self, name)
            if not 0 <= value <= 1:
                raise ValueError(f"{name} must be between 0 and 1, got {value}")


def _lognormal(
    rng: np.random.Generator, median: float, sigma10: float, low: float, high: float
) -> float:
    """A log-normal sample with this median and standard deviation of log10, clipped."""
    value = median * 10 ** rng.normal(0.0, sigma10)
    return float(min(high, max(low, value)))


def _category(rng: np.random.Generator, spec: WorkloadSpec) -> str:
    if rng.random() < spec.interactive_fraction:
        return INTERACTIVE
    return BATCH_RIGID if rng.random() < spec.rigid_fraction_of_batch else BATCH_ELASTIC


def _application(
    rng: np.random.Generator, index: int, category: str, capacity: ClusterCapacity
) -> Application:
    worker = Demand(
        round(_lognormal(rng, 1.0, 0.45, 0.01, 6.0) * 100) * 10,
        round(_lognormal(rng, 2.0, 0.55, 16 / 1024, 32.0) * 1024) * MIB,
    )
    if category == BATCH_ELASTIC:
        core_workers = 1 + int(rng.random() < 0.2) * int(rng.integers(1, 4))
        elastic = round(_lognormal(rng, 16, 0.6, 1, 2000))
        runtime = _lognormal(rng, 1800, 0.8, 30, 3_000_000)
        priority = 0
    elif category == BATCH_RIGID:
        core_workers = round(_lognormal(rng, 10, 0.6, 1, 1000))
        elastic = 0
        runtime = _lognormal(rng, 1800, 0.8, 30, 3_000_000)
        priority = 0
    else:
        core_workers = 1
        elastic = round(_lognormal(rng, 5, 0.5, 0, 200))
        runtime = _lognormal(rng, 600, 0.5, 60, 86_400)
        priority = 1
    quarter = Demand(capacity.total.cpu_millicores // 4, capacity.total.ram_bytes // 4)
    half = quarter * 2
    while core_workers > 1 and not (_COORDINATOR * 2 + worker * core_workers).fits_in(quarter):
        core_workers = max(1, core_workers // 2)
    while elastic > 0 and not (_COORDINATOR * 2 + worker * (core_workers + elastic)).fits_in(half):
        elastic //= 2
    components = (
        [Component(ComponentClass.CORE, _COORDINATOR)] * 2
        + [Component(ComponentClass.CORE, worker)] * core_workers
        + [Component(ComponentClass.ELASTIC, worker)] * elastic
    )
    productive = core_workers + elastic
    return Application(
        app_id=f"app-{index:06d}",
        arrival=0.0,
        work=runtime * productive,
        components=tuple(components),
        priority=priority,
        category=category,
    )


def generate(spec: WorkloadSpec, capacity: ClusterCapacity, seed: int) -> list[Application]:
    """`spec.applications` applications for `capacity`, in order of arrival (see the module
    docstring). The same spec, capacity and seed give the same applications."""
    rng = np.random.default_rng(seed)
    drafts = [
        _application(rng, index, _category(rng, spec), capacity)
        for index in range(spec.applications)
    ]
    gaps = [
        _lognormal(rng, 1.0, 0.5, 1e-3, 1e3)
        if rng.random() < spec.burst_fraction
        else _lognormal(rng, 300.0, 0.5, 1.0, 1e5)
        for _ in drafts
    ]
    total = capacity.total
    cpu_seconds = sum(d.full_demand.cpu_millicores * d.nominal_runtime for d in drafts)
    ram_seconds = sum(d.full_demand.ram_bytes * d.nominal_runtime for d in drafts)
    span = max(cpu_seconds / total.cpu_millicores, ram_seconds / total.ram_bytes) / spec.load
    scale = span / sum(gaps)
    applications: list[Application] = []
    arrival = 0.0
    for draft, gap in zip(drafts, gaps, strict=True):
        applications.append(
            Application(
                app_id=draft.app_id,
                arrival=arrival,
                work=draft.work,
                components=draft.components,
                priority=draft.priority,
                category=draft.category,
            )
        )
        arrival += gap * scale
    return applications
