"""The `zoe` command group: simulate Zoe's application schedulers.

    firmament-py zoe simulate [--scheduler flexible|rigid|malleable] [--sort fifo|sjf|...]
        [--preemptive] [--apps N] [--load X] [--seed S] [--machines M] [--batch-only]
        [--workload FILE.json] [--placement pooled|flow] [--policy NAME] [--rules ours|paper]

prints a summary of turnaround and queuing percentiles, slowdown, queue sizes and allocation
(`--workload` reads applications from a JSON file instead of sampling them; a malformed one is
refused with the application and field named; `--rules paper` makes the flexible scheduler
follow Algorithms 1 and 2 as printed, see `firmament_py.zoe.flexible.FlexibleRules`).
`firmament-py zoe sorting` lists the sorting policies.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from firmament_py.cli.params import FiniteFloatRange
from firmament_py.sdk.discovery import unknown_policy
from firmament_py.zoe.application import ApplicationError, applications_from_json
from firmament_py.zoe.capacity import MAX_MACHINES, ClusterCapacity
from firmament_py.zoe.flexible import FlexibleRules
from firmament_py.zoe.simulator import SCHEDULER_NAMES, Placement, ZoeResult, ZoeSimulator
from firmament_py.zoe.sorting import SortingError, load_sorting, sorting_names
from firmament_py.zoe.workload import CATEGORIES, MAX_APPLICATIONS, WorkloadSpec, generate

__all__ = ["summary_table", "zoe"]


@click.group()
def zoe() -> None:
    """Zoe's flexible scheduling of analytic applications (core and elastic components)."""


def _seconds(value: float) -> str:
    if math.isnan(value):
        return "-"
    if value >= 3600:
        return f"{value / 3600:,.1f} h"
    return f"{value:,.1f} s"


def summary_table(result: ZoeResult) -> Table:
    """Percentiles of turnaround, queuing and slowdown (all applications and by category),
    queue sizes and allocation."""
    title = (
        f"zoe: {result.scheduler}{' (preemptive)' if result.preemptive else ''}, "
        f"sort {result.sorting}, placement {result.placement}"
    )
    if result.rules is not FlexibleRules.OURS:  # the default's title stays as it was
        title += f", rules {result.rules.value}"
    table = Table(title=title)
    table.add_column("applications", style="bold")
    for column in ("n", "p25", "p50", "p75", "p95", "mean"):
        table.add_column(column, justify="right")
    categories = [None, *(c for c in CATEGORIES if result.values("turnaround", c))]
    for metric in ("turnaround", "queuing", "slowdown"):
        for category in categories:
            summary = result.summary(category)
            cells = [summary[f"{metric}_{q}"] for q in ("p25", "p50", "p75", "p95", "mean")]
            shown = [f"{c:.2f}" if metric == "slowdown" else _seconds(c) for c in cells]
            table.add_row(
                f"{metric} ({category or 'all'})",
                str(len(result.values(metric, category))),
                *shown,
            )
    overall = result.summary()

    def number(key: str, spec: str) -> str:
        # Time-weighted over no time at all (a single arrival) is no number: say so.
        value = overall[key]
        return "n/a" if math.isnan(value) else format(value, spec)

    table.caption = (
        f"{int(overall['finished'])} finished, {int(overall['refused'])} refused; "
        f"waiting {number('pending_mean', '.1f')} (median {number('pending_p50', '.0f')}), "
        f"in service {number('running_mean', '.1f')}; cpu allocated {number('cpu_mean', '.0%')}, "
        f"ram {number('ram_mean', '.0%')} (time-weighted, first to last arrival)"
    )
    return table


@zoe.command()
@click.option("--scheduler", type=click.Choice(SCHEDULER_NAMES), default="flexible")
@click.option("--sort", "sorting", default="fifo", show_default=True, help="A sorting policy.")
@click.option("--preemptive", is_flag=True, help="Algorithm 2 (flexible scheduler only).")
@click.option("--apps", type=click.IntRange(1, MAX_APPLICATIONS), default=1000, show_default=True)
@click.option("--load", type=FiniteFloatRange(min=0, min_open=True), default=1.2, show_default=True)
@click.option("--seed", type=click.IntRange(0), default=0, show_default=True)
@click.option("--machines", type=click.IntRange(1, MAX_MACHINES), default=100, show_default=True)
@click.option("--cores", type=FiniteFloatRange(min=0, min_open=True), default=32.0)
@click.option("--ram-gib", type=FiniteFloatRange(min=0, min_open=True), default=128.0)
@click.option("--batch-only", is_flag=True, help="No interactive applications (section 4.2).")
@click.option(
    "--workload",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Applications from a JSON file instead of sampled ones.",
)
@click.option("--placement", type=click.Choice(["pooled", "flow"]), default="pooled")
@click.option("--policy", default="zoe", show_default=True, help="With --placement flow.")
@click.option(
    "--rules",
    type=click.Choice([rules.value for rules in FlexibleRules]),
    default=FlexibleRules.OURS.value,
    show_default=True,
    help="paper: Algorithms 1 and 2 as printed (flexible scheduler only).",
)
def simulate(
    scheduler: str,
    sorting: str,
    preemptive: bool,
    apps: int,
    load: float,
    seed: int,
    machines: int,
    cores: float,
    ram_gib: float,
    batch_only: bool,
    workload: Path | None,
    placement: str,
    policy: str,
    rules: str,
) -> None:
    """Simulate applications under one scheduler and sorting policy and print a summary."""
    if preemptive and scheduler != "flexible":
        raise click.BadParameter("only the flexible scheduler preempts", param_hint="--preemptive")
    flexible_rules = FlexibleRules(rules)
    if flexible_rules is not FlexibleRules.OURS and scheduler != "flexible":
        raise click.BadParameter(
            "the rules are the flexible scheduler's (Algorithms 1 and 2)", param_hint="--rules"
        )
    policy_given = (
        click.get_current_context().get_parameter_source("policy")
        is click.core.ParameterSource.COMMANDLINE
    )
    if policy_given and placement != "flow":
        raise click.BadParameter(
            "a policy places with --placement flow only", param_hint="--policy"
        )
    if placement == "flow" and (problem := unknown_policy(policy)) is not None:
        raise click.BadParameter(problem, param_hint="--policy")
    try:
        sort_policy = load_sorting(sorting)
    except SortingError as error:
        raise click.BadParameter(str(error), param_hint="--sort") from error
    capacity = ClusterCapacity.uniform(machines, cores, ram_gib)
    if workload is not None:
        try:
            applications = applications_from_json(json.loads(workload.read_text("utf-8")))
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise click.ClickException(f"{workload}: not JSON: {error}") from error
        except ApplicationError as error:
            raise click.ClickException(f"{workload}: {error}") from error
    else:
        spec = WorkloadSpec(
            applications=apps, load=load, interactive_fraction=0.0 if batch_only else 0.2
        )
        applications = generate(spec, capacity, seed)
    flow: Placement | None = None
    if placement == "flow":
        from firmament_py.zoe.placement import FlowPlacement

        flow = FlowPlacement(capacity, policy=policy)
    try:
        result = ZoeSimulator(
            applications,
            capacity,
            scheduler=scheduler,
            sorting=sort_policy,
            preemptive=preemptive,
            placement=flow,
            rules=flexible_rules,
        ).run()
    finally:
        if flow is not None:
            flow.close()  # type: ignore[attr-defined]
    console = Console()
    console.print(summary_table(result))
    for record in result.refused[:10]:
        console.print(f"refused: {escape(str(record.refused))}")


@zoe.command("sorting")
def list_sorting() -> None:
    """List the sorting policies (built-in and installed)."""
    for name in sorting_names():
        policy = load_sorting(name)
        click.echo(f"{name}{' (dynamic)' if policy.dynamic else ''}")
