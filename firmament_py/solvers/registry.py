"""Solvers by name, as the command line, the scheduler and the benchmarks ask for them: the
single-process algorithms (`algorithms.py`) and the race between them."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from firmament_py.solvers.algorithms import ALGORITHMS, ALIASES, algorithm_factory
from firmament_py.solvers.base import FlowSolver
from firmament_py.solvers.racing import RacingSolver

__all__ = ["ALIASES", "SOLVERS", "make_solver", "solver_factory", "solver_names"]

SOLVERS: dict[str, Callable[..., FlowSolver]] = {
    **ALGORITHMS,
    "race": RacingSolver,
    # Firmament's race (OSDI'16, section 6.1): relaxation from scratch against incremental cost
    # scaling, both started every round (no hedge); `race` starts relaxation incremental too and
    # hedges on the last winner.
    "firmament-race": functools.partial(
        RacingSolver,
        ("relaxation", "cost-scaling"),
        {"relaxation": {"incremental": False}},
        hedge=None,
    ),
}


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
    return algorithm_factory(name, SOLVERS, **options)
