"""The `firmament-py` command line: solve DIMACS flow problems, generate scheduling graphs,
and list the installed scheduling policies.

`solve` behaves like Firmament's solver process: it reads a stream of rounds (a whole problem,
then incremental changes, each ended by `c EOI`), solves each round from the previous solution,
and answers each with `s COST`, optionally the `f SRC DST FLOW` lines, and `c EOI`, flushing
after every round so a scheduler on the other end of a pipe can read it. Timing goes to `c`
comment lines; a summary table goes to stderr at the end.
"""

from __future__ import annotations

import statistics
import sys
import time
from typing import BinaryIO, TextIO

import click
from rich.console import Console
from rich.table import Table

from firmament_py import __version__
from firmament_py.flow.dimacs import (
    DimacsError,
    DimacsReader,
    decode_lines,
    write_dimacs,
    write_dimacs_changes,
)
from firmament_py.flow.graph import FlowGraphError
from firmament_py.graphgen import ClusterGraph, ClusterSpec
from firmament_py.sdk import PolicyError, available_policies, load_policy
from firmament_py.solvers import SolverError, make_solver
from firmament_py.solvers.optimality import OptimalityError, verify

ALGORITHMS = ["relax", "relaxation", "cost-scaling", "ssp", "race"]


@click.group()
@click.version_option(__version__, prog_name="firmament-py")
def main() -> None:
    """firmament-py: flow-based cluster scheduling."""


@main.command()
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
    reader = DimacsReader(decode_lines(source))
    rows: list[tuple[int, int, int, int, float, float, str]] = []
    current = 1  # the round being read or solved, for error messages
    try:
        read_start = time.perf_counter()
        for graph in reader.rounds():
            current = reader.rounds_read
            read_time = time.perf_counter() - read_start
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
            read_start = time.perf_counter()
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


@main.command()
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
    type=click.FloatRange(0.0, 1.0),
    default=0.5,
    show_default=True,
    help="Fraction of slots with a running task.",
)
@click.option(
    "--new-tasks", type=click.IntRange(0), default=1000, show_default=True, help="Waiting tasks."
)
@click.option("--slots", type=click.IntRange(1), default=12, show_default=True)
@click.option("--rack-size", type=click.IntRange(1), default=48, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--rounds",
    type=click.IntRange(0),
    default=0,
    show_default=True,
    help="Incremental rounds to append after the whole graph.",
)
@click.option(
    "--churn",
    type=click.FloatRange(0.0, 1.0),
    default=0.01,
    show_default=True,
    help="Per round, this fraction of tasks finishes and as many new tasks arrive.",
)
@click.option("--output", "-o", type=click.File("w"), default="-", help="Where to write.")
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
    output: TextIO,
) -> None:
    """Write a Firmament-shaped scheduling flow graph (and incremental rounds) as DIMACS."""
    spec = ClusterSpec(
        machines=machines,
        slots_per_machine=slots,
        machines_per_rack=rack_size,
        running=utilization,
        waiting=new_tasks,
        shape="quincy" if shape == "quincy" else "load-spreading",
        seed=seed,
    )
    cluster = ClusterGraph(spec)
    write_dimacs(cluster.graph, output)
    for _ in range(rounds):
        cluster.next_round(churn)
        write_dimacs_changes(cluster.graph.take_changes(), output, sink=cluster.sink)
    output.flush()


@main.command()
def policies() -> None:
    """List the installed scheduling policies (entry-point group firmament_py.policies)."""
    table = Table(title="installed policies")
    for column in ("name", "preemption", "hooks", "about"):
        table.add_column(column)
    for name in available_policies():
        try:
            manager = load_policy(name)
        except PolicyError as error:
            table.add_row(name, "", "", f"[red]cannot load: {error.problem}[/red]")
            continue
        plugin = manager.plugin_manager.get_plugin(name)
        module = sys.modules.get(getattr(plugin, "__module__", ""), plugin)
        docstring = (getattr(module, "__doc__", None) or "").strip()
        about = " ".join(docstring.split("\n\n")[0].split())
        hooks = str(len(manager.implemented_hooks))
        table.add_row(name, "yes" if manager.preemption_enabled else "no", hooks, about)
    Console().print(table)


if __name__ == "__main__":
    main()
