"""`firmament-py solve` and `graphgen`: min-cost flow problems in DIMACS, in and out.

`solve` behaves like Firmament's solver process: it reads a stream of rounds (a whole problem,
then incremental changes, each ended by `c EOI`), solves each round from the previous solution,
and answers each with `s COST`, optionally the `f SRC DST FLOW` lines, and `c EOI`, flushing
after every round so a scheduler on the other end of a pipe can read it. Timing goes to `c`
comment lines; a summary table goes to stderr at the end. `graphgen` writes such a stream for a
Firmament-shaped cluster.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO, TextIO

import click
from rich.console import Console
from rich.table import Table

from firmament_py.cli.params import FiniteFloatRange
from firmament_py.flow.dimacs import (
    DimacsError,
    DimacsReader,
    decode_lines,
    write_dimacs,
    write_dimacs_changes,
)
from firmament_py.flow.graph import FlowGraphError
from firmament_py.flow.graphgen import ClusterGraph, ClusterSpec
from firmament_py.solvers import SolverError, make_solver
from firmament_py.solvers.optimality import OptimalityError, verify

__all__ = ["ALGORITHMS", "graphgen", "solve"]

ALGORITHMS = ["relax", "relaxation", "cost-scaling", "ssp", "race"]


class _ArrivalClock:
    """The lines of a stream, noting when the first line of each round arrived: a round's read
    time runs from there, not from when `solve` started waiting on a pipe that was still
    empty."""

    def __init__(self, lines: Iterable[str]) -> None:
        self._lines = iter(lines)
        self.first_line_at: float | None = None

    def __iter__(self) -> Iterator[str]:
        for line in self._lines:
            if self.first_line_at is None:
                self.first_line_at = time.perf_counter()
            yield line

    def restart(self) -> None:
        """The next line starts a round."""
        self.first_line_at = None


@click.command()
# Binary, so that `decode_lines` can name a line that is not UTF-8 text.
@click.argument("source", type=click.File("rb"), default="-")
@click.option(
    "--algorithm",
    "-a",
    type=click.Choice(ALGORITHMS),
    default="race",
    show_default=True,
    help="Min-cost flow algorithm; race runs relaxation against cost scaling.",
)
@click.option("--flows", is_flag=True, help="Print an 'f SRC DST FLOW' line per arc with flow.")
@click.option(
    "--verify/--no-verify",
    "check",
    default=False,
    help="Check every answer independently (bounds, conservation, reduced costs).",
)
@click.option("--quiet", "-q", is_flag=True, help="No summary table on stderr.")
def solve(source: BinaryIO, algorithm: str, flows: bool, check: bool, quiet: bool) -> None:
    """Solve the min-cost flow problem(s) in SOURCE (a DIMACS file or '-' for stdin).

    SOURCE may hold several rounds: a whole problem, then Firmament-style incremental changes,
    each round ended by 'c EOI'. Every round is solved from the previous round's solution.
    """
    out = sys.stdout
    err = Console(stderr=True)
    solver = make_solver(algorithm)
    name = getattr(source, "name", "<stdin>")  # test runners' stdin streams have no name
    clock = _ArrivalClock(decode_lines(source))
    reader = DimacsReader(clock)
    rows: list[tuple[int, int, int, int, float, float, str]] = []
    current = 1  # the round being read or solved, for error messages
    try:
        for graph in reader.rounds():
            current = reader.rounds_read
            read_time = time.perf_counter() - (clock.first_line_at or time.perf_counter())
            result = solver.solve_graph(graph)
            if check:
                verify(graph, result)
            out.write(f"s {result.cost}\n")
            if flows:
                a = graph.arrays()
                arcs = graph.arc_ids()
                arcs = arcs[result.flow[arcs] > 0]
                cols = zip(
                    a.src[arcs].tolist(),
                    a.dst[arcs].tolist(),
                    result.flow[arcs].tolist(),
                    strict=True,
                )
                out.writelines(f"f {s} {d} {f}\n" for s, d, f in cols)
            solve_ms = result.wall_time * 1000
            out.write(
                f"c round {reader.rounds_read}: {result.algorithm} solved {graph.num_nodes} "
                f"nodes, {graph.num_arcs} arcs in {solve_ms:.1f} ms\n"
            )
            out.write("c EOI\n")
            out.flush()
            rows.append(
                (
                    reader.rounds_read,
                    graph.num_nodes,
                    graph.num_arcs,
                    result.cost,
                    read_time * 1000,
                    solve_ms,
                    result.algorithm,
                )
            )
            current = reader.rounds_read + 1
            clock.restart()
    except DimacsError as exc:
        raise click.ClickException(f"{name}: {exc}") from exc
    except (SolverError, FlowGraphError, OptimalityError) as exc:
        raise click.ClickException(f"round {current}: {exc}") from exc
    finally:
        solver.close()
    if not rows:
        raise click.ClickException(f"{name}: no problem in the input")
    if not quiet:
        err.print(_summary(rows))
    if check:  # said even with --quiet: it is what the user asked for
        rounds = "the round" if len(rows) == 1 else f"all {len(rows)} rounds"
        err.print(
            f"verified: {rounds} optimal (flow within bounds, conserved, no negative reduced "
            "cost on a residual arc)",
            soft_wrap=True,
        )


def _summary(rows: list[tuple[int, int, int, int, float, float, str]]) -> Table:
    table = Table(title="firmament-py solve", title_justify="left")
    for name in ("round", "nodes", "arcs", "optimal cost", "read ms", "solve ms", "solved by"):
        table.add_column(name, justify="left" if name == "solved by" else "right")
    shown = rows if len(rows) <= 12 else [*rows[:5], None, *rows[-5:]]
    for row in shown:
        if row is None:
            table.add_row("...", "", "", "", "", "", "")
            continue
        r, n, m, cost, read_ms, solve_ms, algo = row
        table.add_row(
            str(r), f"{n:,}", f"{m:,}", f"{cost:,}", f"{read_ms:.0f}", f"{solve_ms:.1f}", algo
        )
    if len(rows) > 1:
        later = [row[5] for row in rows[1:]]
        table.caption = (
            f"first round {rows[0][5]:.1f} ms; incremental rounds: median "
            f"{statistics.median(later):.1f} ms, max {max(later):.1f} ms"
        )
    return table


@click.command()
@click.option(
    "--shape",
    type=click.Choice(["quincy", "load-spreading"]),
    default="quincy",
    show_default=True,
    help="Quincy's locality arcs, or load-spreading through the cluster aggregator.",
)
@click.option("--machines", type=click.IntRange(1), default=1000, show_default=True)
@click.option(
    "--utilization",
    type=FiniteFloatRange(0.0, 1.0),
    default=0.5,
    show_default=True,
    help="Fraction of slots with a running task.",
)
@click.option(
    "--new-tasks", type=click.IntRange(0), default=1000, show_default=True, help="Waiting tasks."
)
@click.option("--slots", type=click.IntRange(1), default=12, show_default=True)
@click.option("--rack-size", type=click.IntRange(1), default=48, show_default=True)
@click.option("--seed", type=click.IntRange(0), default=0, show_default=True)
@click.option(
    "--rounds",
    type=click.IntRange(0),
    default=0,
    show_default=True,
    help="Incremental rounds to append after the whole graph.",
)
@click.option(
    "--churn",
    type=FiniteFloatRange(0.0, 1.0),
    default=0.01,
    show_default=True,
    help="Per round, this fraction of tasks finishes and as many new tasks arrive.",
)
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, allow_dash=True, path_type=Path),
    default="-",
    help="Where to write (replaced only once the whole output is written).",
)
def graphgen(
    shape: str,
    machines: int,
    utilization: float,
    new_tasks: int,
    slots: int,
    rack_size: int,
    seed: int,
    rounds: int,
    churn: float,
    output: Path,
) -> None:
    """Write a Firmament-shaped scheduling flow graph (and incremental rounds) as DIMACS."""
    try:
        cluster = ClusterGraph(
            ClusterSpec(
                machines=machines,
                slots_per_machine=slots,
                machines_per_rack=rack_size,
                running=utilization,
                waiting=new_tasks,
                shape="quincy" if shape == "quincy" else "load-spreading",
                seed=seed,
            )
        )
    except ValueError as error:  # a spec the generator refuses (sizes past the graph's limits)
        raise click.UsageError(str(error)) from None
    if str(output) == "-":
        _write_graph(cluster, rounds, churn, sys.stdout)
        return
    # Into a file beside the target, renamed over it when whole: a failure half way (a full
    # disk, say) leaves an existing file as it was.
    fd, partial = tempfile.mkstemp(dir=output.parent, prefix=f".{output.name}.")
    try:
        with os.fdopen(fd, "w") as out:
            _write_graph(cluster, rounds, churn, out)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(partial, output.stat().st_mode if output.exists() else 0o666 & ~umask)
        os.replace(partial, output)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(partial)
        raise


def _write_graph(cluster: ClusterGraph, rounds: int, churn: float, out: TextIO) -> None:
    write_dimacs(cluster.graph, out)
    for _ in range(rounds):
        cluster.next_round(churn)
        write_dimacs_changes(cluster.graph.take_changes(), out, sink=cluster.sink)
    out.flush()
