"""The series Firmament's figures measure: each name (an algorithm, or an algorithm with
options) and the solver behind it, its label and colour in plots, and how the figures word the
numbers they compare.

Every solver is made afresh for every graph it loads, so that no point depends on the one
measured before it.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from firmament_py.sim.experiment import (
    Measurement,
    format_number,
    new_figure,
    plot_medians,
    save_figure,
)
from firmament_py.sim.plots import legend_below, ticks_at
from firmament_py.sim.simulator import MICROSECONDS, SimulationResult
from firmament_py.sim.wording import plural
from firmament_py.solvers.base import FlowSolver
from firmament_py.solvers.registry import make_solver
from firmament_py.solvers.warmup import warm_up

if TYPE_CHECKING:
    from matplotlib.axes import Axes

RACE_OPTIONS: Mapping[str, Any] = {"hedge": None}
"""The race as Firmament runs it (section 6.1): both algorithms start every round. Our default
hedged start lets the last winner run alone first, which measures the favourite, not the race."""

COLOURS = {
    "relaxation": "C0",
    "cost-scaling": "C1",
    "ssp": "C2",
    "race": "C3",
    "relaxation-no-limit": "C9",
    "firmament-race": "C4",
    "cost-scaling-scratch": "C7",
}
ALGORITHM_LABELS = {
    "relaxation": "relaxation",
    "cost-scaling": "cost scaling",
    "ssp": "successive shortest path",
    "race": "race (relaxation vs cost scaling)",
    "relaxation-no-limit": "relaxation without tree limit",
    "firmament-race": "Firmament's race (relaxation from scratch vs cost scaling)",
    "cost-scaling-scratch": "cost scaling from scratch (Quincy)",
}
SOLVER_OF: Mapping[str, tuple[str, Mapping[str, Any]]] = {
    "relaxation-no-limit": ("relaxation", {"tree_limit": 0}),
    "cost-scaling-scratch": ("cost-scaling", {"incremental": False}),
}
"""Series that are a solver with options: (solver name, options). Others are the solver of
their name with its defaults."""


def warm_up_series(algorithms: Iterable[str]) -> None:
    """Take each algorithm through a round first, so that loading the compiled kernels (or
    compiling them, on a cold cache) is not timed (a race's workers warm up as they start)."""
    for series in algorithms:
        warm_up(*solver_and_options(series))


def solver_and_options(series: str) -> tuple[str, dict[str, Any]]:
    """The solver name and constructor options behind a series name."""
    name, options = SOLVER_OF.get(series, (series, {}))
    if name == "race":
        options = {**RACE_OPTIONS, **options}
    return name, dict(options)


def series_solver(series: str) -> FlowSolver:
    name, options = solver_and_options(series)
    return make_solver(name, **options)


def check_costs(costs: Mapping[str, int], where: str) -> None:
    """Every algorithm must find the same optimum; a difference is a bug, not a measurement."""
    if len(set(costs.values())) > 1:
        raise RuntimeError(f"{where}: the algorithms disagree on the optimal cost: {costs}")


def ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b <= 0:
        return None
    return a / b


def format_times(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}x"


def plot_series_medians(
    axes: Axes, measurements: Sequence[Measurement], metric: str, series: Sequence[str]
) -> None:
    plot_medians(axes, measurements, metric, series, labels=ALGORITHM_LABELS, colours=COLOURS)


def values_of(measurements: Iterable[Measurement], metric: str) -> list[float]:
    """Every measured value of `metric` (what a plot's axis must show)."""
    return [m.value for m in measurements if m.metric == metric]


def count_seeds(seeds: Sequence[int]) -> str:
    """How many seeds each point was measured with: "1 seed", "3 seeds"."""
    return plural(len(seeds), "seed")


def format_span(values: Sequence[float]) -> str:
    """The values' range, "8-16"; "30" when they are all one value, not "30-30"."""
    low, high = format_number(min(values)), format_number(max(values))
    return low if low == high else f"{low}-{high}"


def arrival_latencies(result: SimulationResult) -> tuple[list[float], int]:
    """The placement latency in seconds of every task that arrived after the first round ended
    (the population submitted at time 0 measures one giant first round, not the load), and how
    many of them were never placed. An unplaced arrival counts with the time it waited until the
    run ended, a lower bound of its latency, so that a policy that leaves tasks waiting cannot
    look fast by leaving them out."""
    first_end = result.rounds[0].start + result.rounds[0].duration if result.rounds else 0
    latencies: list[float] = []
    unplaced = 0
    for task in result.tasks.values():
        if task.submit_time < max(first_end, 1):
            continue
        latency = task.placement_latency
        if latency is None:
            unplaced += 1
            latency = max(0, result.end_time - task.submit_time)
        latencies.append(latency / MICROSECONDS)
    return latencies, unplaced


def plot_ratios(
    measurements: Sequence[Measurement],
    metric: str,
    pairs: Sequence[tuple[str, str]],
    title: str,
    path: Path,
    *,
    y_label: str,
    paper: tuple[float, str] | None = None,
) -> Path:
    """How `metric`'s ratio of each (numerator, denominator) pair of series moves with the x
    axis (machines): one faint dot per seed, the median over seeds as a line, and the paper's
    ratio (value, what it is of) as a dashed line; so a reader can see where a size out of
    reach would land."""
    figure, axes = new_figure(title, "machines")
    by_point = {(m.series, m.x, m.seed): m.value for m in measurements if m.metric == metric}
    shown: list[float] = []
    for index, (numerator, denominator) in enumerate(pairs):
        ratios: dict[float, list[float]] = {}
        for (series, x, seed), value in by_point.items():
            below = by_point.get((denominator, x, seed))
            if series == numerator and below is not None and below > 0 and value > 0:
                ratios.setdefault(x, []).append(value / below)
        if not ratios:
            continue
        colour = COLOURS.get(numerator, f"C{index}")
        xs = sorted(ratios)
        axes.scatter(
            [x for x in xs for _ in ratios[x]],
            [r for x in xs for r in ratios[x]],
            s=10,
            alpha=0.35,
            color=colour,
        )
        medians = [statistics.median(ratios[x]) for x in xs]
        names = (ALGORITHM_LABELS.get(name, name) for name in (numerator, denominator))
        label = " / ".join(names)
        axes.plot(xs, medians, marker="o", color=colour, label=label)
        shown += [r for x in xs for r in ratios[x]]
    if paper is not None:
        value, what = paper
        axes.axhline(value, color="grey", linestyle="--", linewidth=1, label=f"the paper: {what}")
        shown.append(value)
    axes.set_xscale("log")
    xs_all = sorted({x for (_, x, _) in by_point})
    if xs_all:
        ticks_at(axes.xaxis, xs_all)
    if shown:
        axes.set_yscale("log")
        ticks_at(axes.yaxis, _ratio_ticks(min(shown), max(shown)))
    axes.set_ylabel(y_label)
    legend_below(figure, axes)
    return save_figure(figure, path)


def _ratio_ticks(low: float, high: float) -> list[float]:
    """Ticks that read plainly (0.5, 1, 2, 5, 10, ...) from just below `low` to just above
    `high`; only the powers of ten when that would be more than eight."""
    first, last = math.floor(math.log10(low)), math.ceil(math.log10(high))
    steps = [s * 10.0**e for e in range(first, last + 1) for s in (1, 2, 5)]
    ticks = [s for s in steps if low / 2 <= s <= high * 2]
    if len(ticks) > 8:
        ticks = [10.0**e for e in range(first, last + 1)]
    return ticks
