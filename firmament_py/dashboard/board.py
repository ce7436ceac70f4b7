"""What the dashboard shows, kept up to date from facts a driver reports (`Board`), and read as
one consistent picture at a time (`Board.frame`).

A driver (the daemon's follower, the simulator's observer) tells the board what happened, in the
board's own small vocabulary: machines joined or left, a task was submitted, placed, moved,
returned to the queue or ended, a round ran. The board keeps only what the page draws: the
machines with their racks, pods, slots and running tasks; when each waiting task began to
wait; bounded histories of the queue, of placement latencies and of the rounds. The page reads
a `Frame`, built under the board's lock, so a driver's thread and the page's never see each
other's half-made changes. The board does no I/O.

Placement latency is the time from when a task began to wait (its submission, or its return to
the queue after a preemption or its machine's loss) to the placement that ended the wait, as the
simulator's `TaskRecord.placement_latency` counts a task's first wait. Times are the source's
microseconds (simulated time in the simulator, the daemon's clock for the daemon); the page
shows seconds since the first time the board saw.
"""

from __future__ import annotations

import threading
from collections import Counter, deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

__all__ = ["Board", "Frame", "MachineRow", "RoundFacts"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

PHASES = ("update", "solve", "extract", "apply")
"""A round's phases, in order: graph update, solve, extraction, applying the decisions."""

CDF_POINTS = 400
"""The latency CDF is drawn through at most this many quantiles (exact at both ends)."""


@dataclass(frozen=True, slots=True)
class MachineRow:
    """A machine as a driver reports it."""

    machine_id: str
    rack_id: str
    pod_id: str
    slots: int


@dataclass(frozen=True, slots=True)
class RoundFacts:
    """One round as a driver reports it: `phases` maps each of `PHASES` to milliseconds (a
    phase the driver cannot tell is absent); `algorithm` is the solver's name for what
    answered (`race:relaxation` when a race's relaxation won); `algorithm_ms` the winning
    algorithm's own time and `answer_ms` the time until the solver answered (for a race, its
    winner's time plus the race's own work: shipping the changes, the answer's way back)."""

    number: int
    time: int
    algorithm: str
    phases: Mapping[str, float]
    algorithm_ms: float
    answer_ms: float
    decisions: int


@dataclass(frozen=True)
class Frame:
    """Everything the page draws, as of one moment (see the module)."""

    title: str
    seq: int
    """The last journal record the board followed (the daemon), or events handled (simulator)."""
    seq_label: str
    machines: int
    slots: int
    waiting: int
    running: int
    rounds: int
    events_per_s: float
    decisions_per_s: float
    layout: int
    """Changes whenever the set of machines or their order changes (the page redraws the heat
    map whole then, and patches what changed otherwise)."""
    machine_ids: list[str]
    racks: list[tuple[str, str]]
    """Each machine's (pod, rack), the heat map's rows."""
    columns: IntArray
    """Each machine's position in its rack."""
    machine_slots: IntArray
    machine_running: IntArray
    latency_ms: FloatArray
    """The CDF's x values (ms); `latency_fraction` its y values."""
    latency_fraction: FloatArray
    latency_samples: int
    latency_p50_ms: float | None
    latency_p99_ms: float | None
    queue_time_s: FloatArray
    queue_waiting: IntArray
    queue_running: IntArray
    percentile_time_s: FloatArray
    percentiles_ms: dict[str, FloatArray]
    """p50, p90, p99 of each round's placements, at `percentile_time_s`."""
    recent_rounds: list[RoundFacts]
    wins: dict[str, int]
    """Rounds answered per algorithm (a race's winners by name)."""


@dataclass
class _Machine:
    rack_id: str
    pod_id: str
    slots: int
    running: int = 0


@dataclass
class _Series:
    """A history that keeps the whole run in fewer than `limit` points: it keeps every
    `stride`-th point and the newest; when full, every other kept point goes and the stride
    doubles, so a long run keeps its shape, evenly, at a coarser resolution."""

    limit: int
    points: list[tuple[float, ...]] = field(default_factory=list)
    newest: tuple[float, ...] | None = None  # the last point, when the stride skips it
    stride: int = 1
    count: int = 0

    def add(self, point: tuple[float, ...]) -> None:
        if self.count % self.stride:
            self.newest = point
        else:
            self.points.append(point)
            self.newest = None
            if len(self.points) >= self.limit - 1:
                del self.points[1::2]
                self.stride *= 2
        self.count += 1

    def columns(self, width: int) -> list[FloatArray]:
        points = self.points if self.newest is None else [*self.points, self.newest]
        if not points:
            return [np.zeros(0) for _ in range(width)]
        table = np.asarray(points, dtype=np.float64)
        return [table[:, i] for i in range(width)]


class Board:
    """The dashboard's state (see the module). Every method is safe to call from any thread."""

    def __init__(
        self,
        title: str,
        *,
        seq_label: str = "journal record",
        latency_window: int = 20_000,
        history: int = 4_000,
        rounds_kept: int = 120,
        rate_window_us: int = 10_000_000,
    ) -> None:
        self._lock = threading.Lock()
        self._title = title
        self._seq_label = seq_label
        self._latency_window = latency_window
        self._history = history
        self._rounds_kept = rounds_kept
        self._rate_window_us = rate_window_us
        self._layout = 0
        self._clear()

    def _clear(self) -> None:
        self._seq = 0
        self._machines: dict[str, _Machine] = {}
        self._task_machine: dict[int, str | None] = {}  # None: waiting
        self._waiting_since: dict[int, int] = {}
        self._running = 0
        self._latencies: deque[float] = deque(maxlen=self._latency_window)
        self._round_latencies: list[float] = []
        self._queue = _Series(self._history)
        self._percentiles = _Series(self._history)
        self._rounds: deque[RoundFacts] = deque(maxlen=self._rounds_kept)
        self._round_count = 0
        self._wins: dict[str, int] = {}
        self._events = 0
        self._decisions = 0
        self._rates: deque[tuple[int, int, int]] = deque()  # (time, events, decisions) by round
        self._origin: int | None = None
        self._now = 0
        self._layout_cache: tuple[list[str], list[tuple[str, str]], IntArray] | None = None

    # ------------------------------------------------------------------ facts

    def reset(self) -> None:
        """Forget everything but the title: the driver starts over (a follower listing again)."""
        with self._lock:
            self._clear()

    def set_title(self, title: str) -> None:
        with self._lock:
            self._title = title

    def set_seq(self, seq: int) -> None:
        """The last journal record (or event) the driver has reported."""
        with self._lock:
            self._seq = seq

    def machines_added(self, rows: Iterable[MachineRow]) -> None:
        """Machines joined (a machine already known is updated). A machine's running count is
        always that of the tasks the board has on it, whatever order a listing came in."""
        with self._lock:
            counts: Counter[str | None] | None = None
            for row in rows:
                known = self._machines.get(row.machine_id)
                if known is not None and (known.rack_id, known.pod_id) == (row.rack_id, row.pod_id):
                    known.slots = row.slots
                    continue
                if counts is None:
                    counts = Counter(self._task_machine.values())
                machine = _Machine(row.rack_id, row.pod_id, row.slots, counts[row.machine_id])
                self._machines[row.machine_id] = machine
                self._layout_cache = None

    def machine_slots(self, machine_id: str, slots: int) -> None:
        with self._lock:
            machine = self._machines.get(machine_id)
            if machine is not None:
                machine.slots = slots

    def machine_gone(self, machine_id: str, time: int) -> None:
        """A machine failed or was removed: it leaves, its tasks wait again from `time`."""
        with self._lock:
            if self._machines.pop(machine_id, None) is not None:
                self._layout_cache = None
            for task_id, where in self._task_machine.items():  # known or not, it runs nothing
                if where == machine_id:
                    self._task_machine[task_id] = None
                    self._waiting_since[task_id] = time
                    self._running -= 1

    def task_known(self, task_id: int, machine_id: str | None) -> None:
        """A task the board learns of from a listing: its wait's start is unknown, so its
        placement gives no latency sample."""
        with self._lock:
            if task_id in self._task_machine:
                return
            self._task_machine[task_id] = machine_id
            if machine_id is not None:
                self._count(machine_id, 1)
                self._running += 1

    def submitted(self, task_id: int, time: int) -> None:
        with self._lock:
            self._tick(time)
            if task_id not in self._task_machine:  # (not a listed task's record replayed)
                self._events += 1
                self._task_machine[task_id] = None
                self._waiting_since[task_id] = time

    def placed(self, task_id: int, machine_id: str, time: int) -> None:
        """The task runs on `machine_id` from `time`, or moved there (a migration)."""
        with self._lock:
            self._tick(time)
            self._decisions += 1
            where = self._task_machine.get(task_id, None)
            if where is not None:  # a migration, or a placement the board saw already
                self._count(where, -1)
                self._running -= 1
            self._task_machine[task_id] = machine_id
            self._count(machine_id, 1)
            self._running += 1
            since = self._waiting_since.pop(task_id, None)
            if since is not None and where is None:
                latency = (time - since) / 1_000.0
                self._latencies.append(latency)
                self._round_latencies.append(latency)

    def unplaced(self, task_id: int, time: int, *, decision: bool = True) -> None:
        """The task waits again from `time` (preempted, evicted, its lease expired)."""
        with self._lock:
            self._tick(time)
            self._decisions += decision
            where = self._task_machine.get(task_id)
            if where is None and task_id in self._task_machine:
                return  # waiting already
            if where is not None:
                self._count(where, -1)
                self._running -= 1
            self._task_machine[task_id] = None  # (one the board missed: it waits now)
            self._waiting_since[task_id] = time

    def ended(self, task_id: int, time: int) -> None:
        """The task completed, failed or was removed."""
        with self._lock:
            self._tick(time)
            if task_id not in self._task_machine:
                return
            self._events += 1
            where = self._task_machine.pop(task_id)
            self._waiting_since.pop(task_id, None)
            if where is not None:
                self._count(where, -1)
                self._running -= 1

    def clock(self, time: int) -> None:
        """The source's time is `time` (an idle source's rates fall to zero as it passes)."""
        with self._lock:
            self._tick(time)

    def event(self, time: int) -> None:
        """Any other event the driver took (for the event rate)."""
        with self._lock:
            self._tick(time)
            self._events += 1

    def round(self, facts: RoundFacts) -> None:
        """A round ended (after its decisions were reported)."""
        with self._lock:
            self._tick(facts.time)
            self._round_count += 1
            self._rounds.append(facts)
            winner = facts.algorithm.removeprefix("race:")
            self._wins[winner] = self._wins.get(winner, 0) + 1
            at = self._seconds(facts.time)
            self._queue.add((at, len(self._task_machine) - self._running, self._running))
            if self._round_latencies:
                self._percentiles.add((at, *_percentiles(self._round_latencies)))
                self._round_latencies.clear()
            self._rates.append((facts.time, self._events, self._decisions))

    # ------------------------------------------------------------------ reading

    def frame(self) -> Frame:
        """What the page draws now."""
        with self._lock:
            ids, racks, columns = self._layout_arrays()
            machines = self._machines
            slots = np.fromiter((machines[m].slots for m in ids), np.int64, len(ids))
            running = np.fromiter((machines[m].running for m in ids), np.int64, len(ids))
            latencies = np.sort(np.fromiter(self._latencies, np.float64, len(self._latencies)))
            queue = self._queue.columns(3)
            percentiles = self._percentiles.columns(4)
            events_rate, decisions_rate = self._rate()
            return Frame(
                title=self._title,
                seq=self._seq,
                seq_label=self._seq_label,
                machines=len(ids),
                slots=int(slots.sum()),
                waiting=len(self._task_machine) - self._running,
                running=self._running,
                rounds=self._round_count,
                events_per_s=events_rate,
                decisions_per_s=decisions_rate,
                layout=self._layout,
                machine_ids=ids,
                racks=racks,
                columns=columns,
                machine_slots=slots,
                machine_running=running,
                latency_ms=_cdf_x(latencies),
                latency_fraction=_cdf_y(latencies),
                latency_samples=len(latencies),
                latency_p50_ms=_quantile(latencies, 0.5),
                latency_p99_ms=_quantile(latencies, 0.99),
                queue_time_s=queue[0],
                queue_waiting=queue[1].astype(np.int64),
                queue_running=queue[2].astype(np.int64),
                percentile_time_s=percentiles[0],
                percentiles_ms={
                    "p50": percentiles[1],
                    "p90": percentiles[2],
                    "p99": percentiles[3],
                },
                recent_rounds=list(self._rounds),
                wins=dict(self._wins),
            )

    # ------------------------------------------------------------------ inside

    def _tick(self, time: int) -> None:
        if self._origin is None:
            self._origin = time
        self._now = max(self._now, time)

    def _seconds(self, time: int) -> float:
        return (time - (self._origin or 0)) / 1_000_000

    def _count(self, machine_id: str, change: int) -> None:
        machine = self._machines.get(machine_id)
        if machine is not None:
            machine.running += change

    def _rate(self) -> tuple[float, float]:
        """Events and decisions a second over the window up to the latest time seen, counted
        from the first round in the window (so an idle source's rates fall to zero)."""
        rates, start = self._rates, self._now - self._rate_window_us
        while rates and rates[0][0] < start:
            rates.popleft()
        if not rates or self._now <= rates[0][0]:
            return 0.0, 0.0
        t0, e0, d0 = rates[0]
        span = (self._now - t0) / 1_000_000
        return (self._events - e0) / span, (self._decisions - d0) / span

    def _layout_arrays(self) -> tuple[list[str], list[tuple[str, str]], IntArray]:
        """The machines in heat-map order: by pod, rack and id; each one's row and column."""
        if self._layout_cache is None:
            order = sorted(self._machines.items(), key=lambda m: (m[1].pod_id, m[1].rack_id, m[0]))
            ids = [machine_id for machine_id, _ in order]
            racks = [(m.pod_id, m.rack_id) for _, m in order]
            columns = np.zeros(len(ids), np.int64)
            for i in range(1, len(ids)):
                columns[i] = columns[i - 1] + 1 if racks[i] == racks[i - 1] else 0
            self._layout_cache = (ids, racks, columns)
            self._layout += 1
        return self._layout_cache


def _percentiles(values: list[float]) -> tuple[float, float, float]:
    """p50, p90, p99 of `values`, interpolated as numpy's default; in plain Python, since a
    round places few tasks and numpy's call costs more than the sort (a simulation runs
    thousands of rounds)."""
    ordered = sorted(values)
    last = len(ordered) - 1
    picked = []
    for q in (0.5, 0.9, 0.99):
        position = last * q
        low = int(position)
        high = min(low + 1, last)
        picked.append(ordered[low] + (ordered[high] - ordered[low]) * (position - low))
    return picked[0], picked[1], picked[2]


def _cdf_x(latencies: FloatArray) -> FloatArray:
    if len(latencies) <= CDF_POINTS:
        return latencies
    picks = np.linspace(0, len(latencies) - 1, CDF_POINTS).round().astype(np.int64)
    return latencies[picks]


def _cdf_y(latencies: FloatArray) -> FloatArray:
    count = len(latencies)
    if count <= CDF_POINTS:
        return np.arange(1, count + 1, dtype=np.float64) / max(count, 1)
    picks = np.linspace(0, count - 1, CDF_POINTS).round()
    return (picks + 1) / count


def _quantile(latencies: FloatArray, q: float) -> float | None:
    return float(np.quantile(latencies, q)) if len(latencies) else None
