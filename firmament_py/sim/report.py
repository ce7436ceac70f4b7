"""Reporting a simulation run: CSV files, a JSON summary, plots and terminal tables.

A `SimulationResult` holds one record per scheduling round and one per task. This module turns
it into what Firmament's evaluation reports (OSDI '16, §7):

* `rounds.csv`: one row per round, like Firmament's scheduler_events output;
* `tasks.csv`: one row per task, with its placement latency (submission to first placement);
* `summary.json`: a `RunSummary` (counts, placement latency and algorithm runtime percentiles);
* PNG plots: the CDF of placement latency and of algorithm runtime (log x axes, as the paper's
  Figures 14, 15 and 18), algorithm runtime over simulated time (Figure 16), and the waiting and
  running tasks over simulated time;
* `summary_table` / `compare_table`: rich tables of one run, or several side by side.

`write_report` writes all of them into one directory. Times in the CSV files are integer
microseconds (the simulator's unit) and wall-clock timings are float seconds, as in the records;
the summary uses seconds throughout, the plots' duration axes the unit that reads best (µs, ms or
s, named in the axis label; `log_time_axis`, also used by the experiments' plots).

Plots are drawn on `matplotlib.figure.Figure` objects directly (never pyplot), so no display and
no global backend are involved; matplotlib is imported only when a plot is drawn.
"""

from __future__ import annotations

import csv
import json
import math
import os
import textwrap
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from rich.table import Table

from firmament_py.model.states import TaskState
from firmament_py.sim.simulator import MICROSECONDS, SimulationResult

if TYPE_CHECKING:
    from matplotlib.artist import Artist
    from matplotlib.axes import Axes
    from matplotlib.axis import Axis
    from matplotlib.figure import Figure

__all__ = [
    "PLOT_FILES",
    "ROUND_COLUMNS",
    "TASK_COLUMNS",
    "Percentiles",
    "RunSummary",
    "compare_table",
    "legend_below",
    "log_time_axis",
    "plain_number",
    "plot_run",
    "plural",
    "summarize",
    "summary_table",
    "ticks_at",
    "time_unit",
    "write_report",
    "write_rounds_csv",
    "write_summary_json",
    "write_tasks_csv",
]

PathLike = str | os.PathLike[str]

# ---------------------------------------------------------------------- CSV files

ROUND_COLUMNS: tuple[tuple[str, str], ...] = (
    ("index", "index"),
    ("start_us", "start"),
    ("duration_us", "duration"),
    ("algorithm", "algorithm"),
    ("algorithm_s", "algorithm_seconds"),
    ("solver_s", "solver_seconds"),
    ("round_s", "round_seconds"),
    ("placed", "placed"),
    ("preempted", "preempted"),
    ("migrated", "migrated"),
    ("refused", "refused"),
    ("skipped", "skipped"),
    ("task_errors", "task_errors"),
    ("waiting", "waiting"),
    ("running", "running"),
    ("events", "events"),
    ("graph_nodes", "graph_nodes"),
    ("graph_arcs", "graph_arcs"),
    ("graph_changes", "graph_changes"),
    ("cost", "cost"),
    ("machines", "machines"),
    ("slots", "slots"),
)
"""`rounds.csv`'s columns: (header, `RoundRecord` attribute)."""

TASK_COLUMNS: tuple[tuple[str, str], ...] = (
    ("task_id", "task_id"),
    ("job_id", "job_id"),
    ("submit_us", "submit_time"),
    ("runtime_us", "runtime"),
    ("first_start_us", "first_start"),
    ("last_start_us", "last_start"),
    ("finish_us", "finish_time"),
    ("machine", "machine_id"),
    ("end_state", "end_state"),
    ("placements", "placements"),
    ("evictions", "evictions"),
    ("migrations", "migrations"),
    ("placement_latency_us", "placement_latency"),
)
"""`tasks.csv`'s columns: (header, `TaskRecord` attribute). A None value (a service's runtime,
a task never placed or never finished) is an empty cell. `machine` is the last machine the task
ran on, kept after it left it."""


def _write_csv(
    path: PathLike, columns: Sequence[tuple[str, str]], records: Iterable[object]
) -> Path:
    """Write one row per record: a header, then each column's attribute of the record.

    The csv module writes None as an empty cell and floats by `repr`, so values read back
    exactly (`float(cell) == value`)."""
    path = Path(path)
    with path.open("w", newline="", encoding="utf-8") as file:
        writer = csv.writer(file)
        writer.writerow(header for header, _ in columns)
        for record in records:
            writer.writerow(getattr(record, attribute) for _, attribute in columns)
    return path


def write_rounds_csv(result: SimulationResult, path: PathLike) -> Path:
    """One row per scheduling round, in order (`ROUND_COLUMNS`); returns the path."""
    return _write_csv(path, ROUND_COLUMNS, result.rounds)


def write_tasks_csv(result: SimulationResult, path: PathLike) -> Path:
    """One row per task, in submission order (`TASK_COLUMNS`); returns the path."""
    return _write_csv(path, TASK_COLUMNS, result.tasks.values())


# ---------------------------------------------------------------------- the summary


@dataclass(frozen=True)
class Percentiles:
    """The median, 90th and 99th percentiles and the maximum of some samples.

    Percentiles interpolate linearly between samples (numpy's default). With no samples,
    `count` is 0 and every value is None."""

    count: int
    p50: float | None
    p90: float | None
    p99: float | None
    max: float | None

    @classmethod
    def of(cls, values: Sequence[float]) -> Percentiles:
        if len(values) == 0:
            return cls(count=0, p50=None, p90=None, p99=None, max=None)
        samples = np.asarray(values, dtype=np.float64)
        p50, p90, p99 = (float(p) for p in np.percentile(samples, [50, 90, 99]))
        return cls(count=len(samples), p50=p50, p90=p90, p99=p99, max=float(samples.max()))


_REMOVED = "removed"
"""The end state the simulator records for a task removed from the cluster state."""


@dataclass(frozen=True)
class RunSummary:
    """The headline numbers of one run; `as_dict()` is its JSON form, `from_dict` reads it back.

    Task counts partition the submitted tasks by how they ended: `tasks_completed`,
    `tasks_failed` and `tasks_removed` finished; `tasks_running` hold a machine at the end;
    `tasks_waiting` are everything else (never placed, or evicted and not placed again).
    `tasks_placed` counts tasks placed at least once and `tasks_never_placed` the rest: the
    placement latency percentiles are over placed tasks only (a never-placed task has no
    latency), so read them together with `tasks_never_placed`.

    `evictions` counts every time a running task lost its machine (preempted, or its machine
    failed or left), from the task records; `preemptions` and `migrations` count the rounds'
    decisions. `algorithm_runtime_s` is the wall-clock runtime of the solver's algorithm per
    round; `mean_graph_nodes` / `mean_graph_arcs` average the flow network over rounds (None
    when there was no round).
    """

    policy: str
    algorithm: str
    accounting: str
    workload: str
    simulated_seconds: float
    wall_seconds: float
    rounds: int
    events: int
    rejected_events: int
    rejections: tuple[str, ...]
    tasks_submitted: int
    tasks_placed: int
    tasks_never_placed: int
    tasks_completed: int
    tasks_failed: int
    tasks_removed: int
    tasks_waiting: int
    tasks_running: int
    placements: int
    evictions: int
    migrations: int
    preemptions: int
    placement_latency_s: Percentiles
    algorithm_runtime_s: Percentiles
    mean_graph_nodes: float | None
    mean_graph_arcs: float | None

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON types only: nested dicts for the percentiles, a list for rejections."""
        values = asdict(self)
        values["rejections"] = list(self.rejections)
        return values

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> RunSummary:
        """The inverse of `as_dict` (to compare runs saved as summary.json files)."""
        return cls(
            **{
                **values,
                "rejections": tuple(values["rejections"]),
                "placement_latency_s": Percentiles(**values["placement_latency_s"]),
                "algorithm_runtime_s": Percentiles(**values["algorithm_runtime_s"]),
            }
        )


def _mean(values: Sequence[int]) -> float | None:
    return float(np.mean(values)) if values else None


def summarize(result: SimulationResult) -> RunSummary:
    """Count and measure what `result` holds (see `RunSummary` for what each number means)."""
    tasks = list(result.tasks.values())
    rounds = result.rounds
    ended = Counter(task.end_state for task in tasks)
    completed = ended[TaskState.COMPLETED.value]
    failed = ended[TaskState.FAILED.value]
    removed = ended[_REMOVED]
    running = ended[TaskState.RUNNING.value]
    latencies = [
        latency / MICROSECONDS for task in tasks if (latency := task.placement_latency) is not None
    ]
    return RunSummary(
        policy=result.policy,
        algorithm=result.algorithm,
        accounting=result.accounting.value,
        workload=result.workload,
        simulated_seconds=result.end_time / MICROSECONDS,
        wall_seconds=result.wall_seconds,
        rounds=len(rounds),
        events=result.events,
        rejected_events=result.rejected_events,
        rejections=tuple(result.rejections),
        tasks_submitted=len(tasks),
        tasks_placed=len(latencies),
        tasks_never_placed=len(tasks) - len(latencies),
        tasks_completed=completed,
        tasks_failed=failed,
        tasks_removed=removed,
        tasks_waiting=len(tasks) - completed - failed - removed - running,
        tasks_running=running,
        placements=sum(task.placements for task in tasks),
        evictions=sum(task.evictions for task in tasks),
        migrations=sum(r.migrated for r in rounds),
        preemptions=sum(r.preempted for r in rounds),
        placement_latency_s=Percentiles.of(latencies),
        algorithm_runtime_s=Percentiles.of([r.algorithm_seconds for r in rounds]),
        mean_graph_nodes=_mean([r.graph_nodes for r in rounds]),
        mean_graph_arcs=_mean([r.graph_arcs for r in rounds]),
    )


def write_summary_json(summary: RunSummary, path: PathLike) -> Path:
    """`summary.as_dict()` as indented JSON; returns the path."""
    path = Path(path)
    path.write_text(json.dumps(summary.as_dict(), indent=2) + "\n", encoding="utf-8")
    return path


# ---------------------------------------------------------------------- terminal tables


def format_duration(seconds: float | None) -> str:
    """A duration in the unit that reads best: 240 µs, 12.50 ms, 3.20 s."""
    if seconds is None:
        return "-"
    if seconds == 0:
        return "0 s"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:,.2f} s"


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """`count` and the noun it takes: "1 seed", "3 seeds", "0 races", "1,200 placed tasks";
    `nouns` is the plural when it is not `noun` + "s" ("1 data set" needs no help, "1 box"
    does)."""
    return f"{count:,} {noun if count == 1 else nouns or noun + 's'}"


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


_Row = tuple[str, Callable[[RunSummary], str]]
"""A table row: its label, and how to show one run's value."""


def _percentile_rows(name: str, pick: Callable[[RunSummary], Percentiles]) -> list[_Row]:
    return [
        (f"{name} p50", lambda s: format_duration(pick(s).p50)),
        (f"{name} p90", lambda s: format_duration(pick(s).p90)),
        (f"{name} p99", lambda s: format_duration(pick(s).p99)),
        (f"{name} max", lambda s: format_duration(pick(s).max)),
    ]


_SECTIONS: tuple[list[_Row], ...] = (
    [
        ("policy", lambda s: s.policy),
        ("algorithm", lambda s: s.algorithm),
        ("accounting", lambda s: s.accounting),
        ("simulated time", lambda s: format_duration(s.simulated_seconds)),
        ("wall time", lambda s: format_duration(s.wall_seconds)),
        ("rounds", lambda s: f"{s.rounds:,}"),
        ("events", lambda s: f"{s.events:,}"),
        ("rejected events", lambda s: f"{s.rejected_events:,}"),
    ],
    [
        ("tasks submitted", lambda s: f"{s.tasks_submitted:,}"),
        ("placed (ever)", lambda s: f"{s.tasks_placed:,}"),
        ("never placed", lambda s: f"{s.tasks_never_placed:,}"),
        ("completed", lambda s: f"{s.tasks_completed:,}"),
        ("failed", lambda s: f"{s.tasks_failed:,}"),
        ("removed", lambda s: f"{s.tasks_removed:,}"),
        ("still waiting", lambda s: f"{s.tasks_waiting:,}"),
        ("still running", lambda s: f"{s.tasks_running:,}"),
        ("placements", lambda s: f"{s.placements:,}"),
        ("evictions", lambda s: f"{s.evictions:,}"),
        ("preemptions", lambda s: f"{s.preemptions:,}"),
        ("migrations", lambda s: f"{s.migrations:,}"),
    ],
    _percentile_rows("placement latency", lambda s: s.placement_latency_s),
    [
        *_percentile_rows("algorithm runtime", lambda s: s.algorithm_runtime_s),
        ("mean graph nodes", lambda s: _number(s.mean_graph_nodes)),
        ("mean graph arcs", lambda s: _number(s.mean_graph_arcs)),
    ],
)
"""The tables' rows, in sections (separated by a rule)."""


def compare_table(summaries: Sequence[RunSummary], labels: Sequence[str] | None = None) -> Table:
    """Runs side by side: one row per metric, one column per run, headed by `labels` (default:
    "policy / algorithm")."""
    if labels is None:
        labels = [f"{s.policy} / {s.algorithm}" for s in summaries]
    if len(labels) != len(summaries):
        raise ValueError(f"{len(labels)} labels for {len(summaries)} runs")
    table = Table()
    table.add_column("metric", style="bold")
    for label in labels:
        table.add_column(label, justify="right")
    for number, rows in enumerate(_SECTIONS):
        if number:
            table.add_section()
        for name, show in rows:
            table.add_row(name, *(show(s) for s in summaries))
    return table


_SHOWN_REJECTIONS = 3


def summary_table(summary: RunSummary) -> Table:
    """One run's summary; the first few rejected events' messages are its caption."""
    table = compare_table([summary], labels=["value"])
    table.title = f"simulation: {summary.policy} / {summary.algorithm}"
    if summary.rejections:
        shown = summary.rejections[:_SHOWN_REJECTIONS]
        more = summary.rejected_events - len(shown)
        lines = [f"rejected: {message}" for message in shown]
        if more > 0:
            lines.append(f"... and {more:,} more rejected events")
        table.caption = "\n".join(lines)
        table.caption_justify = "left"
    return table


# ---------------------------------------------------------------------- plots

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
        # matplotlib fills a legend's columns top to bottom, left to right.
        rows = -(-len(labels) // count)
        chunks = [labels[start : start + rows] for start in range(0, len(labels), rows)]
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
    figure, axes = _figure(result, "Task placement latency (CDF)")
    latencies = [
        latency / MICROSECONDS
        for task in result.tasks.values()
        if (latency := task.placement_latency) is not None
    ]
    never = len(result.tasks) - len(latencies)
    note = f"({never:,} never placed, not shown)" if never else ""
    _cdf(axes, latencies, "placement latency", "placed task", note=note)
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


# ---------------------------------------------------------------------- everything at once


def write_report(result: SimulationResult, directory: PathLike) -> list[Path]:
    """Write rounds.csv, tasks.csv, summary.json and the plots into `directory` (created if
    needed); returns the paths written, in that order."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    return [
        write_rounds_csv(result, directory / "rounds.csv"),
        write_tasks_csv(result, directory / "tasks.csv"),
        write_summary_json(summarize(result), directory / "summary.json"),
        *plot_run(result, directory),
    ]
