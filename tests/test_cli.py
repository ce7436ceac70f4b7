"""The command line: graphgen writes streams that solve reads; errors are clear exit messages."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from firmament_py.cli import main
from firmament_py.flow.dimacs import DimacsReader
from firmament_py.solvers import SuccessiveShortestPathSolver


def _costs(output: str) -> list[int]:
    return [int(m) for m in re.findall(r"^s (-?\d+)$", output, flags=re.MULTILINE)]


@pytest.fixture(scope="module")
def stream() -> str:
    result = CliRunner().invoke(
        main,
        ["graphgen", "--machines", "40", "--new-tasks", "60", "--rounds", "4", "--seed", "2"],
    )
    assert result.exit_code == 0, result.output
    return result.output


def test_graphgen_stream_has_a_problem_and_rounds(stream: str) -> None:
    assert stream.startswith("p min ")
    assert stream.count("c EOI") == 5
    graphs = [g.num_arcs for g in DimacsReader(stream.splitlines()).rounds()]
    assert len(graphs) == 5


@pytest.mark.parametrize("algorithm", ["relax", "cost-scaling", "ssp", "race"])
def test_solve_answers_every_round_with_the_optimal_cost(stream: str, algorithm: str) -> None:
    expected = [
        SuccessiveShortestPathSolver().solve_graph(g.copy()).cost
        for g in DimacsReader(stream.splitlines()).rounds()
    ]
    result = CliRunner().invoke(
        main, ["solve", "-", "-a", algorithm, "--verify", "-q"], input=stream
    )
    assert result.exit_code == 0, result.output
    assert _costs(result.output) == expected
    assert result.output.count("c EOI") == len(expected)


def test_solve_prints_flows_that_balance(stream: str) -> None:
    first_round = stream.split("c EOI\n")[0] + "c EOI\n"
    result = CliRunner().invoke(
        main, ["solve", "-", "-a", "ssp", "--flows", "-q"], input=first_round
    )
    assert result.exit_code == 0, result.output
    flows = re.findall(r"^f (\d+) (\d+) (\d+)$", result.output, flags=re.MULTILINE)
    assert flows and all(int(f) > 0 for _, _, f in flows)
    graph = next(DimacsReader(first_round.splitlines()).rounds())
    net = {v: graph.supply(v) for v in graph.node_ids().tolist()}
    for src, dst, f in flows:
        net[int(src)] -= int(f)
        net[int(dst)] += int(f)
    assert all(v == 0 for v in net.values())


def test_solve_reports_the_bad_line(stream: str) -> None:
    broken = stream.replace("c EOI\n", "c EOI\na 1 99999 0 1 5 0\nc EOI\n", 1)
    line = broken.splitlines().index("a 1 99999 0 1 5 0") + 1
    result = CliRunner().invoke(main, ["solve", "-", "-a", "ssp", "-q"], input=broken)
    assert result.exit_code == 1
    assert f"line {line}" in result.output
    assert _costs(result.output), "the good first round is still answered"


def test_solve_reports_infeasible_problems() -> None:
    problem = "p min 2 1\nn 1 5\nn 2 -5\na 1 2 0 3 1\n"
    result = CliRunner().invoke(main, ["solve", "-", "-a", "relax", "-q"], input=problem)
    assert result.exit_code == 1
    assert "cannot be routed" in result.output


def test_solve_rejects_empty_input() -> None:
    result = CliRunner().invoke(main, ["solve", "-", "-q"], input="c nothing here\n")
    assert result.exit_code == 1
    assert "no problem" in result.output


def test_graphgen_rejects_bad_arguments() -> None:
    result = CliRunner().invoke(main, ["graphgen", "--utilization", "1.5"])
    assert result.exit_code == 2
    assert "utilization" in result.output


def _clean_failure(result: Result) -> str:
    """The one-line message of a failed command that exited cleanly (no traceback)."""
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    (line,) = [x for x in result.output.splitlines() if x.startswith("Error: ")]
    return line


def test_solve_reads_a_file_given_by_path(stream: str, tmp_path: Path) -> None:
    path = tmp_path / "rounds.dimacs"
    path.write_text(stream)
    from_file = CliRunner().invoke(main, ["solve", str(path), "-a", "ssp", "-q"])
    from_stdin = CliRunner().invoke(main, ["solve", "-", "-a", "ssp", "-q"], input=stream)
    assert from_file.exit_code == 0, from_file.output
    assert _costs(from_file.output) == _costs(from_stdin.output)
    assert len(_costs(from_file.output)) == 5
    broken = tmp_path / "broken.dimacs"
    broken.write_text("p min 2 1\nn 1 1\nn 2 -1\na 1 2 0 1\n")
    line = _clean_failure(CliRunner().invoke(main, ["solve", str(broken), "-q"]))
    assert f"{broken}: line 4" in line


def test_graphgen_load_spreading_streams_solve_optimally() -> None:
    args = ["--machines", "20", "--new-tasks", "30", "--rounds", "2", "--seed", "3"]
    spread = CliRunner().invoke(main, ["graphgen", "--shape", "load-spreading", *args])
    quincy = CliRunner().invoke(main, ["graphgen", "--shape", "quincy", *args])
    assert spread.exit_code == quincy.exit_code == 0
    assert spread.output != quincy.output
    expected = [
        SuccessiveShortestPathSolver().solve_graph(g.copy()).cost
        for g in DimacsReader(spread.output.splitlines()).rounds()
    ]
    assert len(expected) == 3
    result = CliRunner().invoke(
        main, ["solve", "-", "-a", "cost-scaling", "--verify", "-q"], input=spread.output
    )
    assert result.exit_code == 0, result.output
    assert _costs(result.output) == expected


def test_errors_name_the_round_being_solved() -> None:
    first = "p min 2 1\nn 1 5\nn 2 -5\na 1 2 0 3 1\n"
    assert _clean_failure(CliRunner().invoke(main, ["solve", "-q"], input=first)).startswith(
        "Error: round 1: "
    )
    second = "p min 2 1\nn 1 1\nn 2 -1\na 1 2 0 3 1\nc EOI\ne 1 5\ne 2 -5\nc EOI\n"
    result = CliRunner().invoke(main, ["solve", "-", "-a", "ssp", "-q"], input=second)
    assert _clean_failure(result).startswith("Error: round 2: ")
    assert _costs(result.output) == [1]


def test_flows_are_printed_for_every_round(stream: str) -> None:
    graphs = [g.copy() for g in DimacsReader(stream.splitlines()).rounds()]
    result = CliRunner().invoke(main, ["solve", "-", "-a", "relax", "--flows", "-q"], input=stream)
    assert result.exit_code == 0, result.output
    answers = result.output.split("c EOI\n")[:-1]
    assert len(answers) == len(graphs) == 5
    for graph, answer in zip(graphs, answers, strict=True):
        flows = re.findall(r"^f (\d+) (\d+) (\d+)$", answer, flags=re.MULTILINE)
        assert flows
        net = {v: graph.supply(v) for v in graph.node_ids().tolist()}
        for src, dst, f in flows:
            assert graph.find_arcs(int(src), int(dst)), "a flow on an arc of this round"
            net[int(src)] -= int(f)
            net[int(dst)] += int(f)
        assert all(v == 0 for v in net.values())


def test_input_that_is_not_utf8_is_a_one_line_error() -> None:
    data = b"p min 2 1\nn 1 1\nn 2 -1 \xff\xfe\na 1 2 0 1 1\n"
    result = CliRunner().invoke(main, ["solve", "-", "-a", "ssp", "-q"], input=data)
    line = _clean_failure(result)
    assert "line 3: not UTF-8 text (byte 0xff at column 8)" in line


def test_a_cost_beyond_64_bits_is_a_one_line_error() -> None:
    big = 2**40
    problem = f"p min 2 1\nn 1 {big}\nn 2 -{big}\na 1 2 0 {big} 2000000000\n"
    result = CliRunner().invoke(main, ["solve", "-", "-a", "ssp", "-q"], input=problem)
    assert "round 1: the optimal flow's cost does not fit in 64 bits" in _clean_failure(result)


def test_policies_lists_the_installed_policies_and_names_broken_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import importlib.metadata

    from firmament_py.sdk import POLICY_ENTRY_POINT_GROUP

    real = importlib.metadata.entry_points
    broken = importlib.metadata.EntryPoint(
        name="broken", value="no_such_module_anywhere:Policy", group=POLICY_ENTRY_POINT_GROUP
    )

    def with_broken(**selection: object) -> object:
        found = real(**selection)  # type: ignore[arg-type]
        if selection == {"group": POLICY_ENTRY_POINT_GROUP}:
            return importlib.metadata.EntryPoints([*found, broken])
        return found

    monkeypatch.setattr(importlib.metadata, "entry_points", with_broken)
    result = CliRunner().invoke(main, ["policies"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert re.search(r"broken .*cannot load", result.output)
    assert re.search(r"trivial .*│ no ", result.output)


def test_graphgen_replaces_a_file_only_with_a_whole_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "graph.min"
    target.write_text("keep me\n")
    arguments = ["graphgen", "--machines", "4", "--new-tasks", "4", "--rounds", "2"]

    def full_disk(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device", str(target))

    import firmament_py.cli.dimacs as cli

    with monkeypatch.context() as patch:
        patch.setattr(cli, "write_dimacs_changes", full_disk)  # fails after the first part
        result = CliRunner().invoke(main, [*arguments, "-o", str(target)])
    assert result.exit_code == 1 and "No space left on device" in result.output
    assert target.read_text() == "keep me\n"
    assert [p.name for p in tmp_path.iterdir()] == ["graph.min"]  # no partial file left
    result = CliRunner().invoke(main, [*arguments, "-o", str(target)])
    assert result.exit_code == 0, result.output
    assert target.read_text().startswith("p min ")


def test_graphgen_refuses_a_cluster_past_the_graphs_id_limit() -> None:
    result = CliRunner().invoke(main, ["graphgen", "--machines", "99999999999"])
    assert result.exit_code == 2
    assert "past the limit of 268,435,455" in result.output


def test_solve_says_when_verification_passed(stream: str) -> None:
    checked = CliRunner().invoke(main, ["solve", "-", "-a", "ssp", "--verify", "-q"], input=stream)
    assert checked.exit_code == 0, checked.output
    assert "verified: all 5 rounds optimal" in checked.output
    unchecked = CliRunner().invoke(main, ["solve", "-", "-a", "ssp", "-q"], input=stream)
    assert "verified" not in unchecked.output


def test_a_rounds_read_time_starts_at_its_first_line(
    stream: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first round arrives on a pipe 100 (simulated) seconds after `solve` starts: its read
    time (the summary's "read ms" column) is the parsing, not the wait. `solve`'s clock is a
    counter that only the wait moves, so the read time must come out as exactly 0."""
    import firmament_py.cli.dimacs as dimacs_cli

    clock = [0.0]

    class Clock:
        @staticmethod
        def perf_counter() -> float:
            return clock[0]

    real_decode = dimacs_cli.decode_lines

    def arriving_late(source: object) -> Iterator[str]:
        lines = real_decode(source)  # type: ignore[arg-type]
        clock[0] += 100.0  # the pipe stays empty for 100 s
        yield from lines

    monkeypatch.setattr(dimacs_cli, "time", Clock)
    monkeypatch.setattr(dimacs_cli, "decode_lines", arriving_late)
    result = CliRunner().invoke(main, ["solve", "-", "-a", "ssp"], input=stream, terminal_width=200)
    assert result.exit_code == 0, result.output
    first = next(line for line in result.output.splitlines() if re.match(r"^\W*1\s*│", line))
    assert first.split("│")[5].strip() == "0", first
