"""The plots of a simulation run, and the axes every experiment's plots share.

`plot_run` draws what `firmament-py simulate` writes beside its CSVs: the CDF of placement
latency and of algorithm runtime (log x axes, as the Firmament paper's Figures 14, 15 and 18),
algorithm runtime over simulated time (Figure 16), and the waiting and running tasks over
simulated time. `log_time_axis`, `ticks_at` and `legend_below` make an axis or a legend read at a
glance; the experiments' plots use them too.

Plots are drawn on `matplotlib.figure.Figure` objects directly (never pyplot), so no display and
no global backend are involved; matplotlib is imported only when a plot is drawn.
"""

from __future__ import annotations

import math
import os
import textwrap
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from firmament_py.sim.simulator import MICROSECONDS, SimulationResult
from firmament_py.sim.wording import plural

if TYPE_CHECKING:
    from matplotlib.artist import Artist
    from matplotlib.axes import Axes
    from matplotlib.axis import Axis
    from matplotlib.figure import Figure

__all__ = ["PLOT_FILES", "legend_below", "log_time_axis", "plain_number", "plot_run", "ticks_at"]

PathLike = str | os.PathLike[str]


PLOT_FILES: tuple[str, ...] = (
    "placement_latency_cdf.png",
    "algorithm_runtime_cdf.png",
    "algorithm_runtime_over_time.png",
    "tasks_over_time.png",
)
"""What `plot_run` writes, in order."""

_LOG_FLOOR_S = 1e-6
"""Where a zero is drawn on a log axis: 1 µs, the simulator's resolution (with
`Accounting.NONE` a task placed in the round of its arrival has a latency of exactly 0)."""

# Axes that read at a glance, for these plots and every experiment's
# (`firmament_py.sim.experiment`). Left to itself matplotlib labels a log axis in powers of
# ten (8x10^0, 3x10^-4 s), ticks it at powers of ten whatever was measured, and draws a
# legend inside the plot, where it hides whatever data go there.

_TIME_UNITS: tuple[tuple[str, float], ...] = (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6))
"""The units a duration axis may use, largest first, with their length in seconds."""


def time_unit(seconds: Iterable[float]) -> tuple[str, float]:
    """The unit that reads best for durations spread like `seconds`, and its length in seconds:
    the largest unit in which the middle of their range (on a log scale) is at least 1, so that
    130-800 µs reads 130 to 800 µs rather than 1.3x10^-4 to 8x10^-4 s. Seconds when no
    duration is positive."""
    positive = [s for s in seconds if 0 < s < math.inf]
    if not positive:
        return _TIME_UNITS[0]
    middle = math.sqrt(min(positive) * max(positive))
    return next(((unit, size) for unit, size in _TIME_UNITS if middle >= size), _TIME_UNITS[-1])


def plain_number(value: float) -> str:
    """A tick label without a power of ten: 8, 16, 0.25, 1,600, 12,500."""
    if abs(value) >= 999.5:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def log_time_axis(
    axes: Axes, which: Literal["x", "y"], seconds: Iterable[float], quantity: str
) -> str:
    """Make the `which` axis of `axes`, which holds durations in seconds, a log axis in the
    unit that reads best for `seconds` (`time_unit`), labelled "`quantity` [unit]" and ticked
    with plain numbers (200, 500, 1,000); returns the unit.

    The data stay in seconds: the units are powers of ten apart, so a log axis ticks the same
    places in any of them and only the labels change. The minor ticks between the powers of ten
    are labelled only when fewer than two powers of ten are in view (so that the axis says
    something): every one of them over less than 0.4 of a decade, those at 2, 3 and 5 over more
    (matplotlib's own log labels use the same 0.4)."""
    from matplotlib.ticker import FuncFormatter

    if which == "x":
        axes.set_xscale("log")
    else:
        axes.set_yscale("log")
    axis: Axis = axes.xaxis if which == "x" else axes.yaxis
    unit, size = time_unit(seconds)

    def major(value: float, _: int | None = None) -> str:
        return plain_number(value / size)

    def minor(value: float, _: int | None = None) -> str:
        low, high = sorted(axis.get_view_interval())
        if low <= 0 or value <= 0:
            return ""
        powers_in_view = math.floor(math.log10(high)) - math.ceil(math.log10(low)) + 1
        leading = round(value / 10 ** math.floor(math.log10(value)))
        if powers_in_view >= 2:
            return ""
        if math.log10(high / low) > 0.4 and leading not in (2, 3, 5):
            return ""
        return plain_number(value / size)

    axis.set_major_formatter(FuncFormatter(major))
    axis.set_minor_formatter(FuncFormatter(minor))
    axis.set_label_text(f"{quantity} [{unit}]")
    return unit


def ticks_at(axis: Axis, values: Iterable[float]) -> None:
    """Tick `axis` at `values` and nowhere else, labelled plainly (8, 16, 1,600): the machine
    counts or job sizes that were measured, where a log axis would tick the powers of ten
    between them and label them 8x10^0, 9x10^0, 10^1."""
    from matplotlib.ticker import NullLocator

    ticks = sorted(set(values))
    axis.set_ticks(ticks, [plain_number(value) for value in ticks])
    axis.set_minor_locator(NullLocator())


_LEGEND_CHARACTERS_PER_INCH = 14
"""About how many characters of a small-font legend label fit in an inch."""
_LEGEND_ENTRY_CHARACTERS = 8
"""A legend entry's line sample and the gap to the next column, in characters."""


def legend_below(figure: Figure, *axes: Axes) -> None:
    """One legend for the lines of all of `axes` (panels that share their series, a plot and
    its twin), below the plots, outside them, in as many columns as fit the figure's width.
    Inside the axes a legend sits wherever the data may also go, and hides them when they
    do."""
    handles: list[Artist] = []
    labels: list[str] = []
    for each in axes:
        for handle, label in zip(*each.get_legend_handles_labels(), strict=True):
            if label not in labels:
                handles.append(handle)
                labels.append(label)
    if not handles:
        return
    room = figure.get_figwidth() * _LEGEND_CHARACTERS_PER_INCH
    columns = 1
    for count in range(len(labels), 1, -1):
        chunks = _legend_columns(labels, count)
        width = sum(
            max(len(line) for label in chunk for line in label.split("\n"))
            + _LEGEND_ENTRY_CHARACTERS
            for chunk in chunks
        )
        if width <= room:
            columns = count
            break
    figure.legend(
        handles,
        labels,
        loc="outside lower center",
        ncols=columns,
        fontsize="small",
        frameon=False,
    )


def _legend_columns(labels: Sequence[str], columns: int) -> list[Sequence[str]]:
    """The labels in each column of a legend of `columns` columns, as matplotlib lays them out:
    top to bottom, left to right, the first columns one entry longer where they do not divide
    evenly (4 labels in 3 columns: 2, 1, 1)."""
    rows, longer = divmod(len(labels), columns)
    out: list[Sequence[str]] = []
    start = 0
    for column in range(columns):
        end = start + rows + (column < longer)
        out.append(labels[start:end])
        start = end
    return [chunk for chunk in out if chunk]


_TITLE_CHARACTERS = 70
"""The longest title line that fits over a 6.4-inch plot at the medium font size."""


def _figure(result: SimulationResult, what: str) -> tuple[Figure, Axes]:
    from matplotlib.figure import Figure

    figure = Figure(figsize=(6.4, 4.2), layout="constrained")
    axes = figure.add_subplot()
    run = (
        f"policy {result.policy}, algorithm {result.algorithm}, "
        f"accounting {result.accounting.value}"
    )
    axes.set_title(f"{what}\n{textwrap.fill(run, _TITLE_CHARACTERS)}", fontsize="medium")
    axes.grid(True, which="major", alpha=0.3)
    return figure, axes


def _say_empty(axes: Axes, message: str) -> None:
    axes.text(0.5, 0.5, message, transform=axes.transAxes, ha="center", va="center")


def _floored(values: Sequence[float]) -> tuple[np.ndarray[Any, np.dtype[np.float64]], int]:
    """`values` with zeros (and anything below the floor) raised to `_LOG_FLOOR_S`, and how many
    were raised, so that a log axis can show them."""
    samples = np.asarray(values, dtype=np.float64)
    low = samples < _LOG_FLOOR_S
    return np.where(low, _LOG_FLOOR_S, samples), int(low.sum())


def _floored_note(floored: int) -> str:
    return f"({plural(floored, 'value')} below 1 µs drawn at 1 µs)" if floored else ""


def _add_notes(axis: Axis, notes: Iterable[str]) -> None:
    """Put `notes` (what a plot leaves out or moves) under the axis' label, not over the data."""
    axis.set_label_text("\n".join([axis.get_label_text(), *(note for note in notes if note)]))


def _cdf(axes: Axes, values: Sequence[float], quantity: str, noun: str, *, note: str = "") -> None:
    """A step CDF of `values` (seconds) on a log x axis, or a message that there is none. The y
    axis says how many samples there are ("fraction of the 1,202 placed tasks", `noun` is one
    of them); `note` goes under the x axis' label (what the CDF leaves out)."""
    axes.set_ylim(0, 1.02)
    if not values:
        axes.set_xlabel(f"{quantity} [s]")
        axes.set_ylabel(f"fraction of {noun}s")
        _say_empty(axes, f"no {noun}s" + (f"\n{note}" if note else ""))
        return
    samples, floored = _floored(sorted(values))
    fractions = np.arange(1, len(samples) + 1) / len(samples)
    axes.step(samples, fractions, where="post")
    log_time_axis(axes, "x", samples, quantity)
    axes.set_ylabel(f"fraction of the {plural(len(samples), noun)}")
    _add_notes(axes.xaxis, [note, _floored_note(floored)])


def _plot_placement_latency(result: SimulationResult, path: Path) -> None:
    """Two CDFs, the tasks there at time 0 and those that arrive later, each over its own
    count: the starting population, placed by the first rounds, would otherwise be most of a
    single curve (see `RunSummary.arrival_latency_s`)."""
    figure, axes = _figure(result, "Task placement latency (CDF)")
    groups: dict[str, list[float]] = {"at time 0": [], "arriving later": []}
    for task in result.tasks.values():
        if (latency := task.placement_latency) is not None:
            group = "at time 0" if task.submit_time == 0 else "arriving later"
            groups[group].append(latency / MICROSECONDS)
    placed = sum(len(values) for values in groups.values())
    never = len(result.tasks) - placed
    note = f"({never:,} never placed, not shown)" if never else ""
    if not all(groups.values()):  # one group only: one curve, as any CDF
        _cdf(
            axes,
            [v for values in groups.values() for v in values],
            "placement latency",
            "placed task",
            note=note,
        )
        figure.savefig(path)
        return
    axes.set_ylim(0, 1.02)
    drawn: list[float] = []
    floored_in_all = 0
    for group, values in groups.items():
        samples, floored = _floored(sorted(values))
        fractions = np.arange(1, len(samples) + 1) / len(samples)
        label = f"the {plural(len(samples), 'task')} {group}"
        axes.step(samples, fractions, where="post", label=label)
        drawn.extend(samples.tolist())
        floored_in_all += floored
    log_time_axis(axes, "x", drawn, "placement latency")
    axes.set_ylabel("fraction of the group's tasks")
    _add_notes(axes.xaxis, [note, _floored_note(floored_in_all)])
    legend_below(figure, axes)
    figure.savefig(path)


def _plot_algorithm_runtime(result: SimulationResult, path: Path) -> None:
    figure, axes = _figure(result, "Algorithm runtime per round (CDF)")
    _cdf(axes, [r.algorithm_seconds for r in result.rounds], "algorithm runtime", "round")
    figure.savefig(path)


def _plot_runtime_over_time(result: SimulationResult, path: Path) -> None:
    figure, axes = _figure(result, "Algorithm runtime over time")
    axes.set_xlabel("simulated time at round start [s]")
    if not result.rounds:
        axes.set_ylabel("algorithm runtime [s]")
        _say_empty(axes, "no rounds")
    else:
        starts = [r.start / MICROSECONDS for r in result.rounds]
        runtimes, floored = _floored([r.algorithm_seconds for r in result.rounds])
        axes.plot(starts, runtimes, marker=".", linewidth=0.8, markersize=4)
        log_time_axis(axes, "y", runtimes, "algorithm runtime")
        _add_notes(axes.xaxis, [_floored_note(floored)])
    figure.savefig(path)


def _plot_tasks_over_time(result: SimulationResult, path: Path) -> None:
    figure, axes = _figure(result, "Waiting and running tasks after each round")
    axes.set_xlabel("simulated time at round end [s]")
    axes.set_ylabel("tasks")
    if not result.rounds:
        _say_empty(axes, "no rounds")
    else:
        ends = [(r.start + r.duration) / MICROSECONDS for r in result.rounds]
        axes.step(ends, [r.waiting for r in result.rounds], where="post", label="waiting")
        axes.step(ends, [r.running for r in result.rounds], where="post", label="running")
        axes.set_ylim(bottom=0)
        legend_below(figure, axes)
    figure.savefig(path)


_PLOTTERS: tuple[Callable[[SimulationResult, Path], None], ...] = (
    _plot_placement_latency,
    _plot_algorithm_runtime,
    _plot_runtime_over_time,
    _plot_tasks_over_time,
)


def plot_run(result: SimulationResult, directory: PathLike) -> list[Path]:
    """Draw `PLOT_FILES` into `directory` (created if needed); returns their paths.

    Every plot is always written: without data (no rounds, no placed task) it is an empty,
    labelled figure that says so, so a report's set of files does not depend on the run."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, plot in zip(PLOT_FILES, _PLOTTERS, strict=True):
        path = directory / name
        plot(result, path)
        paths.append(path)
    return paths
