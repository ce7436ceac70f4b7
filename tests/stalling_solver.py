"""Test-only solvers that stall on chosen solves until they are cancelled, or die (racing tests).

Races between two of these are deterministic: on a round where one stalls, the other wins and
the staller is cancelled and must be re-synced from the winner's flow.
"""

from __future__ import annotations

import os
import time

from firmament_py.flow.changes import ChangeBatch
from firmament_py.solvers import SolverCancelled, SuccessiveShortestPathSolver
from firmament_py.solvers.base import Int64Array

STALL_SECONDS = 60.0


class _Staller(SuccessiveShortestPathSolver):
    """Successive shortest path that, on chosen solves (by default those whose parity is
    `stall_parity`), waits to be cancelled before doing anything."""

    stall_parity = 0

    def __init__(self) -> None:
        super().__init__()
        self._solves = 0
        self._racing = False  # a worker's warm-up solver is never raced: it must not stall

    def use_cancel_flag(self, flag: Int64Array) -> None:
        super().use_cancel_flag(flag)
        self._racing = True

    def _stalls_on(self, count: int) -> bool:
        return count % 2 == self.stall_parity

    def _stall_seconds(self, count: int) -> float:
        """How long solve number `count` (from 0) waits, once racing, unless cancelled."""
        return STALL_SECONDS if self._stalls_on(count) else 0.0

    def _run(self) -> dict[str, float]:
        count = self._solves
        self._solves += 1
        if self._racing:
            deadline = time.monotonic() + self._stall_seconds(count)
            while time.monotonic() < deadline:
                if self.cancel_requested():
                    raise SolverCancelled("stalled until cancelled")
                time.sleep(0.001)
        return super()._run()


class StallEven(_Staller):
    """Stalls on its 1st, 3rd, 5th... solve."""

    stall_parity = 0


class StallOdd(_Staller):
    """Stalls on its 2nd, 4th, 6th... solve."""

    stall_parity = 1


class StallAlways(_Staller):
    """Stalls on every solve until cancelled: it can only lose."""

    def _stalls_on(self, count: int) -> bool:
        return True


class StallFirstTwo(_Staller):
    """Stalls on its first two solves only: it loses a snapshot's first race and the first
    incremental one, whose winner a hedged race makes its favourite."""

    def _stalls_on(self, count: int) -> bool:
        return count < 2


class StallFromFifth(_Staller):
    """Stalls on its 5th solve and every one after."""

    def _stalls_on(self, count: int) -> bool:
        return count >= 4


class _NeverStalls(_Staller):
    """A solver of this module that misbehaves in some other way than stalling."""

    def _stalls_on(self, count: int) -> bool:
        return False


class DieOnSecond(_NeverStalls):
    """Solves its first race; its worker process exits in the middle of the second."""

    def _run(self) -> dict[str, float]:
        if self._racing and self._solves == 1:
            os._exit(3)
        return super()._run()


class SlowToStart(SuccessiveShortestPathSolver):
    """Takes a second to build: a race worker with it warms up for two (its warm-up builds one)."""

    def __init__(self) -> None:
        time.sleep(1.0)
        super().__init__()


class SlowToApply(_NeverStalls):
    """Once racing: its first solve takes half a second, each batch it applies two seconds, and
    every later solve a tenth of a second."""

    def apply(self, changes: ChangeBatch) -> None:
        if self._racing:
            time.sleep(2.0)
        super().apply(changes)

    def _run(self) -> dict[str, float]:
        if self._racing:
            time.sleep(0.5 if self._solves == 0 else 0.1)
        return super()._run()


class _FailsOnSecondApply(_NeverStalls):
    """Once racing, takes its first batch and fails on the second (`_fail`)."""

    def __init__(self) -> None:
        super().__init__()
        self._applied = 0

    def _fail(self) -> None:
        raise NotImplementedError

    def apply(self, changes: ChangeBatch) -> None:
        if self._racing:
            self._applied += 1
            if self._applied == 2:
                self._fail()
        super().apply(changes)


class DieOnApply(_FailsOnSecondApply):
    """Takes a second to build; once racing, its worker process exits as it applies its second
    batch."""

    def __init__(self) -> None:
        time.sleep(1.0)
        super().__init__()

    def _fail(self) -> None:
        os._exit(3)


class HangOnApply(_FailsOnSecondApply):
    """Once racing, hangs for half a minute in its second batch."""

    def _fail(self) -> None:
        time.sleep(30.0)


class SlowOnSecond(_Staller):
    """Once racing: its second solve takes a minute (unless cancelled), the others none."""

    def _stall_seconds(self, count: int) -> float:
        return STALL_SECONDS if count == 1 else 0.0


class SteadyThird(_Staller):
    """Once racing: every solve takes three tenths of a second."""

    def _stall_seconds(self, count: int) -> float:
        return 0.3


class IgnoresCancel(_Staller):
    """Once racing, its first solve hangs for a minute without looking at the cancel flag."""

    def _run(self) -> dict[str, float]:
        self._solves += 1
        if self._racing and self._solves == 1:
            time.sleep(STALL_SECONDS)
        return SuccessiveShortestPathSolver._run(self)
