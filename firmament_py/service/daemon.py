"""The scheduling daemon: a ZeroMQ front for external cluster managers (`firmament-py serve`).

One thread serves requests on a ROUTER socket; a separate process (`round_worker`) runs the
scheduling rounds, so requests are answered while a round runs. The loop, in order:

1. read up to `batch` requests; check each (`protocol.decode_request`), apply the
   state-changing ones to the authoritative `ServiceState` (refusals change nothing) and
   append their records to the journal;
2. flush the journal (fsync by policy), and only then send the replies: nothing acknowledged
   is lost by a crash of the daemon, and a retried request id is answered, not re-applied;
3. forward the new records to the scheduling process, whose replica follows the same records;
4. when a round was asked for (`schedule` requests, or every `auto_schedule_ms`), send
   `decide`; when its decisions come back, apply them to the state (a decision about a task
   that finished meanwhile is refused there), journal the applied ones, forward that record,
   answer the `schedule` requests with the deltas and publish them on the PUB socket.

On start the journal is recovered (the last snapshot, then the records after it) before the
sockets bind; every `snapshot_every` records a snapshot bounds the next recovery. `stop()` (the
CLI calls it on SIGTERM and SIGINT) finishes the round in flight, flushes the journal, writes a
snapshot and closes.

Binding anything but loopback requires CURVE keys (`firmament_py.service.keys`): clients without
an allowed key cannot connect at all, so they get no reply of any kind.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import pickle
import subprocess
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import msgpack
import zmq
from zmq.auth.thread import ThreadAuthenticator

from firmament_py.service.journal import Journal
from firmament_py.service.keys import CurveServerKeys, start_authenticator
from firmament_py.service.protocol import (
    PROTOCOL_VERSION,
    ProtocolError,
    Status,
    decision_from_wire,
    decision_to_wire,
    decode_request,
    encode_reply,
)
from firmament_py.service.state import DEFAULT_DEDUP_WINDOW, ServiceState

__all__ = ["DaemonConfig", "DaemonError", "SchedulingDaemon", "is_loopback"]

_log = logging.getLogger(__name__)

_SCHEDULE_ANSWERS_KEPT = 1_000
"""Answers to `schedule` requests kept for clients that retry after the answer was sent."""


class DaemonError(Exception):
    """The daemon cannot start as configured (an insecure bind, an unusable journal)."""


@dataclass(frozen=True)
class DaemonConfig:
    """How a daemon serves. Addresses are ZeroMQ endpoints (`tcp://127.0.0.1:7100`)."""

    bind: str
    journal: Path
    policy: str = "trivial"
    solver: str = "cost-scaling"
    solver_options: Mapping[str, Any] = field(default_factory=dict)
    publish: str | None = None
    """Where to publish every round's deltas (a PUB socket), if anywhere."""
    auto_schedule_ms: int | None = None
    """Run a round this often on its own (besides `schedule` requests)."""
    fsync: str = "always"
    snapshot_every: int = 100_000
    """Write a snapshot after this many records."""
    max_message_bytes: int = 1 << 20
    """Larger requests get an INVALID reply; four times as large closes the connection."""
    max_schedule_waiters: int = 1_000
    """`schedule` requests waiting beyond this many get OVERLOADED."""
    batch: int = 1_000
    """Requests read per loop turn (then the journal is flushed and replies are sent)."""
    dedup_window: int = DEFAULT_DEDUP_WINDOW
    curve: CurveServerKeys | None = None


def is_loopback(endpoint: str) -> bool:
    """Whether `endpoint` can only be reached from this machine (tcp on a loopback address,
    ipc, inproc)."""
    parts = urlsplit(endpoint)
    if parts.scheme in ("ipc", "inproc"):
        return True
    if parts.scheme != "tcp":
        return False
    host = parts.netloc.rsplit(":", 1)[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # "*", an interface name, a host name


def _wall_us() -> int:
    return time.time_ns() // 1_000


def _pack(value: Any) -> bytes:
    return bytes(msgpack.packb(value, use_bin_type=True))


@dataclass
class _Round:
    round_id: int
    waiters: list[tuple[bytes, str]]
    started: float


class SchedulingDaemon:
    """The daemon; `serve()` runs its loop in the calling thread until `stop()`."""

    def __init__(self, config: DaemonConfig) -> None:
        if not is_loopback(config.bind) and config.curve is None:
            raise DaemonError(
                f"binding {config.bind} reaches beyond this machine: give CURVE keys "
                "(--curve-keys DIR, made by `firmament-py keys generate`)"
            )
        if config.publish is not None and not is_loopback(config.publish) and not config.curve:
            raise DaemonError(f"publishing on {config.publish} needs CURVE keys too")
        self.config = config
        self.journal = Journal(config.journal, fsync=config.fsync)
        payload, records = self.journal.recover()
        if payload is None:
            self.service = ServiceState(dedup_window=config.dedup_window)
        else:
            self.service = ServiceState.from_snapshot(payload, dedup_window=config.dedup_window)
        self.recovered_records = self.service.replay(records)
        _log.info(
            "journal %s: recovered up to record %d (%d replayed)",
            config.journal,
            self.service.seq,
            self.recovered_records,
        )
        self.rounds = 0
        self.started = time.monotonic()
        self._stopping = threading.Event()
        self._round: _Round | None = None
        self._next_round_waiters: list[tuple[bytes, str]] = []
        self._schedule_answers: OrderedDict[str, bytes] = OrderedDict()
        self._last_round_start = 0.0
        self._round_ids = 0
        self._context = zmq.Context()
        self._authenticator: ThreadAuthenticator | None = None
        self._process: subprocess.Popen[bytes] | None = None
        try:
            self._open_sockets()
        except BaseException:
            self._context.destroy(linger=0)
            self.journal.close()
            raise
        self._start_worker()

    def _open_sockets(self) -> None:
        config = self.config
        if config.curve is not None:
            self._authenticator = start_authenticator(self._context, config.curve)
        self._router = self._context.socket(zmq.ROUTER)
        self._router.setsockopt(zmq.MAXMSGSIZE, 4 * config.max_message_bytes)
        self._router.setsockopt(zmq.ROUTER_HANDOVER, 1)
        self._router.setsockopt(zmq.LINGER, 1000)
        self._publisher: zmq.Socket[bytes] | None = None
        if config.curve is not None:
            config.curve.apply_server(self._router)
        self._worker = self._context.socket(zmq.PAIR)
        self._worker.setsockopt(zmq.LINGER, 0)
        port = self._worker.bind_to_random_port("tcp://127.0.0.1")
        self._worker_endpoint = f"tcp://127.0.0.1:{port}"
        try:
            self._router.bind(config.bind)
        except zmq.ZMQError as error:
            raise DaemonError(f"cannot bind {config.bind}: {error}") from error
        self.endpoint = self._router.getsockopt_string(zmq.LAST_ENDPOINT)
        if config.publish is not None:
            self._publisher = self._context.socket(zmq.PUB)
            if config.curve is not None:
                config.curve.apply_server(self._publisher)
            try:
                self._publisher.bind(config.publish)
            except zmq.ZMQError as error:
                raise DaemonError(f"cannot bind {config.publish}: {error}") from error
        self._poller = zmq.Poller()
        self._poller.register(self._router, zmq.POLLIN)
        self._poller.register(self._worker, zmq.POLLIN)

    # ------------------------------------------------------------------ the worker

    def _start_worker(self) -> None:
        self._stop_worker_process()
        self._process = subprocess.Popen(
            [sys.executable, "-m", "firmament_py.service.round_worker", self._worker_endpoint]
        )
        options = {
            "policy": self.config.policy,
            "solver": self.config.solver,
            "solver_options": dict(self.config.solver_options),
        }
        self._worker.send_multipart(
            [b"init", pickle.dumps(self.service.cluster), pickle.dumps(options)]
        )

    def _stop_worker_process(self, *, asked: bool = False) -> None:
        """Wait for the worker to exit (if it was `asked` to), else end it."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        if asked:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(5)
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

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
        if self._worker in ready:
            self._serve_worker()
        if self._process is not None and self._process.poll() is not None:
            code = self._process.returncode
            _log.error("the scheduling process exited (status %s); restarting it", code)
            if self._round is not None:
                reason = f"the scheduling process exited (status {code})"
                self._answer_round(self._round.round_id, Status.ERROR, reason, {})
            self._start_worker()
        if self._round is None and not self._stopping.is_set():
            interval = self.config.auto_schedule_ms
            due = interval is not None and (
                time.monotonic() - self._last_round_start >= interval / 1000
            )
            if self._next_round_waiters or due:
                self._start_round()

    def _serve_requests(self) -> None:
        replies: list[list[bytes]] = []
        records: list[dict[str, Any]] = []
        for _ in range(self.config.batch):
            try:
                frames = self._router.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                break
            identity, frames = frames[0], frames[1:]
            frame = self._reply_or_record(identity, frames, records)
            if frame is not None:
                replies.append([identity, frame])
        self.journal.flush()
        for reply in replies:
            self._router.send_multipart(reply)
        if records:
            self._worker.send_multipart([b"records", _pack(records)])
        if self.journal.records_since_snapshot >= self.config.snapshot_every:
            self.journal.write_snapshot(self.service.seq, self.service.snapshot())

    def _reply_or_record(
        self,
        identity: bytes,
        frames: list[bytes],
        records: list[dict[str, Any]],
    ) -> bytes | None:
        """The reply frame to one request (None if it waits for a round); its record, if it
        changed the state, is appended to `records` and the journal."""
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
        if request.type == "schedule":
            return self._schedule(identity, request.request_id)
        now = self.service.clock(_wall_us())
        if request.type == "batch":
            reply, batch = self.service.apply_batch(request, now)
            for applied in batch:
                self.journal.append(applied)
            records.extend(batch)
            return encode_reply(request.request_id, reply.status, reply.reason, reply.body)
        try:
            reply, record = self.service.apply_request(request, now)
        except Exception as error:  # a bug; the request is refused and the daemon serves on
            _log.exception("request %s (%s) failed", request.request_id, request.type)
            return encode_reply(request.request_id, Status.ERROR, f"internal error: {error}")
        if record is not None:
            self.journal.append(record)
            records.append(record)
        return encode_reply(request.request_id, reply.status, reply.reason, reply.body)

    def _schedule(self, identity: bytes, request_id: str) -> bytes | None:
        """Wait for the next round, unless this request id is waiting already (a client's
        retry: the round's answer goes to the latest connection) or was answered (the
        answer again)."""
        answered = self._schedule_answers.get(request_id)
        if answered is not None:
            return answered
        waiting = [self._next_round_waiters]
        if self._round is not None:
            waiting.append(self._round.waiters)
        for waiters in waiting:
            for index, (_, waiting_id) in enumerate(waiters):
                if waiting_id == request_id:
                    waiters[index] = (identity, request_id)
                    return None
        if len(self._next_round_waiters) >= self.config.max_schedule_waiters:
            reason = f"{len(self._next_round_waiters)} schedule requests are waiting already"
            return encode_reply(request_id, Status.OVERLOADED, reason + "; try later")
        self._next_round_waiters.append((identity, request_id))
        return None

    def _start_round(self) -> None:
        self._round_ids += 1
        self._round = _Round(self._round_ids, self._next_round_waiters, time.monotonic())
        self._next_round_waiters = []
        self._last_round_start = self._round.started
        # The replica's clock moves to the round's time; so does this state's, so that every
        # later record is at that time or after (even if the wall clock steps back).
        now = self.service.clock(_wall_us())
        self.service.advance(now)
        self._worker.send_multipart([b"decide", _pack([self._round.round_id, now])])

    def _serve_worker(self) -> None:
        while True:
            try:
                kind, *parts = self._worker.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            if kind == b"decided":
                try:
                    self._finish_round(msgpack.unpackb(parts[0], raw=False))
                except Exception as error:  # a bug: the round is lost, the daemon serves on
                    _log.exception("applying a round's decisions failed")
                    if self._round is not None:
                        reason = f"internal error applying the round: {error}"
                        self._answer_round(self._round.round_id, Status.ERROR, reason, {})
            elif kind == b"failed":
                round_id, reason = msgpack.unpackb(parts[0], raw=False)
                self._answer_round(round_id, Status.ERROR, f"the round failed: {reason}", {})
            elif kind == b"diverged":
                # A bug: the replica refused a record the state accepted. Start it afresh.
                reason = parts[0].decode(errors="replace")
                _log.error("the scheduling process diverged (%s); restarting it", reason)
                if self._round is not None:
                    round_id = self._round.round_id
                    self._answer_round(round_id, Status.ERROR, f"replica diverged: {reason}", {})
                self._start_worker()

    def _finish_round(self, answer: Mapping[str, Any]) -> None:
        if self._round is None or answer["round"] != self._round.round_id:
            return  # a round of a worker that was restarted since
        decisions = [decision_from_wire(item) for item in answer["deltas"]]
        outcome, record = self.service.apply_decisions(decisions, self.service.clock(_wall_us()))
        if record is not None:
            self.journal.append(record)
            self.journal.flush()
            self._worker.send_multipart([b"records", _pack([record])])
        self.rounds += 1
        body = {
            "round": answer["round"],
            "deltas": [decision_to_wire(d) for d in outcome.applied],
            "refused": [[decision_to_wire(u.decision), u.reason] for u in outcome.refused],
            "cost": answer["cost"],
            "algorithm": answer["algorithm"],
            "timings": answer["timings"],
            "task_errors": answer["task_errors"],
            "seq": self.service.seq,
        }
        if self._publisher is not None and outcome.applied:
            self._publisher.send_multipart([b"deltas", _pack(body)])
        self._answer_round(answer["round"], Status.OK, "", body)

    def _answer_round(
        self, round_id: int, status: Status, reason: str, body: Mapping[str, Any]
    ) -> None:
        if self._round is None or self._round.round_id != round_id:
            return
        for identity, request_id in self._round.waiters:
            reply = encode_reply(request_id, status, reason, body)
            self._router.send_multipart([identity, reply])
            self._schedule_answers[request_id] = reply
            if len(self._schedule_answers) > _SCHEDULE_ANSWERS_KEPT:
                self._schedule_answers.popitem(last=False)
        self._round = None

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
            "rounds": self.rounds,
            "round_in_flight": self._round is not None,
            "machines": len(cluster.machines),
            "tasks": len(cluster.tasks),
            "waiting": len(cluster.waiting_task_ids),
            "running": running,
            "worker_alive": self._process is not None and self._process.poll() is None,
            "uptime_s": time.monotonic() - self.started,
            "now_us": cluster.now,
        }

    def close(self) -> None:
        """Flush the journal, write a snapshot, stop the worker, close the sockets."""
        if self._context.closed:
            return
        try:
            self.journal.write_snapshot(self.service.seq, self.service.snapshot())
        finally:
            self.journal.close()
            with contextlib.suppress(zmq.ZMQError):
                self._worker.send_multipart([b"stop"], zmq.NOBLOCK)
            self._stop_worker_process(asked=True)
            if self._authenticator is not None:
                self._authenticator.stop()
            self._context.destroy(linger=1000)
