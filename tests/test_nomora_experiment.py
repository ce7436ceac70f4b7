"""The nomora-google experiment at its test scale: it measures both setting groups (the paper's
first), both job metrics, writes its files, and judges its claims from the measurements."""

from __future__ import annotations

from pathlib import Path

from firmament_py.nomora.experiment import NOMORA_GOOGLE, TEST_OUR_SERIES, TEST_PAPER_SERIES


def test_the_experiment_runs_at_test_scale(tmp_path: Path) -> None:
    result = NOMORA_GOOGLE.run(tmp_path, scale="test")
    names = {path.name for path in result.files}
    assert {
        "nomora-google.csv",
        "nomora-google.md",
        "nomora-google-paper-performance.png",
        "nomora-google-ours-performance.png",
    } <= names
    expected = [f"paper:{s}" for s in TEST_PAPER_SERIES] + [f"ours:{s}" for s in TEST_OUR_SERIES]
    for metric in ("mean_performance", "slowest_performance"):
        assert set(result.series(metric)) == set(expected)
        for series in expected:
            value = result.medians(metric)[(series, 0.0)]
            assert 0 < value <= 100
    for series in expected:
        slowest = result.medians("slowest_performance")[(series, 0.0)]
        assert slowest <= result.medians("mean_performance")[(series, 0.0)] + 1e-9
    assert result.medians("migrated_mean_pct")[("ours:nomora", 0.0)] == 0.0  # no preemption
    assert result.medians("migrated_mean_pct")[("paper:nomora-preempt-beta0", 0.0)] > 0
    assert all(claim.paper and claim.ours and claim.verdict for claim in result.claims)
    labels = [claim.claim for claim in result.claims]
    assert labels[0].startswith("[paper setting]") and labels[-1].startswith("[ours]")
    assert any("1.16x" in label for label in labels) and any("1.61x" in label for label in labels)
    text = (tmp_path / "nomora-google.md").read_text()
    assert "60.2%" in text and "slowest task" in text
