"""The daemon's rounds (`RoundDriver`): `schedule` requests wait for the next round, which the
scheduling process decides; the daemon journals the round whole before applying any of it
(`firmament_py.service.rounds`: a crash from then on loses none of its decisions), applies it a
chunk per turn of its loop, and answers the round's `schedule` requests, and publishes it, after
the last chunk. The scheduling process's messages (hello, decided, failed, diverged) are read
here too.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import msgpack
import zmq

from firmament_py.service.daemon_core import DaemonCore, pack
from firmament_py.service.protocol import Status, encode_reply
from firmament_py.service.rounds import RoundAnswer

__all__ = ["RoundDriver", "RoundInFlight"]

_log = logging.getLogger("firmament_py.service.daemon")


@dataclass
class RoundInFlight:
    """The round the loop is running: asked of the scheduling process, then (`decided`) its
    decisions journaled and applied a chunk per turn (`ServiceState.rounds.current`)."""

    round_id: int
    waiters: list[tuple[bytes, str]]
    """The connections and request ids of the `schedule` requests it answers."""
    started: float
    decided: bool = False


class RoundDriver(DaemonCore):
    """Rounds, from the `schedule` requests that ask for them to the answer; the round state
    below is set by `SchedulingDaemon.__init__`."""

    rounds: int
    """Rounds answered since the start (`status`)."""
    _round: RoundInFlight | None
    _next_round_waiters: list[tuple[bytes, str]]
    _waiting_ids: set[str]
    """`schedule` request ids waiting, not yet journaled (the state remembers them after)."""
    _round_ids: int
    _last_round_start: float

    def _schedule(self, identity: bytes, request_id: str) -> bytes | None:
        """The reply to a `schedule` request, or None if it waits for a round.

        An id the state knows (`ServiceState.schedule_retry`) is a retry: it gets its round's
        answer again, or waits for that round if it is in progress (one a restart resumed);
        one that named another request is refused. A retry of an id that waits already moves
        the answer to the latest connection. Any other id waits for the next round to start.
        """
        known = self.service.schedule_retry(request_id)
        if known is not None:
            if known.reply is not None:
                reply = known.reply
                return encode_reply(request_id, reply.status, reply.reason, reply.body)
            assert self._round is not None and self._round.decided  # it is `rounds.current`
            self._wait(self._round.waiters, identity, request_id)
            return None
        if request_id in self._waiting_ids:
            waiting = [self._next_round_waiters]
            if self._round is not None:
                waiting.append(self._round.waiters)
            for waiters in waiting:
                if any(waiting_id == request_id for _, waiting_id in waiters):
                    self._wait(waiters, identity, request_id)
            return None
        if len(self._next_round_waiters) >= self.config.max_schedule_waiters:
            reason = f"{len(self._next_round_waiters)} schedule requests are waiting already"
            return encode_reply(
                request_id, Status.OVERLOADED, reason + "; try later", {"retry_after_ms": 100}
            )
        self._next_round_waiters.append((identity, request_id))
        self._waiting_ids.add(request_id)
        return None

    def _fence_waiters(self) -> None:
        """Refuse the `schedule` requests waiting for the next round: another manager registered
        after they were accepted (those of the round in progress get its answer: its decisions
        are applied whoever asked)."""
        reason = f"another manager registered (epoch {self.service.epoch:,}) while this waited"
        for identity, request_id in self._next_round_waiters:
            body = {"epoch": self.service.epoch}
            self._router.send_multipart(
                [identity, encode_reply(request_id, Status.FENCED, reason, body)]
            )
            self._waiting_ids.discard(request_id)
        self._next_round_waiters = []

    @staticmethod
    def _wait(waiters: list[tuple[bytes, str]], identity: bytes, request_id: str) -> None:
        """`request_id` waits among `waiters`, answered on `identity` (its latest connection)."""
        for index, (_, waiting_id) in enumerate(waiters):
            if waiting_id == request_id:
                waiters[index] = (identity, request_id)
                return
        waiters.append((identity, request_id))

    def _start_round(self) -> None:
        self._round_ids += 1
        self._round = RoundInFlight(self._round_ids, self._next_round_waiters, time.monotonic())
        self._next_round_waiters = []
        self._last_round_start = self._round.started
        # The replica's clock moves to the round's time; so does this state's, so that every
        # later record is at that time or after (even if the wall clock steps back).
        now = self._now()
        self.service.advance(now)
        if not self.link.send([b"decide", pack([self._round.round_id, now])]):
            reason = "the scheduling process was lost; try again"
            self._answer_round(Status.ERROR, reason, {})

    def _serve_worker(self) -> None:
        while True:
            try:
                kind, *parts = self.link.socket.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            if kind == b"hello":  # a scheduling process (re)started and connected
                if self._first_init is not None:
                    self.link.send_init_from_journal(self._recovered_snapshot, self._first_init)
                    self._first_init = self._recovered_snapshot = None
                else:
                    self.link.send_init(self.service.cluster)
            elif kind == b"decided":
                answer = msgpack.unpackb(parts[0], raw=False)
                current = self._round
                if current is None or current.decided or answer["round"] != current.round_id:
                    continue  # a round of a worker that was restarted since
                self._begin_round(current, answer)
            elif kind == b"failed":
                round_id, reason = msgpack.unpackb(parts[0], raw=False)
                current = self._round
                if current is not None and not current.decided and current.round_id == round_id:
                    self._answer_round(Status.ERROR, f"the round failed: {reason}", {})
            elif kind == b"diverged":
                # A bug: the replica refused a record the state accepted. Start it afresh; a
                # round whose decisions are being applied goes on (they need no replica).
                reason = parts[0].decode(errors="replace")
                _log.error("the scheduling process diverged (%s); restarting it", reason)
                if self._round is not None and not self._round.decided:
                    self._answer_round(Status.ERROR, f"replica diverged: {reason}", {})
                self.link.start()

    def _begin_round(self, current: RoundInFlight, decided: Mapping[str, Any]) -> None:
        """Journal the round the scheduling process `decided` before applying any of it (see
        `firmament_py.service.rounds`): a crash from now on leaves it to be finished by the
        restarted daemon, so none of its decisions is lost. A round that decided nothing and
        that nobody waits for is not journaled (nobody ever sees its number)."""
        if not decided["deltas"] and not current.waiters:
            self.rounds += 1
            self._round = None
            return
        ids = [request_id for _, request_id in current.waiters]
        elapsed_ms = (time.monotonic() - current.started) * 1000
        try:
            record, finished = self.service.begin_round(
                current.round_id, ids, decided, self._now(), elapsed_ms
            )
        except ValueError as error:  # a bug: the round is lost, the daemon serves on
            _log.exception("the scheduling process sent a bad round")
            self._answer_round(Status.ERROR, f"internal error reading the round: {error}", {})
            return
        # Not forwarded: a round's record changes no task, and the replica made it.
        frame = pack([record])
        self.journal.append_packed(frame, 1)
        self.feed.add_frame(frame, [record])
        self._waiting_ids.difference_update(ids)  # remembered by the state from now on
        current.decided = True
        if finished is not None:
            self._finish_round(finished)

    def _apply_chunk(self) -> None:
        """Apply the next chunk of the round's decisions, journal and forward its record; after
        the last, answer and publish the round."""
        current = self._round
        assert current is not None and current.decided
        elapsed_ms = (time.monotonic() - current.started) * 1000
        try:
            record, finished = self.service.apply_round_chunk(
                self.config.decision_chunk, self._now(), elapsed_ms, self.config.lease_ms
            )
        except Exception as error:  # a bug: the rest of the round is lost, serving goes on
            _log.exception("applying a round's decisions failed")
            record, finished = self.service.abort_round(
                f"internal error applying the round: {error}", self._now()
            )
        self._commit([record])
        if finished is not None:
            self._finish_round(finished)

    def _finish_round(self, finished: RoundAnswer) -> None:
        """Answer and publish a round once its last record is journaled."""
        self._flush()  # before the answer acknowledges its decisions
        if finished.status != Status.OK.value:
            self._answer_round(Status(finished.status), finished.reason, {})
            return
        self.rounds += 1
        if self._publisher is not None and finished.body["deltas"]:
            self._publisher.send_multipart([b"deltas", pack(finished.body)])
        self._answer_round(Status.OK, "", finished.body)

    def _answer_round(self, status: Status, reason: str, body: Mapping[str, Any]) -> None:
        """Answer the `schedule` requests waiting for the current round, which ends. The state
        keeps a journaled round's answer for retries; an error before the round was journaled
        is not kept (nothing changed: a retry waits for the next round)."""
        if self._round is None:
            return
        self._flush()  # the chunks applied so far, even if the round failed after them
        for identity, request_id in self._round.waiters:
            reply = encode_reply(request_id, status, reason, body)
            self._router.send_multipart([identity, reply])
            self._waiting_ids.discard(request_id)
        self._round = None
