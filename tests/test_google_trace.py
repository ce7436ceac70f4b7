"""Tests of the Google trace 2011 reader (`firmament_py.sim.google_trace`) and of the sample
trace generator (`firmament_py.sim.trace_sample`) whose output is committed as
firmament_py/sim/data/google_sample/.

The generator records, from the life it gives each task, what a replay must find (submission,
runtime, removal); the reader must agree with it. Hand-written traces cover bad rows, windows
and tie-breaking; hypothesis covers ids, the subsampling hash and garbage input.
"""

from __future__ import annotations

import gzip
import math
import shutil
import tempfile
from collections import Counter
from collections.abc import Iterable
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import firmament_py.sim
from firmament_py.model import ClusterState, MachineAdded, MachineRemoved, MachineUpdated
from firmament_py.model.events import TaskRemoved, TaskUpdated
from firmament_py.model.ids import INT64_MAX
from firmament_py.model.resources import Resources
from firmament_py.sim.google_trace import (
    BadRow,
    TraceError,
    TraceScale,
    keep_by_hash,
    read_google_trace,
    split_task_id,
    trace_task_id,
)
from firmament_py.sim.trace_sample import (
    STORIES,
    WINDOW_START,
    SampleTask,
    SampleTrace,
    write_sample_trace,
)
from firmament_py.sim.workload import TaskArrival, WorkloadItem, check_order

COMMITTED = Path(firmament_py.sim.__file__).parent / "data" / "google_sample"
SECOND = 1_000_000
TABLES = ("machine_events", "job_events", "task_events")


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> SampleTrace:
    """The committed sample, written again (with its expectations) by the generator."""
    return write_sample_trace(tmp_path_factory.mktemp("sample"))


def replay(path: Path, **options: object) -> list[WorkloadItem]:
    return list(check_order(read_google_trace(path, **options)))  # type: ignore[arg-type]


def arrivals(items: Iterable[WorkloadItem]) -> dict[tuple[int, int], TaskArrival]:
    """The arrivals by (trace job ID, task index), checking that no task arrives twice."""
    found: dict[tuple[int, int], TaskArrival] = {}
    for item in items:
        if isinstance(item, TaskArrival):
            key = split_task_id(item.submitted.task_id)
            assert key not in found, f"task {key} arrives twice"
            found[key] = item
    return found


def expected(sample: SampleTrace) -> dict[tuple[int, int], SampleTask]:
    return {(task.job_id, task.task_index): task for task in sample.tasks}


def write_trace(root: Path, machine_rows: list[str], task_rows: list[str]) -> Path:
    """A plain-csv trace of one part file per table."""
    for table, rows in (("machine_events", machine_rows), ("task_events", task_rows)):
        (root / table).mkdir(parents=True)
        text = "".join(row + "\n" for row in rows)
        (root / table / "part-00000-of-00001.csv").write_text(text)
    return root


def task_row(time: int, job: int, index: int, event: int, cpu: str = "0.1") -> str:
    return f"{time},,{job},{index},,{event},user,2,9,{cpu},0.05,0.001,0"


# ---------------------------------------------------------------------- the committed sample


def test_the_committed_sample_is_what_the_generator_writes(sample: SampleTrace) -> None:
    again = write_sample_trace(sample.directory.parent / "again")
    for table in TABLES:
        names = sorted(p.name for p in (COMMITTED / table).iterdir())
        assert names == ["part-00000-of-00002.csv.gz", "part-00001-of-00002.csv.gz"]
        for name in names:
            written = (sample.directory / table / name).read_bytes()
            # The same seed gives the same bytes: gzip headers hold no name (flags 0), no time.
            assert (again.directory / table / name).read_bytes() == written
            assert written[3] == 0 and written[4:8] == b"\0\0\0\0"
            committed = (COMMITTED / table / name).read_bytes()
            assert gzip.decompress(committed) == gzip.decompress(written), f"{table}/{name}"
    size = sum(p.stat().st_size for p in COMMITTED.rglob("*") if p.is_file())
    assert size < 100_000  # tens of kilobytes


def test_the_sample_uses_every_story_and_event_type(sample: SampleTrace) -> None:
    assert {task.story for task in sample.tasks} == set(STORIES)
    tasks_per_job = Counter(task.job_id for task in sample.tasks)
    assert 1 in tasks_per_job.values() and max(tasks_per_job.values()) > 1
    codes: dict[str, set[int]] = {"machine_events": set(), "task_events": set()}
    empty_fields = 0
    for table, column in (("machine_events", 2), ("task_events", 5)):
        for part in sorted((COMMITTED / table).iterdir()):
            for row in gzip.decompress(part.read_bytes()).decode().splitlines():
                fields = row.split(",")
                codes[table].add(int(fields[column]))
                empty_fields += "" in (fields[4:6] if table == "machine_events" else fields[9:12])
    assert codes == {"machine_events": {0, 1, 2}, "task_events": set(range(9))}
    assert empty_fields > 0


def test_the_sample_reads_back_its_machines_tasks_and_runtimes(sample: SampleTrace) -> None:
    items = replay(COMMITTED, strict=True)
    assert items == replay(sample.directory)
    found = arrivals(items)
    tasks = expected(sample)
    assert found.keys() == tasks.keys()
    for key, task in tasks.items():
        arrival = found[key]
        assert arrival.time == task.submit_time, key
        assert arrival.runtime == task.runtime, (key, task.story)
        assert arrival.submitted.job_id == str(task.job_id)
    removed = {split_task_id(i.task_id): i.time for i in items if isinstance(i, TaskRemoved)}
    assert removed == {key: t.removed_at for key, t in tasks.items() if t.removed_at is not None}

    added = [item for item in items if isinstance(item, MachineAdded)]
    assert {m.machine_id for m in added} == {str(m.machine_id) for m in sample.machines}
    assert len(added) == len(sample.machines) + 1  # one machine leaves and comes back
    kinds = Counter(type(item).__name__ for item in items)
    assert kinds["MachineRemoved"] == len(sample.removed_for_good) + 1
    assert kinds["MachineUpdated"] == sample.machine_updates
    scale = TraceScale()
    for machine in sample.machines:
        first = next(m for m in added if m.machine_id == str(machine.machine_id))
        assert first.time == machine.added_at
        assert first.slots == 16
        cpu = 1.0 if machine.cpu is None else machine.cpu
        ram = 1.0 if machine.ram is None else machine.ram  # unknown: the largest machine's
        assert first.capacity == scale.resources(cpu, ram)


def test_without_kill_replay_runtimes_are_firmaments_total_runtimes(sample: SampleTrace) -> None:
    items = replay(sample.directory, replay_kills=False)
    assert not any(isinstance(item, TaskRemoved) for item in items)
    found = arrivals(items)
    for key, task in expected(sample).items():
        assert found[key].runtime == task.runtime_without_kills, (key, task.story)


def test_items_come_in_time_order_and_tasks_never_before_a_machine(sample: SampleTrace) -> None:
    machines: set[str] = set()
    arrived: set[int] = set()
    for item in replay(sample.directory, replay_updates=True):  # check_order inside
        if isinstance(item, MachineAdded):
            machines.add(item.machine_id)
        elif isinstance(item, MachineRemoved):
            machines.remove(item.machine_id)
        elif isinstance(item, MachineUpdated):
            assert item.machine_id in machines
        elif isinstance(item, TaskArrival):
            assert machines, f"task {item.submitted.task_id} arrives before any machine"
            arrived.add(item.submitted.task_id)
        else:
            assert isinstance(item, TaskRemoved | TaskUpdated) and item.task_id in arrived


def test_machine_events_win_ties_but_a_trace_may_start_with_tasks(tmp_path: Path) -> None:
    trace = write_trace(
        tmp_path,
        ["500,7,0,p,0.5,0.5", "900,8,0,p,0.5,0.5"],
        [task_row(100, 1, 0, 0), task_row(900, 2, 0, 0)],
    )
    kinds = [(type(item).__name__, item.time) for item in replay(trace)]
    assert kinds == [
        ("TaskArrival", 100),  # the trace says so: submitted before any machine
        ("MachineAdded", 500),
        ("MachineAdded", 900),
        ("TaskArrival", 900),
    ]


def test_the_sample_replays_into_a_cluster_state(sample: SampleTrace) -> None:
    """Every item is an event the model accepts (no placements: nothing is ever too full)."""
    cluster = ClusterState()
    for item in replay(sample.directory, replay_updates=True):
        cluster.apply(item.submitted if isinstance(item, TaskArrival) else item)
    assert len(cluster.machines) == len(sample.machines) - len(sample.removed_for_good)


def test_requests_and_capacities_follow_the_rows_and_the_scale(sample: SampleTrace) -> None:
    scale = TraceScale(cpu_millicores=64_000, ram_bytes=256 * 2**30, disk_bytes=2**41)
    items = replay(sample.directory, scale=scale, slots_per_machine=3)
    submits: dict[tuple[int, int], list[str]] = {}
    for part in sorted((sample.directory / "task_events").iterdir()):
        for row in gzip.decompress(part.read_bytes()).decode().splitlines():
            fields = row.split(",")
            key = (int(fields[2]), int(fields[3]))
            if fields[5] == "0" and key not in submits:
                submits[key] = fields

    def value(text: str, full: int) -> int:
        return round(float(text) * full) if text else 0

    for key, arrival in arrivals(items).items():
        fields = submits[key]
        assert arrival.submitted.request == Resources(
            cpu_millicores=value(fields[9], scale.cpu_millicores),
            ram_bytes=value(fields[10], scale.ram_bytes),
            disk_bytes=value(fields[11], scale.disk_bytes),
        )
        assert arrival.submitted.priority == int(fields[8])
        assert arrival.submitted.labels == {"trace/scheduling-class": fields[7]}
    for item in items:
        if isinstance(item, MachineAdded):
            assert item.slots == 3
            assert item.capacity.disk_bytes == scale.disk_bytes
            assert item.capacity.cpu_millicores in (16_000, 32_000, 64_000)


def test_updates_are_replayed_only_when_asked(sample: SampleTrace) -> None:
    assert not any(isinstance(item, TaskUpdated) for item in replay(sample.directory))
    items = replay(sample.directory, replay_updates=True)
    found = arrivals(items)
    updates = [item for item in items if isinstance(item, TaskUpdated)]
    stories = {key: task.story for key, task in expected(sample).items()}
    for update in updates:
        key = split_task_id(update.task_id)
        before = found[key].submitted
        if stories[key] == "update":  # twice the CPU, once (the running update repeats it)
            assert update.priority is None and update.request is not None
            assert abs(update.request.cpu_millicores - 2 * before.request.cpu_millicores) <= 1
        else:
            assert stories[key] == "pending" and update.priority == 0 and update.request is None
    assert Counter(stories[split_task_id(u.task_id)] for u in updates)["update"] == sum(
        story == "update" for story in stories.values()
    )


# ---------------------------------------------------------------------- time


def identity(item: WorkloadItem) -> tuple[str, str]:
    """What an item is about, whatever its time."""
    if isinstance(item, TaskArrival):
        return "TaskArrival", str(item.submitted.task_id)
    about = item.machine_id if isinstance(item, MachineAdded | MachineRemoved) else None
    return type(item).__name__, str(about or getattr(item, "task_id", ""))


@pytest.mark.parametrize("speedup", [7, 2.5, 0.5])
def test_speedup_divides_times_and_runtimes(sample: SampleTrace, speedup: float) -> None:
    def divided(microseconds: int) -> int:
        return math.floor(Fraction(microseconds) / Fraction(speedup))

    normal, fast = replay(sample.directory), replay(sample.directory, speedup=speedup)
    assert Counter((identity(i), i.time) for i in fast) == Counter(
        (identity(i), divided(i.time)) for i in normal
    )
    runtimes = {key: arrival.runtime for key, arrival in arrivals(normal).items()}
    for key, arrival in arrivals(fast).items():
        runtime = runtimes[key]
        assert arrival.runtime == (None if runtime is None else divided(runtime))


def test_a_window_shifts_time_clips_runs_and_starts_with_what_is_alive(
    sample: SampleTrace,
) -> None:
    # One machine of the sample is away from 180 s into the window to 360 s: not in the cluster
    # at `start`, back by `end`.
    start, end = WINDOW_START + 200 * SECOND, WINDOW_START + 500 * SECOND
    items = replay(sample.directory, start=start, end=end)
    assert all(0 <= item.time <= end - start for item in items)
    found = arrivals(items)
    for key, task in expected(sample).items():
        if (task.end_time is not None and task.end_time < start) or task.submit_time > end:
            assert key not in found, task.story
            continue
        arrival = found[key]
        assert arrival.time == max(0, task.submit_time - start), task.story
        clipped = sum(max(0, stop - max(begin, start)) for begin, stop in task.runs)
        ends_in_window = task.end_time is not None and task.end_time <= end
        if ends_in_window and task.removed_at is None:
            assert arrival.runtime == clipped, task.story
        else:
            assert arrival.runtime is None, task.story
    # The machines in the cluster at `start` come first, at time 0; the one away then later.
    added = [item for item in items if isinstance(item, MachineAdded)]
    at_zero = [item for item in added if item.time == 0]
    assert len(at_zero) == len(sample.machines) - 1
    assert items[: len(at_zero)] == at_zero
    assert len(added) == len(sample.machines)


# ---------------------------------------------------------------------- subsampling


@pytest.fixture(scope="module")
def big_sample(tmp_path_factory: pytest.TempPathFactory) -> SampleTrace:
    return write_sample_trace(tmp_path_factory.mktemp("big"), machines=200, jobs=600, seed=3)


def test_subsampling_keeps_a_stable_proportional_subset(big_sample: SampleTrace) -> None:
    full = replay(big_sample.directory)
    half = replay(big_sample.directory, machine_fraction=0.5, job_fraction=0.5)
    assert half == replay(big_sample.directory, machine_fraction=0.5, job_fraction=0.5)
    quarter = replay(big_sample.directory, machine_fraction=0.25, job_fraction=0.25)

    def jobs(items: list[WorkloadItem]) -> set[str]:
        return {a.submitted.job_id for a in arrivals(items).values()}

    def machines(items: list[WorkloadItem]) -> set[str]:
        return {i.machine_id for i in items if isinstance(i, MachineAdded)}

    assert 0.4 < len(jobs(half)) / len(jobs(full)) < 0.6
    assert 0.35 < len(machines(half)) / len(machines(full)) < 0.65
    assert jobs(quarter) < jobs(half) and machines(quarter) < machines(half)
    # Whole jobs and whole machine histories are kept, exactly as in the full replay.
    kept = machines(half)
    assert [i for i in half if not isinstance(i, TaskArrival | TaskRemoved)] == [
        i for i in full if getattr(i, "machine_id", None) in kept
    ]
    kept_jobs = jobs(half)
    assert [i for i in half if isinstance(i, TaskArrival)] == [
        i for i in full if isinstance(i, TaskArrival) and i.submitted.job_id in kept_jobs
    ]
    assert replay(big_sample.directory, job_fraction=0.0, machine_fraction=0.0) == []


@given(st.text(min_size=1, max_size=20), st.floats(0, 1), st.floats(0, 1))
def test_keep_by_hash_is_monotone_in_the_fraction(identifier: str, a: float, b: float) -> None:
    low, high = sorted((a, b))
    assert not keep_by_hash(identifier, low) or keep_by_hash(identifier, high)
    assert keep_by_hash(identifier, 1.0) and not keep_by_hash(identifier, 0.0)


def test_keep_by_hash_is_a_fixed_function_of_the_id() -> None:
    # BLAKE2b, not the salted hash(): these ids are kept on every run and every platform.
    assert [n for n in range(16) if keep_by_hash(str(n), 0.5)] == [2, 4, 6, 12, 14]
    assert [n for n in range(16) if keep_by_hash(str(n), 0.25)] == [2, 6]
    assert sum(keep_by_hash(str(n), 0.3) for n in range(10_000)) in range(2800, 3200)


# ---------------------------------------------------------------------- ids


@given(st.integers(0, 2**43 - 1), st.integers(0, 2**20 - 1))
def test_task_ids_are_invertible_int64s(job: int, index: int) -> None:
    task_id = trace_task_id(job, index)
    assert 0 <= task_id <= INT64_MAX
    assert split_task_id(task_id) == (job, index)


@pytest.mark.parametrize(("job", "index"), [(2**43, 0), (0, 2**20), (-1, 0)])
def test_task_ids_outside_the_limits_are_refused(job: int, index: int) -> None:
    with pytest.raises(ValueError, match="task ids need"):
        trace_task_id(job, index)


# ---------------------------------------------------------------------- bad rows and files

GOOD_MACHINES = ["0,7,0,p,0.5,0.5", "0,8,0,p,1,1", "500,8,2,p,,0.75"]
BAD_MACHINES = {
    2: ("0,9,0,p,0.5", "expected 6 columns, found 5"),
    3: ("x,9,0,p,0.5,0.5", "timestamp must be a non-negative integer"),
    4: ("10,9,3,p,0.5,0.5", "unknown MachineEvent type '3'"),
    5: ("20,10,1,,,", "machine 10 is not in the cluster"),
    6: ("30,7,0,p,0.5,0.5", "machine 7 is already added"),
    8: ("400,9,0,p,0.5,0.5", "time 400 is earlier than the row before it (500)"),
}
GOOD_TASKS = [task_row(600, 1, 0, 0), task_row(700, 1, 0, 1), task_row(900, 1, 0, 4)]
BAD_TASKS = {
    1: (task_row(650, 2, 0, 9), "unknown TaskEvent type '9'"),
    2: (task_row(650, 2, 0, 0, cpu="-0.1"), "CPU request must be a finite non-negative number"),
    3: (task_row(650, 2, 0, 0, cpu="nan"), "CPU request must be a finite non-negative number"),
    4: (task_row(650, 2**43, 0, 0), "job ID must be at most"),
    5: (task_row(650, 2, 2**20, 0), "task index must be at most"),
    6: (task_row(650, 2, 0, 0).replace(",9,", ",high,"), "priority must be"),
    7: (task_row(650, 2, 0, 0) + ",", "expected 13 columns, found 14"),
    9: (task_row(660, 2, 0, 0), "time 660 is earlier than the row before it (700)"),
}


def interleave(good: list[str], bad: dict[int, tuple[str, str]]) -> list[str]:
    """`good` with the bad rows at their (0-based) positions."""
    rows, good_rows = [], iter(good)
    for position in range(len(good) + len(bad)):
        rows.append(bad[position][0] if position in bad else next(good_rows))
    return rows


def test_bad_rows_are_reported_with_file_and_line_and_skipped(tmp_path: Path) -> None:
    trace = write_trace(
        tmp_path / "bad", interleave(GOOD_MACHINES, BAD_MACHINES), interleave(GOOD_TASKS, BAD_TASKS)
    )
    clean = write_trace(tmp_path / "clean", GOOD_MACHINES, GOOD_TASKS)
    reported: list[BadRow] = []
    items = replay(trace, on_bad_row=reported.append)
    assert items == replay(clean)
    assert len(items) == 4  # two machines, an update, a task
    where = {(Path(bad.path).parent.name, bad.line): bad for bad in reported}
    assert len(where) == len(reported) == len(BAD_MACHINES) + len(BAD_TASKS)
    for table, bad_rows in (("machine_events", BAD_MACHINES), ("task_events", BAD_TASKS)):
        for position, (text, reason) in bad_rows.items():
            bad = where[(table, position + 1)]
            assert reason in bad.reason and bad.text == text
            assert str(bad).startswith(f"{bad.path}:{position + 1}: ")


def test_strict_refuses_the_first_bad_row_naming_file_and_line(tmp_path: Path) -> None:
    trace = write_trace(tmp_path / "a", GOOD_MACHINES, interleave(GOOD_TASKS, BAD_TASKS))
    items = read_google_trace(trace, strict=True)
    with pytest.raises(TraceError, match=r"task_events/part-00000-of-00001\.csv:2: unknown") as e:
        next(items)
    assert e.value.line == 2 and e.value.path is not None
    trace = write_trace(tmp_path / "b", interleave(GOOD_MACHINES, BAD_MACHINES), GOOD_TASKS)
    with pytest.raises(TraceError, match=r"machine_events/part-00000-of-00001\.csv:3: expected"):
        next(read_google_trace(trace, strict=True))
    clean = write_trace(tmp_path / "c", GOOD_MACHINES, GOOD_TASKS)
    assert replay(clean, strict=True) == replay(clean)


def test_gzipped_and_plain_csv_give_the_same_items(sample: SampleTrace, tmp_path: Path) -> None:
    for table in ("machine_events", "task_events"):
        (tmp_path / table).mkdir()
        for part in (sample.directory / table).iterdir():
            plain = tmp_path / table / part.name.removesuffix(".gz")
            plain.write_bytes(gzip.decompress(part.read_bytes()))
    assert replay(tmp_path) == replay(sample.directory)
    shutil.copy(
        sample.directory / "task_events" / "part-00000-of-00002.csv.gz", tmp_path / "task_events"
    )
    with pytest.raises(TraceError, match=r"both a \.csv and a \.csv\.gz"):
        read_google_trace(tmp_path)


def test_arguments_and_missing_tables_are_refused(sample: SampleTrace, tmp_path: Path) -> None:
    for options in (
        {"job_fraction": 1.5},
        {"machine_fraction": -0.1},
        {"speedup": 0},
        {"speedup": float("inf")},
        {"slots_per_machine": -1},
        {"start": 10, "end": 5},
    ):
        with pytest.raises(ValueError):
            read_google_trace(sample.directory, **options)
    with pytest.raises(TraceError, match="no machine_events/part-NNNNN"):
        read_google_trace(tmp_path)
    with pytest.raises(ValueError):
        TraceScale(cpu_millicores=-1)


FIELDS = ["", "0", "1", "5", "9", "600", "0.5", "2000", "-1", "x", "1e300", "9" * 20]
row_fields = st.lists(st.sampled_from(FIELDS), min_size=5, max_size=14)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(row_fields, max_size=8).map(lambda rows: [",".join(r) for r in rows]),
    st.lists(row_fields, max_size=12).map(lambda rows: [",".join(r) for r in rows]),
)
def test_garbage_is_reported_never_crashes_and_strict_refuses_it(
    machine_rows: list[str], task_rows: list[str]
) -> None:
    with tempfile.TemporaryDirectory() as directory:
        trace = write_trace(Path(directory), machine_rows, task_rows)
        reported: list[BadRow] = []
        try:
            replay(trace, on_bad_row=reported.append)
        except TraceError as error:  # a table of bad rows only: nothing of it to replay
            assert "no row is usable" in str(error) and reported
        if reported:
            with pytest.raises(TraceError):
                list(read_google_trace(trace, strict=True))
        else:
            replay(trace, strict=True)


@pytest.mark.parametrize("strict", [False, True])
def test_a_part_file_that_is_not_text_is_named(tmp_path: Path, strict: bool) -> None:
    """A whole file that cannot be read is not a bad row to skip, strict or not."""
    trace = write_trace(tmp_path / "a", GOOD_MACHINES, GOOD_TASKS)
    part = trace / "task_events" / "part-00000-of-00001.csv"
    part.write_bytes(b"\xff\xfe not utf-8 \x80\n")
    with pytest.raises(TraceError, match=r"task_events/part-00000-of-00001\.csv: not UTF-8 text"):
        replay(trace, strict=strict)
    part.unlink()
    (part.parent / "part-00000-of-00001.csv.gz").write_bytes(b"plain text, not gzip\n")
    with pytest.raises(TraceError, match=r"part-00000-of-00001\.csv\.gz: not gzipped UTF-8"):
        replay(trace, strict=strict)


def test_a_table_whose_every_row_is_bad_is_refused_not_replayed_as_nothing(
    tmp_path: Path,
) -> None:
    bad = ["garbage,row", "1,2,3"]
    trace = write_trace(tmp_path / "a", bad, GOOD_TASKS)
    with pytest.raises(TraceError, match=r"machine_events: no row is usable.*1: expected 6"):
        replay(trace)
    trace = write_trace(tmp_path / "b", GOOD_MACHINES, bad)
    with pytest.raises(TraceError, match=r"task_events: no row is usable"):
        replay(trace)
    # One good row among the bad is a trace to replay, its bad rows reported.
    reported: list[BadRow] = []
    trace = write_trace(tmp_path / "c", [*bad, *GOOD_MACHINES], GOOD_TASKS)
    replay(trace, on_bad_row=reported.append)
    assert len(reported) == 2
