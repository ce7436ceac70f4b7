"""The collector settings of the package's round-running processes (`firmament_py.collector`):
`settled` makes young collections rare and freezes what is alive, then puts both back, so that
a command run inside another process (a test, an application) leaves its collector as it was."""

from __future__ import annotations

import gc
from typing import Any

import pytest
from click.testing import CliRunner

from firmament_py import cli
from firmament_py.collector import YOUNG_COLLECTION_THRESHOLD, settled


def test_settled_freezes_and_puts_the_collector_back() -> None:
    gc.unfreeze()  # what earlier tests froze (an in-process daemon freezes its state)
    before = gc.get_threshold()
    with pytest.raises(ValueError), settled():
        assert gc.get_threshold()[0] == YOUNG_COLLECTION_THRESHOLD
        assert gc.get_freeze_count() > 1_000  # the imported modules, at least
        raise ValueError("the command failed")
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_settled_leaves_a_process_own_frozen_objects_alone() -> None:
    gc.freeze()
    frozen = gc.get_freeze_count()
    try:
        with settled():
            assert gc.get_threshold()[0] == YOUNG_COLLECTION_THRESHOLD
            assert gc.get_freeze_count() == frozen
        assert gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()


def test_the_simulate_command_runs_settled(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[int, int, int]] = []

    def simulate(*args: Any) -> None:
        seen.append(gc.get_threshold())

    monkeypatch.setattr(cli, "_simulate", simulate)
    before = gc.get_threshold()
    result = CliRunner().invoke(cli.main, ["simulate", "--synthetic", "small", "--quiet"])
    assert result.exit_code == 0, result.output
    assert seen == [(YOUNG_COLLECTION_THRESHOLD, 20, 20)]
    assert gc.get_threshold() == before
