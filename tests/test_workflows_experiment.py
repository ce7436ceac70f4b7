"""The `network-tasks` experiment (Figures 4-6 of the INFOCOM'19 paper) runs end to end at its
"test" scale: every point measured for every algorithm and seed, ratios at least 1 (every
schedule was validated on the way), one machine giving ratio 1, the three plots, the CSV and
the claims."""

from __future__ import annotations

import csv
from pathlib import Path

from firmament_py.workflows.experiment import NETWORK_TASKS, NETWORK_TASKS_SCALES

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_network_tasks_runs_at_test_scale(tmp_path: Path) -> None:
    result = NETWORK_TASKS.run(tmp_path, scale="test")
    params = NETWORK_TASKS_SCALES["test"]
    names = sorted(path.name for path in result.plot_paths)
    assert names == [
        "network-tasks-density.png",
        "network-tasks-machines.png",
        "network-tasks-rho.png",
    ]
    for path in result.plot_paths:
        assert path.read_bytes()[:8] == PNG_MAGIC
    with result.csv_path.open() as file:
        rows = list(csv.DictReader(file))
    points = (
        len(params.figure4_types()) * len(params.machines)
        + len(params.figure5_types()) * len(params.densities)
        + len(params.figure6_types()) * len(params.rhos)
    )
    assert len(rows) == points * params.seeds * len(params.algorithms)
    for row in rows:
        assert float(row["value"]) >= 1 - 1e-9
        if row["metric"].startswith("ratio_machines") and float(row["x"]) == 1:
            assert abs(float(row["value"]) - 1) < 1e-9
    assert set(result.series()) == set(params.algorithms)
    claims = [claim.claim for claim in result.claims]
    assert any("G-LIST is the best on simple MapReduce" in c for c in claims)
    assert any("PARTITION is the best on dense 1-stage" in c for c in claims)
    assert any("List Scheduler is the worst" in c for c in claims)
    assert any("strong bottleneck" in c for c in claims)
    summary = (tmp_path / "network-tasks.md").read_text()
    assert "ratio_density_one-stage-mapreduce" in summary
