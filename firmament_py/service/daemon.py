"""The scheduling daemon: a ZeroMQ front for external cluster managers (`firmament-py serve`).

One thread serves requests on a ROUTER socket; a separate process (`round_worker`) runs the
scheduling rounds, so requests are answered while a round runs. The loop, in order:

1. read up to `batch` requests; check each (`protocol.decode_request`) and apply the
   state-changing ones to the authoritative `ServiceState` (refusals change nothing);
2. append their records to the journal as one frame and flush it (fsync by policy), and only
   then send the replies: nothing acknowledged is lost by a crash of the daemon, and a retried
   request id is answered, not re-applied;
3. forward the same frame to the scheduling process, whose replica follows the same records;
4. when a round was asked for (`schedule` requests, or every `auto_schedule_ms`), send
   `decide`; when its decisions come back, journal the round whole (`rounds`: a crash from
   then on loses none of them) and apply them to the state `decision_chunk` at a time,
   one chunk per turn between the turns' requests, so that a round placing thousands of tasks
   does not hold up requests (a decision about a task that finished meanwhile is refused);
   journal and forward each chunk's record (flushed with the next turn's replies, not on its
   own: no reply goes out before what it may show is safe); after the last, flush, answer the
   `schedule` requests with the round's deltas and publish them on the PUB socket.

On start the journal is recovered (the last snapshot, then the records after it) before the
sockets bind; a round a crash cut short is finished first, and its answer given to the
`schedule` ids that retry; every `snapshot_every` records a forked child writes a snapshot
that bounds the next recovery, while this process serves on. `stop()` (the CLI calls it on
SIGTERM and SIGINT) finishes the round in flight, flushes the journal, writes a snapshot and
closes.

Pauses of the request loop are what a client sees in its tail latency, so the loop keeps them
short: the state it has recovered, and the state as of each snapshot, is moved out of the
cyclic garbage collector's sight (`gc.freeze`; the service's state holds no reference cycles),
which would otherwise walk all of it now and then; and the socket to the scheduling process
has no high-water mark, so a scheduling process that falls behind never blocks a send here
(its backlog shows as the rounds' `round_ms`).

Binding anything but loopback requires CURVE keys (`firmament_py.service.keys`): clients without
an allowed key cannot connect at all, so they get no reply of any kind.

This module sets the daemon up and runs its loop and its requests; the rounds are
`daemon_rounds.RoundDriver`'s, and where records go (journal, change feed, scheduling process)
`daemon_core.DaemonCore`'s.
"""

from __future__ import annotations

import gc
import logging
import os
import shutil
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import zmq

from firmament_py.service.changes import ChangeFeed, Watches
from firmament_py.service.clock import DaemonClock
from firmament_py.service.daemon_config import DaemonConfig, DaemonError, check_config
from firmament_py.service.daemon_core import pack
from firmament_py.service.daemon_rounds import RoundDriver, RoundInFlight
from firmament_py.service.endpoints import is_loopback, open_ipv6
from firmament_py.service.journal import Journal, JournalError
from firmament_py.service.keys import AllowedClients, start_authenticator
from firmament_py.service.listing import list_machines, list_tasks, round_answer
from firmament_py.service.protocol import (
    PROTOCOL_VERSION,
    WRITE_TYPES,
    ProtocolError,
    Status,
    decode_request,
    encode_reply,
)
from firmament_py.service.state import ServiceState
from firmament_py.service.worker_link import WorkerLink, WorkerLinkError

if TYPE_CHECKING:
    from zmq.auth.thread import ThreadAuthenticator

__all__ = ["DaemonConfig", "DaemonError", "SchedulingDaemon", "is_loopback"]

_log = logging.getLogger(__name__)


_READS = {"tasks": list_tasks, "machines": list_machines, "round": round_answer}
"""The read-only requests answered from the state as it is (`listing`)."""


class SchedulingDaemon(RoundDriver):
    """The daemon; `serve()` runs its loop in the calling thread until `stop()`."""

    def __init__(self, config: DaemonConfig) -> None:
        check_config(config)
        self.config = config
        # A start that fails after this point removes a journal directory it made itself (it
        # holds nothing acknowledged), rather than leave an empty one behind.
        journal_is_new = not Path(config.journal).exists()
        try:
            self.journal = Journal(config.journal, fsync=config.fsync)
        except OSError as error:  # cannot be made: a file there, no permission, ...
            raise JournalError(f"cannot use {config.journal} for the journal: {error}") from error
        # The recovered state is long-lived and holds no cycles: collections while it is
        # built (a snapshot's hundred thousand tasks set off dozens) would only walk it, and
        # it is frozen whole below.
        collecting = gc.isenabled()
        gc.disable()
        try:
            payload, records = self.journal.recover()
            if payload is None:
                self.service = ServiceState(dedup_window=config.dedup_window)
            else:
                self.service = ServiceState.from_snapshot(payload, dedup_window=config.dedup_window)
            base = self.service.seq  # the snapshot's: the records after it are the feed's
            self.recovered_records = self.service.replay(records)
            self.feed = ChangeFeed.unpacked(
                base, (payload or {}).get("changes", b""), config.watch_window
            )
            after = [record for record in records if record["seq"] > base]
            frame = pack(after)  # packed once: for the feed and the first scheduling process
            if after:
                self.feed.add_frame(frame, after)
            # The first scheduling process rebuilds this state itself (`send_init_from_journal`)
            # from the snapshot's bytes, these records and those journaled until it says hello.
            self._first_init: list[bytes] | None = [frame]
            self._first_init_bytes = len(self._first_init[0])
            self._recovered_snapshot = self.journal.take_recovered_snapshot()
            self._clock = DaemonClock(
                config.journal, floor=self.service.cluster.now, durable=config.fsync == "always"
            )
            # Placements still unconfirmed could not be confirmed while the daemon was down.
            self.service.leases.grace(self._clock.now())
            gc.freeze()  # before collecting again: see the module docstring
        except BaseException as error:
            self.journal.close()  # releases its lock: another daemon may try it
            if isinstance(error, OSError):
                raise JournalError(
                    f"cannot read the journal in {config.journal}: {error}"
                ) from error
            raise
        finally:
            if collecting:
                gc.enable()
        _log.info(
            "journal %s: recovered up to record %d (%d replayed)",
            config.journal,
            self.service.seq,
            self.recovered_records,
        )
        self.rounds = 0
        self.overloaded = 0
        """Writes refused OVERLOADED since the start (`status`)."""
        self.started = time.monotonic()
        self._stopping = threading.Event()
        self._round: RoundInFlight | None = None
        self.boot = os.urandom(8).hex()
        """This process's id: a follower that saw another boot may have seen records a crash of
        the machine lost (`changes`)."""
        self._watches = Watches(self.feed, boot=self.boot, recovered=self.service.seq)
        self._next_round_waiters: list[tuple[bytes, str]] = []
        self._waiting_ids: set[str] = set()  # `schedule` ids waiting, not yet journaled
        self._last_round_start = 0.0
        self._caught_up_at: float | None = None  # None: the last turn caught up
        self._round_ids = self.service.rounds.last  # round numbers never repeat
        cut_short = self.service.rounds.current
        if cut_short is not None:
            # A crash in the middle of a round: its decisions are journaled; the loop applies
            # the rest of them before any new round, and answers the retried requests.
            _log.warning(
                "round %d was cut short after %d of its %d decisions; finishing it",
                cut_short.round_id,
                cut_short.done,
                len(cut_short.deltas),
            )
            self._round = RoundInFlight(cut_short.round_id, [], time.monotonic(), decided=True)
        self._context = zmq.Context()
        self._authenticator: ThreadAuthenticator | None = None
        self._allowed: AllowedClients | None = None
        self._keys_checked = time.monotonic()
        self._link: WorkerLink | None = None
        try:
            self._open_sockets()
            self.link.start()
        except BaseException:
            self._context.destroy(linger=0)
            if self._link is not None:
                self._link.close()
            self.journal.close()
            if journal_is_new:
                shutil.rmtree(config.journal, ignore_errors=True)
            raise

    def _open_sockets(self) -> None:
        config = self.config
        if config.curve is not None:
            self._authenticator = start_authenticator(self._context, config.curve)
            self._allowed = AllowedClients(self._authenticator, config.curve.clients)
        self._router = self._context.socket(zmq.ROUTER)
        self._router.setsockopt(zmq.MAXMSGSIZE, 4 * config.max_message_bytes)
        self._router.setsockopt(zmq.ROUTER_HANDOVER, 1)
        self._router.setsockopt(zmq.LINGER, 1000)
        self._publisher: zmq.Socket[bytes] | None = None
        if config.curve is not None:
            config.curve.apply_server(self._router)
        options = {
            "policy": config.policy,
            "solver": config.solver,
            "solver_options": dict(config.solver_options),
        }
        try:
            self._link = WorkerLink(self._context, options)
        except WorkerLinkError as error:
            raise DaemonError(str(error)) from error
        open_ipv6(self._router, config.bind)
        try:
            self._router.bind(config.bind)
        except zmq.ZMQError as error:
            raise DaemonError(f"cannot bind {config.bind}: {error}") from error
        self.endpoint = self._router.getsockopt_string(zmq.LAST_ENDPOINT)
        if config.publish is not None:
            self._publisher = self._context.socket(zmq.PUB)
            open_ipv6(self._publisher, config.publish)
            if config.curve is not None:
                config.curve.apply_server(self._publisher)
            try:
                self._publisher.bind(config.publish)
            except zmq.ZMQError as error:
                raise DaemonError(f"cannot bind {config.publish}: {error}") from error
        self._poller = zmq.Poller()
        self._poller.register(self._router, zmq.POLLIN)
        self._poller.register(self._link.socket, zmq.POLLIN)

    # ------------------------------------------------------------------ the loop

    def stop(self) -> None:
        """Ask `serve` to finish the round in flight, flush and return (thread- and
        signal-safe)."""
        self._stopping.set()

    def serve(self) -> None:
        """Serve until `stop()`; then close everything."""
        try:
            while not self._stopping.is_set() or self._round is not None:
                self.serve_once(self._poll_timeout_ms())
        finally:
            self.close()

    def _poll_timeout_ms(self) -> int:
        if self._round is not None and self._round.decided:
            return 0  # decisions to apply: only look for requests in between
        if self.journal.snapshot_in_progress:
            return 10  # to reap the snapshot's child soon
        watch = self._watches.next_deadline_s()
        if watch is not None and watch < 0.1:
            return int(watch * 1000) + 1  # a `changes` request's wait ends
        if not self.link.ready:
            # No round can start: its hello wakes the poll; only a restart has a time to keep.
            if self.link.process is None:
                return max(0, min(100, int(self.link.restart_wait_s() * 1000) + 1))
            return 100
        interval = self.config.auto_schedule_ms
        if interval is None or self._round is not None:
            return 100
        due = self._last_round_start + interval / 1000 - time.monotonic()
        return max(0, min(100, int(due * 1000) + 1))

    def serve_once(self, timeout_ms: int = 0) -> None:
        """One turn of the loop: wait up to `timeout_ms` for something to do, and do it."""
        ready = dict(self._poller.poll(timeout_ms))
        if self._router in ready:
            self._serve_requests()
        else:
            self._caught_up_at = None  # nothing waits in the socket
        if self.link.socket in ready:
            self._serve_worker()
        if self._round is not None and self._round.decided:
            self._apply_chunk()
        if len(self.service.leases) and self._behind_s() == 0:  # none expire while overloaded
            expired = self.service.expire_leases(self._now())
            if expired is not None:
                _log.info("%d placements were not confirmed in time", len(expired["deltas"]))
                self._commit([expired])  # flushed with the next replies, as a chunk is
        if self._watches.waiting_before(self.feed.seq) or self._watches.next_deadline_s() == 0:
            self._flush()  # answers the `changes` requests that have records or waited enough
        code = self.link.exited()
        if code is not None:
            _log.error("the scheduling process exited (status %s); restarting it", code)
            if self._round is not None and not self._round.decided:
                reason = f"the scheduling process exited (status {code})"
                self._answer_round(Status.ERROR, reason, {})
        elif self.link.hello_overdue():
            _log.error("the scheduling process never connected; starting another")
            self.link.stop_process()
        if self.link.process is None and not self._stopping.is_set():
            if self.link.restart_wait_s() <= 0:
                self.link.start()
        self.journal.poll_snapshot()
        if self._allowed is not None and time.monotonic() - self._keys_checked >= 1.0:
            self._keys_checked = time.monotonic()
            if self._allowed.refresh():
                _log.info("the allowed client keys changed; new connections see the change")
        if self._round is None and not self._stopping.is_set() and self.link.ready:
            interval = self.config.auto_schedule_ms
            due = interval is not None and (
                time.monotonic() - self._last_round_start >= interval / 1000
            )
            if self._next_round_waiters or due:
                self._start_round()

    def _serve_requests(self) -> None:
        replies: list[list[bytes]] = []
        records: list[dict[str, Any]] = []
        behind = self._behind_s()
        caught_up = False
        for _ in range(self.config.batch):
            try:
                frames = self._router.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                caught_up = True
                break
            identity, frames = frames[0], frames[1:]
            frame = self._reply_or_record(identity, frames, records, behind)
            if frame is not None:
                replies.append([identity, frame])
        if caught_up:
            self._caught_up_at = None
        elif self._caught_up_at is None:
            self._caught_up_at = time.monotonic()
        self._commit(records)
        self._flush()  # these records, and any chunk's before them: see `_commit`
        for reply in replies:
            self._router.send_multipart(reply)

    def _behind_s(self) -> float:
        """How long the request loop has been reading full turns without emptying its socket
        (0 if the last turn emptied it): how far its intake lags the clients, roughly. While
        it is past `max_intake_lag_ms`, writes are answered OVERLOADED unread, which empties
        the socket fast, instead of being applied ever later."""
        if self._caught_up_at is None:
            return 0.0
        return time.monotonic() - self._caught_up_at

    def _reply_or_record(
        self,
        identity: bytes,
        frames: list[bytes],
        records: list[dict[str, Any]],
        behind_s: float = 0.0,
    ) -> bytes | None:
        """The reply frame to one request (None if it waits for a round); its record, if it
        changed the state, is appended to `records`. A write is refused OVERLOADED while the
        loop is `behind_s` past its intake bound (`_behind_s`)."""
        if len(frames) != 1:
            return encode_reply("", Status.INVALID, f"expected one frame, got {len(frames)}")
        frame = frames[0]
        if len(frame) > self.config.max_message_bytes:
            return encode_reply(
                "",
                Status.INVALID,
                f"a message of {len(frame):,} bytes exceeds the limit of "
                f"{self.config.max_message_bytes:,}",
            )
        try:
            request = decode_request(frame)
        except ProtocolError as error:
            return encode_reply(error.request_id, error.status, error.reason)
        if request.type == "status":
            return encode_reply(request.request_id, Status.OK, "", self.status())
        if request.type == "changes":
            return self._watches.request(identity, request.request_id, request.body)
        if request.type in _READS:
            reply = _READS[request.type](self.service, request.body)
            return encode_reply(request.request_id, reply.status, reply.reason, reply.body)
        fenced = self.service.fence(request)
        if fenced is not None:
            return encode_reply(request.request_id, fenced.status, fenced.reason, fenced.body)
        if (
            behind_s * 1000 > self.config.max_intake_lag_ms
            and request.type in WRITE_TYPES
            and request.type != "task_started"  # cheap, and a lease may be running out
        ):
            self.overloaded += 1
            return encode_reply(
                request.request_id,
                Status.OVERLOADED,
                f"the daemon's intake is {behind_s:.2f} s behind its clients; retry later",
                {"retry_after_ms": self.config.max_intake_lag_ms},
            )
        if request.type == "schedule":
            return self._schedule(identity, request.request_id)
        if request.request_id in self._waiting_ids:
            reason = (
                f"request id {request.request_id!r} names a schedule request waiting for a "
                "round: request ids name one request each"
            )
            return encode_reply(request.request_id, Status.INVALID, reason)
        now = self._now()
        if request.type == "register":
            reply, record = self.service.register(request, now)
            if record is not None:
                records.append(record)
                _log.info("manager %r registered: epoch %d", request.body["manager"], record["seq"])
                self._fence_waiters()
            return encode_reply(request.request_id, reply.status, reply.reason, reply.body)
        if request.type == "batch":
            reply, batch = self.service.apply_batch(request, now)
            records.extend(batch)
            return encode_reply(request.request_id, reply.status, reply.reason, reply.body)
        try:
            reply, record = self.service.apply_request(request, now)
        except Exception as error:  # a bug; the request is refused and the daemon serves on
            _log.exception("request %s (%s) failed", request.request_id, request.type)
            return encode_reply(request.request_id, Status.ERROR, f"internal error: {error}")
        if record is not None:
            records.append(record)
        return encode_reply(request.request_id, reply.status, reply.reason, reply.body)

    # ------------------------------------------------------------------ status and closing

    def status(self) -> dict[str, Any]:
        """Health and counts, as the `status` request answers them."""
        cluster = self.service.cluster
        running = sum(len(machine.running_task_ids) for machine in cluster.machines.values())
        return {
            "protocol": PROTOCOL_VERSION,
            "policy": self.config.policy,
            "solver": self.config.solver,
            "seq": self.service.seq,
            "boot": self.boot,
            "recovered_seq": self._watches.recovered,
            "epoch": self.service.epoch,
            "changes_after": self.feed.base,
            "watching": len(self._watches),
            "rounds": self.rounds,
            "overloaded": self.overloaded,
            "intake_lag_s": self._behind_s(),
            "lease_ms": self.config.lease_ms,
            "manager": self.service.manager,
            "unconfirmed": self.service.leases.unconfirmed(cluster),
            "lease_expired": self.service.leases.expired,
            "round_in_flight": self._round is not None,
            "machines": len(cluster.machines),
            "tasks": len(cluster.tasks),
            "waiting": len(cluster.waiting_task_ids),
            "running": running,
            "worker_alive": self.link.alive,
            "worker_pid": self.link.pid,
            "snapshot_in_progress": self.journal.snapshot_in_progress,
            "snapshot_failures": self.journal.snapshot_failures,
            "uptime_s": time.monotonic() - self.started,
            "now_us": self._clock.now(),
        }

    def close(self) -> None:
        """Flush the journal, write a snapshot, stop the worker, close the sockets."""
        if self._context.closed:
            return
        try:
            self.journal.write_snapshot(self.service.seq, self._snapshot())
        finally:
            try:
                self._clock.close()  # while the journal's lock keeps a successor out
            finally:
                self.journal.close()
            self.link.close()
            if self._authenticator is not None:
                self._authenticator.stop()
            self._context.destroy(linger=1000)
