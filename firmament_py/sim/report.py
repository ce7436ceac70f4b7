"""Reporting a simulation run: CSV files, a JSON summary and terminal tables, and (through
`firmament_py.sim.plots`) its plots.

A `SimulationResult` holds one record per scheduling round and one per task. This module turns
it into what Firmament's evaluation reports (OSDI '16, §7):

* `rounds.csv`: one row per round, like Firmament's scheduler_events output;
* `tasks.csv`: one row per task, with its placement latency (submission to first placement);
* `summary.json`: a `RunSummary` (counts, placement latency and algorithm runtime percentiles);
* the plots of `firmament_py.sim.plots.plot_run`;
* `summary_table` / `compare_table`: rich tables of one run, or several side by side.

`write_report` writes all of them into one directory. Times in the CSV files are integer
microseconds (the simulator's unit) and wall-clock timings are float seconds, as in the records;
the summary uses seconds throughout.
"""

from __future__ import annotations

import csv
import json
import os
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from rich.table import Table

from firmament_py.model.states import TaskState
from firmament_py.sim.plots import PLOT_FILES, plot_run
from firmament_py.sim.simulator import MICROSECONDS, SimulationResult
from firmament_py.sim.wording import format_duration

__all__ = [
    "PLOT_FILES",
    "ROUND_COLUMNS",
    "TASK_COLUMNS",
    "Percentiles",
    "RunSummary",
    "compare_table",
    "plot_run",
    "summarize",
    "summary_table",
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

    `tasks_at_start` were submitted at time 0 (the workload's starting population: a synthetic
    steady state, or what a trace holds when its window opens); `arrival_latency_s` is the
    placement latency of the others, the tasks that arrive while the cluster runs, and
    `start_latency_s` that of the starting population.
    `placement_latency_s` covers both, and on a Google-shaped workload the starting population
    outnumbers the arrivals and is placed by the first round or two: its percentiles are then the
    first round's, and the arrivals' say how the scheduler keeps up.

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
    tasks_at_start: int | None
    start_latency_s: Percentiles
    arrival_latency_s: Percentiles
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
        """The inverse of `as_dict` (to compare runs saved as summary.json files). A summary
        written before the starting tasks and the arrivals were told apart reads back with
        `tasks_at_start` None and those two percentiles empty: not measured, not zero."""
        unknown = asdict(Percentiles.of([]))
        return cls(
            **{
                "tasks_at_start": None,
                **values,
                "rejections": tuple(values["rejections"]),
                "placement_latency_s": Percentiles(**values["placement_latency_s"]),
                "start_latency_s": Percentiles(**values.get("start_latency_s", unknown)),
                "arrival_latency_s": Percentiles(**values.get("arrival_latency_s", unknown)),
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
    at_start = [
        latency / MICROSECONDS
        for task in tasks
        if task.submit_time == 0 and (latency := task.placement_latency) is not None
    ]
    arrivals = [
        latency / MICROSECONDS
        for task in tasks
        if task.submit_time > 0 and (latency := task.placement_latency) is not None
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
        tasks_at_start=sum(1 for task in tasks if task.submit_time == 0),
        start_latency_s=Percentiles.of(at_start),
        arrival_latency_s=Percentiles.of(arrivals),
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


def _count(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def _arrived(summary: RunSummary) -> int | None:
    if summary.tasks_at_start is None:
        return None
    return summary.tasks_submitted - summary.tasks_at_start


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
    [
        ("tasks at time 0", lambda s: _count(s.tasks_at_start)),
        ("time-0 latency p50", lambda s: format_duration(s.start_latency_s.p50)),
        ("time-0 latency max", lambda s: format_duration(s.start_latency_s.max)),
        ("tasks arriving later", lambda s: _count(_arrived(s))),
        *_percentile_rows("arrival latency", lambda s: s.arrival_latency_s),
    ],
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
