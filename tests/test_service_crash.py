"""`kill -9` of the daemon under load loses nothing acknowledged and doubles nothing
(firmament_py/service/journal.py, state.py, daemon.py; the `firmament-py serve` command).

The daemon runs as the real command in its own process. A client submits tasks, completes
running ones and asks for rounds as fast as it can, recording every acknowledged request;
at a random moment the daemon gets SIGKILL. The journal is then recovered and checked against
the acknowledgements: every acknowledged submission and completion is there, nothing that was
never sent is, the one request in flight at the kill is there at most once (its retry after
the restart is answered, not applied again), and the state's invariants hold. Then the daemon
restarts on the same journal and the load goes on, eight times over. Finally SIGTERM: the
daemon finishes, writes a snapshot and exits 0.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import zmq

from firmament_py.model.resources import Resources
from firmament_py.model.states import TaskState
from firmament_py.service import Client, DaemonTimeout, MachineSpec, RequestFailed
from firmament_py.service.journal import Journal
from firmament_py.service.protocol import encode_request
from firmament_py.service.state import ServiceState

from .test_service_protocol import fingerprint

KILLS = 8


def start_daemon(journal: Path, port: int, *options: str) -> subprocess.Popen[bytes]:
    """`firmament-py serve` on `journal` and a loopback port, with `options` after the rest,
    once it answers."""
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "firmament_py.cli",
            "serve",
            "--bind",
            f"tcp://127.0.0.1:{port}",
            "--journal",
            str(journal),
            "--snapshot-every",
            "150",
            *options,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        # What a killed daemon leaves (its socket's directory) stays in the test's directory.
        env={**os.environ, "TMPDIR": str(journal.parent)},
    )
    with Client(f"tcp://127.0.0.1:{port}", timeout=0.5, retries=60) as client:
        client.status()
    return process


def assert_exits(pid: int, message: str) -> None:
    """`pid` is gone (or a zombie no one has reaped yet) within ten seconds."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                if stat.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return
        except FileNotFoundError:
            return
        time.sleep(0.05)
    raise AssertionError(message)


def recovered(journal: Path) -> ServiceState:
    """The state the journal holds (as a restarted daemon would recover it)."""
    with Journal(journal) as opened:
        payload, records = opened.recover()
    state = ServiceState() if payload is None else ServiceState.from_snapshot(payload)
    state.replay(records)
    return state


@dataclass
class Load:
    """What the client had acknowledged, and the request in flight when the daemon died."""

    submitted: set[int] = field(default_factory=set)
    completed: set[int] = field(default_factory=set)
    running: set[int] = field(default_factory=set)
    in_flight: tuple[str, str, dict[str, int | str]] | None = None


def drive(endpoint: str, load: Load, first_id: int, stop: threading.Event) -> None:
    """Submit, complete and schedule until the daemon stops answering."""
    rng = random.Random(first_id)
    next_id = first_id
    with Client(endpoint, timeout=1.0, retries=0) as client:
        while not stop.is_set():
            roll = rng.random()
            if roll < 0.1:
                kind, body = "schedule", {}
            elif roll < 0.3 and load.running:
                task_id = rng.choice(sorted(load.running))
                kind, body = "task_completed", {"task_id": task_id}
            else:
                kind, body = "task_submitted", {"task_id": next_id, "job_id": f"j{next_id % 7}"}
                next_id += 1
            request_id = client.new_request_id()
            load.in_flight = (request_id, kind, body)
            try:
                reply = client.request(kind, body, request_id=request_id)
            except DaemonTimeout:
                return
            except RequestFailed:
                load.in_flight = None
                continue
            load.in_flight = None
            if kind == "task_submitted":
                load.submitted.add(int(body["task_id"]))
            elif kind == "task_completed":
                load.completed.add(int(body["task_id"]))
                load.running.discard(int(body["task_id"]))
            else:
                for delta in reply["deltas"]:
                    if delta[0] == "place":
                        load.running.add(delta[1])
                    else:
                        load.running.discard(delta[1])


@pytest.mark.slow
def test_kill_minus_nine_under_load_loses_and_doubles_nothing(tmp_path: Path) -> None:
    from .test_service_daemon import _free_port

    journal = tmp_path / "journal"
    port = _free_port()
    endpoint = f"tcp://127.0.0.1:{port}"
    rng = random.Random(7)
    process = start_daemon(journal, port)
    with Client(endpoint) as client:
        machines = [
            MachineSpec(f"m{i}", Resources(cpu_millicores=8000), 4, rack_id=f"r{i % 3}")
            for i in range(12)
        ]
        client.add_machines(machines)
    load = Load()
    first_id = 0
    for kill in range(KILLS):
        stop = threading.Event()
        driver = threading.Thread(target=drive, args=(endpoint, load, first_id, stop))
        driver.start()
        with Client(endpoint) as client:
            worker_pid = client.status()["worker_pid"]
        time.sleep(rng.uniform(0.2, 1.2))
        os.kill(process.pid, signal.SIGKILL)
        process.wait(10)
        assert_exits(worker_pid, f"kill {kill}: the scheduling process outlived the daemon")
        stop.set()
        driver.join(30)
        assert not driver.is_alive()

        state = recovered(journal)
        state.cluster.validate()
        tasks = state.cluster.tasks
        assert load.submitted <= set(tasks), f"kill {kill}: acknowledged submissions lost"
        for task_id in load.completed:
            assert tasks[task_id].state is TaskState.COMPLETED, f"kill {kill}: task {task_id}"
        in_flight = load.in_flight
        maybe = set()
        if in_flight is not None and in_flight[1] == "task_submitted":
            maybe.add(int(in_flight[2]["task_id"]))
        assert set(tasks) - load.submitted <= maybe, f"kill {kill}: tasks never sent"

        process = start_daemon(journal, port)
        with Client(endpoint) as client:
            status = client.status()
            assert (status["tasks"], status["seq"]) == (len(tasks), state.seq)
            if in_flight is not None and in_flight[1] != "schedule":
                request_id, kind, body = in_flight
                # A completion may fail if a round had not placed its task; that is no loss.
                with contextlib.suppress(RequestFailed):
                    client.request(kind, body, request_id=request_id)
                if kind == "task_submitted":
                    load.submitted.add(int(body["task_id"]))
                after = client.status()
                assert after["tasks"] == len(load.submitted), f"kill {kill}: a retry doubled"
        # What runs is what the recovered state says (the daemon replayed the same journal),
        # less a completion just retried.
        load.running = {t.task_id for t in tasks.values() if t.state is TaskState.RUNNING}
        load.running -= load.completed
        first_id = max(load.submitted, default=-1) + 1
        load.in_flight = None
    assert len(load.submitted) > 50, "the load hardly ran"
    process.send_signal(signal.SIGTERM)
    assert process.wait(30) == 0
    snapshots = sorted(journal.glob("snapshot-*.pickle"))
    assert snapshots
    final = recovered(journal)
    final.cluster.validate()
    assert load.submitted == set(final.cluster.tasks)


def _round_cut_short(tmp_path: Path, attempt: int) -> bool:
    """One try of issue 35's reproducer: `--decision-chunk 16`, 2,500 tasks on 50 machines,
    a `schedule`, SIGKILL as soon as `status` shows that the round's first records are
    journaled, a restart, and the same `schedule` id again: it must be answered with every
    decision of the round (the ones applied before the kill too) under the round's number,
    and every running task must be in that answer. Returns whether the kill did fall in the
    middle of the round (it may miss on a loaded machine: the round then finished first)."""
    from .test_service_daemon import _free_port

    journal, port = tmp_path / f"journal-{attempt}", _free_port()
    endpoint = f"tcp://127.0.0.1:{port}"
    options = ("--decision-chunk", "16")
    process = start_daemon(journal, port, *options)
    manager = zmq.Context.instance().socket(zmq.DEALER)
    manager.setsockopt(zmq.LINGER, 0)
    manager.connect(endpoint)
    try:
        with Client(endpoint, timeout=60) as client:
            client.add_machines(
                MachineSpec(f"m{i}", Resources(cpu_millicores=64_000), 50, rack_id=f"r{i % 5}")
                for i in range(50)
            )
            for start in range(0, 2_500, 500):
                client.batch(
                    ("task_submitted", {"task_id": t, "job_id": f"j{t % 10}"})
                    for t in range(start, start + 500)
                )
            before = client.status()["seq"]
            manager.send(encode_request("round-1", "schedule"))  # waits for its answer
            while client.status()["seq"] == before:
                pass
        os.kill(process.pid, signal.SIGKILL)
        process.wait(10)
        at_kill = recovered(journal)
        running_at_kill = {
            t.task_id for t in at_kill.cluster.tasks.values() if t.state is TaskState.RUNNING
        }
        process = start_daemon(journal, port, *options)
        with Client(endpoint, timeout=60) as client:
            answer = client.request("schedule", request_id="round-1")  # the manager's retry
            placed = [delta[1] for delta in answer["deltas"] if delta[0] == "place"]
            assert answer["round"] == 1
            assert len(placed) == len(set(placed)) == 2_500
            running = {task.task_id for task in client.tasks(state=TaskState.RUNNING)}
            assert running == set(placed) >= running_at_kill
            assert client.schedule().round == 2  # numbers never repeat
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0
        process = start_daemon(journal, port, *options)
        with Client(endpoint, timeout=60) as client:
            assert client.request("schedule", request_id="round-1") == answer
            assert client.schedule().round == 3
        return 0 < len(running_at_kill) < 2_500
    finally:
        manager.close()
        process.kill()
        process.wait(10)


@pytest.mark.slow
def test_kill_minus_nine_in_the_middle_of_a_round_loses_no_decision(tmp_path: Path) -> None:
    """Issue 35, bug 1: the retried `schedule` was answered by a new round, also numbered 1,
    and 16 to 48 tasks ran that no answer ever named."""
    for attempt in range(4):
        if _round_cut_short(tmp_path, attempt):
            return
    raise AssertionError("four kills all missed the round's middle: nothing was tested")


def test_the_first_scheduling_process_rebuilds_the_recovered_state_itself(tmp_path: Path) -> None:
    """After a restart the daemon sends its first scheduling process the snapshot's bytes and
    the records after it (`init-journal`) instead of pickling its state in its loop: what the
    process rebuilds is the state the daemon recovered, and a daemon restarted on the journal
    schedules with that process, without a divergence restarting it."""
    import msgpack

    from firmament_py.service.round_worker import _recovered_state

    from .test_service_daemon import _free_port

    journal, port = tmp_path / "j", _free_port()
    process = start_daemon(journal, port, "--snapshot-every", "25")
    endpoint = f"tcp://127.0.0.1:{port}"
    with Client(endpoint, timeout=20) as client:
        client.add_machines(
            MachineSpec(f"m{i}", Resources(cpu_millicores=8000), 4, rack_id=f"r{i % 2}")
            for i in range(4)
        )
        for task_id in range(40):  # a snapshot on the way, then records after it
            client.submit_task(task_id, f"j{task_id % 3}")
        placed = client.schedule().deltas
        client.complete_task(placed[0].task)
        while client.status()["snapshot_in_progress"]:
            time.sleep(0.01)
    os.kill(process.pid, signal.SIGKILL)
    process.wait(10)
    with Journal(journal) as opened:
        _, records = opened.recover()
        snapshot = opened.take_recovered_snapshot()
    assert snapshot is not None and records  # both parts are there to rebuild from
    expected = recovered(journal)
    rebuilt = ServiceState(_recovered_state(snapshot, [msgpack.packb(records)]), seq=expected.seq)
    assert fingerprint(rebuilt) == fingerprint(expected)
    process = start_daemon(journal, port)
    try:
        with Client(endpoint, timeout=20) as client:
            client.submit_task(100, "late")
            before = client.status()["worker_pid"]
            assert 100 in {d.task for d in client.schedule().deltas}
            assert client.status()["worker_pid"] == before  # no divergence restarted it
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(30)
