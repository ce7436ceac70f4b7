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

Metrics name the figure and the workflow type; series are the algorithms; x is the swept value
(machines, edge density or rho, as the metric says).
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
    format_number,
    medians_of,
    plot_medians,
    save_figure,
)
from firmament_py.sim.plots import legend_below, ticks_at
from firmament_py.sim.verdicts import share
from firmament_py.sim.wording import plural
from firmament_py.workflows import schedule_workflow
from firmament_py.workflows.bounds import ratio
from firmament_py.workflows.generators import WORKFLOW_TYPES, WorkflowShape, mixed_workflows
from firmament_py.workflows.model import Platform, Workflow

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = ["NETWORK_TASKS", "NetworkTasksParams"]

SIMPLE, ONE_STAGE, RANDOM, MIXED = "simple-mapreduce", "one-stage-mapreduce", "random", "mixed"
TYPE_LABELS = {
    SIMPLE: "simple MapReduce",
    ONE_STAGE: "1-stage MapReduce",
    RANDOM: "random workflows",
    MIXED: "sets of workflows",
}
LABELS = {
    "list": "List Scheduler",
    "glist": "G-LIST",
    "glist-master": "G-LIST-MASTER",
    "partition": "PARTITION",
}
COLOURS = {"list": "C3", "glist": "C0", "glist-master": "C2", "partition": "C1"}


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
    algorithms: tuple[str, ...] = ("list", "glist", "glist-master", "partition")

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


def _measure(p: NetworkTasksParams, tracker: Tracker) -> list[Measurement]:
    out: list[Measurement] = []
    for figure, kind, x in _points(p):
        machines = int(x) if figure == "machines" else p.sweep_machines
        platform = Platform.links(machines)
        for seed in range(p.seeds):
            workflow = _workflow(p, figure, kind, x, seed)
            for algorithm in p.algorithms:
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


def _median_at(medians: dict[tuple[str, float], float], algorithm: str, x: float) -> float:
    return medians.get((algorithm, x), float("nan"))


def _ranking(medians: dict[tuple[str, float], float], algorithms: Sequence[str], x: float) -> str:
    ranked = sorted(algorithms, key=lambda a: _median_at(medians, a, x))
    return ", ".join(f"{LABELS[a]} {_median_at(medians, a, x):.2f}" for a in ranked)


def _best(medians: dict[tuple[str, float], float], algorithms: Sequence[str], x: float) -> str:
    return min(algorithms, key=lambda a: _median_at(medians, a, x))


def _claims(p: NetworkTasksParams, measurements: list[Measurement]) -> list[Claim]:
    algorithms = p.algorithms
    claims: list[Claim] = []
    top = float(max(p.machines))

    def medians(figure: str, kind: str) -> dict[tuple[str, float], float]:
        return medians_of(measurements, f"ratio_{figure}_{kind}")

    one = float(min(p.machines))
    if one == 1:
        ones = [
            _median_at(medians("machines", kind), a, 1.0)
            for kind in p.figure4_types()
            for a in algorithms
        ]
        claims.append(
            Claim(
                "With one machine every ratio is 1 (Fig. 4)",
                "all algorithms 1",
                f"medians between {min(ones):.2f} and {max(ones):.2f}",
                "One machine runs everything in a row and no network task exists",
                share(
                    sum(abs(r - 1) <= _EQUAL_WITHIN - 1 for r in ones),
                    sum(not math.isnan(r) for r in ones),
                    f"every algorithm's median ratio within {_EQUAL_WITHIN - 1:.0%} of 1 on one "
                    "machine, for every workflow type",
                    "algorithm and type",
                    "algorithms and types",
                ),
            )
        )

    simple = medians("machines", SIMPLE)
    best = _best(simple, algorithms, top)
    several = [float(m) for m in p.machines if m > 1]
    glist = [a for a in algorithms if a in ("glist", "glist-master")]
    claims.append(
        Claim(
            "G-LIST is the best on simple MapReduce workflows (Fig. 4a)",
            "G-LIST best (optimal, Prop. 1); the ratio grows to about 5 at 64 machines",
            f"at {format_number(top)} machines: {_ranking(simple, algorithms, top)}",
            f"Our ratios are medians over {plural(p.seeds, 'data set')} of heavy-tailed "
            "workflows "
            f"(at most {p.max_tasks} tasks, many with a handful), where one long task often is "
            "the longest branch; the paper averages 100 data sets",
            share(
                sum(_among_best(simple, glist, algorithms, x) for x in several),
                len(several),
                "G-LIST (or G-LIST with a master) has the lowest median ratio on simple "
                "MapReduce at every machine count above 1 (ties count)",
                "machine count",
            ),
        )
    )

    one_stage = medians("density", ONE_STAGE)
    dense = max((d for d in p.densities if d < 1), default=max(p.densities))
    best = _best(one_stage, algorithms, dense)
    gap = _median_at(one_stage, "partition", dense) / _median_at(one_stage, best, dense)
    below_one = sorted(d for d in p.densities if d < 1)
    upper = below_one[len(below_one) // 2 :]
    claims.append(
        Claim(
            "PARTITION is the best on dense 1-stage MapReduce workflows (Fig. 5a)",
            "PARTITION best as the edge density grows; all equal at density 1",
            f"at density {dense:g} on {p.sweep_machines} machines: "
            f"{_ranking(one_stage, algorithms, dense)}"
            + ("" if best == "partition" else f" (PARTITION {gap:.2f}x the best)"),
            f"{p.sweep_machines} machines and workflows of at most {p.max_tasks} tasks, where "
            "the paper's sweeps ran larger ones",
            share(
                sum(_among_best(one_stage, ["partition"], algorithms, d) for d in upper),
                len(upper),
                "PARTITION has the lowest median ratio on 1-stage MapReduce at every density in "
                "the upper half of those measured below 1 ("
                + ", ".join(f"{d:g}" for d in upper)
                + "; ties count)",
                "density",
                "densities",
            ),
        )
    )

    rho_top = max(p.rhos)
    lines = []
    gaps = []
    for kind in (ONE_STAGE, RANDOM):
        m = medians("rho", kind)
        best = _best(m, algorithms, rho_top)
        gaps.append(
            f"{TYPE_LABELS[kind]}: "
            + (
                "PARTITION best"
                if best == "partition"
                else f"{LABELS[best]} best, PARTITION "
                f"{_median_at(m, 'partition', rho_top) / _median_at(m, best, rho_top):.2f}x"
            )
        )
        lines.append(f"{TYPE_LABELS[kind]}: {_ranking(m, algorithms, rho_top)}")
    claims.append(
        Claim(
            "PARTITION is the best when the network is a strong bottleneck (Fig. 6)",
            "PARTITION most efficient at high rho for all but simple MapReduce",
            f"at rho {rho_top:g} on {p.sweep_machines} machines: "
            + "; ".join(lines)
            + " ("
            + "; ".join(gaps)
            + ")",
            f"{p.sweep_machines} machines and workflows of at most {p.max_tasks} tasks",
            share(
                sum(
                    _among_best(medians("rho", kind), ["partition"], algorithms, rho_top)
                    for kind in (ONE_STAGE, RANDOM)
                ),
                2,
                f"PARTITION has the lowest median ratio at the highest rho ({rho_top:g}) on "
                "1-stage MapReduce and on random workflows (ties count)",
                "workflow type",
            ),
        )
    )

    worst_count = 0
    worst_lines = []
    exceptions = []
    for kind in p.figure4_types():
        m = medians("machines", kind)
        worst = max(algorithms, key=lambda a: _median_at(m, a, top))
        list_worst = _median_at(m, "list", top) >= _median_at(m, worst, top)
        worst_count += list_worst
        if not list_worst:
            exceptions.append(f"{TYPE_LABELS[kind]} ({LABELS[worst]} worst)")
        gap = _median_at(m, "list", top) / min(_median_at(m, a, top) for a in algorithms)
        worst_lines.append(f"{TYPE_LABELS[kind]} {gap:.2f}x the best")
    claims.append(
        Claim(
            "The List Scheduler is the worst as machines grow (Fig. 4)",
            "the gap between List Scheduler and G-LIST/PARTITION grows with the machines",
            f"List worst on {worst_count} of {len(p.figure4_types())} workflow types at "
            f"{format_number(top)} machines; List's median ratio is "
            + ", ".join(worst_lines)
            + ("" if not exceptions else "; exceptions: " + ", ".join(exceptions)),
            "Beyond a few machines our small workflows use no more machines, so the curves flatten",
            share(
                worst_count,
                len(p.figure4_types()),
                "the List Scheduler has the highest median ratio at the most machines measured "
                f"({format_number(top)}) on every workflow type of Figure 4 (ties count)",
                "workflow type",
            ),
        )
    )

    zero = min(p.rhos)
    if zero == 0:
        spreads = []
        equal = 0
        for kind in p.figure6_types():
            m = medians("rho", kind)
            values = [_median_at(m, a, 0.0) for a in algorithms]
            spreads.append(f"{TYPE_LABELS[kind]} {min(values):.2f}-{max(values):.2f}")
            equal += max(values) <= _EQUAL_WITHIN * min(values)
        claims.append(
            Claim(
                "Without network cost (rho = 0) the algorithms are equivalent (Fig. 6)",
                "all algorithms equal at rho 0",
                "median ratios " + ", ".join(spreads),
                "With free transfers only the CPU placement matters, but PARTITION still "
                "places by balanced parts before scheduling, which can cost it",
                share(
                    equal,
                    len(p.figure6_types()),
                    f"at rho 0, the highest median ratio within {_EQUAL_WITHIN - 1:.0%} of the "
                    "lowest on every workflow type of Figure 6",
                    "workflow type",
                ),
            )
        )
    return claims


_EQUAL_WITHIN = 1.05
"""Ratios count as equal within 5% of each other (the paper's curves meet at these points;
ours are medians over a few data sets)."""


def _among_best(
    medians: dict[tuple[str, float], float],
    candidates: Sequence[str],
    algorithms: Sequence[str],
    x: float,
) -> bool:
    """Whether one of `candidates` has the lowest median ratio of `algorithms` at `x` (a tie
    counts); False where one was not measured."""
    values = [_median_at(medians, a, x) for a in algorithms]
    if any(math.isnan(v) for v in values):
        return False
    return any(_median_at(medians, c, x) <= min(values) for c in candidates)


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
        plot_medians(
            axes,
            measurements,
            f"ratio_{figure}_{kind}",
            p.algorithms,
            labels=LABELS,
            colours=COLOURS,
        )
        axes.set_title(f"({chr(ord('a') + index)}) {TYPE_LABELS[kind]}", fontsize="medium")
        axes.set_xlabel(x_label)
        axes.set_ylabel("ratio (makespan / lower bound)")
        axes.grid(True, alpha=0.3)
        if configure is not None:
            configure(axes)
    fig.suptitle(title, fontsize="medium")
    legend_below(fig, axes_grid[0][0])
    return save_figure(fig, path)


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
        seeds=4,
        max_tasks=40,
        mixed_count=8,
        mixed_max_tasks=15,
    ),
    "full": NetworkTasksParams(
        machines=(1, 2, 4, 8, 16, 32, 64),
        densities=(0.0, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0),
        rhos=(0.0, 0.25, 0.5, 1.0, 2.0, 3.0, 4.0),
        seeds=10,
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
)
"""The experiment (register it in `firmament_py.sim.experiments`)."""
