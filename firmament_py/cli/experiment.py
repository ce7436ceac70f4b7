"""`firmament-py experiment NAME...`: rerun papers' experiments, with a progress bar, and print
their claims beside the paper's numbers."""

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
@click.argument("names", nargs=-1, required=True, type=click.Choice(experiment_names()))
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
    help="Where the CSVs, plots and summaries go (default: experiments/NAME for one "
    "experiment, experiments/ for several).",
)
@click.option("--quiet", "-q", is_flag=True, help="No progress bar and no table.")
def experiment(names: tuple[str, ...], scale: str, out: str | None, quiet: bool) -> None:
    """Reproduce papers' experiments, one after the other: Firmament's figures
    (docs/experiments.md), NoMora's (docs/nomora.md), Zoe's (docs/zoe.md) and the network-task
    workflows' (docs/workflows.md). Measures, plots, and sets each key claim beside the paper's
    number; each run also records its commit, date and machine (NAME.json)."""
    names = tuple(dict.fromkeys(names))
    default = Path("experiments") / names[0] if len(names) == 1 else Path("experiments")
    directory = Path(out) if out is not None else default
    directory.mkdir(parents=True, exist_ok=True)  # a bad --out fails now, not after the runs
    for name in names:
        _run(name, scale, directory, quiet)


def _run(name: str, scale: str, directory: Path, quiet: bool) -> None:
    err = Console(stderr=True)
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
