"""What an experiment is, and what running one writes: the framework behind
`firmament-py experiment NAME` (the experiments themselves are registered in
`firmament_py.sim.experiments`).

An `Experiment` reproduces one figure or table of a paper at three scales: "test" (seconds, for
the test suite), "quick" (the default: minutes on a 2-core VM) and "full" (what
docs/experiments.md reports). It is a record of plain functions: `measure` yields
`Measurement`s (one value of one metric of one series at one x for one seed), `claims` sets the
medians beside the paper's numbers, `plot` draws PNGs. `Experiment.run` ties them together and
writes into a directory:

* `<name>.csv`: every measured point, one row per (series, x, seed, metric) in long format;
* one or more PNG plots (`<name>*.png`), drawn on matplotlib `Figure` objects (no pyplot);
* `<name>.md`: the claims table and the medians as Markdown, for the docs;
* `<name>.json`: where and when it was measured (`firmament_py.sim.provenance`): the commit,
  the date, the machine, the library versions and the wall time.

Timings are wall-clock seconds on whatever machine runs them, so every point is repeated
(seeds) and summarised by its median; nothing here compares a timing with a threshold.
"""

from __future__ import annotations

import csv
import math
import operator
import statistics
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Generic, Literal, TypeVar

from rich.table import Table

from firmament_py.sim.provenance import (
    Provenance,
    code_commit,
    read_provenance,
    write_provenance,
)
from firmament_py.sim.verdicts import Verdict
from firmament_py.sim.wording import format_duration

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = [
    "CLAIM_FIELDS",
    "CSV_COLUMNS",
    "SCALES",
    "Claim",
    "Experiment",
    "ExperimentResult",
    "Measurement",
    "Progress",
    "Tracker",
    "format_number",
    "format_value",
    "means_of",
    "medians_of",
    "new_figure",
    "paired_by_seed",
    "plot_medians",
    "read_rows",
    "save_figure",
    "values_by_seed",
]

SCALES: tuple[str, ...] = ("test", "quick", "full")
"""Every experiment's scales: "test" runs in seconds, "quick" (the default) in minutes on a
2-core VM, "full" in up to tens of minutes (docs/experiments.md lists them)."""

Statistic = Literal["median", "mean"]
"""What an experiment's tables show over seeds: the median, or the mean where the paper's
figures show means."""

Progress = Callable[[int, int, str], None]
"""Called as `progress(done, total, message)` after each unit of work (a solve, a simulation).
The message says what was just done ("ssp, 16 machines, seed 0") without the experiment's name,
which the caller knows and shows beside it."""


@dataclass(frozen=True)
class Measurement:
    """One measured value: `metric` of `series` (an algorithm or a variant) at `x` (the
    experiment's x axis: machines, job size, utilisation, seconds, speed-up) with `seed`.
    Seconds unless the metric's name says otherwise. `note` records what answered (a race's
    winner) where that matters."""

    series: str
    x: float
    seed: int
    metric: str
    value: float
    note: str = ""


@dataclass(frozen=True)
class Claim:
    """One of the paper's claims next to our measurement of it, and why the two differ; the
    `verdict`, where the experiment computes one, is decided from the measured numbers
    (`firmament_py.sim.verdicts`). None: not computed yet for this claim."""

    claim: str
    paper: str
    ours: str
    why: str
    verdict: Verdict | None = None

    @property
    def verdict_text(self) -> str:
        return str(self.verdict) if self.verdict is not None else "not computed"


_SERIES_COLUMNS = 4
"""The most series a medians table shows as columns: four of them and a column of x values
fit 80 columns; eight do not."""

CLAIM_FIELDS: tuple[str, ...] = ("claim", "paper", "ours", "verdict", "why they differ")
"""The labels of a claim's lines in `ExperimentResult.table`, in order."""

CSV_COLUMNS: tuple[str, ...] = (
    "experiment",
    "scale",
    "series",
    "x",
    "seed",
    "metric",
    "value",
    "note",
)
"""The columns of `<name>.csv`."""


@dataclass
class ExperimentResult:
    """What `run_experiment` measured and wrote. `measurements` are every point; `medians`
    summarise them over seeds; `claims` put the key numbers next to the paper's; `files` are the
    CSV, the plots and the Markdown summary, in that order."""

    name: str
    title: str
    scale: str
    scale_description: str
    x_label: str
    measurements: list[Measurement]
    claims: list[Claim]
    summary_metrics: tuple[str, ...] = ()
    """The metrics `medians_table` and `markdown` show (default: the first measured)."""
    files: list[Path] = field(default_factory=list)
    wall_seconds: float = 0.0
    provenance: Provenance | None = None
    """Where and when it was measured; None for a run saved before that was recorded."""
    statistic: Statistic = "median"
    """What the summary tables show over seeds: "median", or "mean" where the paper's figures
    show means."""

    @property
    def csv_path(self) -> Path:
        return self.files[0]

    @property
    def plot_paths(self) -> list[Path]:
        return [path for path in self.files if path.suffix == ".png"]

    def metrics(self) -> list[str]:
        """The metrics measured, in order of first appearance."""
        return list(dict.fromkeys(m.metric for m in self.measurements))

    def series(self, metric: str | None = None) -> list[str]:
        """The series (algorithms, variants) measured, in order of first appearance."""
        return list(
            dict.fromkeys(m.series for m in self.measurements if metric in (None, m.metric))
        )

    def xs(self, metric: str | None = None) -> list[float]:
        """The x values measured, ascending."""
        return sorted({m.x for m in self.measurements if metric in (None, m.metric)})

    def medians(self, metric: str) -> dict[tuple[str, float], float]:
        """The median over seeds of `metric`, by (series, x)."""
        return medians_of(self.measurements, metric)

    def summaries(self, metric: str) -> dict[tuple[str, float], float]:
        """The `statistic` (median or mean) over seeds of `metric`, by (series, x)."""
        if self.statistic == "mean":
            return means_of(self.measurements, metric)
        return self.medians(metric)

    @property
    def table(self) -> Table:
        """The key claims, a block each: the claim, then the paper's number, ours, the verdict
        and why they differ, one under the other; the scale (the same for every claim) and the
        wall time below the table.

        A block per claim rather than a column per field: five columns of prose share an
        80-column terminal at 15 characters each and wrap every cell to a score of lines,
        where a column of labels and a column of text give the text some 60."""
        table = Table(title=f"{self.name}: {self.title}", show_header=False)
        table.add_column("field", style="bold", no_wrap=True)
        table.add_column("text")
        for claim in self.claims:
            table.add_row(CLAIM_FIELDS[0], claim.claim, style="bold")
            table.add_row(CLAIM_FIELDS[1], claim.paper)
            table.add_row(CLAIM_FIELDS[2], claim.ours)
            table.add_row(CLAIM_FIELDS[3], claim.verdict_text)
            table.add_row(CLAIM_FIELDS[4], claim.why, end_section=True)
        wall = f"; wall time {self.wall_seconds:,.0f} s" if self.wall_seconds > 0 else ""
        table.caption = f"scale {self.scale}: {self.scale_description}{wall}"
        table.caption_justify = "left"
        return table

    def _main_metric(self) -> str:
        return self.summary_metrics[0] if self.summary_metrics else self.metrics()[0]

    def medians_table(self, metric: str | None = None) -> Table:
        """Medians over seeds of `metric` (default: the main one): a row per x value and a
        column per series; with more series than `_SERIES_COLUMNS` and than x values, a row
        per series and a column per x value instead, so that eight variants at three sizes fit
        80 columns. A value ("1,402.95 s") never wraps."""
        metric = metric if metric is not None else self._main_metric()
        medians = self.summaries(metric)
        xs = self.xs(metric)
        names = self.series(metric)
        table = Table(title=f"{self.name}: {self.statistic} {metric} by {self.x_label}")
        if len(names) > max(_SERIES_COLUMNS, len(xs)):
            table.add_column("series", style="bold")
            for x in xs:
                table.add_column(format_number(x), justify="right", no_wrap=True)
            for name in names:
                table.add_row(name, *(format_value(metric, medians.get((name, x))) for x in xs))
            return table
        table.add_column(self.x_label, justify="right", style="bold")
        for name in names:
            table.add_column(name, justify="right", no_wrap=True)
        for x in xs:
            table.add_row(
                format_number(x), *(format_value(metric, medians.get((name, x))) for name in names)
            )
        return table

    def markdown(self) -> str:
        """The claims and the medians of the summary metrics as Markdown tables."""
        wall = f" Wall time {self.wall_seconds:,.0f} s." if self.wall_seconds > 0 else ""
        lines = [
            f"Scale `{self.scale}`: {self.scale_description}.{wall}",
            "",
            "| claim | paper | ours | verdict | why they differ |",
            "|---|---|---|---|---|",
        ]
        lines += [
            f"| {c.claim} | {c.paper} | {c.ours} | {c.verdict_text} | {c.why} |"
            for c in self.claims
        ]
        for metric in self.summary_metrics or (self._main_metric(),):
            medians = self.summaries(metric)
            names = self.series(metric)
            lines += [
                "",
                f"{self.statistic.capitalize()} `{metric}` over seeds:",
                "",
                f"| {self.x_label} | " + " | ".join(names) + " |",
                "|---:|" + "---:|" * len(names),
            ]
            for x in self.xs(metric):
                cells = [format_value(metric, medians.get((name, x))) for name in names]
                lines.append(f"| {format_number(x)} | " + " | ".join(cells) + " |")
        return "\n".join(lines) + "\n"


def medians_of(measurements: Iterable[Measurement], metric: str) -> dict[tuple[str, float], float]:
    values: dict[tuple[str, float], list[float]] = {}
    for m in measurements:
        if m.metric == metric:
            values.setdefault((m.series, m.x), []).append(m.value)
    return {key: statistics.median(v) for key, v in values.items()}


def means_of(measurements: Iterable[Measurement], metric: str) -> dict[tuple[str, float], float]:
    """The mean over seeds of `metric`, by (series, x)."""
    values: dict[tuple[str, float], list[float]] = {}
    for m in measurements:
        if m.metric == metric:
            values.setdefault((m.series, m.x), []).append(m.value)
    return {key: statistics.fmean(v) for key, v in values.items()}


def values_by_seed(
    measurements: Iterable[Measurement], metric: str, series: str, x: float
) -> dict[int, float]:
    """`metric` of `series` at `x`, by seed."""
    return {
        m.seed: m.value
        for m in measurements
        if m.metric == metric and m.series == series and m.x == x
    }


def paired_by_seed(
    first: Mapping[int, float],
    second: Mapping[int, float],
    combine: Callable[[float, float], float] = operator.sub,
) -> list[float]:
    """`combine(first[seed], second[seed])` for every seed measured in both, in order of seed:
    the paired quantity a claim over seeds is judged on (`verdicts.mean_interval`). Every
    series of an experiment runs on the same workload per seed, so pairing by seed takes the
    workload's own variation out of the comparison."""
    return [combine(first[seed], second[seed]) for seed in sorted(first.keys() & second.keys())]


def format_number(x: float) -> str:
    return f"{x:,.0f}" if float(x).is_integer() else f"{x:,.3g}"


def format_value(metric: str, value: float | None) -> str:
    if value is None:
        return "-"
    if math.isnan(value):
        return "-"
    return format_duration(value) if metric.endswith("_s") else format_number(value)


# ---------------------------------------------------------------------- experiments


P = TypeVar("P")


class Tracker:
    """Counts units of work and reports them to a `Progress` callback."""

    def __init__(self, total: int, progress: Progress | None) -> None:
        self.total = max(1, total)
        self.done = 0
        self.progress = progress

    def step(self, message: str) -> None:
        self.done += 1
        if self.progress is not None:
            self.progress(min(self.done, self.total), self.total, message)


@dataclass(frozen=True)
class Experiment(Generic[P]):
    """One of the paper's figures as a runnable experiment.

    `scales` maps "test", "quick" and "full" to the experiment's parameters; `describe` says a
    scale's parameters in words; `steps` counts its units of work (for progress); `measure`
    runs it; `claims` compares the medians with the paper; `plot` draws its figures."""

    name: str
    title: str
    x_label: str
    summary_metrics: tuple[str, ...]
    scales: Mapping[str, P]
    describe: Callable[[P], str]
    steps: Callable[[P], int]
    measure: Callable[[P, Tracker], list[Measurement]]
    claims: Callable[[P, list[Measurement]], list[Claim]]
    plot: Callable[[P, list[Measurement], Path, str], list[Path]]
    statistic: Statistic = "median"
    """What the summary tables show over seeds: "median", or "mean" where the paper's figures
    show means."""

    def run(
        self, out_dir: str | Path, *, scale: str = "quick", progress: Progress | None = None
    ) -> ExperimentResult:
        """Run at `scale` and write the CSV, the plots and the Markdown summary into `out_dir`
        (created if needed). ValueError names the known scales when given an unknown one."""
        if scale not in self.scales:
            raise ValueError(f"unknown scale {scale!r}; known: {', '.join(self.scales)}")
        params = self.scales[scale]
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        commit = code_commit()
        started = time.perf_counter()
        tracker = Tracker(self.steps(params), progress)
        measurements = self.measure(params, tracker)
        result = self._result(scale, measurements)
        result.files.append(_write_csv(result, out / f"{self.name}.csv"))
        result.files += self.plot(params, measurements, out, self.name)
        result.wall_seconds = time.perf_counter() - started
        summary = out / f"{self.name}.md"
        summary.write_text(f"# {self.name}: {self.title}\n\n" + result.markdown(), encoding="utf-8")
        result.files.append(summary)
        write_provenance(
            out / f"{self.name}.json",
            self.name,
            scale,
            result.scale_description,
            commit,
            result.wall_seconds,
        )
        result.provenance = read_provenance(out / f"{self.name}.json")
        return result

    def read(self, path: Path, scale: str, rows: Sequence[Mapping[str, str]]) -> ExperimentResult:
        """The result of a saved run from its CSV rows, the claims worked out again from the
        measurements with the current code."""
        if scale not in self.scales:
            raise ValueError(f"{path}: unknown scale {scale!r} of experiment {self.name!r}")
        measurements = [
            Measurement(
                row["series"],
                float(row["x"]),
                int(row["seed"]),
                row["metric"],
                float(row["value"]),
                row["note"],
            )
            for row in rows
        ]
        result = self._result(scale, measurements)
        result.files.append(path)
        result.provenance = read_provenance(path.with_suffix(".json"))
        if result.provenance is not None:
            result.wall_seconds = float(result.provenance.get("wall_seconds", 0.0))
            # The scale as it was measured, if recorded: a later commit may change the scale.
            result.scale_description = str(
                result.provenance.get("description", result.scale_description)
            )
        return result

    def _result(self, scale: str, measurements: list[Measurement]) -> ExperimentResult:
        params = self.scales[scale]
        return ExperimentResult(
            name=self.name,
            title=self.title,
            scale=scale,
            scale_description=self.describe(params),
            x_label=self.x_label,
            measurements=measurements,
            claims=self.claims(params, measurements),
            summary_metrics=self.summary_metrics,
            statistic=self.statistic,
        )


def _write_csv(result: ExperimentResult, path: Path) -> Path:
    with path.open("w", newline="", encoding="utf-8") as file:
        writer = csv.writer(file)
        writer.writerow(CSV_COLUMNS)
        for m in result.measurements:
            writer.writerow(
                [result.name, result.scale, m.series, m.x, m.seed, m.metric, m.value, m.note]
            )
    return path


def read_rows(path: str | Path) -> tuple[str, str, list[dict[str, str]]]:
    """The experiment name, the scale and the rows of a CSV written by `Experiment.run`.
    ValueError if the file is no experiment's CSV or mixes several runs."""
    path = Path(path)
    with path.open(newline="", encoding="utf-8") as file:
        rows = list(csv.DictReader(file))
    if not rows or tuple(rows[0]) != CSV_COLUMNS:
        raise ValueError(f"{path}: not an experiment's CSV (columns {', '.join(CSV_COLUMNS)})")
    names = {(row["experiment"], row["scale"]) for row in rows}
    if len(names) != 1:
        raise ValueError(f"{path}: rows of several runs: {sorted(names)}")
    ((name, scale),) = names
    return name, scale, rows


# ---------------------------------------------------------------------- plots


def new_figure(title: str, x_label: str, y_label: str = "") -> tuple[Figure, Axes]:
    """A 6.4 x 4.2-inch figure of one plot, its axes labelled; no `y_label` when a duration
    axis is to be labelled with its unit by `firmament_py.sim.plots.log_time_axis`."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(6.4, 4.2), dpi=100, layout="constrained")
    axes = figure.add_subplot()
    axes.set_title(title, fontsize="medium")
    axes.set_xlabel(x_label)
    axes.set_ylabel(y_label)
    axes.grid(True, which="major", alpha=0.3)
    return figure, axes


def plot_medians(
    axes: Axes,
    measurements: Sequence[Measurement],
    metric: str,
    series: Sequence[str],
    *,
    labels: Mapping[str, str] | None = None,
    colours: Mapping[str, str] | None = None,
) -> None:
    """Each series' median over seeds as a line, every seed's point as a faint dot; `labels` and
    `colours` by series name (default: the name, and matplotlib's colour cycle)."""
    medians = medians_of(measurements, metric)
    for index, name in enumerate(series):
        colour = (colours or {}).get(name, f"C{index}")
        points = [m for m in measurements if m.metric == metric and m.series == name]
        if not points:
            continue
        axes.scatter(
            [m.x for m in points], [m.value for m in points], s=10, alpha=0.35, color=colour
        )
        xs = sorted({m.x for m in points})
        axes.plot(
            xs,
            [medians[(name, x)] for x in xs],
            marker="o",
            color=colour,
            label=(labels or {}).get(name, name),
        )


def save_figure(figure: Figure, path: Path) -> Path:
    figure.savefig(path)
    return path
