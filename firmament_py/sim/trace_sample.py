"""Write a small, made-up trace in the exact format of the Google cluster-usage trace 2011.

No real sample of the trace may ship with the project, so tests and examples use this one:
`write_sample_trace(directory)` writes machine_events/, job_events/ and task_events/, each as
two gzipped part files (``part-0000N-of-00002.csv.gz``), no header, times in microseconds, the
columns and codes of the v2.1 schema (see `google_trace`). The committed sample in
``firmament_py/sim/data/google_sample/`` is its output for the default arguments; the same seed
always gives the same bytes (gzip headers carry no time or name). To write it again::

    python -m firmament_py.sim.trace_sample firmament_py/sim/data/google_sample

What it holds, like the real trace: machines added at time 0 (before the window) of a few
platforms and sizes, and later ones removed, re-added, updated and added; jobs of one task and
of many, some running since before the window (services that never end), the rest submitted
during it. Every task follows a "story" that uses the task event types: finishing, evicted and
resubmitted, failing and resubmitted, failing for good, killed while running or while pending,
lost, never scheduled, updated while pending and while running, and finishing after the window
(time 2**63 - 1). Some normalised fields are empty and a few rows carry missing info, as in the
real trace. The tasks of a job are submitted together and ask for the same resources.

Where it departs from the real trace: it is dense. The command line replays a trace from where
its window opens (600 s) for ``--duration`` seconds (600 by default), so the sample's jobs are
submitted during the window's first ten minutes (`ARRIVALS`), its machines come and go then
too, and most runs last seconds to minutes (`RUN_LENGTH`): enough work to keep ten machines of
16 slots busy, with a queue now and then, so that the default run places and completes hundreds
of tasks.

`write_sample_trace` returns what a correct reader must find (`SampleTrace`): the machines and,
for every task, its submission time, the runtime the replay should give it and when it is
removed. These come from the stories themselves, not from reading the rows back.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import math
import random
from dataclasses import dataclass
from pathlib import Path

__all__ = ["STORIES", "SampleMachine", "SampleTask", "SampleTrace", "write_sample_trace"]

SECOND = 1_000_000
WINDOW_START = 600 * SECOND
"""Where the sample's window opens, as the real trace's; events before it have time 0."""
ARRIVALS = 600 * SECOND
"""Jobs (other than services) are submitted in the window's first ten minutes."""
RUN_LENGTH = (5 * SECOND, 900 * SECOND)
"""A run lasts between these, log-uniformly: half of the runs are shorter than about a minute."""
HORIZON = WINDOW_START + 3600 * SECOND
"""No ordinary event of the sample comes later: a run that would end after it is cut short."""
AFTER_TRACE = 2**63 - 1
PARTS = 2

STORIES = (
    "finish",
    "service",
    "evict",
    "fail",
    "fail_final",
    "kill_running",
    "kill_pending",
    "lost",
    "pending",
    "update",
    "after_window",
)
"""How a task's life goes; the first jobs take them in this order, so every one occurs."""

_LATER_STORIES = ("finish",) * 8 + ("evict", "fail", "kill_running", "kill_pending", "lost")

_JOB_SIZES = (1, 1, 1, 1, 2, 2, 3, 4, 6, 10, 16, 30)
"""Tasks in a job: most jobs have one or two, a few tens (the trace's are heavy-tailed too)."""

# (CPUs, memory) of the machine kinds, normalised to the largest machine (as in the trace).
_MACHINE_KINDS = ((0.5, 0.2493), (0.5, 0.4995), (0.25, 0.2498), (0.5, 0.749), (1.0, 1.0))


@dataclass(frozen=True, slots=True)
class SampleMachine:
    """A machine of the sample: id, when it was added first, its normalised size (None where the
    row leaves the field empty)."""

    machine_id: int
    added_at: int
    cpu: float | None
    ram: float | None


@dataclass(frozen=True, slots=True)
class SampleTask:
    """One task of the sample and what a replay of it must give (google_trace's rules).

    `runtime`: with kills replayed (the default); `runtime_without_kills`: Firmament's total
    runtime, kills ending runs only. `removed_at`: the kill that removes it, if any.
    `end_time`: its last event in the trace window (None: still pending or running when the
    window closes). `runs`: its runs, as (SCHEDULE time, time the run ended).
    """

    job_id: int
    task_index: int
    story: str
    submit_time: int
    runtime: int | None
    runtime_without_kills: int | None
    removed_at: int | None
    end_time: int | None
    runs: tuple[tuple[int, int], ...]


@dataclass(frozen=True, slots=True)
class SampleTrace:
    """What `write_sample_trace` wrote, for checking a reader against."""

    directory: Path
    machines: tuple[SampleMachine, ...]
    removed_for_good: tuple[int, ...]
    """Machines removed and never added again."""
    machine_updates: int
    """UPDATE rows that change a machine's size."""
    tasks: tuple[SampleTask, ...]


def write_sample_trace(
    directory: str | Path, *, machines: int = 10, jobs: int = 80, seed: int = 0
) -> SampleTrace:
    """Write a sample trace of `machines` machines (at least 5) and `jobs` jobs (at least one
    per story) under `directory` (created if missing; existing part files are overwritten)."""
    if machines < 5 or jobs < len(STORIES):
        raise ValueError(f"need at least 5 machines and {len(STORIES)} jobs")
    sample = _Sample(random.Random(seed))
    sample.add_machines(machines)
    for number in range(jobs):
        story = STORIES[number] if number < len(STORIES) else sample.rng.choice(_LATER_STORIES)
        sample.add_job(story)
    root = Path(directory)
    _write_table(root / "machine_events", sample.machine_rows)
    _write_table(root / "job_events", sample.job_rows)
    _write_table(root / "task_events", sample.task_rows)
    return SampleTrace(
        directory=root,
        machines=tuple(sample.machines),
        removed_for_good=tuple(sample.removed_for_good),
        machine_updates=sample.machine_updates,
        tasks=tuple(sample.tasks),
    )


def _token(rng: random.Random) -> str:
    """An opaque hashed name, as the trace gives users, platforms and job names."""
    return base64.b64encode(hashlib.sha256(rng.randbytes(16)).digest()).decode()


def _number(value: float | None) -> str:
    """A normalised value as the trace writes it ("1", "0.2493"; empty when unknown)."""
    return "" if value is None else f"{value:g}"


class _Sample:
    """The sample being built: rows as (time, order, text), and what a reader must find."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.machine_rows: list[tuple[int, int, str]] = []
        self.job_rows: list[tuple[int, int, str]] = []
        self.task_rows: list[tuple[int, int, str]] = []
        self.machines: list[SampleMachine] = []
        self.removed_for_good: list[int] = []
        self.machine_updates = 0
        self.absent: list[tuple[int, int, int]] = []  # (machine, from, to): not in the cluster
        self.tasks: list[SampleTask] = []
        self.next_job_id = 6_250_000_000 + rng.randrange(10_000_000)
        self.order = 0

    # ------------------------------------------------------------------ machines

    def machine_row(self, time: int, machine: int, event: int, fields: str) -> None:
        self.order += 1
        self.machine_rows.append((time, self.order, f"{time},{machine},{event},{fields}"))

    def add_machines(self, count: int) -> None:
        rng = self.rng
        platforms = [_token(rng) for _ in range(3)]
        ids = sorted(rng.sample(range(1, 6_500_000_000), count + 1))
        for machine in ids[:count]:
            cpu, ram = rng.choice(_MACHINE_KINDS)
            self.machines.append(SampleMachine(machine, 0, cpu, ram))
            self.machine_row(
                0, machine, 0, f"{rng.choice(platforms)},{_number(cpu)},{_number(ram)}"
            )
        # In the first ten minutes of the window: one machine joins late with its memory unknown
        # (an empty field: the reader takes the largest machine's), one leaves for a while, two
        # change size, one leaves for good.
        first, second, third, fourth = (m.machine_id for m in self.machines[1:5])
        joins, away, back = self.at(60) + 7, self.at(180) + 17, self.at(360) + 5
        late = ids[count]
        self.machines.append(SampleMachine(late, joins, 0.5, None))
        self.machine_row(joins, late, 0, f"{platforms[2]},0.5,")
        self.absent.append((late, 0, joins))
        self.machine_row(away, first, 1, ",,")
        self.machine_row(back, first, 0, f"{platforms[0]},{_number(self.machines[1].cpu)},0.2493")
        self.absent.append((first, away, back))
        self.machine_row(self.at(240) + 11, third, 2, f"{platforms[1]},0.5,0.4995")
        self.machine_row(self.at(420) + 13, fourth, 2, f"{platforms[1]},,0.749")
        self.machine_updates = 2
        gone = self.at(540) + 3
        self.machine_row(gone, second, 1, ",,")
        self.absent.append((second, gone, AFTER_TRACE))
        self.removed_for_good.append(second)

    @staticmethod
    def at(seconds: int) -> int:
        """The trace time `seconds` into the window."""
        return WINDOW_START + seconds * SECOND

    def machine_for(self, start: int, end: int) -> int:
        """A machine in the cluster from `start` to `end`."""
        candidates = [
            m.machine_id
            for m in self.machines
            if not any(
                machine == m.machine_id and begin < end and start < until
                for machine, begin, until in self.absent
            )
        ]
        return self.rng.choice(candidates)

    # ------------------------------------------------------------------ jobs and tasks

    def add_job(self, story: str) -> None:
        rng = self.rng
        job = self.next_job_id
        self.next_job_id += rng.randrange(1, 5_000_000)
        user, name = _token(rng), _token(rng)
        if story == "service":
            submit, priority, tasks = 0, rng.choice((9, 10)), rng.choice((1, 3))
        else:
            submit = WINDOW_START + rng.randrange(ARRIVALS)
            priority, tasks = rng.choice((0, 1, 2, 4, 9)), rng.choice(_JOB_SIZES)
        scheduling_class = rng.randrange(4)
        cpu = round(rng.uniform(0.006, 0.125), 5)
        ram = round(rng.uniform(0.001, 0.06), 5)
        disk = round(rng.uniform(0.0001, 0.002), 6)
        ends = []
        for index in range(tasks):
            # A few rows leave the memory or disk request empty, as in the trace.
            fields = (
                user,
                scheduling_class,
                priority,
                cpu,
                None if rng.random() < 0.1 else ram,
                None if rng.random() < 0.1 else disk,
            )
            # A job's tasks are submitted together: the scheduler sees them in one round.
            ends.append(self.add_task(job, index, story, submit, fields))
        self.order += 1
        common = f"{user},{scheduling_class},{name},{_token(rng)}"
        self.job_rows.append((submit, self.order, f"{submit},,{job},0,{common}"))
        finished = [end for end in ends if end is not None]
        if len(finished) == len(ends):
            last = max(finished)
            event = {"kill_running": 5, "kill_pending": 5, "fail_final": 3, "lost": 6}.get(story, 4)
            self.order += 1
            self.job_rows.append((last, self.order, f"{last},,{job},{event},{common}"))

    def task_row(
        self,
        time: int,
        job: int,
        index: int,
        machine: int | None,
        event: int,
        fields: tuple[str, int, int, float, float | None, float | None],
        missing: str = "",
    ) -> None:
        user, scheduling_class, priority, cpu, ram, disk = fields
        self.order += 1
        where = "" if machine is None else str(machine)
        restriction = "1" if index == 1 else "0"
        text = (
            f"{time},{missing},{job},{index},{where},{event},{user},{scheduling_class},"
            f"{priority},{_number(cpu)},{_number(ram)},{_number(disk)},{restriction}"
        )
        self.task_rows.append((time, self.order, text))

    def add_task(
        self,
        job: int,
        index: int,
        story: str,
        submit: int,
        fields: tuple[str, int, int, float, float | None, float | None],
    ) -> int | None:
        """Write one task's rows and record what a reader must find; return its `end_time`."""
        rng = self.rng
        runs: list[tuple[int, int]] = []

        def wait() -> int:
            return rng.randrange(SECOND // 10, 30 * SECOND)

        def run(since: int, end_event: int, missing: str = "", update: bool = False) -> int:
            """One run from SCHEDULE at `since` to `end_event` (with an UPDATE_RUNNING halfway
            if `update`); return its end."""
            shortest, longest = RUN_LENGTH
            drawn = math.exp(rng.uniform(math.log(shortest), math.log(longest)))
            length = min(round(drawn), HORIZON - SECOND - since)
            machine = self.machine_for(since, since + length)
            self.task_row(since, job, index, machine, 1, fields, missing)
            if update:
                self.task_row(since + length // 2, job, index, machine, 8, fields)
            self.task_row(since + length, job, index, machine, end_event, fields)
            runs.append((since, since + length))
            return since + length

        def expect(
            runtime: int | None, without_kills: int | None, removed: int | None, end: int | None
        ) -> int | None:
            self.tasks.append(
                SampleTask(
                    job, index, story, submit, runtime, without_kills, removed, end, tuple(runs)
                )
            )
            return end

        self.task_row(submit, job, index, None, 0, fields, "2" if story == "service" else "")
        if story == "service":  # running since before the window, never ending
            self.task_row(0, job, index, self.machine_for(0, AFTER_TRACE), 1, fields)
            return expect(None, None, None, None)
        if story == "pending":  # never scheduled; its priority drops while it waits
            self.task_row(submit + wait(), job, index, None, 7, (*fields[:2], 0, *fields[3:]))
            return expect(None, None, None, None)
        if story == "kill_pending":
            killed = submit + wait()
            self.task_row(killed, job, index, None, 5, fields)
            return expect(None, 0, killed, killed)
        start = submit + wait()
        if story == "after_window":  # finishes after the trace window
            machine = self.machine_for(start, AFTER_TRACE)
            self.task_row(start, job, index, machine, 1, fields)
            self.task_row(AFTER_TRACE, job, index, machine, 4, fields)
            return expect(None, None, None, None)
        if story == "update":  # asks for twice the CPU before it is scheduled
            fields = (*fields[:3], round(fields[3] * 2, 5), *fields[4:])
            self.task_row(start - 1, job, index, None, 7, fields)
            end = run(start, 4, update=True)
            return expect(end - start, end - start, None, end)
        single = {"finish": 4, "fail_final": 3, "kill_running": 5, "lost": 6}
        if story in single:
            end = run(start, single[story], "0" if story == "lost" else "")
            if story == "kill_running":
                return expect(None, end - start, end, end)
            return expect(end - start, end - start, None, end)
        # evict / fail: a run ends, the task is resubmitted, runs again and finishes
        first_end = run(start, 2 if story == "evict" else 3)
        again = first_end + rng.randrange(SECOND)
        self.task_row(again, job, index, None, 0, fields)
        second_start = again + wait()
        end = run(second_start, 4)
        total = (first_end - start) + (end - second_start)
        return expect(total, total, None, end)


def _write_table(folder: Path, rows: list[tuple[int, int, str]]) -> None:
    """Rows in time order (ties in the order written), split into `PARTS` gzipped part files."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = sorted(rows)
    size = -(-len(rows) // PARTS)
    for part in range(PARTS):
        text = "".join(row + "\n" for _, _, row in rows[part * size : (part + 1) * size])
        path = folder / f"part-{part:05d}-of-{PARTS:05d}.csv.gz"
        with (
            path.open("wb") as raw,
            gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as packed,
        ):
            packed.write(text.encode())


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(
        description="Write the sample trace (the committed one with the default arguments)."
    )
    parser.add_argument("directory", help="where machine_events/, job_events/, ... go")
    write_sample_trace(parser.parse_args().directory)
