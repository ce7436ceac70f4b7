"""The `network-tasks` experiment: Figures 4, 5 and 6 of Giroire et al., INFOCOM'19
(section VI) on this port, through the framework of `firmament_py.sim.experiment`.

Every point is one data set (a workflow, or a set of workflows) drawn as section VI says
(`firmament_py.workflows.generators`: Google-trace-shaped task counts and durations, network
factor rho, edge density), scheduled by the four algorithms on identical machines with an
upload and a download link each (capacity 1), every schedule validated; the measured value is
the paper's ratio, makespan over the better of the two lower bounds. The same data sets (one
per seed) are used for every algorithm and, in Figure 4, for every number of machines.

* Figure 4 (`ratio_machines_<type>`): ratio vs machines for simple MapReduce, 1-stage MapReduce,
  random workflows and sets of workflows of mixed types (20/40/40%), at rho 0.5 and the default
  edge density;
* Figure 5 (`ratio_density_<type>`): ratio vs edge density for 1-stage MapReduce and random
  workflows, on `sweep_machines` machines;
* Figure 6 (`ratio_rho_<type>`): ratio vs rho for the three workflow types, on `sweep_machines`
  machines.

Metrics name the figure and the workflow type; series are the algorithms (the paper's four, and
in Figures 5 and 6 this project's variation `partition-makespan`, PARTITION choosing k by phase
2's makespan); x is the swept value (machines, edge density or rho, as the metric says). The
paper averages 100 data sets per point, so the tables and plots show means (with 95% confidence
intervals in the plots) and the claims (`experiment_claims`) are judged on means.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from firmament_py.sim.experiment import (
    Claim,
    Experiment,
    Measurement,
    Tracker,
    save_figure,
)
from firmament_py.sim.plots import legend_below, ticks_at
from firmament_py.sim.verdicts import mean_interval
from firmament_py.sim.wording import plural
from firmament_py.workflows import schedule_workflow
from firmament_py.workflows.bounds import ratio
from firmament_py.workflows.experiment_claims import (
    LABELS,
    MIXED,
    ONE_STAGE,
    PAPER_ALGORITHMS,
    RANDOM,
    SIMPLE,
    TYPE_LABELS,
    network_tasks_claims,
)
from firmament_py.workflows.generators import WORKFLOW_TYPES, WorkflowShape, mixed_workflows
from firmament_py.workflows.model import Platform, Workflow
from firmament_py.workflows.partition import partition_schedules
from firmament_py.workflows.schedule import validate_schedule

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = ["NETWORK_TASKS", "NetworkTasksParams"]

COLOURS = {
    "list": "C3",
    "glist": "C0",
    "glist-master": "C2",
    "partition": "C1",
    "partition-makespan": "C4",
}


@dataclass(frozen=True)
class NetworkTasksParams:
    """One scale of the experiment: `seeds` data sets per point; workflows of at most
    `max_tasks` tasks (sets: `mixed_count` workflows of at most `mixed_max_tasks`); Figure 4
    over `machines`, Figures 5 and 6 over `densities` and `rhos` on `sweep_machines`."""

    machines: tuple[int, ...]
    densities: tuple[float, ...]
    rhos: tuple[float, ...]
    seeds: int
    max_tasks: int
    mixed_count: int
    mixed_max_tasks: int
    sweep_machines: int = 8
    rho: float = 0.5
    density: float = 0.2
    algorithms: tuple[str, ...] = (*PAPER_ALGORITHMS, "partition-makespan")

    def figure4_types(self) -> tuple[str, ...]:
        return (SIMPLE, ONE_STAGE, RANDOM, MIXED)

    def figure5_types(self) -> tuple[str, ...]:
        return (ONE_STAGE, RANDOM)

    def figure6_types(self) -> tuple[str, ...]:
        return (SIMPLE, ONE_STAGE, RANDOM)


def _describe(p: NetworkTasksParams) -> str:
    return (
        f"{plural(p.seeds, 'data set')} per point; workflows of <= {p.max_tasks} tasks, sets "
        f"of {plural(p.mixed_count, 'workflow')} of <= {p.mixed_max_tasks}; Fig. 4 on "
        f"{', '.join(map(str, p.machines))} machines (rho {p.rho:g}, density {p.density:g}); "
        f"Figs. 5-6 on {p.sweep_machines} machines, densities "
        f"{', '.join(f'{d:g}' for d in p.densities)}, rho {', '.join(f'{r:g}' for r in p.rhos)}"
    )


def _points(p: NetworkTasksParams) -> list[tuple[str, str, float]]:
    """(figure, workflow type, x) for every point."""
    points = [("machines", kind, float(m)) for kind in p.figure4_types() for m in p.machines]
    points += [("density", kind, d) for kind in p.figure5_types() for d in p.densities]
    points += [("rho", kind, r) for kind in p.figure6_types() for r in p.rhos]
    return points


def _steps(p: NetworkTasksParams) -> int:
    return len(_points(p)) * p.seeds


def _workflow(p: NetworkTasksParams, figure: str, kind: str, x: float, seed: int) -> Workflow:
    """The data set of one point: drawn from a generator seeded by (figure, type, seed) only,
    so that the algorithms, and Figure 4's machine counts, share it."""
    rng = random.Random(f"network-tasks/{figure}/{kind}/{seed}")
    rho = x if figure == "rho" else p.rho
    density = x if figure == "density" else p.density
    if kind == MIXED:
        return mixed_workflows(
            rng, p.mixed_count, WorkflowShape(p.mixed_max_tasks, rho=rho, density=density)
        )
    return WORKFLOW_TYPES[kind](rng, WorkflowShape(p.max_tasks, rho=rho, density=density), "")


_CHOOSE_K = {"partition": "score", "partition-makespan": "makespan"}
"""PARTITION's series and how each chooses k (`partition.CHOOSE_K`)."""


def _algorithms(p: NetworkTasksParams, figure: str) -> tuple[str, ...]:
    """The series of one figure: our variation (`partition-makespan`) only in Figures 5 and 6
    (its claim is Figure 5a's; on Figure 4's 64 machines it would schedule 64 times)."""
    if figure == "machines":
        return tuple(a for a in p.algorithms if a in PAPER_ALGORITHMS)
    return p.algorithms


def _measure(p: NetworkTasksParams, tracker: Tracker) -> list[Measurement]:
    out: list[Measurement] = []
    for figure, kind, x in _points(p):
        machines = int(x) if figure == "machines" else p.sweep_machines
        platform = Platform.links(machines)
        for seed in range(p.seeds):
            workflow = _workflow(p, figure, kind, x, seed)
            algorithms = _algorithms(p, figure)
            partitioned = partition_schedules(
                workflow, platform, [_CHOOSE_K[a] for a in algorithms if a in _CHOOSE_K]
            )
            for algorithm in algorithms:
                if algorithm in _CHOOSE_K:  # one phase 1 for both ways of choosing k
                    schedule = validate_schedule(partitioned[_CHOOSE_K[algorithm]])
                else:
                    schedule = schedule_workflow(workflow, platform, algorithm)  # validated
                out.append(
                    Measurement(
                        algorithm,
                        x,
                        seed,
                        f"ratio_{figure}_{kind}",
                        ratio(schedule),
                        note=plural(workflow.n, "task"),
                    )
                )
            tracker.step(f"{figure} {kind} x={x:g} seed {seed}")
    return out


# ---------------------------------------------------------------------- claims


def _claims(p: NetworkTasksParams, measurements: list[Measurement]) -> list[Claim]:
    return network_tasks_claims(
        measurements,
        machines=p.machines,
        densities=p.densities,
        rhos=p.rhos,
        sweep_machines=p.sweep_machines,
        seeds=p.seeds,
        max_tasks=p.max_tasks,
        algorithms=p.algorithms,
    )


# ---------------------------------------------------------------------- plots


def _panels(
    p: NetworkTasksParams,
    measurements: list[Measurement],
    figure: str,
    kinds: Sequence[str],
    title: str,
    x_label: str,
    path: Path,
    configure: Callable[[Axes], None] | None = None,
) -> Path:
    from matplotlib.figure import Figure

    columns = 2 if len(kinds) == 4 else len(kinds)
    rows = (len(kinds) + columns - 1) // columns
    fig = Figure(figsize=(4.2 * columns, 3.4 * rows), dpi=100, layout="constrained")
    axes_grid = fig.subplots(rows, columns, squeeze=False)
    for index, kind in enumerate(kinds):
        axes = axes_grid[index // columns][index % columns]
        _plot_means(axes, measurements, f"ratio_{figure}_{kind}", p.algorithms)
        axes.set_title(f"({chr(ord('a') + index)}) {TYPE_LABELS[kind]}", fontsize="medium")
        axes.set_xlabel(x_label)
        axes.set_ylabel("ratio (makespan / lower bound)")
        axes.grid(True, alpha=0.3)
        if configure is not None:
            configure(axes)
    fig.suptitle(title, fontsize="medium")
    legend_below(fig, axes_grid[0][0])
    return save_figure(fig, path)


def _plot_means(
    axes: Axes, measurements: Sequence[Measurement], metric: str, series: Sequence[str]
) -> None:
    """Each algorithm's mean over the data sets as a line with its 95% confidence interval as
    error bars (the paper plots means), every data set's point as a faint dot."""
    for name in series:
        points = [m for m in measurements if m.metric == metric and m.series == name]
        if not points:
            continue
        colour = COLOURS.get(name, "C7")
        axes.scatter([m.x for m in points], [m.value for m in points], s=8, alpha=0.2, color=colour)
        xs = sorted({m.x for m in points})
        intervals = [mean_interval([m.value for m in points if m.x == x]) for x in xs]
        means = [i.mean if i else math.nan for i in intervals]
        errors = [
            [i.mean - i.low if i else 0.0 for i in intervals],
            [i.high - i.mean if i else 0.0 for i in intervals],
        ]
        axes.errorbar(
            xs,
            means,
            yerr=errors,
            marker="o",
            markersize=4,
            capsize=3,
            color=colour,
            linestyle="--" if name not in PAPER_ALGORITHMS else "-",
            label=LABELS.get(name, name),
        )


def _plot(
    p: NetworkTasksParams, measurements: list[Measurement], out: Path, name: str
) -> list[Path]:
    def log2(axes: Axes) -> None:
        axes.set_xscale("log", base=2)
        ticks_at(axes.xaxis, p.machines)

    return [
        _panels(
            p,
            measurements,
            "machines",
            p.figure4_types(),
            f"Figure 4: ratio vs machines (rho {p.rho:g}, density {p.density:g})",
            "machines",
            out / f"{name}-machines.png",
            log2,
        ),
        _panels(
            p,
            measurements,
            "density",
            p.figure5_types(),
            f"Figure 5: ratio vs edge density ({p.sweep_machines} machines, rho {p.rho:g})",
            "edge density",
            out / f"{name}-density.png",
        ),
        _panels(
            p,
            measurements,
            "rho",
            p.figure6_types(),
            f"Figure 6: ratio vs network factor ({p.sweep_machines} machines)",
            "network factor rho",
            out / f"{name}-rho.png",
        ),
    ]


def _summary_metrics() -> tuple[str, ...]:
    p = NETWORK_TASKS_SCALES["test"]
    return (
        tuple(f"ratio_machines_{k}" for k in p.figure4_types())
        + tuple(f"ratio_density_{k}" for k in p.figure5_types())
        + tuple(f"ratio_rho_{k}" for k in p.figure6_types())
    )


NETWORK_TASKS_SCALES: dict[str, NetworkTasksParams] = {
    "test": NetworkTasksParams(
        machines=(1, 4),
        densities=(0.2, 1.0),
        rhos=(0.0, 2.0),
        seeds=1,
        max_tasks=10,
        mixed_count=2,
        mixed_max_tasks=6,
        sweep_machines=3,
    ),
    "quick": NetworkTasksParams(
        machines=(1, 2, 4, 8, 16),
        densities=(0.0, 0.2, 0.5, 1.0),
        rhos=(0.0, 0.5, 2.0, 4.0),
        seeds=20,
        max_tasks=40,
        mixed_count=8,
        mixed_max_tasks=15,
    ),
    "full": NetworkTasksParams(
        machines=(1, 2, 4, 8, 16, 32, 64),
        densities=(0.0, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0),
        rhos=(0.0, 0.25, 0.5, 1.0, 2.0, 3.0, 4.0),
        seeds=12,
        max_tasks=80,
        mixed_count=20,
        mixed_max_tasks=25,
    ),
}

NETWORK_TASKS = Experiment[NetworkTasksParams](
    name="network-tasks",
    title="Scheduling with network tasks: ratio vs machines, edge density and rho (Figs. 4-6)",
    x_label="x (machines, edge density or rho: see the metric)",
    summary_metrics=_summary_metrics(),
    scales=NETWORK_TASKS_SCALES,
    describe=_describe,
    steps=_steps,
    measure=_measure,
    claims=_claims,
    plot=_plot,
    statistic="mean",
)
"""The experiment, registered in `firmament_py.sim.experiments` as `network-tasks`."""
