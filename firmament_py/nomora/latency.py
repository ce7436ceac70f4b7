"""Latency sources: where a latency-aware policy (NoMora) learns the network latency between two
machines. A source answers, for one machine and every machine of a `MachineIndex`, the latest
latency in microseconds, as one numpy array, plus a `version` that changes whenever its answers
may have changed (so a policy recomputes its costs only then). Three sources:

* `TopologyLatency`: defaults by distance in the pod / rack / machine topology (same machine,
  same rack, same pod, across pods), configurable. NoMora (section 5.1): "Default latency values
  can be determined based on the network topology of the data center to be used instead of the
  actual measured latencies if these are unavailable."
* `TraceLatency`: a replayed set of latency series (`LatencyTraces`), assigned to machine pairs
  by their distance tier and scaled per pair, as NoMora's simulation does (section 6): series
  of the lowest tier within a rack scaled by 0.5-1.0, of the middle tier within a pod and of the
  highest across pods scaled by 0.8-1.2, a small constant within a machine; one value per
  interval (a second), the series repeating if the simulation outlasts it. Series and scale are
  drawn per pair from a keyed hash of the two machine ids, so a pair keeps them however the
  cluster changes, and the order machines joined does not matter.
* `LiveLatency`: the samples a PTPmesh or Pingmesh style system reports, which reach the
  scheduler as `LatencySample` events and the policy through `ClusterView.latency_us`; pairs
  without a sample take another source's answer (topology defaults unless told otherwise).

Worst case over paths (ECMP): the cluster state keeps the latest sample of every direction and
path of a pair and reports the largest; a trace file may hold several paths of a series (a
`path` column), and the series is then their maximum at each time.

Traces are CSV files with a header row naming `tier`, `series`, `time_s`, `latency_us` and
optionally `path`; tier is `rack`, `pod` or `cross-pod`; every series of a file covers the
same times, one value per interval. `synthetic_traces` makes a set with the shape the paper
describes when the measured dataset it used is not at hand (see its docstring for what is
assumed).

The sources live here, inside the package, so that the policy and the experiments that use them
are type-checked with them; `firmament_plugins.latency` (plugins/latency.py) is their name for
drivers and adapters.
"""

from __future__ import annotations

import csv
import hashlib
import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np
import numpy.typing as npt

from firmament_py.sdk import ClusterView, MachineId

__all__ = [
    "TIERS",
    "LatencySource",
    "LatencyTraces",
    "LiveLatency",
    "MachineIndex",
    "TopologyLatency",
    "TraceError",
    "TraceLatency",
    "read_traces",
    "synthetic_traces",
    "write_traces",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
UIntArray = npt.NDArray[np.uint64]

SAME_MACHINE, SAME_RACK, SAME_POD, ACROSS_PODS = 0, 1, 2, 3
TIERS: tuple[str, ...] = ("rack", "pod", "cross-pod")
"""The tiers of a trace set, by distance: within a rack, within a pod, across pods."""
MICROSECONDS = 1_000_000


def _machine_key(machine_id: MachineId) -> int:
    digest = hashlib.blake2b(machine_id.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def _mix(values: UIntArray) -> UIntArray:
    """splitmix64's finaliser, element-wise (a good 64-bit hash of each value)."""
    z = values.copy()
    z ^= z >> np.uint64(30)
    z *= np.uint64(0xBF58476D1CE4E5B9)
    z ^= z >> np.uint64(27)
    z *= np.uint64(0x94D049BB133111EB)
    z ^= z >> np.uint64(31)
    return z


class MachineIndex:
    """The live machines in a fixed order, racks contiguous (pods, then racks, in the order
    they joined), with their rack and pod as integer codes: what sources answer for, as arrays.
    Build one with `MachineIndex.of(cluster)` whenever machines join or leave."""

    def __init__(self, machines: Sequence[tuple[MachineId, str, str]]) -> None:
        """`machines`: (machine, rack, pod) triples, racks contiguous."""
        self.ids: tuple[MachineId, ...] = tuple(m for m, _, _ in machines)
        self.position: dict[MachineId, int] = {m: i for i, m in enumerate(self.ids)}
        rack_code: dict[str, int] = {}
        pod_code: dict[str, int] = {}
        racks: list[int] = []
        pods: list[int] = []
        for _, rack, pod in machines:
            racks.append(rack_code.setdefault(rack, len(rack_code)))
            pods.append(pod_code.setdefault(pod, len(pod_code)))
        self.rack_ids: tuple[str, ...] = tuple(rack_code)
        self.rack_of: IntArray = np.asarray(racks, dtype=np.int64)
        self.pod_of: IntArray = np.asarray(pods, dtype=np.int64)
        if len(racks) and np.any(np.diff(self.rack_of) < 0):
            raise ValueError("a MachineIndex needs each rack's machines together, in rack order")
        self.rack_starts: IntArray = (
            np.flatnonzero(np.concatenate(([True], np.diff(self.rack_of) != 0))).astype(np.int64)
            if racks
            else np.zeros(0, dtype=np.int64)
        )
        self.keys: UIntArray = np.asarray([_machine_key(m) for m in self.ids], dtype=np.uint64)

    @classmethod
    def of(cls, cluster: ClusterView) -> MachineIndex:
        """The cluster's live machines, pod by pod and rack by rack."""
        triples: list[tuple[MachineId, str, str]] = []
        for pod_id, pod in cluster.pods.items():
            for rack_ref in pod.children:
                rack = cluster.resource(rack_ref)
                triples.extend((m.id, rack_ref.id, pod_id) for m in rack.children)
        return cls(triples)

    def __len__(self) -> int:
        return len(self.ids)

    def __repr__(self) -> str:
        return f"MachineIndex({len(self.ids)} machines, {len(self.rack_ids)} racks)"

    def pair_tiers(self, a: IntArray, b: IntArray) -> IntArray:
        """Element-wise distance between the machines at positions `a[i]` and `b[i]`."""
        tier = np.full(len(a), ACROSS_PODS, dtype=np.int64)
        tier[self.pod_of[a] == self.pod_of[b]] = SAME_POD
        tier[self.rack_of[a] == self.rack_of[b]] = SAME_RACK
        tier[a == b] = SAME_MACHINE
        return tier

    def tiers(self, source: MachineId) -> IntArray:
        """Each machine's distance from `source`: 0 itself, 1 its rack, 2 its pod, 3 beyond."""
        at = self.position[source]
        tier = np.full(len(self.ids), ACROSS_PODS, dtype=np.int64)
        tier[self.pod_of == self.pod_of[at]] = SAME_POD
        tier[self.rack_of == self.rack_of[at]] = SAME_RACK
        tier[at] = SAME_MACHINE
        return tier


class LatencySource(Protocol):
    """What a latency-aware policy asks."""

    def latencies_us(
        self, source: MachineId, machines: MachineIndex, cluster: ClusterView
    ) -> FloatArray:
        """The latency in µs from `source` (a machine of `machines`) to each of `machines`,
        in their order, now (`cluster.now`)."""

    def version(self, cluster: ClusterView) -> Hashable:
        """Equal versions, equal answers (for the same machines)."""


@dataclass(frozen=True)
class TopologyLatency:
    """A fixed latency per distance tier, in µs. The defaults are the medians of the tiers of
    `synthetic_traces` (and a small constant within a machine)."""

    same_machine_us: float = 2.0
    same_rack_us: float = 25.0
    same_pod_us: float = 100.0
    across_pods_us: float = 300.0

    def __post_init__(self) -> None:
        for name in ("same_machine_us", "same_rack_us", "same_pod_us", "across_pods_us"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be a finite latency >= 0 µs, got {value!r}")

    def latencies_us(
        self, source: MachineId, machines: MachineIndex, cluster: ClusterView
    ) -> FloatArray:
        values = np.asarray(
            [self.same_machine_us, self.same_rack_us, self.same_pod_us, self.across_pods_us],
            dtype=np.float64,
        )
        return values[machines.tiers(source)]

    def version(self, cluster: ClusterView) -> Hashable:
        return 0


@dataclass(frozen=True)
class LiveLatency:
    """The latencies reported through `LatencySample` events (the worst over paths, as the
    cluster keeps them); pairs without a sample take `fallback`'s answer."""

    fallback: LatencySource = TopologyLatency()

    def latencies_us(
        self, source: MachineId, machines: MachineIndex, cluster: ClusterView
    ) -> FloatArray:
        values = np.array(self.fallback.latencies_us(source, machines, cluster), dtype=np.float64)
        position = machines.position
        for peer, latency in cluster.latencies_from(source).items():
            at = position.get(peer)
            if at is not None:
                values[at] = latency
        return values

    def version(self, cluster: ClusterView) -> Hashable:
        return (cluster.latency_version, self.fallback.version(cluster))


# ---------------------------------------------------------------------- traces


class TraceError(ValueError):
    """A trace file that cannot be read; the message names the line and column."""


@dataclass(frozen=True)
class LatencyTraces:
    """Latency series by tier: `series[tier]` is an array (series x time steps) of µs, one
    value per `interval_s`, every series of the same length; `names[tier]` their names."""

    series: Mapping[str, FloatArray]
    names: Mapping[str, tuple[str, ...]]
    interval_s: float = 1.0

    def __post_init__(self) -> None:
        if set(self.series) != set(TIERS) or set(self.names) != set(TIERS):
            raise ValueError(f"a trace set needs series of every tier {TIERS}")
        lengths = {array.shape[1] for array in self.series.values() if array.ndim == 2}
        for tier in TIERS:
            array = self.series[tier]
            if array.ndim != 2 or array.shape[0] == 0:
                raise ValueError(f"tier {tier!r}: needs at least one series (a 2-d array)")
            if array.shape[0] != len(self.names[tier]):
                raise ValueError(
                    f"tier {tier!r}: {array.shape[0]} series, names for {len(self.names[tier])}"
                )
            if not np.all(np.isfinite(array)) or np.any(array < 0):
                raise ValueError(f"tier {tier!r}: latencies must be finite and non-negative")
        if len(lengths) != 1 or 0 in lengths:
            raise ValueError("every series must cover the same, non-empty, time steps")
        if not (math.isfinite(self.interval_s) and self.interval_s > 0):
            raise ValueError(f"interval_s must be positive, got {self.interval_s}")

    @property
    def steps(self) -> int:
        return int(self.series[TIERS[0]].shape[1])

    def step_at(self, time_us: int) -> int:
        """The time step in force at `time_us` (the series repeat after their end)."""
        return int(time_us // round(self.interval_s * MICROSECONDS)) % self.steps

    def median_us(self, tier: str) -> float:
        return float(np.median(self.series[tier]))


@dataclass(frozen=True)
class TraceLatency:
    """Replays `traces` (see the module docstring): each pair of machines gets one series of
    its tier and a scale drawn uniformly from the tier's range, from a keyed hash of the two
    machine ids and `seed`; within a machine, `same_machine_us`."""

    traces: LatencyTraces
    seed: int = 0
    rack_scale: tuple[float, float] = (0.5, 1.0)
    pod_scale: tuple[float, float] = (0.8, 1.2)
    across_pods_scale: tuple[float, float] = (0.8, 1.2)
    same_machine_us: float = 2.0

    def at(
        self, time_us: int, source_keys: UIntArray, target_keys: UIntArray, tiers: IntArray
    ) -> FloatArray:
        """Element-wise: the latency at `time_us` between the machines whose keys
        (`MachineIndex.keys`) are `source_keys[i]` and `target_keys[i]`, at distance `tiers[i]`
        (`MachineIndex.tiers`)."""
        step = self.traces.step_at(time_us)
        low = np.minimum(source_keys, target_keys)
        high = np.maximum(source_keys, target_keys)
        salt = np.uint64((self.seed * 0x9E3779B97F4A7C15) % 2**64)
        key = _mix(_mix(low ^ salt) ^ high)
        uniform = (key >> np.uint64(11)).astype(np.float64) / float(2**53)
        out = np.full(len(tiers), self.same_machine_us, dtype=np.float64)
        for code, name, (lowest, highest) in (
            (SAME_RACK, "rack", self.rack_scale),
            (SAME_POD, "pod", self.pod_scale),
            (ACROSS_PODS, "cross-pod", self.across_pods_scale),
        ):
            chosen = tiers == code
            if not np.any(chosen):
                continue
            series = self.traces.series[name]
            which = (key[chosen] % np.uint64(series.shape[0])).astype(np.int64)
            scale = lowest + (highest - lowest) * uniform[chosen]
            out[chosen] = series[which, step] * scale
        return out

    def latencies_us(
        self, source: MachineId, machines: MachineIndex, cluster: ClusterView
    ) -> FloatArray:
        keys = machines.keys
        sources = np.full(len(keys), keys[machines.position[source]], dtype=np.uint64)
        return self.at(cluster.now, sources, keys, machines.tiers(source))

    def pair_latencies_us(
        self,
        sources: Sequence[MachineId],
        targets: Sequence[MachineId],
        machines: MachineIndex,
        time_us: int,
    ) -> FloatArray:
        """The latency at `time_us` between `sources[i]` and `targets[i]`, machines of
        `machines`, element-wise (for measuring many placements at once)."""
        a = np.asarray([machines.position[m] for m in sources], dtype=np.int64)
        b = np.asarray([machines.position[m] for m in targets], dtype=np.int64)
        return self.at(time_us, machines.keys[a], machines.keys[b], machines.pair_tiers(a, b))

    def version(self, cluster: ClusterView) -> Hashable:
        return self.traces.step_at(cluster.now)


def synthetic_traces(
    duration_s: int,
    *,
    seed: int = 0,
    series_per_tier: int = 42,
    medians_us: Mapping[str, float] | None = None,
    interval_s: float = 1.0,
) -> LatencyTraces:
    """A trace set shaped as NoMora's simulation describes its data (section 6), for when the
    measured PTPmesh dataset is not at hand: per tier, `series_per_tier` series (the paper: 6
    week-long traces per tier cut into days, 42 series) of one value per `interval_s`.

    Assumed, not measured: tier medians of 25 µs within a rack (the GCE-like lowest tier),
    100 µs within a pod (Azure-like) and 300 µs across pods (EC2-like); each series' own median
    varies lognormally around its tier's (sigma 0.25, different VMs and days); around it, an
    AR(1) process in the logarithm (correlation 0.95 from one second to the next, stationary
    sigma 0.15), a slow daily swing of +-10% with a random phase, and congestion episodes (one
    per ten minutes on average, lasting an exponential 20 s on average, multiplying the latency
    by 1.5-3). Deterministic in `seed`."""
    if not (isinstance(duration_s, int) and duration_s >= 1):
        raise ValueError(f"duration_s must be a positive int, got {duration_s!r}")
    if series_per_tier < 1:
        raise ValueError(f"series_per_tier must be positive, got {series_per_tier}")
    medians = {"rack": 25.0, "pod": 100.0, "cross-pod": 300.0, **(medians_us or {})}
    steps = max(1, math.ceil(duration_s / interval_s))
    t = np.arange(steps, dtype=np.float64) * interval_s
    series: dict[str, FloatArray] = {}
    names: dict[str, tuple[str, ...]] = {}
    for tier_index, tier in enumerate(TIERS):
        rng = np.random.default_rng(np.random.SeedSequence([seed, 5, tier_index]))
        rows = np.empty((series_per_tier, steps), dtype=np.float64)
        for row in range(series_per_tier):
            median = medians[tier] * math.exp(rng.normal(0.0, 0.25))
            rho, sigma = 0.95, 0.15
            shocks = rng.normal(0.0, sigma * math.sqrt(1 - rho**2), size=steps)
            noise = np.empty(steps)
            noise[0] = rng.normal(0.0, sigma)
            for i in range(1, steps):  # a short Python loop: traces are made once per run
                noise[i] = rho * noise[i - 1] + shocks[i]
            daily = 1 + 0.1 * np.sin(2 * math.pi * t / 86_400 + rng.uniform(0, 2 * math.pi))
            congestion = np.ones(steps)
            episodes = rng.poisson(steps * interval_s / 600)
            for start in rng.integers(0, steps, size=episodes).tolist():
                length = max(1, int(rng.exponential(20.0) / interval_s))
                congestion[start : start + length] *= rng.uniform(1.5, 3.0)
            rows[row] = np.maximum(median * np.exp(noise) * daily * congestion, 1.0)
        series[tier] = rows
        names[tier] = tuple(f"{tier}-{row}" for row in range(series_per_tier))
    return LatencyTraces(series, names, interval_s)


def write_traces(traces: LatencyTraces, path: str | Path) -> Path:
    """Write `traces` as a trace CSV (one row per series and time step)."""
    path = Path(path)
    with path.open("w", newline="", encoding="utf-8") as file:
        writer = csv.writer(file)
        writer.writerow(["tier", "series", "time_s", "latency_us"])
        for tier in TIERS:
            for name, row in zip(traces.names[tier], traces.series[tier], strict=True):
                for step, value in enumerate(row.tolist()):
                    writer.writerow([tier, name, f"{step * traces.interval_s:g}", f"{value:.3f}"])
    return path


def read_traces(path: str | Path, *, interval_s: float = 1.0) -> LatencyTraces:
    """Read a trace CSV (see the module docstring). Several rows of one series at one time
    (several paths) count as their maximum. TraceError names the line and column of a bad value,
    a tier without series, or series of different lengths."""
    path = Path(path)
    values: dict[tuple[str, str], dict[int, float]] = {}
    try:
        with path.open(newline="", encoding="utf-8") as file:
            reader = csv.reader(file)
            header = [name.strip() for name in next(reader, [])]
            columns = {name: index for index, name in enumerate(header)}
            missing = [c for c in ("tier", "series", "time_s", "latency_us") if c not in columns]
            if missing:
                raise TraceError(
                    f"{path}: line 1: the header must name tier, series, time_s, latency_us "
                    f"(and optionally path); missing {', '.join(missing)}"
                )
            for row in reader:
                line = reader.line_num
                if not row or all(not cell.strip() for cell in row):
                    continue

                def cell(name: str, row: list[str] = row, line: int = line) -> str:
                    column = columns[name]
                    if column >= len(row):
                        raise TraceError(
                            f"{path}: line {line}, column {column + 1} ({name}): missing"
                        )
                    return row[column].strip()

                tier = cell("tier")
                if tier not in TIERS:
                    raise TraceError(
                        f"{path}: line {line}, column {columns['tier'] + 1} (tier): {tier!r} is "
                        f"not one of {', '.join(TIERS)}"
                    )
                numbers: dict[str, float] = {}
                for name in ("time_s", "latency_us"):
                    text = cell(name)
                    try:
                        number = float(text)
                    except ValueError:
                        number = math.nan
                    if not math.isfinite(number) or number < 0:
                        raise TraceError(
                            f"{path}: line {line}, column {columns[name] + 1} ({name}): "
                            f"{text!r} is not a non-negative number"
                        )
                    numbers[name] = number
                step = numbers["time_s"] / interval_s
                if abs(step - round(step)) > 1e-6:
                    raise TraceError(
                        f"{path}: line {line}, column {columns['time_s'] + 1} (time_s): "
                        f"{numbers['time_s']:g} is not a multiple of the {interval_s:g} s interval"
                    )
                series = values.setdefault((tier, cell("series")), {})
                at = round(step)
                series[at] = max(series.get(at, 0.0), numbers["latency_us"])
    except OSError as error:
        raise TraceError(f"{path}: cannot read it: {error}") from None
    except (UnicodeDecodeError, csv.Error) as error:
        raise TraceError(f"{path}: not a CSV file: {error}") from None
    by_tier: dict[str, FloatArray] = {}
    names: dict[str, tuple[str, ...]] = {}
    steps: int | None = None
    for tier in TIERS:
        keys = [key for key in values if key[0] == tier]
        if not keys:
            raise TraceError(f"{path}: no series of tier {tier!r}")
        rows = []
        for key in keys:
            series = values[key]
            length = max(series) + 1
            if len(series) != length or (steps is not None and length != steps):
                raise TraceError(
                    f"{path}: series {key[1]!r} ({tier}) covers {len(series)} of {length} time "
                    f"steps; every series must cover the same steps, one per interval, from 0"
                    + (f" (the first covers {steps})" if steps is not None else "")
                )
            steps = length
            rows.append([series[i] for i in range(length)])
        by_tier[tier] = np.asarray(rows, dtype=np.float64)
        names[tier] = tuple(key[1] for key in keys)
    return LatencyTraces(by_tier, names, interval_s)
