"""The catalog of names the daemon and the commands check before loading anything: it must
say of every solver what building it would say."""

from __future__ import annotations

import inspect

import pytest

from firmament_py.catalog import (
    SOLVER_ALIASES,
    SOLVER_OPTIONS,
    available_policies,
    unknown_policy,
    unknown_solver,
)
from firmament_py.solvers.algorithms import ALIASES
from firmament_py.solvers.registry import SOLVERS, solver_factory


def test_the_catalog_names_every_solver_the_registry_builds() -> None:
    assert list(SOLVER_OPTIONS) == list(SOLVERS)
    assert ALIASES is SOLVER_ALIASES


@pytest.mark.parametrize("name", sorted(SOLVERS))
def test_each_solver_takes_the_options_the_catalog_lists(name: str) -> None:
    taken = {
        parameter.name
        for parameter in inspect.signature(SOLVERS[name]).parameters.values()
        if parameter.kind in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY)
    }
    assert taken == SOLVER_OPTIONS[name]


@pytest.mark.parametrize(
    ("name", "options"),
    [
        ("cost-scaling", {"alpha": 4}),
        ("cs", {}),
        ("relaxation-pure", {"incremental": True}),
        ("firmament-race", {"hedge": 0.5}),
        ("cost-scaling", {"nosuch": 1}),
        ("firmament-race", {"algorithms": ("ssp",)}),
        ("ssp", {"alpha": 2}),
        ("simplex", {}),
    ],
)
def test_the_catalog_says_what_building_would(name: str, options: dict[str, object]) -> None:
    problem = unknown_solver(name, options)
    try:
        solver_factory(name, **options)
    except ValueError as error:
        assert problem is not None
        assert str(error).split(":")[0] == problem.split(":")[0]  # the same name and kind
    else:
        assert problem is None


def test_a_bad_option_is_named_with_the_ones_the_solver_takes() -> None:
    problem = unknown_solver("ssp", {"alpha": 2})
    assert problem == "bad options for solver 'ssp': it takes no option 'alpha' (its options: none)"


def test_a_third_party_solver_is_left_to_its_import() -> None:
    assert unknown_solver("mypackage.solvers:MySolver", {"anything": 1}) is None


def test_policies_are_known_by_their_entry_points() -> None:
    assert "quincy" in available_policies()
    assert unknown_policy("quincy") is None
    assert unknown_policy("nosuch") == (
        f"unknown policy 'nosuch'; installed: {', '.join(available_policies())}"
    )
