"""The collector settings of the package's round-running processes (`firmament_py.collector`):
`settled` makes young collections rare and freezes what is alive, then puts both back, so that
a command run inside another process (a test, an application) leaves its collector as it was."""

from __future__ import annotations

import gc
import threading
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from firmament_py.cli import experiment as experiment_cli
from firmament_py.cli import main
from firmament_py.cli import simulate as simulate_cli
from firmament_py.collector import YOUNG_COLLECTION_THRESHOLD, settled
from firmament_py.sim import sweep
from firmament_py.sim.runner import SimulationJob
from firmament_py.solvers import SolverError


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


def test_the_simulate_command_runs_settled(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    seen: list[tuple[int, int, int]] = []

    def simulate(*args: Any) -> None:
        seen.append(gc.get_threshold())

    monkeypatch.setattr(simulate_cli, "_simulate", simulate)
    before = gc.get_threshold()
    result = CliRunner().invoke(
        main, ["simulate", "--synthetic", "small", "--quiet", "--out", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    assert seen == [(YOUNG_COLLECTION_THRESHOLD, 20, 20)]
    assert gc.get_threshold() == before


def test_settled_blocks_nest_and_overlap_across_threads() -> None:
    """A Dask worker may run two sweep runs at once in threads: the collector is put back
    when the last block ends, not when the first one does."""
    gc.unfreeze()
    before = gc.get_threshold()
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen: list[int] = []

    def first() -> None:
        with settled():
            first_in.set()
            second_in.wait(10)
        first_out.set()

    thread = threading.Thread(target=first)
    thread.start()
    assert first_in.wait(10)
    with settled():
        second_in.set()
        assert first_out.wait(10)
        seen.append(gc.get_threshold()[0])  # the first block ended, this one still runs
        assert gc.get_freeze_count() > 0
        with settled():  # nested in one thread
            pass
        seen.append(gc.get_threshold()[0])
    thread.join(10)
    assert seen == [YOUNG_COLLECTION_THRESHOLD] * 2
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_the_experiment_command_runs_settled(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    seen: list[tuple[int, int, int]] = []

    def run_experiment(*args: Any, **kwargs: Any) -> None:
        seen.append(gc.get_threshold())
        raise SolverError("stop here")

    monkeypatch.setattr(experiment_cli, "run_experiment", run_experiment)
    before = gc.get_threshold()
    result = CliRunner().invoke(
        main, ["experiment", "fig18", "--scale", "test", "--quiet", "--out", str(tmp_path)]
    )
    assert result.exit_code == 1 and "stop here" in result.output
    assert seen == [(YOUNG_COLLECTION_THRESHOLD, 20, 20)]
    assert gc.get_threshold() == before


def test_a_sweep_run_runs_settled(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[int, int, int]] = []

    def run_job(job: SimulationJob) -> None:
        seen.append(gc.get_threshold())
        raise ValueError("stop here")

    monkeypatch.setattr(sweep, "run_job", run_job)
    before = gc.get_threshold()
    row = sweep.run_and_summarize(SimulationJob(synthetic="small"))
    assert row["error"] == "ValueError: stop here"
    assert seen == [(YOUNG_COLLECTION_THRESHOLD, 20, 20)]
    assert gc.get_threshold() == before
