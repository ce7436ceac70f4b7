"""The scheduling daemon over real sockets (firmament_py/service/daemon.py, client.py, keys.py).

A daemon runs in a thread of the test process (its rounds in their own process, as always) on
a loopback port; clients talk to it as any cluster manager would. Covered: a cluster scheduled
end to end; bad frames of every kind answered with an error while the state stays as it was;
a hypothesis fuzz of random and mutated messages after which the state is still valid, equal
to what its journal replays, and a normal client still works; retried request ids applied once,
across a restart too; rounds published to subscribers; CURVE: allowed clients served, others
get nothing; binding beyond loopback without keys refused.
"""

from __future__ import annotations

import itertools
import os
import random
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgpack
import pytest
import zmq
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from firmament_py import cli
from firmament_py.flow.placement import DeltaKind
from firmament_py.model.resources import Resources
from firmament_py.model.states import TaskState
from firmament_py.service import (
    Client,
    CurveClientKeys,
    CurveServerKeys,
    DaemonConfig,
    DaemonError,
    DaemonTimeout,
    MachineSpec,
    RequestFailed,
    SchedulingDaemon,
    Status,
)
from firmament_py.service.journal import JournalError
from firmament_py.service.keys import KeyFileError, authorise_client, generate_key_pair
from firmament_py.service.protocol import decode_reply, encode_request
from firmament_py.service.worker_link import WorkerLink

from .test_service_crash import recovered
from .test_service_protocol import fingerprint


class Running:
    """A daemon serving in a background thread."""

    def __init__(self, config: DaemonConfig) -> None:
        self.daemon = SchedulingDaemon(config)
        self.thread = threading.Thread(target=self.daemon.serve, daemon=True)
        self.thread.start()

    @property
    def endpoint(self) -> str:
        return self.daemon.endpoint

    def stop(self) -> None:
        self.daemon.stop()
        self.thread.join(30)
        assert not self.thread.is_alive()


@pytest.fixture
def running(tmp_path: Path) -> Iterator[Running]:
    served = Running(DaemonConfig(bind="tcp://127.0.0.1:*", journal=tmp_path / "journal"))
    yield served
    served.stop()


def machines(count: int, slots: int = 2) -> list[MachineSpec]:
    return [
        MachineSpec(f"m{i}", Resources(cpu_millicores=8000), slots, rack_id=f"r{i % 2}")
        for i in range(count)
    ]


def raw_exchange(endpoint: str, frames: list[bytes], timeout_ms: int = 5000) -> dict[str, Any]:
    """Send raw frames from a DEALER socket and return the decoded reply map."""
    socket = zmq.Context.instance().socket(zmq.DEALER)
    socket.setsockopt(zmq.LINGER, 0)
    socket.connect(endpoint)
    try:
        socket.send_multipart(frames)
        assert socket.poll(timeout_ms), "no reply"
        reply: dict[str, Any] = msgpack.unpackb(socket.recv(), raw=False)
        return reply
    finally:
        socket.close()


def test_a_cluster_scheduled_end_to_end(running: Running) -> None:
    with Client(running.endpoint, timeout=20) as client:
        client.add_machines(machines(3))
        for task_id in range(8):
            client.submit_task(task_id, f"job{task_id % 2}")
        round_reply = client.schedule()
        placed = {d.task: d.to_machine for d in round_reply.deltas}
        assert len(placed) == 6 and all(d.kind is DeltaKind.PLACE for d in round_reply.deltas)
        status = client.status()
        assert (status["running"], status["waiting"], status["machines"]) == (6, 2, 3)
        done = next(iter(placed))
        client.complete_task(done)
        second = client.schedule()
        assert len(second.deltas) == 1 and second.deltas[0].kind is DeltaKind.PLACE
        assert client.status()["running"] == 6
        with pytest.raises(RequestFailed) as info:
            client.complete_task(12345)
        assert info.value.status is Status.NOT_FOUND
        with pytest.raises(RequestFailed) as info:
            client.add_machines(machines(1))
        assert info.value.status is Status.ALREADY_EXISTS
    running.daemon.service.cluster.validate()


def test_bad_frames_get_errors_and_change_nothing(running: Running) -> None:
    with Client(running.endpoint) as client:
        client.add_machines(machines(1))
        client.submit_task(1, "j")
    before = fingerprint(running.daemon.service)
    limit = running.daemon.config.max_message_bytes
    bad: list[tuple[list[bytes], str]] = [
        ([b"\x93\x01"], "not a msgpack message"),
        ([b"hello", b"world"], "expected one frame"),
        ([b"\x00" * (limit + 1)], "exceeds the limit"),
        ([encode_request("a", "task_submitted", {"task_id": "x", "job_id": "j"})], "integer"),
        ([encode_request("b", "task_submitted", {"task_id": 1, "job_id": "j"})], "already"),
        ([encode_request("c", "node_updated", {"machine_id": "zz", "slots": 3})], "no machine"),
        ([encode_request("d", "task_updated", {"task_id": 1, "colour": "red"})], "colour"),
    ]
    for frames, words in bad:
        reply = raw_exchange(running.endpoint, frames)
        assert reply["status"] != "ok" and words in reply["reason"], (frames[0][:20], reply)
    assert fingerprint(running.daemon.service) == before
    with Client(running.endpoint) as client:
        assert client.status()["tasks"] == 1


VALID_MESSAGES: list[tuple[str, dict[str, Any]]] = [
    ("task_submitted", {"task_id": 50, "job_id": "j", "request": {"cpu_millicores": 100}}),
    ("task_completed", {"task_id": 1}),
    ("task_failed", {"task_id": 2, "reason": "oom"}),
    ("task_removed", {"task_id": 3}),
    ("task_updated", {"task_id": 4, "priority": 2, "labels": {"a": "b"}}),
    ("node_added", {"machines": [{"machine_id": "new", "capacity": {}, "slots": 1}]}),
    ("node_failed", {"machine_id": "m0"}),
    ("node_removed", {"machine_id": "m1"}),
    ("node_updated", {"machine_id": "m0", "slots": 5}),
    ("task_stats", {"task_id": 5, "usage": {"cpu_millicores": 10}}),
    ("node_stats", {"machine_id": "m0", "usage": {"ram_bytes": 10}}),
    ("status", {}),
]


def _mutate(value: Any, rng: random.Random) -> Any:
    """A random change somewhere inside a message: a value replaced, a key dropped or added."""
    if isinstance(value, dict) and value and rng.random() < 0.7:
        key = rng.choice(sorted(value))
        copy = dict(value)
        roll = rng.random()
        if roll < 0.2:
            del copy[key]
        elif roll < 0.3:
            copy[f"extra{rng.randrange(3)}"] = rng.randrange(5)
        else:
            copy[key] = _mutate(copy[key], rng)
        return copy
    if isinstance(value, list) and value and rng.random() < 0.7:
        index = rng.randrange(len(value))
        return [*value[:index], _mutate(value[index], rng), *value[index + 1 :]]
    return rng.choice(
        [None, -1, 0, 7, 2**63, "", "m0", "x" * 300, [], {}, 1.5, True, b"\xff", [1, "a"]]
    )


fuzz_frames = st.one_of(
    st.binary(max_size=200),
    st.builds(
        lambda index, seed: msgpack.packb(
            _mutate(
                {
                    "v": 1,
                    "id": f"fz{seed}",
                    "type": VALID_MESSAGES[index][0],
                    "body": VALID_MESSAGES[index][1],
                },
                random.Random(seed),
            ),
            use_bin_type=True,
        ),
        st.integers(0, len(VALID_MESSAGES) - 1),
        st.integers(0, 2**32),
    ),
)


def test_fuzzed_messages_leave_a_valid_state_that_replays(tmp_path: Path) -> None:
    served = Running(DaemonConfig(bind="tcp://127.0.0.1:*", journal=tmp_path / "j"))
    try:
        with Client(served.endpoint) as client:
            client.add_machines(machines(3))
            for task_id in range(10):
                client.submit_task(task_id, "j")
            client.schedule()
        socket = zmq.Context.instance().socket(zmq.DEALER)
        socket.setsockopt(zmq.LINGER, 0)
        socket.connect(served.endpoint)
        service = served.daemon.service
        sent = {"count": 0}

        @settings(
            max_examples=100,
            deadline=None,
            suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
        )
        @given(st.lists(fuzz_frames, min_size=10, max_size=60))
        def send_all(frames: list[bytes]) -> None:
            for frame in frames:
                seq = service.seq
                socket.send(frame)
                assert socket.poll(5000), "the daemon stopped answering"
                _, status, reason, _ = decode_reply(socket.recv())
                sent["count"] += 1
                if status is not Status.OK:
                    assert reason and service.seq == seq, (frame[:40], status, reason)
                else:
                    assert service.seq in (seq, seq + 1)

        send_all()
        socket.close()
        assert sent["count"] >= 1000
        service.cluster.validate()
        with Client(served.endpoint) as client:
            client.submit_task(10_000, "after")
            assert client.status()["tasks"] == len(service.cluster.tasks)
        expected = fingerprint(service)
    finally:
        served.stop()
    restarted = SchedulingDaemon(DaemonConfig(bind="tcp://127.0.0.1:*", journal=tmp_path / "j"))
    try:
        assert fingerprint(restarted.service) == expected
    finally:
        restarted.close()


def test_retries_are_applied_once_even_across_a_restart(tmp_path: Path) -> None:
    config = DaemonConfig(bind="tcp://127.0.0.1:*", journal=tmp_path / "j")
    served = Running(config)
    with Client(served.endpoint) as client:
        client.add_machines(machines(1))
        first = client.request("task_submitted", {"task_id": 1, "job_id": "j"}, request_id="s1")
        again = client.request("task_submitted", {"task_id": 1, "job_id": "j"}, request_id="s1")
        assert first == again
    served.stop()
    served = Running(config)
    try:
        with Client(served.endpoint) as client:
            reply = client.request("task_submitted", {"task_id": 1, "job_id": "j"}, request_id="s1")
            assert reply == first
            assert client.status()["tasks"] == 1
    finally:
        served.stop()


def test_a_restart_recovers_the_acknowledged_state(tmp_path: Path) -> None:
    config = DaemonConfig(bind="tcp://127.0.0.1:*", journal=tmp_path / "j", snapshot_every=7)
    served = Running(config)
    with Client(served.endpoint, timeout=20) as client:
        client.add_machines(machines(4))
        for task_id in range(20):
            client.submit_task(task_id, f"j{task_id % 3}")
        client.schedule()
        for task_id in range(0, 20, 3):
            client.remove_task(task_id)
        client.fail_machine("m0")
        # Snapshots were written in the background while serving, each replacing the last.
        # One that was due may start in the very turn that answers "none in progress" (the
        # reply is made before the turn's records are committed), so wait for the quiet end.
        deadline = time.monotonic() + 20
        while True:
            status = client.status()
            snapshots = list((tmp_path / "j").glob("snapshot-*.pickle"))
            if not status["snapshot_in_progress"] and len(snapshots) == 1:
                break
            assert time.monotonic() < deadline, f"snapshots never settled: {snapshots}"
            time.sleep(0.02)
        assert status["snapshot_failures"] == 0
        (snapshot,) = snapshots
        assert 0 < int(snapshot.stem.split("-")[1]) <= status["seq"]
    expected = fingerprint(served.daemon.service)
    served.stop()
    assert list((tmp_path / "j").glob("snapshot-*.pickle"))
    restarted = SchedulingDaemon(config)
    try:
        assert fingerprint(restarted.service) == expected
        restarted.service.cluster.validate()
        tasks = restarted.service.cluster.tasks.values()
        assert not any(t.machine_id == "m0" for t in tasks if t.state is TaskState.RUNNING)
    finally:
        restarted.close()


def test_auto_scheduled_rounds_are_published(tmp_path: Path) -> None:
    publish = "tcp://127.0.0.1:" + str(_free_port())
    config = DaemonConfig(
        bind="tcp://127.0.0.1:*", journal=tmp_path / "j", publish=publish, auto_schedule_ms=50
    )
    served = Running(config)
    subscriber = zmq.Context.instance().socket(zmq.SUB)
    subscriber.setsockopt(zmq.LINGER, 0)
    subscriber.setsockopt(zmq.SUBSCRIBE, b"deltas")
    subscriber.connect(publish)
    try:
        time.sleep(0.3)  # let the subscription reach the publisher
        with Client(served.endpoint) as client:
            client.add_machines(machines(2))
            for task_id in range(3):
                client.submit_task(task_id, "j")
        placed: set[int] = set()
        deadline = time.monotonic() + 30
        while len(placed) < 3 and time.monotonic() < deadline:
            if subscriber.poll(1000):
                _topic, payload = subscriber.recv_multipart()
                body = msgpack.unpackb(payload, raw=False)
                placed.update(item[1] for item in body["deltas"] if item[0] == "place")
        assert placed == {0, 1, 2}
    finally:
        subscriber.close()
        served.stop()


def _free_port() -> int:
    socket = zmq.Context.instance().socket(zmq.REP)
    port = socket.bind_to_random_port("tcp://127.0.0.1")
    socket.close(linger=0)
    return port


def test_curve_serves_allowed_clients_only(tmp_path: Path) -> None:
    server_dir, client_dir = tmp_path / "server", tmp_path / "client"
    generate_key_pair(server_dir, "server")
    public, secret = generate_key_pair(client_dir, "alice")
    authorise_client(server_dir, public)
    generate_key_pair(tmp_path / "mallory", "mallory")
    config = DaemonConfig(
        bind="tcp://127.0.0.1:*",
        journal=tmp_path / "j",
        curve=CurveServerKeys.load(server_dir),
    )
    served = Running(config)
    try:
        alice = CurveClientKeys.load(secret, server_dir / "server.key")
        with Client(served.endpoint, curve=alice) as client:
            assert client.status()["protocol"] == 1
            client.add_machines(machines(1))
        mallory = CurveClientKeys.load(
            tmp_path / "mallory" / "mallory.key_secret", server_dir / "server.key"
        )
        for keys in (mallory, None):
            with (
                Client(served.endpoint, curve=keys, timeout=0.5, retries=1) as client,
                pytest.raises(DaemonTimeout),
            ):
                evil = MachineSpec("evil", Resources(), 1).to_wire()
                client.request("node_added", {"machines": [evil]})
        assert "evil" not in served.daemon.service.cluster.machines
    finally:
        served.stop()


def test_only_this_user_can_reach_the_scheduling_process_socket(tmp_path: Path) -> None:
    """Whoever connects there first is sent the cluster's state and has its decisions applied:
    the socket is a Unix socket in a directory of this user's alone, removed on close."""
    daemon = SchedulingDaemon(DaemonConfig(bind="tcp://127.0.0.1:*", journal=tmp_path / "j"))
    try:
        endpoint = daemon.link.endpoint
        assert endpoint.startswith("ipc://")
        path = endpoint.removeprefix("ipc://")
        directory = Path(path).parent
        assert Path(path).exists()
        info = directory.stat()
        assert stat.S_IMODE(info.st_mode) == 0o700
        assert info.st_uid == os.geteuid()
        if os.geteuid() == 0:  # as root the test can be another user: it is refused
            child = os.fork()
            if child == 0:  # pragma: no cover - the child process
                code = 2  # could not become another user: nothing shown
                try:
                    os.setgroups([])
                    os.setgid(65534)
                    os.setuid(65534)
                    code = 1  # reached the socket
                    with socket.socket(socket.AF_UNIX) as probe:
                        probe.connect(path)
                except PermissionError:
                    if code == 1:
                        code = 0
                finally:
                    os._exit(code)
            _, status = os.waitpid(child, 0)
            code = os.waitstatus_to_exitcode(status)
            if code == 2:
                pytest.skip("root here cannot become another user")
            assert code == 0, "another user reached the socket"
    finally:
        daemon.close()
    assert not directory.exists()


def test_a_long_temporary_directory_gives_the_socket_a_short_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Unix socket's path is at most 107 bytes: under a longer TMPDIR the daemon still
    starts, with its socket under /tmp."""
    long = tmp_path / ("d" * 60) / ("e" * 60)
    long.mkdir(parents=True)
    monkeypatch.setattr(tempfile, "tempdir", str(long))
    served = Running(DaemonConfig(bind="tcp://127.0.0.1:*", journal=tmp_path / "j"))
    try:
        assert served.daemon.link.endpoint.startswith("ipc:///tmp/firmament-py-")
        assert list(long.iterdir()) == []  # the long one was tried and removed
        with Client(served.endpoint) as client:
            client.add_machines(machines(1))
            client.submit_task(1, "j")
            assert [d.task for d in client.schedule().deltas] == [1]
    finally:
        served.stop()


def test_a_journal_directory_that_cannot_be_made_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("not a directory")
    journal = tmp_path / "a-file" / "journal"
    with pytest.raises(JournalError, match=r"cannot use .*a-file/journal for the journal"):
        SchedulingDaemon(DaemonConfig(bind="tcp://127.0.0.1:*", journal=journal))
    result = CliRunner().invoke(cli.main, ["serve", "--journal", str(journal)])
    assert result.exit_code == 1
    assert "cannot use" in result.output and "Traceback" not in result.output


def test_keys_are_named_plainly_and_only_public_keys_are_authorised(tmp_path: Path) -> None:
    server, client = tmp_path / "server", tmp_path / "client"
    generate_key_pair(server, "server")
    public, secret = generate_key_pair(client, "alice")
    for name in ("", ".hidden", "../evil", "a/b"):
        with pytest.raises(KeyFileError, match="plain file name"):
            generate_key_pair(client, name)
    assert not (tmp_path / "evil.key").exists()
    with pytest.raises(KeyFileError, match="holds a secret key"):
        authorise_client(server, secret)
    with pytest.raises(KeyFileError, match="no server key pair"):
        authorise_client(tmp_path / "typo", public)
    assert not (tmp_path / "typo").exists()
    assert not (server / "clients").exists()  # nothing was copied
    assert authorise_client(server, public) == server / "clients" / "alice.key"
    result = CliRunner().invoke(cli.main, ["keys", "authorise", str(server), str(secret)])
    assert result.exit_code == 1 and "holds a secret key" in result.output


def test_binding_beyond_loopback_needs_keys(tmp_path: Path) -> None:
    for bind in ("tcp://0.0.0.0:7199", "tcp://*:7199", "tcp://10.1.2.3:7199"):
        with pytest.raises(DaemonError, match="CURVE"):
            SchedulingDaemon(DaemonConfig(bind=bind, journal=tmp_path / "j"))


@pytest.mark.parametrize("bind", ["garbage", "127.0.0.1:7100", "http://127.0.0.1:7100"])
def test_a_bind_that_is_no_endpoint_is_named_so(tmp_path: Path, bind: str) -> None:
    with pytest.raises(DaemonError, match="is not a ZeroMQ endpoint"):
        SchedulingDaemon(DaemonConfig(bind=bind, journal=tmp_path / "j"))
    with pytest.raises(DaemonError, match="is not a ZeroMQ endpoint"):
        SchedulingDaemon(DaemonConfig(bind="tcp://127.0.0.1:*", publish=bind, journal=tmp_path))
    assert not (tmp_path / "j").exists()  # refused before anything was made


def test_a_pipelined_burst_is_applied_in_order_and_answered_each(running: Running) -> None:
    with Client(running.endpoint) as client:
        client.add_machines(machines(2))
        burst = [("task_submitted", {"task_id": i, "job_id": "j"}) for i in range(300)]
        burst += [("task_removed", {"task_id": i}) for i in range(0, 300, 2)]
        burst.append(("task_completed", {"task_id": 99_999}))  # answered, not raised
        answers = client.pipeline(burst, window=32)
        assert [a.status for a in answers[:-1]] == [Status.OK] * (len(burst) - 1)
        assert answers[-1].status is Status.NOT_FOUND
        seqs = [a.body["seq"] for a in answers[:-1]]
        assert seqs == sorted(seqs)
        assert client.status()["tasks"] == 150


def test_a_batch_over_the_socket(running: Running) -> None:
    with Client(running.endpoint) as client:
        client.add_machines(machines(2))
        answers = client.batch(
            [("task_submitted", {"task_id": i, "job_id": "j"}) for i in range(500)]
            + [("task_completed", {"task_id": 0})]  # not running: refused, answered
        )
        assert [a.status for a in answers[:-1]] == [Status.OK] * 500
        assert answers[-1].status is Status.INVALID
        assert client.status()["tasks"] == 500


def test_one_journal_one_daemon_and_a_taken_port_is_an_error(tmp_path: Path) -> None:
    served = Running(DaemonConfig(bind="tcp://127.0.0.1:*", journal=tmp_path / "j"))
    try:
        with pytest.raises(JournalError, match="in use by another process"):
            SchedulingDaemon(DaemonConfig(bind="tcp://127.0.0.1:*", journal=tmp_path / "j"))
        with pytest.raises(DaemonError, match="cannot bind"):
            SchedulingDaemon(DaemonConfig(bind=served.endpoint, journal=tmp_path / "other"))
        assert not (tmp_path / "other").exists()  # the failed start left no empty journal
        (tmp_path / "kept").mkdir()
        with pytest.raises(DaemonError, match="cannot bind"):
            SchedulingDaemon(DaemonConfig(bind=served.endpoint, journal=tmp_path / "kept"))
        assert (tmp_path / "kept").is_dir()  # one that was there before stays
        # The failed daemon released its journal: another can open it.
        SchedulingDaemon(DaemonConfig(bind="tcp://127.0.0.1:*", journal=tmp_path / "kept")).close()
    finally:
        served.stop()


def test_a_dead_scheduling_process_is_restarted(running: Running) -> None:
    with Client(running.endpoint, timeout=20) as client:
        client.add_machines(machines(1))
        client.submit_task(1, "j")
        process = running.daemon.link.process
        assert process is not None
        process.kill()
        process.wait()
        deadline = time.monotonic() + 20
        while client.status()["worker_alive"] is False or running.daemon.link.process is process:
            assert time.monotonic() < deadline, "the scheduling process was not restarted"
            time.sleep(0.05)
        placed = client.schedule()
        assert [d.task for d in placed.deltas] == [1]


def test_a_scheduling_process_that_dies_before_connecting_does_not_hang_the_daemon(
    running: Running, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One that cannot even connect (a broken solver, a broken install): the daemon serves on,
    starts another at most once a second, and stops when asked (it used to wait forever for
    the connection, deaf to SIGTERM)."""
    daemon = running.daemon
    started: list[float] = []

    def broken() -> list[str]:
        started.append(time.monotonic())
        return [sys.executable, "-c", "raise SystemExit(3)"]

    with Client(running.endpoint, timeout=20) as client:
        client.add_machines(machines(1))
        client.submit_task(1, "j")
        monkeypatch.setattr(daemon.link, "command", broken)
        process = daemon.link.process
        assert process is not None
        process.kill()
        process.wait()
        time.sleep(2.5)
        assert client.status()["tasks"] == 1  # still serving
        client.submit_task(2, "j")
        assert 1 <= len(started) <= 4  # at most one start a second
        assert all(b - a >= 0.9 for a, b in itertools.pairwise(started))
        monkeypatch.undo()  # a scheduling process that works again
        placed = client.schedule()  # waits for it to connect and get the state
        assert sorted(d.task for d in placed.deltas) == [1, 2]


@pytest.mark.parametrize("worker", ["import time; time.sleep(60)", "raise SystemExit(3)"])
def test_a_daemon_waiting_for_its_scheduling_process_does_not_spin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, worker: str
) -> None:
    """While no scheduling process has said hello (one still starting, or none between
    restarts) no round can start: the loop waits in its poll, not in a turn a microsecond
    (it used to turn tens of thousands of times a second, a core's worth, until the hello)."""
    monkeypatch.setattr(WorkerLink, "command", lambda self: [sys.executable, "-c", worker])
    turns = 0
    serve_once = SchedulingDaemon.serve_once

    def counted(self: SchedulingDaemon, timeout_ms: int = 0) -> None:
        nonlocal turns
        turns += 1
        serve_once(self, timeout_ms)

    monkeypatch.setattr(SchedulingDaemon, "serve_once", counted)
    config = DaemonConfig(bind="tcp://127.0.0.1:*", journal=tmp_path / "j", auto_schedule_ms=10)
    served = Running(config)
    try:
        with Client(served.endpoint, timeout=20) as client:
            client.add_machines(machines(1))
            client.submit_task(1, "j")
            turns = 0
            time.sleep(1.5)
            assert client.status()["tasks"] == 1  # serving all along
    finally:
        served.stop()
    assert turns < 100


def test_a_removed_socket_file_is_made_again_for_the_next_scheduling_process(
    running: Running,
) -> None:
    """Cleaners of old files in /tmp may remove the socket's file: the connected process
    does not notice, but a new one could never connect to it."""
    daemon = running.daemon
    old = daemon.link.endpoint
    shutil.rmtree(Path(old.removeprefix("ipc://")).parent)
    with Client(running.endpoint, timeout=20) as client:
        client.add_machines(machines(1))
        process = daemon.link.process
        assert process is not None
        process.kill()
        process.wait()
        client.submit_task(1, "j")
        assert [d.task for d in client.schedule().deltas] == [1]
    assert daemon.link.endpoint != old
    assert Path(daemon.link.endpoint.removeprefix("ipc://")).exists()


@pytest.mark.parametrize(
    ("option", "message"),
    [({"policy": "nosuch"}, "unknown policy 'nosuch'"), ({"solver": "nosuch"}, "unknown solver")],
)
def test_a_policy_or_solver_the_scheduling_process_cannot_build_is_refused(
    tmp_path: Path, option: dict[str, str], message: str
) -> None:
    with pytest.raises(DaemonError, match=message):
        SchedulingDaemon(DaemonConfig(bind="tcp://127.0.0.1:*", journal=tmp_path / "j", **option))
    with pytest.raises(DaemonError, match="bad options"):
        SchedulingDaemon(
            DaemonConfig(
                bind="tcp://127.0.0.1:*", journal=tmp_path / "j", solver_options={"nope": 1}
            )
        )


def test_a_round_is_applied_a_chunk_per_turn_journaled_and_answered_whole(tmp_path: Path) -> None:
    config = DaemonConfig(bind="tcp://127.0.0.1:*", journal=tmp_path / "j", decision_chunk=2)
    served = Running(config)
    try:
        with Client(served.endpoint, timeout=20) as client:
            client.add_machines(machines(4))
            for task_id in range(7):
                client.submit_task(task_id, "j")
            first = client.schedule()
            # A chunk's record is flushed with the next turn's replies, not on its own, but the
            # round's answer goes out only once every chunk is in the journal: the daemon is
            # idle now, so what the journal's files hold is what a `kill -9` would keep.
            copy = tmp_path / "copy"
            shutil.copytree(tmp_path / "j", copy)
            state = recovered(copy)
            running = {t.task_id for t in state.cluster.tasks.values() if t.machine_id}
            assert running == {d.task for d in first.deltas} == set(range(7))
            assert sorted(d.task for d in first.deltas) == list(range(7))
            assert first.refused == []
            seq = client.status()["seq"]
            assert seq == 1 + 7 + 1 + 4  # machines, submissions, the round, four chunks
            client.complete_task(first.deltas[0].task)
            for task_id in (7, 8, 9):
                client.submit_task(task_id, "j")
            second = client.schedule()  # the replica followed every chunk: two slots free
            assert len(second.deltas) == 2 and {d.task for d in second.deltas} < {7, 8, 9}
            assert client.status()["running"] == 8
    finally:
        served.stop()
    served.daemon.service.cluster.validate()


def test_chunks_keep_the_order_decisions_are_applied_in() -> None:
    from firmament_py.flow.placement import SchedulingDelta
    from firmament_py.service.protocol import decision_to_wire
    from firmament_py.service.rounds import chunk_decisions as _chunks

    def wire(deltas: list[SchedulingDelta]) -> list[list[object]]:
        return [decision_to_wire(d) for d in deltas]

    place = wire([SchedulingDelta(DeltaKind.PLACE, i, None, "m") for i in range(5)])
    preempt = wire([SchedulingDelta(DeltaKind.PREEMPT, 10 + i, "m", None) for i in range(3)])
    migrate = wire([SchedulingDelta(DeltaKind.MIGRATE, 20 + i, "m", "n") for i in range(3)])
    chunks = _chunks(place[:2] + migrate + preempt + place[2:], 2)
    assert chunks == [preempt[:2], preempt[2:], migrate, place[:2], place[2:4], place[4:]]


def test_chunks_refuse_a_malformed_decision_before_any_is_applied() -> None:
    from firmament_py.service.rounds import chunk_decisions as _chunks

    good = ["place", 1, None, "m"]
    for bad in (
        ["teleport", 2, None, "m"],
        ["place", 2, None],
        ("place", 2, None, "m"),
        None,
        [["place"], 2, None, "m"],  # an unhashable kind
    ):
        with pytest.raises(ValueError, match="kind, task, from, to"):
            _chunks([good, bad], 256)
    for inconsistent in (
        ["place", 2, "m0", "m1"],
        ["migrate", 2, "m", "m"],
        ["preempt", 2, None, None],
    ):
        with pytest.raises(ValueError, match="task 2"):
            _chunks([good, inconsistent], 256)
    with pytest.raises(ValueError, match="must be a list"):
        _chunks({"place": 1}, 256)


class _AnswerOnce:
    """Stands in for the socket to the scheduling process: yields one `decided` message."""

    def __init__(self, message: list[bytes]) -> None:
        self.messages = [message]

    def recv_multipart(self, flags: int = 0) -> list[bytes]:
        if not self.messages:
            raise zmq.Again()
        return self.messages.pop(0)


@pytest.mark.parametrize(
    "deltas",
    [[["place", 1, "m0", "m1"]], [["migrate", 1, "m0", "m0"]], [[["place"], 1, None, "m0"]]],
)
def test_a_bad_decision_loses_its_round_and_nothing_else(tmp_path: Path, deltas: object) -> None:
    """A scheduling process that sends an impossible decision (a bug) gets its round answered
    `error`; nothing of the round is applied and the daemon serves on (a reviewer's reproducer:
    such a decision once escaped the loop and stopped the daemon)."""
    import msgpack

    from firmament_py.service.daemon import SchedulingDaemon
    from firmament_py.service.daemon_rounds import RoundInFlight

    daemon = SchedulingDaemon(DaemonConfig(bind="tcp://127.0.0.1:*", journal=tmp_path / "j"))
    try:
        seq = daemon.service.seq
        daemon._round = RoundInFlight(1, [], time.monotonic())
        answer = {"round": 1, "deltas": deltas, "cost": 0, "algorithm": "x", "timings": {}}
        real = daemon.link.socket
        daemon.link.socket = _AnswerOnce([b"decided", msgpack.packb(answer)])  # type: ignore[assignment]
        try:
            daemon._serve_worker()
        finally:
            daemon.link.socket = real
        assert daemon._round is None  # answered (with an error), not left hanging
        assert daemon.rounds == 0
        assert daemon.service.seq == seq
        daemon.serve_once(0)  # and the loop turns on
    finally:
        daemon.close()


def test_tasks_and_machines_are_listed_page_by_page(tmp_path: Path) -> None:
    from firmament_py.service import ListedMachine

    config = DaemonConfig(bind="tcp://127.0.0.1:*", journal=tmp_path / "j")
    served = Running(config)
    try:
        with Client(served.endpoint, timeout=20) as client:
            client.add_machines(machines(3))
            for task_id in (5, 1, 9, 3, 7, 2, 8):
                client.submit_task(task_id, f"j{task_id % 2}")
            placed = {d.task: d.to_machine for d in client.schedule().deltas}
            listed = list(client.tasks(page=2))
            assert [t.task_id for t in listed] == [1, 2, 3, 5, 7, 8, 9]
            for task in listed:
                assert task.job_id == f"j{task.task_id % 2}"
                assert task.machine_id == placed.get(task.task_id)
                running = task.task_id in placed
                assert task.state is (TaskState.RUNNING if running else TaskState.RUNNABLE)
            waiting = [t.task_id for t in client.tasks(state=TaskState.RUNNABLE, page=1)]
            assert waiting == sorted(set(listed_id.task_id for listed_id in listed) - set(placed))
            on_m1 = [t.task_id for t in client.tasks(machine_id="m1")]
            assert on_m1 == sorted(t for t, m in placed.items() if m == "m1")
            assert list(client.machines(page=2)) == [
                ListedMachine(
                    f"m{i}", f"r{i % 2}", "pod-0", 2, sum(m == f"m{i}" for m in placed.values())
                )
                for i in range(3)
            ]
            with pytest.raises(RequestFailed) as info:
                list(client.tasks(machine_id="nowhere"))
            assert info.value.status is Status.NOT_FOUND
            for bad in ({"state": "sleeping"}, {"limit": 0}, {"limit": 10_001}, {"after": -1}):
                with pytest.raises(RequestFailed) as info:
                    client.request("tasks", bad)
                assert info.value.status is Status.INVALID
    finally:
        served.stop()


WORKER_GC_PROBE = """
import gc, pickle, threading, zmq
from firmament_py.model.cluster import ClusterState
from firmament_py.collector import YOUNG_COLLECTION_THRESHOLD
from firmament_py.service.round_worker import run_worker
socket = zmq.Context.instance().socket(zmq.PAIR)
socket.setsockopt(zmq.RCVTIMEO, 60_000)  # a worker that fails to start: an error, not a hang
port = socket.bind_to_random_port("tcp://127.0.0.1")
worker = threading.Thread(target=run_worker, args=(f"tcp://127.0.0.1:{port}",), daemon=True)
worker.start()
options = {"policy": "trivial", "solver": "cost-scaling", "solver_options": {}}
try:
    assert socket.recv_multipart() == [b"hello"]
    for _ in range(2):  # a second init unfreezes the first replica and freezes the new one
        socket.send_multipart([b"init", pickle.dumps(ClusterState()), pickle.dumps(options)])
        assert socket.recv_multipart() == [b"ready"]
        print(gc.get_freeze_count() > 10_000, gc.get_threshold()[0] == YOUNG_COLLECTION_THRESHOLD)
finally:
    socket.send_multipart([b"stop"])
    worker.join(30)
"""


def test_the_scheduling_process_keeps_the_collector_off_its_replica() -> None:
    """After `init` the replica and the imports are frozen out of the cyclic collector's sight
    and young collections are rarer (see `round_worker`'s docstring); in a fresh interpreter,
    since both settings are the whole process's."""
    done = subprocess.run(
        [sys.executable, "-c", WORKER_GC_PROBE], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True"] * 2


def test_requests_right_after_the_scheduling_process_dies_are_answered(
    running: Running,
) -> None:
    """Its socket has no peer then, and a send to a PAIR socket without one waits for a peer:
    forwarding the requests' records must not (the daemon would stop for good). Here the
    daemon's process handle shows a live process that is not connected, as a real one shows
    between its death and the loop noticing it."""
    daemon = running.daemon
    with Client(running.endpoint, timeout=20, retries=0) as client:
        client.add_machines(machines(1))
        client.schedule()  # the scheduling process is connected and has the state
        process = daemon.link.process
        assert process is not None
        stand_in = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        try:
            daemon.link.process = stand_in
            process.kill()
            process.wait()
            time.sleep(0.3)  # ZeroMQ notices the closed connection
            for task_id in range(5):
                client.submit_task(task_id, "j")
            assert client.status()["tasks"] == 5
            assert stand_in.wait(10) != 0  # ended by the daemon: not connected
            placed = client.schedule()  # a new scheduling process, sent the state with all five
            # One machine, two slots: two of the five, whichever ties the solver breaks for.
            placed_ids = {d.task for d in placed.deltas}
            assert len(placed_ids) == 2 and placed_ids <= set(range(5))
            assert client.status()["waiting"] == 3
        finally:
            stand_in.kill()
            stand_in.wait()
