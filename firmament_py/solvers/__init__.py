"""Min-cost flow solvers: successive shortest path, relaxation, cost scaling, and racing."""

from firmament_py.solvers.base import (
    FlowSolver,
    InfeasibleError,
    SolverCancelled,
    SolverError,
    SolveResult,
    UnboundedError,
)
from firmament_py.solvers.batch_check import BatchError
from firmament_py.solvers.cost_scaling import CostScalingSolver
from firmament_py.solvers.racing import RacingSolver
from firmament_py.solvers.registry import make_solver, solver_names
from firmament_py.solvers.relaxation import RelaxationSolver
from firmament_py.solvers.ssp import SuccessiveShortestPathSolver

__all__ = [
    "BatchError",
    "CostScalingSolver",
    "FlowSolver",
    "InfeasibleError",
    "RacingSolver",
    "RelaxationSolver",
    "SolveResult",
    "SolverCancelled",
    "SolverError",
    "SuccessiveShortestPathSolver",
    "UnboundedError",
    "make_solver",
    "solver_names",
]
