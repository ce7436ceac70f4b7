"""The command line: graphgen writes streams that solve reads; errors are clear exit messages."""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

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
