"""The `network-tasks` experiment (Figures 4-6 of the INFOCOM'19 paper) runs end to end at its
"test" scale: every point measured for every algorithm and seed, ratios at least 1 (every
schedule was validated on the way), one machine giving ratio 1, the three plots, the CSV and
the claims."""

from __future__ import annotations

import csv
from pathlib import Path

from firmament_py.sim.experiment import Measurement
from firmament_py.sim.verdicts import Outcome
from firmament_py.workflows.experiment import NETWORK_TASKS, NETWORK_TASKS_SCALES
from firmament_py.workflows.experiment_claims import network_tasks_claims

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
    figure4 = len(params.figure4_types()) * len(params.machines)
    assert len(rows) == (points * len(params.algorithms) - figure4) * params.seeds  # no variation
    variations = {
        row["metric"].split("_")[1] for row in rows if row["series"] == "partition-makespan"
    }
    assert variations == {"density", "rho"}
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
    assert any("k chosen by makespan (our variation)" in c for c in claims)
    summary = (tmp_path / "network-tasks.md").read_text()
    assert "ratio_density_one-stage-mapreduce" in summary
    assert "Mean `ratio_density_one-stage-mapreduce` over seeds" in summary  # the paper's means


def _dense_one_stage(partition_minus_glist: list[float]) -> list[Measurement]:
    """Ratios at density 1 on 1-stage MapReduce: G-LIST 1.5 on every data set, PARTITION 1.5
    plus the given differences, the others far behind."""
    out = []
    for seed, difference in enumerate(partition_minus_glist):
        values = {"list": 3.0, "glist": 1.5, "glist-master": 2.0, "partition": 1.5 + difference}
        values["partition-makespan"] = values["partition"]
        for algorithm, value in values.items():
            out.append(
                Measurement(algorithm, 1.0, seed, "ratio_density_one-stage-mapreduce", value)
            )
    return out


def _fig5a(measurements: list[Measurement]) -> Outcome:
    claims = network_tasks_claims(
        measurements,
        machines=(1, 2),
        densities=(1.0,),
        rhos=(0.0,),
        sweep_machines=8,
        seeds=len(measurements),
        max_tasks=40,
        algorithms=NETWORK_TASKS_SCALES["test"].algorithms,
    )
    (claim,) = [c for c in claims if c.claim.endswith("(Fig. 5a)")]
    assert claim.verdict is not None
    return claim.verdict.outcome


def test_the_dense_mapreduce_verdict_follows_the_mean_difference_and_its_interval() -> None:
    """Fig. 5a's claim is decided by the per-data-set difference to the best other algorithm:
    reproduced when PARTITION is lower with the whole 95% interval of the gap above 0, not
    reproduced when PARTITION is higher with the whole interval, inconclusive when the interval
    reaches both sides, whichever side the mean is on."""
    assert _fig5a(_dense_one_stage([-0.2, -0.3, -0.25, -0.2])) is Outcome.REPRODUCED
    assert _fig5a(_dense_one_stage([-0.5, 0.3, -0.4, 0.2])) is Outcome.INCONCLUSIVE
    assert _fig5a(_dense_one_stage([0.2, 0.3, -0.1, 0.25])) is Outcome.INCONCLUSIVE
    assert _fig5a(_dense_one_stage([0.2, 0.3, 0.25, 0.2])) is Outcome.NOT_REPRODUCED
