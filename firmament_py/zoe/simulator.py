"""A discrete-event simulator of applications under an application scheduler.

Events are arrivals (from the workload) and departures (derived: an application finishes when
its work is done). After every event the scheduler's virtual assignment is carried out by a
`Placement`: `PooledPlacement` takes it as it is, the cluster as one pool of cpu and ram. That
is our choice: the paper says its simulator "fulfills [the assignment] by allocating resources
accordingly, which happens instantaneously", not how it places components, and the authors'
public simulator (DistributedSystemsGroup/cluster-scheduler-simulator) places them machine by
machine. `firmament_py.zoe.placement.FlowPlacement` places every component on a machine
through the flow scheduler and reports how many elastic components really run, and which
admitted applications could not start (not all of their core components found a machine):
those are withdrawn from service and wait again.

Service model (section 2.2): an application that has started works at rate C - 2 + x, x the
elastic components running; the simulator keeps the work left and, whenever x changes, the
time it will finish. Time is in seconds (floats: the service model divides work by rates, so
finishing times are not whole microseconds, unlike `firmament_py.sim.core.EventQueue`'s; with
a handful of applications in service, the next departure is found by a scan instead).

An application whose core components cannot be placed even when nothing else holds any
resource is refused then (recorded with the reason), never left waiting forever.

Metrics (`ZoeResult`): per application, queuing time (arrival to start), turnaround (arrival to
finish), slowdown (runtime over nominal runtime; above 1 is slower than alone in the cluster);
over time, the number of applications waiting and in service and the fraction of cpu and ram
allocated, time-weighted over the window from the first arrival to the last (so that the
draining tail of a finite workload does not count as an idle cluster).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from firmament_py.zoe.application import Application
from firmament_py.zoe.baselines import MalleableScheduler, RigidScheduler
from firmament_py.zoe.capacity import ClusterCapacity, Demand
from firmament_py.zoe.flexible import FlexibleRules, FlexibleScheduler
from firmament_py.zoe.scheduler import ApplicationScheduler
from firmament_py.zoe.sorting import SortingPolicy, load_sorting

__all__ = [
    "SCHEDULER_NAMES",
    "ApplicationRecord",
    "Placement",
    "PlacementOutcome",
    "PooledPlacement",
    "Segment",
    "ZoeResult",
    "ZoeSimulator",
    "make_scheduler",
]

SCHEDULER_NAMES = ("flexible", "rigid", "malleable")

_DONE = 1e-9
"""Work left below this fraction of an application's work counts as done (float rounding)."""


def make_scheduler(
    name: str,
    capacity: ClusterCapacity,
    sorting: str | SortingPolicy = "fifo",
    *,
    preemptive: bool = False,
    remaining_work: Callable[[Application], float] | None = None,
    rules: FlexibleRules = FlexibleRules.OURS,
) -> ApplicationScheduler:
    """The scheduler `name` ("flexible", "rigid" or "malleable"). Only the flexible one
    preempts and reads Algorithms 1 and 2 by `rules`; ValueError for an unknown name, or
    preemption or the paper's rules asked of a baseline."""
    policy = load_sorting(sorting) if isinstance(sorting, str) else sorting
    if name == "flexible":
        return FlexibleScheduler(
            capacity, policy, preemptive=preemptive, remaining_work=remaining_work, rules=rules
        )
    if preemptive:
        raise ValueError(f"only the flexible scheduler preempts, not {name!r}")
    if FlexibleRules(rules) is not FlexibleRules.OURS:
        raise ValueError(
            f"the rules are the flexible scheduler's (Algorithms 1 and 2), not {name!r}'s"
        )
    if name == "rigid":
        return RigidScheduler(capacity, policy, remaining_work=remaining_work)
    if name == "malleable":
        return MalleableScheduler(capacity, policy, remaining_work=remaining_work)
    raise ValueError(f"unknown scheduler {name!r}; known: {', '.join(SCHEDULER_NAMES)}")


# ---------------------------------------------------------------------- placement


@dataclass(frozen=True)
class PlacementOutcome:
    """What a placement made of a virtual assignment: the elastic components running per
    application in service, and the applications whose core components could not all start."""

    elastic_running: Mapping[str, int]
    failed: tuple[str, ...] = ()


class Placement(Protocol):
    """Carries out virtual assignments (see the module docstring)."""

    name: str

    def realize(
        self, now: float, serving: Sequence[Application], grants: Mapping[str, int]
    ) -> PlacementOutcome:
        """Make `serving` run with `grants` elastic components each, as far as possible."""

    def release(self, application: Application, now: float) -> None:
        """`application` finished: free everything it holds."""


class PooledPlacement:
    """The cluster as one pool: every virtual assignment runs exactly as granted."""

    name = "pooled"

    def realize(
        self, now: float, serving: Sequence[Application], grants: Mapping[str, int]
    ) -> PlacementOutcome:
        return PlacementOutcome(dict(grants))

    def release(self, application: Application, now: float) -> None:
        """Nothing to free: the pool is the scheduler's own bookkeeping."""


# ---------------------------------------------------------------------- results


@dataclass
class ApplicationRecord:
    """One application's life: submitted, started (its cores run), finished, or refused."""

    application: Application
    started: float | None = None
    finished: float | None = None
    refused: str | None = None
    withdrawals: int = 0

    @property
    def queuing(self) -> float | None:
        return None if self.started is None else self.started - self.application.arrival

    @property
    def turnaround(self) -> float | None:
        return None if self.finished is None else self.finished - self.application.arrival

    @property
    def slowdown(self) -> float | None:
        if self.finished is None or self.started is None:
            return None
        return (self.finished - self.started) / self.application.nominal_runtime


@dataclass(frozen=True)
class Segment:
    """The state between two events: how long it lasted, applications waiting and in
    service, the fractions of cpu and ram allocated."""

    start: float
    duration: float
    pending: int
    running: int
    cpu: float
    ram: float


@dataclass
class ZoeResult:
    """What a simulation measured (see the module docstring)."""

    scheduler: str
    sorting: str
    preemptive: bool
    placement: str
    records: dict[str, ApplicationRecord]
    segments: list[Segment] = field(default_factory=list)
    window: tuple[float, float] = (0.0, 0.0)
    events: int = 0
    rules: FlexibleRules = FlexibleRules.OURS
    """How the flexible scheduler read Algorithms 1 and 2 (the baselines: always `OURS`)."""

    @property
    def finished(self) -> list[ApplicationRecord]:
        return [r for r in self.records.values() if r.finished is not None]

    @property
    def refused(self) -> list[ApplicationRecord]:
        return [r for r in self.records.values() if r.refused is not None]

    @property
    def unfinished(self) -> list[ApplicationRecord]:
        return [r for r in self.records.values() if r.finished is None and r.refused is None]

    def values(self, metric: str, category: str | None = None) -> list[float]:
        """`metric` ("turnaround", "queuing" or "slowdown") of every finished application (of
        `category`, if given)."""
        out: list[float] = []
        for record in self.finished:
            if category is not None and record.application.category != category:
                continue
            value = getattr(record, metric)
            if value is not None:
                out.append(float(value))
        return out

    def time_weighted(self, attribute: str) -> tuple[float, float]:
        """The time-weighted mean and median of a `Segment` attribute ("pending", "running",
        "cpu", "ram") over the measurement window; NaN without any segment in it."""
        start, end = self.window
        values: list[float] = []
        weights: list[float] = []
        for segment in self.segments:
            low = max(segment.start, start)
            high = min(segment.start + segment.duration, end)
            if high > low:
                values.append(float(getattr(segment, attribute)))
                weights.append(high - low)
        if not weights:
            return math.nan, math.nan
        order = np.argsort(values)
        sorted_values = np.asarray(values)[order]
        cumulative = np.cumsum(np.asarray(weights)[order])
        median = float(sorted_values[np.searchsorted(cumulative, cumulative[-1] / 2)])
        return float(np.average(values, weights=weights)), median

    def summary(self, category: str | None = None) -> dict[str, float]:
        """Percentiles of turnaround, queuing and slowdown, means, and the time-weighted queue
        sizes and allocation, by name (NaN where nothing was measured)."""
        out: dict[str, float] = {
            "applications": float(len(self.records)),
            "finished": float(len(self.finished)),
            "refused": float(len(self.refused)),
        }
        for metric in ("turnaround", "queuing", "slowdown"):
            values = self.values(metric, category)
            for name, q in (("p25", 25), ("p50", 50), ("p75", 75), ("p95", 95)):
                out[f"{metric}_{name}"] = float(np.percentile(values, q)) if values else math.nan
            out[f"{metric}_mean"] = float(np.mean(values)) if values else math.nan
        if category is None:
            for attribute in ("pending", "running", "cpu", "ram"):
                mean, median = self.time_weighted(attribute)
                out[f"{attribute}_mean"] = mean
                out[f"{attribute}_p50"] = median
        return out


# ---------------------------------------------------------------------- the simulator


class ZoeSimulator:
    """Runs `applications` through `scheduler` ("flexible", "rigid" or "malleable") with the
    sorting policy `sorting`, on `capacity`, carried out by `placement` (default pooled); the
    flexible scheduler reads Algorithms 1 and 2 by `rules` (default `FlexibleRules.OURS`)."""

    def __init__(
        self,
        applications: Iterable[Application],
        capacity: ClusterCapacity,
        *,
        scheduler: str = "flexible",
        sorting: str | SortingPolicy = "fifo",
        preemptive: bool = False,
        placement: Placement | None = None,
        rules: FlexibleRules = FlexibleRules.OURS,
    ) -> None:
        self.applications = sorted(applications, key=lambda a: a.arrival)
        self.capacity = capacity
        self.remaining: dict[str, float] = {}
        self.scheduler = make_scheduler(
            scheduler,
            capacity,
            sorting,
            preemptive=preemptive,
            remaining_work=lambda application: self.remaining.get(
                application.app_id, application.work
            ),
            rules=rules,
        )
        self.placement: Placement = placement if placement is not None else PooledPlacement()
        self.now = 0.0
        self.rates: dict[str, int] = {}
        self.allocated = Demand()
        self.result = ZoeResult(
            scheduler=scheduler,
            sorting=self.scheduler.sorting.name,
            preemptive=preemptive,
            placement=self.placement.name,
            records={},
            rules=FlexibleRules(rules),
        )
        self.elastic_running: dict[str, int] = {}

    def run(self) -> ZoeResult:
        """Simulate until every application finished or was refused (or nothing can move)."""
        applications = self.applications
        records = self.result.records
        for application in applications:
            if application.app_id in records:
                raise ValueError(f"application {application.app_id!r} appears twice")
            records[application.app_id] = ApplicationRecord(application)
        if applications:
            self.result.window = (applications[0].arrival, applications[-1].arrival)
        self.now = applications[0].arrival if applications else 0.0
        index = 0
        while True:
            next_arrival = applications[index].arrival if index < len(applications) else math.inf
            next_departure, departing = self._next_departure()
            when = min(next_arrival, next_departure)
            if math.isinf(when):
                break
            self._advance(when)
            self.result.events += 1
            if departing is not None and next_departure <= next_arrival:
                self.remaining[departing] = 0.0
                for app_id in [a for a, left in self.remaining.items() if self._done(a, left)]:
                    self._depart(app_id)
            else:
                arriving: list[Application] = []
                while index < len(applications) and applications[index].arrival <= when:
                    arriving.append(applications[index])
                    index += 1
                self._arrive(arriving)
            self._realize()
        return self.result

    # ------------------------------------------------------------------ steps

    def _done(self, app_id: str, left: float) -> bool:
        return left <= _DONE * self.result.records[app_id].application.work

    def _next_departure(self) -> tuple[float, str | None]:
        best, who = math.inf, None
        for app_id, rate in self.rates.items():
            if rate > 0:
                when = self.now + self.remaining[app_id] / rate
                if when < best:
                    best, who = when, app_id
        return best, who

    def _advance(self, when: float) -> None:
        elapsed = when - self.now
        if elapsed > 0:
            cpu, ram = self.allocated.fractions_of(self.capacity.total)
            self.result.segments.append(
                Segment(
                    self.now,
                    elapsed,
                    self.scheduler.pending,
                    len(self.scheduler.serving),
                    cpu,
                    ram,
                )
            )
            for app_id, rate in self.rates.items():
                self.remaining[app_id] = max(0.0, self.remaining[app_id] - rate * elapsed)
        self.now = when

    def _arrive(self, applications: list[Application]) -> None:
        for application, refusal in self.scheduler.submit_together(applications, self.now):
            self.result.records[application.app_id].refused = str(refusal)

    def _depart(self, app_id: str) -> None:
        record = self.result.records[app_id]
        record.finished = self.now
        del self.rates[app_id]
        del self.remaining[app_id]
        self.elastic_running.pop(app_id, None)
        self.placement.release(record.application, self.now)
        self.scheduler.complete(app_id, self.now)

    def _realize(self) -> None:
        """Carry out the scheduler's assignment; withdraw what could not start, until the
        placement starts everything that is in service."""
        scheduler = self.scheduler
        while True:
            outcome = self.placement.realize(self.now, scheduler.serving, scheduler.grants)
            if not outcome.failed:
                if scheduler.serving or not scheduler.pending:
                    break
                # Withdrawals emptied S: the cluster is free, so try the lines again.
                scheduler.retry(self.now)
                if not scheduler.serving:
                    break
                continue
            for app_id in outcome.failed:
                record = self.result.records[app_id]
                if record.started is not None:
                    raise RuntimeError(
                        f"placement failed application {app_id!r}, which had started: its core "
                        "components must never be taken back"
                    )
                record.withdrawals += 1
                alone = len(scheduler.serving) == 1
                scheduler.withdraw(app_id, self.now)
                if alone:
                    scheduler.waiting.remove(record.application)
                    record.refused = (
                        f"application {app_id!r}: its core components cannot all be placed on "
                        "the machines even with nothing else running"
                    )
        allocated = Demand()
        for application in scheduler.serving:
            app_id = application.app_id
            running = outcome.elastic_running.get(app_id, 0)
            record = self.result.records[app_id]
            if record.started is None:
                record.started = self.now
                self.remaining[app_id] = application.work
            self.rates[app_id] = application.rate(running)
            self.elastic_running[app_id] = running
            allocated = allocated + application.allocated(running)
        self.allocated = allocated
