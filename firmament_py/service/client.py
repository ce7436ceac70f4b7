"""A typed Python client of the scheduling daemon, with timeouts and safe retries.

`Client` speaks the protocol of `firmament_py.service.protocol` over a DEALER socket (a lost
reply cannot wedge it, as it would a REQ socket). Each call gets a fresh request id; when no
reply comes within `timeout` seconds the same frame, with the same id, is sent again, up to
`retries` times: the daemon answers an id it has applied with its first reply, so a retried
submission is never applied twice, even across a daemon restart. Replies to earlier,
abandoned attempts are recognised by their id and dropped.

A reply other than OK raises `RequestFailed`, which carries the status and the daemon's reason.

A manager that registers (`register`) gets an epoch that the client then sends with every
write; once another manager registers, this one's writes are refused (`fenced`). `changes` and
`follow` read the daemon's change feed, `round` a past round's answer, and `ClusterView`
(`firmament_py.service.view`) keeps a mirror of the daemon's tasks and machines from a listing
and the changes after it.
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import zmq

from firmament_py.model.resources import Resources
from firmament_py.model.states import TaskState
from firmament_py.scheduler.decisions import Decision
from firmament_py.service.endpoints import open_ipv6
from firmament_py.service.keys import CurveClientKeys
from firmament_py.service.protocol import (
    Status,
    decision_from_wire,
    decode_reply,
    encode_request,
)

__all__ = [
    "Answer",
    "ChangePage",
    "Client",
    "DaemonTimeout",
    "ListedMachine",
    "ListedTask",
    "MachineSpec",
    "RequestFailed",
    "RoundReply",
]


class RequestFailed(Exception):
    """The daemon answered with a status other than OK."""

    def __init__(self, status: Status, reason: str) -> None:
        super().__init__(f"{status.value}: {reason}")
        self.status = status
        self.reason = reason


class DaemonTimeout(TimeoutError):
    """No reply after every retry."""


@dataclass(frozen=True)
class MachineSpec:
    """A machine to add (`Client.add_machines`)."""

    machine_id: str
    capacity: Resources
    slots: int
    rack_id: str | None = None
    pod_id: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)

    def to_wire(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "machine_id": self.machine_id,
            "capacity": _resources(self.capacity),
            "slots": self.slots,
        }
        if self.rack_id is not None:
            body["rack_id"] = self.rack_id
        if self.pod_id is not None:
            body["pod_id"] = self.pod_id
        if self.labels:
            body["labels"] = dict(self.labels)
        return body


@dataclass(frozen=True)
class Answer:
    """One reply of `Client.pipeline`: its status, the daemon's reason, and its body."""

    status: Status
    reason: str
    body: Mapping[str, Any]


@dataclass(frozen=True)
class RoundReply:
    """What a `schedule` request answers: the decisions the daemon applied, those it refused
    (with why), and the round's cost, algorithm and timings."""

    round: int
    deltas: list[Decision]
    refused: list[tuple[Decision, str]]
    cost: int
    algorithm: str
    timings: Mapping[str, float]
    task_errors: list[str]
    seq: int

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> RoundReply:
        return cls(
            round=body["round"],
            deltas=[decision_from_wire(item) for item in body["deltas"]],
            refused=[(decision_from_wire(item), reason) for item, reason in body["refused"]],
            cost=body["cost"],
            algorithm=body["algorithm"],
            timings=body["timings"],
            task_errors=list(body["task_errors"]),
            seq=body["seq"],
        )


@dataclass(frozen=True)
class ChangePage:
    """What a `changes` request answers: the journal records after the sequence number asked
    from, in order (`docs/protocol.md`, "Changes"), whether more follow, and the daemon's
    last sequence number."""

    changes: list[dict[str, Any]]
    more: bool
    seq: int
    boot: str
    """The daemon process's id: pass it back (`Client.changes(boot=...)`) so that a restart
    after a crash of its machine that lost records is noticed."""

    @property
    def last(self) -> int | None:
        """The sequence number of the last change on the page (None if it holds none)."""
        return self.changes[-1]["seq"] if self.changes else None


@dataclass(frozen=True)
class ListedTask:
    """A task as `Client.tasks` lists it: where the daemon's state has it."""

    task_id: int
    job_id: str
    state: TaskState
    machine_id: str | None


@dataclass(frozen=True)
class ListedMachine:
    """A machine as `Client.machines` lists it."""

    machine_id: str
    rack_id: str
    pod_id: str
    slots: int
    running: int
    """Tasks running on it."""


def _retry_after_s(body: Mapping[str, Any]) -> float:
    """How long an OVERLOADED reply asks to wait before the request is sent again (at most
    10 s, whatever it says)."""
    wait_ms = body.get("retry_after_ms", 100)
    return min(max(wait_ms, 0), 10_000) / 1000 if isinstance(wait_ms, int | float) else 0.1


def _resources(resources: Resources) -> dict[str, int]:
    return {
        name: value
        for name, value in zip(Resources.DIMENSIONS, resources.as_tuple(), strict=True)
        if value
    }


class Client:
    """A connection to one daemon. Not thread-safe: give each thread its own."""

    def __init__(
        self,
        address: str,
        *,
        timeout: float = 5.0,
        retries: int = 3,
        curve: CurveClientKeys | None = None,
        context: zmq.Context[zmq.Socket[bytes]] | None = None,
    ) -> None:
        self.address = address
        self.timeout = timeout
        self.retries = retries
        self._context = context or zmq.Context.instance()
        self._socket = self._context.socket(zmq.DEALER)
        self._socket.setsockopt(zmq.LINGER, 0)
        self._socket.setsockopt(zmq.SNDTIMEO, max(1, int(timeout * 1000)))
        if curve is not None:
            curve.apply_client(self._socket)
        open_ipv6(self._socket, address)
        self._socket.connect(address)
        self._prefix = f"{os.getpid():x}-{os.urandom(4).hex()}-"
        self._counter = itertools.count(1)
        self.epoch: int | None = None
        """This manager's epoch once it registered (`register`): sent with every request."""

    def close(self) -> None:
        self._socket.close(linger=0)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------------ requests

    def new_request_id(self) -> str:
        return f"{self._prefix}{next(self._counter)}"

    def request(
        self,
        kind: str,
        body: Mapping[str, Any] | None = None,
        *,
        request_id: str | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """Send one request and return the reply's body; RequestFailed on a status other than
        OK, DaemonTimeout when every attempt timed out. An OVERLOADED reply counts as an
        attempt: the request is sent again after the wait it names. `request_id` defaults to a
        fresh one;
        pass the same one again to retry by hand. `timeout` replaces the client's for this
        request (a `changes` request that may wait)."""
        request_id = request_id or self.new_request_id()
        frame = encode_request(request_id, kind, body, self.epoch)
        for attempt in range(self.retries + 1):
            deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
            try:
                # Blocks while no connection is up (the daemon down, or a CURVE handshake it
                # refused); SNDTIMEO bounds that wait by the timeout.
                self._socket.send(frame)
            except zmq.Again:
                continue
            while (left := deadline - time.monotonic()) > 0:
                if not self._socket.poll(int(left * 1000) + 1):
                    break
                reply_id, status, reason, reply_body = decode_reply(self._socket.recv())
                if reply_id != request_id:
                    continue  # the late answer to an attempt given up on
                if status is Status.OVERLOADED and attempt < self.retries:
                    # Nothing was applied: the same frame again, once the daemon says to.
                    time.sleep(_retry_after_s(reply_body))
                    break
                if status is not Status.OK:
                    raise RequestFailed(status, reason)
                return reply_body
        raise DaemonTimeout(
            f"no reply from {self.address} to {kind} after {self.retries + 1} attempts"
        )

    def pipeline(
        self, requests: Iterable[tuple[str, Mapping[str, Any]]], *, window: int = 64
    ) -> list[Answer]:
        """Send many requests with up to `window` of them awaiting replies at once (a burst of
        events without a round trip each), and return every answer in request order; a status
        other than OK is an answer, not an exception. Requests the daemon has not answered
        within `timeout` are sent again with their ids, up to `retries` times; then
        DaemonTimeout. The daemon applies them in the order it receives them."""
        if window < 1:
            raise ValueError(f"window must be at least 1, got {window}")
        frames: dict[str, bytes] = {}
        for kind, body in requests:
            rid = self.new_request_id()
            frames[rid] = encode_request(rid, kind, body, self.epoch)
        order = list(frames)
        answers: dict[str, Answer] = {}
        waiting: dict[str, int] = {}  # request id -> attempts
        queue = iter(order)
        exhausted = False
        deadline = time.monotonic() + self.timeout
        while len(answers) < len(order):
            while not exhausted and len(waiting) < window:
                following = next(queue, None)
                if following is None:
                    exhausted = True
                    break
                self._socket.send(frames[following])
                waiting[following] = 1
            left = deadline - time.monotonic()
            if left > 0 and self._socket.poll(int(left * 1000) + 1):
                reply_id, status, reason, body = decode_reply(self._socket.recv())
                if reply_id in waiting:
                    del waiting[reply_id]
                    answers[reply_id] = Answer(status, reason, body)
                    deadline = time.monotonic() + self.timeout
                continue
            retry = {rid: n for rid, n in waiting.items() if n <= self.retries}
            if len(retry) < len(waiting):
                raise DaemonTimeout(
                    f"no reply from {self.address} to {len(waiting)} of {len(order)} pipelined "
                    f"requests after {self.retries + 1} attempts ({len(answers)} answered)"
                )
            for rid in retry:
                self._socket.send(frames[rid])
                waiting[rid] += 1
            deadline = time.monotonic() + self.timeout
        return [answers[rid] for rid in order]

    def batch(self, requests: Iterable[tuple[str, Mapping[str, Any]]]) -> list[Answer]:
        """Send state-changing requests as one `batch` message (at most 10,000): the daemon
        applies them in order, each on its own (one refused does not stop the others), and
        answers once; returns every answer in order. Cheaper per event than `pipeline` (one
        frame each way); retried as a whole, which applies none twice."""
        items = [{"type": kind, "body": dict(body)} for kind, body in requests]
        body = self.request("batch", {"requests": items})
        return [
            Answer(Status(status), reason, answer) for status, reason, answer in body["answers"]
        ]

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
        """Submit a task; returns the record sequence number it was journaled as."""
        body: dict[str, Any] = {"task_id": task_id, "job_id": job_id}
        if request is not None:
            body["request"] = _resources(request)
        if priority:
            body["priority"] = priority
        if labels:
            body["labels"] = dict(labels)
        selectors = [dict(s) for s in selectors]
        if selectors:
            body["selectors"] = selectors
        return int(self.request("task_submitted", body)["seq"])

    def confirm_task(self, task_id: int, machine_id: str | None = None) -> int:
        """Tell the daemon a task it placed has started (`task_started`), on `machine_id` if
        given (refused if the daemon has it elsewhere by now): under a daemon run with
        `--lease-ms`, a placement not confirmed in time returns the task to the queue."""
        body: dict[str, Any] = {"task_id": task_id}
        if machine_id is not None:
            body["machine_id"] = machine_id
        return int(self.request("task_started", body)["seq"])

    def complete_task(self, task_id: int) -> int:
        return int(self.request("task_completed", {"task_id": task_id})["seq"])

    def fail_task(self, task_id: int, reason: str = "") -> int:
        return int(self.request("task_failed", {"task_id": task_id, "reason": reason})["seq"])

    def remove_task(self, task_id: int) -> int:
        return int(self.request("task_removed", {"task_id": task_id})["seq"])

    def update_task(
        self,
        task_id: int,
        *,
        request: Resources | None = None,
        priority: int | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> int:
        body: dict[str, Any] = {"task_id": task_id}
        if request is not None:
            body["request"] = _resources(request)
        if priority is not None:
            body["priority"] = priority
        if labels is not None:
            body["labels"] = dict(labels)
        return int(self.request("task_updated", body)["seq"])

    def add_machines(self, machines: Iterable[MachineSpec]) -> int:
        """Add machines (a resource subtree: a rack's worth, say) as one all-or-nothing
        request."""
        body = {"machines": [machine.to_wire() for machine in machines]}
        return int(self.request("node_added", body)["seq"])

    def fail_machine(self, machine_id: str, reason: str = "") -> int:
        body = {"machine_id": machine_id, "reason": reason}
        return int(self.request("node_failed", body)["seq"])

    def remove_machine(self, machine_id: str) -> int:
        return int(self.request("node_removed", {"machine_id": machine_id})["seq"])

    def update_machine(
        self,
        machine_id: str,
        *,
        capacity: Resources | None = None,
        slots: int | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> int:
        body: dict[str, Any] = {"machine_id": machine_id}
        if capacity is not None:
            body["capacity"] = _resources(capacity)
        if slots is not None:
            body["slots"] = slots
        if labels is not None:
            body["labels"] = dict(labels)
        return int(self.request("node_updated", body)["seq"])

    def task_stats(self, task_id: int, usage: Resources) -> int:
        body = {"task_id": task_id, "usage": _resources(usage)}
        return int(self.request("task_stats", body)["seq"])

    def machine_stats(self, machine_id: str, usage: Resources) -> int:
        body = {"machine_id": machine_id, "usage": _resources(usage)}
        return int(self.request("node_stats", body)["seq"])

    def latency_sample(
        self, machine_id: str, peer_id: str, latency_us: float, *, path: int = 0
    ) -> int:
        """Report a latency measured from `machine_id` to `peer_id` over ECMP path `path`
        (NoMora's input; a PTPmesh or Pingmesh style system would send these)."""
        body = {"machine_id": machine_id, "peer_id": peer_id, "latency_us": latency_us}
        if path:
            body["path"] = path
        return int(self.request("latency_stats", body)["seq"])

    def schedule(self) -> RoundReply:
        """Run a round (the next one to start) and return what it applied."""
        return RoundReply.from_body(self.request("schedule"))

    def status(self) -> dict[str, Any]:
        return self.request("status")

    def register(self, manager: str) -> int:
        """Register as the manager that drives the daemon (`manager` names it in the log):
        returns the new epoch, which every later request of this client carries. Writes under
        an older epoch, or none, are refused from now on (`fenced`), so a manager that was
        replaced cannot go on changing the cluster."""
        self.epoch = None  # a registration is never fenced
        body = self.request("register", {"manager": manager})
        self.epoch = int(body["epoch"])
        return self.epoch

    def round(self, round_id: int) -> RoundReply:
        """The answer round `round_id` gave, while the daemon keeps it (its last 1,000 rounds'):
        how a manager that lost a `schedule` answer (its own crash) learns what that round
        decided. RequestFailed (`not_found`) for a round in progress or not kept."""
        return RoundReply.from_body(self.request("round", {"round": round_id}))

    def changes(
        self, after: int, *, limit: int = 1_000, wait_s: float = 0.0, boot: str | None = None
    ) -> ChangePage:
        """The journal records after sequence number `after` (at most `limit`), in order; if
        there are none yet, wait up to `wait_s` for one. `boot`: the daemon's boot the records
        up to `after` were read from (`ChangePage.boot`). RequestFailed (`gone`) when they are
        no longer all kept, or may have been lost: list the tasks and machines again
        (`ClusterView.load`)."""
        body: dict[str, Any] = {"after": after, "limit": limit}
        if wait_s > 0:
            body["wait_ms"] = max(1, round(wait_s * 1000))
        if boot is not None:
            body["boot"] = boot
        reply = self.request("changes", body, timeout=self.timeout + max(0.0, wait_s))
        return ChangePage(
            list(reply["changes"]), bool(reply["more"]), int(reply["seq"]), str(reply["boot"])
        )

    def follow(
        self, after: int, *, wait_s: float = 10.0, boot: str | None = None
    ) -> Iterator[dict[str, Any]]:
        """Every change after sequence number `after`, in order, as they happen: endless
        (stop iterating to stop). RequestFailed (`gone`) if the client fell behind the daemon's
        window of kept changes, or the daemon lost records it had given (see `changes`)."""
        while True:
            page = self.changes(after, wait_s=wait_s, boot=boot)
            boot = page.boot
            yield from page.changes
            if page.last is not None:
                after = page.last

    def tasks(
        self,
        *,
        state: TaskState | None = None,
        machine_id: str | None = None,
        page: int = 1_000,
    ) -> Iterator[ListedTask]:
        """Every task the daemon knows (in `state`, running on `machine_id`, if given), in id
        order, fetched `page` at a time: how a cluster manager reconciles its view after it or
        the daemon restarted. Pages are read one after another, not as one snapshot: a task
        that exists throughout is listed exactly once, one that comes or goes meanwhile may or
        may not be."""
        body: dict[str, Any] = {"limit": page}
        if state is not None:
            body["state"] = state.value
        if machine_id is not None:
            body["machine_id"] = machine_id
        while True:
            reply = self.request("tasks", body)
            for task_id, job_id, task_state, on in reply["tasks"]:
                yield ListedTask(task_id, job_id, TaskState(task_state), on)
            if not reply["more"]:
                return
            body["after"] = reply["tasks"][-1][0]

    def machines(self, *, page: int = 1_000) -> Iterator[ListedMachine]:
        """Every machine the daemon knows, in id order, fetched `page` at a time (as `tasks`)."""
        body: dict[str, Any] = {"limit": page}
        while True:
            reply = self.request("machines", body)
            for row in reply["machines"]:
                yield ListedMachine(*row)
            if not reply["more"]:
                return
            body["after"] = reply["machines"][-1][0]
