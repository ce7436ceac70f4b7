"""`firmament-py workflow`: schedule a workflow file with one of the network-task algorithms,
or generate a workflow file as section VI of Giroire et al., INFOCOM'19 draws them.

    firmament-py workflow schedule FILE [--algorithm list|glist|glist-master|partition|all]
        [--machines N] [--network links|shared] [--capacity C] [--channels K] [--json OUT]
    firmament-py workflow generate simple-mapreduce|one-stage-mapreduce|random|mixed
        [--tasks N] [--rho R] [--density P] [--count K] [--seed S] [--machines N] -o FILE

`schedule` prints a summary (makespan, lower bound, ratio, network time, validation) per
algorithm; `--json` writes the schedules. The platform comes from the file's `platform` unless
`--machines` is given. Bad input exits with status 2 and a message naming the offending element.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from firmament_py.cli.params import FiniteFloat, FiniteFloatRange
from firmament_py.workflows import ALGORITHMS, schedule_workflow
from firmament_py.workflows.bounds import branch_bound, lower_bound, ratio, work_bound
from firmament_py.workflows.files import read_workflow, write_workflow
from firmament_py.workflows.generators import (
    WORKFLOW_TYPES,
    WorkflowShape,
    mixed_workflows,
)
from firmament_py.workflows.model import NetworkKind, Platform, WorkflowError

__all__ = ["workflow"]


@click.group()
def workflow() -> None:
    """Workflows with network tasks (INFOCOM'19): schedule a workflow file, generate one."""


def _platform(machines: int, network: str, capacity: float, channels: int) -> Platform:
    if network == NetworkKind.LINKS:
        return Platform.links(machines, capacity=capacity)
    return Platform.shared(machines, channels=channels, capacity=capacity)


def _check_writable(path: Path) -> None:
    """BadParameter unless `path` can be written: its folder exists and takes new files, or it
    is a file there that can be overwritten."""
    folder = path.parent
    if not folder.is_dir():
        problem = "its folder does not exist"
    elif path.exists() and not os.access(path, os.W_OK):
        problem = "it cannot be overwritten"
    elif not path.exists() and not os.access(folder, os.W_OK | os.X_OK):
        problem = "its folder takes no new files"
    else:
        return
    raise click.BadParameter(f"cannot write {path}: {problem}", param_hint="--json")


@workflow.command()
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--algorithm",
    "-a",
    "algorithms",
    type=click.Choice([*ALGORITHMS, "all"]),
    multiple=True,
    default=("all",),
    show_default=True,
    help="Algorithm to run (repeatable); 'all' runs the four.",
)
@click.option("--machines", "-m", type=click.IntRange(min=1), help="CPU machines (speed 1).")
@click.option(
    "--network",
    type=click.Choice([kind.value for kind in NetworkKind]),
    default="links",
    show_default=True,
    help="With --machines: an upload and a download link per machine, or shared channels.",
)
@click.option(
    "--capacity", type=FiniteFloat(), default=1.0, show_default=True, help="Link capacity."
)
@click.option("--channels", type=click.IntRange(min=0), default=1, show_default=True)
@click.option(
    "--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), help="Write schedules."
)
def schedule(
    file: Path,
    algorithms: tuple[str, ...],
    machines: int | None,
    network: str,
    capacity: float,
    channels: int,
    json_out: Path | None,
) -> None:
    """Schedule the workflow FILE (JSON, or YAML with .yaml/.yml) and print a summary."""
    console = Console()
    if json_out is not None:
        _check_writable(json_out)  # now, not after the scheduling
    try:
        work, platform = read_workflow(file)
        if machines is not None:
            platform = _platform(machines, network, capacity, channels)
        if platform is None:
            raise WorkflowError(f"{file}: the file has no platform: give --machines")
        names = list(ALGORITHMS) if "all" in algorithms else list(dict.fromkeys(algorithms))
        schedules = [schedule_workflow(work, platform, name) for name in names]
    except WorkflowError as error:
        raise click.UsageError(str(error)) from None
    table = Table(title=f"{file.name}: {work.describe()}\non {platform.describe()}")
    table.add_column("algorithm", style="bold", no_wrap=True)
    for column in ("makespan", "lower bound", "ratio", "network tasks", "network time"):
        table.add_column(column, justify="right")
    table.add_column("validation")
    bound = lower_bound(work, platform)
    for result in schedules:
        table.add_row(
            result.algorithm,
            f"{result.makespan:,.4g}",
            f"{bound:,.4g}",
            f"{ratio(result):.3f}",
            str(len(result.transfers)),
            f"{result.network_time:,.4g}",
            "[green]OK[/green]",  # schedule_workflow validated it
        )
    table.caption = (
        f"lower bound = max(work / machines {work_bound(work, platform):,.4g}, "
        f"longest branch {branch_bound(work, platform):,.4g})"
    )
    console.print(table)
    if json_out is not None:
        document: dict[str, Any] = {
            "workflow": str(file),
            "platform": platform.to_dict(),
            "lower_bound": bound,
            "schedules": [s.to_dict() | {"ratio": ratio(s)} for s in schedules],
        }
        json_out.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
        console.print(f"schedules written to {escape(str(json_out))}", soft_wrap=True)


@workflow.command()
@click.argument("kind", type=click.Choice([*WORKFLOW_TYPES, "mixed"]))
@click.option(
    "--tasks",
    type=click.IntRange(min=3),
    default=40,
    show_default=True,
    help="Most tasks per workflow (counts are drawn heavy-tailed up to this).",
)
@click.option(
    "--rho",
    type=FiniteFloatRange(min=0),
    default=0.5,
    show_default=True,
    help="Network factor: mean network over mean CPU task duration.",
)
@click.option(
    "--density",
    type=FiniteFloatRange(0, 1),
    default=0.2,
    show_default=True,
    help="Edge density p (1-stage MapReduce and random workflows).",
)
@click.option(
    "--count",
    type=click.IntRange(min=1),
    default=20,
    show_default=True,
    help="Workflows in a mixed set.",
)
@click.option("--seed", type=click.IntRange(0), default=0, show_default=True)
@click.option(
    "--machines",
    "-m",
    type=click.IntRange(min=1),
    help="Also write a platform of N machines with an upload and a download link each.",
)
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="File to write (JSON, or YAML with .yaml/.yml).",
)
def generate(
    kind: str,
    tasks: int,
    rho: float,
    density: float,
    count: int,
    seed: int,
    machines: int | None,
    output: Path,
) -> None:
    """Write a workflow of type KIND drawn as the paper's section VI does."""
    rng = random.Random(seed)
    shape = WorkflowShape(tasks, rho=rho, density=density)
    if kind == "mixed":
        work = mixed_workflows(rng, count, shape)
    else:
        work = WORKFLOW_TYPES[kind](rng, shape, "")
    platform = Platform.links(machines) if machines is not None else None
    write_workflow(output, work, platform, name=f"{kind}-seed{seed}")
    Console().print(f"{escape(str(output))}: {kind}, {work.describe()}", soft_wrap=True)
