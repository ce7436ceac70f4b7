"""The scheduling core: cluster events in, scheduling decisions out, with no I/O.

`Scheduler` runs rounds (events applied, graph updated through the policy, solved, decisions
applied); `FlowGraphManager` keeps the flow graph in step with the cluster. The daemon and the
simulator drive a `Scheduler`.
"""

from firmament_py.flow.placement import DeltaKind, SchedulingDelta
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
