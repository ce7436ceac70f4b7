"""Rounds the daemon journals (firmament_py/service/rounds.py, state.py, daemon.py): a round
cut short by a crash is finished after the restart and answered whole, under its own number,
to the `schedule` ids that waited for it; round numbers never repeat; a `schedule` request's
id names that request alone (issue 35, bugs 1 and 6).

The service state is driven directly first (every place a crash can cut a round, replayed
from the records journaled up to it), then a daemon in this process: stopped by hand in the
middle of a round, its journal copied as a `kill -9` would leave it, and a daemon started on
the copy. `tests/test_service_crash.py` does the same with a real `kill -9`.
"""

from __future__ import annotations

import pickle
import shutil
import time
from pathlib import Path
from typing import Any

import msgpack
import pytest
import zmq

from firmament_py.model.states import TaskState
from firmament_py.service import Client, DaemonConfig, RequestFailed, SchedulingDaemon, Status
from firmament_py.service.protocol import decode_reply, encode_request
from firmament_py.service.rounds import RoundAnswer
from firmament_py.service.state import ReplayError, ServiceState

from .test_service_crash import recovered
from .test_service_daemon import Running, machines
from .test_service_protocol import fingerprint, request

SUMMARY = {"cost": 7, "algorithm": "test", "timings": {"solve": 1.0}, "task_errors": []}


def _cluster(tasks: int = 10) -> tuple[ServiceState, list[dict[str, Any]]]:
    """Three machines of three slots and `tasks` waiting tasks: the state and its records."""
    service = ServiceState()
    specs = [
        {"machine_id": f"m{i}", "capacity": {"cpu_millicores": 4000}, "slots": 3} for i in range(3)
    ]
    records = [service.apply_request(request("node_added", {"machines": specs}, "add"), 1)[1]]
    for task_id in range(tasks):
        body = {"task_id": task_id, "job_id": "j"}
        records.append(service.apply_request(request("task_submitted", body, f"t{task_id}"), 2)[1])
    assert all(record is not None for record in records)
    return service, [record for record in records if record is not None]


def _decided(tasks: int = 10) -> dict[str, Any]:
    """A round placing tasks round-robin on the three machines (nine slots: the tenth task is
    refused, a machine full) and one placement on a machine that does not exist."""
    deltas = [["place", task_id, None, f"m{task_id % 3}"] for task_id in range(tasks)]
    return {"deltas": [*deltas, ["place", 99, None, "nowhere"]], **SUMMARY}


def _finish(service: ServiceState, size: int, records: list[dict[str, Any]]) -> RoundAnswer:
    """Apply the round in progress to its end, a chunk of `size` at a time."""
    while True:
        record, answer = service.apply_round_chunk(size, 10, round_ms=5.0)
        records.append(record)
        if answer is not None:
            return answer


def test_a_round_cut_anywhere_is_finished_to_the_answer_it_would_have_had() -> None:
    live, records = _cluster()
    base = len(records)
    record, answer = live.begin_round(1, ["s1"], _decided(), 5, round_ms=0.0)
    assert answer is None
    records.append(record)
    whole = _finish(live, 2, records)
    assert whole.status == "ok" and whole.body["round"] == 1
    placed = [delta[1] for delta in whole.body["deltas"]]
    assert sorted(placed) == sorted(set(placed)) and len(placed) == 9
    assert [item[0][1] for item in whole.body["refused"]] == [9, 99]  # m0 full; no such machine
    for cut in range(base, len(records)):
        restarted = ServiceState()
        restarted.replay(pickle.loads(pickle.dumps(records[:cut])))
        if cut == base:  # the round's record never reached the journal: it never happened
            assert restarted.rounds.current is None and restarted.rounds.last == 0
            assert not any(t.state is TaskState.RUNNING for t in restarted.cluster.tasks.values())
            continue
        assert restarted.rounds.current is not None, cut
        retry = restarted.schedule_retry("s1")
        assert retry is not None and retry.reply is None  # it waits for the round to finish
        finished = _finish(restarted, 2, [])
        assert finished == whole, cut
        assert fingerprint(restarted) == fingerprint(live)
        assert restarted.rounds.last == 1


def test_a_resumed_round_refuses_what_happened_since_the_crash() -> None:
    """Events journaled between the round's chunks and the crash stand: the rest of the round
    is applied to the state as it is, and refused where they made it moot."""
    service, _ = _cluster()
    service.begin_round(1, ["s1"], _decided(), 5, round_ms=0.0)
    record, answer = service.apply_round_chunk(2, 6, round_ms=0.0)
    assert answer is None and record["done"] == 2
    removed, _ = service.apply_request(request("task_removed", {"task_id": 5}, "rm5"), 7)
    assert removed.status is Status.OK
    finished = _finish(service, 2, [])
    placed = {delta[1] for delta in finished.body["deltas"]}
    assert 5 not in placed and {0, 1} <= placed
    refused = {item[0][1]: item[1] for item in finished.body["refused"]}
    assert 5 in refused and 99 in refused


def test_round_numbers_follow_the_last_journaled_one() -> None:
    service, _ = _cluster()
    service.begin_round(3, [], {"deltas": [], **SUMMARY}, 5, round_ms=1.0)
    assert service.rounds.last == 3 and service.rounds.current is None
    seq = service.seq
    for stale in (1, 3):
        with pytest.raises(ValueError, match="not a later one"):
            service.begin_round(stale, [], _decided(), 6, round_ms=0.0)
    assert service.seq == seq
    service.begin_round(4, [], _decided(), 6, round_ms=0.0)
    with pytest.raises(ValueError, match="in progress"):
        service.begin_round(5, [], _decided(), 6, round_ms=0.0)


def test_a_round_in_progress_survives_a_snapshot() -> None:
    service, _ = _cluster()
    service.begin_round(1, ["s1"], _decided(), 5, round_ms=0.0)
    service.apply_round_chunk(4, 6, round_ms=0.0)
    restored = ServiceState.from_snapshot(pickle.loads(pickle.dumps(service.snapshot())))
    assert _finish(restored, 4, []) == _finish(service, 4, [])
    again = ServiceState.from_snapshot(pickle.loads(pickle.dumps(restored.snapshot())))
    retry = again.schedule_retry("s1")
    assert retry is not None and retry.reply is not None
    assert retry.reply.body["round"] == 1 and len(retry.reply.body["deltas"]) == 9


def test_a_chunk_that_does_not_follow_is_a_replay_error() -> None:
    service, records = _cluster()
    round_record, _ = service.begin_round(1, [], _decided(), 5, round_ms=0.0)
    chunk, _ = service.apply_round_chunk(2, 6, round_ms=0.0)
    fresh = ServiceState()
    fresh.replay(records)  # the round's own record lost
    before = fingerprint(fresh)
    with pytest.raises(ReplayError, match="a chunk of round 1 while no round is in progress"):
        fresh.replay([{**chunk, "seq": fresh.seq + 1}])
    assert fingerprint(fresh) == before  # refused before any of its decisions was applied
    fresh.replay([round_record])
    with pytest.raises(ReplayError, match="a chunk of round 2 while round 1 is in progress"):
        fresh.replay([{**chunk, "round": 2}])
    with pytest.raises(ReplayError, match="up to decision 99 follows decision 0 of 11"):
        fresh.replay([{**chunk, "done": 99}])
    assert fingerprint(fresh)[:2] == before[:2]  # the round's record moved the seq alone


def test_a_schedule_id_names_that_request_alone() -> None:
    """Issue 35, bug 6: a `task_submitted` under a `schedule`'s id was applied."""
    service, _ = _cluster()
    service.begin_round(1, ["s1"], _decided(3), 5, round_ms=0.0)
    _finish(service, 64, [])
    submitted, _ = service.apply_batch(
        request("batch", {"requests": [{"type": "task_submitted", "body": _task(50)}]}, "b1"), 20
    )
    assert submitted.body["answers"][0][0] == "ok"
    for restored in (
        service,
        ServiceState.from_snapshot(pickle.loads(pickle.dumps(service.snapshot()))),
    ):
        before = fingerprint(restored)
        reply, record = restored.apply_request(request("task_submitted", _task(40), "s1"), 21)
        assert (reply.status, record) == (Status.INVALID, None)
        assert "'s1' was used before for a different request" in reply.reason
        batch = {"requests": [{"type": "task_submitted", "body": _task(41)}]}
        reply, records = restored.apply_batch(request("batch", batch, "s1"), 21)
        assert (reply.status, records) == (Status.INVALID, [])
        reply, record = restored.apply_request(request("task_submitted", _task(42), "b1"), 21)
        assert reply.status is Status.INVALID and "used before for a batch" in reply.reason
        for used in ("t3", "b1"):  # a task_submitted's and a batch's ids are no schedule's
            retry = restored.schedule_retry(used)
            assert retry is not None and retry.reply is not None
            assert retry.reply.status is Status.INVALID
        retry = restored.schedule_retry("s1")
        assert retry is not None and retry.reply is not None
        assert (retry.reply.status, retry.reply.body["round"]) == (Status.OK, 1)
        assert restored.schedule_retry("fresh") is None
        assert fingerprint(restored) == before


def _task(task_id: int) -> dict[str, Any]:
    return {"task_id": task_id, "job_id": "j"}


def test_answers_are_kept_for_the_last_rounds_only() -> None:
    service, _ = _cluster(0)
    service.rounds.kept_answers = 2
    for round_id in (1, 2, 3):
        service.begin_round(round_id, [f"s{round_id}"], {"deltas": [], **SUMMARY}, 5, 1.0)
    gone = service.schedule_retry("s1")
    assert gone is not None and gone.reply is not None
    assert gone.reply.status is Status.NOT_FOUND and "no longer kept" in gone.reply.reason
    for kept in ("s2", "s3"):
        retry = service.schedule_retry(kept)
        assert retry is not None and retry.reply is not None
        assert retry.reply.status is Status.OK


# ---------------------------------------------------------------------- a daemon


class _Driver:
    """A daemon's loop turned by the test, and a raw connection to it."""

    def __init__(self, daemon: SchedulingDaemon) -> None:
        self.daemon = daemon
        self.socket = zmq.Context.instance().socket(zmq.DEALER)
        self.socket.setsockopt(zmq.LINGER, 0)
        self.socket.connect(daemon.endpoint)

    def send(self, request_id: str, kind: str, body: dict[str, Any] | None = None) -> None:
        self.socket.send(encode_request(request_id, kind, body))

    def turn_until(self, done: Any, what: str) -> None:
        deadline = time.monotonic() + 60
        while not done():
            assert time.monotonic() < deadline, f"never: {what}"
            self.daemon.serve_once(10)

    def answer(self, request_id: str) -> tuple[Status, str, dict[str, Any]]:
        """Turn the loop until the reply to `request_id` comes."""
        replies: dict[str, tuple[Status, str, dict[str, Any]]] = {}

        def came() -> bool:
            while self.socket.poll(0):
                reply_id, status, reason, body = decode_reply(self.socket.recv())
                replies[reply_id] = (status, reason, body)
            return request_id in replies

        self.turn_until(came, f"a reply to {request_id}")
        return replies[request_id]


def test_a_round_cut_short_is_finished_after_a_restart_and_answered_whole(
    tmp_path: Path,
) -> None:
    """Issue 35, bug 1, in this process: the daemon stops for good between two chunks of a
    round (after a reply showed the first one), its journal is copied as a `kill -9` would
    leave it, and a daemon on the copy answers the retried `schedule` id with every decision
    of the round, under its number; the next round is numbered after it."""
    config = DaemonConfig(bind="tcp://127.0.0.1:*", journal=tmp_path / "j", decision_chunk=4)
    daemon = SchedulingDaemon(config)
    try:
        driver = _Driver(daemon)
        specs = [machine.to_wire() for machine in machines(10, slots=4)]
        driver.send("add", "node_added", {"machines": specs})
        items = [{"type": "task_submitted", "body": _task(task_id)} for task_id in range(30)]
        driver.send("submit", "batch", {"requests": items})
        assert driver.answer("submit")[0] is Status.OK
        driver.turn_until(lambda: daemon.link.ready, "the scheduling process ready")
        driver.send("round-a", "schedule")
        cluster = daemon.service.cluster
        driver.turn_until(
            lambda: any(task.machine_id for task in cluster.tasks.values()), "a first chunk"
        )
        driver.send("look", "status")  # its reply goes out once the chunk is on disk
        status, _, body = driver.answer("look")
        assert status is Status.OK and body["round_in_flight"]
        crashed = tmp_path / "crashed"
        shutil.copytree(tmp_path / "j", crashed)  # what a kill -9 now would leave
        driver.socket.close()
    finally:
        daemon.close()
    at_crash = recovered(crashed)
    running_at_crash = {t.task_id for t in at_crash.cluster.tasks.values() if t.machine_id}
    assert 0 < len(running_at_crash) < 30, "not in the middle of the round"

    served = Running(DaemonConfig(bind="tcp://127.0.0.1:*", journal=crashed, decision_chunk=4))
    try:
        with Client(served.endpoint, timeout=20) as client:
            answer = client.request("schedule", request_id="round-a")
            placed = [delta[1] for delta in answer["deltas"]]
            assert answer["round"] == 1
            assert len(placed) == len(set(placed)) == 30
            running = {task.task_id for task in client.tasks(state=TaskState.RUNNING)}
            assert running == set(placed) and running_at_crash <= running
            assert client.request("schedule", request_id="round-a") == answer  # once
            client.submit_task(30, "j")
            after = client.schedule()
            assert after.round == 2 and [d.task for d in after.deltas] == [30]
    finally:
        served.stop()


def test_answers_and_round_numbers_survive_a_restart(tmp_path: Path) -> None:
    config = DaemonConfig(bind="tcp://127.0.0.1:*", journal=tmp_path / "j")
    served = Running(config)
    try:
        with Client(served.endpoint, timeout=20) as client:
            client.add_machines(machines(2))
            client.submit_task(1, "j")
            first = client.request("schedule", request_id="s1")
            assert first["round"] == 1 and [d[1] for d in first["deltas"]] == [1]
    finally:
        served.stop()
    served = Running(config)
    try:
        with Client(served.endpoint, timeout=20) as client:
            assert client.request("schedule", request_id="s1") == first
            assert client.schedule().round == 2
    finally:
        served.stop()


def test_a_schedule_id_is_no_other_requests_over_the_socket(tmp_path: Path) -> None:
    """Issue 35, bug 6: under the id of a `schedule`, answered or still waiting, another
    request is refused and not applied; a `schedule` under a used id likewise."""
    served = Running(DaemonConfig(bind="tcp://127.0.0.1:*", journal=tmp_path / "j"))
    try:
        with Client(served.endpoint, timeout=20) as client:
            client.add_machines(machines(1))
            client.request("schedule", request_id="s1")
            client.request("task_submitted", _task(7), request_id="t7")
            tasks = client.status()["tasks"]
            for kind, body, rid in (
                ("task_submitted", _task(8), "s1"),
                ("batch", {"requests": [{"type": "task_submitted", "body": _task(9)}]}, "s1"),
                ("schedule", {}, "t7"),
            ):
                with pytest.raises(RequestFailed) as info:
                    client.request(kind, body, request_id=rid)
                assert info.value.status is Status.INVALID
                assert "was used before for a different request" in info.value.reason
            assert client.status()["tasks"] == tasks
        # A schedule request still waiting for its round: one socket sends both at once.
        socket = zmq.Context.instance().socket(zmq.DEALER)
        socket.setsockopt(zmq.LINGER, 0)
        socket.connect(served.endpoint)
        try:
            socket.send(encode_request("s2", "schedule"))
            socket.send(encode_request("s2", "task_submitted", _task(10)))
            replies = []
            for _ in range(2):
                assert socket.poll(20_000), "no reply"
                replies.append(msgpack.unpackb(socket.recv(), raw=False))
        finally:
            socket.close()
        statuses = sorted(reply["status"] for reply in replies)
        assert statuses == ["invalid", "ok"]
        refused = next(reply for reply in replies if reply["status"] == "invalid")
        assert "request id 's2'" in refused["reason"]
        assert 10 not in served.daemon.service.cluster.tasks
    finally:
        served.stop()
