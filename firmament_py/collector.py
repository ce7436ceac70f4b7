"""The cyclic garbage collector's settings for this package's own round-running processes.

A scheduling round makes and drops some 10^5 short-lived objects (views, tuples, dicts) beside a
state of as many long-lived ones. With Python's defaults the collector rescans the short-lived
ones in hundreds of young collections a round, and walks the whole state in a full collection
every few seconds (75 to 100 ms a time in the daemon's scheduling process under load; see
`docs/benchmarks-history.md`). The processes whose work is rounds (the daemon's scheduling process,
`firmament-py simulate` and `experiment`, a sweep's runs in its workers) call `settle` once
their long-lived objects exist, or run inside `settled`, which puts the collector back as it
was. The library itself never changes the collector: an application that embeds `Scheduler`
decides for its process.

Tuned for the generational collector of Python 3.11 to 3.13; 3.14's incremental one reads the
thresholds differently.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["YOUNG_COLLECTION_THRESHOLD", "settle", "settled"]

YOUNG_COLLECTION_THRESHOLD = 20_000
"""Allocations between young collections after `settle` (Python's default: 700): most of a
round's short-lived objects are then freed by reference counting before a collection sees them."""
_THRESHOLDS = (YOUNG_COLLECTION_THRESHOLD, 20, 20)


def settle() -> None:
    """Move everything alive now out of the collector's sight (`gc.freeze`: it is long-lived,
    and holds no cycles worth collecting) and make young collections rarer. Call it again
    after building a new long-lived state; `gc.unfreeze` first lets the old one's cycles go."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*_THRESHOLDS)


# `settled` blocks in progress, and what the first of them found (the thresholds, and whether
# it froze): overlapping blocks (threads of one process, such as a Dask worker's) put the
# collector back only when the last one ends. `_found` is filled and emptied in place, never
# rebound: rebinding would free the object it held, which a process that froze its own objects
# had frozen too (harmless, but `settled` leaves such a process's frozen objects alone).
_lock = threading.RLock()
_depth = 0
_found: list[tuple[tuple[int, ...], bool]] = []


@contextmanager
def settled() -> Iterator[None]:
    """`settle` for the duration of a `with` block, then the collector as it was (a command run
    inside a test process, say). A process that has frozen objects of its own keeps them
    frozen, and nothing more is frozen: only the thresholds change for the block. Blocks may
    nest and overlap across threads; the collector is put back when the last one ends."""
    global _depth
    with _lock:
        if _depth == 0:
            found = gc.get_threshold(), gc.get_freeze_count() == 0
            if found[1]:
                settle()
            else:
                gc.set_threshold(*_THRESHOLDS)
            _found.append(found)
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                thresholds, freeze = _found.pop()
                gc.set_threshold(*thresholds)
                if freeze:
                    gc.unfreeze()
