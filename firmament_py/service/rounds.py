"""Scheduling rounds as the daemon journals them, so that no decision is lost in a crash.

A round is decided whole by the scheduling process and applied by the daemon a chunk at a
time, with requests served between chunks. A crash between two chunks used to leave the first
chunks applied and journaled, the rest forgotten, and the `schedule` requests that waited for
the round unanswered; their retry then started a new round under the same number, and the
tasks of the first chunks ran without any answer ever naming them. So the round itself is
journaled, in two kinds of record (the cluster state's own records are `state`'s business):

* `{"seq", "time", "kind": "round", "round", "ids", "deltas", "cost", "algorithm", "timings",
  "task_errors"}`, before any of its decisions is applied: the round's number, the `schedule`
  request ids waiting for it, and every decision it made, in the order they are applied
  (preemptions, migrations, placements: `order_decisions`). It changes no task; a round with
  no decision also carries `round_ms` and is finished by this record alone;
* `{"seq", "time", "kind": "decisions", "deltas", "round", "done", "refused"}` for each chunk:
  the decisions the state accepted (which the cluster state replays), the ones it refused
  with why, and `done`, how many of the round's decisions have been through the state so far.
  The last chunk also carries `round_ms`; a round that failed half-way (a bug) ends with one
  carrying `error`.

Replaying these records (`RoundBook.begin`, `RoundBook.advance`) rebuilds where every round
stands: a restarted daemon finds the round a crash cut short in `RoundBook.current`, applies
the rest of its decisions (refusing those that events made moot, as always) before any new
round, and answers its retried `schedule` ids with the whole round, the chunks applied before
the crash included. The answers of the last rounds are kept (`RoundBook.answer_for`) for
`schedule` requests retried after their answer was sent, across restarts too; `last` is the
highest round number journaled, so numbers never repeat.

No I/O here: `ServiceState` makes the records, the daemon journals them.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from firmament_py.flow.deltas import DeltaKind, delta_problem

__all__ = [
    "KEPT_ANSWERS",
    "KEPT_DECISIONS",
    "RoundAnswer",
    "RoundBook",
    "RoundInProgress",
    "chunk_decisions",
    "order_decisions",
]

KEPT_ANSWERS = 1_000
"""Answers of finished rounds kept for retried `schedule` request ids..."""
KEPT_DECISIONS = 100_000
"""... as long as they hold no more decisions than this in all (the latest is always kept)."""

_KINDS: Mapping[str, DeltaKind] = {kind.value: kind for kind in DeltaKind}
_APPLY_ORDER = {DeltaKind.PREEMPT.value: 0, DeltaKind.MIGRATE.value: 1, DeltaKind.PLACE.value: 2}
_SUMMARY = ("cost", "algorithm", "timings", "task_errors")
"""What a round's answer carries from the scheduling process besides its decisions."""


def order_decisions(items: Any) -> list[list[Any]]:
    """Wire decisions (`[kind, task, from, to]`) in the order `apply_decisions` applies them:
    preemptions, migrations, placements. ValueError, before anything is applied, if an item
    is not a valid decision (checked without building the decisions, which is left to the
    turns that apply them)."""
    if not isinstance(items, list):
        raise ValueError(f"a round's decisions must be a list, got {items!r}")
    for item in items:
        if not (
            isinstance(item, list)
            and len(item) == 4
            and isinstance(item[0], str)
            and item[0] in _KINDS
        ):
            raise ValueError(f"a decision must be [kind, task, from, to], got {item!r}")
        problem = delta_problem(_KINDS[item[0]], item[1], item[2], item[3])
        if problem is not None:
            raise ValueError(problem)
    return sorted(items, key=lambda item: _APPLY_ORDER[item[0]])


def _chunk_end(deltas: list[list[Any]], start: int, size: int) -> int:
    """Where the chunk of `deltas` that starts at `start` ends: at most `size` decisions of one
    kind, except that the migrations go in one chunk (they are applied as one move)."""
    kind = deltas[start][0]
    end = start + 1
    limit = len(deltas) if kind == DeltaKind.MIGRATE.value else min(len(deltas), start + size)
    while end < limit and deltas[end][0] == kind:
        end += 1
    return end


def chunk_decisions(items: Any, size: int) -> list[list[list[Any]]]:
    """`order_decisions(items)` cut into the chunks the daemon applies, one per loop turn."""
    ordered = order_decisions(items)
    chunks = []
    start = 0
    while start < len(ordered):
        end = _chunk_end(ordered, start, size)
        chunks.append(ordered[start:end])
        start = end
    return chunks


@dataclass
class RoundInProgress:
    """A round whose decisions are journaled and are being applied a chunk at a time."""

    round_id: int
    request_ids: list[str]
    """The `schedule` request ids that waited for it when it was decided."""
    deltas: list[list[Any]]
    """Every decision of the round, in wire form and in the order they are applied."""
    summary: dict[str, Any]
    """Its cost, algorithm, timings and task errors, for the answer."""
    done: int = 0
    """How many of `deltas` have been through the state (applied or refused)."""
    applied: list[list[Any]] = field(default_factory=list)
    refused: list[list[Any]] = field(default_factory=list)
    """`[decision, reason]` pairs."""

    def next_chunk(self, size: int) -> list[list[Any]]:
        """The decisions to apply next: up to `size` of one kind (all the migrations)."""
        return self.deltas[self.done : _chunk_end(self.deltas, self.done, size)]


@dataclass(frozen=True)
class RoundAnswer:
    """A finished round as `schedule` answers it: status and reason (`ok` and "", or `error`
    for a round that failed half-way) and the body."""

    round_id: int
    request_ids: tuple[str, ...]
    status: str
    reason: str
    body: Mapping[str, Any]


class RoundBook:
    """Where the journaled rounds stand: the highest round number, the round in progress (if
    a crash or the loop's chunking left one), and the answers of the last finished rounds."""

    def __init__(
        self, *, kept_answers: int = KEPT_ANSWERS, kept_decisions: int = KEPT_DECISIONS
    ) -> None:
        self.last = 0
        """The highest round number journaled: the next round is numbered above it."""
        self.current: RoundInProgress | None = None
        self.kept_answers = kept_answers
        self.kept_decisions = kept_decisions
        self._answers: OrderedDict[int, RoundAnswer] = OrderedDict()
        self._decisions = 0  # in the kept answers
        self._by_request: dict[str, int] = {}  # request id -> its round, kept or in progress

    # ------------------------------------------------------------------ records

    def begin(self, record: Mapping[str, Any]) -> RoundAnswer | None:
        """Take a `round` record; its answer if it finished the round (it decided nothing).
        ValueError if it does not follow: another round in progress, or not a later number."""
        round_id = record["round"]
        if self.current is not None:
            raise ValueError(
                f"round {round_id} begins while round {self.current.round_id} is in progress"
            )
        if round_id <= self.last:
            raise ValueError(f"round {round_id} begins after round {self.last}: not a later one")
        self.last = round_id
        self.current = RoundInProgress(
            round_id,
            list(record["ids"]),
            list(record["deltas"]),
            {key: record[key] for key in _SUMMARY},
        )
        for request_id in self.current.request_ids:
            self._by_request[request_id] = round_id
        if self.current.deltas:
            return None
        return self._finish(record)

    def check_chunk(self, record: Mapping[str, Any]) -> RoundInProgress:
        """The round in progress, if `record` is its next chunk; else ValueError (a journal
        whose records do not follow: a bug, or corruption)."""
        current = self.current
        if current is None or record["round"] != current.round_id:
            where = "no round" if current is None else f"round {current.round_id}"
            raise ValueError(f"a chunk of round {record['round']} while {where} is in progress")
        if "error" not in record and not current.done < record["done"] <= len(current.deltas):
            raise ValueError(
                f"a chunk of round {current.round_id} up to decision {record['done']} follows "
                f"decision {current.done} of {len(current.deltas)}"
            )
        return current

    def advance(self, record: Mapping[str, Any]) -> RoundAnswer | None:
        """Take a chunk's `decisions` record; the round's answer if it was the last chunk.
        ValueError if it is not the next chunk of the round in progress (`check_chunk`)."""
        current = self.check_chunk(record)
        current.done = record["done"]
        current.applied.extend(record["deltas"])
        current.refused.extend(record["refused"])
        if "error" in record or current.done == len(current.deltas):
            return self._finish(record)
        return None

    def _finish(self, record: Mapping[str, Any]) -> RoundAnswer:
        """The answer of the round in progress, which `record` ended; kept, and the round is
        no longer in progress."""
        current = self.current
        assert current is not None
        self.current = None
        if "error" in record:
            answer = RoundAnswer(
                current.round_id, tuple(current.request_ids), "error", record["error"], {}
            )
        else:
            body = {
                "round": current.round_id,
                "deltas": current.applied,
                "refused": current.refused,
                **current.summary,
                "seq": record["seq"],
                "round_ms": record["round_ms"],
            }
            answer = RoundAnswer(current.round_id, tuple(current.request_ids), "ok", "", body)
        self._keep(answer)
        return answer

    def _keep(self, answer: RoundAnswer) -> None:
        self._answers[answer.round_id] = answer
        self._decisions += len(answer.body.get("deltas", ()))
        while len(self._answers) > 1 and (
            len(self._answers) > self.kept_answers or self._decisions > self.kept_decisions
        ):
            _, dropped = self._answers.popitem(last=False)
            self._decisions -= len(dropped.body.get("deltas", ()))
            for request_id in dropped.request_ids:
                if self._by_request.get(request_id) == dropped.round_id:
                    del self._by_request[request_id]

    # ------------------------------------------------------------------ lookups

    def round_of(self, request_id: str) -> int | None:
        """The round a `schedule` request id waited for, if it is in progress or its answer
        is kept."""
        return self._by_request.get(request_id)

    @property
    def oldest_kept(self) -> int | None:
        """The number of the oldest round whose answer is kept (None if none is)."""
        return next(iter(self._answers), None)

    def answer_of(self, round_id: int) -> RoundAnswer | None:
        """The kept answer of round `round_id` (None if it is in progress, was never journaled,
        or is no longer kept)."""
        return self._answers.get(round_id)

    def answer_for(self, request_id: str) -> RoundAnswer | None:
        """The kept answer of the round `request_id` waited for (None if it is in progress,
        or not kept)."""
        round_id = self._by_request.get(request_id)
        return None if round_id is None else self._answers.get(round_id)

    # ------------------------------------------------------------------ snapshots

    def snapshot(self) -> dict[str, Any]:
        """What a journal snapshot holds of the rounds (picklable)."""
        current = self.current
        return {
            "last": self.last,
            "current": None if current is None else vars(current).copy(),
            "answers": [vars(answer).copy() for answer in self._answers.values()],
        }

    @classmethod
    def restore(cls, payload: Mapping[str, Any]) -> RoundBook:
        """The rounds as `snapshot` saw them."""
        book = cls()
        for fields in payload["answers"]:
            for request_id in fields["request_ids"]:
                book._by_request[request_id] = fields["round_id"]
            book._keep(RoundAnswer(**fields))
        if payload["current"] is not None:
            book.current = RoundInProgress(**payload["current"])
            for request_id in book.current.request_ids:
                book._by_request[request_id] = book.current.round_id
        book.last = payload["last"]
        return book
