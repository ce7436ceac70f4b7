"""Replay the Google cluster-usage trace 2011 (clusterdata-2011-2) as a simulator workload.

`read_google_trace(path)` turns a trace directory into the time-ordered `WorkloadItem`s of
`firmament_py.sim.workload`: machines joining, changing and leaving, and tasks arriving with the
runtime the trace shows for them. It follows how Firmament's own simulator replays the trace
(camsas/firmament, src/sim/google_trace_loader.cc, google_trace_task_processor.cc and
simulator_bridge.cc) where that is known, and says so where it departs.

The trace (schema: "Google cluster-usage traces: format + schema", v2.1) is a directory of
tables, each a folder of ``part-NNNNN-of-MMMMM.csv.gz`` files (plain ``.csv`` works too), no
header row, times in microseconds (0: before the trace window; 2**63 - 1: after it). The files
of a table are consecutive in time. Two tables are read; job_events adds nothing a replay needs.

  machine_events  timestamp, machine ID, event type (ADD=0 REMOVE=1 UPDATE=2), platform ID,
                  CPUs, memory (both normalised to the largest machine; may be empty)
  task_events     timestamp, missing info, job ID, task index, machine ID, event type
                  (SUBMIT=0 SCHEDULE=1 EVICT=2 FAIL=3 FINISH=4 KILL=5 LOST=6 UPDATE_PENDING=7
                  UPDATE_RUNNING=8), user, scheduling class, priority, CPU request, memory
                  request, disk space request, different-machine restriction

What is replayed, and why:

* Machines. ADD becomes `MachineAdded` with the trace's CPUs and memory scaled by `TraceScale`
  (an empty value: the largest machine's) and `slots_per_machine` slots; REMOVE becomes
  `MachineRemoved`; UPDATE becomes `MachineUpdated` when CPUs or memory change (an empty value
  keeps the old one). Firmament ignores machine sizes and updates: every machine is one
  template (its documented simulator command uses mach_16pus, with one task per PU,
  ``max_tasks_per_pu`` 1), hence the default of 16 slots.
* Task arrivals. A task's first SUBMIT becomes a `TaskArrival` with its requests (empty: 0),
  priority, and a ``trace/scheduling-class`` label. Later SUBMITs, which the trace shows after
  an EVICT, FAIL, KILL or LOST, are ignored: the scheduler and simulator decide evictions and
  re-queue evicted tasks themselves (as simulator_bridge.cc does: only the first SUBMIT counts).
* Runtimes. A task's runtime is the sum of all its runs in the trace, each from a SCHEDULE to
  the EVICT, FAIL, FINISH, KILL or LOST that ends it, so the task keeps a machine busy as long as
  it did in the trace (Firmament's "total runtime", google_trace_task_processor.cc). An end with
  no run open (a pending task failed or killed) adds nothing; a SCHEDULE while a run is open
  closes that run first. A task still pending or running where the data read ends (no end
  event, or one at 2**63 - 1) gets runtime None: it runs until the simulation ends. Simulated
  tasks do not fail, so FAIL, LOST and EVICT only end runs.
* Kills (`replay_kills`, default on). A task whose last event is a KILL (not followed by a
  resubmission) was stopped by its user or job: it becomes a `TaskRemoved` at the kill's time
  and gets runtime None, so it runs until it is removed and never counts as completed.
  Firmament instead counts the killed run into the runtime and removes nothing; pass
  ``replay_kills=False`` for that.
* Updates (`replay_updates`, default off as in Firmament). UPDATE_PENDING and UPDATE_RUNNING
  become `TaskUpdated` with the new requests and priority, when they change. A larger request
  of a running task can exceed its machine, which `ClusterState` refuses: the driver must cope.
* Ignored columns: missing info (synthesised rows are replayed like the others), machine ID of
  a task (the scheduler places), user, different-machine restriction (the paper does not
  enforce constraints either, §7.1).

Ids: `JobId` and `MachineId` are the trace's decimal ids. A `TaskId` is
``job_id * 2**20 + task_index`` (`trace_task_id`, inverted by `split_task_id`): injective, the
same in every subsample, readable; it needs job ids below 2**43 and task indices below 2**20,
ample for the 2011 trace (job ids below 2**33; its largest jobs have tens of thousands of
tasks, §4.3); other rows are bad rows.

Subsampling, as Firmament does by hash (it keeps a machine, or a task, when SpookyHash of its
id is below a fraction of 2**64): a machine is kept when the 64-bit BLAKE2b hash of its decimal
id, as a fraction of 2**64, is below `machine_fraction`, and a job with all its tasks when its
id's is below `job_fraction` (by job, not by task as Firmament, so jobs stay whole). The choice
is stable across runs and platforms, and a smaller fraction keeps a subset of a larger one.
Equal fractions keep the load per machine about the trace's.

Time: an item at trace time t comes at ``(t - origin) / speedup`` (floored to whole
microseconds), origin being `start` (default 0), and runtimes are divided by `speedup` too.
That divides every interarrival time and task runtime by the factor, as in the paper's
"accelerated workload" (§7.4, Figure 18) and Firmament's ``--trace_speed_up``; machine events
are sped up alike. `start` and `end` (trace microseconds, before the speed-up) cut a window:
rows after `end` are not read; runs are clipped to the window; machines present at `start` are
added at `start`, and tasks submitted before it that have not ended by then arrive at `start`
with the part of their runtime that falls after it.

Bad rows (wrong column count, non-numeric or out-of-range fields, unknown event codes, a time
earlier than the row before it in the same table, a REMOVE or UPDATE of a machine not in the
cluster, an ADD of one already in it) are skipped and reported as `BadRow`s (file and line) to
`on_bad_row`, or refused with a `TraceError` naming file:line when ``strict=True``. They are
never used. A table with bad rows and no good one is a `TraceError` either way: nothing of it
would be replayed. The library prints nothing.

Cost: task_events is read twice (runtimes need look-ahead: the first pass computes each kept
task's runtime and end, the second streams the items), machine_events once, into memory (tens
of thousands of rows in the 2011 trace). Memory holds one small record (about half a kilobyte)
per kept task until the replay ends: subsample a full trace (tens of millions of tasks) before
replaying it.
"""

from __future__ import annotations

import enum
import functools
import gzip
import hashlib
import heapq
import math
import re
import zlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import IO, NamedTuple, TypeVar

from firmament_py.model.events import (
    MachineAdded,
    MachineRemoved,
    MachineUpdated,
    TaskRemoved,
    TaskSubmitted,
    TaskUpdated,
)
from firmament_py.model.ids import INT64_MAX, JobId, MachineId, TaskId, Time
from firmament_py.model.resources import Resources
from firmament_py.sim.workload import TaskArrival, WorkloadItem

__all__ = [
    "TASK_INDEX_BITS",
    "WINDOW_OPENS",
    "BadRow",
    "MachineEvent",
    "TaskEvent",
    "TraceError",
    "TraceScale",
    "keep_by_hash",
    "read_google_trace",
    "split_task_id",
    "trace_task_id",
]

AFTER_TRACE: Time = INT64_MAX
"""The trace's timestamp for events after its window."""

WINDOW_OPENS: Time = 600_000_000
"""Where the 2011 trace's window opens (600 s): before it, only the cluster as it was then (the
rows at time 0). A replay starts here by default."""

TASK_INDEX_BITS = 20
"""A TaskId is ``job_id << TASK_INDEX_BITS | task_index``."""
_MAX_JOB_ID = 2 ** (63 - TASK_INDEX_BITS) - 1
_MAX_TASK_INDEX = 2**TASK_INDEX_BITS - 1

MAX_NORMALISED = 1024.0
"""The largest normalised value accepted (the trace's are at most about 1): with a `TraceScale`
field at most MAX_SCALE, every converted value fits in int64."""
MAX_SCALE = 2**52

MACHINE_EVENT_COLUMNS = 6
TASK_EVENT_COLUMNS = 13


class MachineEvent(enum.IntEnum):
    """The event types of machine_events."""

    ADD = 0
    REMOVE = 1
    UPDATE = 2


class TaskEvent(enum.IntEnum):
    """The event types of task_events (job_events uses the same codes)."""

    SUBMIT = 0
    SCHEDULE = 1
    EVICT = 2
    FAIL = 3
    FINISH = 4
    KILL = 5
    LOST = 6
    UPDATE_PENDING = 7
    UPDATE_RUNNING = 8


_RUN_ENDS = frozenset(
    {TaskEvent.EVICT, TaskEvent.FAIL, TaskEvent.FINISH, TaskEvent.KILL, TaskEvent.LOST}
)
_UPDATES = frozenset({TaskEvent.UPDATE_PENDING, TaskEvent.UPDATE_RUNNING})


class TraceError(ValueError):
    """A trace that cannot be read: a missing table, or (with ``strict=True``) a bad row, whose
    file and line the message names and `path` and `line` hold."""

    def __init__(self, message: str, path: str | None = None, line: int | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.line = line


@dataclass(frozen=True, slots=True)
class BadRow:
    """A row the reader skipped: where it is, why, and its text."""

    path: str
    line: int
    reason: str
    text: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.reason}: {self.text!r}"


@dataclass(frozen=True, slots=True)
class TraceScale:
    """What a normalised value of 1.0 stands for: the largest machine of the trace.

    The defaults are Firmament's simulator's (google_trace_loader.cc: ``sim_machine_max_cores``
    12, ``sim_machine_max_ram`` 65536 MB), the machines of the paper's testbed. The trace gives
    no machine disk capacity, and Firmament models no disk: with `disk_bytes` 0 disk is ignored;
    otherwise every machine gets `disk_bytes` and tasks their share of it.
    """

    cpu_millicores: int = 12_000
    ram_bytes: int = 64 * 2**30
    disk_bytes: int = 0

    def __post_init__(self) -> None:
        for name in ("cpu_millicores", "ram_bytes", "disk_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"TraceScale.{name} must be an int, got {value!r}")
            if not 0 <= value <= MAX_SCALE:
                raise ValueError(f"TraceScale.{name} must lie in [0, 2**52], got {value}")

    def resources(self, cpu: float, ram: float, disk: float = 0.0) -> Resources:
        """The `Resources` of normalised CPU, memory and disk values."""
        return Resources(
            cpu_millicores=round(cpu * self.cpu_millicores),
            ram_bytes=round(ram * self.ram_bytes),
            disk_bytes=round(disk * self.disk_bytes),
        )


def trace_task_id(job_id: int, task_index: int) -> TaskId:
    """The TaskId of the trace's task `task_index` of job `job_id` (limits in the module doc)."""
    if not (0 <= job_id <= _MAX_JOB_ID and 0 <= task_index <= _MAX_TASK_INDEX):
        raise ValueError(
            f"job {job_id} task {task_index}: task ids need job ids below 2**"
            f"{63 - TASK_INDEX_BITS} and task indices below 2**{TASK_INDEX_BITS}"
        )
    return job_id << TASK_INDEX_BITS | task_index


def split_task_id(task_id: TaskId) -> tuple[int, int]:
    """The trace's (job ID, task index) of a TaskId made by `trace_task_id`."""
    return task_id >> TASK_INDEX_BITS, task_id & _MAX_TASK_INDEX


def keep_by_hash(identifier: str, fraction: float) -> bool:
    """True if a trace entity with this id is in a `fraction` subsample: its 64-bit BLAKE2b
    hash, as a share of 2**64, is below `fraction`. Stable everywhere (unlike `hash()`), and
    monotone: what a fraction keeps, every larger fraction keeps too."""
    if fraction >= 1.0:
        return True
    digest = hashlib.blake2b(identifier.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") < fraction * 2.0**64


# ---------------------------------------------------------------------- parsing rows


class _Bad(Exception):
    """Why a row is bad (caught where the row's file and line are known)."""


class _MachineRow(NamedTuple):
    time: Time
    machine_id: int
    event: MachineEvent
    platform: str
    cpu: float | None
    ram: float | None


class _TaskRow(NamedTuple):
    time: Time
    job_id: int
    task_index: int
    event: TaskEvent
    scheduling_class: str
    priority: int
    cpu: float | None
    ram: float | None
    disk: float | None


def _int(text: str, what: str, high: int = INT64_MAX) -> int:
    if not text.isascii() or not text.isdigit():
        raise _Bad(f"{what} must be a non-negative integer, got {text!r}")
    value = int(text)
    if value > high:
        raise _Bad(f"{what} must be at most {high}, got {value}")
    return value


def _optional_int(text: str, what: str, high: int = INT64_MAX) -> int | None:
    return None if text == "" else _int(text, what, high)


_Code = TypeVar("_Code", MachineEvent, TaskEvent)


def _event(text: str, codes: type[_Code]) -> _Code:
    if text.isascii() and text.isdigit():
        try:
            return codes(int(text))
        except ValueError:
            pass
    raise _Bad(f"unknown {codes.__name__} type {text!r}")


def _normalised(text: str, what: str) -> float | None:
    if text == "":
        return None
    try:
        value = float(text)
    except ValueError:
        raise _Bad(f"{what} must be a number, got {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise _Bad(f"{what} must be a finite non-negative number, got {text!r}")
    if value > MAX_NORMALISED:
        raise _Bad(f"{what} must be at most {MAX_NORMALISED} (1 is the largest machine's)")
    return value


def _parse_machine_row(fields: list[str]) -> _MachineRow:
    time, machine_id, event, platform, cpu, ram = fields
    return _MachineRow(
        time=_int(time, "timestamp"),
        machine_id=_int(machine_id, "machine ID"),
        event=_event(event, MachineEvent),
        platform=platform,
        cpu=_normalised(cpu, "CPUs"),
        ram=_normalised(ram, "memory"),
    )


def _parse_task_row(fields: list[str]) -> _TaskRow:
    (time, missing, job_id, index, machine_id, event, _user, scheduling_class, priority) = fields[
        :9
    ]
    cpu, ram, disk, different_machine = fields[9:]
    _optional_int(missing, "missing info", high=2)
    _optional_int(machine_id, "machine ID")
    _optional_int(different_machine, "different-machine restriction", high=1)
    if scheduling_class != "":
        _int(scheduling_class, "scheduling class", high=3)
    return _TaskRow(
        time=_int(time, "timestamp"),
        job_id=_int(job_id, "job ID", high=_MAX_JOB_ID),
        task_index=_int(index, "task index", high=_MAX_TASK_INDEX),
        event=_event(event, TaskEvent),
        scheduling_class=scheduling_class,
        priority=_int(priority, "priority"),
        cpu=_normalised(cpu, "CPU request"),
        ram=_normalised(ram, "memory request"),
        disk=_normalised(disk, "disk space request"),
    )


class _Problems:
    """Where bad rows go: a TraceError under strict, else the caller's callback (if any)."""

    def __init__(self, strict: bool, on_bad_row: Callable[[BadRow], None] | None) -> None:
        self.strict = strict
        self.on_bad_row = on_bad_row

    def report(self, path: Path, line: int, reason: str, text: str) -> None:
        bad = BadRow(str(path), line, reason, text)
        if self.strict:
            raise TraceError(str(bad), bad.path, bad.line)
        if self.on_bad_row is not None:
            self.on_bad_row(bad)


_SILENT = _Problems(strict=False, on_bad_row=None)
"""For the second pass over task_events, whose bad rows the first pass has reported."""


def _open_text(path: Path) -> IO[str]:
    if path.name.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8", newline="")
    return path.open("r", encoding="utf-8", newline="")


def _lines(path: Path) -> Iterator[str]:
    """The lines of one part file; TraceError naming it if it is not UTF-8 text (gzipped, for
    a `.gz`): a whole file that cannot be read is no bad row to skip."""
    try:
        with _open_text(path) as stream:
            yield from stream
    except (UnicodeDecodeError, gzip.BadGzipFile, EOFError, zlib.error) as error:
        kind = "gzipped UTF-8 text" if path.name.endswith(".gz") else "UTF-8 text"
        raise TraceError(f"{path}: not {kind}: {error}", str(path)) from None


_Row = TypeVar("_Row", _MachineRow, _TaskRow)


def _read_table(
    files: list[Path],
    columns: int,
    parse: Callable[[list[str]], _Row],
    problems: _Problems,
    end: Time,
) -> Iterator[tuple[_Row, Path, int, str]]:
    """The good rows of one table in file order, with their file, line number and text, up to
    the first row later than `end` (the files are consecutive in time, so none after it is
    earlier). A row earlier than the good row before it is bad. A table with bad rows and no
    good one is a TraceError: there is nothing of it to replay, which is no run to report."""
    last: Time = 0
    first_bad: BadRow | None = None
    any_good = False
    for path in files:
        for number, raw in enumerate(_lines(path), start=1):
            text = raw.rstrip("\r\n")
            fields = text.split(",")
            try:
                if len(fields) != columns:
                    raise _Bad(f"expected {columns} columns, found {len(fields)}")
                row = parse(fields)
                if row.time < last:
                    raise _Bad(f"time {row.time} is earlier than the row before it ({last})")
            except _Bad as bad:
                first_bad = first_bad or BadRow(str(path), number, str(bad), text)
                problems.report(path, number, str(bad), text)
                continue
            any_good = True
            if row.time > end:
                return
            last = row.time
            yield row, path, number, text
    if first_bad is not None and not any_good:
        raise TraceError(
            f"{files[0].parent}: no row is usable, every one is bad; the first: {first_bad}",
            first_bad.path,
            first_bad.line,
        )


_PART = re.compile(r"part-\d+-of-\d+\.csv(\.gz)?")


def _part_files(root: Path, table: str) -> list[Path]:
    folder = root / table
    files = sorted(
        (p for p in folder.glob("part-*") if _PART.fullmatch(p.name)), key=lambda p: p.name
    )
    if not files:
        raise TraceError(f"no {table}/part-NNNNN-of-MMMMM.csv[.gz] files under {root}")
    stems = [p.name.removesuffix(".gz") for p in files]
    if len(set(stems)) != len(stems):
        raise TraceError(f"{folder} holds both a .csv and a .csv.gz of the same part")
    return files


# ---------------------------------------------------------------------- the replay


@dataclass(frozen=True)
class _Config:
    machine_files: list[Path]
    task_files: list[Path]
    machine_fraction: float
    job_fraction: float
    speedup: Fraction
    slots: int
    scale: TraceScale
    start: Time
    end: Time
    replay_kills: bool
    replay_updates: bool
    problems: _Problems

    def time(self, trace_time: Time) -> Time:
        """Where an event at `trace_time` (>= start) comes in the workload."""
        return (trace_time - self.start) * self.speedup.denominator // self.speedup.numerator

    def duration(self, microseconds: int) -> int:
        return microseconds * self.speedup.denominator // self.speedup.numerator


def read_google_trace(
    path: str | Path,
    *,
    machine_fraction: float = 1.0,
    job_fraction: float = 1.0,
    speedup: float = 1.0,
    slots_per_machine: int = 16,
    scale: TraceScale | None = None,
    strict: bool = False,
    on_bad_row: Callable[[BadRow], None] | None = None,
    start: Time | None = None,
    end: Time | None = None,
    replay_kills: bool = True,
    replay_updates: bool = False,
) -> Iterator[WorkloadItem]:
    """The workload of the 2011 Google trace under `path`, in time order (module doc: what is
    replayed, time, subsampling, bad rows, cost).

    Arguments are checked and the tables found now; the trace is read as the iterator is
    consumed (a `TraceError` under ``strict=True`` comes from the first `next`, before any item:
    the first pass reads every row the replay uses).
    """
    for name, fraction in (("machine_fraction", machine_fraction), ("job_fraction", job_fraction)):
        if not 0.0 <= fraction <= 1.0:
            raise ValueError(f"{name} must lie in [0, 1], got {fraction}")
    if not math.isfinite(speedup) or speedup <= 0:
        raise ValueError(f"speedup must be a positive number, got {speedup}")
    if isinstance(slots_per_machine, bool) or not isinstance(slots_per_machine, int):
        raise TypeError(f"slots_per_machine must be an int, got {slots_per_machine!r}")
    if slots_per_machine < 0:
        raise ValueError(f"slots_per_machine must not be negative, got {slots_per_machine}")
    window_start = 0 if start is None else start
    window_end = AFTER_TRACE - 1 if end is None else min(end, AFTER_TRACE - 1)
    if not 0 <= window_start <= window_end:
        raise ValueError(f"need 0 <= start <= end, got start={start}, end={end}")
    root = Path(path)
    config = _Config(
        machine_files=_part_files(root, "machine_events"),
        task_files=_part_files(root, "task_events"),
        machine_fraction=machine_fraction,
        job_fraction=job_fraction,
        speedup=Fraction(speedup),
        slots=slots_per_machine,
        scale=TraceScale() if scale is None else scale,
        start=window_start,
        end=window_end,
        replay_kills=replay_kills,
        replay_updates=replay_updates,
        problems=_Problems(strict, on_bad_row),
    )
    return _replay(config)


def _replay(config: _Config) -> Iterator[WorkloadItem]:
    machines = _machine_items(config)
    lives = _task_lives(config)
    tasks = _task_items(config, lives)
    # Stable: at equal times the machine events come first, so no task precedes its machines.
    yield from heapq.merge(machines, tasks, key=_item_time)


def _item_time(item: WorkloadItem) -> Time:
    return item.time


class _Sampler:
    """`keep_by_hash` with a fraction and a cache (each id is asked about many times)."""

    def __init__(self, fraction: float) -> None:
        self.fraction = fraction
        self.kept: dict[int, bool] = {}

    def __call__(self, identifier: int) -> bool:
        if self.fraction >= 1.0:
            return True
        kept = self.kept.get(identifier)
        if kept is None:
            kept = self.kept[identifier] = keep_by_hash(str(identifier), self.fraction)
        return kept


class _Machine(NamedTuple):
    """A machine in the cluster, as its last ADD or UPDATE left it."""

    capacity: Resources
    platform: str


def _machine_items(config: _Config) -> list[WorkloadItem]:
    """Every machine event of the window, in time order. Those before `start` are folded into
    one `MachineAdded` at `start` for each machine in the cluster then."""
    keep = _Sampler(config.machine_fraction)
    scale = config.scale
    present: dict[MachineId, _Machine] = {}
    items: list[WorkloadItem] = []
    window_open = False
    rows = _read_table(
        config.machine_files, MACHINE_EVENT_COLUMNS, _parse_machine_row, config.problems, config.end
    )
    for row, path, line, text in rows:
        if not keep(row.machine_id):
            continue
        if not window_open and row.time >= config.start:
            window_open = True
            items.extend(_machine_added(config, config.start, *entry) for entry in present.items())
        machine_id = str(row.machine_id)
        old = present.get(machine_id)
        if row.event is MachineEvent.ADD and old is not None:
            config.problems.report(path, line, f"machine {machine_id} is already added", text)
            continue
        if row.event is not MachineEvent.ADD and old is None:
            config.problems.report(path, line, f"machine {machine_id} is not in the cluster", text)
            continue
        time = config.time(row.time) if window_open else 0  # not used before the window
        if old is None:  # ADD; an unknown size is the largest machine's
            new = _Machine(scale.resources(_or(row.cpu, 1.0), _or(row.ram, 1.0), 1.0), row.platform)
            present[machine_id] = new
            if window_open:
                items.append(_machine_added(config, row.time, machine_id, new))
        elif row.event is MachineEvent.REMOVE:
            del present[machine_id]
            if window_open:
                items.append(MachineRemoved(time=time, machine_id=machine_id))
        else:  # UPDATE; an empty field keeps its value
            capacity = Resources(
                cpu_millicores=_scaled_or(
                    row.cpu, scale.cpu_millicores, old.capacity.cpu_millicores
                ),
                ram_bytes=_scaled_or(row.ram, scale.ram_bytes, old.capacity.ram_bytes),
                disk_bytes=old.capacity.disk_bytes,
            )
            present[machine_id] = old._replace(capacity=capacity)
            if window_open and capacity != old.capacity:
                items.append(MachineUpdated(time=time, machine_id=machine_id, capacity=capacity))
    if not window_open:
        items.extend(_machine_added(config, config.start, *entry) for entry in present.items())
    return items


def _or(value: float | None, default: float) -> float:
    return default if value is None else value


def _scaled_or(value: float | None, full: int, default: int) -> int:
    return default if value is None else round(value * full)


def _machine_added(
    config: _Config, trace_time: Time, machine_id: MachineId, machine: _Machine
) -> MachineAdded:
    return MachineAdded(
        time=config.time(trace_time),
        machine_id=machine_id,
        capacity=machine.capacity,
        slots=config.slots,
        labels={"trace/platform": machine.platform} if machine.platform else {},
    )


class _Life:
    """What the first pass learns about one kept task, and what the second has emitted."""

    __slots__ = (
        "arrived",
        "end_event",
        "ended_at",
        "job_id",
        "labels",
        "priority",
        "removed",
        "request",
        "run_time",
        "running_since",
        "submit_time",
    )

    def __init__(self, job_id: JobId) -> None:
        self.job_id = job_id
        self.submit_time: Time | None = None  # its first SUBMIT
        self.request = Resources()
        self.priority = 0
        self.labels: Mapping[str, str] = {}
        self.run_time = 0  # the runs ended so far, clipped to the window
        self.running_since: Time | None = None  # a run is open
        self.ended_at: Time | None = None  # its last run-ending event, if nothing came after
        self.end_event: TaskEvent | None = None
        self.arrived = False
        self.removed = False

    def runtime(self, config: _Config) -> int | None:
        """The TaskArrival's runtime (module doc: Runtimes, Kills)."""
        if self.ended_at is None or self.killed(config):
            return None
        return config.duration(self.run_time)

    def killed(self, config: _Config) -> bool:
        return config.replay_kills and self.end_event is TaskEvent.KILL


def _task_lives(config: _Config) -> dict[TaskId, _Life]:
    """First pass over task_events: each kept task's first submission, its requests at the
    window start, its runtime and how it ended. Tasks that ended before the window opens, and
    tasks never submitted, are left out."""
    keep = _Sampler(config.job_fraction)
    lives: dict[TaskId, _Life] = {}
    rows = _read_table(
        config.task_files, TASK_EVENT_COLUMNS, _parse_task_row, config.problems, config.end
    )
    start = config.start
    for row, _path, _line, _text in rows:
        if not keep(row.job_id):
            continue
        task_id = trace_task_id(row.job_id, row.task_index)
        life = lives.get(task_id)
        if life is None:
            life = lives[task_id] = _Life(str(row.job_id))
        if row.event is TaskEvent.SUBMIT or row.event is TaskEvent.SCHEDULE:
            if life.running_since is not None:  # its end event is missing
                life.run_time += max(0, row.time - max(life.running_since, start))
            life.running_since = row.time if row.event is TaskEvent.SCHEDULE else None
            life.ended_at = life.end_event = None
            if row.event is TaskEvent.SUBMIT and life.submit_time is None:
                life.submit_time = row.time
                life.request = _request(config, row, NO_REQUEST)
                life.priority = row.priority
                life.labels = _class_labels(row.scheduling_class)
        elif row.event in _RUN_ENDS:
            if life.running_since is not None:
                life.run_time += max(0, row.time - max(life.running_since, start))
                life.running_since = None
            life.ended_at, life.end_event = row.time, row.event
        elif row.time < start:  # an update before the window: part of the state at its start
            life.request = _request(config, row, life.request)
            life.priority = row.priority
    return {
        task_id: life
        for task_id, life in lives.items()
        if life.submit_time is not None and (life.ended_at is None or life.ended_at >= start)
    }


NO_REQUEST = Resources()


@functools.cache
def _class_labels(scheduling_class: str) -> Mapping[str, str]:
    """A task's labels, shared by all tasks of a class (there are four)."""
    return {"trace/scheduling-class": scheduling_class} if scheduling_class else {}


def _request(config: _Config, row: _TaskRow, old: Resources) -> Resources:
    """The request a row gives, each empty field keeping `old`'s value (0 at submission)."""
    scale = config.scale
    return Resources(
        cpu_millicores=_scaled_or(row.cpu, scale.cpu_millicores, old.cpu_millicores),
        ram_bytes=_scaled_or(row.ram, scale.ram_bytes, old.ram_bytes),
        disk_bytes=_scaled_or(row.disk, scale.disk_bytes, old.disk_bytes),
    )


def _arrival(config: _Config, trace_time: Time, task_id: TaskId, life: _Life) -> TaskArrival:
    return TaskArrival(
        submitted=TaskSubmitted(
            time=config.time(trace_time),
            task_id=task_id,
            job_id=life.job_id,
            request=life.request,
            priority=life.priority,
            labels=life.labels,
        ),
        runtime=life.runtime(config),
    )


def _task_items(config: _Config, lives: dict[TaskId, _Life]) -> Iterator[WorkloadItem]:
    """Second pass over task_events: arrivals, removals and updates, in time order. Tasks that
    were submitted before the window and are still alive arrive first, at its start."""
    start = config.start
    for task_id, alive in lives.items():
        if alive.submit_time is not None and alive.submit_time < start:
            alive.arrived = True
            yield _arrival(config, start, task_id, alive)
    rows = _read_table(config.task_files, TASK_EVENT_COLUMNS, _parse_task_row, _SILENT, config.end)
    for row, _path, _line, _text in rows:
        if row.time < start:
            continue
        task_id = trace_task_id(row.job_id, row.task_index)
        life = lives.get(task_id)
        if life is None:
            continue
        if row.event is TaskEvent.SUBMIT and not life.arrived:
            life.arrived = True
            yield _arrival(config, row.time, task_id, life)
        elif not life.arrived or life.removed:
            continue
        elif row.event is TaskEvent.KILL and life.killed(config) and row.time == life.ended_at:
            life.removed = True
            yield TaskRemoved(time=config.time(row.time), task_id=task_id)
        elif row.event in _UPDATES and config.replay_updates:
            request = _request(config, row, life.request)
            if request != life.request or row.priority != life.priority:
                yield TaskUpdated(
                    time=config.time(row.time),
                    task_id=task_id,
                    request=request if request != life.request else None,
                    priority=row.priority if row.priority != life.priority else None,
                )
                life.request, life.priority = request, row.priority
