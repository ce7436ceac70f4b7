"""The daemon's authoritative state, with no I/O: checked requests in, replies and records out.

`ServiceState` owns the cluster state the daemon acknowledges to its clients. A state-changing
request is checked against it (a task id that does not exist is NOT_FOUND, one that does on
submission ALREADY_EXISTS), applied as a whole or not at all, and turned into a record: a
msgpack-ready map with a sequence number that the daemon journals before it replies and
forwards to its scheduling process. Records are the only way the state changes, so replaying
them (`replay`) on an equal state gives an equal state: recovery after a crash replays the
journal into the last snapshot, and the scheduling process replays the same records into its
replica (a `Scheduler`'s state).

Two kinds of record:

* `{"seq", "time", "kind": "request", "id", "type", "body"}`: a client's accepted request, as it
  was checked (see `protocol.events_of` for the events it stands for);
* `{"seq", "time", "kind": "decisions", "deltas"}`: the decisions of a round that this state
  accepted (see `scheduler.decisions.apply_decisions`), in wire form.

It also answers the read-only requests that list tasks and machines (`list_tasks`,
`list_machines`), a page at a time in id order, so that a cluster manager can reconcile its
view with the daemon's after either restarts.

Request ids make retries safe: every applied request id is remembered with a digest of the
request it named (the last `dedup_window` of them, restored by replay too). A request with a
known id gets the first one's reply again instead of a second application, if it is the same
request; a different request under a used id is refused as invalid, since applying it or
answering "already applied" would both be wrong (a client that restarted its id counter, say).
"""

from __future__ import annotations

import heapq
import json
import zlib
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from firmament_py.model.cluster import ClusterState
from firmament_py.model.errors import ClusterError
from firmament_py.model.events import (
    ClusterEvent,
    LatencySample,
    MachineAdded,
    MachineEvent,
    TaskSubmitted,
)
from firmament_py.model.ids import Time
from firmament_py.model.states import TaskState, TaskTransition
from firmament_py.scheduler.decisions import Decision, DecisionOutcome, apply_decisions
from firmament_py.service.protocol import (
    STATE_CHANGING_TYPES,
    Request,
    Status,
    decision_from_wire,
    decision_to_wire,
    events_of,
    is_plain,
)

__all__ = [
    "DEFAULT_DEDUP_WINDOW",
    "DEFAULT_LIST",
    "ReplayError",
    "Replica",
    "ServiceState",
    "replay",
]

DEFAULT_DEDUP_WINDOW = 200_000

_Applied = tuple[int, int | None]
"""What is remembered of an applied request id: its record's seq and the request's digest
(`_digest`; None for an id restored from a snapshot written before digests were kept)."""


def _digest(kind: str, body: Mapping[str, Any]) -> int:
    """A digest of a request that every process computes alike (snapshots keep it), from its
    type and body as the protocol checked them or a record holds them. For a task submitted
    with nothing but its job, or a task removed (`protocol.is_plain`: most of the traffic), it
    is the task id, negated for a removal: cheap (`ServiceState._apply` inlines it), and enough
    to tell another task's request apart, though not the same task under another job. Any
    other request's is a CRC of its canonical JSON, plus 2^64 to keep it apart from those."""
    task_id = body.get("task_id")
    if type(task_id) is int and len(body) <= 2:
        if kind == "task_submitted" and len(body) == 2 and "job_id" in body:
            return task_id
        if kind == "task_removed" and len(body) == 1:
            return -1 - task_id
    text = json.dumps([kind, body], sort_keys=True, separators=(",", ":"), default=_json_value)
    return (1 << 64) + zlib.crc32(text.encode())


def _json_value(value: object) -> object:
    """What JSON has no type for, as what a journal round trip makes of it (msgpack writes
    every mapping as a map, and bytes stay bytes): the same digest before and after."""
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, bytes | bytearray):
        return {"bytes": bytes(value).hex()}
    raise TypeError(f"a request body cannot hold {type(value).__name__} values")


_OK, _INVALID = Status.OK.value, Status.INVALID.value
_NOT_FOUND, _ALREADY_EXISTS = Status.NOT_FOUND.value, Status.ALREADY_EXISTS.value

DEFAULT_LIST = 1_000
"""Tasks or machines a `tasks` or `machines` reply lists when the request gives no `limit`."""


class ReplayError(Exception):
    """A record that does not apply to the state it is replayed on: the journal and the state
    (or the scheduling process's replica) disagree, which is a bug or a corrupt journal."""


class Replica(Protocol):
    """What records are replayed into: a `Scheduler`, or a bare cluster state (`StateReplica`)."""

    @property
    def state(self) -> ClusterState:
        """The cluster state the records change."""

    def handle(self, event: ClusterEvent) -> tuple[TaskTransition, ...] | None:
        """Apply one event (ClusterError if the state refuses it)."""

    def apply_decisions(self, decisions: list[Decision]) -> DecisionOutcome:
        """Apply decisions, reporting those the state refuses."""

    def trusted_submit(self, time: Time, task_id: int, job_id: str) -> None:
        """A plain submission, without the event (see `ClusterState.trusted_submit`)."""

    def trusted_remove(self, time: Time, task_id: int) -> None:
        """A plain removal, without the event."""


class StateReplica:
    """A cluster state as a `Replica`: events and decisions applied directly."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state

    def handle(self, event: ClusterEvent) -> tuple[TaskTransition, ...]:
        return self.state.apply(event)

    def apply_decisions(self, decisions: list[Decision]) -> DecisionOutcome:
        return apply_decisions(self.state, decisions)

    def trusted_submit(self, time: Time, task_id: int, job_id: str) -> None:
        self.state.trusted_submit(time, task_id, job_id)

    def trusted_remove(self, time: Time, task_id: int) -> None:
        self.state.trusted_remove(time, task_id)


def _advance(state: ClusterState, time: Time) -> None:
    if time > state.now:
        state.advance_to(time)


def replay(replica: Replica, record: Mapping[str, Any]) -> None:
    """Apply one record to `replica`; ReplayError if it does not apply."""
    kind = record.get("kind")
    time = record["time"]
    if kind == "request":
        _advance(replica.state, time)
        request_type, body = record["type"], record["body"]
        try:
            if is_plain(request_type, body):  # as `ServiceState` applied it
                _apply_plain(replica, request_type, body, time)
                return
            for event in events_of(request_type, body, time):
                replica.handle(event)
        except (ClusterError, ValueError, TypeError) as error:
            raise ReplayError(f"record {record['seq']}: {error}") from error
    elif kind == "decisions":
        _advance(replica.state, time)
        try:
            decisions = [decision_from_wire(item) for item in record["deltas"]]
        except ValueError as error:
            raise ReplayError(f"record {record['seq']}: {error}") from error
        outcome = replica.apply_decisions(decisions)
        if outcome.refused:
            raise ReplayError(f"record {record['seq']}: refused {outcome.refused[0]}")
    else:
        raise ReplayError(f"record {record.get('seq')}: unknown kind {kind!r}")


def _apply_plain(replica: Replica, kind: str, body: Mapping[str, Any], time: Time) -> None:
    """Apply a plain request (`protocol.is_plain`) through the replica's trusted calls, which
    take its checked values without building events."""
    if kind == "task_submitted":
        replica.trusted_submit(time, body["task_id"], body["job_id"])
    else:
        replica.trusted_remove(time, body["task_id"])


@dataclass
class Reply:
    """A reply to send: status, reason and body (the request id is the caller's)."""

    status: Status
    reason: str = ""
    body: dict[str, Any] = field(default_factory=dict)


class ServiceState:
    """The authoritative cluster state, its record sequence and the replies to applied ids."""

    def __init__(
        self,
        state: ClusterState | None = None,
        *,
        seq: int = 0,
        dedup_window: int = DEFAULT_DEDUP_WINDOW,
    ) -> None:
        self.cluster = ClusterState() if state is None else state
        self.seq = seq
        self.dedup_window = dedup_window
        self._replica = StateReplica(self.cluster)
        self._applied: OrderedDict[str, _Applied] = OrderedDict()

    # ------------------------------------------------------------------ snapshots

    def snapshot(self) -> dict[str, Any]:
        """What a journal snapshot holds (picklable)."""
        applied = [(request_id, *entry) for request_id, entry in self._applied.items()]
        return {"seq": self.seq, "cluster": self.cluster, "applied": applied}

    @classmethod
    def from_snapshot(
        cls, payload: Mapping[str, Any], *, dedup_window: int = DEFAULT_DEDUP_WINDOW
    ) -> ServiceState:
        service = cls(payload["cluster"], seq=payload["seq"], dedup_window=dedup_window)
        for request_id, seq, *digest in payload["applied"]:
            service._remember(request_id, seq, digest[0] if digest else None)  # older: no digest
        return service

    def replay(self, records: Iterable[Mapping[str, Any]]) -> int:
        """Apply journaled records after the current sequence number; returns how many."""
        count = 0
        for record in records:
            if record["seq"] <= self.seq:
                continue  # already in the snapshot
            if record["seq"] != self.seq + 1:
                raise ReplayError(f"record {record['seq']} follows record {self.seq}: a gap")
            replay(self._replica, record)
            self.seq = record["seq"]
            if record["kind"] == "request":
                digest = _digest(record["type"], record["body"])
                self._remember(record["id"], record["seq"], digest)
            count += 1
        return count

    def _remember(self, request_id: str, seq: int, digest: int | None) -> None:
        self._applied[request_id] = (seq, digest)
        if len(self._applied) > self.dedup_window:
            self._applied.popitem(last=False)

    # ------------------------------------------------------------------ requests

    def clock(self, wall_us: int) -> Time:
        """The time of something happening now: the wall clock, never before the state's."""
        return max(self.cluster.now, wall_us)

    def advance(self, time: Time) -> None:
        """Move the clock to `time` (a round's), if it is later. Not journaled: every record
        after it carries a time at least as late, and replay moves the clock with them."""
        _advance(self.cluster, time)

    def apply_request(self, request: Request, time: Time) -> tuple[Reply, dict[str, Any] | None]:
        """Check and apply a state-changing request at `time`: its reply, and the record to
        journal (None if nothing changed: refused, or a retry of an applied request id)."""
        if request.type not in STATE_CHANGING_TYPES:
            raise ValueError(f"{request.type!r} does not change the state")
        status, reason, body, record = self._apply(
            request.request_id, request.type, request.body, time
        )
        return Reply(Status(status), reason, body), record

    def apply_batch(self, request: Request, time: Time) -> tuple[Reply, list[dict[str, Any]]]:
        """Apply a `batch`'s requests in order, each as `apply_request` would (the i-th under
        the request id `ID/i`, so a retried batch applies none twice): the reply, whose body
        holds every request's `[status, reason, body]`, and the records to journal."""
        answers: list[list[Any]] = []
        records: list[dict[str, Any]] = []
        prefix = request.request_id + "/"
        for index, item in enumerate(request.body["requests"]):
            status, reason, body, record = self._apply(
                prefix + str(index), item["type"], item["body"], time
            )
            answers.append([status, reason, body])
            if record is not None:
                records.append(record)
        return Reply(Status.OK, "", {"answers": answers}), records

    def _apply(
        self, request_id: str, kind: str, body: Mapping[str, Any], time: Time
    ) -> tuple[str, str, dict[str, Any], dict[str, Any] | None]:
        """`apply_request` as plain values (status value, reason, reply body, record): a batch
        makes no objects per request it applies."""
        plain = is_plain(kind, body)
        if plain:  # `_digest`, inlined for most of the traffic
            task_id = body["task_id"]
            digest = task_id if kind == "task_submitted" else -1 - task_id
        else:
            digest = _digest(kind, body)
        known = self._applied.get(request_id)
        if known is not None:
            seq, first_digest = known
            if first_digest is not None and first_digest != digest:
                reason = (
                    f"request id {request_id!r} was used before for a different request "
                    f"(record {seq}): request ids name one request each"
                )
                return _INVALID, reason, {}, None
            return _OK, "already applied", {"seq": seq}, None
        if plain:
            refused = self._plain_refusal(kind, body["task_id"])
            if refused is not None:
                return refused
            _advance(self.cluster, time)
            _apply_plain(self._replica, kind, body, time)
        else:
            try:
                events = events_of(kind, body, time)
            except (ValueError, TypeError) as error:
                return _INVALID, str(error), {}, None
            refusal = self._refusal(events)
            if refusal is not None:
                return refusal.status.value, refusal.reason, refusal.body, None
            _advance(self.cluster, time)
            applied: list[ClusterEvent] = []
            for event in events:
                try:
                    self.cluster.apply(event)
                except ClusterError as error:
                    # Only a single event can fail here (`_refusal` checked what could refuse a
                    # machine of a multi-machine request), so the state is as it was.
                    assert not applied, "a multi-machine request failed half-way"
                    return _INVALID, str(error), {}, None
                applied.append(event)
        self.seq = seq = self.seq + 1
        self._remember(request_id, seq, digest)
        record = {
            "seq": seq,
            "time": time,
            "kind": "request",
            "id": request_id,
            "type": kind,
            # The protocol's checked body is a dict of its own already; copy anything else.
            "body": body if type(body) is dict else dict(body),
        }
        return _OK, "", {"seq": seq}, record

    def _plain_refusal(
        self, kind: str, task_id: int
    ) -> tuple[str, str, dict[str, Any], None] | None:
        """For a plain request (`protocol.is_plain`): the refusal `_refusal` would give its
        event, or None."""
        exists = task_id in self.cluster.tasks
        if kind == "task_submitted" and exists:
            return _ALREADY_EXISTS, f"task {task_id} already exists", {}, None
        if kind == "task_removed" and not exists:
            return _NOT_FOUND, f"no task {task_id}", {}, None
        return None

    def _refusal(self, events: list[ClusterEvent]) -> Reply | None:
        """NOT_FOUND or ALREADY_EXISTS for ids that do or do not exist, before anything is
        applied."""
        cluster = self.cluster
        seen: set[str] = set()
        pods: dict[str, str] = {}  # rack -> pod, of the machines added so far in this request
        for event in events:
            if isinstance(event, TaskSubmitted):
                if event.task_id in cluster.tasks:
                    return Reply(Status.ALREADY_EXISTS, f"task {event.task_id} already exists")
            elif isinstance(event, MachineAdded):
                if event.machine_id in cluster.machines or event.machine_id in seen:
                    return Reply(
                        Status.ALREADY_EXISTS, f"machine {event.machine_id!r} already exists"
                    )
                seen.add(event.machine_id)
                rack = cluster.racks.get(event.rack_id)
                pod = rack.pod_id if rack is not None else pods.get(event.rack_id, event.pod_id)
                if pod != event.pod_id:
                    return Reply(
                        Status.INVALID,
                        f"machine {event.machine_id!r} names rack {event.rack_id!r} in pod "
                        f"{event.pod_id!r}, but that rack is in pod {pod!r}",
                    )
                pods[event.rack_id] = pod
            elif isinstance(event, MachineEvent):
                if event.machine_id not in cluster.machines:
                    return Reply(Status.NOT_FOUND, f"no machine {event.machine_id!r}")
                if isinstance(event, LatencySample) and event.peer_id not in cluster.machines:
                    return Reply(Status.NOT_FOUND, f"no machine {event.peer_id!r}")
            elif event.task_id not in cluster.tasks:
                return Reply(Status.NOT_FOUND, f"no task {event.task_id}")
        return None

    # ------------------------------------------------------------------ reads

    def list_tasks(self, body: Mapping[str, Any]) -> Reply:
        """A `tasks` reply: `[task_id, job_id, state, machine_id]` of the tasks (in `state`, on
        `machine_id`, if given) whose ids follow `after`, in id order, at most `limit`; `more`
        says whether others follow. One pass over the candidates per page."""
        cluster = self.cluster
        tasks = cluster.tasks
        state = TaskState(body["state"]) if "state" in body else None
        candidates: Iterable[int]
        if "machine_id" in body:
            machine = cluster.machines.get(body["machine_id"])
            if machine is None:
                return Reply(Status.NOT_FOUND, f"no machine {body['machine_id']!r}")
            candidates = machine.running_task_ids
        elif state is TaskState.RUNNABLE:
            candidates = cluster.waiting_task_ids
        else:
            candidates = tasks
        after = body.get("after", -1)
        limit = body.get("limit", DEFAULT_LIST)
        ids = heapq.nsmallest(
            limit + 1,
            (i for i in candidates if i > after and (state is None or tasks[i].state is state)),
        )
        rows = [
            [i, tasks[i].job_id, tasks[i].state.value, tasks[i].machine_id] for i in ids[:limit]
        ]
        return Reply(Status.OK, "", {"tasks": rows, "more": len(ids) > limit, "seq": self.seq})

    def list_machines(self, body: Mapping[str, Any]) -> Reply:
        """A `machines` reply: `[machine_id, rack_id, pod_id, slots, running]` of the machines
        whose ids follow `after` (in string order), at most `limit`, and `more`."""
        cluster = self.cluster
        after = body.get("after", "")
        limit = body.get("limit", DEFAULT_LIST)
        ids = heapq.nsmallest(limit + 1, (m for m in cluster.machines if m > after))
        rows = []
        for machine_id in ids[:limit]:
            machine = cluster.machines[machine_id]
            pod = cluster.racks[machine.rack_id].pod_id
            rows.append(
                [machine_id, machine.rack_id, pod, machine.slots, len(machine.running_task_ids)]
            )
        return Reply(Status.OK, "", {"machines": rows, "more": len(ids) > limit, "seq": self.seq})

    # ------------------------------------------------------------------ rounds

    def apply_decisions(
        self, decisions: list[Decision], time: Time
    ) -> tuple[DecisionOutcome, dict[str, Any] | None]:
        """Apply a round's decisions at `time`: what was applied and refused, and the record to
        journal (None if nothing was applied)."""
        _advance(self.cluster, time)
        outcome = apply_decisions(self.cluster, decisions)
        if not outcome.applied:
            return outcome, None
        self.seq += 1
        record = {
            "seq": self.seq,
            "time": time,
            "kind": "decisions",
            "deltas": [decision_to_wire(d) for d in outcome.applied],
        }
        return outcome, record
