"""Tests that the simulation report's plots (`firmament_py.sim.plots.plot_run`) read at a glance,
and of the helpers the experiments' plots share with them.

The run `firmament-py simulate --synthetic google-100 --duration 120 --policy load-spreading`
makes is drawn once per module; every plot is then checked on the drawn figure
(tests/plot_legibility.py): nothing clipped, no tick labels on top of each other or in powers of
ten, no legend over the data. Hand-built results pin down the units and the counts in the
labels.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from matplotlib.figure import Figure

from firmament_py.sim.experiment import new_figure
from firmament_py.sim.plots import PLOT_FILES, legend_below, plain_number, plot_run, time_unit
from firmament_py.sim.runner import SimulationJob, run_job
from firmament_py.sim.simulator import Accounting, RoundRecord, SimulationResult, TaskRecord
from firmament_py.sim.wording import plural
from tests.plot_legibility import problems, recording, tick_labels

S = 1_000_000


def _draw(result: SimulationResult, directory: Path) -> dict[str, Figure]:
    """`plot_run`'s figures by file name."""
    with recording() as figures:
        paths = plot_run(result, directory)
    assert [path.name for path in paths] == list(PLOT_FILES)
    return dict(zip(PLOT_FILES, figures, strict=True))


@pytest.fixture(scope="module")
def simulated(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Figure]:
    job = SimulationJob(policy="load-spreading", synthetic="google", machines=100, duration_s=120.0)
    return _draw(run_job(job), tmp_path_factory.mktemp("plots"))


def _round(index: int, runtime_s: float, *, waiting: int = 0, running: int = 100) -> RoundRecord:
    return RoundRecord(
        index=index,
        start=index * S,
        duration=0,
        algorithm="cost_scaling",
        algorithm_seconds=runtime_s,
        solver_seconds=runtime_s,
        round_seconds=runtime_s,
        placed=0,
        preempted=0,
        migrated=0,
        refused=0,
        skipped=0,
        task_errors=0,
        waiting=waiting,
        running=running,
        events=0,
        graph_nodes=0,
        graph_arcs=0,
        graph_changes=0,
        cost=0,
        machines=1,
        slots=1,
    )


def _result(runtimes_s: list[float], *, policy: str = "load-spreading") -> SimulationResult:
    """Rounds a second apart taking `runtimes_s`, and a task placed after each runtime."""
    result = SimulationResult(policy, "cost-scaling", Accounting.ALGORITHM, end_time=9 * S)
    result.rounds = [_round(index, runtime) for index, runtime in enumerate(runtimes_s)]
    for task_id, runtime in enumerate(runtimes_s):
        result.tasks[task_id] = TaskRecord(
            task_id, "j", 0, S, first_start=round(runtime * S), end_state="running", placements=1
        )
    return result


@pytest.mark.parametrize("name", PLOT_FILES)
def test_the_simulated_run_plots_read_at_a_glance(simulated: dict[str, Figure], name: str) -> None:
    """Before: the titles ran off both sides, the legend of the tasks over time sat on the
    running tasks' line, the duration axes read 3x10^-4."""
    assert problems(simulated[name]) == []


def test_durations_read_in_the_unit_that_suits_them(tmp_path: Path) -> None:
    """Runtimes of 130-800 µs are labelled in µs with plain numbers, on both axes that show
    them; runtimes of seconds stay in seconds."""
    figures = _draw(_result([130e-6, 200e-6, 450e-6, 800e-6]), tmp_path / "fast")
    cdf = figures["algorithm_runtime_cdf.png"].axes[0]
    over_time = figures["algorithm_runtime_over_time.png"].axes[0]
    assert cdf.get_xlabel() == "algorithm runtime [µs]"
    assert over_time.get_ylabel() == "algorithm runtime [µs]"
    for axis in (cdf.xaxis, over_time.yaxis):
        labels = tick_labels(axis)
        assert labels and all(re.fullmatch(r"\d[\d,]*", label) for label in labels), labels
        assert {"200", "300", "500"} <= set(labels)
    slow = _draw(_result([2.0, 5.0, 30.0]), tmp_path / "slow")
    assert slow["algorithm_runtime_cdf.png"].axes[0].get_xlabel() == "algorithm runtime [s]"
    for figure in (*figures.values(), *slow.values()):
        assert problems(figure) == []


def test_counts_take_their_plural(tmp_path: Path) -> None:
    figures = _draw(_result([250e-6]), tmp_path)
    assert figures["algorithm_runtime_cdf.png"].axes[0].get_ylabel() == "fraction of the 1 round"
    latency = figures["placement_latency_cdf.png"].axes[0]
    assert latency.get_ylabel() == "fraction of the 1 placed task"
    more = _draw(_result([250e-6, 300e-6]), tmp_path / "more")
    assert more["algorithm_runtime_cdf.png"].axes[0].get_ylabel() == "fraction of the 2 rounds"


def test_zeros_on_a_log_axis_are_said_under_it(tmp_path: Path) -> None:
    """A zero runtime is drawn at 1 µs, and the note saying so sits under the axis, not over
    the data."""
    figures = _draw(_result([0.0, 0.0, 300e-6]), tmp_path)
    label = figures["algorithm_runtime_cdf.png"].axes[0].get_xlabel()
    assert label == "algorithm runtime [µs]\n(2 values below 1 µs drawn at 1 µs)"
    for figure in figures.values():
        assert problems(figure) == []


def test_a_long_run_description_wraps_instead_of_running_off(tmp_path: Path) -> None:
    figures = _draw(_result([1e-3], policy="a-policy-with-a-very-long-plugin-name"), tmp_path)
    for figure in figures.values():
        assert problems(figure) == []


def test_an_empty_run_is_labelled_and_legible(tmp_path: Path) -> None:
    figures = _draw(SimulationResult("trivial", "relax", Accounting.NONE), tmp_path)
    for figure in figures.values():
        assert problems(figure) == []
    assert figures["placement_latency_cdf.png"].axes[0].get_ylabel() == "fraction of placed tasks"


def test_the_tasks_legend_sits_below_the_plot(tmp_path: Path) -> None:
    """Running tasks at the top of the plot all along: a legend in a corner would cover them."""
    result = _result([1e-3] * 5)
    result.rounds = [_round(i, 1e-3, waiting=0, running=1200) for i in range(5)]
    figure = _draw(result, tmp_path)["tasks_over_time.png"]
    assert problems(figure) == []
    (legend,) = figure.legends
    assert [text.get_text() for text in legend.get_texts()] == ["waiting", "running"]
    below = legend.get_window_extent().y1 <= figure.axes[0].get_window_extent().y0
    assert below


@pytest.mark.parametrize(
    ("seconds", "unit"),
    [
        ([130e-6, 800e-6], "µs"),
        ([379e-6, 1.07e-3], "µs"),
        ([2e-3, 0.4], "ms"),
        ([1e-3, 10.0], "ms"),
        ([2.0, 30.0], "s"),
        ([0.0, 5e-6], "µs"),
        ([], "s"),
        ([0.0], "s"),
    ],
)
def test_time_unit(seconds: list[float], unit: str) -> None:
    assert time_unit(seconds)[0] == unit
    assert time_unit(seconds)[1] == {"s": 1.0, "ms": 1e-3, "µs": 1e-6}[unit]


def test_plain_numbers() -> None:
    assert [plain_number(v) for v in (8, 16, 0.25, 1600, 12_500, 1e-4 / 1e-6)] == [
        "8",
        "16",
        "0.25",
        "1,600",
        "12,500",
        "100",
    ]
    assert plain_number(1e-3 / 1e-6) == "1,000"  # 999.9999999999999, not 1e+03


def test_plural() -> None:
    assert plural(1, "seed") == "1 seed"
    assert plural(2, "seed") == "2 seeds"
    assert plural(0, "race") == "0 races"
    assert plural(1, "data set") == "1 data set"
    assert plural(1200, "placed task") == "1,200 placed tasks"
    assert plural(2, "box", "boxes") == "2 boxes"


@pytest.mark.parametrize("count", [2, 3, 4, 5])
def test_a_legend_of_uneven_columns_fits_the_figure(count: int) -> None:
    """Labels two of which are long: whatever column count legend_below picks, matplotlib's own
    layout of it (the first columns one entry longer: 2, 1, 1 for four labels in three) stays
    in the figure."""
    figure, axes = new_figure("legend", "x", "y")
    labels = ["relaxation", "cost scaling", "race (relaxation vs cost scaling)"]
    labels += ["Firmament's race (relaxation from scratch vs cost scaling)", "ssp"]
    for index, label in enumerate(labels[:count]):
        axes.plot([0, 1], [index, index + 1], label=label)
    legend_below(figure, axes)
    assert problems(figure) == []
