"""The nomora-google experiment at its test scale: it measures every series, writes its files,
and states its claims beside the paper's numbers."""

from __future__ import annotations

from pathlib import Path

from firmament_py.nomora.experiment import NOMORA_GOOGLE, SERIES


def test_the_experiment_runs_at_test_scale(tmp_path: Path) -> None:
    result = NOMORA_GOOGLE.run(tmp_path, scale="test")
    names = {path.name for path in result.files}
    assert {"nomora-google.csv", "nomora-google.md", "nomora-google-performance.png"} <= names
    measured = set(result.series("mean_performance"))
    assert measured == set(SERIES)
    for series in SERIES:
        value = result.medians("mean_performance")[(series, 0.0)]
        assert 0 < value <= 100
    assert result.medians("migrated_mean_pct")[("nomora", 0.0)] == 0.0  # no preemption
    assert all(claim.paper and claim.ours for claim in result.claims)
    assert "60.2%" in (tmp_path / "nomora-google.md").read_text()
