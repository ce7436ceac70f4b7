"""What a frame must be before the daemon reads a request from it (firmament_py/service/
protocol.py, `decode_request`): the protocol version is the integer 1 (not `true`, not `1.0`),
no map anywhere in the frame repeats a key, a frame nested too deeply is refused with a reason
that says so, and a reply to a frame whose id could not be read carries the id "".

Each of these was found by a cluster manager written from docs/protocol.md alone (issue 35):
a duplicated `type` key turned a `status` request into a `task_removed`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgpack
import pytest

from firmament_py.model.states import TaskState
from firmament_py.service import Client, DaemonConfig
from firmament_py.service.protocol import ProtocolError, Status, decode_request

from .test_service_daemon import Running, machines, raw_exchange
from .test_service_protocol import fingerprint


def _map_header(count: int) -> bytes:
    assert count < 16
    return bytes([0x80 | count])


def _pairs(pairs: list[tuple[Any, Any]]) -> bytes:
    """A msgpack map written pair by pair, so that a key can appear twice (msgpack's packer
    takes a dict, which cannot hold a key twice)."""
    out = _map_header(len(pairs))
    for key, value in pairs:
        out += msgpack.packb(key) + (value if isinstance(value, bytes) else msgpack.packb(value))
    return out


@pytest.mark.parametrize("version", [True, 1.0, "1", [1], None])
def test_the_version_is_the_integer_one(version: object) -> None:
    frame = msgpack.packb({"v": version, "id": "a", "type": "status", "body": {}})
    with pytest.raises(ProtocolError, match="v must be protocol version 1") as info:
        decode_request(frame)
    assert info.value.status is Status.INVALID
    assert info.value.request_id == "a"


def test_the_version_one_is_accepted() -> None:
    frame = msgpack.packb({"v": 1, "id": "a", "type": "status", "body": {}})
    assert decode_request(frame).type == "status"


def _envelope(kind: str, body: bytes) -> list[tuple[Any, Any]]:
    return [("v", 1), ("id", "dup"), ("type", kind), ("body", body)]


# The reproducer: a status request whose second `type` made it a removal.
_TYPE_TWICE = _pairs(
    [*_envelope("status", msgpack.packb({"task_id": 3})), ("type", "task_removed")]
)
_FIELD_TWICE = _pairs(_envelope("task_completed", _pairs([("task_id", 3), ("task_id", 4)])))
# Deep inside a batch: a resources map of one of its requests.
_REQUEST = _pairs([("ram_bytes", 1), ("ram_bytes", 2)])
_ITEM = _pairs(
    [("type", "task_updated"), ("body", _pairs([("task_id", 1), ("request", _REQUEST)]))]
)
_IN_A_BATCH = _pairs(_envelope("batch", _pairs([("requests", b"\x91" + _ITEM)])))


@pytest.mark.parametrize(
    ("frame", "key"),
    [(_TYPE_TWICE, "type"), (_FIELD_TWICE, "task_id"), (_IN_A_BATCH, "ram_bytes")],
    ids=["the envelope", "a body", "inside a batch"],
)
def test_a_map_that_repeats_a_key_is_refused_wherever_it_is(frame: bytes, key: str) -> None:
    with pytest.raises(ProtocolError) as info:
        decode_request(frame)
    assert info.value.status is Status.INVALID
    assert f"repeats the key {key!r}" in info.value.reason


def test_deep_nesting_is_refused_with_a_reason() -> None:
    deep = b"\x91" * 5000 + b"\x01"
    frame = _pairs([("v", 1), ("id", "deep"), ("type", "status"), ("body", deep)])
    with pytest.raises(ProtocolError) as info:
        decode_request(frame)
    assert info.value.status is Status.INVALID
    reason = info.value.reason
    assert reason.startswith("not a msgpack message: ")
    assert "nested" in reason and reason.split(": ", 1)[1].strip()


def test_over_the_socket_a_repeated_key_changes_nothing(tmp_path: Path) -> None:
    """The issue's reproducer against a daemon: task 3 runs on after the frame, whose reply
    (to a frame that could not be read, so without its id) says what was wrong."""
    served = Running(DaemonConfig(bind="tcp://127.0.0.1:*", journal=tmp_path / "j"))
    try:
        with Client(served.endpoint, timeout=20) as client:
            client.add_machines(machines(1))
            client.submit_task(3, "j")
            assert [d.task for d in client.schedule().deltas] == [3]
        before = fingerprint(served.daemon.service)
        reply = raw_exchange(served.endpoint, [_TYPE_TWICE])
        assert (reply["status"], reply["id"]) == ("invalid", "")
        assert "repeats the key 'type'" in reply["reason"]
        assert fingerprint(served.daemon.service) == before
        with Client(served.endpoint) as client:
            (task,) = client.tasks()
            assert (task.task_id, task.state) == (3, TaskState.RUNNING)
    finally:
        served.stop()


def test_a_reply_carries_the_id_unless_the_frame_had_none_to_read(tmp_path: Path) -> None:
    """As docs/protocol.md says: `""` for a frame the daemon could not read an id from."""
    served = Running(
        DaemonConfig(bind="tcp://127.0.0.1:*", journal=tmp_path / "j", max_message_bytes=1000)
    )
    try:
        unreadable = [
            [b"\xc1"],  # not msgpack
            [_TYPE_TWICE],
            [b"\x91" * 2000 + b"\x01"],
            [b"\x00" * 1001],  # over the size limit
            [msgpack.packb({"v": 1, "id": "a", "type": "status"}), b"more"],
            [msgpack.packb(["not", "a", "map"])],
            [msgpack.packb({"v": 1, "type": "status", "body": {}})],
            [msgpack.packb({"v": 1, "id": 7, "type": "status", "body": {}})],
        ]
        for frames in unreadable:
            reply = raw_exchange(served.endpoint, frames)
            assert (reply["status"], reply["id"]) == ("invalid", ""), frames[0][:20]
            assert reply["reason"]
        readable = msgpack.packb({"v": True, "id": "mine", "type": "status", "body": {}})
        reply = raw_exchange(served.endpoint, [readable])
        assert (reply["status"], reply["id"]) == ("invalid", "mine")
    finally:
        served.stop()


def test_a_frame_encoded_otherwise_is_read_and_checked_all_the_same() -> None:
    """Frames that are not msgpack's shortest encoding of what they hold (another library's:
    an integer in eight bytes, a short text with a longer header) are read as any other, and a
    repeated key in one is found (the daemon clears the shortest encodings faster)."""
    wide_one = b"\xd3" + (3).to_bytes(8, "big")  # int64 3
    long_text = b"\xd9\x04" + b"task"  # "task" as str8
    body = _map_header(2) + msgpack.packb("task_id") + wide_one
    body += msgpack.packb("job_id") + long_text
    frame = _pairs(_envelope("task_submitted", body))
    assert msgpack.packb(msgpack.unpackb(frame)) != frame
    assert decode_request(frame).body == {"task_id": 3, "job_id": "task"}
    twice = _map_header(2) + msgpack.packb("task_id") + wide_one
    twice += msgpack.packb("task_id") + wide_one
    with pytest.raises(ProtocolError, match="repeats the key 'task_id'"):
        decode_request(_pairs(_envelope("task_completed", twice)))
