"""`firmament-py nomora ...`: NoMora's command group.

* `fit MEASUREMENTS.csv`: fit the two-piece performance model (threshold, then a cubic) to
  measurements with scipy's `curve_fit`, print the threshold, the coefficients and R^2, and
  write a function file the policy loads (`NomoraPolicy(function_files=[...])`);
* `functions [FILE ...]`: the paper's four functions (and any function files given), with the
  cost each gives at a few latencies;
* `trace OUT.csv`: write a synthetic latency trace set (`firmament_py.nomora.latency`) in the
  format `TraceLatency` replays.
"""

from __future__ import annotations

from pathlib import Path

import click

from firmament_py.cli.params import FiniteFloat
from firmament_py.nomora.fitting import FitError, fit_performance, read_measurements
from firmament_py.nomora.performance import (
    BUILTIN_FUNCTIONS,
    FunctionFileError,
    PerformanceFunction,
    load_function,
    save_function,
)

__all__ = ["nomora"]

_SHOWN_LATENCIES_US = (10.0, 50.0, 100.0, 200.0, 500.0, 1000.0)


@click.group()
def nomora() -> None:
    """NoMora: application performance functions of network latency, and their traces."""


def _plain_name(ctx: click.Context, param: click.Parameter, name: str | None) -> str | None:
    """A name the function file is named after (NAME.json): a plain file name."""
    if name is not None and (not name or name.startswith(".") or Path(name).name != name):
        raise click.BadParameter(f"{name!r} is not a plain file name", ctx, param)
    return name


@nomora.command()
@click.argument("measurements", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--name",
    callback=_plain_name,
    help="The application's name (default: the file's stem).",
)
@click.option(
    "-o",
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Where to write the function file (default: NAME.json beside the measurements).",
)
@click.option(
    "--normalise",
    is_flag=True,
    help="Divide by the baseline (the mean performance at the smallest latency measured).",
)
@click.option(
    "--lower-is-better",
    is_flag=True,
    help="With --normalise: the metric is a time (baseline / value is the performance).",
)
@click.option(
    "--floor",
    type=FiniteFloat(),
    default=0.1,
    show_default=True,
    help="The performance the function never drops below.",
)
def fit(
    measurements: Path,
    name: str | None,
    out: Path | None,
    normalise: bool,
    lower_is_better: bool,
    floor: float,
) -> None:
    """Fit a performance function to MEASUREMENTS, a CSV with a header naming `latency_us`
    and `performance` (and optionally `std`): performance 1 below a threshold latency, a cubic
    beyond it, as NoMora's functions."""
    if lower_is_better and not normalise:
        raise click.UsageError("--lower-is-better needs --normalise")
    name = name or measurements.stem
    try:
        data = read_measurements(measurements, normalise=normalise, lower_is_better=lower_is_better)
        result = fit_performance(data, name=name, floor=floor)
    except (FitError, ValueError) as error:
        raise click.ClickException(str(error)) from None
    function = result.function
    target = out if out is not None else measurements.with_name(f"{name}.json")
    save_function(function, target)
    click.echo(f"application  {function.name} ({result.points} measurements)")
    click.echo(f"threshold    {function.threshold_us:g} µs")
    for power, c in enumerate(function.coefficients):
        click.echo(f"c{power}           {c:+.6g}" + ("" if power == 0 else f" per µs^{power}"))
    click.echo(f"R^2          {result.r_squared:.4f}")
    click.echo(f"p(x)         {function.describe()}")
    click.echo(f"wrote        {target}")


def _describe(function: PerformanceFunction) -> str:
    table = function.table()
    costs = ", ".join(f"{x:g} µs: {table.cost_of(x)}" for x in _SHOWN_LATENCIES_US)
    r2 = "" if function.r_squared is None else f", R^2 {function.r_squared:.3f}"
    return f"{function.name}{r2}\n  {function.describe()}\n  costs: {costs}"


@nomora.command()
@click.argument("files", nargs=-1, type=click.Path(dir_okay=False, path_type=Path))
def functions(files: tuple[Path, ...]) -> None:
    """List the paper's performance functions and the function FILES given, with the cost
    (100 / performance, two digits) each gives at a few latencies."""
    shown = list(BUILTIN_FUNCTIONS.values())
    try:
        shown += [load_function(path) for path in files]
    except FunctionFileError as error:
        raise click.ClickException(str(error)) from None
    for function in shown:
        click.echo(_describe(function))


@nomora.command()
@click.argument("out", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--duration", type=int, default=3600, show_default=True, help="Seconds.")
@click.option("--series", type=int, default=42, show_default=True, help="Series per tier.")
@click.option("--seed", type=click.IntRange(0), default=0, show_default=True)
def trace(out: Path, duration: int, series: int, seed: int) -> None:
    """Write a synthetic latency trace set to OUT (CSV: tier, series, time_s, latency_us), one
    value per second, shaped as NoMora's simulation describes its data."""
    from firmament_py.nomora.latency import TIERS, synthetic_traces, write_traces

    if duration < 1 or series < 1:
        raise click.UsageError("--duration and --series must be positive")
    traces = synthetic_traces(duration, seed=seed, series_per_tier=series)
    write_traces(traces, out)
    medians = ", ".join(f"{tier} {traces.median_us(tier):.0f} µs" for tier in TIERS)
    click.echo(f"wrote {out}: {series} series per tier, {duration} s; medians {medians}")
