"""The daemon's clock: microseconds since the Unix epoch that follow the wall clock and never
go back, not even across a `kill -9` and restart.

Every record the daemon journals carries a time from this clock, and `status` reports it as
`now_us`. The wall clock alone will not do: it can step back (an NTP correction, an operator),
and a time the daemon reported but did not journal (a `status` reply, a round that placed
nothing) would be forgotten by a restart, whose clock would then start from the last record's
time, before it.

So the clock gives `max(wall clock, the last time it gave)`, and it never gives a time that is
not covered by a reservation written to the file `clock` in the journal directory: when the
wall clock passes the reservation, a new one a second ahead is written (atomically, by
renaming a temporary file; forced to disk when the journal's fsync policy is `always`) before
the time is given. A restarted daemon starts from the reservation, so whatever a killed one
gave is behind it. That costs one small write a second while the daemon is in use; the price is
that after a restart within a second of the last reading the clock stands still until the
wall clock passes the reservation (a clean `close` gives the unused part back, so a clean
restart does not wait).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

from firmament_py.service.journal import JournalError

__all__ = ["CLOCK_FILE", "DaemonClock", "wall_us"]

CLOCK_FILE = "clock"
"""The reservation's file, in the journal directory."""

_RESERVE_US = 1_000_000
"""How far ahead of the time given a reservation reaches: one write a second at most."""


def wall_us() -> int:
    """The wall clock, in microseconds since the Unix epoch."""
    return time.time_ns() // 1_000


class DaemonClock:
    """The clock of the daemon whose journal is `directory` (whose lock the journal holds).

    `floor` is the latest time the journal holds (the recovered state's); `durable` forces
    each reservation to disk (the journal's fsync policy `always`), else a crash of the
    machine, not of the daemon, may lose the last one."""

    def __init__(
        self,
        directory: Path,
        *,
        floor: int,
        durable: bool,
        wall: Callable[[], int] = wall_us,
    ) -> None:
        self._path = Path(directory) / CLOCK_FILE
        self._durable = durable
        self._wall = wall
        for left in self._path.parent.glob(f"{CLOCK_FILE}.*.tmp"):
            left.unlink()  # a reservation whose writer died before renaming it
        self._reserved = self._read()
        self._last = max(floor, self._reserved)

    def _read(self) -> int:
        """The reservation a previous daemon left (0 if none)."""
        try:
            text = self._path.read_text()
        except FileNotFoundError:
            return 0
        except OSError as error:
            raise JournalError(f"{self._path}: unreadable: {error}") from error
        try:
            reserved = int(text.strip())
        except ValueError:
            reserved = -1
        if reserved < 0:
            raise JournalError(
                f"{self._path}: not a time ({text[:40]!r}); it holds the highest time the "
                "daemon may have reported: remove it to start anyway (the clock may then go "
                "back by up to a second)"
            )
        return reserved

    def now(self) -> int:
        """The time now: the wall clock, unless that is behind a time already given."""
        wall = self._wall()
        if wall <= self._last:
            return self._last
        if wall > self._reserved:
            self._write(wall + _RESERVE_US)
        self._last = wall
        return wall

    def _write(self, reserved: int) -> None:
        temporary = self._path.with_name(f"{CLOCK_FILE}.{os.getpid()}.tmp")
        with temporary.open("w") as file:
            file.write(f"{reserved}\n")
            if self._durable:
                file.flush()
                os.fsync(file.fileno())
        os.replace(temporary, self._path)
        if self._durable:
            fd = os.open(self._path.parent, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        self._reserved = reserved

    def close(self) -> None:
        """Give back the unused part of the reservation: a clean restart then starts at the
        wall clock instead of waiting for it to pass the reservation."""
        if self._reserved > self._last:
            self._write(self._last)
