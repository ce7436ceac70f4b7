"""Solvers by name, as the command line, the scheduler and the benchmarks ask for them."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from firmament_py.solvers.base import FlowSolver
from firmament_py.solvers.cost_scaling import CostScalingSolver
from firmament_py.solvers.racing import RacingSolver
from firmament_py.solvers.relaxation import RelaxationSolver
from firmament_py.solvers.ssp import SuccessiveShortestPathSolver

SOLVERS: dict[str, Callable[..., FlowSolver]] = {
    "relaxation": RelaxationSolver,
    "cost-scaling": CostScalingSolver,
    "ssp": SuccessiveShortestPathSolver,
    "race": RacingSolver,
}

ALIASES = {"relax": "relaxation", "cs": "cost-scaling", "cost_scaling": "cost-scaling"}


def solver_names() -> list[str]:
    """Canonical names, then aliases (for command-line choices)."""
    return [*SOLVERS, *ALIASES]


def make_solver(name: str, **options: Any) -> FlowSolver:
    """Build the solver called `name` (or an alias) with constructor `options`."""
    key = ALIASES.get(name, name)
    if key not in SOLVERS:
        known = ", ".join(solver_names())
        raise ValueError(f"unknown solver {name!r}; known solvers: {known}")
    factory = SOLVERS[key]
    try:
        inspect.signature(factory).bind(**options)
    except TypeError as exc:
        raise ValueError(f"bad options for solver {key!r}: {exc}") from exc
    return factory(**options)
