"""The experiments `firmament-py experiment NAME` runs, by name: Firmament's figures
(`firmament_py.sim.figures`, a module per figure), then NoMora's
(`firmament_py.nomora.experiment`), Zoe's (`firmament_py.zoe.experiment`) and the network-task
workflows' (`firmament_py.workflows`).
Each is an `Experiment` (see `firmament_py.sim.experiment` for what a run measures and writes);
`run_experiment` runs one by name, `read_result` renders a saved run's CSV anew.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from firmament_py.nomora.experiment import NOMORA_GOOGLE
from firmament_py.sim.experiment import (
    CSV_COLUMNS,
    SCALES,
    Claim,
    Experiment,
    ExperimentResult,
    Measurement,
    Progress,
    read_rows,
)
from firmament_py.sim.figures import (
    FIG7,
    FIG8_16,
    FIG9,
    FIG12A,
    FIG14,
    FIG18,
    Fig7Params,
    Fig9Params,
    Fig12Params,
    Fig14Params,
    Fig18Params,
    Fig816Params,
)
from firmament_py.workflows.experiment import NETWORK_TASKS
from firmament_py.zoe.experiment import (
    ZOE_PREEMPTION,
    ZOE_PREEMPTION_PAPER,
    ZOE_TURNAROUND,
    ZOE_TURNAROUND_PAPER,
)

__all__ = [
    "CSV_COLUMNS",
    "EXPERIMENTS",
    "SCALES",
    "Claim",
    "Experiment",
    "ExperimentResult",
    "Fig7Params",
    "Fig9Params",
    "Fig12Params",
    "Fig14Params",
    "Fig18Params",
    "Fig816Params",
    "Measurement",
    "Progress",
    "experiment_names",
    "read_result",
    "run_experiment",
]

EXPERIMENTS: dict[str, Experiment[Any]] = {
    experiment.name: experiment
    for experiment in (
        FIG7,
        FIG8_16,
        FIG9,
        FIG12A,
        FIG14,
        FIG18,
        NOMORA_GOOGLE,
        ZOE_TURNAROUND_PAPER,
        ZOE_TURNAROUND,
        ZOE_PREEMPTION_PAPER,
        ZOE_PREEMPTION,
        NETWORK_TASKS,
    )
}
"""The experiments by name: Firmament's in the paper's order, then the other papers'; Zoe's
each under Algorithms 1 and 2 as printed (`-paper`) first, then as we read them."""


def experiment_names() -> list[str]:
    """The known experiments' names, in order (for command-line choices)."""
    return list(EXPERIMENTS)


def _experiment(name: str) -> Experiment[Any]:
    experiment = EXPERIMENTS.get(name)
    if experiment is None:
        raise ValueError(f"unknown experiment {name!r}; known: {', '.join(experiment_names())}")
    return experiment


def run_experiment(
    name: str,
    out_dir: str | Path,
    *,
    scale: str = "quick",
    progress: Progress | None = None,
) -> ExperimentResult:
    """Run the experiment `name` at `scale` ("test", "quick" or "full") and write its CSV,
    plots and Markdown summary into `out_dir` (created if needed). ValueError names the known
    experiments or scales when given an unknown one."""
    return _experiment(name).run(out_dir, scale=scale, progress=progress)


def read_result(path: str | Path) -> ExperimentResult:
    """The result of a run from the CSV it wrote: the measurements, and the claims worked out
    again from them with the current code (so that a saved run's tables can be rendered anew),
    and where and when it was measured from `NAME.json` beside it (without one, the wall time
    reads as 0 and the provenance as None). ValueError if the file is no experiment's CSV."""
    name, scale, rows = read_rows(path)
    if name not in EXPERIMENTS:
        raise ValueError(f"{path}: unknown experiment {name!r}")
    return EXPERIMENTS[name].read(Path(path), scale, rows)
