"""The cluster manager example (examples/cluster_manager/manager.py) end to end: against a real
daemon it runs every placed task as a real process, reports completions and the failure it
was built to have, and the daemon (its `status`, and its state recovered from the journal)
agrees; the command line does the same with `--spawn-daemon`; PREEMPT and MIGRATE deltas
terminate the process without reporting it and start it again where the daemon says; and the
quincy policy, on the locality scenario, really migrates a task through the daemon."""

from __future__ import annotations

import dataclasses
import io
import random
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from firmament_py.flow.placement import DeltaKind, SchedulingDelta
from firmament_py.model.resources import Resources
from firmament_py.model.states import TaskState
from firmament_py.service import (
    Client,
    DaemonConfig,
    ListedTask,
    MachineSpec,
    RoundReply,
    SchedulingDaemon,
)
from firmament_py.service.journal import Journal
from firmament_py.service.state import ServiceState

from .examples import load_example

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "cluster_manager" / "manager.py"


@pytest.fixture(scope="module")
def example() -> ModuleType:
    """examples/cluster_manager/manager.py as a module."""
    return load_example(EXAMPLE, "cluster_manager_example")


def test_the_demo_jobs_are_what_they_claim(example: Any) -> None:
    jobs = example.demo_jobs(2, 3, failures=1, first_task_id=10)
    tasks = [task for job in jobs for task in job.tasks]
    assert [task.task_id for task in tasks] == list(range(10, 16))
    assert [task.expect_success for task in tasks] == [True, True, False, True, True, True]
    assert {task.job_id for task in tasks} == {"sleep-0", "primes-1"}
    with pytest.raises(ValueError):
        example.demo_jobs(2, 3, failures=3)


def test_the_manager_runs_every_task_and_the_daemon_agrees(example: Any, tmp_path: Path) -> None:
    journal, workdir = tmp_path / "journal", tmp_path / "machines"
    jobs = example.demo_jobs(2, 3, failures=1, seconds=0.2)
    out = io.StringIO()
    with (
        example.spawned_daemon("load-spreading", journal) as daemon,
        Client(daemon.endpoint, timeout=10.0) as client,
    ):
        manager = example.ClusterManager(
            client, example.demo_machines(2, 2), jobs, workdir, out=out, timeout=60.0
        )
        summary = manager.run()
    log = out.getvalue()
    assert summary.ok and not summary.timed_out, log
    outcomes = {run.spec.task_id: run.outcome.value for run in summary.tasks}
    assert outcomes == {1: "completed", 2: "completed", 3: "failed"} | {
        task: "completed" for task in (4, 5, 6)
    }, log
    for run in summary.tasks:
        assert run.attempts == 1 and run.machines[0] in {"local-0", "local-1"}, log
        # The process really ran, in its machine's directory.
        assert run.log_path == workdir / run.machines[0] / f"task-{run.spec.task_id}.attempt-1.log"
        assert run.log_path.exists()
    failed = summary.tasks[2]
    assert failed.returncode == 3 and "failing on purpose" in failed.reason, log
    assert summary.deltas[DeltaKind.PLACE] == 6, log
    # The daemon's status agrees...
    status = summary.daemon_status
    assert (status["machines"], status["tasks"], status["waiting"], status["running"]) == (
        2,
        6,
        0,
        0,
    )
    assert summary.daemon_agrees
    # ...task by task, as it lists them...
    assert summary.daemon_states == outcomes and not summary.disagreements
    # (a task the daemon saw end otherwise would be named)
    seen_otherwise = dataclasses.replace(summary, daemon_states={**outcomes, 3: "completed"})
    assert seen_otherwise.disagreements == ["task 3: failed here, completed there"]
    assert not seen_otherwise.daemon_agrees
    # ...and so does its state, recovered from the journal it wrote.
    with Journal(journal) as opened:
        payload, records = opened.recover()
    assert payload is not None
    state = ServiceState.from_snapshot(payload)
    state.replay(records)
    tasks = state.cluster.tasks
    assert {task_id: tasks[task_id].state for task_id in tasks} == {
        task_id: TaskState.COMPLETED if outcome == "completed" else TaskState.FAILED
        for task_id, outcome in outcomes.items()
    }
    assert tasks[3].failure_reason == failed.reason
    assert "FAILED  task 3 (sleep-0)" in log and log.count("  done    task ") == 5


def test_the_command_line_spawns_a_daemon_and_drives_it(tmp_path: Path) -> None:
    argv = [
        sys.executable,
        str(EXAMPLE),
        "--spawn-daemon",
        "--machines=2",
        "--slots=2",
        "--jobs=2",
        "--tasks-per-job=3",
        "--failures=1",
        "--task-seconds=0.2",
        f"--workdir={tmp_path}",
    ]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "(policy load-spreading)" in output
    assert "6 tasks on 2 machines" in output and "5 completed, 1 failed, 0 unfinished" in output
    assert "-> agrees" in output and "all tasks ended as expected" in output
    assert "exit status 3: error: input shard is corrupt (failing on purpose)" in output


def test_the_command_line_rejects_bad_arguments(example: Any) -> None:
    for argv in (
        [],
        ["--daemon", "tcp://127.0.0.1:1", "--spawn-daemon"],
        ["--spawn-daemon", "--jobs", "1", "--failures", "2"],
        ["--spawn-daemon", "--machines", "0"],
        ["--daemon", "tcp://127.0.0.1:1", "--policy", "trivial"],
    ):
        with pytest.raises(SystemExit) as exit_info:
            example.main(argv, out=io.StringIO())
        assert exit_info.value.code == 2, argv


def test_a_retried_round_is_answered_once(example: Any, tmp_path: Path) -> None:
    """Regression (found by this example): a `schedule` retried while its round ran was queued
    for a second round whose deltas went only to the retry's reply, which `Client` drops as
    the late answer to an abandoned attempt, so tasks were placed that no manager heard of.
    Now the retry waits for the same round: one round, every delta delivered."""
    with (
        example.spawned_daemon("trivial", tmp_path / "journal") as daemon,
        Client(daemon.endpoint, timeout=0.02, retries=3000) as client,
    ):
        client.add_machines(example.demo_machines(1, 2))
        client.submit_task(1, "job")
        reply = client.schedule()  # the first round loads kernels: far longer than 20 ms
        assert [(d.kind, d.task) for d in reply.deltas] == [(DeltaKind.PLACE, 1)]
        time.sleep(0.3)
        status = client.status()
        assert (status["rounds"], status["round_in_flight"]) == (1, False)


class ScriptedDaemon:
    """A stand-in daemon whose rounds answer scripted deltas, recording the reports. Round
    `i` (from 0) is not answered before the files `wait_for[i]` exist."""

    def __init__(
        self,
        rounds: list[list[SchedulingDelta[int, str]]],
        wait_for: Mapping[int, list[Path]] | None = None,
    ) -> None:
        self.rounds = rounds
        self.wait_for = wait_for or {}
        self.asked = 0
        self.reports: list[tuple[str, int]] = []
        self.confirmed: list[int] = []  # each start the manager confirmed

    def add_machines(self, machines: Iterable[MachineSpec]) -> int:
        return 1

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
        return 1

    def complete_task(self, task_id: int) -> int:
        self.reports.append(("completed", task_id))
        return 1

    def fail_task(self, task_id: int, reason: str = "") -> int:
        self.reports.append(("failed", task_id))
        return 1

    def remove_task(self, task_id: int) -> int:
        self.reports.append(("removed", task_id))
        return 1

    def register(self, manager: str) -> int:
        return 1

    def confirm_task(self, task_id: int, machine_id: str | None = None) -> int:
        self.confirmed.append(task_id)
        return 1

    def round(self, round_id: int) -> RoundReply:
        raise AssertionError("the scripted rounds have no gaps")

    def schedule(self) -> RoundReply:
        deadline = time.monotonic() + 20
        while not all(path.exists() for path in self.wait_for.get(self.asked, [])):
            assert time.monotonic() < deadline, f"round {self.asked} waited too long"
            time.sleep(0.01)
        deltas = self.rounds[self.asked] if self.asked < len(self.rounds) else []
        self.asked += 1
        return RoundReply(self.asked, deltas, [], 0, "scripted", {}, [], 0)

    def status(self) -> dict[str, Any]:
        return {"running": 0, "waiting": 0}

    def tasks(self) -> Iterator[ListedTask]:
        """What the reports made of each task (the daemon's view, as far as it is scripted)."""
        for kind, task_id in sorted(self.reports, key=lambda report: report[1]):
            if kind != "removed":
                yield ListedTask(task_id, "job", TaskState(kind), None)


def test_preempt_and_migrate_stop_the_process_and_start_it_where_the_daemon_says(
    example: Any, tmp_path: Path
) -> None:
    # Each attempt leaves "started-TASK-ATTEMPT" in its machine's directory at once and
    # "finished-TASK-ATTEMPT" after a second, unless it is terminated first.
    code = (
        "import os, time; name = os.environ['FIRMAMENT_TASK_ID'] + '-' + "
        "os.environ['FIRMAMENT_ATTEMPT']; open('started-' + name, 'w').close(); "
        "time.sleep(1.0); open('finished-' + name, 'w').close()"
    )
    tasks = tuple(
        example.TaskSpec(task_id, "job", (sys.executable, "-c", code), Resources())
        for task_id in (1, 2)
    )
    place, preempt, migrate = DeltaKind.PLACE, DeltaKind.PREEMPT, DeltaKind.MIGRATE
    daemon = ScriptedDaemon(
        [
            [SchedulingDelta(place, 1, None, "m0"), SchedulingDelta(place, 2, None, "m1")],
            [SchedulingDelta(preempt, 1, "m0", None), SchedulingDelta(migrate, 2, "m1", "m0")],
            [SchedulingDelta(place, 1, None, "m1")],
        ],
        # The preemption and the migration come once both first attempts have started.
        wait_for={1: [tmp_path / "m0" / "started-1-1", tmp_path / "m1" / "started-2-1"]},
    )
    out = io.StringIO()
    manager = example.ClusterManager(
        daemon,
        [],
        [example.JobSpec("job", tasks)],
        tmp_path,
        out=out,
        round_interval=0.2,
        timeout=30.0,
    )
    summary = manager.run()
    log = out.getvalue()
    assert summary.ok, log
    # Only the last attempts' exits were reported, once each; nothing failed.
    assert sorted(daemon.reports) == [("completed", 1), ("completed", 2)], log
    assert sorted(daemon.confirmed) == [1, 1, 2, 2], log  # every start confirmed
    first, second = summary.tasks
    assert (first.attempts, first.machines, first.preemptions) == (2, ["m0", "m1"], 1)
    assert (second.attempts, second.machines, second.migrations) == (2, ["m1", "m0"], 1)
    names = {path.relative_to(tmp_path).as_posix() for path in tmp_path.rglob("*ed-*")}
    assert names == {
        "m0/started-1-1",  # preempted: terminated before it finished
        "m1/started-1-2",
        "m1/finished-1-2",
        "m1/started-2-1",  # migrated away: terminated there...
        "m0/started-2-2",  # ...and started afresh on the new machine
        "m0/finished-2-2",
    }, log
    assert "PREEMPT task 1 (job) on m0: terminated; re-queued by the daemon" in log
    assert "MIGRATE task 2 (job): terminated on m1, restarting on m0" in log


def test_quincy_migrates_a_task_towards_its_data(example: Any, tmp_path: Path) -> None:
    """Real rounds of the quincy policy (see `locality_jobs`: the migration rests on the wall
    clock, with about half a second to spare either way)."""
    out = io.StringIO()
    with (
        example.spawned_daemon("quincy", tmp_path / "journal") as daemon,
        Client(daemon.endpoint, timeout=10.0) as client,
    ):
        manager = example.ClusterManager(
            client,
            example.locality_machines(),
            example.locality_jobs(),
            tmp_path / "machines",
            out=out,
            round_interval=0.25,
            timeout=60.0,
        )
        summary = manager.run()
    log = out.getvalue()
    assert summary.ok and summary.daemon_agrees, log
    small, big = summary.tasks
    assert small.machines == ["local-0"], log
    assert (big.machines, big.migrations) == (["local-1", "local-0"], 1), log
    assert summary.deltas == {DeltaKind.PLACE: 2, DeltaKind.PREEMPT: 0, DeltaKind.MIGRATE: 1}


def test_rounds_the_daemon_ran_on_its_own_are_fetched_and_obeyed(
    example: Any, tmp_path: Path
) -> None:
    """A daemon that also schedules every 30 ms (`--auto-schedule-ms`): rounds no request of
    the manager waited for are fetched by their numbers and their PLACEs obeyed, so every task
    still runs once and the daemon agrees."""
    config = DaemonConfig(
        bind="tcp://127.0.0.1:*", journal=tmp_path / "journal", auto_schedule_ms=30
    )
    daemon = SchedulingDaemon(config)
    thread = threading.Thread(target=daemon.serve, daemon=True)
    thread.start()
    out = io.StringIO()
    try:
        with Client(daemon.endpoint, timeout=10.0) as client:
            jobs = example.demo_jobs(2, 3, failures=0, seconds=0.3)
            manager = example.ClusterManager(
                client, example.demo_machines(2, 2), jobs, tmp_path / "m", out=out, timeout=60
            )
            summary = manager.run()
    finally:
        daemon.stop()
        thread.join(30)
    log = out.getvalue()
    assert summary.ok and summary.daemon_agrees, log
    assert all(run.attempts == 1 for run in summary.tasks), log


class GappedDaemon(ScriptedDaemon):
    """Answers its first `schedule` as round 1 and the later ones from round 3 on: round 2,
    which placed task 2, ran without the manager and is there to be fetched by number."""

    def __init__(self) -> None:
        super().__init__([[SchedulingDelta(DeltaKind.PLACE, 1, None, "m0")]])
        self.fetched: list[int] = []

    def schedule(self) -> RoundReply:
        reply = super().schedule()
        number = 1 if reply.round == 1 else reply.round + 1
        return dataclasses.replace(reply, round=number)

    def round(self, round_id: int) -> RoundReply:
        self.fetched.append(round_id)
        place = [SchedulingDelta(DeltaKind.PLACE, 2, None, "m1")]
        return RoundReply(round_id, place, [], 0, "scripted", {}, [], 0)


def test_a_round_that_ran_without_the_manager_is_fetched_and_obeyed(
    example: Any, tmp_path: Path
) -> None:
    tasks = tuple(
        example.TaskSpec(task_id, "job", (sys.executable, "-c", "pass"), Resources())
        for task_id in (1, 2)
    )
    daemon = GappedDaemon()
    out = io.StringIO()
    manager = example.ClusterManager(
        daemon, [], [example.JobSpec("job", tasks)], tmp_path, out=out, timeout=30.0
    )
    summary = manager.run()
    log = out.getvalue()
    assert summary.ok, log
    assert daemon.fetched == [2], log
    assert "round 2 ran without this manager: fetched by its number" in log
    assert [run.machines for run in summary.tasks] == [["m0"], ["m1"]], log
    assert sorted(daemon.confirmed) == [1, 2], log


def test_the_manager_converges_through_daemon_crashes_in_the_middle_of_rounds(
    example: Any, tmp_path: Path
) -> None:
    """The daemon, a separate process applying one decision per turn, is killed with SIGKILL
    three times at random moments while the manager runs (mid-round or not: a round spans
    many turns here), and restarted on its journal: the manager's retries, answered by the
    rounds the restarted daemon finishes, leave every task run once and the daemon agreeing,
    task by task."""
    from .test_service_crash import start_daemon
    from .test_service_daemon import _free_port

    journal, port = tmp_path / "journal", _free_port()
    options = ("--decision-chunk", "1")
    process = start_daemon(journal, port, *options)
    out = io.StringIO()
    outcome: list[Any] = []
    with Client(f"tcp://127.0.0.1:{port}", timeout=2.0, retries=60) as client:
        jobs = example.demo_jobs(3, 4, failures=1, seconds=0.4)
        manager = example.ClusterManager(
            client, example.demo_machines(3, 2), jobs, tmp_path / "m", out=out, timeout=120
        )
        runner = threading.Thread(target=lambda: outcome.append(manager.run()))
        runner.start()
        rng = random.Random(35)
        try:
            for _ in range(3):
                time.sleep(rng.uniform(0.3, 1.2))
                process.kill()
                process.wait(10)
                process = start_daemon(journal, port, *options)
            runner.join(120)
        finally:
            process.terminate()
            process.wait(30)
    log = out.getvalue()
    (summary,) = outcome
    assert summary.ok and summary.daemon_agrees and not summary.disagreements, log
    assert all(run.attempts == 1 for run in summary.tasks), log
