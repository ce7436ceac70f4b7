"""`firmament-py experiment NAME`: rerun one of the papers' experiments, with a progress bar, and
print its claims beside the paper's numbers."""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from firmament_py.collector import settled as settled_collector
from firmament_py.sdk import PolicyError
from firmament_py.sim.experiments import SCALES, experiment_names, run_experiment
from firmament_py.solvers import SolverError

__all__ = ["experiment"]


@click.command(
    short_help="Rerun one of the papers' experiments; set its claims beside the paper's."
)
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
