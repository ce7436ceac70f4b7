"""What the daemon's request loop and its round driving share (`DaemonCore`): the state and
where its records go. A record is journaled, added to the change feed and forwarded to the
scheduling process together (`_commit`); replies, and the `changes` requests waiting for
records, go out only once what they may show is flushed (`_flush`). Time comes from one clock
that never goes back (`_now`). `SchedulingDaemon` (daemon.py) sets everything up and runs the
loop; `RoundDriver` (daemon_rounds.py) runs the rounds.
"""

from __future__ import annotations

import gc
from typing import Any

import msgpack
import zmq

from firmament_py.service.changes import KEPT_ACROSS_RESTARTS, ChangeFeed, Watches
from firmament_py.service.clock import DaemonClock
from firmament_py.service.daemon_config import DaemonConfig
from firmament_py.service.journal import Journal
from firmament_py.service.state import ServiceState
from firmament_py.service.worker_link import WorkerLink

__all__ = ["DaemonCore", "pack"]

FIRST_INIT_LIMIT = 256 << 20
"""Bytes of records kept for the first scheduling process after a restart (`init-journal`) while
it has not said hello; beyond them it is sent the state instead."""


def pack(value: Any) -> bytes:
    return bytes(msgpack.packb(value, use_bin_type=True))


class DaemonCore:
    """The daemon's state and its records' ways out; `SchedulingDaemon.__init__` sets every
    attribute below."""

    config: DaemonConfig
    journal: Journal
    service: ServiceState
    feed: ChangeFeed
    _watches: Watches
    _clock: DaemonClock
    _router: zmq.Socket[bytes]
    _publisher: zmq.Socket[bytes] | None
    _link: WorkerLink | None
    _first_init: list[bytes] | None
    """Frames of records for the first scheduling process after a restart (`init-journal`)."""
    _first_init_bytes: int
    _recovered_snapshot: bytes | None

    @property
    def link(self) -> WorkerLink:
        """The scheduling process and the socket to it."""
        assert self._link is not None  # made before anything else could use it
        return self._link

    def _commit(self, records: list[dict[str, Any]]) -> None:
        """Queue `records` in the journal as one frame, forward the frame to the scheduling
        process, and start a snapshot when one is due. The caller flushes before it answers
        anything: a reply, even a read, may show these records' effects, so they must be as
        safe as the fsync policy says first. A round's chunk is not flushed on its own; the
        next turn's replies, or the round's answer, flush it (one fsync instead of two)."""
        if records:
            payload = pack(records)
            self.journal.append_packed(payload, len(records))
            self.feed.add_frame(payload, records)
            if self.link.ready:  # else the state it will be sent includes them
                self.link.send([b"records", payload])
            elif self._first_init is not None:
                self._first_init.append(payload)
                self._first_init_bytes += len(payload)
                if self._first_init_bytes > FIRST_INIT_LIMIT:  # no process says hello
                    self._first_init = self._recovered_snapshot = None  # it gets the state
        if self.journal.records_since_snapshot >= self.config.snapshot_every:
            if self.journal.start_snapshot(self.service.seq, self._snapshot):
                gc.freeze()  # see the module docstring

    def _snapshot(self) -> dict[str, Any]:
        """What a journal snapshot holds: the state, and the last changes of the feed, so that
        a restart does not answer every follower `gone` (`changes.KEPT_ACROSS_RESTARTS`)."""
        return {**self.service.snapshot(), "changes": self.feed.packed(KEPT_ACROSS_RESTARTS)}

    def _flush(self) -> None:
        """Make the journal's records as safe as the fsync policy says, then answer the
        `changes` requests that waited for them (or whose wait ended)."""
        self.journal.flush()
        for identity, reply in self._watches.wake():
            self._router.send_multipart([identity, reply])

    def _now(self) -> int:
        """The time of something happening now (`clock`), never before the state's."""
        return self.service.clock(self._clock.now())
