"""Zoe's claims over many seeds: each seed's paired quantity (the flexible scheduler against a
baseline, or preemption against none, on the same workload) and the confidence interval of its
mean, so that a verdict says how far the seeds agree rather than resting on one median.

The two Zoe experiments (`firmament_py.zoe.experiment`, `preemption_experiment`) run every
series on the same sampled workload per seed; pairing by seed removes the workload's own
variation from the comparison, which is what made single-seed results swing (issue 34).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

from firmament_py.sim.experiment import Measurement, paired_by_seed, values_by_seed
from firmament_py.sim.verdicts import Interval, mean_interval

__all__ = [
    "TEN_SEEDS",
    "gain_pct",
    "interval_text",
    "paired",
    "per_seed_interval",
    "reduction_pct",
]

TEN_SEEDS = tuple(range(10))
"""The seeds of the quick and full scales: the paper's results "include 10 simulation runs"."""


def paired(
    measurements: Iterable[Measurement],
    metric: str,
    baseline: str,
    candidate: str,
    x: float,
    combine: Callable[[float, float], float],
) -> list[float]:
    """`combine(baseline's value, candidate's value)` of `metric` at `x`, one per seed that
    measured both series, in order of seed; seeds where either is missing are left out."""
    return paired_by_seed(
        values_by_seed(measurements, metric, baseline, x),
        values_by_seed(measurements, metric, candidate, x),
        combine,
    )


def per_seed_interval(
    measurements: Iterable[Measurement],
    metric: str,
    baseline: str,
    candidate: str,
    x: float,
    combine: Callable[[float, float], float],
) -> Interval | None:
    """The mean over seeds of `paired(...)` with its 95% confidence interval (Student's t);
    None if no seed measured both series (or every pair was undefined)."""
    return mean_interval(paired(measurements, metric, baseline, candidate, x, combine))


def interval_text(interval: Interval | None) -> str:
    """How a claim's text shows a per-seed interval: "61.2 (95% CI 55 to 67.4, 10 seeds)", or
    "not measured" where no seed measured both series."""
    return "not measured" if interval is None else str(interval)


def reduction_pct(before: float, after: float) -> float:
    """How much lower `after` is than `before`, in % of `before` (50: halved; negative: higher);
    NaN if `before` is not positive, so that the seed is left out of the interval."""
    if not before > 0:
        return math.nan
    return _settled((1 - after / before) * 100)


def gain_pct(before: float, after: float) -> float:
    """How much higher `after` is than `before`, in % of `before` (20: 1.2x); NaN if `before`
    is not positive."""
    if not before > 0:
        return math.nan
    return _settled((after / before - 1) * 100)


def _settled(pct: float) -> float:
    """`pct` rounded to a millionth of a point: two time-weighted sums of the same allocation
    differ in their last bits, and that noise must not count as a gain in either direction."""
    return round(pct, 6) + 0.0  # + 0.0: no "-0"
