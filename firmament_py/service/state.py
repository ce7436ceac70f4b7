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
* `{"seq", "time", "kind": "decisions", "deltas", ...}`: the decisions of a round that this
  state accepted (see `scheduler.decisions.apply_decisions`), in wire form, a chunk of the
  round's at a time; with `{"kind": "round", ...}` records, which change no task, they also
  journal the round itself, so that a crash in the middle of one loses none of its decisions
  (`firmament_py.service.rounds` says how).

The read-only requests that list tasks and machines are `listing`'s; it reads this state.

Request ids make retries safe: every applied request id is remembered with a digest of the
request it named (the last `dedup_window` of them, restored by replay too). A request with a
known id gets the first one's reply again instead of a second application, if it is the same
request; a different request under a used id is refused as invalid, since applying it or
answering "already applied" would both be wrong (a client that restarted its id counter, say).
The ids of `schedule` requests are remembered with the round that answered them, and a batch's
id through its requests' (`ID/0`, ...): neither may name another request either.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from firmament_py.flow.deltas import DeltaKind, SchedulingDelta
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
from firmament_py.model.states import TaskState
from firmament_py.scheduler.decisions import Decision, DecisionOutcome, apply_decisions
from firmament_py.service.digests import SCHEDULE_DIGEST, digest_of, register_digest
from firmament_py.service.leases import LeaseBook
from firmament_py.service.protocol import (
    STATE_CHANGING_TYPES,
    WRITE_TYPES,
    Request,
    Status,
    decision_from_wire,
    decision_to_wire,
    events_of,
    is_plain,
)
from firmament_py.service.replay import (
    ReplayError,
    Replica,
    StateReplica,
    advance_clock,
    apply_plain,
    replay,
)
from firmament_py.service.rounds import RoundAnswer, RoundBook, order_decisions

__all__ = [
    "DEFAULT_DEDUP_WINDOW",
    "DEFAULT_LIST",
    "ReplayError",
    "Replica",
    "ScheduleRetry",
    "ServiceState",
    "replay",
]

DEFAULT_DEDUP_WINDOW = 200_000

_Applied = tuple[int, int | None]
"""What is remembered of an applied request id: its record's seq and the request's digest
(`digests.digest_of`; None for an id restored from a snapshot written before digests were kept)."""


_OK, _INVALID = Status.OK.value, Status.INVALID.value
_NOT_FOUND, _ALREADY_EXISTS = Status.NOT_FOUND.value, Status.ALREADY_EXISTS.value

DEFAULT_LIST = 1_000
"""Tasks or machines a `tasks` or `machines` reply lists when the request gives no `limit`."""


@dataclass
class Reply:
    """A reply to send: status, reason and body (the request id is the caller's)."""

    status: Status
    reason: str = ""
    body: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ScheduleRetry:
    """What a `schedule` request under an id the state knows gets: `reply` now, or, if None,
    the answer of the round in progress (the round it waited for, cut short by a restart)."""

    reply: Reply | None


def _used_before(request_id: str, seq: int, what: str = "a different request") -> Reply:
    return Reply(
        Status.INVALID,
        f"request id {request_id!r} was used before for {what} (record {seq}): request ids "
        "name one request each",
    )


class ServiceState:
    """The authoritative cluster state, its record sequence, the replies to applied ids, and
    where the journaled rounds stand (`rounds`)."""

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
        self.rounds = RoundBook()
        self.leases = LeaseBook()
        self.manager = ""
        """The name the last manager to register gave."""
        self.epoch = 0
        """The current writers' epoch: the record of the last `register` (0: none yet, and
        writes need no epoch)."""

    # ------------------------------------------------------------------ snapshots

    def snapshot(self) -> dict[str, Any]:
        """What a journal snapshot holds (picklable): the live state's own objects, not copies,
        to be pickled at once (the daemon does it in a forked child, or right away)."""
        return {
            "seq": self.seq,
            "cluster": self.cluster,
            # The ids as kept: a restart loads them whole (the older "applied" list of
            # (id, seq, digest) was remembered one id at a time, a tenth of a second at 100,000).
            "applied_ids": self._applied,
            "rounds": self.rounds.snapshot(),
            "epoch": self.epoch,
            "manager": self.manager,
            "leases": self.leases.snapshot(),
        }

    @classmethod
    def from_snapshot(
        cls, payload: Mapping[str, Any], *, dedup_window: int = DEFAULT_DEDUP_WINDOW
    ) -> ServiceState:
        """The state a `snapshot` payload holds; its objects become the new state's, not
        copies (a payload is used as unpickled, by nobody else)."""
        service = cls(payload["cluster"], seq=payload["seq"], dedup_window=dedup_window)
        if "applied_ids" in payload:
            service._applied = payload["applied_ids"]
            while service._applied and len(service._applied) > dedup_window:  # a smaller window
                service._applied.popitem(last=False)
        else:  # an older snapshot
            for request_id, seq, *digest in payload["applied"]:  # older still: no digest
                service._remember(request_id, seq, digest[0] if digest else None)
        if "rounds" in payload:  # older snapshots kept no rounds: numbering starts again at 1
            service.rounds = RoundBook.restore(payload["rounds"])
        service.epoch = payload.get("epoch", 0)  # older snapshots: nobody had registered
        service.manager = payload.get("manager", "")
        if "leases" in payload:  # older snapshots: no lease was ever given
            service.leases = LeaseBook.restore(payload["leases"])
        return service

    def replay(self, records: Iterable[Mapping[str, Any]]) -> int:
        """Apply journaled records after the current sequence number; returns how many."""
        count = 0
        for record in records:
            if record["seq"] <= self.seq:
                continue  # already in the snapshot
            if record["seq"] != self.seq + 1:
                raise ReplayError(f"record {record['seq']} follows record {self.seq}: a gap")
            kind = record["kind"]
            chunk = kind == "decisions" and "round" in record
            try:
                if chunk:
                    self.rounds.check_chunk(record)  # before any of its decisions is applied
                elif kind == "round":
                    self._begin(record)
            except ValueError as error:
                raise ReplayError(f"record {record['seq']}: {error}") from error
            replay(self._replica, record)
            self.seq = record["seq"]
            if kind == "request":
                digest = digest_of(record["type"], record["body"])
                self._remember(record["id"], record["seq"], digest)
                if record["type"] == "task_started":
                    self.leases.confirm(record["body"]["task_id"])
            elif kind == "epoch":
                self.epoch, self.manager = record["seq"], record["manager"]
                self._remember(record["id"], record["seq"], register_digest(record["manager"]))
            elif chunk:
                self.rounds.advance(record)
                self.leases.take_chunk(record)
            elif record.get("expired"):
                self.leases.take_expiry(record)
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
        advance_clock(self.cluster, time)

    def apply_request(self, request: Request, time: Time) -> tuple[Reply, dict[str, Any] | None]:
        """Check and apply a state-changing request at `time`: its reply, and the record to
        journal (None if nothing changed: refused, or a retry of an applied request id)."""
        if request.type not in STATE_CHANGING_TYPES:
            raise ValueError(f"{request.type!r} does not change the state")
        batch = self._batch_seq(request.request_id)
        if batch is not None:
            return _used_before(request.request_id, batch, "a batch"), None
        status, reason, body, record = self._apply(
            request.request_id, request.type, request.body, time
        )
        return Reply(Status(status), reason, body), record

    def register(self, request: Request, time: Time) -> tuple[Reply, dict[str, Any] | None]:
        """A manager registers (`register`): it gets a new epoch, the sequence number of the
        record made, and from now on every write must carry it (`fence`). A retry gets the
        same epoch again; the record to journal is None for a retry or a refusal."""
        digest = register_digest(request.body["manager"])
        known = self._applied.get(request.request_id)
        if known is not None:
            seq, first_digest = known
            if first_digest != digest:
                return _used_before(request.request_id, seq), None
            if seq != self.epoch:  # a retry answered after another manager registered
                reason = (
                    f"this registration (epoch {seq:,}) was superseded: the current epoch is "
                    f"{self.epoch:,}"
                )
                return Reply(Status.FENCED, reason, {"epoch": self.epoch}), None
            return Reply(Status.OK, "already applied", {"seq": seq, "epoch": seq}), None
        advance_clock(self.cluster, time)
        self.seq = self.epoch = self.seq + 1
        self.manager = request.body["manager"]
        self._remember(request.request_id, self.seq, digest)
        record = {
            "seq": self.seq,
            "time": time,
            "kind": "epoch",
            "id": request.request_id,
            "manager": request.body["manager"],
        }
        return Reply(Status.OK, "", {"seq": self.seq, "epoch": self.epoch}), record

    def fence(self, request: Request) -> Reply | None:
        """The refusal of a write (`protocol.WRITE_TYPES`) whose epoch is not the current one,
        once a manager has registered; None for a request that may go on."""
        if request.type not in WRITE_TYPES or request.epoch == (self.epoch or None):
            return None
        if self.epoch == 0:
            return Reply(
                Status.FENCED,
                f"epoch {request.epoch} was never given: no manager has registered here",
                {"epoch": 0},
            )
        given = "no epoch" if request.epoch is None else f"epoch {request.epoch}"
        return Reply(
            Status.FENCED,
            f"a write under {given}, while the current epoch is {self.epoch:,} (a manager "
            "registered since): only the last manager to register may write",
            {"epoch": self.epoch},
        )

    def apply_batch(self, request: Request, time: Time) -> tuple[Reply, list[dict[str, Any]]]:
        """Apply a `batch`'s requests in order, each as `apply_request` would (the i-th under
        the request id `ID/i`, so a retried batch applies none twice): the reply, whose body
        holds every request's `[status, reason, body]` (its reason is "already applied" when
        every one of them was), and the records to journal."""
        known = self._applied.get(request.request_id)
        if known is not None:  # a single request's or a `schedule`'s id: not this batch's
            return _used_before(request.request_id, known[0]), []
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
        # A retry of a batch all of whose requests were applied says so, as a retry of one
        # request does; one that tried some again (refused the first time) does not.
        again = all(answer[1] == "already applied" for answer in answers)
        return Reply(Status.OK, "already applied" if again else "", {"answers": answers}), records

    def _apply(
        self, request_id: str, kind: str, body: Mapping[str, Any], time: Time
    ) -> tuple[str, str, dict[str, Any], dict[str, Any] | None]:
        """`apply_request` as plain values (status value, reason, reply body, record): a batch
        makes no objects per request it applies."""
        plain = is_plain(kind, body)
        if plain:  # `digest_of`, inlined for most of the traffic
            task_id = body["task_id"]
            digest = task_id if kind == "task_submitted" else -1 - task_id
        else:
            digest = digest_of(kind, body)
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
            advance_clock(self.cluster, time)
            apply_plain(self._replica, kind, body, time)
        else:
            if kind == "task_started":  # changes no task: a lease is kept (`leases`)
                refused = self._start_refusal(body["task_id"], body.get("machine_id"))
                if refused is not None:
                    return refused
                self.leases.confirm(body["task_id"])
            try:
                events = events_of(kind, body, time)
            except (ValueError, TypeError) as error:
                return _INVALID, str(error), {}, None
            refusal = self._refusal(events)
            if refusal is not None:
                return refusal.status.value, refusal.reason, refusal.body, None
            advance_clock(self.cluster, time)
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

    def _batch_seq(self, request_id: str) -> int | None:
        """The record of the first request of the batch `request_id` named, if it named a
        batch (a fresh id: most requests' cost is one dict lookup more)."""
        if request_id in self._applied:
            return None
        first = self._applied.get(request_id + "/0")
        return None if first is None else first[0]

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

    def _start_refusal(
        self, task_id: int, machine_id: str | None
    ) -> tuple[str, str, dict[str, Any], None] | None:
        """The refusal of confirming that task `task_id` started (on `machine_id`, if given),
        unless it runs (there)."""
        task = self.cluster.tasks.get(task_id)
        if task is None:
            return _NOT_FOUND, f"no task {task_id}", {}, None
        if task.state is not TaskState.RUNNING:
            return _INVALID, f"task {task_id} is {task.state.value}, not running", {}, None
        if machine_id is not None and machine_id != task.machine_id:
            reason = (
                f"task {task_id} runs on {task.machine_id!r}, not {machine_id!r}: the placement "
                "confirmed is not the current one (its lease ran out, and it was placed again)"
            )
            return _INVALID, reason, {}, None
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

    # ------------------------------------------------------------------ rounds

    def apply_decisions(
        self, decisions: list[Decision], time: Time
    ) -> tuple[DecisionOutcome, dict[str, Any] | None]:
        """Apply decisions that belong to no journaled round at `time`: what was applied and
        refused, and the record to journal (None if nothing was applied). The daemon's rounds
        go through `begin_round` and `apply_round_chunk` instead."""
        advance_clock(self.cluster, time)
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

    def begin_round(
        self,
        round_id: int,
        request_ids: list[str],
        decided: Mapping[str, Any],
        time: Time,
        round_ms: float,
    ) -> tuple[dict[str, Any], RoundAnswer | None]:
        """Journal a round the scheduling process decided (its answer: `deltas`, `cost`,
        `algorithm`, `timings`, `task_errors`) before any of its decisions is applied: the
        record, and the round's answer if that finished it (it decided nothing; `round_ms` is
        then its time). The `request_ids` that waited for it are remembered as `schedule`
        requests. ValueError, with nothing changed, for a decision that is not one, or a
        round that does not follow the last (a bug)."""
        record = {
            "seq": self.seq + 1,
            "time": time,
            "kind": "round",
            "round": round_id,
            "ids": list(request_ids),
            "deltas": order_decisions(decided["deltas"]),
            **{key: decided[key] for key in ("cost", "algorithm", "timings", "task_errors")},
        }
        if not record["deltas"]:
            record["round_ms"] = round_ms
        answer = self._begin(record)
        self.seq += 1
        return record, answer

    def _begin(self, record: Mapping[str, Any]) -> RoundAnswer | None:
        answer = self.rounds.begin(record)
        for request_id in record["ids"]:
            self._remember(request_id, record["seq"], SCHEDULE_DIGEST)
        return answer

    def apply_round_chunk(
        self, size: int, time: Time, round_ms: float, lease_ms: int | None = None
    ) -> tuple[dict[str, Any], RoundAnswer | None]:
        """Apply the next chunk (up to `size` decisions) of the round in progress at `time`:
        the record to journal (written even if the state refused every decision, so that a
        recovery knows they were tried), and the round's answer if this was its last chunk
        (`round_ms` is then its time). With `lease_ms`, the tasks it places or moves hold a
        lease until confirmed (`leases`)."""
        current = self.rounds.current
        if current is None:
            raise ValueError("no round is in progress")
        items = current.next_chunk(size)
        advance_clock(self.cluster, time)
        outcome = apply_decisions(self.cluster, [decision_from_wire(item) for item in items])
        record: dict[str, Any] = {
            "seq": self.seq + 1,
            "time": time,
            "kind": "decisions",
            "deltas": [decision_to_wire(d) for d in outcome.applied],
            "round": current.round_id,
            "done": current.done + len(items),
            "refused": [[decision_to_wire(u.decision), u.reason] for u in outcome.refused],
        }
        if record["done"] == len(current.deltas):
            record["round_ms"] = round_ms
        if lease_ms is not None:
            record["lease_ms"] = lease_ms
        self.seq += 1
        self.leases.take_chunk(record)
        return record, self.rounds.advance(record)

    def expire_leases(self, time: Time) -> dict[str, Any] | None:
        """Preempt the tasks whose lease (`leases`) came due by `time` unconfirmed: the record
        to journal (`decisions`, marked `expired`), or None if none came due."""
        due = self.leases.due(self.cluster, time)
        if not due:
            return None
        decisions: list[Decision] = [
            SchedulingDelta(DeltaKind.PREEMPT, task_id, machine, None) for task_id, machine in due
        ]
        outcome, record = self.apply_decisions(decisions, time)
        for refused in outcome.refused:  # cannot happen: each runs where it was leased
            self.leases.confirm(refused.decision.task)
        if record is None:
            return None
        record["expired"] = True
        self.leases.take_expiry(record)
        return record

    def abort_round(self, reason: str, time: Time) -> tuple[dict[str, Any], RoundAnswer]:
        """End the round in progress with an error (applying it failed: a bug), keeping what
        was applied: the record, and the round's answer (`error`, `reason`)."""
        current = self.rounds.current
        if current is None:
            raise ValueError("no round is in progress")
        self.seq += 1
        record = {
            "seq": self.seq,
            "time": time,
            "kind": "decisions",
            "deltas": [],
            "round": current.round_id,
            "done": current.done,
            "refused": [],
            "error": reason,
        }
        answer = self.rounds.advance(record)
        assert answer is not None
        self.leases.take_chunk(record)  # what the round placed before it failed is leased
        return record, answer

    def schedule_retry(self, request_id: str) -> ScheduleRetry | None:
        """What a `schedule` request gets under an id this state knows; None for an id it does
        not know (the request waits for the next round). A round's answer again, or its round
        in progress; a refusal if the id named another request, or its round's answer is no
        longer kept."""
        known = self._applied.get(request_id)
        if known is None:
            batch = self._batch_seq(request_id)
            return (
                None if batch is None else ScheduleRetry(_used_before(request_id, batch, "a batch"))
            )
        seq, digest = known
        if digest != SCHEDULE_DIGEST:
            return ScheduleRetry(_used_before(request_id, seq))
        if self.rounds.round_of(request_id) is None:
            return ScheduleRetry(
                Reply(
                    Status.NOT_FOUND,
                    f"request id {request_id!r} was answered by the round journaled as record "
                    f"{seq}, whose answer is no longer kept (the last {self.rounds.kept_answers:,} "
                    "rounds' are): list the tasks to see where that round put them",
                )
            )
        answer = self.rounds.answer_for(request_id)
        if answer is None:
            return ScheduleRetry(None)  # its round is in progress
        return ScheduleRetry(Reply(Status(answer.status), answer.reason, dict(answer.body)))
