"""Test setup for firmament-binpack: the tests exercise the installed distribution (its entry
point included), so stop at once, with the fix, when it is not installed."""

from __future__ import annotations

import importlib.util

import pytest


def pytest_configure(config: pytest.Config) -> None:
    """Refuse to run against a missing package rather than fail every test with an ImportError."""
    if importlib.util.find_spec("firmament_binpack") is None:
        raise pytest.UsageError(
            "firmament_binpack is not importable: install the package first, for example "
            "`pip install -e .` in examples/policy-package"
        )
