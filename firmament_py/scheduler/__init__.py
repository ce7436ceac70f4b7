"""The scheduling core: cluster events in, scheduling decisions out, with no I/O.

`Scheduler` runs rounds (events applied, graph updated through the policy, solved, decisions
applied); `FlowGraphManager` keeps the flow graph in step with the cluster. The daemon and the
simulator drive a `Scheduler`.

The names below load their modules when first used (PEP 562), so that a process that needs
only `scheduler.decisions` (the daemon's request loop applies decisions; its scheduling process
runs the rounds) does not import the graph manager, the policies' machinery and the solvers.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from firmament_py.flow.deltas import DeltaKind, SchedulingDelta
    from firmament_py.scheduler.graph_manager import ArcType, FlowGraphManager
    from firmament_py.scheduler.scheduler import (
        Decision,
        PendingRound,
        RejectedEvent,
        RoundResult,
        Scheduler,
        UnappliedDecision,
    )

__all__ = [
    "ArcType",
    "Decision",
    "DeltaKind",
    "FlowGraphManager",
    "PendingRound",
    "RejectedEvent",
    "RoundResult",
    "Scheduler",
    "SchedulingDelta",
    "UnappliedDecision",
]

_HOMES = {
    "DeltaKind": "firmament_py.flow.deltas",
    "SchedulingDelta": "firmament_py.flow.deltas",
    "ArcType": "firmament_py.scheduler.graph_manager",
    "FlowGraphManager": "firmament_py.scheduler.graph_manager",
    "Decision": "firmament_py.scheduler.scheduler",
    "PendingRound": "firmament_py.scheduler.scheduler",
    "RejectedEvent": "firmament_py.scheduler.scheduler",
    "RoundResult": "firmament_py.scheduler.scheduler",
    "Scheduler": "firmament_py.scheduler.scheduler",
    "UnappliedDecision": "firmament_py.scheduler.scheduler",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # the next lookup is a plain one
    return value
