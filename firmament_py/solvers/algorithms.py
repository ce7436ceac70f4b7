"""The solvers that run in one process, by name: what a race's workers and the warm-up build.

`registry.py` adds the race itself (which runs these in worker processes) for everyone else;
keeping the single-process table here lets the race's workers build their solvers without
importing the race.
"""

from __future__ import annotations

import functools
import importlib
import inspect
from collections.abc import Callable
from typing import Any

from firmament_py.catalog import SOLVER_ALIASES
from firmament_py.solvers.base import FlowSolver
from firmament_py.solvers.cost_scaling import CostScalingSolver
from firmament_py.solvers.relaxation import RelaxationSolver
from firmament_py.solvers.ssp import SuccessiveShortestPathSolver

__all__ = [
    "ALGORITHMS",
    "ALIASES",
    "RACES",
    "algorithm_factory",
    "import_solver",
    "make_algorithm",
]

ALGORITHMS: dict[str, Callable[..., FlowSolver]] = {
    "relaxation": RelaxationSolver,
    # The paper's relaxation (RELAX-IV as Firmament runs it): no tree is handed to blocking-flow
    # sweeps, however large; `relaxation` is this project's hybrid (its module docstring).
    "relaxation-pure": functools.partial(RelaxationSolver, tree_limit=0),
    "cost-scaling": CostScalingSolver,
    "ssp": SuccessiveShortestPathSolver,
}

RACES = ("race", "firmament-race")
"""The names `registry.py` gives to races (solvers in worker processes, never built here)."""

ALIASES = SOLVER_ALIASES


def algorithm_factory(
    name: str, known: dict[str, Callable[..., FlowSolver]] | None = None, **options: Any
) -> Callable[..., FlowSolver]:
    """What building the solver called `name` (a name of `known`, default `ALGORITHMS`, an
    alias, or `package.module:ClassName`) with constructor `options` would call; ValueError
    for an unknown name or options the constructor does not take."""
    known = ALGORITHMS if known is None else known
    key = ALIASES.get(name, name)
    if ":" in key:
        factory = import_solver(key)
    elif key in known:
        factory = known[key]
    else:
        names = ", ".join([*known, *ALIASES])
        raise ValueError(
            f"unknown solver {name!r}; known solvers: {names}, or 'package.module:ClassName'"
        )
    try:
        inspect.signature(factory).bind(**options)
    except TypeError as exc:
        raise ValueError(f"bad options for solver {key!r}: {exc}") from exc
    return factory


def make_algorithm(name: str, **options: Any) -> FlowSolver:
    """Build the single-process solver called `name` with constructor `options`."""
    return algorithm_factory(name, **options)(**options)


def import_solver(path: str) -> Callable[..., FlowSolver]:
    """The `FlowSolver` subclass a `package.module:ClassName` path names (a race's workers
    import third-party solvers by name)."""
    module_name, _, attr = path.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"solver {path!r}: cannot import {module_name!r} ({exc})") from exc
    factory = getattr(module, attr, None)
    if not (isinstance(factory, type) and issubclass(factory, FlowSolver)):
        raise ValueError(f"solver {path!r}: {attr!r} is not a FlowSolver subclass")
    return factory
