"""The daemon's clock (`status`'s `now_us`, and the time of every record): it follows the wall
clock from the first request on, moves while the daemon is idle, and never goes back, not
even across a `kill -9` and restart or a wall clock stepped back (firmament_py/service/
clock.py, daemon.py; issue 35, bug 2)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from firmament_py.service import Client, DaemonConfig
from firmament_py.service.clock import DaemonClock
from firmament_py.service.journal import JournalError

from .test_service_crash import start_daemon
from .test_service_daemon import Running, _free_port, machines


def _wall_us() -> int:
    return time.time_ns() // 1_000


def test_now_follows_the_wall_clock_and_moves_while_idle(tmp_path: Path) -> None:
    served = Running(DaemonConfig(bind="tcp://127.0.0.1:*", journal=tmp_path / "j"))
    try:
        with Client(served.endpoint) as client:
            before = _wall_us()
            first = client.status()["now_us"]
            after = _wall_us()
            assert before <= first <= after  # a fresh journal: the wall clock, not 0
            time.sleep(0.01)  # nothing happens meanwhile
            second = client.status()["now_us"]
            assert second > first
    finally:
        served.stop()


def test_now_never_goes_back_across_a_kill_minus_nine(tmp_path: Path) -> None:
    """A round that places nothing moves the clock without a record; the clock must not go
    back to the last record's time when the daemon restarts (it went back 302 ms)."""
    journal, port = tmp_path / "journal", _free_port()
    endpoint = f"tcp://127.0.0.1:{port}"
    process = start_daemon(journal, port)
    try:
        with Client(endpoint, timeout=20) as client:
            client.add_machines(machines(1))
            client.schedule()  # nothing to place: no record
            last = client.status()["now_us"]
        os.kill(process.pid, signal.SIGKILL)
        process.wait(10)
        process = start_daemon(journal, port)
        with Client(endpoint, timeout=20) as client:
            assert client.status()["now_us"] >= last
    finally:
        process.kill()
        process.wait(10)


class _Wall:
    """A wall clock the test sets."""

    def __init__(self, now: int) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def test_the_clock_never_goes_back_however_the_wall_clock_moves(tmp_path: Path) -> None:
    wall = _Wall(5_000_000)
    clock = DaemonClock(tmp_path, floor=0, durable=True, wall=wall)
    assert clock.now() == 5_000_000
    wall.now = 5_000_100
    assert clock.now() == 5_000_100
    wall.now = 4_000_000  # stepped back: the clock waits for it
    assert clock.now() == 5_000_100
    wall.now = 5_000_200
    assert clock.now() == 5_000_200
    # A restart without `close` (a kill -9) on a wall clock behind the last time given.
    wall.now = 4_000_000
    restarted = DaemonClock(tmp_path, floor=0, durable=True, wall=wall)
    assert restarted.now() >= 5_000_200
    # One reservation covers a second of readings: the file is not written for each.
    written = (tmp_path / "clock").stat().st_mtime_ns
    wall.now = 7_000_000
    restarted.now()
    rewritten = (tmp_path / "clock").stat().st_mtime_ns
    wall.now = 7_500_000
    restarted.now()
    assert (tmp_path / "clock").stat().st_mtime_ns == rewritten >= written


def test_a_clean_close_gives_back_the_reservation(tmp_path: Path) -> None:
    wall = _Wall(5_000_000)
    clock = DaemonClock(tmp_path, floor=0, durable=False, wall=wall)
    clock.now()
    clock.close()
    wall.now = 5_000_010  # a restart soon after: the wall clock, not a second ahead of it
    assert DaemonClock(tmp_path, floor=0, durable=False, wall=wall).now() == 5_000_010


def test_the_floor_is_the_journals_last_time(tmp_path: Path) -> None:
    wall = _Wall(1_000)
    assert DaemonClock(tmp_path, floor=9_000, durable=False, wall=wall).now() == 9_000


def test_an_unreadable_clock_file_is_named(tmp_path: Path) -> None:
    (tmp_path / "clock").write_text("half a number\n")
    with pytest.raises(JournalError, match=r"clock: .*not a time"):
        DaemonClock(tmp_path, floor=0, durable=False)
