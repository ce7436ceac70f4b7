"""What a simulation of Zoe's evaluation measures, for the two experiments that replay it
(`firmament_py.zoe.experiment`, `firmament_py.zoe.preemption_experiment`): the paper's cluster
and the metrics of one run, as `Measurement` rows."""

from __future__ import annotations

import math

from firmament_py.sim.experiment import Measurement
from firmament_py.zoe.capacity import ClusterCapacity
from firmament_py.zoe.simulator import ZoeResult
from firmament_py.zoe.workload import CATEGORIES

__all__ = ["CORES", "MACHINES", "RAM_GIB", "run_measurements", "zoe_capacity"]

MACHINES, CORES, RAM_GIB = 100, 32.0, 128.0
"""Section 4.1: 100 machines of 32 cores and 128 GiB."""


def zoe_capacity() -> ClusterCapacity:
    """The paper's simulated cluster: `MACHINES` machines of `CORES` cores and `RAM_GIB` GiB."""
    return ClusterCapacity.uniform(MACHINES, CORES, RAM_GIB)


def run_measurements(series: str, x: float, seed: int, result: ZoeResult) -> list[Measurement]:
    """What one simulation measured, as `series` at `x` with `seed`: turnaround, queuing and
    slowdown percentiles, the waiting line and running applications, cpu and ram allocated (%),
    and turnaround and queuing per application category."""
    out: list[Measurement] = []
    summary = result.summary()
    names = {
        "turnaround_p25": "turnaround_p25_s",
        "turnaround_p50": "turnaround_p50_s",
        "turnaround_p75": "turnaround_p75_s",
        "turnaround_p95": "turnaround_p95_s",
        "turnaround_mean": "turnaround_mean_s",
        "queuing_p25": "queuing_p25_s",
        "queuing_p50": "queuing_p50_s",
        "queuing_p75": "queuing_p75_s",
        "queuing_p95": "queuing_p95_s",
        "queuing_mean": "queuing_mean_s",
        "slowdown_p50": "slowdown_p50",
        "slowdown_p95": "slowdown_p95",
        "slowdown_mean": "slowdown_mean",
        "pending_mean": "waiting_mean",
        "pending_p50": "waiting_p50",
        "running_mean": "serving_mean",
        "refused": "refused",
    }
    for key, metric in names.items():
        value = summary[key]
        if not math.isnan(value):
            out.append(Measurement(series, x, seed, metric, value))
    for key in ("cpu", "ram"):
        if not math.isnan(summary[f"{key}_mean"]):
            out.append(
                Measurement(series, x, seed, f"{key}_allocated_pct", 100 * summary[f"{key}_mean"])
            )
    for category in CATEGORIES:
        part = result.summary(category)
        for metric in ("turnaround", "queuing"):
            for q in ("p50", "p95", "mean"):
                value = part[f"{metric}_{q}"]
                if not math.isnan(value):
                    out.append(Measurement(series, x, seed, f"{category}_{metric}_{q}_s", value))
    return out
