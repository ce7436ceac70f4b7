"""Tests of `firmament_py.sim.experiments`: every experiment runs end to end at its "test" scale.

Each experiment runs once per module (a few seconds each) into a temporary directory; the tests
then check what it wrote (the CSV read back with the csv module, PNG files, the Markdown
summary), the claims table's rows, and that the measurements hold a point for every series, x
value and seed the scale asks for. Timings are never compared with anything: they depend on
the machine.

What a newcomer sees is checked for every experiment, the other papers' included: the claims
table fits an 80-column terminal, the progress messages do not repeat the experiment's name,
counts take their plural, and every plot reads at a glance (tests/plot_legibility.py).
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import pytest
from matplotlib.figure import Figure
from matplotlib.text import Text
from rich.console import Console
from rich.table import Table

from firmament_py.sim.experiment import CLAIM_FIELDS
from firmament_py.sim.experiments import (
    CSV_COLUMNS,
    EXPERIMENTS,
    SCALES,
    ExperimentResult,
    Fig7Params,
    Fig9Params,
    Fig12Params,
    Fig14Params,
    Fig18Params,
    Fig816Params,
    experiment_names,
    read_result,
    run_experiment,
)
from tests.plot_legibility import problems, recording, tick_labels

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

EXPECTED_CLAIMS: dict[str, list[str]] = {
    "fig7": [
        "Relaxation is the fastest algorithm on Quincy graphs",
        "Successive shortest path does not scale",
    ],
    "fig8-16": [
        "Fig. 8: relaxation degrades near oversubscription; cost scaling does not",
        "Fig. 8: oversubscribed, relaxation is slowest",
        "Fig. 8: the race answers with the faster algorithm",
        "Fig. 16: while oversubscribed, the race follows the faster algorithm",
        "Fig. 16: recovery after the overload",
    ],
    "fig9": [
        "Relaxation's runtime grows with the job (contention)",
        "Cost scaling overtakes relaxation past a job size",
    ],
    "fig12a": [
        "Arc prioritisation cuts relaxation's runtime on contended graphs (Quincy)",
        "Arc prioritisation on load-spreading graphs",
        "(ours) Relaxation's tree limit on contended graphs",
    ],
    "fig14": [
        "Firmament places tasks more than 20x faster than Quincy",
        "Firmament places most tasks within a second",
        "The placement quality is identical to Quincy's",
    ],
    "fig18": [
        "Firmament (the race) keeps up with an accelerated workload",
        "Relaxation alone falls behind at high speed-ups",
        "Cost scaling alone is too slow even without speed-up",
    ],
}

PLOTS: dict[str, list[str]] = {
    "fig7": ["fig7.png", "fig7-ratio.png"],
    "fig8-16": ["fig8-16-fig8.png", "fig8-16-fig16.png"],
    "fig9": ["fig9.png"],
    "fig12a": ["fig12a.png"],
    "fig14": ["fig14.png", "fig14-ratio.png"],
    "fig18": ["fig18.png"],
}


class _Progress:
    def __init__(self) -> None:
        self.calls: list[tuple[int, int, str]] = []

    def __call__(self, done: int, total: int, message: str) -> None:
        self.calls.append((done, total, message))


class _Run(NamedTuple):
    """An experiment's run at the "test" scale: its result, where it wrote, the progress calls
    it made and the figures it saved."""

    result: ExperimentResult
    out: Path
    progress: _Progress
    figures: list[Figure]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], _Run]:
    """Runs an experiment the first time a test asks for it, and hands the same run to every
    test after."""
    done: dict[str, _Run] = {}

    def run(name: str) -> _Run:
        if name not in done:
            out = tmp_path_factory.mktemp(name)
            progress = _Progress()
            with recording() as figures:
                result = run_experiment(name, out, scale="test", progress=progress)
            done[name] = _Run(result, out, progress, figures)
        return done[name]

    return run


@pytest.fixture(scope="module", params=list(EXPECTED_CLAIMS))
def run(request: pytest.FixtureRequest, runs: Callable[[str], _Run]) -> _Run:
    """Each of Firmament's figures."""
    return runs(request.param)


@pytest.fixture(scope="module", params=experiment_names())
def any_run(request: pytest.FixtureRequest, runs: Callable[[str], _Run]) -> _Run:
    """Each experiment, the other papers' included."""
    return runs(request.param)


# ---------------------------------------------------------------------- the registry


def test_names_in_the_papers_order() -> None:
    """Firmament's figures in the paper's order, then the other papers' experiments (tested
    beside their code: tests/test_nomora_experiment.py, test_zoe_placement.py,
    test_zoe_rules.py, test_workflows_experiment.py); Zoe's under the printed rules first."""
    assert experiment_names() == [
        "fig7",
        "fig8-16",
        "fig9",
        "fig12a",
        "fig14",
        "fig18",
        "nomora-google",
        "zoe-turnaround-paper",
        "zoe-turnaround",
        "zoe-preemption-paper",
        "zoe-preemption",
        "network-tasks",
    ]
    assert set(EXPECTED_CLAIMS) <= set(EXPERIMENTS)
    for experiment in EXPERIMENTS.values():
        assert set(experiment.scales) == set(SCALES)


def test_unknown_experiment_is_refused_with_the_list(tmp_path: Path) -> None:
    with pytest.raises(ValueError) as excinfo:
        run_experiment("fig99", tmp_path)
    message = str(excinfo.value)
    assert "fig99" in message
    for name in experiment_names():
        assert name in message
    assert list(tmp_path.iterdir()) == []


def test_unknown_scale_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"huge.*test, quick, full"):
        run_experiment("fig7", tmp_path, scale="huge")


# ---------------------------------------------------------------------- what a run writes


def test_files(run: _Run) -> None:
    result, out = run.result, run.out
    name = result.name
    assert result.csv_path == out / f"{name}.csv"
    assert [p.name for p in result.plot_paths] == PLOTS[name]
    assert result.files[-1] == out / f"{name}.md"
    for plot in result.plot_paths:
        data = plot.read_bytes()
        assert data.startswith(PNG_MAGIC)
        assert len(data) < 150_000
    summary = (out / f"{name}.md").read_text(encoding="utf-8")
    for claim in EXPECTED_CLAIMS[name]:
        assert claim in summary
    assert "| claim | paper | ours | verdict | why they differ |" in summary


def test_csv_holds_every_measurement(run: _Run) -> None:
    result = run.result
    with result.csv_path.open(newline="", encoding="utf-8") as file:
        rows = list(csv.DictReader(file))
    assert tuple(rows[0].keys()) == CSV_COLUMNS
    assert len(rows) == len(result.measurements)
    for row, m in zip(rows, result.measurements, strict=True):
        assert row["experiment"] == result.name
        assert row["scale"] == "test"
        assert (row["series"], float(row["x"]), int(row["seed"])) == (m.series, m.x, m.seed)
        assert (row["metric"], float(row["value"]), row["note"]) == (m.metric, m.value, m.note)


def test_read_result_gives_the_run_back(run: _Run) -> None:
    result = run.result
    again = read_result(result.csv_path)
    assert (again.name, again.scale, again.title) == (result.name, result.scale, result.title)
    assert again.measurements == result.measurements
    assert again.claims == result.claims
    # The commit, date, machine and wall time come back from NAME.json beside the CSV.
    assert again.provenance is not None and again.provenance == result.provenance
    assert again.wall_seconds == pytest.approx(result.wall_seconds, abs=1e-3)
    assert again.markdown() == result.markdown()


def test_read_result_refuses_other_files(tmp_path: Path) -> None:
    other = tmp_path / "other.csv"
    other.write_text("a,b\n1,2\n", encoding="utf-8")
    with pytest.raises(ValueError, match="not an experiment's CSV"):
        read_result(other)


def test_claims_table(run: _Run) -> None:
    """A block per claim: its lines labelled claim, paper, ours, verdict and why they differ;
    the scale once, below the table."""
    result = run.result
    assert [c.claim for c in result.claims] == EXPECTED_CLAIMS[result.name]
    for claim in result.claims:
        assert claim.paper and claim.ours and claim.why
    table = result.table
    assert isinstance(table, Table)
    assert table.row_count == len(CLAIM_FIELDS) * len(result.claims)
    labels, texts = (list(column.cells) for column in table.columns)
    assert labels == list(CLAIM_FIELDS) * len(result.claims)
    assert texts == [
        text for c in result.claims for text in (c.claim, c.paper, c.ours, c.verdict_text, c.why)
    ]
    assert isinstance(table.caption, str)
    assert table.caption.startswith(f"scale test: {result.scale_description}")
    console = Console(record=True, width=160)
    console.print(table)
    console.print(result.medians_table())
    assert EXPECTED_CLAIMS[result.name][0][:20] in console.export_text()


def _blocks(rendered: str) -> list[list[str]]:
    """The lines of a rendered rich table between its horizontal rules (a row or a section)."""
    blocks: list[list[str]] = [[]]
    for line in rendered.splitlines():
        if line.startswith(("├", "┡", "┏", "┌", "└")):
            blocks.append([])
        elif line.startswith(("│", "┃")):
            blocks[-1].append(line)
    return [block for block in blocks if block]


def test_claims_fit_an_80_column_terminal(any_run: _Run) -> None:
    """At 80 columns each claim's text flows at some 50 characters a line: a claim block is no
    taller than its text / 45 lines, plus a line per field. The table of five columns wrapped
    every cell at 15 characters: Figure 7's first claim took 19 lines for 477 characters."""
    result = any_run.result
    console = Console(record=True, width=80)
    console.print(result.table)
    rendered = console.export_text()
    assert max(len(line) for line in rendered.splitlines()) <= 80
    blocks = _blocks(rendered)
    assert len(blocks) == len(result.claims)
    for claim, block in zip(result.claims, blocks, strict=True):
        text = len(claim.claim) + len(claim.paper) + len(claim.ours) + len(claim.why)
        text += len(claim.verdict_text)
        assert len(block) <= math.ceil(text / 45) + len(CLAIM_FIELDS), (claim.claim, block)


def test_medians_fit_an_80_column_terminal(any_run: _Run) -> None:
    """Eight variants at three sizes are eight rows, not eight squeezed columns; no value is
    broken over two lines."""
    result = any_run.result
    table = result.medians_table()
    console = Console(record=True, width=80)
    console.print(table)
    rendered = console.export_text()
    assert "…" not in rendered
    _, body = _blocks(rendered)  # the header, then a line per row
    assert len(body) == table.row_count, rendered


def test_progress_counts_every_step(any_run: _Run) -> None:
    progress = any_run.progress
    assert progress.calls
    total = progress.calls[0][1]
    assert [done for done, _, _ in progress.calls] == list(range(1, total + 1))
    assert {t for _, t, _ in progress.calls} == {total}


def test_progress_messages_leave_the_name_to_the_caller(any_run: _Run) -> None:
    """The command line shows "NAME: MESSAGE"; a message that named the experiment again read
    "fig7: fig7: ssp, 16 machines, seed 0"."""
    name = any_run.result.name
    for _, _, message in any_run.progress.calls:
        assert name not in message
        assert not re.match(r"[\w-]+: ", message), message


_ONE_OF_MANY = re.compile(
    r"(?<![\d.,])1 (seeds|rounds|job rounds|races|sizes|data sets|workflows|tasks|machines|"
    r"runs|applications|values|racks|pods)\b"
)
"""A count of one with a plural noun."""


def test_counts_take_their_plural(any_run: _Run) -> None:
    """Everything a run prints and draws: the claims, the medians, the Markdown summary and the
    plots' titles and labels ("1 seed", "0 of 1 job round", never "1 seeds" nor "seed(s)")."""
    result = any_run.result
    console = Console(record=True, width=400)
    console.print(result.table)
    console.print(result.medians_table())
    texts = [console.export_text(), result.markdown()]
    texts += [text.get_text() for figure in any_run.figures for text in figure.findobj(Text)]
    found = [match.group(0) for text in texts for match in _ONE_OF_MANY.finditer(text)]
    found += [match.group(0) for text in texts for match in re.finditer(r"\w+\(s\)", text)]
    assert found == []


def test_plots_read_at_a_glance(any_run: _Run) -> None:
    """Nothing clipped, no tick labels on top of each other or in powers of ten, no legend over
    the data (tests/plot_legibility.py)."""
    assert len(any_run.figures) == len(any_run.result.plot_paths)
    for figure, path in zip(any_run.figures, any_run.result.plot_paths, strict=True):
        assert problems(figure) == [], path.name


def test_fig7_ticks_every_machine_count_and_reads_its_runtimes_plainly(
    runs: Callable[[str], _Run],
) -> None:
    """Before: the machines axis read 8x10^0, 9x10^0, 10^1 with no tick at 16, and runtimes
    read 4x10^-4 s."""
    fig7 = runs("fig7")
    params = EXPERIMENTS["fig7"].scales["test"]
    assert isinstance(params, Fig7Params)
    figure, ratios = fig7.figures
    (axes,) = figure.axes
    # The ratio plot ticks the same machine counts.
    assert list(ratios.axes[0].xaxis.get_majorticklocs()) == list(params.machines)
    assert list(axes.xaxis.get_majorticklocs()) == list(params.machines)
    assert tick_labels(axes.xaxis) == [f"{m:,}" for m in params.machines]
    assert re.fullmatch(r"algorithm runtime \[(µs|ms|s)\]", axes.get_ylabel())
    runtimes = tick_labels(axes.yaxis)
    assert runtimes and all(re.fullmatch(r"[\d,.]+", label) for label in runtimes), runtimes


def test_fig9_ticks_every_job_size(runs: Callable[[str], _Run]) -> None:
    params = EXPERIMENTS["fig9"].scales["test"]
    assert isinstance(params, Fig9Params)
    ((axes,),) = [figure.axes for figure in runs("fig9").figures]
    assert tick_labels(axes.xaxis) == [f"{size:,}" for size in params.job_sizes]


# ---------------------------------------------------------------------- points for everything


def _points(result: ExperimentResult, metric: str) -> set[tuple[str, float, int]]:
    return {(m.series, m.x, m.seed) for m in result.measurements if m.metric == metric}


def _grid(
    series: list[str], xs: list[float], seeds: tuple[int, ...]
) -> set[tuple[str, float, int]]:
    return {(s, x, seed) for s in series for x in xs for seed in seeds}


def test_every_series_has_every_point(run: _Run) -> None:
    result = run.result
    params = EXPERIMENTS[result.name].scales["test"]
    if isinstance(params, Fig7Params):
        expected = {
            (a, float(m), seed)
            for m in params.machines
            for a in params.runs(m)
            for seed in params.seeds
        }
        assert _points(result, "algorithm_s") == expected
        assert ("ssp", float(max(params.machines)), 0) in expected
        assert _points(result, "nodes") == _grid(
            ["graph"], [float(m) for m in params.machines], params.seeds
        )
    elif isinstance(params, Fig9Params):
        grid = _grid(params.all_series(), [float(s) for s in params.job_sizes], params.seeds)
        for metric in ("algorithm_s", "round_s", "placed"):
            assert _points(result, metric) == grid
        placed_tasks = result.medians("placed")
        for series in params.all_series():
            for size in params.job_sizes:
                assert placed_tasks[(series, float(size))] == size  # half the slots are free
    elif isinstance(params, Fig816Params):
        xs = [round(100 * u, 3) for u in params.utilisations]
        assert _points(result, "job_round_s") == _grid(list(params.algorithms), xs, params.seeds)
        for algorithm in params.algorithms:
            for seed in params.replay_seeds:
                times = sorted(
                    m.x
                    for m in result.measurements
                    if m.metric == "round_s" and m.series == algorithm and m.seed == seed
                )
                waiting = sorted(
                    m.x
                    for m in result.measurements
                    if m.metric == "waiting" and m.series == algorithm and m.seed == seed
                )
                assert times == waiting
                assert times[0] == 0.0 and times[-1] < params.horizon_s
                # A round at least every `interval_s`, never more often.
                assert len(times) <= params.horizon_s / params.interval_s + 1
        race = [
            m.note
            for m in result.measurements
            if m.series == "race" and m.metric in ("job_round_s", "round_s")
        ]
        assert race and all(note.startswith("race:") for note in race)
    elif isinstance(params, Fig18Params):
        grid = _grid(list(params.algorithms), list(params.speedups), params.seeds)
        for metric in ("tasks", "never_placed", "rounds", "algorithm_p50_s"):
            assert _points(result, metric) == grid
        placed = {
            key
            for key in grid
            if result.medians("tasks")[key[:2]] > result.medians("never_placed")[key[:2]]
        }
        assert placed  # the test workload does place tasks
        for metric in ("latency_p1_s", "latency_p50_s", "latency_p99_s", "latency_max_s"):
            assert _points(result, metric) == placed
        for key in placed:
            p1, p50, top = (
                result.medians(metric)[key[:2]]
                for metric in ("latency_p1_s", "latency_p50_s", "latency_max_s")
            )
            assert 0 <= p1 <= p50 <= top
    elif isinstance(params, Fig14Params):
        grid = _grid(list(params.algorithms), [float(m) for m in params.machines], params.seeds)
        for metric in ("arrivals", "never_placed", "rounds", "input_on_machine", "input_in_rack"):
            assert _points(result, metric) == grid
        assert _points(result, "latency_p50_s") == grid  # the test workload places arrivals
        for key in grid:
            quantiles = [result.medians(f"latency_p{q}_s")[key[:2]] for q in (1, 50, 90, 100)]
            assert quantiles == sorted(quantiles) and quantiles[0] >= 0
            # Quincy's locality: tasks go near their input (at 20 machines, one rack).
            assert result.medians("input_on_machine")[key[:2]] > 0.2
            assert result.medians("input_in_rack")[key[:2]] == 1.0
    else:
        assert isinstance(params, Fig12Params)
        variants = ["AP", "no AP", "AP, no tree limit", "no AP, no tree limit"]
        expected = _grid(
            [f"quincy: {v}" for v in variants],
            [round(100 * f, 3) for f in params.quincy_fractions],
            params.seeds,
        ) | _grid(
            [f"load-spreading: {v}" for v in variants],
            [round(100 * f, 3) for f in params.spreading_fractions],
            params.seeds,
        )
        assert _points(result, "algorithm_s") == expected


def test_medians_cover_the_grid(run: _Run) -> None:
    result = run.result
    metric = EXPERIMENTS[result.name].summary_metrics[0]
    medians = result.medians(metric)
    assert set(medians) == {(s, x) for s, x, _ in _points(result, metric)}
    assert all(value >= 0 for value in medians.values())
    assert result.wall_seconds > 0
