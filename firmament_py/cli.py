"""The `firmament-py` command line: solve DIMACS flow problems, generate scheduling graphs,
list the installed scheduling policies, simulate a cluster under a policy, sweep a grid of
simulations in parallel, reproduce the papers' experiments, and serve the scheduling daemon
(`serve` and `keys` live in `firmament_py/service/cli.py`).

`solve` behaves like Firmament's solver process: it reads a stream of rounds (a whole problem,
then incremental changes, each ended by `c EOI`), solves each round from the previous solution,
and answers each with `s COST`, optionally the `f SRC DST FLOW` lines, and `c EOI`, flushing
after every round so a scheduler on the other end of a pipe can read it. Timing goes to `c`
comment lines; a summary table goes to stderr at the end.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO, TextIO, TypeVar

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from firmament_py import __version__
from firmament_py.cli_params import FiniteFloatRange
from firmament_py.collector import settled as settled_collector
from firmament_py.flow.dimacs import (
    DimacsError,
    DimacsReader,
    decode_lines,
    write_dimacs,
    write_dimacs_changes,
)
from firmament_py.flow.graph import FlowGraphError
from firmament_py.flow.graphgen import ClusterGraph, ClusterSpec
from firmament_py.nomora.cli import nomora
from firmament_py.sdk import PolicyError, available_policies, load_policy
from firmament_py.service.cli import keys, serve
from firmament_py.sim.experiments import SCALES, experiment_names, run_experiment
from firmament_py.sim.google_trace import BadRow, TraceError
from firmament_py.sim.report import (
    summarize,
    summary_table,
    write_report,
    write_rounds_csv,
    write_summary_json,
    write_tasks_csv,
)
from firmament_py.sim.runner import SimulationJob, run_job
from firmament_py.sim.simulator import Accounting
from firmament_py.sim.sweep import DEFAULT_METRIC, check_metric, parse_sweep_arguments, run_sweep
from firmament_py.solvers import SolverError, make_solver
from firmament_py.solvers.optimality import OptimalityError, verify
from firmament_py.workflows.cli import workflow
from firmament_py.zoe.cli import zoe

ALGORITHMS = ["relax", "relaxation", "cost-scaling", "ssp", "race"]

F = TypeVar("F", bound=Callable[..., Any])


class _Commands(click.Group):
    """The commands; a file or directory one of them cannot use (missing, not a directory, no
    permission, a read-only file system: an `OSError` that names a file) is an error message
    naming it and exit status 1, not a traceback; so is running out of memory (a count of
    10^10 somewhere)."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except OSError as error:
            if error.filename is None:
                raise
            reason = error.strerror or str(error)
            raise click.ClickException(f"cannot use {error.filename}: {reason}") from error
        except MemoryError:
            raise click.ClickException(
                "out of memory: the options or the input ask for more than this machine holds"
            ) from None


@click.group(cls=_Commands)
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


_WORKLOAD_OPTIONS = [
    click.option(
        "--synthetic",
        "preset_name",
        metavar="PRESET",
        help="A synthetic workload preset (google, google-1k, google-100, small; the default).",
    ),
    click.option(
        "--trace",
        type=click.Path(exists=True, file_okay=False),
        help="A Google 2011 trace directory (machine_events/, task_events/, ...).",
    ),
    click.option("--machines", type=click.IntRange(1), help="Rescale a synthetic preset."),
    click.option("--load", type=FiniteFloatRange(0, min_open=True), help="Synthetic load factor."),
    click.option(
        "--speedup", type=FiniteFloatRange(0, min_open=True), default=1.0, show_default=True
    ),
    click.option(
        "--duration",
        type=FiniteFloatRange(0, min_open=True),
        default=600.0,
        show_default=True,
        help="Simulated seconds.",
    ),
    click.option("--seed", type=click.IntRange(0), default=0, show_default=True),
    click.option(
        "--accounting",
        type=click.Choice([mode.value for mode in Accounting]),
        default=Accounting.ALGORITHM.value,
        show_default=True,
        help="What a round costs in simulated time (Firmament's solver runtime accounting).",
    ),
    click.option(
        "--round-interval",
        type=FiniteFloatRange(0),
        default=1.0,
        show_default=True,
        help="Seconds between rounds while tasks wait and nothing happens (0: none).",
    ),
    click.option("--machine-fraction", type=FiniteFloatRange(0, 1, min_open=True), default=1.0),
    click.option("--job-fraction", type=FiniteFloatRange(0, 1, min_open=True), default=1.0),
    click.option(
        "--strict", is_flag=True, help="Refuse a trace's first bad row instead of skipping it."
    ),
    click.option(
        "--requests/--no-requests",
        default=False,
        show_default=True,
        help="Keep the workload's CPU/RAM requests (for cpu-mem, network-aware); without them "
        "only slots matter, as in Firmament's simulator.",
    ),
]


def _workload_options(command: F) -> F:
    """The options that describe a simulation's workload, shared by `simulate` and `sweep`."""
    for option in reversed(_WORKLOAD_OPTIONS):
        command = option(command)
    return command


def _base_job(policy: str, solver: str, workload: dict[str, Any]) -> SimulationJob:
    """The `SimulationJob` the workload options describe; UsageError names what is wrong."""
    preset_name, trace = workload["preset_name"], workload["trace"]
    if preset_name is not None and trace is not None:
        raise click.UsageError("give either --synthetic or --trace, not both")
    try:
        job = SimulationJob(
            policy=policy,
            solver=solver,
            synthetic=None if trace is not None else (preset_name or "small"),
            trace=trace,
            machines=workload["machines"],
            load=workload["load"],
            speedup=workload["speedup"],
            duration_s=workload["duration"],
            seed=workload["seed"],
            accounting=workload["accounting"],
            round_interval_s=workload["round_interval"],
            machine_fraction=workload["machine_fraction"],
            job_fraction=workload["job_fraction"],
            strict=workload["strict"],
            resource_requests=workload["requests"],
        )
        job.workload()  # names a bad preset or option before anything runs
    except ValueError as error:
        raise click.UsageError(str(error)) from None
    return job


@main.command()
@click.option("--policy", default="trivial", show_default=True, help="An installed policy.")
@click.option(
    "--solver", default="cost-scaling", show_default=True, help="relaxation, cost-scaling, race..."
)
@_workload_options
@click.option(
    "--out",
    type=click.Path(file_okay=False),
    default="simulation",
    show_default=True,
    help="Where rounds.csv, tasks.csv, summary.json and the plots go.",
)
@click.option("--plots/--no-plots", default=True, show_default=True)
@click.option("--quiet", "-q", is_flag=True, help="No progress bar and no summary table.")
def simulate(policy: str, solver: str, out: str, plots: bool, quiet: bool, **workload: Any) -> None:
    """Replay a workload against the real scheduler in simulated time; write per-round and
    per-task CSVs, a JSON summary and plots to --out, and print a summary."""
    with settled_collector():  # the work is rounds: see `firmament_py.collector`
        _simulate(policy, solver, out, plots, quiet, workload)


def _simulate(
    policy: str, solver: str, out: str, plots: bool, quiet: bool, workload: dict[str, Any]
) -> None:
    job = _base_job(policy, solver, workload)
    duration = job.duration_s
    directory = Path(out)
    directory.mkdir(parents=True, exist_ok=True)  # a bad --out fails now, not after the run
    err = Console(stderr=True)
    bad_rows: list[BadRow] = []
    try:
        with Progress(
            TextColumn("[progress.description]{task.description}"),
            BarColumn(),
            TextColumn("{task.completed:,.0f} / {task.total:,.0f} simulated s"),
            TimeElapsedColumn(),
            console=err,
            disable=quiet,
        ) as bar:
            task = bar.add_task(f"{policy} / {solver}", total=duration)

            def progress(now: int) -> None:
                bar.update(task, completed=min(duration, now / 1_000_000))

            result = run_job(job, progress=progress, on_bad_row=bad_rows.append)
            bar.update(task, completed=duration)
    except (PolicyError, SolverError, TraceError) as error:
        raise click.ClickException(str(error)) from None
    if plots:
        paths = write_report(result, directory)
    else:
        paths = [
            write_rounds_csv(result, directory / "rounds.csv"),
            write_tasks_csv(result, directory / "tasks.csv"),
            write_summary_json(summarize(result), directory / "summary.json"),
        ]
    for row in bad_rows[:10]:
        # The row's own text may hold brackets (not markup), and its path must stay one line.
        err.print(
            f"[yellow]bad trace row skipped:[/yellow] {escape(str(row))}",
            highlight=False,
            soft_wrap=True,
        )
    if len(bad_rows) > 10:
        err.print(f"[yellow]... and {len(bad_rows) - 10} more bad rows[/yellow]")
    if not quiet:
        Console().print(summary_table(summarize(result)))
        err.print(f"wrote {len(paths)} files to {escape(str(directory))}/", soft_wrap=True)


@main.command()
@click.option("--policy", "policies", multiple=True, help="A policy to sweep (repeatable).")
@click.option("--solver", "solvers", multiple=True, help="A solver to sweep (repeatable).")
@click.option(
    "--param",
    "params",
    multiple=True,
    metavar="NAME=V1,V2",
    help="One more axis: a SimulationJob field and its values (repeatable), e.g. load=0.5,1.",
)
@click.option("--seeds", type=click.IntRange(1), default=1, show_default=True)
@_workload_options
@click.option("--address", help="An existing Dask scheduler (HOST:PORT) instead of a local one.")
@click.option("--workers", type=click.IntRange(1), help="Worker processes of the local cluster.")
@click.option(
    "--metric",
    default=DEFAULT_METRIC,
    show_default=True,
    help="The summary column to tabulate and plot.",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False),
    default="sweep",
    show_default=True,
    help="Where sweep.csv, sweep.json and sweep.png go.",
)
@click.option("--quiet", "-q", is_flag=True, help="No progress bar and no table.")
def sweep(
    policies: tuple[str, ...],
    solvers: tuple[str, ...],
    params: tuple[str, ...],
    seeds: int,
    address: str | None,
    workers: int | None,
    metric: str,
    out: str,
    quiet: bool,
    **workload: Any,
) -> None:
    """Run a grid of simulations (policies x solvers x parameters x seeds) in parallel on Dask
    distributed (a local cluster, or --address); write one row per run to --out and plot
    --metric."""
    base = _base_job(policies[0] if policies else "trivial", "cost-scaling", workload)
    try:
        check_metric(metric)
        spec = parse_sweep_arguments(policies, solvers, params, seeds, base)
    except ValueError as error:
        raise click.UsageError(str(error)) from None
    Path(out).mkdir(parents=True, exist_ok=True)  # a bad --out fails now, not after the runs
    err = Console(stderr=True)
    try:
        with Progress(
            TextColumn("sweep"),
            BarColumn(),
            TextColumn("{task.completed} / {task.total} runs"),
            TimeElapsedColumn(),
            console=err,
            disable=quiet,
        ) as bar:
            task = bar.add_task("sweep", total=len(spec))
            result = run_sweep(
                spec,
                address=address,
                workers=workers,
                progress=lambda row, done, total: bar.update(task, completed=done),
            )
    except (OSError, TimeoutError) as error:
        raise click.ClickException(f"cannot reach the Dask scheduler: {error}") from None
    paths = result.write(Path(out), metric)
    if not quiet:
        Console().print(result.table(metric))
        err.print(f"wrote {len(paths)} files to {escape(str(out))}/", soft_wrap=True)
    if result.failed:
        first = result.failed[0]
        where = "the table above" if not quiet else f"{out}/sweep.csv"
        raise click.ClickException(
            f"{len(result.failed)} of {len(spec)} runs failed (each one's error is in "
            f"{where}); the first, {first.label}: {first.error}"
        )


@main.command()
@click.argument("name", type=click.Choice(experiment_names()))
@click.option(
    "--scale",
    type=click.Choice(list(SCALES)),
    default="quick",
    show_default=True,
    help="test: seconds; quick: a few minutes; full: longer (see docs/experiments.md).",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False),
    help="Where the CSV, plots and summary go (default: experiments/NAME).",
)
@click.option("--quiet", "-q", is_flag=True, help="No progress bar and no table.")
def experiment(name: str, scale: str, out: str | None, quiet: bool) -> None:
    """Reproduce one of the papers' experiments: Firmament's figures (docs/experiments.md),
    NoMora's (docs/nomora.md), Zoe's (docs/zoe.md) and the network-task workflows'
    (docs/workflows.md). Measures, plots, and sets each key claim beside the paper's number."""
    err = Console(stderr=True)
    directory = Path(out) if out is not None else Path("experiments") / name
    directory.mkdir(parents=True, exist_ok=True)  # a bad --out fails now, not after the runs
    try:
        with Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.completed} / {task.total}"),
            TimeElapsedColumn(),
            console=err,
            disable=quiet,
        ) as bar:
            task = bar.add_task(name, total=None)

            def progress(done: int, total: int, message: str) -> None:
                bar.update(task, completed=done, total=total, description=f"{name}: {message}")

            with settled_collector():  # the work is rounds: see `firmament_py.collector`
                result = run_experiment(name, directory, scale=scale, progress=progress)
    except (PolicyError, SolverError) as error:
        raise click.ClickException(str(error)) from None
    if not quiet:
        Console().print(result.table)
        Console().print(result.medians_table())
        err.print(f"wrote the results to {escape(str(directory))}/", soft_wrap=True)


# Commands that live beside the code they drive.
main.add_command(serve)
main.add_command(keys)
main.add_command(workflow)
main.add_command(zoe)
main.add_command(nomora)


if __name__ == "__main__":
    main()
