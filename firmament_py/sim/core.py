"""The discrete-event core: simulated time and a queue of timed items, nothing else.

Like SimPy's core it is tiny and deterministic: items pop in order of time, then of the
`rank` their kind is given (so that, at one instant, machines join before tasks arrive), then of
insertion (first pushed, first out). Time is an int of microseconds and never runs backwards.
"""

from __future__ import annotations

import heapq
import itertools
from typing import Generic, TypeVar

from firmament_py.model.ids import Time

__all__ = ["EventQueue"]

T = TypeVar("T")


class EventQueue(Generic[T]):
    """A priority queue of items keyed by (time, rank, insertion order), and the current time:
    the time of the item popped last."""

    def __init__(self) -> None:
        self._heap: list[tuple[Time, int, int, T]] = []
        self._order = itertools.count()
        self.now: Time = 0

    def __len__(self) -> int:
        return len(self._heap)

    def push(self, time: Time, rank: int, item: T) -> None:
        """Schedule `item` at `time`; ValueError if that is before `now`."""
        if time < self.now:
            raise ValueError(f"cannot schedule at {time} µs: the simulation is at {self.now} µs")
        heapq.heappush(self._heap, (time, rank, next(self._order), item))

    def peek_time(self) -> Time | None:
        """The time of the next item, or None if there is none."""
        return self._heap[0][0] if self._heap else None

    def pop(self) -> tuple[Time, T]:
        """Remove the next item and move the clock to its time; IndexError if empty."""
        time, _, _, item = heapq.heappop(self._heap)
        self.now = time
        return time, item

    def advance(self, time: Time) -> None:
        """Move the clock forward to `time` (a scheduling round ending, say)."""
        if time < self.now:
            raise ValueError(f"cannot go back to {time} µs from {self.now} µs")
        self.now = time
