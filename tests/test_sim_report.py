"""Tests of `firmament_py.sim.report`: a simulation's result written out and read back.

A small real run (two machines, one of which fails; a service task; a removed task, a failed
one and tasks that never get placed; one rejected event) is written once per module, and its
files are read back with the csv and json modules and checked against the records. Hand-built
results check the percentiles against numpy and the empty cases (no rounds, no tasks).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

from firmament_py.model.events import MachineAdded, MachineFailed, TaskFailed, TaskRemoved
from firmament_py.model.events import TaskSubmitted as Submitted
from firmament_py.model.resources import Resources
from firmament_py.scheduler import Scheduler
from firmament_py.sim.report import (
    PLOT_FILES,
    ROUND_COLUMNS,
    TASK_COLUMNS,
    Percentiles,
    RunSummary,
    compare_table,
    plot_run,
    summarize,
    summary_table,
    write_report,
    write_rounds_csv,
    write_summary_json,
    write_tasks_csv,
)
from firmament_py.sim.simulator import (
    Accounting,
    RoundRecord,
    SimulationConfig,
    SimulationResult,
    Simulator,
    TaskRecord,
)
from firmament_py.sim.workload import TaskArrival, WorkloadItem
from tests.plot_legibility import recording

S = 1_000_000
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
REPORT_FILES = ["rounds.csv", "tasks.csv", "summary.json", *PLOT_FILES]


def _workload() -> list[WorkloadItem]:
    cpu = Resources(cpu_millicores=4000)
    items: list[WorkloadItem] = [
        MachineAdded(time=0, machine_id=f"m{i}", capacity=cpu, slots=2) for i in range(2)
    ]
    items += [
        TaskArrival(Submitted(time=t * S // 2, task_id=t, job_id=f"j{t % 2}"), runtime=3 * S)
        for t in range(6)
    ]
    items.append(TaskArrival(Submitted(time=0, task_id=10, job_id="svc"), runtime=None))
    items += [
        TaskArrival(Submitted(time=5 * S, task_id=t, job_id="late"), runtime=S)
        for t in range(20, 24)
    ]
    items += [
        MachineFailed(time=2 * S, machine_id="m1"),
        TaskRemoved(time=2 * S, task_id=99),  # never submitted: rejected
        TaskRemoved(time=3 * S, task_id=5),
        TaskFailed(time=4 * S, task_id=3),
    ]
    return sorted(items, key=lambda item: item.time)


@pytest.fixture(scope="module")
def result() -> SimulationResult:
    config = SimulationConfig(accounting=Accounting.NONE, end_time=8 * S)
    return Simulator(Scheduler("trivial"), _workload(), config).run()


@pytest.fixture(scope="module")
def report_dir(result: SimulationResult, tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("report") / "nested" / "run"
    paths = write_report(result, directory)
    assert [path.name for path in paths] == REPORT_FILES
    assert all(path.parent == directory for path in paths)
    return directory


def _read_csv(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with path.open(newline="", encoding="utf-8") as file:
        reader = csv.DictReader(file)
        return list(reader.fieldnames or []), list(reader)


def _cell(value: object) -> str:
    """What a record's value must read back as: floats exactly via repr, None as empty."""
    if value is None:
        return ""
    return repr(value) if isinstance(value, float) else str(value)


def _assert_png(path: Path) -> None:
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC, path
    assert len(data) > 1000, path


# ---------------------------------------------------------------------- the real run


def test_rounds_csv_reads_back_exactly(result: SimulationResult, report_dir: Path) -> None:
    header, rows = _read_csv(report_dir / "rounds.csv")
    assert header == [name for name, _ in ROUND_COLUMNS]
    assert header[:4] == ["index", "start_us", "duration_us", "algorithm"]
    assert len(rows) == len(result.rounds) > 0
    for row, record in zip(rows, result.rounds, strict=True):
        assert row == {name: _cell(getattr(record, attr)) for name, attr in ROUND_COLUMNS}
        assert float(row["algorithm_s"]) == record.algorithm_seconds
        assert int(row["start_us"]) == record.start
        assert int(row["waiting"]) == record.waiting


def test_tasks_csv_reads_back_exactly(result: SimulationResult, report_dir: Path) -> None:
    header, rows = _read_csv(report_dir / "tasks.csv")
    assert header == [name for name, _ in TASK_COLUMNS]
    assert len(rows) == len(result.tasks) == 11
    by_id = {int(row["task_id"]): row for row in rows}
    for task_id, record in result.tasks.items():
        row = by_id[task_id]
        assert row == {name: _cell(getattr(record, attr)) for name, attr in TASK_COLUMNS}
        latency = record.placement_latency
        assert row["placement_latency_us"] == ("" if latency is None else str(latency))
    service = by_id[10]
    assert service["runtime_us"] == "" and service["finish_us"] == ""
    assert service["job_id"] == "svc"
    assert by_id[5]["end_state"] == "removed" and by_id[5]["finish_us"] == str(3 * S)
    assert by_id[3]["end_state"] == "failed"
    never_placed = [row for row in rows if row["first_start_us"] == ""]
    assert never_placed, "the workload leaves tasks waiting"
    assert all(row["placement_latency_us"] == "" for row in never_placed)


def test_summary_counts_match_the_records(result: SimulationResult) -> None:
    summary = summarize(result)
    tasks = list(result.tasks.values())
    states = [task.end_state for task in tasks]
    placed = [task for task in tasks if task.first_start is not None]

    assert (summary.policy, summary.accounting) == ("trivial", "none")
    assert summary.algorithm == result.algorithm
    assert summary.simulated_seconds == result.end_time / S == 8.0
    assert summary.wall_seconds == result.wall_seconds
    assert summary.rounds == len(result.rounds)
    assert summary.events == result.events
    assert summary.rejected_events == 1
    assert len(summary.rejections) == 1 and "unknown task 99" in summary.rejections[0]

    assert summary.tasks_submitted == 11
    assert (summary.tasks_failed, summary.tasks_removed) == (1, 1)
    assert summary.tasks_completed == states.count("completed")
    assert summary.tasks_running == states.count("running")
    assert summary.tasks_waiting == states.count("runnable")
    assert summary.tasks_placed == len(placed)
    assert summary.tasks_never_placed == 11 - len(placed) > 0
    total = summary.tasks_completed + summary.tasks_failed + summary.tasks_removed
    assert total + summary.tasks_running + summary.tasks_waiting == 11
    assert summary.placements == sum(task.placements for task in tasks)
    assert summary.evictions == sum(task.evictions for task in tasks) == 2  # m1's two tasks
    assert summary.preemptions == sum(r.preempted for r in result.rounds)
    assert summary.migrations == sum(r.migrated for r in result.rounds)
    assert summary.mean_graph_nodes == np.mean([r.graph_nodes for r in result.rounds])
    assert summary.mean_graph_arcs == np.mean([r.graph_arcs for r in result.rounds])

    starts = [(t.first_start, t.submit_time) for t in placed if t.first_start is not None]
    latencies = np.array([start - submit for start, submit in starts]) / S
    assert summary.placement_latency_s.count == len(placed)
    assert summary.placement_latency_s.p90 == float(np.percentile(latencies, 90))
    assert summary.placement_latency_s.max == float(latencies.max())
    runtimes = [r.algorithm_seconds for r in result.rounds]
    assert summary.algorithm_runtime_s.p50 == float(np.percentile(runtimes, 50))
    assert summary.algorithm_runtime_s.max == max(runtimes)


def test_summary_json_round_trips(result: SimulationResult, report_dir: Path) -> None:
    summary = summarize(result)
    loaded = json.loads((report_dir / "summary.json").read_text(encoding="utf-8"))
    # The report's summary was taken from the same result: equal in everything.
    assert loaded == summary.as_dict()
    assert loaded["placement_latency_s"]["count"] == summary.tasks_placed
    assert loaded["rejections"] == list(summary.rejections)
    assert RunSummary.from_dict(loaded) == summary


def test_plots_are_png_files(report_dir: Path) -> None:
    for name in PLOT_FILES:
        _assert_png(report_dir / name)


def test_summary_table_shows_policy_and_key_numbers(result: SimulationResult) -> None:
    summary = summarize(result)
    console = Console(record=True, width=120)
    console.print(summary_table(summary))
    text = console.export_text()
    assert "trivial" in text and result.algorithm in text
    assert "8.00 s" in text  # simulated time
    for label, value in [
        ("rounds", summary.rounds),
        ("tasks submitted", 11),
        ("never placed", summary.tasks_never_placed),
        ("evictions", 2),
        ("rejected events", 1),
    ]:
        line = next(line for line in text.splitlines() if f" {label} " in line)
        assert f" {value} " in line, line
    assert "unknown task 99" in text  # the kept rejection is the caption


def test_compare_table_puts_runs_side_by_side(result: SimulationResult) -> None:
    first = summarize(result)
    empty = summarize(SimulationResult("random", "relax", Accounting.ALGORITHM))
    console = Console(record=True, width=160)
    console.print(compare_table([first, empty]))
    text = console.export_text()
    assert "trivial / " in text and "random / relax" in text
    rounds_line = next(line for line in text.splitlines() if " rounds " in line)
    cells = [cell.strip() for cell in rounds_line.split("│")[1:-1]]
    assert cells == ["rounds", str(first.rounds), "0"]
    console.print(compare_table([first, empty], labels=["baseline", "candidate"]))
    assert "candidate" in console.export_text()
    with pytest.raises(ValueError, match="1 labels for 2 runs"):
        compare_table([first, empty], labels=["only one"])


# ---------------------------------------------------------------------- known data


def test_percentiles_match_numpy() -> None:
    known = Percentiles.of([float(v) for v in range(1, 11)])
    assert known == Percentiles(count=10, p50=5.5, p90=9.1, p99=9.91, max=10.0)
    rng = np.random.default_rng(7)
    samples = rng.lognormal(size=1001)
    measured = Percentiles.of(list(samples))
    expected = np.percentile(samples, [50, 90, 99])
    assert (measured.p50, measured.p90, measured.p99) == tuple(float(p) for p in expected)
    assert measured.max == float(samples.max()) and measured.count == 1001
    assert Percentiles.of([3.0]) == Percentiles(count=1, p50=3.0, p90=3.0, p99=3.0, max=3.0)
    assert Percentiles.of([]) == Percentiles(count=0, p50=None, p90=None, p99=None, max=None)


def _round(index: int, start: int, algorithm_seconds: float) -> RoundRecord:
    return RoundRecord(
        index=index,
        start=start,
        duration=0,
        algorithm="cost_scaling",
        algorithm_seconds=algorithm_seconds,
        solver_seconds=algorithm_seconds,
        round_seconds=algorithm_seconds,
        placed=1,
        preempted=index % 2,
        migrated=1,
        refused=0,
        skipped=0,
        task_errors=0,
        waiting=3 - index,
        running=index,
        events=1,
        graph_nodes=10 + index,
        graph_arcs=20 + 2 * index,
        graph_changes=5,
        cost=100,
        machines=2,
        slots=4,
    )


def test_summarize_known_records() -> None:
    """Latencies 0, 2 s and 5 s over three placed tasks (one never placed); runtimes include a
    zero, which the log-axis plots must survive."""
    result = SimulationResult("trivial", "relax", Accounting.ALGORITHM, end_time=9 * S)
    result.rounds = [_round(0, 0, 0.0), _round(1, S, 0.25), _round(2, 2 * S, 0.5)]
    for task_id, (first_start, state) in enumerate(
        [(0, "completed"), (2 * S, "running"), (5 * S, "failed"), (None, "runnable")]
    ):
        result.tasks[task_id] = TaskRecord(
            task_id, "j", 0, S, first_start=first_start, end_state=state, placements=1
        )
    summary = summarize(result)
    assert summary.placement_latency_s == Percentiles.of([0.0, 2.0, 5.0])
    assert summary.placement_latency_s.p50 == float(np.percentile([0.0, 2.0, 5.0], 50)) == 2.0
    assert summary.placement_latency_s.p90 == float(np.percentile([0.0, 2.0, 5.0], 90))
    assert summary.algorithm_runtime_s.p50 == 0.25
    assert summary.algorithm_runtime_s.p99 == float(np.percentile([0.0, 0.25, 0.5], 99))
    assert (summary.tasks_placed, summary.tasks_never_placed) == (3, 1)
    assert (summary.tasks_completed, summary.tasks_running, summary.tasks_failed) == (1, 1, 1)
    assert summary.tasks_waiting == 1
    assert (summary.preemptions, summary.migrations) == (1, 3)
    assert summary.mean_graph_nodes == 11.0 and summary.mean_graph_arcs == 22.0


def test_the_starting_tasks_and_the_arrivals_are_summarised_apart(tmp_path: Path) -> None:
    """Four tasks at time 0, placed at 1 s; three arriving later, placed 2, 4 and 6 ms after;
    one arriving and never placed. The arrivals' percentiles are theirs alone, the table shows
    both groups, and the latency plot draws one curve for each."""
    result = SimulationResult("trivial", "relax", Accounting.ALGORITHM, end_time=9 * S)
    result.rounds = [_round(0, 0, 0.0), _round(1, S, 0.25)]
    records = [(0, S)] * 4 + [(3 * S, 3 * S + 2000), (4 * S, 4 * S + 4000), (5 * S, 5 * S + 6000)]
    for task_id, (submit, first_start) in enumerate([*records, (6 * S, None)]):
        result.tasks[task_id] = TaskRecord(task_id, "j", submit, S, first_start=first_start)
    summary = summarize(result)
    assert summary.tasks_at_start == 4
    assert summary.start_latency_s == Percentiles.of([1.0] * 4)
    assert summary.arrival_latency_s == Percentiles.of([0.002, 0.004, 0.006])
    assert summary.placement_latency_s.count == 7
    console = Console(record=True, width=120)
    console.print(summary_table(summary))
    table = console.export_text()
    assert "tasks at time 0" in table and "tasks arriving later" in table
    assert "4.00 ms" in table  # the arrivals' median, which the starting tasks' 1 s would hide
    with recording() as figures:
        plot_run(result, tmp_path)
    lines = figures[PLOT_FILES.index("placement_latency_cdf.png")].axes[0].get_lines()
    assert sorted(len(line.get_xdata()) for line in lines) == [3, 4]


# ---------------------------------------------------------------------- empty results


def test_empty_result_writes_every_file(tmp_path: Path) -> None:
    result = SimulationResult("trivial", "relax", Accounting.NONE)
    paths = write_report(result, tmp_path / "empty")
    assert [path.name for path in paths] == REPORT_FILES
    header, rows = _read_csv(tmp_path / "empty" / "rounds.csv")
    assert header == [name for name, _ in ROUND_COLUMNS] and rows == []
    header, rows = _read_csv(tmp_path / "empty" / "tasks.csv")
    assert header == [name for name, _ in TASK_COLUMNS] and rows == []
    summary = json.loads((tmp_path / "empty" / "summary.json").read_text(encoding="utf-8"))
    assert summary["rounds"] == 0 and summary["tasks_submitted"] == 0
    assert summary["placement_latency_s"] == {
        "count": 0,
        "p50": None,
        "p90": None,
        "p99": None,
        "max": None,
    }
    assert summary["mean_graph_nodes"] is None
    for name in PLOT_FILES:
        _assert_png(tmp_path / "empty" / name)
    console = Console(record=True, width=120)
    console.print(summary_table(summarize(result)))
    assert "trivial" in console.export_text()


def test_rounds_without_placements(tmp_path: Path) -> None:
    """Tasks but no machine: rounds run while the tasks wait, and none is ever placed."""
    workload: list[WorkloadItem] = [
        TaskArrival(Submitted(time=0, task_id=t, job_id="j"), runtime=S) for t in range(3)
    ]
    config = SimulationConfig(accounting=Accounting.NONE, end_time=3 * S)
    result = Simulator(Scheduler("trivial"), workload, config).run()
    assert result.rounds
    summary = summarize(result)
    assert (summary.tasks_placed, summary.tasks_never_placed, summary.tasks_waiting) == (0, 3, 3)
    assert summary.placement_latency_s.count == 0 and summary.placement_latency_s.p50 is None
    for path in plot_run(result, tmp_path):
        _assert_png(path)
    write_rounds_csv(result, tmp_path / "r.csv")
    _, rows = _read_csv(write_tasks_csv(result, tmp_path / "t.csv"))
    assert [row["first_start_us"] for row in rows] == ["", "", ""]
    loaded = json.loads(write_summary_json(summary, tmp_path / "s.json").read_text("utf-8"))
    assert loaded["tasks_never_placed"] == 3


def test_a_summary_from_before_the_split_reads_back_as_not_measured(
    result: SimulationResult,
) -> None:
    """summary.json files written before the starting tasks and the arrivals were told apart
    (sweeps compare saved runs) read back, with those numbers unknown rather than zero."""
    old = summarize(result).as_dict()
    for key in ("tasks_at_start", "start_latency_s", "arrival_latency_s"):
        del old[key]
    summary = RunSummary.from_dict(old)
    assert summary.tasks_at_start is None
    assert summary.arrival_latency_s.count == 0 and summary.arrival_latency_s.p50 is None
    console = Console(record=True, width=120)
    console.print(summary_table(summary))
    row = next(line for line in console.export_text().splitlines() if "tasks at time 0" in line)
    assert row.split()[-2] == "-", row
