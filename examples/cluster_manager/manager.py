"""A small external cluster manager that drives the firmament-py scheduling daemon end to end.

Firmament decides where tasks run; something else has to run them. This script is that
something else, for a cluster of a few "local machines" that are all this computer: it

1. registers the machines with the daemon (`node_added`), each with a number of slots;
2. submits a few jobs of several tasks each (`task_submitted`); every task is a short real
   command (a Python one-liner that sleeps, or counts primes, and one per failing job that
   exits with status 3 on purpose);
3. asks the daemon for a round (`schedule`) whenever something changed, and applies the
   round's deltas: a PLACE starts the task as a local subprocess "on" its machine (its own
   working directory and log file, `FIRMAMENT_MACHINE` in its environment), a PREEMPT
   terminates the process (the daemon has re-queued the task, and a later round places it
   again), a MIGRATE terminates it and starts it afresh on the new machine;
4. watches the processes and reports each exit back: status 0 as `task_completed`, anything
   else as `task_failed` with the exit status and the last line the task printed; a process
   this manager terminated itself (preempted, migrated) is not reported;
5. loops until every task completed or failed, then prints a summary and the daemon's status.

The daemon must be the manager's alone to drive: it must not schedule on its own
(`--auto-schedule-ms`) nor take `schedule` requests from anyone else, because a round's
deltas go only to the clients whose `schedule` request it answers (a round that ran without
this manager shows as a gap in the round numbers, and the manager says so).

Run it against a daemon::

    firmament-py serve --bind tcp://127.0.0.1:7100 --journal /tmp/journal --policy load-spreading
    python examples/cluster_manager/manager.py --daemon tcp://127.0.0.1:7100

or let it start one of its own, in a thread, on a temporary journal::

    python examples/cluster_manager/manager.py --spawn-daemon [--policy NAME]

Exit status 0 when every task ended as it was meant to (completed, or failed for the tasks
that fail on purpose), 1 otherwise (or when the daemon cannot be reached), 2 for bad
arguments. `ClusterManager`, `demo_machines`, `demo_jobs`,
`locality_machines`, `locality_jobs`, `spawned_daemon` and `main` are the API the tests use.
"""

from __future__ import annotations

import argparse
import contextlib
import enum
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TextIO

from firmament_py.flow.placement import DeltaKind
from firmament_py.model.resources import Resources
from firmament_py.scheduler.decisions import Decision
from firmament_py.service import (
    Client,
    DaemonConfig,
    DaemonTimeout,
    ListedTask,
    MachineSpec,
    RequestFailed,
    RoundReply,
    SchedulingDaemon,
    Status,
)

__all__ = [
    "ClusterManager",
    "DaemonAPI",
    "JobSpec",
    "Outcome",
    "RunSummary",
    "TaskRun",
    "TaskSpec",
    "demo_jobs",
    "demo_machines",
    "locality_jobs",
    "locality_machines",
    "main",
    "spawned_daemon",
]

GIB = 1 << 30


class DaemonAPI(Protocol):
    """The requests the manager makes: `firmament_py.service.Client` has them all."""

    def add_machines(self, machines: Iterable[MachineSpec]) -> int:
        """Register machines."""

    def submit_task(
        self,
        task_id: int,
        job_id: str,
        *,
        request: Resources | None = None,
        priority: int = 0,
        labels: Mapping[str, str] | None = None,
        selectors: Iterable[Mapping[str, Any]] = (),
    ) -> int:
        """Submit a task."""

    def complete_task(self, task_id: int) -> int:
        """Report a task that exited 0."""

    def fail_task(self, task_id: int, reason: str = "") -> int:
        """Report a task that failed."""

    def remove_task(self, task_id: int) -> int:
        """Withdraw a task."""

    def register(self, manager: str) -> int:
        """Take over as the daemon's one manager: writes of any earlier one are refused."""

    def confirm_task(self, task_id: int, machine_id: str | None = None) -> int:
        """Say a placed task started on `machine_id` (under a daemon run with --lease-ms)."""

    def schedule(self) -> RoundReply:
        """Run a round and return its deltas."""

    def round(self, round_id: int) -> RoundReply:
        """A past round's answer, by its number."""

    def status(self) -> dict[str, Any]:
        """The daemon's health and counts."""

    def tasks(self) -> Iterator[ListedTask]:
        """Every task the daemon knows, in id order, with its state."""


# ---------------------------------------------------------------------- what to run


@dataclass(frozen=True)
class TaskSpec:
    """One task: its command, what it asks for, and whether it is meant to succeed."""

    task_id: int
    job_id: str
    argv: tuple[str, ...]
    request: Resources
    expect_success: bool = True
    description: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class JobSpec:
    """A job: its tasks, and when it arrives: `submit_after` seconds after the run starts, and
    not before every task of job `wait_for` (if any) has started."""

    job_id: str
    tasks: tuple[TaskSpec, ...]
    submit_after: float = 0.0
    wait_for: str | None = None


def _python(code: str) -> tuple[str, ...]:
    return (sys.executable, "-c", code)


def demo_machines(count: int, slots: int) -> list[MachineSpec]:
    """`count` local machines `local-0`... with `slots` slots and room for a task per slot."""
    return [
        MachineSpec(
            machine_id=f"local-{index}",
            capacity=Resources(cpu_millicores=1_000 * slots, ram_bytes=slots * GIB),
            slots=slots,
            rack_id="this-computer",
            labels={"kind": "local"},
        )
        for index in range(count)
    ]


def demo_jobs(
    jobs: int,
    tasks_per_job: int,
    *,
    failures: int = 1,
    seconds: float = 0.3,
    first_task_id: int = 1,
) -> list[JobSpec]:
    """`jobs` jobs of `tasks_per_job` tasks, ids from `first_task_id` on. Even jobs sleep
    (`seconds`, `1.5 x seconds` or `2 x seconds`), odd jobs count primes and sleep; the last
    task of each of the first `failures` jobs exits with status 3 instead."""
    if not 0 <= failures <= jobs:
        raise ValueError(f"failures must be between 0 and the number of jobs ({jobs})")
    specs = []
    task_id = first_task_id
    for job in range(jobs):
        kind = "sleep" if job % 2 == 0 else "primes"
        job_id = f"{kind}-{job}"
        tasks = []
        for index in range(tasks_per_job):
            pause = round(seconds * (1 + 0.5 * (index % 3)), 3)
            if job < failures and index == tasks_per_job - 1:
                code = (
                    f"import sys, time; time.sleep({pause / 2}); "
                    "print('error: input shard is corrupt (failing on purpose)', file=sys.stderr); "
                    "sys.exit(3)"
                )
                description, expect_success = "exits with status 3", False
            elif kind == "sleep":
                code = f"import time; time.sleep({pause})"
                description, expect_success = f"sleeps {pause}s", True
            else:
                limit = 5_000 * (index + 1)
                code = (
                    f"import time; time.sleep({pause / 2}); "
                    f"print(sum(all(n % d for d in range(2, int(n ** 0.5) + 1)) "
                    f"for n in range(2, {limit})))"
                )
                description, expect_success = f"counts primes below {limit}", True
            tasks.append(
                TaskSpec(
                    task_id=task_id,
                    job_id=job_id,
                    argv=_python(code),
                    request=Resources(cpu_millicores=500, ram_bytes=GIB // 4),
                    expect_success=expect_success,
                    description=description,
                )
            )
            task_id += 1
        specs.append(JobSpec(job_id, tuple(tasks)))
    return specs


def locality_machines() -> list[MachineSpec]:
    """Two one-slot machines in one rack; `local-0` holds the data blocks `a` and `big`
    (the `quincy.blocks` label)."""
    return [
        MachineSpec(
            machine_id=f"local-{index}",
            capacity=Resources(cpu_millicores=1_000, ram_bytes=GIB),
            slots=1,
            rack_id="this-computer",
            labels={"quincy.blocks": "a,big"} if index == 0 else {},
        )
        for index in range(2)
    ]


def locality_jobs(first_task_id: int = 1, seconds: float = 5.0) -> list[JobSpec]:
    """For the quincy policy on `locality_machines`: task `first_task_id` (job `small`) reads
    1 MiB of block `a`, so it goes to `local-0`, and runs `seconds`. Once it runs, job `big`
    arrives: its task reads 2 GiB of block `big`, also only on `local-0`, which is full. It
    waits for `local-0` until waiting costs more than reading the block across the rack (about
    4 s at quincy's 512 per second against 2,048), then starts on `local-1`; when `small`
    finishes, `local-0` is free and moving there saves more than the ~1 s of work the move
    throws away (quincy credits 1,024 a second of running), so the daemon MIGRATEs it."""
    request = Resources(cpu_millicores=500, ram_bytes=GIB // 4)
    small = TaskSpec(
        task_id=first_task_id,
        job_id="small",
        argv=_python(f"import time; time.sleep({seconds})"),
        request=request,
        description=f"reads 1 MiB of block a, sleeps {seconds}s",
        labels={"quincy.input": f"a:{1 << 20}"},
    )
    big = TaskSpec(
        task_id=first_task_id + 1,
        job_id="big",
        argv=_python("import time; time.sleep(1.5)"),
        request=request,
        description="reads 2 GiB of block big, sleeps 1.5s",
        labels={"quincy.input": f"big:{2 * GIB}"},
    )
    return [JobSpec("small", (small,)), JobSpec("big", (big,), wait_for="small")]


# ---------------------------------------------------------------------- running it


class Outcome(enum.Enum):
    """Where a task is, as the manager sees it."""

    SUBMITTED = "submitted"
    """Waiting for the daemon to place it."""
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"


@dataclass
class TaskRun:
    """A task's life as the manager saw it."""

    spec: TaskSpec
    outcome: Outcome = Outcome.SUBMITTED
    machine: str | None = None
    process: subprocess.Popen[bytes] | None = None
    log_path: Path | None = None
    attempts: int = 0
    machines: list[str] = field(default_factory=list)
    """Every machine it was started on, in order."""
    preemptions: int = 0
    migrations: int = 0
    returncode: int | None = None
    reason: str = ""
    started: float | None = None
    """When the current (or last) attempt started (monotonic seconds)."""
    run_seconds: float = 0.0
    """Time spent running, over every attempt."""

    @property
    def finished(self) -> bool:
        return self.outcome in (Outcome.COMPLETED, Outcome.FAILED)

    @property
    def as_expected(self) -> bool:
        wanted = Outcome.COMPLETED if self.spec.expect_success else Outcome.FAILED
        return self.outcome is wanted


@dataclass
class RunSummary:
    """What a run did, and the daemon's status at its end."""

    tasks: list[TaskRun]
    machines: int
    rounds: int
    deltas: dict[DeltaKind, int]
    seconds: float
    timed_out: bool
    daemon_status: dict[str, Any]
    daemon_states: dict[int, str]
    """The state of each of this run's tasks in the daemon's view (`Client.tasks`)."""

    @property
    def ok(self) -> bool:
        return not self.timed_out and all(task.as_expected for task in self.tasks)

    @property
    def disagreements(self) -> list[str]:
        """Every task whose end the daemon sees otherwise than this manager, and why."""
        found = []
        for run in self.tasks:
            if not run.finished:
                continue  # taken back from the daemon at the end
            theirs = self.daemon_states.get(run.spec.task_id, "unknown")
            if theirs != run.outcome.value:
                found.append(f"task {run.spec.task_id}: {run.outcome.value} here, {theirs} there")
        return found

    @property
    def daemon_agrees(self) -> bool:
        """Whether the daemon saw every task end as this manager did, and has nothing waiting
        or running (true when this manager is its only client)."""
        idle = self.daemon_status.get("running") == 0 and self.daemon_status.get("waiting") == 0
        return idle and not self.disagreements


class ClusterManager:
    """Registers `machines`, submits `jobs`, and runs what the daemon places until every task
    has finished (or `timeout` seconds have passed). Processes run in `workdir/<machine>/`."""

    def __init__(
        self,
        daemon: DaemonAPI,
        machines: Sequence[MachineSpec],
        jobs: Sequence[JobSpec],
        workdir: Path,
        *,
        out: TextIO | None = None,
        round_interval: float = 0.5,
        poll_interval: float = 0.02,
        timeout: float = 120.0,
    ) -> None:
        self.daemon = daemon
        self.machines = list(machines)
        self.jobs = list(jobs)
        self.workdir = workdir
        self.out = out if out is not None else sys.stdout
        self.round_interval = round_interval
        self.poll_interval = poll_interval
        self.timeout = timeout
        self.tasks: dict[int, TaskRun] = {
            task.task_id: TaskRun(task) for job in self.jobs for task in job.tasks
        }
        self._unsubmitted = sorted(self.jobs, key=lambda job: job.submit_after)
        self.rounds = 0
        self.deltas: dict[DeltaKind, int] = {kind: 0 for kind in DeltaKind}
        self._last_round_id: int | None = None
        self._started = time.monotonic()

    # ------------------------------------------------------------------ logging

    def log(self, message: str) -> None:
        print(f"[{time.monotonic() - self._started:6.2f}s] {message}", file=self.out, flush=True)

    def _name(self, task_id: int) -> str:
        run = self.tasks.get(task_id)
        return f"task {task_id}" if run is None else f"task {task_id} ({run.spec.job_id})"

    # ------------------------------------------------------------------ the run

    def run(self) -> RunSummary:
        """Register, submit, and drive rounds until every task finished; then summarise.
        Processes still running at the end (a timeout, Ctrl-C) are killed and their tasks
        removed from the daemon."""
        self._started = time.monotonic()
        deadline = self._started + self.timeout
        timed_out = False
        try:
            epoch = self.daemon.register("examples/cluster_manager")
            self.log(f"registered as the daemon's manager: epoch {epoch}")
            self.register_machines()
            changed = True
            last_round = float("-inf")
            while self._unsubmitted or not all(run.finished for run in self.tasks.values()):
                if time.monotonic() > deadline:
                    timed_out = True
                    self.log(f"timed out after {self.timeout:g}s")
                    break
                changed |= self.submit_jobs()
                changed |= self.reap()
                if changed or time.monotonic() - last_round >= self.round_interval:
                    self.apply_round(self.daemon.schedule())
                    last_round = time.monotonic()
                    changed = False
                time.sleep(self.poll_interval)
        finally:
            self.shutdown()
        status = self.daemon.status()
        # Reconcile task by task: the daemon's view of every task, a page at a time.
        mine = set(self.tasks)
        states = {t.task_id: t.state.value for t in self.daemon.tasks() if t.task_id in mine}
        return RunSummary(
            tasks=list(self.tasks.values()),
            machines=len(self.machines),
            rounds=self.rounds,
            deltas=dict(self.deltas),
            seconds=time.monotonic() - self._started,
            timed_out=timed_out,
            daemon_status=status,
            daemon_states=states,
        )

    def register_machines(self) -> None:
        try:
            self.daemon.add_machines(self.machines)
        except RequestFailed as error:
            if error.status is not Status.ALREADY_EXISTS:
                raise
            # A daemon with a journal remembers the machines of an earlier run.
            for machine in self.machines:
                try:
                    self.daemon.add_machines([machine])
                except RequestFailed as again:
                    if again.status is not Status.ALREADY_EXISTS:
                        raise
        for machine in self.machines:
            (self.workdir / machine.machine_id).mkdir(parents=True, exist_ok=True)
        slots = sum(machine.slots for machine in self.machines)
        self.log(f"registered {len(self.machines)} machines with {slots} slots in all")

    def submit_jobs(self) -> bool:
        """Submit the jobs whose time has come; whether there were any."""
        now = time.monotonic() - self._started
        due = [
            job
            for job in self._unsubmitted
            if job.submit_after <= now and self._started_all(job.wait_for)
        ]
        self._unsubmitted = [job for job in self._unsubmitted if job not in due]
        for job in due:
            for task in job.tasks:
                self.daemon.submit_task(
                    task.task_id, task.job_id, request=task.request, labels=task.labels
                )
            ids = [task.task_id for task in job.tasks]
            self.log(f"submitted job {job.job_id}: tasks {ids[0]}-{ids[-1]}")
        return bool(due)

    def _started_all(self, job_id: str | None) -> bool:
        """Whether every task of job `job_id` has been started (true for None)."""
        if job_id is None:
            return True
        runs = [run for run in self.tasks.values() if run.spec.job_id == job_id]
        return bool(runs) and all(run.attempts > 0 for run in runs)

    # ------------------------------------------------------------------ rounds

    def apply_round(self, reply: RoundReply) -> None:
        """Obey one round's deltas (preemptions, migrations, placements: the order the daemon
        applied them in)."""
        if self._last_round_id is not None:
            for missed in range(self._last_round_id + 1, reply.round):
                self._fetch_round(missed)
        self._obey(reply)

    def _fetch_round(self, round_id: int) -> None:
        """Obey a round that ran without this manager asking (the daemon's own rounds, or
        another client's), fetched by its number; a number no round answered is skipped."""
        try:
            missed = self.daemon.round(round_id)
        except RequestFailed as error:
            if error.status is not Status.NOT_FOUND:
                raise
            if "no longer kept" in error.reason:
                self.log(f"round {round_id} ran without this manager and is lost: {error.reason}")
            return  # a round that decided nothing nobody waited for is never numbered
        self.log(f"round {round_id} ran without this manager: fetched by its number")
        self._obey(missed)

    def _obey(self, reply: RoundReply) -> None:
        self.rounds += 1
        self._last_round_id = reply.round
        if reply.deltas:
            self.log(
                f"round {reply.round}: {len(reply.deltas)} deltas "
                f"({reply.timings.get('decide_seconds', 0.0) * 1000:.0f} ms, "
                f"{reply.algorithm})"
            )
        for decision, reason in reply.refused:
            self.log(f"  the daemon refused {decision.kind.name} of {decision.task}: {reason}")
        for error in reply.task_errors:
            self.log(f"  policy error: {error}")
        for decision in reply.deltas:
            self.deltas[decision.kind] += 1
            run = self.tasks.get(decision.task)
            if run is None:
                self.log(f"  {decision.kind.name} of task {decision.task}: not ours, ignored")
                continue
            if decision.kind is DeltaKind.PLACE:
                assert decision.to_machine is not None
                self._start(run, decision.to_machine, "PLACE")
            elif decision.kind is DeltaKind.PREEMPT:
                self._preempt(run, decision)
            else:
                self._migrate(run, decision)

    def _start(self, run: TaskRun, machine: str, why: str) -> None:
        run.attempts += 1
        run.outcome = Outcome.RUNNING
        run.machine = machine
        run.machines.append(machine)
        run.returncode = None
        directory = self.workdir / machine
        directory.mkdir(parents=True, exist_ok=True)
        run.log_path = directory / f"task-{run.spec.task_id}.attempt-{run.attempts}.log"
        env = dict(
            os.environ,
            FIRMAMENT_MACHINE=machine,
            FIRMAMENT_TASK_ID=str(run.spec.task_id),
            FIRMAMENT_JOB_ID=run.spec.job_id,
            FIRMAMENT_ATTEMPT=str(run.attempts),
        )
        with run.log_path.open("wb") as log:
            run.process = subprocess.Popen(
                run.spec.argv,
                cwd=directory,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        run.started = time.monotonic()
        attempt = f", attempt {run.attempts}" if run.attempts > 1 else ""
        self.log(
            f"  {why:<7} {self._name(run.spec.task_id)} on {machine}: pid {run.process.pid}, "
            f"{run.spec.description}{attempt}"
        )
        try:
            self.daemon.confirm_task(run.spec.task_id, machine)
        except RequestFailed as error:
            if error.status not in (Status.INVALID, Status.NOT_FOUND):
                raise
            # Not running there any more (its lease ran out first): the daemon placed it
            # back in the queue, so this start must not go on.
            self._stop_process(run)
            run.outcome, run.machine = Outcome.SUBMITTED, None
            self.log(f"  STOPPED {self._name(run.spec.task_id)}: {error.reason}")

    def _stop_process(self, run: TaskRun) -> int | None:
        """Terminate the task's process (kill it if it lingers); its exit status if it had
        exited on its own before that, else None."""
        process, run.process = run.process, None
        if run.started is not None:
            run.run_seconds += time.monotonic() - run.started
        if process is None:
            return None
        returncode = process.poll()
        if returncode is not None:
            return returncode
        process.terminate()
        try:
            process.wait(timeout=2)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        return None

    def _preempt(self, run: TaskRun, decision: Decision) -> None:
        if run.outcome is not Outcome.RUNNING:
            self.log(f"  PREEMPT {self._name(decision.task)}: not running here, nothing to stop")
            return
        exited = self._stop_process(run)
        run.preemptions += 1
        run.outcome = Outcome.SUBMITTED
        run.machine = None
        note = (
            "terminated"
            if exited is None
            else f"it had exited (status {exited}) before the preemption arrived"
        )
        self.log(
            f"  PREEMPT {self._name(decision.task)} on {decision.from_machine}: {note}; "
            "re-queued by the daemon"
        )

    def _migrate(self, run: TaskRun, decision: Decision) -> None:
        assert decision.to_machine is not None
        if run.outcome is not Outcome.RUNNING:
            self.log(f"  MIGRATE {self._name(decision.task)}: not running here, ignored")
            return
        exited = self._stop_process(run)
        run.migrations += 1
        if exited is not None:
            # It finished before the move reached us: the daemon has it running on the new
            # machine, so report how it ended there rather than run it again.
            self.log(
                f"  MIGRATE {self._name(decision.task)} to {decision.to_machine}: it had "
                f"already exited (status {exited}); reporting that"
            )
            run.machine = decision.to_machine
            self._report_exit(run, exited)
            return
        self.log(
            f"  MIGRATE {self._name(decision.task)}: terminated on {decision.from_machine}, "
            f"restarting on {decision.to_machine}"
        )
        self._start(run, decision.to_machine, "RESTART")

    # ------------------------------------------------------------------ processes

    def reap(self) -> bool:
        """Report every process that has exited; whether any had."""
        reaped = False
        for run in self.tasks.values():
            if run.outcome is not Outcome.RUNNING or run.process is None:
                continue
            returncode = run.process.poll()
            if returncode is None:
                continue
            self._stop_process(run)
            self._report_exit(run, returncode)
            reaped = True
        return reaped

    def _report_exit(self, run: TaskRun, returncode: int) -> None:
        run.returncode = returncode
        task_id = run.spec.task_id
        seconds = f"{run.run_seconds:.2f}s"
        try:
            if returncode == 0:
                self.daemon.complete_task(task_id)
                run.outcome = Outcome.COMPLETED
                self.log(f"  done    {self._name(task_id)} on {run.machine} after {seconds}")
            else:
                run.reason = f"exit status {returncode}: {self._last_line(run)}"
                self.daemon.fail_task(task_id, run.reason)
                run.outcome = Outcome.FAILED
                self.log(f"  FAILED  {self._name(task_id)} on {run.machine}: {run.reason}")
        except RequestFailed as error:
            # The daemon no longer has the task running: a round this manager did not see
            # moved it. It will be placed again.
            run.outcome = Outcome.SUBMITTED
            self.log(f"  the daemon refused the exit of {self._name(task_id)}: {error}")

    @staticmethod
    def _last_line(run: TaskRun) -> str:
        if run.log_path is None or not run.log_path.exists():
            return "no output"
        lines = run.log_path.read_text(errors="replace").strip().splitlines()
        return lines[-1][:200] if lines else "no output"

    def shutdown(self) -> None:
        """Kill what still runs, and take the unfinished tasks back from the daemon."""
        for run in self.tasks.values():
            if run.outcome is Outcome.RUNNING:
                self._stop_process(run)
                self.log(f"killed {self._name(run.spec.task_id)} on {run.machine}")
        unfinished = [run for run in self.tasks.values() if not run.finished]
        for run in unfinished:
            try:
                self.daemon.remove_task(run.spec.task_id)
            except RequestFailed:
                continue  # never submitted (its job had not arrived), say
            except DaemonTimeout:
                self.log("the daemon does not answer: left the unfinished tasks there")
                return
        if unfinished:
            self.log(f"removed {len(unfinished)} unfinished tasks from the daemon")


# ---------------------------------------------------------------------- the summary


def print_summary(summary: RunSummary, out: TextIO) -> None:
    """A table of the tasks, the totals and the daemon's view."""
    rows = [("task", "job", "expected", "outcome", "attempts", "machines", "ran", "note")]
    for run in sorted(summary.tasks, key=lambda r: r.spec.task_id):
        rows.append(
            (
                str(run.spec.task_id),
                run.spec.job_id,
                "complete" if run.spec.expect_success else "fail",
                run.outcome.value + ("" if run.as_expected else " (!)"),
                str(run.attempts),
                ",".join(run.machines) or "-",
                f"{run.run_seconds:.2f}s",
                run.reason,
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    print(file=out)
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        print("  ".join([*cells, row[-1]]).rstrip(), file=out)
    counts = {outcome: 0 for outcome in Outcome}
    for run in summary.tasks:
        counts[run.outcome] += 1
    deltas = ", ".join(f"{count} {kind.name}" for kind, count in summary.deltas.items())
    print(
        f"\n{len(summary.tasks)} tasks on {summary.machines} machines in "
        f"{summary.seconds:.1f}s: {counts[Outcome.COMPLETED]} completed, "
        f"{counts[Outcome.FAILED]} failed, "
        f"{counts[Outcome.SUBMITTED] + counts[Outcome.RUNNING]} unfinished; "
        f"{summary.rounds} rounds ({deltas})",
        file=out,
    )
    status = summary.daemon_status
    print(
        f"daemon: {status.get('machines')} machines, {status.get('tasks')} tasks, "
        f"{status.get('waiting')} waiting, {status.get('running')} running, "
        f"{status.get('rounds')} rounds, journal at record {status.get('seq')} "
        f"(policy {status.get('policy')}) -> "
        + ("agrees, task by task" if summary.daemon_agrees else "DISAGREES"),
        file=out,
    )
    for disagreement in summary.disagreements:
        print(f"  {disagreement}", file=out)
    if summary.timed_out:
        print("timed out before every task finished", file=out)
    print("all tasks ended as expected" if summary.ok else "SOME TASKS DID NOT", file=out)


# ---------------------------------------------------------------------- a daemon of its own


@contextlib.contextmanager
def spawned_daemon(policy: str, journal: Path | None = None) -> Iterator[SchedulingDaemon]:
    """A daemon serving on a free loopback port in a background thread, journaling into
    `journal` (a temporary directory if None); stopped (round finished, journal flushed,
    snapshot written) on exit. Its address is `daemon.endpoint`."""
    with contextlib.ExitStack() as stack:
        if journal is None:
            journal = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="journal-")))
        daemon = SchedulingDaemon(
            DaemonConfig(bind="tcp://127.0.0.1:*", journal=journal, policy=policy)
        )
        thread = threading.Thread(target=daemon.serve, name="firmament-daemon", daemon=True)
        thread.start()
        try:
            yield daemon
        finally:
            daemon.stop()
            thread.join(timeout=30)


# ---------------------------------------------------------------------- the command line


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description="Drive a firmament-py scheduling daemon: run each placed task as a local "
        "process and report how it ended.",
    )
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--daemon", metavar="ADDR", help="the daemon's endpoint (tcp://HOST:PORT)")
    where.add_argument(
        "--spawn-daemon",
        action="store_true",
        help="start a daemon of its own in a thread, on a temporary journal",
    )
    parser.add_argument(
        "--scenario",
        choices=SCENARIOS,
        default="jobs",
        help="jobs: a few jobs of short tasks, one failing (the default); locality: two "
        "tasks that make the quincy policy migrate one (ignores the sizes below)",
    )
    parser.add_argument(
        "--policy",
        help="the spawned daemon's policy (default: load-spreading; quincy for locality)",
    )
    parser.add_argument(
        "--journal", type=Path, help="the spawned daemon's journal directory (default: temporary)"
    )
    parser.add_argument("--machines", type=_positive, default=3, help="default: %(default)s")
    parser.add_argument("--slots", type=_positive, default=2, help="per machine (default: 2)")
    parser.add_argument("--jobs", type=_positive, default=3, help="default: %(default)s")
    parser.add_argument("--tasks-per-job", type=_positive, default=4, help="default: 4")
    parser.add_argument(
        "--failures", type=int, default=1, help="jobs with a task that fails (default: 1)"
    )
    parser.add_argument(
        "--task-seconds", type=float, default=0.3, help="how long tasks take (default: 0.3)"
    )
    parser.add_argument(
        "--first-task-id",
        type=int,
        help="the first task id (default: one more than the daemon's task count)",
    )
    parser.add_argument(
        "--workdir", type=Path, help="where the machines' directories go (default: temporary)"
    )
    parser.add_argument(
        "--timeout", type=float, default=120.0, help="give up after this many seconds"
    )
    return parser


SCENARIOS = ("jobs", "locality")


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def main(argv: Sequence[str] | None = None, *, out: TextIO | None = None) -> int:
    """The command line; returns the exit status (argparse exits with 2 on bad arguments)."""
    out = out if out is not None else sys.stdout
    parser = _parser()
    args = parser.parse_args(argv)
    if not 0 <= args.failures <= args.jobs:
        parser.error(f"--failures must be between 0 and --jobs ({args.jobs})")
    if not args.spawn_daemon and (args.journal is not None or args.policy is not None):
        parser.error("--journal and --policy are for --spawn-daemon (a daemon has its own)")
    locality = args.scenario == "locality"
    with contextlib.ExitStack() as stack:
        address = args.daemon
        if args.spawn_daemon:
            policy = args.policy or ("quincy" if locality else "load-spreading")
            daemon = stack.enter_context(spawned_daemon(policy, args.journal))
            address = daemon.endpoint
            print(f"started a daemon on {address} (policy {policy})", file=out)
        workdir = args.workdir
        if workdir is None:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="machines-")))
        client = stack.enter_context(Client(address, timeout=10.0, retries=30))
        try:
            status = client.status()
            first = args.first_task_id
            if first is None:
                first = int(status["tasks"]) + 1
            if locality:
                if status["policy"] != "quincy":
                    print(
                        f"note: the daemon's policy is {status['policy']}; only quincy "
                        "migrates for locality",
                        file=out,
                    )
                machines = locality_machines()
                jobs = locality_jobs(first)
            else:
                machines = demo_machines(args.machines, args.slots)
                jobs = demo_jobs(
                    args.jobs,
                    args.tasks_per_job,
                    failures=args.failures,
                    seconds=args.task_seconds,
                    first_task_id=first,
                )
            manager = ClusterManager(
                client,
                machines,
                jobs,
                workdir,
                out=out,
                round_interval=0.25,
                timeout=args.timeout,
            )
            summary = manager.run()
        except DaemonTimeout as error:
            print(f"error: {error} (is a daemon running there?)", file=out)
            return 1
        except KeyboardInterrupt:
            print("interrupted", file=out)
            return 130
        except RequestFailed as error:
            hint = ""
            if error.status is Status.ALREADY_EXISTS:
                hint = " (the daemon's journal has an earlier run: pass --first-task-id)"
            print(f"error: the daemon refused a request: {error}{hint}", file=out)
            return 1
        print_summary(summary, out)
        return 0 if summary.ok else 1


if __name__ == "__main__":
    sys.exit(main())
