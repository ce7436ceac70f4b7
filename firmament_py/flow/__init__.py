"""The flow network: a mutable min-cost flow problem, its change batches, and DIMACS I/O."""

from firmament_py.flow.changes import ChangeBatch, ChangeOp
from firmament_py.flow.graph import (
    INFINITE_CAPACITY,
    MAX_CAPACITY,
    MAX_COST,
    FlowGraph,
    FlowGraphError,
    NodeKind,
)

__all__ = [
    "INFINITE_CAPACITY",
    "MAX_CAPACITY",
    "MAX_COST",
    "ChangeBatch",
    "ChangeOp",
    "FlowGraph",
    "FlowGraphError",
    "NodeKind",
]
