"""Bulk arc edits: the arcs a pass wants out of a set of nodes, made so in a few array calls.

The graph manager never edits the graph an arc at a time. A pass collects what it wants out of
the nodes it is about (`ArcRows`), and `reconcile` compares that with what those nodes have,
arc by arc, keyed by (source, target, arc type): an arc that is wanted and present is changed
(the graph ignores a change to the values it already has), a present arc that is not wanted is
removed, a wanted one that is not present is added. An unchanged answer therefore changes
nothing, and the solvers see only real changes. The invariant that makes the key enough: the
manager never gives a node two arcs of one type to one target.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from firmament_py.flow.graph import FlowGraph

__all__ = ["ArcRows", "IntArray", "reconcile"]

IntArray = npt.NDArray[np.int64]

_COLUMNS = 6  # source, target, arc type, lower bound, capacity, cost


def _keys(src: IntArray, dst: IntArray, kind: npt.NDArray[np.integer]) -> IntArray:
    """One int64 per (source, target, type): ids are below 2^28 and types below 2^7."""
    return (src << 35) | (dst << 7) | kind.astype(np.int64)


class ArcRows:
    """Arcs wanted, as columns: source, target, arc type, lower bound, capacity, cost. Rows are
    added one at a time (Python ints) or as arrays (a value that every row shares may be one
    int)."""

    __slots__ = ("_blocks", "_singles")

    def __init__(self) -> None:
        self._singles: list[int] = []
        self._blocks: list[tuple[IntArray, ...]] = []

    def __len__(self) -> int:
        return len(self._singles) // _COLUMNS + sum(len(block[0]) for block in self._blocks)

    def add(self, src: int, dst: int, kind: int, lower: int, capacity: int, cost: int) -> None:
        """One arc."""
        self._singles += (src, dst, kind, lower, capacity, cost)

    def add_many(
        self,
        src: IntArray | int,
        dst: IntArray | int,
        kind: int,
        lower: IntArray | int,
        capacity: IntArray | int,
        cost: IntArray | int,
    ) -> None:
        """Arcs given as columns of one length (or ints, shared by every row)."""
        lengths = {len(c) for c in (src, dst, lower, capacity, cost) if isinstance(c, np.ndarray)}
        if len(lengths) > 1:
            raise ValueError(f"columns of different lengths: {sorted(lengths)}")
        length = lengths.pop() if lengths else 1
        if length == 0:
            return
        self._blocks.append(
            tuple(
                np.broadcast_to(np.asarray(column, dtype=np.int64), length)
                for column in (src, dst, kind, lower, capacity, cost)
            )
        )

    def columns(self) -> tuple[IntArray, ...]:
        """The six columns of every row, singles first."""
        parts = [np.array(self._singles, dtype=np.int64).reshape(-1, _COLUMNS).T]
        parts += [np.stack(block) for block in self._blocks]
        joined = np.concatenate(parts, axis=1) if parts else np.zeros((_COLUMNS, 0), np.int64)
        return tuple(joined)


def reconcile(graph: FlowGraph, sources: IntArray, wanted: ArcRows) -> None:
    """Make the out-arcs of the distinct live nodes `sources` exactly the `wanted` ones (each of
    which leaves one of `sources`, at most one per key): change the arcs that stay, remove the
    others, add the new ones."""
    src, dst, kind, lower, capacity, cost = wanted.columns()
    present = graph.trusted_out_arcs_of(sources)
    arrays = graph.arrays()
    present_keys = _keys(arrays.src[present], arrays.dst[present], arrays.arc_kind[present])
    wanted_keys = _keys(src, dst, kind)
    order = np.argsort(present_keys, kind="stable")
    sorted_keys = present_keys[order]
    at = np.searchsorted(sorted_keys, wanted_keys)
    inside = np.minimum(at, max(len(sorted_keys) - 1, 0))
    found = at < len(sorted_keys)
    found[found] = sorted_keys[inside[found]] == wanted_keys[found]
    kept = np.zeros(len(present), dtype=np.bool_)
    kept[order[inside[found]]] = True
    if found.any():
        graph.trusted_change_arcs(
            present[order[inside[found]]], lower[found], capacity[found], cost[found]
        )
    if not kept.all():
        graph.trusted_remove_arcs(present[~kept])
    new = ~found
    if new.any():
        graph.trusted_add_arcs(src[new], dst[new], lower[new], capacity[new], cost[new], kind[new])
