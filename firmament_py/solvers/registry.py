"""Solvers by name, as the command line, the scheduler and the benchmarks ask for them."""

from __future__ import annotations

import importlib
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
    """Build the solver called `name` (or an alias) with constructor `options`.

    A name of the form `package.module:ClassName` imports a `FlowSolver` subclass from
    anywhere, so that a race can hold third-party solvers (its workers import it by name).
    """
    return solver_factory(name, **options)(**options)


def solver_factory(name: str, **options: Any) -> Callable[..., FlowSolver]:
    """What `make_solver(name, **options)` would call, without calling it; ValueError as it
    would raise for an unknown name or options the constructor does not take (a check for a
    process that builds the solver elsewhere, such as the daemon's scheduling process)."""
    key = ALIASES.get(name, name)
    if ":" in key:
        factory = _import_solver(key)
    elif key in SOLVERS:
        factory = SOLVERS[key]
    else:
        known = ", ".join(solver_names())
        raise ValueError(
            f"unknown solver {name!r}; known solvers: {known}, or 'package.module:ClassName'"
        )
    try:
        inspect.signature(factory).bind(**options)
    except TypeError as exc:
        raise ValueError(f"bad options for solver {key!r}: {exc}") from exc
    return factory


def _import_solver(path: str) -> Callable[..., FlowSolver]:
    module_name, _, attr = path.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"solver {path!r}: cannot import {module_name!r} ({exc})") from exc
    factory = getattr(module, attr, None)
    if not (isinstance(factory, type) and issubclass(factory, FlowSolver)):
        raise ValueError(f"solver {path!r}: {attr!r} is not a FlowSolver subclass")
    return factory
