"""The daemon's protocol and its no-I/O core (firmament_py/service/protocol.py, state.py,
journal.py): frames are checked field by field, the service state applies requests whole or not
at all, replays its records into an equal state, answers retried request ids without applying
them twice, and the journal survives a cut tail but not silent corruption."""

from __future__ import annotations

import copy
import itertools
import logging
import pickle
from pathlib import Path
from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from firmament_py.flow.placement import DeltaKind, SchedulingDelta
from firmament_py.model.states import TaskState
from firmament_py.service.journal import Journal, JournalError
from firmament_py.service.protocol import (
    REQUEST_FIELDS,
    ProtocolError,
    Request,
    Status,
    decision_from_wire,
    decision_to_wire,
    decode_request,
    encode_request,
)
from firmament_py.service.state import ReplayError, ServiceState

MACHINE = {"machine_id": "m0", "capacity": {"cpu_millicores": 4000}, "slots": 2}


def request(kind: str, body: dict[str, Any], rid: str = "r") -> Request:
    return decode_request(encode_request(rid, kind, body))


def fingerprint(service: ServiceState) -> Any:
    """A comparable description of the cluster state."""
    cluster = service.cluster
    return (
        sorted((t.task_id, t.job_id, t.state.value, t.machine_id) for t in cluster.tasks.values()),
        sorted(
            (m.machine_id, m.rack_id, m.slots, m.capacity.as_tuple(), tuple(m.running_task_ids))
            for m in cluster.machines.values()
        ),
        service.seq,
    )


# ---------------------------------------------------------------------- frames


def test_a_request_round_trips() -> None:
    body = {
        "task_id": 7,
        "job_id": "j",
        "request": {"cpu_millicores": 500, "ram_bytes": 1 << 20},
        "priority": 3,
        "labels": {"team": "a"},
        "selectors": [{"key": "zone", "op": "in", "values": ["x", "y"]}],
    }
    decoded = request("task_submitted", body, "abc")
    assert decoded == Request("abc", "task_submitted", body)


@pytest.mark.parametrize(
    ("frame", "words"),
    [
        (b"\xc1", "not a msgpack message"),
        (msgpack.packb([1, 2]), "must be a map"),
        (msgpack.packb({"v": 2, "id": "a", "type": "status", "body": {}}), "protocol version"),
        (msgpack.packb({"v": 1, "id": "", "type": "status", "body": {}}), "id must be"),
        (msgpack.packb({"v": 1, "id": "a", "type": "nope", "body": {}}), "type must be one of"),
        (msgpack.packb({"v": 1, "id": "a", "type": "status", "x": 1}), "x is not a field"),
        (
            msgpack.packb({"v": 1, "id": "a", "type": "task_completed", "body": {}}),
            "body.task_id is missing",
        ),
        (
            msgpack.packb({"v": 1, "id": "a", "type": "task_completed", "body": {"task_id": "7"}}),
            "body.task_id must be an integer",
        ),
        (
            msgpack.packb({"v": 1, "id": "a", "type": "task_completed", "body": {"task_id": -1}}),
            "body.task_id must be in",
        ),
        (
            msgpack.packb(
                {"v": 1, "id": "a", "type": "task_removed", "body": {"task_id": 1, "why": 2}}
            ),
            "body.why is not a known field",
        ),
        (
            msgpack.packb(
                {
                    "v": 1,
                    "id": "a",
                    "type": "node_added",
                    "body": {"machines": [{**MACHINE, "capacity": {"gpus": 1}}]},
                }
            ),
            "body.machines[0].capacity.gpus is not a resource",
        ),
        (
            msgpack.packb(
                {
                    "v": 1,
                    "id": "a",
                    "type": "task_submitted",
                    "body": {
                        "task_id": 1,
                        "job_id": "j",
                        "selectors": [{"key": "k", "op": "~"}],
                    },
                }
            ),
            "body.selectors[0].op must be one of",
        ),
    ],
)
def test_malformed_frames_name_what_is_wrong(frame: bytes, words: str) -> None:
    with pytest.raises(ProtocolError, match=words.replace("[", r"\[").replace("]", r"\]")) as info:
        decode_request(frame)
    assert info.value.status is Status.INVALID


def test_the_request_id_survives_a_bad_body() -> None:
    frame = msgpack.packb({"v": 1, "id": "keep", "type": "task_completed", "body": {}})
    with pytest.raises(ProtocolError) as info:
        decode_request(frame)
    assert info.value.request_id == "keep"


json_like = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats()
    | st.text(max_size=8)
    | st.binary(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=64) | json_like.map(lambda v: msgpack.packb(v, use_bin_type=True)))
def test_garbage_decodes_or_is_refused_cleanly(frame: bytes) -> None:
    try:
        decode_request(frame)
    except ProtocolError as error:
        assert error.status is Status.INVALID and error.reason


# ---------------------------------------------------------------------- the service state


def test_requests_are_checked_against_the_state() -> None:
    service = ServiceState()
    reply, record = service.apply_request(request("node_added", {"machines": [MACHINE]}), 10)
    assert reply.status is Status.OK and record is not None and record["seq"] == 1
    cases = [
        ("node_added", {"machines": [MACHINE]}, Status.ALREADY_EXISTS),
        ("node_failed", {"machine_id": "nope"}, Status.NOT_FOUND),
        ("task_completed", {"task_id": 5}, Status.NOT_FOUND),
        ("task_stats", {"task_id": 5, "usage": {}}, Status.NOT_FOUND),
    ]
    before = fingerprint(service)
    for index, (kind, body, status) in enumerate(cases):
        reply, record = service.apply_request(request(kind, body, f"x{index}"), 20)
        assert (reply.status, record) == (status, None), kind
    assert fingerprint(service) == before


def test_a_multi_machine_request_applies_whole_or_not_at_all() -> None:
    service = ServiceState()
    service.apply_request(
        request("node_added", {"machines": [{**MACHINE, "rack_id": "r1", "pod_id": "p1"}]}), 1
    )
    before = fingerprint(service)
    bad = [
        {**MACHINE, "machine_id": "m1", "rack_id": "r2"},
        {**MACHINE, "machine_id": "m2", "rack_id": "r1", "pod_id": "p2"},  # r1 is in p1
    ]
    reply, record = service.apply_request(request("node_added", {"machines": bad}, "b"), 2)
    assert reply.status is Status.INVALID and "in pod 'p2'" in reply.reason and record is None
    duplicate = [{**MACHINE, "machine_id": "m3"}, {**MACHINE, "machine_id": "m3"}]
    reply, _ = service.apply_request(request("node_added", {"machines": duplicate}, "c"), 3)
    assert reply.status is Status.ALREADY_EXISTS
    assert fingerprint(service) == before


def test_a_retried_request_id_is_answered_not_applied() -> None:
    service = ServiceState()
    service.apply_request(request("node_added", {"machines": [MACHINE]}, "add"), 1)
    submit = request("task_submitted", {"task_id": 1, "job_id": "j"}, "sub")
    first, record = service.apply_request(submit, 2)
    again, second_record = service.apply_request(submit, 3)
    assert record is not None and second_record is None
    assert again.status is Status.OK and again.body == first.body
    # A different id for the same task is a real duplicate.
    other, _ = service.apply_request(request("task_submitted", {"task_id": 1, "job_id": "j"}), 4)
    assert other.status is Status.ALREADY_EXISTS


def test_a_used_request_id_with_a_different_request_is_refused_however_it_was_restored() -> None:
    """A client that reuses an id (its counter restarted, say) must not have its new request
    dropped as "already applied": it is refused, the state is unchanged, and the request the id
    first named is still answered as a retry, after a snapshot and after a replay too."""
    service = ServiceState()
    service.apply_request(request("node_added", {"machines": [MACHINE]}, "add"), 1)
    submit = {"task_id": 1, "job_id": "j"}
    _, record = service.apply_request(request("task_submitted", submit, "sub"), 2)
    batch = {"requests": [{"type": "task_submitted", "body": {"task_id": 2, "job_id": "j"}}]}
    _, batch_records = service.apply_batch(request("batch", batch, "b"), 3)
    records = [record, *batch_records]
    snapshot = pickle.loads(pickle.dumps(service.snapshot()))
    replayed = ServiceState()
    replayed.apply_request(request("node_added", {"machines": [MACHINE]}, "add"), 1)
    replayed.replay(records)
    for restored in (service, ServiceState.from_snapshot(snapshot), replayed):
        before = fingerprint(restored)
        for kind, body in (
            ("task_submitted", {"task_id": 3, "job_id": "j"}),
            ("task_submitted", {"task_id": 1, "job_id": "j", "priority": 2}),
            ("task_removed", {"task_id": 1}),
        ):
            reply, record = restored.apply_request(request(kind, body, "sub"), 4)
            assert reply.status is Status.INVALID and record is None
            assert "'sub' was used before for a different request" in reply.reason
        again, record = restored.apply_request(request("task_submitted", submit, "sub"), 5)
        assert again.status is Status.OK and again.reason == "already applied"
        assert record is None
        other = {"requests": [{"type": "task_submitted", "body": {"task_id": 4, "job_id": "j"}}]}
        reply, _ = restored.apply_batch(request("batch", other, "b"), 6)
        assert reply.body["answers"][0][0] == Status.INVALID.value
        reply, _ = restored.apply_batch(request("batch", batch, "b"), 6)
        assert reply.body["answers"][0][:2] == [Status.OK.value, "already applied"]
        assert fingerprint(restored) == before


@pytest.mark.parametrize("with_digests", [False, True])
def test_a_snapshot_from_before_the_ids_were_kept_whole_still_answers_retries(
    with_digests: bool,
) -> None:
    service = ServiceState()
    service.apply_request(request("node_added", {"machines": [MACHINE]}, "add"), 1)
    service.apply_request(request("task_submitted", {"task_id": 1, "job_id": "j"}, "sub"), 2)
    snapshot = service.snapshot()
    # Written before the ids were kept whole: a list of (id, seq, digest), and before digests
    # were kept, of (id, seq).
    applied = snapshot.pop("applied_ids")
    snapshot["applied"] = [
        (request_id, seq, digest)[: 3 if with_digests else 2]
        for request_id, (seq, digest) in applied.items()
    ]
    restored = ServiceState.from_snapshot(pickle.loads(pickle.dumps(snapshot)))
    reply, record = restored.apply_request(
        request("task_submitted", {"task_id": 1, "job_id": "j"}, "sub"), 3
    )
    assert reply.reason == "already applied" and record is None


def test_a_restart_with_a_smaller_dedup_window_keeps_the_latest_ids() -> None:
    service = ServiceState()
    service.apply_request(request("node_added", {"machines": [MACHINE]}, "add"), 1)
    for task_id in (1, 2, 3):
        body = {"task_id": task_id, "job_id": "j"}
        service.apply_request(request("task_submitted", body, f"sub{task_id}"), 2)
    snapshot = pickle.loads(pickle.dumps(service.snapshot()))
    restored = ServiceState.from_snapshot(snapshot, dedup_window=2)
    for task_id, answer in ((3, "already applied"), (2, "already applied"), (1, "")):
        body = {"task_id": task_id, "job_id": "j"}
        reply, _ = restored.apply_request(request("task_submitted", body, f"sub{task_id}"), 3)
        assert (reply.reason == "already applied") == (answer == "already applied")


def test_replaying_the_records_gives_an_equal_state() -> None:
    service = ServiceState()
    records = []
    steps = [
        ("node_added", {"machines": [MACHINE, {**MACHINE, "machine_id": "m1"}]}),
        ("task_submitted", {"task_id": 1, "job_id": "j", "labels": {"a": "b"}}),
        ("task_submitted", {"task_id": 2, "job_id": "j"}),
        ("task_updated", {"task_id": 2, "priority": 4}),
    ]
    for index, (kind, body) in enumerate(steps):
        _, record = service.apply_request(request(kind, body, f"s{index}"), 10 + index)
        records.append(record)

    decisions = [
        SchedulingDelta(DeltaKind.PLACE, 1, None, "m0"),
        SchedulingDelta(DeltaKind.PLACE, 2, None, "nope"),  # refused: no such machine
    ]
    outcome, record = service.apply_decisions(decisions, 20)
    assert len(outcome.applied) == 1 and len(outcome.refused) == 1
    records.append(record)
    _, record = service.apply_request(request("task_completed", {"task_id": 1}, "done"), 30)
    records.append(record)
    assert service.cluster.tasks[1].state is TaskState.COMPLETED

    fresh = ServiceState()
    assert fresh.replay(copy.deepcopy(records)) == len(records)
    assert fingerprint(fresh) == fingerprint(service)
    # Retried ids are known after replay too, and the snapshot round-trips through pickle.
    restored = ServiceState.from_snapshot(pickle.loads(pickle.dumps(fresh.snapshot())))
    reply, record = restored.apply_request(request("task_completed", {"task_id": 1}, "done"), 40)
    assert reply.status is Status.OK and record is None
    assert fingerprint(restored) == fingerprint(service)


def test_a_record_with_a_bad_decision_is_a_replay_error() -> None:
    # The scheduling process restarts its replica on a ReplayError; any other error would
    # end it instead.
    service = ServiceState()
    _, record = service.apply_request(request("node_added", {"machines": [MACHINE]}, "a"), 10)
    bad = {"seq": 2, "time": 11, "kind": "decisions", "deltas": [["teleport", 1, None, "m0"]]}
    fresh = ServiceState()
    with pytest.raises(ReplayError, match="record 2: a decision's kind must be one of"):
        fresh.replay([record, bad])
    assert fresh.seq == 1


# ---------------------------------------------------------------------- the journal


def _records(count: int, start: int = 1) -> list[dict[str, Any]]:
    return [{"seq": seq, "payload": "x" * seq} for seq in range(start, start + count)]


def test_the_journal_recovers_what_was_flushed(tmp_path: Path) -> None:
    journal = Journal(tmp_path, fsync="always")
    assert journal.recover() == (None, [])
    for record in _records(5):
        journal.append(record)
    journal.flush()
    journal.write_snapshot(5, {"state": 5})
    for record in _records(3, start=6):
        journal.append(record)
    journal.flush()
    journal.close()
    with Journal(tmp_path) as journal:
        payload, records = journal.recover()
    assert payload == {"state": 5}
    assert [r["seq"] for r in records] == [6, 7, 8]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "lock",
        "log-000000000005.bin",
        "snapshot-000000000005.pickle",
    ]


@pytest.mark.parametrize("cut", [1, 5, 9, 20])
def test_a_cut_tail_is_truncated(
    tmp_path: Path, cut: int, caplog: pytest.LogCaptureFixture
) -> None:
    journal = Journal(tmp_path, fsync="never")
    journal.recover()
    for record in _records(4):
        journal.append(record)
    journal.close()
    (log,) = tmp_path.glob("log-*.bin")
    data = log.read_bytes()
    log.write_bytes(data[:-cut])
    with Journal(tmp_path) as reopened, caplog.at_level(logging.WARNING):
        _, records = reopened.recover()
    assert [r["seq"] for r in records] == [1, 2, 3]
    # Never silently: the bytes dropped are named.
    kept = log.stat().st_size  # the three whole records
    assert f"dropped its last {len(data) - cut - kept} bytes from byte {kept}" in caplog.text
    # The next append lands after the last whole record.
    journal = Journal(tmp_path)
    journal.recover()
    journal.append({"seq": 4, "payload": "again"})
    journal.close()
    with Journal(tmp_path) as reopened:
        _, records = reopened.recover()
    assert [r["seq"] for r in records] == [1, 2, 3, 4]


def test_corruption_before_the_tail_is_an_error(tmp_path: Path) -> None:
    journal = Journal(tmp_path)
    journal.recover()
    for record in _records(4):
        journal.append(record)
    journal.close()
    (log,) = tmp_path.glob("log-*.bin")
    data = bytearray(log.read_bytes())
    data[12] ^= 0xFF  # inside the first record's payload
    log.write_bytes(bytes(data))
    with pytest.raises(JournalError, match="checksum"), Journal(tmp_path) as reopened:
        reopened.recover()


def test_a_frame_of_many_records_recovers_as_those_records(tmp_path: Path) -> None:
    journal = Journal(tmp_path)
    journal.recover()
    journal.append(_records(1)[0])
    journal.append_packed(msgpack.packb(_records(3, start=2)), 3)
    assert journal.records_since_snapshot == 4
    journal.close()
    with Journal(tmp_path) as reopened:
        _, records = reopened.recover()
    assert records == _records(4)


def _state_after(seq: int) -> dict[str, int]:
    return {"state": seq}


def test_a_background_snapshot_replaces_the_files_before_it(tmp_path: Path) -> None:
    journal = Journal(tmp_path)
    journal.recover()
    for record in _records(5):
        journal.append(record)
    assert journal.start_snapshot(5, lambda: _state_after(5))
    assert journal.records_since_snapshot == 0
    for record in _records(2, start=6):  # the parent goes on logging, into the new log
        journal.append(record)
    journal.flush()
    journal.poll_snapshot(wait=True)
    assert not journal.snapshot_in_progress and journal.snapshot_failures == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "lock",
        "log-000000000005.bin",
        "snapshot-000000000005.pickle",
    ]
    journal.close()
    with Journal(tmp_path) as reopened:
        payload, records = reopened.recover()
    assert payload == {"state": 5}
    assert [r["seq"] for r in records] == [6, 7]


def _sleepy_state() -> dict[str, int]:
    import time

    time.sleep(0.5)
    return {"state": 1}


def test_one_background_snapshot_at_a_time(tmp_path: Path) -> None:
    journal = Journal(tmp_path)
    journal.recover()
    journal.append(_records(1)[0])
    assert journal.start_snapshot(1, _sleepy_state)
    journal.append({"seq": 2, "payload": "y"})
    assert not journal.start_snapshot(2, _sleepy_state)  # the first is still being written
    assert journal.snapshot_in_progress
    journal.close()  # waits for it
    with Journal(tmp_path) as reopened:
        payload, records = reopened.recover()
    assert payload == {"state": 1} and [r["seq"] for r in records] == [2]


def _unpicklable() -> Any:
    return lambda: None


def test_a_failed_background_snapshot_leaves_a_valid_journal(tmp_path: Path) -> None:
    journal = Journal(tmp_path)
    journal.recover()
    for record in _records(3):
        journal.append(record)
    assert journal.start_snapshot(3, _unpicklable)
    journal.append({"seq": 4, "payload": "after"})
    journal.flush()
    journal.poll_snapshot(wait=True)
    assert journal.snapshot_failures == 1
    assert not list(tmp_path.glob("snapshot-*"))  # not even its temporary file
    journal.close()
    with Journal(tmp_path) as reopened:
        payload, records = reopened.recover()
    assert payload is None and [r["seq"] for r in records] == [1, 2, 3, 4]


def test_recovery_removes_a_dead_writers_temporary_snapshot(tmp_path: Path) -> None:
    journal = Journal(tmp_path)
    journal.recover()
    journal.append(_records(1)[0])
    journal.close()
    (tmp_path / "snapshot-000000000001.4242.tmp").write_bytes(b"half a pickle")
    with Journal(tmp_path) as reopened:
        assert reopened.recover() == (None, _records(1))
    assert not list(tmp_path.glob("*.tmp"))


def test_bad_fsync_policy_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="fsync must be one of"):
        Journal(tmp_path, fsync="sometimes")


def test_every_request_type_has_a_documented_table() -> None:
    doc = (Path(__file__).parent.parent / "docs" / "protocol.md").read_text()
    for kind, fields in REQUEST_FIELDS.items():
        assert f"`{kind}`" in doc, kind
        for name in fields:
            assert f"`{name}`" in doc, (kind, name)


def test_latency_samples_reach_the_cluster_state() -> None:
    service = ServiceState()
    two = {"machines": [MACHINE, {**MACHINE, "machine_id": "m1"}]}
    service.apply_request(request("node_added", two, "add"), 1)
    sample = {"machine_id": "m0", "peer_id": "m1", "latency_us": 120.5, "path": 2}
    reply, record = service.apply_request(request("latency_stats", sample, "l1"), 2)
    assert reply.status is Status.OK and record is not None
    assert service.cluster.latency_us("m0", "m1") == 120.5
    reply, _ = service.apply_request(
        request("latency_stats", {**sample, "peer_id": "nope"}, "l2"), 3
    )
    assert reply.status is Status.NOT_FOUND and "nope" in reply.reason
    with pytest.raises(ProtocolError, match="latency_us must be finite"):
        request("latency_stats", {**sample, "latency_us": float("nan")})
    fresh = ServiceState()
    fresh.replay(
        [
            {
                "seq": 1,
                "time": 1,
                "kind": "request",
                "id": "add",
                "type": "node_added",
                "body": two,
            },
            record,
        ]
    )
    assert fresh.cluster.latency_us("m0", "m1") == 120.5


def test_a_batch_applies_each_request_once() -> None:
    service = ServiceState()
    batch = {
        "requests": [
            {"type": "node_added", "body": {"machines": [MACHINE]}},
            {"type": "task_submitted", "body": {"task_id": 1, "job_id": "j"}},
            {"type": "task_completed", "body": {"task_id": 7}},  # refused, the rest go on
            {"type": "task_submitted", "body": {"task_id": 2, "job_id": "j"}},
        ]
    }
    reply, records = service.apply_batch(request("batch", batch, "b1"), 5)
    statuses = [answer[0] for answer in reply.body["answers"]]
    assert statuses == ["ok", "ok", "not_found", "ok"]
    assert [r["id"] for r in records] == ["b1/0", "b1/1", "b1/3"]
    again, more = service.apply_batch(request("batch", batch, "b1"), 6)
    assert more == [] and [a[0] for a in again.body["answers"]] == statuses
    assert set(service.cluster.tasks) == {1, 2}


@pytest.mark.parametrize(
    ("requests", "words"),
    [
        ([], "must be a list of 1 to"),
        ([{"type": "status", "body": {}}], r"body.requests\[0\].type must be one of"),
        ([{"type": "task_removed", "body": {"task_id": "x"}}], r"requests\[0\].body.task_id"),
        ([{"type": "task_removed", "body": {"task_id": 1}, "x": 1}], r"requests\[0\].x"),
    ],
)
def test_a_bad_batch_is_refused_whole(requests: list[Any], words: str) -> None:
    with pytest.raises(ProtocolError, match=words):
        request("batch", {"requests": requests})


# ---------------------------------------------------------------------- the plain paths


def _near_plain_items() -> list[Any]:
    """Batch items near the plain shapes (a task submitted with just its job, a task removed),
    valid or not in every way the general checks look at: every combination."""
    missing = object()
    task_ids = [-1, 0, 5, 2**63 - 1, 2**63, True, "1", 1.0, missing]
    job_ids = ["j", "", 0, b"j", missing]
    extras: list[dict[str, Any]] = [{}, {"priority": 0}, {"reason": ""}]
    kinds = ["task_submitted", "task_removed", "task_completed", "x", missing]
    items = []
    for task_id, job_id, extra, kind, stray in itertools.product(
        task_ids, job_ids, extras, kinds, [False, True]
    ):
        body = {"task_id": task_id, "job_id": job_id, **extra}
        item = {"type": kind, "body": {k: v for k, v in body.items() if v is not missing}}
        if stray:
            item["x"] = 1
        items.append({k: v for k, v in item.items() if v is not missing})
    return items


def test_a_plain_batch_item_is_one_the_general_checks_accept_as_it_is() -> None:
    # `_plain_item` lets the commonest batch items skip the general checks: each one it lets
    # through must be one those checks would accept, unchanged.
    from firmament_py.service import protocol

    passed = 0
    for item in _near_plain_items():
        if protocol._plain_item(item):
            assert item.keys() == {"type", "body"}
            spec = REQUEST_FIELDS[item["type"]]
            assert protocol._checked_map("body", item["body"], spec) == item["body"]
            passed += 1
    assert passed == 6  # task 0, 5 or 2**63 - 1, submitted to job "j" or removed


_STEPS = st.lists(
    st.tuples(st.sampled_from(["task_submitted", "task_removed"]), st.integers(0, 5)),
    max_size=30,
)


@settings(max_examples=150, deadline=None)
@given(steps=_STEPS)
def test_the_plain_path_changes_the_state_as_events_do(steps: list[tuple[str, int]]) -> None:
    # Plain submissions and removals go through the trusted calls of the cluster state and the
    # scheduler, not events, both when the daemon applies them and when its records are
    # replayed (into a recovering state, or the scheduling process's replica). Every reply,
    # record, state and round must be what the events' way gives.
    from firmament_py.scheduler import Scheduler
    from firmament_py.service import state as state_module

    def run(plain: bool) -> tuple[Any, ...]:
        with pytest.MonkeyPatch.context() as patch:
            if not plain:
                patch.setattr(state_module, "is_plain", lambda kind, body: False)
            service = ServiceState()
            _, first = service.apply_request(request("node_added", {"machines": [MACHINE]}), 0)
            answers, records = [], [first]
            for index, (kind, task_id) in enumerate(steps):
                body: dict[str, Any] = {"task_id": task_id}
                if kind == "task_submitted":
                    body["job_id"] = f"j{task_id % 2}"
                items = [{"type": kind, "body": body}]
                reply, more = service.apply_batch(
                    request("batch", {"requests": items}, f"b{index}"), index + 1
                )
                answers.append(reply.body["answers"])
                records += more
            recovered = ServiceState()
            recovered.replay(copy.deepcopy(records))
            scheduler = Scheduler("trivial", solver="ssp")
            placed = []
            for index, record in enumerate(records):  # with rounds between some records
                state_module.replay(scheduler, record)
                if index % 5 == 4:
                    placed.append(scheduler.run_round().deltas)
            placed.append(scheduler.run_round().deltas)
            return (
                answers,
                records,
                pickle.dumps(service.snapshot()),
                pickle.dumps(recovered.snapshot()),
                placed,
                pickle.dumps(scheduler.state),
            )

    plain, events = run(plain=True), run(plain=False)
    assert plain == events
    assert plain[2] == plain[3]  # recovery gives the state the daemon had


def test_an_unchecked_request_with_bad_values_is_refused_not_applied() -> None:
    # A `Request` built by hand skips the protocol's checks; a plain-looking one with bad values
    # must not take the trusted way (which trusts them), but be refused, the state unchanged.
    service = ServiceState()
    before = fingerprint(service)
    for body in ({"task_id": -1, "job_id": "j"}, {"task_id": 1, "job_id": ""}):
        reply, record = service.apply_request(Request("r", "task_submitted", body), 1)
        assert reply.status is Status.INVALID and record is None
    reply, record = service.apply_request(Request("r", "task_removed", {"task_id": True}), 1)
    assert reply.status is not Status.OK and record is None
    assert fingerprint(service) == before


def test_a_decision_round_trips_and_a_bad_one_is_named() -> None:
    for decision in (
        SchedulingDelta(DeltaKind.PLACE, 7, None, "m1"),
        SchedulingDelta(DeltaKind.PREEMPT, 7, "m1", None),
        SchedulingDelta(DeltaKind.MIGRATE, 7, "m1", "m2"),
    ):
        assert decision_from_wire(decision_to_wire(decision)) == decision
    bad: list[tuple[Any, str]] = [
        (["place", 7, None], r"\[kind, task, from, to\]"),
        (("place", 7, None, "m1"), r"\[kind, task, from, to\]"),
        (["teleport", 7, None, "m1"], "kind must be one of .*'teleport'"),
        ([["place"], 7, None, "m1"], "kind must be one of"),  # unhashable
        (["place", 7, "m0", "m1"], "PLACE of task 7 cannot go from 'm0' to 'm1'"),
    ]
    for item, words in bad:
        with pytest.raises(ValueError, match=words):
            decision_from_wire(item)


def test_a_value_msgpack_cannot_hold_is_refused_before_sending() -> None:
    with pytest.raises(ValueError, match="task_submitted request 'r' cannot be sent"):
        encode_request("r", "task_submitted", {"task_id": 1, "job_id": "j", "priority": 2**80})
    with pytest.raises(ValueError, match="cannot be sent"):
        encode_request("r", "task_submitted", {"task_id": object()})


def test_a_request_digest_is_the_same_before_and_after_the_journal() -> None:
    """In-process callers may pass any mapping as a body; its record is a dict, and msgpack
    brings it back as one: the retry after a restart is still the same request."""
    import types

    body = types.MappingProxyType({"machines": [{**MACHINE, "labels": {"zone": "a"}}]})
    add = Request("add", "node_added", body)
    service = ServiceState()
    _, record = service.apply_request(add, 1)
    journaled = msgpack.unpackb(msgpack.packb(record, use_bin_type=True), raw=False)
    restarted = ServiceState()
    restarted.replay([journaled])
    for state in (service, restarted):
        reply, _ = state.apply_request(add, 2)
        assert reply.reason == "already applied"
