"""Latency samples in the cluster model (worst case over paths, forgotten with their machines,
exposed read-only to policies) and the latency sources: topology defaults, live samples and a
replayed trace."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from firmament_py.model import ClusterError, ClusterState, MachineAdded, MachineFailed, Resources
from firmament_py.model.events import LatencySample
from firmament_py.nomora.latency import (
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
from firmament_py.sdk import PolicyManager

TOPOLOGY = [  # machine, rack, pod
    ("a0", "ra", "p0"),
    ("a1", "ra", "p0"),
    ("b0", "rb", "p0"),
    ("c0", "rc", "p1"),
    ("c1", "rc", "p1"),
]


def _cluster() -> ClusterState:
    state = ClusterState()
    for machine, rack, pod in TOPOLOGY:
        state.apply(
            MachineAdded(
                time=0, machine_id=machine, capacity=Resources(), slots=2, rack_id=rack, pod_id=pod
            )
        )
    return state


def _sample(time: int, a: str, b: str, latency: float, path: int = 0) -> LatencySample:
    return LatencySample(time=time, machine_id=a, peer_id=b, latency_us=latency, path=path)


def test_a_latency_sample_checks_its_values() -> None:
    with pytest.raises(ValueError, match="two machines"):
        _sample(0, "a0", "a0", 5.0)
    with pytest.raises(ValueError, match="non-negative"):
        _sample(0, "a0", "a1", -1.0)
    with pytest.raises(ValueError, match="non-negative"):
        _sample(0, "a0", "a1", float("nan"))
    with pytest.raises(TypeError):
        _sample(0, "a0", "a1", "5")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="path"):
        _sample(0, "a0", "a1", 5.0, path=-1)
    assert _sample(0, "a0", "a1", 5).latency_us == 5.0


def test_the_cluster_keeps_the_worst_latest_sample_over_paths_and_directions() -> None:
    state = _cluster()
    assert state.latency_us("a0", "b0") is None
    version = state.latency_version
    state.apply(_sample(1, "a0", "b0", 30.0, path=0))
    state.apply(_sample(2, "a0", "b0", 50.0, path=1))
    state.apply(_sample(3, "b0", "a0", 40.0))  # the other direction
    assert state.latency_us("a0", "b0") == 50.0
    assert state.latency_us("b0", "a0") == 50.0
    assert state.latency_version > version
    # A new sample of the worst path replaces it: the worst is now the other direction's.
    state.apply(_sample(4, "a0", "b0", 10.0, path=1))
    assert state.latency_us("a0", "b0") == 40.0
    unchanged = state.latency_version
    state.apply(_sample(5, "a0", "b0", 35.0, path=0))  # still below 40: nothing changes
    assert state.latency_version == unchanged
    assert dict(state.latencies_from("a0")) == {"b0": 40.0}
    state.validate()


def test_unknown_machines_are_refused_and_lost_machines_take_their_samples() -> None:
    state = _cluster()
    with pytest.raises(ClusterError, match="unknown machine"):
        state.apply(_sample(1, "a0", "zz", 3.0))
    assert state.latency_us("a0", "zz") is None
    state.apply(_sample(1, "a0", "c0", 300.0))
    state.apply(_sample(1, "a1", "c0", 310.0))
    state.apply(_sample(1, "a0", "a1", 20.0))
    version = state.latency_version
    state.apply(MachineFailed(time=2, machine_id="c0"))
    assert state.latency_us("a0", "c0") is None
    assert dict(state.latencies_from("a0")) == {"a1": 20.0}
    assert state.latency_version > version
    state.validate()


def test_policies_read_latencies_through_the_cluster_view() -> None:
    state = _cluster()
    state.apply(_sample(1, "a0", "b0", 30.0))
    cluster = PolicyManager(object(), name="reader").cluster_view(state)
    assert cluster.latency_us("b0", "a0") == 30.0
    assert dict(cluster.latencies_from("b0")) == {"a0": 30.0}
    assert cluster.latency_version == state.latency_version
    with pytest.raises(TypeError):
        cluster.latencies_from("b0")["a0"] = 1.0  # type: ignore[index]


def test_topology_defaults_follow_the_distance() -> None:
    state = _cluster()
    cluster = PolicyManager(object(), name="reader").cluster_view(state)
    index = MachineIndex.of(cluster)
    assert index.ids == ("a0", "a1", "b0", "c0", "c1")
    source = TopologyLatency(same_machine_us=1, same_rack_us=10, same_pod_us=100, across_pods_us=9)
    np.testing.assert_array_equal(source.latencies_us("a0", index, cluster), [1, 10, 100, 9, 9])
    with pytest.raises(ValueError):
        TopologyLatency(same_rack_us=-1)


def test_live_samples_override_the_fallback_and_change_the_version() -> None:
    state = _cluster()
    cluster = PolicyManager(object(), name="reader").cluster_view(state)
    index = MachineIndex.of(cluster)
    live = LiveLatency(TopologyLatency())
    before = live.version(cluster)
    state.apply(_sample(1, "c1", "a0", 555.0))
    assert live.version(cluster) != before
    values = live.latencies_us("a0", index, cluster)
    np.testing.assert_array_equal(values, [2.0, 25.0, 100.0, 300.0, 555.0])


def _constant_traces(rack: float, pod: float, across: float, steps: int = 3) -> LatencyTraces:
    def tier(value: float) -> np.ndarray:
        return np.array([[value * (1 + step) for step in range(steps)]] * 2, dtype=np.float64)

    return LatencyTraces(
        {"rack": tier(rack), "pod": tier(pod), "cross-pod": tier(across)},
        {name: ("s0", "s1") for name in ("rack", "pod", "cross-pod")},
    )


def test_a_replayed_trace_is_scaled_per_pair_within_the_tiers_ranges() -> None:
    state = _cluster()
    cluster = PolicyManager(object(), name="reader").cluster_view(state)
    index = MachineIndex.of(cluster)
    source = TraceLatency(_constant_traces(100.0, 1000.0, 10_000.0), seed=4)
    values = source.latencies_us("a0", index, cluster)
    assert values[0] == source.same_machine_us
    assert 50.0 <= values[1] <= 100.0  # same rack: 0.5-1.0
    assert 800.0 <= values[2] <= 1200.0  # same pod: 0.8-1.2
    assert 8000.0 <= values[3] <= 12000.0 and 8000.0 <= values[4] <= 12000.0  # across pods
    # Symmetric, and the same pair keeps its scale: at the next second the series doubles.
    back = source.latencies_us("c1", index, cluster)
    assert back[index.position["a0"]] == values[4]
    state.advance_to(1_000_000)
    np.testing.assert_allclose(source.latencies_us("a0", index, cluster)[1:], 2 * values[1:])
    assert source.version(cluster) == 1
    state.advance_to(3_000_000)  # past the end: the series repeat
    np.testing.assert_allclose(source.latencies_us("a0", index, cluster)[1:], values[1:])


def test_trace_files_round_trip_and_take_the_worst_path(tmp_path: Path) -> None:
    traces = synthetic_traces(5, seed=2, series_per_tier=2)
    path = write_traces(traces, tmp_path / "t.csv")
    loaded = read_traces(path)
    for tier in ("rack", "pod", "cross-pod"):
        np.testing.assert_allclose(loaded.series[tier], traces.series[tier], atol=1e-3)
    with path.open("a", encoding="utf-8") as file:
        file.write("rack,rack-0,2,99999\n")  # a second path of one series at one time
    assert read_traces(path).series["rack"][0, 2] == 99999.0


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("tier,series,time_s\n", "missing latency_us"),
        ("tier,series,time_s,latency_us\nrack,a,0,x\n", "line 2, column 4 \\(latency_us\\)"),
        ("tier,series,time_s,latency_us\nroof,a,0,1\n", "line 2, column 1 \\(tier\\)"),
        ("tier,series,time_s,latency_us\nrack,a,0.5,1\n", "not a multiple"),
        ("tier,series,time_s,latency_us\nrack,a,0,1\npod,b,0,1\n", "no series of tier"),
        (
            "tier,series,time_s,latency_us\nrack,a,0,1\nrack,a,2,1\npod,b,0,1\ncross-pod,c,0,1\n",
            "covers 2 of 3",
        ),
    ],
)
def test_bad_trace_files_name_the_line_and_column(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(TraceError, match=message):
        read_traces(path)


def test_synthetic_traces_have_their_tiers_in_order() -> None:
    traces = synthetic_traces(600, seed=1, series_per_tier=6)
    medians = [traces.median_us(tier) for tier in ("rack", "pod", "cross-pod")]
    assert medians == sorted(medians)
    assert 15 < medians[0] < 40 and 60 < medians[1] < 160 and 200 < medians[2] < 450
    again = synthetic_traces(600, seed=1, series_per_tier=6)
    np.testing.assert_array_equal(again.series["pod"], traces.series["pod"])
