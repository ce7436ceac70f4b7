"""The headline's rendering (bench/headline_table.py, through bench/headline.py's titles and
command line): the headline table from a small data folder, the doc's block between its markers,
and a clear error for data it cannot render. Measuring is not tested here (it runs the
benchmarks); `python bench/headline.py --quick` is its smoke test."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]


def load_bench(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, REPO / "bench" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while it executes
    spec.loader.exec_module(module)
    return module


table = load_bench("headline_table")  # first: bench/headline.py imports it by this name
headline = load_bench("headline")
TITLES = headline.TITLES

ROUND = """\
policy quincy, solver cost-scaling: 12500 machines x 12 slots, 135000 tasks, 1350 submissions \
+ 1350 removals per round; median over 5 rounds, median of 3 runs (31 s)
| part | median ms | runs (ms) |
|---|---:|---|
| first_round | 2783.9 | 2991.6 2783.9 2627.1 |
| update | 48.2 | 53.6 48.2 47.8 |
| solve | 90.0 | 102.9 76.2 90.0 |
| solver | 53.1 | 62.6 45.4 53.1 |
| extract | 14.5 | 15.3 12.3 14.5 |
| apply | 11.8 | 11.8 8.5 12.5 |
| total | 160.4 | 185.8 141.4 160.4 |
| ortools | 142.1 | 161.3 110.7 142.1 |
"""

INGEST = """\
request path alone: 6.4 us per event (median of 3)
run 1: events_per_s 19,997.00, failed 0.00, p50_ms 4.01, p99_ms 36.50, max_ms 60.00, \
rounds_run 52.00, round_p50_ms 351.00
run 2: events_per_s 19,990.00, failed 0.00, p50_ms 3.00, p99_ms 12.00, max_ms 40.00, \
rounds_run 60.00, round_p50_ms 300.00
run 3: events_per_s 20,001.00, failed 0.00, p50_ms 5.00, p99_ms 20.00, max_ms 70.00, \
rounds_run 50.00, round_p50_ms nan
median of 3 (1000 machines, 8 clients in 8 processes, window 4, batch 20, offered 20,000 \
events/s, round every 100 ms, fsync always, policy trivial):
  events_per_s: 19,997.00
"""


def solver_row(scenario: str, algorithm: str, times: list[object]) -> dict[str, object]:
    return {"scenario": scenario, "algorithm": algorithm, "times": times, "cost": 1}


def write_fixture(folder: Path) -> Path:
    """A data folder as a full run writes it, less the job and incremental scenarios."""
    folder.mkdir()
    (folder / "solvers-scratch.txt").write_text(
        "# python 3.11.7, 2 cpus, machines=12500, repeats=3\n# s50: ...\n"
    )
    rows = [
        solver_row("s50", "relaxation", [0.17, 0.16, 0.18]),
        solver_row("s50", "cost-scaling", [0.75, 0.74, 0.76]),
        solver_row("s50", "race", [0.54, 0.55, 0.53]),
        solver_row("s50", "OR-Tools", [0.79, 0.80, 0.78]),
        solver_row("s105", "relaxation", [36.7]),
        solver_row("s105", "cost-scaling", [2.1, 2.2, 2.0]),
        solver_row("s105", "OR-Tools", [2.9, 2.8, 3.0]),
    ]
    (folder / "solvers-scratch.json").write_text(json.dumps(rows))
    (folder / "round-quincy.txt").write_text(ROUND)
    (folder / "daemon-ingest.txt").write_text(INGEST)
    (folder / "cli-help.json").write_text(json.dumps({"seconds": [0.5, 0.4, 0.9]}))
    run = {
        "commit": "0123456789abcdef0123456789abcdef01234567",
        "uncommitted_changes": False,
        "date": "2026-12-01T10:00:00+00:00",
        "quick": False,
        "machine": {
            "cpu": "AMD EPYC",
            "cores": 2,
            "memory_gib": 23.5,
            "python": "3.11.7",
            "numpy": "2.4.6",
            "numba": "0.68.1",
            "ortools": "9.15.6755",
        },
        "seconds": 700,
        "measurements": [
            {
                "name": "solvers-scratch",
                "kind": "solvers",
                "command": "python bench/solvers.py --scenarios s50,s105",
                "stdout": "solvers-scratch.txt",
                "json": "solvers-scratch.json",
                "seconds": 300.2,
            },
            {
                "name": "round-quincy",
                "kind": "round",
                "command": "python bench/round_cost.py --policy quincy --ortools --runs 3",
                "stdout": "round-quincy.txt",
            },
            {
                "name": "daemon-ingest",
                "kind": "ingest",
                "command": "python bench/daemon_ingest.py --batch 20 --rate 20000",
                "stdout": "daemon-ingest.txt",
            },
            {
                "name": "cli-help",
                "kind": "cli",
                "command": "firmament-py --help  # 3 times",
                "json": "cli-help.json",
            },
        ],
    }
    (folder / "run.json").write_text(json.dumps(run))
    return folder


def table_rows(markdown: str) -> dict[str, list[str]]:
    """The table's rows by the start of their first cell (the part before a colon)."""
    rows = {}
    for line in markdown.splitlines():
        if line.startswith("| ") and not line.startswith("| measurement"):
            cells = [cell.strip() for cell in line.strip("|").split(" | ")]
            rows[cells[0].split(":")[0]] = cells
    return rows


def test_the_table_gives_each_measurement_against_or_tools(tmp_path: Path) -> None:
    folder = write_fixture(tmp_path / "data")
    text = table.render(folder, tmp_path, TITLES)
    assert " ".join(text.split("\n\n")[0].split()) == (
        "Measured at commit `0123456` on 2026-12-01, on AMD EPYC, 2 cores, 23.5 GiB; "
        "Python 3.11.7, numpy 2.4.6, numba 0.68.1, OR-Tools 9.15.6755. "
        f"Data: [`{folder}/`]({folder}/), the whole run 11.7 minutes."  # outside the repository
    )
    rows = table_rows(text)
    assert rows["S50 from scratch"][1:5] == [
        "12,500 machines",
        "170 ms (relaxation)",
        "790 ms",
        "0.22",
    ]
    assert rows["S50 from scratch"][5] == (
        "relaxation 170, cost-scaling 750, race 540 ms; medians of 3 runs"
    )
    assert rows["S105 from scratch"][2:5] == ["2,100 ms (cost-scaling)", "2,900 ms", "0.72"]
    assert "relaxation 36,700 (one run)" in rows["S105 from scratch"][5]
    assert rows["a steady quincy round"][1:5] == [
        "12,500 machines, 135,000 tasks, 1,350 + 1,350 a round",
        "160 ms",
        "142 ms",
        "1.13",
    ]
    assert rows["a steady quincy round"][5] == (
        "update 48, solve 90 (the algorithm 53), extract 15, apply 12 ms; the first round "
        "2,784 ms; medians of 3 runs, each the median of 5 rounds"
    )
    ingest = rows["the daemon's ingest, paced"]
    assert ingest[1].startswith("1000 machines, 8 clients in 8 processes")
    assert ingest[2:5] == ["19,997 events/s (of 20,000 offered)", "—", "—"]
    assert ingest[5].startswith("latency p50 4.0, p99 20, max 60 ms; 52 rounds run (round p50 326")
    assert "the request path alone 6.4 us an event; medians of 3 runs" in ingest[5]
    assert rows["`firmament-py --help`"][2:] == [
        "0.50 s",
        "—",
        "—",
        "medians of 3 runs (0.40 to 0.90 s)",
    ]
    assert "Not in this data: the contention job, incremental rounds, a load-spreading round." in (
        " ".join(text.split())
    )
    assert "- `python bench/solvers.py --scenarios s50,s105` (300 s)" in text


def test_the_doc_block_is_replaced_between_its_markers_only(tmp_path: Path) -> None:
    folder = write_fixture(tmp_path / "data")
    doc = tmp_path / "benchmarks.md"
    doc.write_text(f"# Benchmarks\n\nbefore\n\n{table.BEGIN}\nstale table\n{table.END}\n\nafter\n")
    table.into_doc(doc, folder, TITLES)
    text = doc.read_text()
    assert text.startswith(f"# Benchmarks\n\nbefore\n\n{table.BEGIN}\n<!-- rendered by ")
    assert text.endswith(f"{table.END}\n\nafter\n")
    assert "stale table" not in text and "| a steady quincy round" in text
    table.into_doc(doc, folder, TITLES)
    assert doc.read_text() == text


def test_the_docs_headline_is_the_rendering_of_the_data_it_names() -> None:
    doc = REPO / "docs" / "benchmarks.md"
    text = doc.read_text()
    named = re.search(r"--render (\S+)`", text)
    assert named is not None, "docs/benchmarks.md names no data folder"
    start, end = text.index(table.BEGIN), text.index(table.END) + len(table.END)
    assert text[start:end] == table.block(REPO / named[1], doc, TITLES), (
        "the headline in docs/benchmarks.md was edited by hand, or its data changed: "
        f"python bench/headline.py --render {named[1]}"
    )


Damage = Callable[[Path], object]


def break_file(name: str, content: str) -> Damage:
    return lambda folder: (folder / name).write_text(content)


def edit_run(change: Callable[[dict[str, Any]], object]) -> Damage:
    def edit(folder: Path) -> None:
        run = json.loads((folder / "run.json").read_text())
        change(run)
        (folder / "run.json").write_text(json.dumps(run))

    return edit


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda folder: (folder / "run.json").unlink(), r"run\.json: no such file"),
        (break_file("run.json", "{"), r"run\.json: not JSON"),
        (edit_run(lambda run: run.pop("commit")), r"'commit' is missing"),
        (edit_run(lambda run: run.update(date="yesterday")), r"not an ISO date"),
        (edit_run(lambda run: run["machine"].pop("numba")), r"'numba' is missing"),
        (edit_run(lambda run: run.update(measurements=[])), r"no measurements"),
        (
            edit_run(lambda run: run["measurements"][0].update(kind="fastest")),
            r"unknown kind 'fastest'",
        ),
        (
            lambda folder: (folder / "round-quincy.txt").unlink(),
            r"round-quincy\.txt: cannot be read",
        ),
        (break_file("solvers-scratch.json", "[]"), r"non-empty list of rows"),
        (
            break_file("solvers-scratch.json", json.dumps([solver_row("s50", "race", [])])),
            r"row 0, times: expected a non-empty list of numbers",
        ),
        (
            break_file("solvers-scratch.json", json.dumps([solver_row("s50", "race", ["1"])])),
            r"expected numbers",
        ),
        (break_file("solvers-scratch.txt", "no header\n"), r"no 'machines='"),
        (
            break_file("round-quincy.txt", ROUND.replace("| total |", "| all |")),
            r"no row for total",
        ),
        (break_file("round-quincy.txt", "| solve | 1 | 1 x |\n"), r"no 'policy \.\.\., solver"),
        (break_file("daemon-ingest.txt", "Traceback\n"), r"not the output of bench/daemon_ingest"),
        (break_file("cli-help.json", '{"seconds": []}'), r"cli-help\.json, seconds"),
    ],
)
def test_data_that_cannot_be_rendered_says_what_and_where(
    tmp_path: Path, damage: Damage, message: str
) -> None:
    folder = write_fixture(tmp_path / "data")
    damage(folder)
    with pytest.raises(table.DataError, match=message):
        table.render(folder, tmp_path, TITLES)


def test_quick_data_is_never_rendered_into_the_doc(tmp_path: Path) -> None:
    folder = write_fixture(tmp_path / "data")
    edit_run(lambda run: run.update(quick=True))(folder)
    doc = tmp_path / "benchmarks.md"
    doc.write_text(f"{table.BEGIN}\n{table.END}\n")
    with pytest.raises(table.DataError, match="a --quick run"):
        table.into_doc(doc, folder, TITLES)
    assert "quincy" in table.render(folder, tmp_path, TITLES)  # printing it is fine


def test_a_doc_without_its_markers_is_left_alone(tmp_path: Path) -> None:
    doc = tmp_path / "benchmarks.md"
    doc.write_text("# Benchmarks\n")
    with pytest.raises(table.DataError, match="needs one <!-- headline:begin -->"):
        table.into_doc(doc, write_fixture(tmp_path / "data"), TITLES)
    assert doc.read_text() == "# Benchmarks\n"


def test_the_command_line_reports_bad_data_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match=r"^headline: .*run\.json: no such file"):
        headline.main(["--render", str(tmp_path), "--print"])
