"""The daemon's wire protocol: msgpack maps in ZeroMQ frames, checked field by field.

Every request is one frame holding the map `{"v": 1, "id": ID, "type": TYPE, "body": {...}}`;
every reply is `{"v": 1, "id": ID, "status": STATUS, "reason": TEXT, "body": {...}}`. `id` is
the client's request id (a non-empty string of at most 128 characters): the reply carries it
back, and the daemon answers a request id it has already applied with the first answer, not a
second application, which is what makes retries safe. The full reference, with every request
type and its fields, is docs/protocol.md; `REQUEST_FIELDS` below is the same table in code.

Decoding never trusts the frame: anything but a map of the known keys, with each field of the
type its table says, raises `ProtocolError` naming the field (as `body.request.cpu_millicores`)
and what was wrong. A map anywhere in the frame that repeats a key is refused too (msgpack
would keep the last one), and the version must be the integer 1 (not `true` or `1.0`).
Unknown fields are refused rather than ignored, so that a misspelt optional field is not
silently dropped. Checking a request against the cluster (does the task exist?) is
not done here but by `ServiceState`, which owns the cluster state.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import msgpack

from firmament_py.flow.deltas import DeltaKind, SchedulingDelta
from firmament_py.model.events import (
    ClusterEvent,
    LatencySample,
    MachineAdded,
    MachineFailed,
    MachineRemoved,
    MachineStats,
    MachineUpdated,
    TaskCompleted,
    TaskFailed,
    TaskRemoved,
    TaskStats,
    TaskSubmitted,
    TaskUpdated,
)
from firmament_py.model.ids import INT64_MAX, Time
from firmament_py.model.labels import NO_LABELS, LabelSelector, SelectorOp
from firmament_py.model.resources import NO_RESOURCES, Resources
from firmament_py.model.states import TaskState
from firmament_py.scheduler.decisions import Decision
from firmament_py.service.frames import unpack_frame, why_undecodable

__all__ = [
    "DELTA_KINDS",
    "MAX_LIST",
    "MAX_REQUEST_ID_LENGTH",
    "PROTOCOL_VERSION",
    "READ_TYPES",
    "REQUEST_FIELDS",
    "STATE_CHANGING_TYPES",
    "WRITE_TYPES",
    "ProtocolError",
    "Request",
    "Status",
    "decision_from_wire",
    "decision_to_wire",
    "decode_reply",
    "decode_request",
    "encode_reply",
    "encode_request",
    "events_of",
    "is_plain",
]

PROTOCOL_VERSION = 1
MAX_REQUEST_ID_LENGTH = 128


class Status(enum.Enum):
    """A reply's status. `ERROR` is the daemon's own failure (a round whose solver failed)."""

    OK = "ok"
    NOT_FOUND = "not_found"
    ALREADY_EXISTS = "already_exists"
    INVALID = "invalid"
    UNAUTHORISED = "unauthorised"
    OVERLOADED = "overloaded"
    ERROR = "error"
    GONE = "gone"
    """The changes asked for are no longer kept (or were never written here)."""
    FENCED = "fenced"
    """A write under an epoch that is not the current one (another manager registered)."""


class ProtocolError(Exception):
    """A request that cannot be accepted, with the status and reason its reply carries.
    `request_id` is the request's id when the frame got far enough to have one."""

    def __init__(self, status: Status, reason: str, request_id: str = "") -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.request_id = request_id


@dataclass(frozen=True)
class Request:
    """A decoded, well-formed request (its body's fields checked against `REQUEST_FIELDS`)."""

    request_id: str
    type: str
    body: Mapping[str, Any]
    epoch: int | None = None
    """The writer's epoch (`register`), if the frame gave one."""


# ---------------------------------------------------------------------- field checks


def _invalid(path: str, problem: str) -> ProtocolError:
    return ProtocolError(Status.INVALID, f"{path} {problem}")


def _int(path: str, value: Any, *, minimum: int = -INT64_MAX - 1) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise _invalid(path, f"must be an integer, not {type(value).__name__}")
    if not minimum <= value <= INT64_MAX:
        raise _invalid(path, f"must be in [{minimum}, {INT64_MAX}], got {value}")
    return value


def _latency(path: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _invalid(path, f"must be a number of microseconds, not {type(value).__name__}")
    if not math.isfinite(value) or value < 0:
        raise _invalid(path, f"must be finite and non-negative, got {value}")
    return float(value)


def _task_id(path: str, value: Any) -> int:
    return _int(path, value, minimum=0)


def _text(path: str, value: Any) -> str:
    if not isinstance(value, str):
        raise _invalid(path, f"must be a string, not {type(value).__name__}")
    return value


def _name(path: str, value: Any) -> str:
    if not _text(path, value):
        raise _invalid(path, "must not be empty")
    return str(value)


def _map(path: str, value: Any) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise _invalid(path, f"must be a map, not {type(value).__name__}")
    for key in value:
        if not isinstance(key, str):
            raise _invalid(path, f"has a key that is not a string: {key!r}")
    return value


def _resources(path: str, value: Any) -> dict[str, int]:
    fields = _map(path, value)
    unknown = sorted(set(fields) - set(Resources.DIMENSIONS))
    if unknown:
        raise _invalid(
            f"{path}.{unknown[0]}", f"is not a resource (known: {', '.join(Resources.DIMENSIONS)})"
        )
    return {key: _int(f"{path}.{key}", amount, minimum=0) for key, amount in fields.items()}


def _labels(path: str, value: Any) -> dict[str, str]:
    labels = _map(path, value)
    for key, label in labels.items():
        if not key:
            raise _invalid(path, "has an empty key")
        _text(f"{path}.{key}", label)
    return dict(labels)


def _selectors(path: str, value: Any) -> list[dict[str, Any]]:
    if not isinstance(value, list):
        raise _invalid(path, f"must be a list, not {type(value).__name__}")
    ops = [op.value for op in SelectorOp]
    checked = []
    for index, item in enumerate(value):
        where = f"{path}[{index}]"
        selector = _checked_map(where, item, _SELECTOR_FIELDS)
        if selector["op"] not in ops:
            raise _invalid(
                f"{where}.op", f"must be one of {', '.join(ops)}, got {selector['op']!r}"
            )
        checked.append(selector)
    return checked


def _strings(path: str, value: Any) -> list[str]:
    if not isinstance(value, list):
        raise _invalid(path, f"must be a list, not {type(value).__name__}")
    return [_text(f"{path}[{index}]", item) for index, item in enumerate(value)]


def _machines(path: str, value: Any) -> list[dict[str, Any]]:
    if not isinstance(value, list) or not value:
        raise _invalid(path, "must be a non-empty list of machines")
    return [
        _checked_map(f"{path}[{index}]", item, _MACHINE_FIELDS) for index, item in enumerate(value)
    ]


MAX_LIST = 10_000
"""The most tasks or machines one `tasks` or `machines` reply lists."""

_TASK_STATES = tuple(state.value for state in TaskState)


def _choice(path: str, value: Any, choices: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in choices:
        raise _invalid(path, f"must be one of {', '.join(choices)}, got {value!r}")
    return value


def _bounded(path: str, value: Any, maximum: int) -> int:
    number = _int(path, value, minimum=0)
    if number > maximum:
        raise _invalid(path, f"must be at most {maximum:,}, got {number:,}")
    return number


def _limit(path: str, value: Any) -> int:
    limit = _int(path, value, minimum=1)
    if limit > MAX_LIST:
        raise _invalid(path, f"must be at most {MAX_LIST:,}, got {limit:,}")
    return limit


Check = Callable[[str, Any], Any]
FieldSpec = Mapping[str, tuple[Check, bool]]
"""Field name -> (check, required)."""

_SELECTOR_FIELDS: FieldSpec = {
    "key": (_name, True),
    "op": (_text, True),
    "values": (_strings, False),
}
_MACHINE_FIELDS: FieldSpec = {
    "machine_id": (_name, True),
    "capacity": (_resources, True),
    "slots": (lambda path, value: _int(path, value, minimum=0), True),
    "rack_id": (_name, False),
    "pod_id": (_name, False),
    "labels": (_labels, False),
}

REQUEST_FIELDS: Mapping[str, FieldSpec] = {
    "task_submitted": {
        "task_id": (_task_id, True),
        "job_id": (_name, True),
        "request": (_resources, False),
        "priority": (_int, False),
        "labels": (_labels, False),
        "selectors": (_selectors, False),
    },
    "task_started": {"task_id": (_task_id, True), "machine_id": (_name, False)},
    "task_completed": {"task_id": (_task_id, True)},
    "task_failed": {"task_id": (_task_id, True), "reason": (_text, False)},
    "task_removed": {"task_id": (_task_id, True)},
    "task_updated": {
        "task_id": (_task_id, True),
        "request": (_resources, False),
        "priority": (_int, False),
        "labels": (_labels, False),
        "selectors": (_selectors, False),
    },
    "node_added": {"machines": (_machines, True)},
    "node_failed": {"machine_id": (_name, True), "reason": (_text, False)},
    "node_removed": {"machine_id": (_name, True)},
    "node_updated": {
        "machine_id": (_name, True),
        "capacity": (_resources, False),
        "slots": (lambda path, value: _int(path, value, minimum=0), False),
        "labels": (_labels, False),
    },
    "task_stats": {"task_id": (_task_id, True), "usage": (_resources, True)},
    "node_stats": {"machine_id": (_name, True), "usage": (_resources, True)},
    "latency_stats": {
        "machine_id": (_name, True),
        "peer_id": (_name, True),
        "latency_us": (_latency, True),
        "path": (lambda path, value: _int(path, value, minimum=0), False),
    },
    "batch": {"requests": (lambda path, value: _batch(path, value), True)},
    "schedule": {},
    "status": {},
    "tasks": {
        "state": (lambda path, value: _choice(path, value, _TASK_STATES), False),
        "machine_id": (_name, False),
        "after": (_task_id, False),
        "limit": (_limit, False),
    },
    "machines": {
        "after": (_name, False),
        "limit": (_limit, False),
    },
    "changes": {
        "after": (lambda path, value: _int(path, value, minimum=0), True),
        "limit": (_limit, False),
        "wait_ms": (lambda path, value: _bounded(path, value, MAX_WAIT_MS), False),
        "boot": (_name, False),
    },
    "round": {"round": (lambda path, value: _int(path, value, minimum=1), True)},
    "register": {"manager": (_name, True)},
}
"""Every request type and its body's fields."""

MAX_WAIT_MS = 60_000
"""The longest a `changes` request may wait for a record."""

READ_TYPES = frozenset({"status", "tasks", "machines", "changes", "round"})
"""Requests that only read the state."""

STATE_CHANGING_TYPES = frozenset(REQUEST_FIELDS) - {"schedule", "batch", "register"} - READ_TYPES
"""Requests that change the cluster state: journaled before they are acknowledged. A `batch`
carries several of them."""

WRITE_TYPES = STATE_CHANGING_TYPES | {"schedule", "batch"}
"""Requests a manager that registered (`register`) must send under its epoch."""

MAX_BATCH = 10_000
"""The most requests one `batch` may carry."""


_BATCH_ITEM_KEYS = frozenset({"type", "body"})


def _batch(path: str, value: Any) -> list[dict[str, Any]]:
    """A batch's requests: each `{"type": T, "body": {...}}` with T state-changing, checked as
    that request's body is. One bad request makes the whole batch invalid."""
    if not isinstance(value, list) or not 0 < len(value) <= MAX_BATCH:
        raise _invalid(path, f"must be a list of 1 to {MAX_BATCH:,} requests")
    checked = []
    for index, item in enumerate(value):
        if _plain_item(item):
            checked.append(item)  # passes every check below as it is
            continue
        where = f"{path}[{index}]"
        fields = _map(where, item)
        if not fields.keys() <= _BATCH_ITEM_KEYS:
            unknown = sorted(fields.keys() - _BATCH_ITEM_KEYS)[0]
            raise _invalid(f"{where}.{unknown}", "is not a known field (known: type, body)")
        kind = fields.get("type")
        if not isinstance(kind, str) or kind not in STATE_CHANGING_TYPES:
            choices = ", ".join(sorted(STATE_CHANGING_TYPES))
            raise _invalid(f"{where}.type", f"must be one of {choices}, got {kind!r}")
        body = _checked_map(f"{where}.body", fields.get("body", {}), REQUEST_FIELDS[kind])
        checked.append({"type": kind, "body": body})
    return checked


def is_plain(kind: Any, body: Any) -> bool:
    """Whether a request is a task submitted with nothing but its job, or a task removed, with
    valid values: most of a busy daemon's traffic. Such a request passes every field check as
    it is, and `ServiceState` applies it (and replays its record) without building events."""
    if type(body) is not dict:
        return False
    task_id = body.get("task_id")
    if type(task_id) is not int or not 0 <= task_id <= INT64_MAX:
        return False
    if kind == "task_removed":
        return len(body) == 1
    if kind == "task_submitted":
        job_id = body.get("job_id")
        return len(body) == 2 and type(job_id) is str and job_id != ""
    return False


def _plain_item(item: Any) -> bool:
    """Whether a batch item is `{"type": T, "body": B}` with T and B plain (`is_plain`):
    recognised without the general checks and the paths their errors would name."""
    return type(item) is dict and len(item) == 2 and is_plain(item.get("type"), item.get("body"))


_ENVELOPE_KEYS = frozenset({"v", "id", "type", "body", "epoch"})


def _checked_map(path: str, value: Any, spec: FieldSpec) -> dict[str, Any]:
    fields = _map(path, value)
    checked: dict[str, Any] = {}
    for name, field_value in fields.items():  # the fields given: usually few of the spec's
        entry = spec.get(name)
        if entry is None:
            unknown = sorted(fields.keys() - spec.keys())[0]
            known = ", ".join(spec) or "none"
            raise _invalid(f"{path}.{unknown}", f"is not a known field (known: {known})")
        check = entry[0]
        if (check is _task_id and type(field_value) is int and 0 <= field_value <= INT64_MAX) or (
            check is _name and type(field_value) is str and field_value
        ):
            checked[name] = field_value  # the commonest fields, passed as their checks would
        else:
            checked[name] = check(f"{path}.{name}", field_value)
    if len(checked) < len(spec):
        for name, (_, required) in spec.items():
            if required and name not in checked:
                raise _invalid(f"{path}.{name}", "is missing")
    return checked


# ---------------------------------------------------------------------- frames


def decode_request(frame: bytes) -> Request:
    """The request in `frame`, checked; ProtocolError says what is wrong with it."""
    try:
        message = unpack_frame(frame)
    except Exception as error:  # msgpack raises many kinds on garbage
        raise ProtocolError(Status.INVALID, why_undecodable(error)) from None
    if not isinstance(message, dict):
        raise _invalid("the message", f"must be a map, not {type(message).__name__}")
    request_id = message.get("id")
    rid = request_id if isinstance(request_id, str) else ""
    try:
        unknown = sorted(str(key) for key in set(message) - _ENVELOPE_KEYS)
        if unknown:
            raise _invalid(unknown[0], "is not a field of the envelope (v, id, type, body, epoch)")
        version = message.get("v")
        # `True == 1` and `1.0 == 1` in Python: the type is checked too, as for every integer.
        if type(version) is not int or version != PROTOCOL_VERSION:
            raise _invalid("v", f"must be protocol version {PROTOCOL_VERSION}")
        if not isinstance(request_id, str) or not 0 < len(request_id) <= MAX_REQUEST_ID_LENGTH:
            raise _invalid("id", f"must be a string of 1 to {MAX_REQUEST_ID_LENGTH} characters")
        kind = message.get("type")
        if not isinstance(kind, str) or kind not in REQUEST_FIELDS:
            raise _invalid("type", f"must be one of {', '.join(REQUEST_FIELDS)}, got {kind!r}")
        body = _checked_map("body", message.get("body", {}), REQUEST_FIELDS[kind])
        epoch = message.get("epoch")
        if epoch is not None:
            epoch = _int("epoch", epoch, minimum=1)
    except ProtocolError as error:
        error.request_id = rid
        raise
    return Request(request_id, kind, body, epoch)


def encode_request(
    request_id: str, kind: str, body: Mapping[str, Any] | None = None, epoch: int | None = None
) -> bytes:
    """A request frame (no checks of meaning: the daemon checks), under `epoch` if given.
    ValueError if msgpack cannot hold a value at all (an integer past 64 bits, an object of
    no msgpack type)."""
    message: dict[str, Any] = {
        "v": PROTOCOL_VERSION,
        "id": request_id,
        "type": kind,
        "body": dict(body or {}),
    }
    if epoch is not None:
        message["epoch"] = epoch
    try:
        return bytes(msgpack.packb(message, use_bin_type=True))
    except (OverflowError, TypeError, ValueError) as error:
        raise ValueError(f"{kind} request {request_id!r} cannot be sent: {error}") from None


def encode_reply(
    request_id: str, status: Status, reason: str = "", body: Mapping[str, Any] | None = None
) -> bytes:
    """A reply frame."""
    message = {
        "v": PROTOCOL_VERSION,
        "id": request_id,
        "status": status.value,
        "reason": reason,
        "body": dict(body or {}),
    }
    return bytes(msgpack.packb(message, use_bin_type=True))


def decode_reply(frame: bytes) -> tuple[str, Status, str, dict[str, Any]]:
    """(request id, status, reason, body) of a reply frame; ProtocolError if it is none."""
    try:
        message = msgpack.unpackb(frame, raw=False)
        status = Status(message["status"])
        return str(message["id"]), status, str(message["reason"]), dict(message["body"])
    except Exception as error:
        raise ProtocolError(Status.INVALID, f"not a reply frame: {error}") from None


# ---------------------------------------------------------------------- to the model


def _selector(fields: Mapping[str, Any]) -> LabelSelector:
    return LabelSelector(fields["key"], SelectorOp(fields["op"]), tuple(fields.get("values", ())))


def _optional_resources(fields: Mapping[str, Any], name: str) -> Resources | None:
    return Resources(**fields[name]) if name in fields else None


def events_of(kind: str, body: Mapping[str, Any], time: Time) -> list[ClusterEvent]:
    """The cluster events a checked state-changing request stands for, at `time` (a
    `node_added` adds one machine per entry). ValueError or TypeError if the model refuses a
    value (the event constructors check ranges the protocol does not)."""
    task_id = body.get("task_id", 0)
    if kind == "task_submitted":
        return [
            TaskSubmitted(
                time=time,
                task_id=task_id,
                job_id=body["job_id"],
                request=Resources(**body["request"]) if "request" in body else NO_RESOURCES,
                priority=body.get("priority", 0),
                labels=body.get("labels", NO_LABELS),
                selectors=tuple(map(_selector, body["selectors"])) if "selectors" in body else (),
            )
        ]
    if kind == "task_started":
        return []  # a placement confirmed: the daemon's lease is kept, no task changes
    if kind == "task_completed":
        return [TaskCompleted(time=time, task_id=task_id)]
    if kind == "task_failed":
        return [TaskFailed(time=time, task_id=task_id, reason=body.get("reason", ""))]
    if kind == "task_removed":
        return [TaskRemoved(time=time, task_id=task_id)]
    if kind == "task_updated":
        selectors = body.get("selectors")
        return [
            TaskUpdated(
                time=time,
                task_id=task_id,
                request=_optional_resources(body, "request"),
                priority=body.get("priority"),
                labels=body.get("labels"),
                selectors=None if selectors is None else tuple(_selector(s) for s in selectors),
            )
        ]
    if kind == "task_stats":
        return [TaskStats(time=time, task_id=task_id, usage=Resources(**body["usage"]))]
    if kind == "node_added":
        return [
            MachineAdded(
                time=time,
                machine_id=machine["machine_id"],
                capacity=Resources(**machine["capacity"]),
                slots=machine["slots"],
                **{key: machine[key] for key in ("rack_id", "pod_id", "labels") if key in machine},
            )
            for machine in body["machines"]
        ]
    machine_id = body["machine_id"]
    if kind == "node_failed":
        return [MachineFailed(time=time, machine_id=machine_id, reason=body.get("reason", ""))]
    if kind == "node_removed":
        return [MachineRemoved(time=time, machine_id=machine_id)]
    if kind == "node_updated":
        return [
            MachineUpdated(
                time=time,
                machine_id=machine_id,
                capacity=_optional_resources(body, "capacity"),
                slots=body.get("slots"),
                labels=body.get("labels"),
            )
        ]
    if kind == "node_stats":
        return [MachineStats(time=time, machine_id=machine_id, usage=Resources(**body["usage"]))]
    if kind == "latency_stats":
        return [
            LatencySample(
                time=time,
                machine_id=machine_id,
                peer_id=body["peer_id"],
                latency_us=body["latency_us"],
                path=body.get("path", 0),
            )
        ]
    raise ValueError(f"{kind!r} is not a state-changing request")


def decision_to_wire(decision: Decision) -> list[Any]:
    """A decision as `[kind, task_id, from_machine, to_machine]` (None where there is none)."""
    return [decision.kind.value, decision.task, decision.from_machine, decision.to_machine]


DELTA_KINDS: Mapping[str, DeltaKind] = {kind.value: kind for kind in DeltaKind}
"""The decision kinds by their wire value (a dict lookup: `DeltaKind(value)` is Python code
that every decision of every round would run)."""


def decision_from_wire(item: Any) -> Decision:
    """The decision `decision_to_wire` wrote. ValueError if `item` is none."""
    if not isinstance(item, list) or len(item) != 4:
        raise ValueError(f"a decision must be [kind, task, from, to], got {item!r}")
    kind, task, source, target = item
    try:
        delta_kind = DELTA_KINDS[kind]
    except (KeyError, TypeError):  # TypeError: an unhashable kind
        raise ValueError(
            f"a decision's kind must be one of {sorted(DELTA_KINDS)}, got {kind!r}"
        ) from None
    return SchedulingDelta(delta_kind, task, source, target)
