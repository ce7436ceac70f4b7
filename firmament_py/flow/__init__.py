"""The flow network: a mutable min-cost flow problem, its change batches, and DIMACS I/O.

The names below load their modules when first used, so that importing a module of this
package's that needs no compiled code (`flow.limits`, which the SDK reads its limits from) does
not load numba.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from firmament_py.flow.changes import ChangeBatch, ChangeOp
    from firmament_py.flow.graph import FlowGraph
    from firmament_py.flow.limits import (
        INFINITE_CAPACITY,
        MAX_CAPACITY,
        MAX_COST,
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

_HOMES = {
    "ChangeBatch": "changes",
    "ChangeOp": "changes",
    "FlowGraph": "graph",
    "INFINITE_CAPACITY": "limits",
    "MAX_CAPACITY": "limits",
    "MAX_COST": "limits",
    "FlowGraphError": "limits",
    "NodeKind": "limits",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
