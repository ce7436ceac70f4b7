"""`firmament-py simulate` and `sweep`: the real scheduler replaying a workload in simulated
time, once with a progress bar and a summary, or over a grid of runs on Dask.

Everything a run needs is checked before anything is written or shown: a bad policy, solver,
preset or output directory is one line naming it, not a traceback or an empty directory left
behind. Loading the solver's numba kernels is its own step, said on screen and counted, because
on a fresh install it is compiling them, which takes longer than a short run.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from firmament_py.cli.params import FiniteFloatRange
from firmament_py.collector import settled as settled_collector
from firmament_py.dashboard.address import DashboardError, parse_address
from firmament_py.dashboard.board import Board
from firmament_py.dashboard.page import report_html
from firmament_py.dashboard.server import DashboardServer
from firmament_py.dashboard.sim_feed import SimulationFeed
from firmament_py.sdk import PolicyError, load_policy
from firmament_py.sim.google_trace import BadRow, TraceError
from firmament_py.sim.report import (
    summarize,
    summary_table,
    write_report,
    write_rounds_csv,
    write_summary_json,
    write_tasks_csv,
)
from firmament_py.sim.runner import TRACE_WINDOW_OPENS_S, SimulationJob, run_job
from firmament_py.sim.simulator import Accounting
from firmament_py.sim.sweep import (
    DEFAULT_METRIC,
    check_address,
    check_metric,
    parse_sweep_arguments,
    run_sweep,
)
from firmament_py.solvers import SolverError, make_solver
from firmament_py.solvers.registry import solver_factory
from firmament_py.solvers.warmup import warm_up

__all__ = ["DEFAULT_POLICY", "simulate", "sweep"]

DEFAULT_POLICY = "load-spreading"
"""The policy `simulate` and `sweep` use when none is named. Firmament's own default is the
trivial cost model (every machine alike); load-spreading prices a machine by its tasks, so a
first run shows the scheduler weighing machines against each other."""

F = TypeVar("F", bound=Callable[..., Any])


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
        "--speedup",
        type=FiniteFloatRange(0, min_open=True),
        default=1.0,
        show_default=True,
        help="Divide batch runtimes and inter-arrival gaps by this (Firmament's Figure 18): "
        "more batch tasks arrive and finish; service jobs still run long.",
    ),
    click.option(
        "--duration",
        type=FiniteFloatRange(0, min_open=True),
        default=600.0,
        show_default=True,
        help="Simulated seconds.",
    ),
    click.option(
        "--seed",
        type=click.IntRange(0),
        default=0,
        show_default=True,
        help="Seed of the synthetic workload's draws: a seed and the options give one run.",
    ),
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
    click.option(
        "--machine-fraction",
        type=FiniteFloatRange(0, 1, min_open=True),
        default=1.0,
        show_default=True,
        help="Keep this fraction of a trace's machines (chosen by a hash of the machine id).",
    ),
    click.option(
        "--job-fraction",
        type=FiniteFloatRange(0, 1, min_open=True),
        default=1.0,
        show_default=True,
        help="Keep this fraction of a trace's jobs (chosen by a hash of the job id).",
    ),
    click.option(
        "--trace-start",
        type=FiniteFloatRange(0),
        default=TRACE_WINDOW_OPENS_S,
        show_default=True,
        help="Trace seconds to replay a trace from (simulated time 0): the 2011 trace's window "
        "opens at 600 s, before it is only the cluster as it was.",
    ),
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
    click.option(
        "--input-data/--no-input-data",
        default=False,
        show_default=True,
        help="Give batch tasks input blocks on the machines, sized by runtime as in Firmament's "
        "simulator, for quincy's locality.",
    ),
]


def _workload_options(command: F) -> F:
    """The options that describe a simulation's workload, shared by `simulate` and `sweep`."""
    for option in reversed(_WORKLOAD_OPTIONS):
        command = option(command)
    return command


def _base_job(policy: str, solver: str, workload: dict[str, Any]) -> SimulationJob:
    """The `SimulationJob` the options describe; UsageError names what is wrong, a policy
    that is not installed or does not load, a solver with no such name, a bad preset."""
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
            trace_start_s=workload["trace_start"],
            strict=workload["strict"],
            resource_requests=workload["requests"],
            input_data=workload["input_data"],
        )
        job.workload()  # names a bad preset or option before anything runs
        solver_factory(solver)
    except ValueError as error:
        raise click.UsageError(str(error)) from None
    try:
        load_policy(policy)
    except PolicyError as error:
        raise click.UsageError(str(error)) from None
    return job


@click.command(short_help="Simulate a cluster under the real scheduler: CSVs, plots and a summary.")
@click.option(
    "--policy",
    default=DEFAULT_POLICY,
    show_default=True,
    help="An installed policy (`firmament-py policies` lists them).",
)
@click.option(
    "--solver",
    default="cost-scaling",
    show_default=True,
    help="cost-scaling (incremental), relaxation, ssp, race (relaxation against cost scaling "
    "in two processes), or the paper's relaxation-pure and firmament-race (docs/solvers.md).",
)
@_workload_options
@click.option(
    "--out",
    type=click.Path(file_okay=False),
    default="simulation",
    show_default=True,
    help="Where rounds.csv, tasks.csv, summary.json, the plots and report.html go.",
)
@click.option(
    "--plots/--no-plots",
    default=True,
    show_default=True,
    help="Also draw the plots and report.html (the dashboard's views of the finished run).",
)
@click.option(
    "--dashboard",
    metavar="HOST:PORT",
    help="Serve a live page of the run on this loopback address (port 0: any free port).",
)
@click.option(
    "--hold/--no-hold",
    default=True,
    show_default=True,
    help="With --dashboard: keep serving the page after the run, until Ctrl-C (or SIGTERM).",
)
@click.option("--quiet", "-q", is_flag=True, help="No progress bar and no summary table.")
def simulate(
    policy: str,
    solver: str,
    out: str,
    plots: bool,
    dashboard: str | None,
    hold: bool,
    quiet: bool,
    **workload: Any,
) -> None:
    """Replay a workload against the real scheduler in simulated time; write per-round and
    per-task CSVs, a JSON summary, plots and report.html to --out, and print a summary."""
    with settled_collector():  # the work is rounds: see `firmament_py.collector`
        _simulate(policy, solver, out, plots, quiet, workload, _Watch(dashboard, hold))


class _Watch:
    """The run's board, when something shows it: the live page (`--dashboard`), report.html."""

    def __init__(self, address: str | None, hold: bool) -> None:
        self.address, self.hold = address, hold
        if address is not None:
            try:
                parse_address(address)  # before the run, not after it
            except DashboardError as error:
                raise click.BadParameter(str(error), param_hint="--dashboard") from None
        self.server: DashboardServer | None = None

    def start(self, job: SimulationJob, plots: bool, err: Console) -> SimulationFeed | None:
        if self.address is None and not plots:
            return None
        board = Board(
            f"simulation of {job.describe()}: policy {job.policy}, solver {job.solver}",
            seq_label="events",
        )
        if self.address is not None:
            try:
                self.server = DashboardServer(board, self.address).start()
            except DashboardError as error:
                raise click.ClickException(str(error)) from None
            err.print(f"dashboard on [bold]{self.server.url}[/]", soft_wrap=True)
        return SimulationFeed(board)

    def finish(self, err: Console) -> None:
        if self.server is None:
            return
        if self.hold:
            err.print("the run is over; the dashboard serves on until Ctrl-C", soft_wrap=True)
            _wait_for_a_stop()
        self.server.stop()


def _wait_for_a_stop() -> None:
    """Until SIGINT (Ctrl-C) or SIGTERM, whatever this process inherited for them (a shell's
    background job starts with SIGINT ignored)."""
    stop = threading.Event()
    signals = (signal.SIGINT, signal.SIGTERM)
    previous = {number: signal.signal(number, lambda *_: stop.set()) for number in signals}
    try:
        while not stop.wait(0.5):
            pass
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def _simulate(
    policy: str,
    solver: str,
    out: str,
    plots: bool,
    quiet: bool,
    workload: dict[str, Any],
    watch: _Watch,
) -> None:
    job = _base_job(policy, solver, workload)
    duration = job.duration_s
    directory = Path(out)
    directory.mkdir(parents=True, exist_ok=True)  # a bad --out fails now, not after the run
    err = Console(stderr=True)
    bad_rows: list[BadRow] = []
    feed = watch.start(job, plots, err)
    try:
        kernels_s = _load_kernels(job, err, quiet)
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

            result = run_job(
                job,
                progress=progress,
                on_bad_row=bad_rows.append,
                warmed_up=True,
                observer=feed,
            )
            bar.update(task, completed=duration)
    except (PolicyError, SolverError, TraceError) as error:
        watch.finish(err)
        raise click.ClickException(str(error)) from None
    if plots:
        paths = write_report(result, directory)
        if feed is not None:
            page = report_html(feed.board.frame(), title=f"firmament-py: {job.describe()}")
            report = directory / "report.html"
            report.write_text(page, encoding="utf-8")
            paths.append(report)
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
        err.print(
            f"in all {kernels_s + result.wall_seconds:.1f} s of wall time: {kernels_s:.1f} s "
            f"loading the compiled kernels, {result.wall_seconds:.1f} s simulating (the table's "
            "wall time)",
            soft_wrap=True,
        )
        err.print(f"wrote {len(paths)} files to {escape(str(directory))}/", soft_wrap=True)
    watch.finish(err)


def _load_kernels(job: SimulationJob, err: Console, quiet: bool) -> float:
    """Load the solver's numba kernels, saying so while it happens, and return the seconds it
    took. numba compiles them on the first run after an install (about a minute on two cores)
    and loads them from its cache after that (about a second). A race's kernels load in its
    worker processes: a race is started here, waited for and closed, so that the run's own
    workers find them cached."""
    started = time.perf_counter()
    status = err.status("loading compiled kernels (a first run compiles them: a minute, once)")
    with contextlib.nullcontext() if quiet else status:
        warm_up(job.solver, job.solver_options)
        solver = make_solver(job.solver, **job.solver_options)
        try:
            solver.wait_ready(timeout=600.0)
        finally:
            solver.close()
    seconds = time.perf_counter() - started
    if seconds > 5 and not quiet:
        err.print(
            f"loaded the kernels in {seconds:.0f} s (numba compiles them when its cache is "
            "cold; later runs load them from it)",
            soft_wrap=True,
        )
    return seconds


@click.command(short_help="Run a grid of simulations in parallel on Dask; plot a metric.")
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
    base = _base_job(policies[0] if policies else DEFAULT_POLICY, "cost-scaling", workload)
    try:
        check_metric(metric)
        if address is not None:
            check_address(address)
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
