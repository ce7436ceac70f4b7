"""The daemon's change feed: every journaled record, by sequence number, for cluster managers
that follow the daemon's state instead of diffing it (a `changes` request).

Every change the daemon makes is a journal record with the next sequence number (`state` says
which kinds there are): a request it accepted, a round it decided, a chunk of a round's
decisions it applied, a manager that registered. The feed keeps the last `window` of them in
memory, in order, so that a manager can ask for the changes after the last sequence number it
saw and learn every one, in order, without a gap: the PUB socket's feed drops messages when a
subscriber is slow, with no way to notice, where this answers exactly or says `gone`.

* `ChangeFeed.since(after, limit)`: the records after `after`, or `FeedGone` if some of them
  are no longer kept (a manager that fell too far behind, or one asking across a restart for
  records older than the journal's last snapshot): it then lists the state again and follows
  on from the listing's sequence number.
* `Watches`: `changes` requests that asked to wait (`wait_ms`) when nothing newer was there
  yet, parked until a record arrives or their wait ends. The daemon wakes them only once the
  records they would see are as safe as its fsync policy says, as it does every reply.

No I/O here: the daemon feeds records in and sends the frames out.
"""

from __future__ import annotations

import heapq
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import msgpack

from firmament_py.service.protocol import Status, encode_reply

__all__ = [
    "DEFAULT_WATCH_WINDOW",
    "KEPT_ACROSS_RESTARTS",
    "MAX_WATCHES",
    "ChangeFeed",
    "FeedGone",
    "Watches",
]

DEFAULT_WATCH_WINDOW = 100_000
"""Records the feed keeps in memory: a manager that falls further behind lists again."""
KEPT_ACROSS_RESTARTS = 10_000
"""The feed's last records a journal snapshot keeps, so that a restart does not answer every
follower `gone`: more would make the restart slower (they are read back with the snapshot)."""


class FeedGone(Exception):
    """The records after the asked sequence number are not all kept any more."""


class ChangeFeed:
    """The last `window` or so journal records, by sequence number; `base` is the sequence number
    the kept records follow (the feed can answer for any `after` from `base` on).

    Records are kept as the msgpack frames the daemon journals (a list of records each), not as
    objects: a hundred thousand records' dicts, always churning, would keep the cyclic garbage
    collector walking them, and the request loop's tail latency with it. A request unpacks the
    frames it reads. Whole frames drop out of the window, the oldest first, once the rest hold
    `window` records."""

    def __init__(self, base: int, window: int = DEFAULT_WATCH_WINDOW) -> None:
        if window < 1:
            raise ValueError(f"a change feed keeps at least one record, not {window}")
        self.window = window
        self.base = base
        self._seq = base
        self._frames: deque[tuple[int, int, bytes]] = deque()  # (first seq, count, frame)
        self._count = 0

    @classmethod
    def unpacked(cls, base: int, packed: bytes, window: int = DEFAULT_WATCH_WINDOW) -> ChangeFeed:
        """A feed holding the records `packed` wrote, the last of them record `base` (those a
        snapshot after record `base` kept); an empty feed from `base` if none were kept."""
        records = msgpack.unpackb(packed, raw=False) if packed else []
        feed = cls(base - len(records), window)
        if records:
            feed.add_frame(packed, records)  # the snapshot's bytes, kept as they are
        if feed.seq != base:
            raise ValueError(f"the changes kept end at record {feed.seq}, not {base}")
        return feed

    def packed(self, limit: int) -> bytes:
        """The last `limit` records, packed for a snapshot (`unpacked` reads them back)."""
        kept: list[Any] = []
        for _, _, frame in reversed(self._frames):
            if len(kept) >= limit:
                break
            kept[:0] = msgpack.unpackb(frame, raw=False)
        return bytes(
            msgpack.packb(kept[max(0, len(kept) - limit) :] if limit else [], use_bin_type=True)
        )

    @property
    def seq(self) -> int:
        """The last sequence number the feed holds (`base` if it holds none)."""
        return self._seq

    def add(self, records: Sequence[Mapping[str, Any]]) -> None:
        """Keep `records`, which follow the last one kept, in order (packed here: the daemon
        passes the frame it journals to `add_frame` instead)."""
        if records:
            self.add_frame(bytes(msgpack.packb(records, use_bin_type=True)), records)

    def add_frame(self, frame: bytes, records: Sequence[Mapping[str, Any]]) -> None:
        """Keep `frame`, the msgpack list of `records`, which follow the last one kept, in
        order; older frames drop out of the window. ValueError for records that do not follow
        (the feed would answer with a gap)."""
        first, count = records[0]["seq"], len(records)
        if first != self._seq + 1 or records[-1]["seq"] != first + count - 1:
            raise ValueError(
                f"records {first} to {records[-1]['seq']} do not follow record {self._seq} in order"
            )
        self._frames.append((first, count, frame))
        self._seq += count
        self._count += count
        while self._count - self._frames[0][1] >= self.window:
            dropped_first, dropped, _ = self._frames.popleft()
            self._count -= dropped
            self.base = dropped_first + dropped - 1

    def since(self, after: int, limit: int) -> tuple[list[Any], bool]:
        """Up to `limit` records after sequence number `after`, in order, and whether more
        follow them. FeedGone if some record after `after` is no longer kept."""
        if after > self.seq:
            raise FeedGone(
                f"record {after:,} is beyond the last one written ({self.seq:,}): this journal "
                "does not hold what was seen (another daemon's, or one that lost records in a "
                "machine crash under --fsync never or interval): list the tasks and machines "
                "again and follow the changes after the listing's seq"
            )
        if after < self.base:
            raise FeedGone(
                f"the changes after record {after:,} are no longer kept (the feed holds those "
                f"after record {self.base:,}): list the tasks and machines again and follow "
                "the changes after the listing's seq"
            )
        # The frames holding records after `after`, found from the newest end: a follower
        # asks for the last few records, and the window holds up to a hundred thousand.
        reading: list[tuple[int, bytes]] = []
        for first, count, frame in reversed(self._frames):
            if first + count - 1 <= after:
                break
            reading.append((first, frame))
        out: list[Any] = []
        for first, frame in reversed(reading):
            records = msgpack.unpackb(frame, raw=False)
            out += records[max(0, after + 1 - first) :]
            if len(out) >= limit:
                break
        page = out[:limit]
        return page, bool(page) and page[-1]["seq"] < self.seq


@dataclass
class _Watch:
    identity: bytes
    request_id: str
    after: int
    limit: int
    deadline: float


MAX_WATCHES = 10_000
"""`changes` requests that may wait at once; more are answered `overloaded`."""


class Watches:
    """`changes` requests waiting for a record after the one they asked from, by request id (a
    retry moves the answer to its latest connection). A request waits only when nothing follows
    the record it asked from, so the waiting ones, in the order they came, ask from ever later
    records: those a new record wakes are a prefix, found without a scan; their deadlines are a
    heap."""

    def __init__(
        self, feed: ChangeFeed, limit: int = MAX_WATCHES, boot: str = "", recovered: int = 0
    ) -> None:
        self.feed = feed
        self.limit = limit
        self.boot = boot
        """This daemon process's id, sent with every answer (a restart changes it)."""
        self.recovered = recovered
        """The last record recovery found: every record up to it survived the last restart."""
        self._waiting: dict[str, _Watch] = {}
        self._deadlines: list[tuple[float, str]] = []  # a heap; entries of answered ones stay

    def __len__(self) -> int:
        return len(self._waiting)

    def waiting_before(self, seq: int) -> bool:
        """Whether a request waits for a record at or before `seq` (it has one to see)."""
        first = next(iter(self._waiting.values()), None)
        return first is not None and first.after < seq

    def answer(self, request_id: str, body: Mapping[str, Any]) -> bytes:
        """The reply to a `changes` request that need not wait: the records after `after`
        (`ChangeFeed.since`), `gone` if they are not all kept."""
        after = body["after"]
        try:
            if body.get("boot", self.boot) != self.boot and after > self.recovered:
                raise FeedGone(
                    f"the records after {self.recovered:,} seen before this daemon restarted "
                    "(its boot was another) may be lost: a crash of the machine under --fsync "
                    "interval or never took them, and their numbers are given again. List the "
                    "tasks and machines again and follow the changes after the listing's seq"
                )
            changes, more = self.feed.since(after, body.get("limit", _DEFAULT_LIMIT))
        except FeedGone as gone:
            return encode_reply(
                request_id, Status.GONE, str(gone), {"seq": self.feed.seq, "boot": self.boot}
            )
        reply = {"changes": changes, "more": more, "seq": self.feed.seq, "boot": self.boot}
        return encode_reply(request_id, Status.OK, "", reply)

    def request(self, identity: bytes, request_id: str, body: Mapping[str, Any]) -> bytes | None:
        """The reply to a `changes` request, or None if it waits (it asked to, and nothing
        after `after` is there yet); `overloaded` when too many wait already."""
        wait_ms = body.get("wait_ms", 0)
        if (
            wait_ms <= 0
            or body["after"] != self.feed.seq
            or body.get("boot", self.boot) != self.boot
        ):
            return self.answer(request_id, body)
        known = self._waiting.get(request_id)
        if known is not None:
            known.identity = identity
            return None
        if len(self._waiting) >= self.limit:
            return encode_reply(
                request_id,
                Status.OVERLOADED,
                f"{len(self._waiting):,} changes requests are waiting already; try later",
                {"retry_after_ms": 100},
            )
        deadline = time.monotonic() + wait_ms / 1000
        self._waiting[request_id] = _Watch(
            identity, request_id, body["after"], body.get("limit", _DEFAULT_LIMIT), deadline
        )
        heapq.heappush(self._deadlines, (deadline, request_id))
        return None

    def wake(self, now: float | None = None) -> list[tuple[bytes, bytes]]:
        """(connection, reply) for every waiting request that has records to see now, or
        whose wait ended (answered with none). Call only when every record in the feed is as
        safe as the fsync policy says."""
        if not self._waiting:
            self._deadlines.clear()
            return []
        now = time.monotonic() if now is None else now
        woken: list[_Watch] = []
        while self.waiting_before(self.feed.seq):
            woken.append(self._waiting.pop(next(iter(self._waiting))))
        while self._deadlines and self._deadlines[0][0] <= now:
            deadline, request_id = heapq.heappop(self._deadlines)
            watch = self._waiting.get(request_id)
            if watch is not None and watch.deadline == deadline:  # not an answered one's
                woken.append(self._waiting.pop(request_id))
        return [
            (w.identity, self.answer(w.request_id, {"after": w.after, "limit": w.limit}))
            for w in woken
        ]

    def _live(self, deadline: float, request_id: str) -> bool:
        watch = self._waiting.get(request_id)
        return watch is not None and watch.deadline == deadline

    def next_deadline_s(self, now: float | None = None) -> float | None:
        """Seconds until the first waiting request's wait ends (None if none waits)."""
        while self._deadlines and not self._live(*self._deadlines[0]):
            heapq.heappop(self._deadlines)  # answered already
        if not self._deadlines:
            return None
        now = time.monotonic() if now is None else now
        return max(0.0, self._deadlines[0][0] - now)


_DEFAULT_LIMIT = 1_000
"""Records a `changes` reply holds when the request gives no `limit`."""
