"""Min-cost flow solvers: successive shortest path, relaxation, cost scaling, and racing."""

from firmament_py.solvers.base import (
    FlowSolver,
    InfeasibleError,
    SolverCancelled,
    SolverError,
    SolveResult,
    UnboundedError,
)
from firmament_py.solvers.ssp import SuccessiveShortestPathSolver

__all__ = [
    "FlowSolver",
    "InfeasibleError",
    "SolveResult",
    "SolverCancelled",
    "SolverError",
    "SuccessiveShortestPathSolver",
    "UnboundedError",
]
