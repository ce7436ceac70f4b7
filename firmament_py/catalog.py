"""The names a command or the daemon checks before anything loads what they name: the installed
policies, and the solvers with the options their constructors take.

Checking a name by loading it would cost what loading costs: the daemon checks its policy and
solver on every start, though only its scheduling process builds them, and loading a solver
loads the compiled kernels (numba), which is most of a restart's time. So this module imports
nothing of the package. Policies are listed from their entry-point group (the one built-in and
third-party policies alike register in); the solvers' table mirrors `solvers/registry.py`, and
a test holds each entry to its constructor's signature.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Iterable

__all__ = [
    "POLICY_ENTRY_POINT_GROUP",
    "SOLVER_ALIASES",
    "SOLVER_OPTIONS",
    "available_policies",
    "policy_entry_points",
    "unknown_policy",
    "unknown_solver",
]

POLICY_ENTRY_POINT_GROUP = "firmament_py.policies"
"""Policies are found through this entry-point group; the entry point's name is the policy's."""

_RELAXATION = frozenset({"incremental", "arc_prioritisation", "tree_limit", "forward_reprice"})
_COST_SCALING = frozenset(
    {
        "alpha",
        "incremental",
        "global_updates",
        "price_refine",
        "lookahead",
        "certify_early",
        "update_factor",
        "check_factor",
        "warm_epsilon",
    }
)

SOLVER_OPTIONS: dict[str, frozenset[str]] = {
    "relaxation": _RELAXATION,
    "relaxation-pure": _RELAXATION,
    "cost-scaling": _COST_SCALING,
    "ssp": frozenset(),
    "race": frozenset({"algorithms", "options", "hedge", "idle"}),
    "firmament-race": frozenset({"hedge", "idle"}),
}
"""Each built-in solver's name and the keyword options its constructor takes."""

SOLVER_ALIASES = {"relax": "relaxation", "cs": "cost-scaling", "cost_scaling": "cost-scaling"}
"""Other names the command line and the daemon accept for a solver."""


def policy_entry_points() -> dict[str, list[importlib.metadata.EntryPoint]]:
    """The installed policies' entry points by name; a name may have several (a conflict)."""
    found: dict[str, list[importlib.metadata.EntryPoint]] = {}
    for entry_point in importlib.metadata.entry_points(group=POLICY_ENTRY_POINT_GROUP):
        same_name = found.setdefault(entry_point.name, [])
        # One distribution can be seen twice (say, an editable install on two path entries).
        if all(other.value != entry_point.value for other in same_name):
            same_name.append(entry_point)
    return found


def available_policies() -> list[str]:
    """The names of the installed policies, sorted."""
    return sorted(policy_entry_points())


def unknown_policy(name: str) -> str | None:
    """Why `name` is no installed policy ("unknown policy ...; installed: ..."), None if it is
    one: what a command or the daemon says of a name it checks before anything loads it."""
    installed = available_policies()
    if name in installed:
        return None
    return f"unknown policy {name!r}; installed: {', '.join(installed) or 'none'}"


def unknown_solver(name: str, options: Iterable[str] = ()) -> str | None:
    """Why the built-in solver `name` (or an alias) cannot be built with keyword `options`
    (an unknown name, an option its constructor does not take), None if it can. A
    `package.module:ClassName` name is not checked here: only importing it can tell."""
    key = SOLVER_ALIASES.get(name, name)
    if ":" in key:
        return None
    if key not in SOLVER_OPTIONS:
        names = ", ".join([*SOLVER_OPTIONS, *SOLVER_ALIASES])
        return f"unknown solver {name!r}; known solvers: {names}, or 'package.module:ClassName'"
    unexpected = sorted(set(options) - SOLVER_OPTIONS[key])
    if unexpected:
        takes = ", ".join(sorted(SOLVER_OPTIONS[key])) or "none"
        return (
            f"bad options for solver {key!r}: it takes no option "
            f"{', '.join(map(repr, unexpected))} (its options: {takes})"
        )
    return None
