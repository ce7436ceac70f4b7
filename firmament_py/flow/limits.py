"""What a flow graph may hold: id, capacity and cost limits, node kinds, and the value checks.

The graph (`graph.py`), the batch rules (`batch_rules.py`) and every solver's residual network
share these limits, so a value one of them accepts is one all of them can hold.
"""

from __future__ import annotations

import operator
from enum import IntEnum
from typing import SupportsIndex

MAX_COST = 2**31 - 1
MAX_CAPACITY = 2**40
# An arc at this capacity is uncapacitated: a negative-cost cycle of such arcs is unbounded.
INFINITE_CAPACITY = MAX_CAPACITY
# Arc kinds are stored in int8; ids are dense in practice, and an explicit id far beyond the
# ones in use would only allocate the gap, so both have a limit that names the mistake.
MAX_ARC_KIND = 127
MAX_ID = 2**28


class NodeKind(IntEnum):
    """Node types as Firmament's DIMACS exporter numbers them."""

    OTHER = 0
    TASK = 1
    LEAF = 2  # a processing unit / machine whose flow reaches the sink
    SINK = 3


class FlowGraphError(ValueError):
    """A mutation or query that names something that does not exist or breaks an invariant."""


def check_index(value: SupportsIndex, what: str) -> int:
    """`value` as an int; FlowGraphError naming `what` if it is not an integer (or a bool)."""
    if type(value) is int:  # the usual case (a bool's type is bool)
        return value
    if isinstance(value, bool):
        raise FlowGraphError(f"{what} must be an integer, got a bool")
    try:
        return operator.index(value)
    except TypeError:
        raise FlowGraphError(f"{what} must be an integer, got {value!r}") from None


def check_arc_kind(kind: SupportsIndex, what: str) -> int:
    """An arc kind within 0..MAX_ARC_KIND, or FlowGraphError naming `what`."""
    kd = check_index(kind, f"{what}: kind")
    if not 0 <= kd <= MAX_ARC_KIND:
        raise FlowGraphError(f"{what}: kind {kd} is not within 0..{MAX_ARC_KIND}")
    return kd


def check_arc_values(
    lower: SupportsIndex, capacity: SupportsIndex, cost: SupportsIndex, what: str
) -> tuple[int, int, int]:
    low = check_index(lower, f"{what}: lower bound")
    cap = check_index(capacity, f"{what}: capacity")
    c = check_index(cost, f"{what}: cost")
    if cap < 0:
        raise FlowGraphError(f"{what}: negative capacity {cap}")
    if cap > MAX_CAPACITY:
        raise FlowGraphError(f"{what}: capacity {cap} exceeds the limit of {MAX_CAPACITY}")
    if not 0 <= low <= cap:
        raise FlowGraphError(f"{what}: lower bound {low} is not within [0, capacity {cap}]")
    if abs(c) > MAX_COST:
        raise FlowGraphError(f"{what}: cost {c} exceeds the limit of {MAX_COST} in magnitude")
    return low, cap, c
