"""When a machine (CPU or network) is busy: a sorted list of disjoint busy intervals, and the
search for the earliest free interval of a given length, alone or on several machines at once
(a transfer holds the sender's upload link and the receiver's download link together).

The algorithms book CPU tasks only at the end of a machine's timeline, but G-LIST books network
tasks into earlier gaps ("in previous time slots", Algorithm 2 line 10), hence the gap search.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence

__all__ = ["EPSILON", "Timeline", "earliest_common_fit"]

EPSILON = 1e-9
"""Times closer than this are equal (durations are sizes over speeds, in floating point)."""


class Timeline:
    """The busy intervals [start, end) of one machine, sorted and disjoint; touching intervals
    are merged."""

    __slots__ = ("ends", "starts")

    def __init__(self) -> None:
        self.starts: list[float] = []
        self.ends: list[float] = []

    def __len__(self) -> int:
        return len(self.starts)

    @property
    def free_from(self) -> float:
        """The end of the last busy interval (0 if never busy)."""
        return self.ends[-1] if self.ends else 0.0

    def earliest_fit(self, ready: float, duration: float) -> float:
        """The earliest t >= `ready` with [t, t + duration) free."""
        t = ready
        i = bisect_right(self.ends, t + EPSILON)
        starts, ends = self.starts, self.ends
        while i < len(starts):
            if t + duration <= starts[i] + EPSILON:
                return t
            t = max(t, ends[i])
            i += 1
        return t

    def is_free(self, start: float, end: float) -> bool:
        i = bisect_right(self.ends, start + EPSILON)
        return i >= len(self.starts) or end <= self.starts[i] + EPSILON

    def book(self, start: float, end: float) -> None:
        """Mark [start, end) busy. ValueError if it overlaps a busy interval."""
        if end <= start:
            return
        if not self.is_free(start, end):
            raise ValueError(f"interval [{start:g}, {end:g}) overlaps a booked one")
        i = bisect_right(self.starts, start)
        merge_left = i > 0 and abs(self.ends[i - 1] - start) <= EPSILON
        merge_right = i < len(self.starts) and abs(self.starts[i] - end) <= EPSILON
        if merge_left and merge_right:
            self.ends[i - 1] = self.ends[i]
            del self.starts[i], self.ends[i]
        elif merge_left:
            self.ends[i - 1] = end
        elif merge_right:
            self.starts[i] = start
        else:
            self.starts.insert(i, start)
            self.ends.insert(i, end)

    def copy(self) -> Timeline:
        other = Timeline()
        other.starts = list(self.starts)
        other.ends = list(self.ends)
        return other


def earliest_common_fit(
    timelines: Sequence[Timeline],
    ready: float,
    duration: float,
    extra: Sequence[tuple[int, float, float]] = (),
    members: Sequence[int] = (),
) -> float:
    """The earliest t >= `ready` at which [t, t + duration) is free on every timeline.

    `extra` holds tentative bookings (member, start, end) not yet in the timelines, and
    `members` names each timeline as `extra` does, so that a plan of several transfers can be
    checked before any is booked."""
    t = ready
    while True:
        moved = False
        for timeline in timelines:
            fit = timeline.earliest_fit(t, duration)
            if fit > t + EPSILON:
                t, moved = fit, True
        for member, start, end in extra:
            if member in members and start < t + duration - EPSILON and t < end - EPSILON:
                t, moved = end, True
        if not moved:
            return t
