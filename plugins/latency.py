"""Latency sources for latency-aware policies (NoMora), under the plugins' name: topology
defaults (`TopologyLatency`), a replayed trace of per-pair latency series (`TraceLatency`, with
`read_traces`, `write_traces` and `synthetic_traces`), and the live samples that reach the
scheduler as `LatencySample` events (`LiveLatency`). A driver or cluster-manager adapter imports
them from here; they are defined in `firmament_py.nomora.latency`, inside the package, so that
the policy and the experiments are type-checked with them (mypy cannot follow the editable
install's mapping of `plugins/` to this package). See that module for what each does.
"""

from __future__ import annotations

from firmament_py.nomora.latency import (
    TIERS,
    LatencySource,
    LatencyTraces,
    LiveLatency,
    MachineIndex,
    TopologyLatency,
    TraceError,
    TraceLatency,
    read_traces,
    synthetic_traces,
    write_traces,
)

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
