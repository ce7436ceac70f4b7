"""Sweeps: a grid of simulations (policies x solvers x parameter values x seeds) run in parallel
on a Dask distributed cluster, gathered into one table, CSV, JSON and plot.

Firmament's evaluation is a set of curves, not a single run: algorithm runtime as the cluster
grows, placement latency as the load rises, one line per policy or solver, several seeds per
point. A `SweepSpec` describes such a grid around a base `SimulationJob`; `SweepSpec.jobs()`
expands it in a fixed order (policies, then solvers, then each swept parameter in the order
given, then seeds, the last varying fastest), each job labelled like
``quincy/cost-scaling/machines=100/seed=1``. `run_sweep` runs one Dask task per job on a local
cluster it starts (worker processes, one thread each) or on an existing scheduler, and returns a
`SweepResult` whose rows keep the spec's order whatever the completion order. Only
`summarize(result).as_dict()` travels back from a worker, never the `SimulationResult` (a
1,000-machine run holds hundreds of thousands of records). A job that fails is a row with its
error message; the others still run.

The command line (``firmament-py sweep``, in `firmament_py.cli`) is meant to be a thin layer over
`parse_sweep_arguments`, `run_sweep` and `SweepResult.write`, with these options:

* ``--policy NAME`` (repeatable; default trivial) and ``--solver NAME`` (repeatable; default
  cost-scaling): the first two axes of the grid;
* ``--param NAME=V1,V2,...`` (repeatable): one more axis per option, over any `SimulationJob`
  field but policy, solver, seed, label and solver_options (``machines``, ``load``,
  ``speedup``, ``duration_s``, ``accounting``, ``round_interval_s``, ``synthetic``, ``trace``,
  ``machine_fraction``, ``job_fraction``, ``resource_requests``, ``input_data``, ``strict``).
  Hyphens read as underscores, and `simulate`'s option names are accepted for their fields
  (``duration``, ``round-interval``, ``requests``). Values are converted by the field's
  type; ``none`` is None for an optional field (``machines=none``: the preset's own size);
* ``--seeds N`` (default 1): seeds ``--seed`` .. ``--seed + N - 1`` of the synthetic workload;
* ``--address HOST:PORT``: run on an existing Dask scheduler (its workers must have
  firmament-py installed and see any trace directory) instead of a local cluster;
* ``--workers N``: the local cluster's worker processes (default: the CPU count, at most one
  per job; not with ``--address``);
* the workload options of ``simulate``, which make the base job: ``--synthetic``, ``--trace``,
  ``--machines``, ``--load``, ``--speedup``, ``--duration``, ``--seed``, ``--accounting``,
  ``--round-interval``, ``--machine-fraction``, ``--job-fraction``, ``--strict``,
  ``--requests/--no-requests``;
* ``--out DIR`` (default ``sweep``): where sweep.csv, sweep.json and sweep.png go;
* ``--metric NAME`` (default ``algorithm_runtime_s_p50``): the plotted column, one of
  `METRICS` (check it with `check_metric` before running anything);
* ``--quiet``: no progress bar, no table.

`parse_sweep_arguments` raises ValueError (for a `click.UsageError`) naming an unknown field,
an unparsable value, an unknown policy or solver or a bad workload before anything runs.

A script that calls `run_sweep` without ``--address`` starts worker processes by spawning, which
re-imports the script: guard its top level with ``if __name__ == "__main__":``. The ``race``
solver starts two solver processes of its own per job: give it fewer workers than cores.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import itertools
import json
import math
import os
import time
import traceback
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.table import Table

from firmament_py.collector import settled
from firmament_py.sdk.discovery import unknown_policy
from firmament_py.sim.report import Percentiles, RunSummary, summarize
from firmament_py.sim.runner import SimulationJob, run_job
from firmament_py.sim.simulator import Accounting
from firmament_py.sim.wording import format_duration
from firmament_py.solvers import solver_names

if TYPE_CHECKING:
    from distributed import Client, Future
    from matplotlib.figure import Figure

__all__ = [
    "DEFAULT_METRIC",
    "METRICS",
    "SUMMARY_COLUMNS",
    "SWEEPABLE",
    "SWEEP_FILES",
    "SweepResult",
    "SweepRow",
    "SweepSpec",
    "check_metric",
    "parse_param",
    "parse_sweep_arguments",
    "run_and_summarize",
    "run_sweep",
]

PathLike = str | os.PathLike[str]
Progress = Callable[["SweepRow", int, int], None]
"""Called as each job finishes: its row, how many jobs are done, how many there are."""

SWEEP_FILES: tuple[str, ...] = ("sweep.csv", "sweep.json", "sweep.png")
"""What `SweepResult.write` writes, in order."""

# ---------------------------------------------------------------------- sweepable fields

_JOB_TYPES: dict[str, Any] = typing.get_type_hints(SimulationJob)

_OWN_OPTIONS = {
    "policy": "give policies with --policy (repeatable)",
    "solver": "give solvers with --solver (repeatable)",
    "seed": "give the number of seeds with --seeds",
    "label": "labels are made from the swept values",
    "solver_options": "solver options are not swept",
}
"""Job fields that are not parameters, and why."""


def _scalar_type(hint: Any) -> tuple[type, bool] | None:
    """(int, float, bool or str; whether None is allowed) for a field's type, or None when the
    field is not a scalar (a mapping)."""
    optional = False
    members: tuple[Any, ...] = (hint,)
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        members = typing.get_args(hint)
    scalars = []
    for member in members:
        if member is type(None):
            optional = True
        elif member in (int, float, bool, str):
            scalars.append(member)
        else:
            return None
    return (scalars[0], optional) if len(scalars) == 1 else None


SWEEPABLE: dict[str, tuple[type, bool]] = {
    name: kind
    for name, hint in _JOB_TYPES.items()
    if name not in _OWN_OPTIONS and (kind := _scalar_type(hint)) is not None
}
"""The `SimulationJob` fields a sweep can vary: name -> (value type, whether None is allowed)."""

_ALIASES = {
    "duration": "duration_s",
    "round_interval": "round_interval_s",
    "requests": "resource_requests",
}
"""`simulate`'s option names for the fields whose names differ (after hyphens -> underscores)."""

_CHOICES: dict[str, tuple[str, ...]] = {"accounting": tuple(mode.value for mode in Accounting)}

_WORKLOAD_FIELDS = ("synthetic", "trace")
"""Exactly one names the workload: sweeping one of them clears the other in every job."""

_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}
_NONE = {"none"}


def _field_name(name: str) -> str:
    """The `SimulationJob` field a parameter name means; ValueError if none."""
    key = name.strip().replace("-", "_")
    key = _ALIASES.get(key, key)
    if key in _OWN_OPTIONS:
        raise ValueError(f"{name!r} cannot be a --param: {_OWN_OPTIONS[key]}")
    if key not in SWEEPABLE:
        raise ValueError(
            f"--param: unknown parameter {name!r}; a sweep can vary: {', '.join(sorted(SWEEPABLE))}"
        )
    return key


def _coerce(name: str, value: object) -> Any:
    """`value` as a value of field `name`: a string is parsed by the field's type, anything
    else must already have that type (an int is accepted for a float). ValueError otherwise."""
    kind, optional = SWEEPABLE[name]
    if isinstance(value, str):
        text = value.strip()
        if optional and text.lower() in _NONE:
            return None
        try:
            if kind is bool:
                if text.lower() in _TRUE:
                    return True
                if text.lower() in _FALSE:
                    return False
                raise ValueError
            if kind is int:
                return int(text)
            if kind is float:
                number = float(text)
                if not math.isfinite(number):
                    raise ValueError
                return number
        except ValueError:
            expected = "true or false" if kind is bool else f"a finite {kind.__name__}"
            raise ValueError(
                f"parameter {name}: cannot read {value!r} as {expected}"
                + (" (or none)" if optional else "")
            ) from None
        if not text:
            raise ValueError(f"parameter {name}: empty value")
        if name in _CHOICES and text not in _CHOICES[name]:
            raise ValueError(
                f"parameter {name}: {text!r} is not one of {', '.join(_CHOICES[name])}"
            )
        return text
    if value is None and optional:
        return None
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if type(value) is not kind:
        raise ValueError(f"parameter {name}: {value!r} is not a {kind.__name__}")
    return value


def _show(value: object) -> str:
    """A value as labels and tables show it: 0.5, 1 (for 1.0), 100, true, none, small."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        short = f"{value:g}"
        return short if float(short) == value else repr(value)
    return str(value)


def parse_param(text: str) -> tuple[str, tuple[Any, ...]]:
    """``NAME=V1,V2,...`` -> (field name, converted values). ValueError names what is wrong."""
    name, equals, values = text.partition("=")
    if not equals or not name.strip():
        raise ValueError(f"--param {text!r}: expected NAME=V1,V2,... (say, load=0.5,1.0)")
    key = _field_name(name)
    parts = values.split(",")
    if not values.strip() or any(not part.strip() for part in parts):
        raise ValueError(f"--param {text!r}: empty value in the list")
    return key, tuple(_coerce(key, part) for part in parts)


# ---------------------------------------------------------------------- the grid


def _distinct(what: str, values: Sequence[Any]) -> tuple[Any, ...]:
    repeated = sorted({_show(v) for v in values if values.count(v) > 1})
    if repeated:
        raise ValueError(f"{what}: {', '.join(repeated)} given more than once")
    if not values:
        raise ValueError(f"{what}: no values")
    return tuple(values)


_WORKLOAD_KEYS = (
    "machines",
    "load",
    "speedup",
    "duration_s",
    "machine_fraction",
    "job_fraction",
    "strict",
    "resource_requests",
    "input_data",
)
"""Besides the preset or trace and the seed, the job fields its workload depends on."""


@dataclass(frozen=True)
class SweepSpec:
    """A grid of simulations around `base`: every combination of `policies`, `solvers`, the
    values of each parameter in `params` (a `SimulationJob` field name -> its values; see
    `SWEEPABLE`) and `seeds`. An empty `policies`, `solvers` or `seeds` means the base job's
    own. Values may be strings (parsed by the field's type) or values of that type; repeated
    values, unknown fields and values of the wrong type raise ValueError.

    The order of `jobs()` is the order of the grid's axes: policies outermost, then solvers,
    then the parameters in the order given, then seeds."""

    base: SimulationJob
    policies: Sequence[str] = ()
    solvers: Sequence[str] = ()
    params: Mapping[str, Sequence[Any]] = field(default_factory=dict)
    seeds: Sequence[int] = ()

    def __post_init__(self) -> None:
        base = self.base
        for axis in ("policies", "solvers"):
            if isinstance(getattr(self, axis), str):
                raise ValueError(f"{axis}: give a list of names, not one string")
        object.__setattr__(self, "policies", _distinct("policies", self.policies or [base.policy]))
        object.__setattr__(self, "solvers", _distinct("solvers", self.solvers or [base.solver]))
        seeds = list(self.seeds) or [base.seed]
        if any(isinstance(s, bool) or not isinstance(s, int) for s in seeds):
            raise ValueError(f"seeds must be ints, got {seeds!r}")
        object.__setattr__(self, "seeds", _distinct("seeds", seeds))
        params: dict[str, tuple[Any, ...]] = {}
        for name, values in self.params.items():
            key = _field_name(name)
            if key in params:
                raise ValueError(f"parameter {key} is swept twice")
            if isinstance(values, str):
                raise ValueError(f"parameter {key}: give a list of values, not the string")
            params[key] = _distinct(f"parameter {key}", [_coerce(key, value) for value in values])
        if all(name in params for name in _WORKLOAD_FIELDS):
            raise ValueError("sweep either synthetic presets or trace directories, not both")
        object.__setattr__(self, "params", params)

    @property
    def param_names(self) -> tuple[str, ...]:
        """The swept parameters, in the grid's order."""
        return tuple(self.params)

    def __len__(self) -> int:
        return math.prod(len(axis) for axis in self._axes())

    def _axes(self) -> list[Sequence[Any]]:
        return [self.policies, self.solvers, *self.params.values(), self.seeds]

    def label(self, policy: str, solver: str, values: Sequence[Any], seed: int) -> str:
        """A job's label: ``policy/solver/name=value/.../seed=N``."""
        parts = [policy, solver]
        parts += [f"{name}={_show(v)}" for name, v in zip(self.params, values, strict=True)]
        parts.append(f"seed={seed}")
        return "/".join(parts)

    def jobs(self) -> list[SimulationJob]:
        """Every job of the grid, labelled, in the grid's order. ValueError (prefixed by the
        job's label) for a combination `SimulationJob` refuses (say, a negative duration)."""
        cleared: dict[str, Any] = {}
        for name in _WORKLOAD_FIELDS:
            if name in self.params:
                cleared.update({other: None for other in _WORKLOAD_FIELDS if other != name})
        jobs = []
        for policy, solver, *values, seed in itertools.product(*self._axes()):
            label = self.label(policy, solver, values, seed)
            changes = dict(zip(self.params, values, strict=True))
            try:
                job = dataclasses.replace(
                    self.base,
                    **cleared,
                    **changes,
                    policy=policy,
                    solver=solver,
                    seed=seed,
                    label=label,
                )
            except ValueError as error:
                raise ValueError(f"{label}: {error}") from None
            jobs.append(job)
        return jobs

    def check(self) -> None:
        """Refuse, before anything runs, what would make jobs fail at once: a policy that is not
        installed here, an unknown solver, a workload that cannot be made (an unknown preset, a
        trace directory without tables). ValueError names the first problem.

        The check is local: a remote cluster's workers must have the same policies installed.
        """
        for policy in self.policies:
            if (problem := unknown_policy(policy)) is not None:
                raise ValueError(problem)
        known = solver_names()
        for solver in self.solvers:
            if solver not in known and ":" not in solver:
                raise ValueError(
                    f"unknown solver {solver!r}; known: {', '.join(known)}, "
                    "or 'package.module:ClassName'"
                )
        # A workload is made once per distinct setting (0.2 s for the google preset), with the
        # least seed: only a negative seed is refused, and seeds never change the rest.
        seen = set()
        first_seed = min(self.seeds)
        for job in self.jobs():
            workload = (job.synthetic, job.trace, *(getattr(job, n) for n in _WORKLOAD_KEYS))
            if workload in seen:
                continue
            seen.add(workload)
            try:
                dataclasses.replace(job, seed=first_seed).workload()
            except ValueError as error:
                raise ValueError(f"{job.label}: {error}") from None

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON types: the base job's fields and the grid's axes."""
        return {
            "base": _job_values(self.base),
            "policies": list(self.policies),
            "solvers": list(self.solvers),
            "params": {name: list(values) for name, values in self.params.items()},
            "seeds": list(self.seeds),
        }


def _job_values(job: SimulationJob) -> dict[str, Any]:
    values = dataclasses.asdict(job)
    values["solver_options"] = dict(job.solver_options)
    return values


def parse_sweep_arguments(
    policies: Sequence[str],
    solvers: Sequence[str],
    params: Sequence[str],
    seeds: int,
    base: SimulationJob,
    *,
    check: bool = True,
) -> SweepSpec:
    """The sweep the command line describes: ``--policy`` and ``--solver`` values (empty: the
    base job's), ``--param NAME=V1,V2`` strings, ``--seeds N`` (seeds ``base.seed`` to
    ``base.seed + N - 1``) around the job the workload options make. With `check` (the
    default) it also refuses unknown policies and solvers and bad workloads
    (`SweepSpec.check`). ValueError says what is wrong, for a usage error."""
    if isinstance(seeds, bool) or not isinstance(seeds, int) or seeds < 1:
        raise ValueError(f"--seeds must be a positive number of seeds, got {seeds!r}")
    grid: dict[str, tuple[Any, ...]] = {}
    for text in params:
        name, values = parse_param(text)
        if name in grid:
            raise ValueError(f"--param {name} is given twice: list all its values in one")
        grid[name] = values
    spec = SweepSpec(
        base=base,
        policies=list(policies),
        solvers=list(solvers),
        params=grid,
        seeds=list(range(base.seed, base.seed + seeds)),
    )
    if check:
        spec.check()
    else:
        spec.jobs()  # still refuse combinations SimulationJob refuses
    return spec


# ---------------------------------------------------------------------- one job, on a worker


def run_and_summarize(job: SimulationJob) -> dict[str, Any]:
    """Run `job` and return what a sweep keeps of it, as plain values: ``label``, ``job`` (its
    fields), ``summary`` (`RunSummary.as_dict()`, None if it failed) and ``error`` /
    ``traceback`` (None if it ran).

    This is the function the workers run. It reports a failure instead of raising it: the
    package's exceptions do not all survive pickling (`PolicyError` takes two arguments),
    a worker logs every raised exception as an error, and the traceback text is what a
    failed sweep needs."""
    values: dict[str, Any] = {"label": job.label, "job": _job_values(job)}
    try:
        with settled():  # the work is rounds: see `firmament_py.collector`
            summary = summarize(run_job(job))
    except Exception as error:
        return {
            **values,
            "summary": None,
            "error": _message(error),
            "traceback": traceback.format_exc(),
        }
    return {**values, "summary": summary.as_dict(), "error": None, "traceback": None}


def _message(error: BaseException) -> str:
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


# ---------------------------------------------------------------------- rows and columns


@dataclass(frozen=True)
class SweepRow:
    """One job of a sweep: where it sits in the grid (`policy`, `solver`, the swept `params`,
    `seed`) and its `summary`, or the `error` that stopped it (with the worker's `traceback`
    when the job itself raised, None when the cluster lost it)."""

    label: str
    policy: str
    solver: str
    params: Mapping[str, Any]
    seed: int
    summary: RunSummary | None
    error: str | None = None
    traceback: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def as_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "policy": self.policy,
            "solver": self.solver,
            "params": dict(self.params),
            "seed": self.seed,
            "error": self.error,
            "traceback": self.traceback,
            "summary": None if self.summary is None else self.summary.as_dict(),
        }

    def flat(self) -> dict[str, Any]:
        """The summary's numbers and names as flat columns (`SUMMARY_COLUMNS`; percentiles as
        ``placement_latency_s_p50``); all None for a failed job."""
        if self.summary is None:
            return dict.fromkeys(SUMMARY_COLUMNS)
        values = self.summary.as_dict()
        flat: dict[str, Any] = {}
        for name in _SUMMARY_FIELDS:
            if name in _PERCENTILE_FIELDS:
                for part in _PERCENTILE_PARTS:
                    flat[f"{name}_{part}"] = values[name][part]
            else:
                flat[name] = values[name]
        return flat

    def value(self, metric: str) -> float | None:
        """The number in column `metric` (one of `METRICS`), None if there is none."""
        number = self.flat()[check_metric(metric)]
        return None if number is None else float(number)


_PERCENTILE_PARTS = tuple(f.name for f in dataclasses.fields(Percentiles))
_SUMMARY_TYPES = typing.get_type_hints(RunSummary)
_PERCENTILE_FIELDS = {name for name, hint in _SUMMARY_TYPES.items() if hint is Percentiles}
_SUMMARY_FIELDS = tuple(
    f.name for f in dataclasses.fields(RunSummary) if f.name not in ("policy", "rejections")
)
"""The summary fields a sweep's CSV has: not `policy` (the job's policy column says it) nor
`rejections` (messages: sweep.json keeps them)."""

SUMMARY_COLUMNS = tuple(
    column
    for name in _SUMMARY_FIELDS
    for column in (
        [f"{name}_{part}" for part in _PERCENTILE_PARTS] if name in _PERCENTILE_FIELDS else [name]
    )
)
"""A summary's flat columns: `RunSummary`'s fields less `policy` and `rejections`, in its order,
each percentile field as ``_count``, ``_p50``, ``_p90``, ``_p99`` and ``_max`` columns."""

METRICS: tuple[str, ...] = tuple(
    column
    for column in SUMMARY_COLUMNS
    if column.rpartition("_")[0] in _PERCENTILE_FIELDS
    or _scalar_type(_SUMMARY_TYPES[column]) in ((int, False), (float, False), (float, True))
)
"""The numeric columns of a sweep, which `--metric` may plot."""

DEFAULT_METRIC = "algorithm_runtime_s_p50"
"""The median algorithm runtime per round, in seconds: Firmament's headline number."""


def check_metric(metric: str) -> str:
    """`metric` if it is one of `METRICS`; ValueError listing them otherwise."""
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}; one of: {', '.join(METRICS)}")
    return metric


def check_address(address: str) -> str:
    """`address` if it is a Dask scheduler address ([PROTOCOL://]HOST:PORT, a protocol Dask
    knows); ValueError naming what is wrong otherwise. Whether a scheduler answers there is
    found when the sweep connects."""
    from distributed.comm.addressing import parse_address, parse_host_port
    from distributed.comm.registry import get_backend

    try:
        scheme, location = parse_address(address)
        get_backend(scheme)
        if scheme in ("tcp", "tls"):
            parse_host_port(location)
    except ValueError as error:
        raise ValueError(
            f"--address {address!r} is not a Dask scheduler address: {error}"
        ) from None
    return address


# ---------------------------------------------------------------------- the result


@dataclass(frozen=True)
class SweepResult:
    """The rows of a sweep in the spec's order, with how it ran: `workers` (the cluster's
    worker count when the jobs were submitted), `address` (the scheduler's, None for the local
    cluster `run_sweep` started) and `wall_seconds` (cluster start-up included)."""

    spec: SweepSpec
    rows: tuple[SweepRow, ...]
    workers: int
    wall_seconds: float
    address: str | None = None

    @property
    def failed(self) -> tuple[SweepRow, ...]:
        return tuple(row for row in self.rows if not row.ok)

    def columns(self) -> list[str]:
        """sweep.csv's header: label, policy, solver, each swept parameter, seed, error, then
        the summary's columns (less any a swept parameter already holds, like accounting)."""
        head = ["label", "policy", "solver", *self.spec.param_names, "seed", "error"]
        return head + [column for column in SUMMARY_COLUMNS if column not in head]

    def records(self) -> list[dict[str, Any]]:
        """One flat dict per row, keyed by `columns()`."""
        columns = self.columns()
        records = []
        for row in self.rows:
            values = {
                **row.flat(),
                "label": row.label,
                "policy": row.policy,
                "solver": row.solver,
                **row.params,
                "seed": row.seed,
                "error": row.error,
            }
            records.append({column: values[column] for column in columns})
        return records

    def as_dict(self) -> dict[str, Any]:
        """sweep.json: the spec, how it ran, and every row with its full summary."""
        return {
            "spec": self.spec.as_dict(),
            "workers": self.workers,
            "address": self.address,
            "wall_seconds": self.wall_seconds,
            "rows": [row.as_dict() for row in self.rows],
        }

    def table(self, metric: str | None = None) -> Table:
        """A terminal table, one row per job: placements, placement latency and algorithm
        runtime percentiles, wall time, and `metric` if it is not among them; failed jobs show
        their error."""
        shown: list[tuple[str, Callable[[RunSummary], str]]] = [
            ("placed", lambda s: f"{s.tasks_placed:,}/{s.tasks_submitted:,}"),
            ("rounds", lambda s: f"{s.rounds:,}"),
            ("latency p50", lambda s: format_duration(s.placement_latency_s.p50)),
            ("latency p99", lambda s: format_duration(s.placement_latency_s.p99)),
            ("runtime p50", lambda s: format_duration(s.algorithm_runtime_s.p50)),
            ("runtime p99", lambda s: format_duration(s.algorithm_runtime_s.p99)),
            ("wall", lambda s: format_duration(s.wall_seconds)),
        ]
        builtin = {"tasks_placed", "tasks_submitted", "rounds", "wall_seconds"}
        builtin |= {f"{name}_{p}" for name in _PERCENTILE_FIELDS for p in ("p50", "p99")}
        extra = None if metric is None or check_metric(metric) in builtin else metric
        failures = bool(self.failed)
        table = Table(title=f"sweep: {len(self.rows)} jobs", title_justify="left")
        table.add_column("job", style="bold")
        for name, _ in shown:
            table.add_column(name, justify="right")
        if extra is not None:
            table.add_column(extra, justify="right")
        if failures:
            table.add_column("error", style="red", overflow="fold")
        for row in self.rows:
            if row.summary is None:
                cells = ["-"] * (len(shown) + (extra is not None))
            else:
                summary = row.summary
                cells = [show(summary) for _, show in shown]
                if extra is not None:
                    number = row.value(extra)
                    cells.append("-" if number is None else f"{number:,.6g}")
            table.add_row(row.label, *cells, *([row.error or ""] if failures else []))
        table.caption = (
            f"{len(self.rows)} jobs on {self.workers} workers in {self.wall_seconds:.1f} s"
            + (f"; {len(self.failed)} failed" if failures else "")
        )
        table.caption_justify = "left"
        return table

    def plot(self, metric: str = DEFAULT_METRIC) -> Figure:
        """`metric` against the first swept parameter (or per policy/solver when none is
        swept): one line per policy/solver (and values of any further parameters), at the mean
        over seeds, with bars from the least to the greatest seed. Failed jobs and missing
        values are left out. The y axis is logarithmic when the values span 100x or more."""
        return _plot(self, check_metric(metric))

    def write(self, directory: PathLike, metric: str = DEFAULT_METRIC) -> list[Path]:
        """Write `SWEEP_FILES` into `directory` (created if needed): sweep.csv (`records()`;
        an empty cell for None), sweep.json (`as_dict()`) and sweep.png (`plot(metric)`).
        Returns their paths."""
        check_metric(metric)
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        csv_path, json_path, png_path = (directory / name for name in SWEEP_FILES)
        with csv_path.open("w", newline="", encoding="utf-8") as file:
            writer = csv.DictWriter(file, fieldnames=self.columns())
            writer.writeheader()
            writer.writerows(self.records())
        json_path.write_text(json.dumps(self.as_dict(), indent=2) + "\n", encoding="utf-8")
        self.plot(metric).savefig(png_path)
        return [csv_path, json_path, png_path]


# ---------------------------------------------------------------------- the plot

_LOG_SPREAD = 100.0


def _in_seconds(metric: str) -> bool:
    """Whether a metric column holds seconds (the percentiles' counts do not)."""
    return (metric.endswith("_seconds") or "_s_" in metric) and not metric.endswith("_count")


def _plot(result: SweepResult, metric: str) -> Figure:
    from matplotlib.figure import Figure

    spec = result.spec
    names = spec.param_names
    x_name = names[0] if names else None
    others = names[1:]

    def series_of(row: SweepRow) -> str:
        parts = [f"{row.policy}/{row.solver}"]
        parts += [f"{name}={_show(row.params[name])}" for name in others]
        return " ".join(parts)

    series: dict[str, dict[Any, list[float]]] = {}
    for row in result.rows:
        points = series.setdefault(series_of(row), {})
        key = row.params[x_name] if x_name is not None else series_of(row)
        number = row.value(metric) if row.ok else None
        if number is not None and math.isfinite(number):
            points.setdefault(key, []).append(number)

    x_values: list[Any] = list(spec.params[x_name]) if x_name is not None else list(series)
    numeric = x_name is not None and all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in x_values
    )

    def position(value: Any) -> float:
        return float(value) if numeric else float(x_values.index(value))

    figure = Figure(figsize=(7.2, 4.6), layout="constrained")
    axes = figure.add_subplot()
    seeds = len(spec.seeds)
    axes.set_title(
        f"{metric} vs {x_name or 'policy / solver'}\n"
        + (
            f"mean over {seeds} seeds, bars from the least to the greatest"
            if seeds > 1
            else "one seed"
        )
        + f"; {len(result.rows)} jobs"
        + (f", {len(result.failed)} failed (not shown)" if result.failed else "")
    )
    axes.set_xlabel(x_name or "policy / solver")
    axes.set_ylabel(f"{metric} [s]" if _in_seconds(metric) else metric)
    axes.grid(True, which="major", alpha=0.3)
    drawn: list[float] = []
    for name, points in series.items():
        keys = [value for value in x_values if value in points]
        if not keys:
            continue
        samples = [points[key] for key in keys]
        means = [sum(s) / len(s) for s in samples]
        lows = [mean - min(s) for mean, s in zip(means, samples, strict=True)]
        highs = [max(s) - mean for mean, s in zip(means, samples, strict=True)]
        axes.errorbar(
            [position(key) for key in keys],
            means,
            yerr=[lows, highs],
            marker="o",
            markersize=4,
            capsize=3,
            label=name,
        )
        drawn += [value for s in samples for value in s]
    if not drawn:
        axes.text(
            0.5, 0.5, f"no values of {metric}", transform=axes.transAxes, ha="center", va="center"
        )
        return figure
    if not numeric:
        axes.set_xticks(range(len(x_values)), [_show(v) for v in x_values])
    low, high = min(drawn), max(drawn)
    if low > 0 and high / low >= _LOG_SPREAD:
        axes.set_yscale("log")
    axes.legend(fontsize="small")
    return figure


# ---------------------------------------------------------------------- running


def run_sweep(
    spec: SweepSpec,
    *,
    address: str | None = None,
    workers: int | None = None,
    threads_per_worker: int = 1,
    progress: Progress | None = None,
) -> SweepResult:
    """Run every job of `spec`, one Dask task each, and gather their summaries in the spec's
    order.

    Without `address`, a `distributed.LocalCluster` of `workers` processes (default: the CPU
    count, at most one per job) with `threads_per_worker` threads each is started and closed
    again; with it, the jobs go to that existing scheduler and only the client is closed
    (`workers` must then be None). `progress` is called as each job finishes, in completion
    order. A job that fails, or that the cluster loses, becomes a row with its error; an
    exception out of the loop (an interrupt, `progress` raising) cancels the jobs not yet done
    and closes the client and cluster on its way out."""
    if threads_per_worker < 1:
        raise ValueError(f"threads_per_worker must be positive, got {threads_per_worker}")
    if workers is not None:
        if address is not None:
            raise ValueError("workers applies to a local cluster, not to one at an address")
        if workers < 1:
            raise ValueError(f"workers must be positive, got {workers}")
    jobs = spec.jobs()
    started = time.perf_counter()
    from dask.system import CPU_COUNT
    from distributed import Client, LocalCluster

    with contextlib.ExitStack() as stack:
        if address is None:
            cluster = stack.enter_context(
                LocalCluster(  # type: ignore[no-untyped-call]
                    n_workers=workers or max(1, min(CPU_COUNT, len(jobs))),
                    threads_per_worker=threads_per_worker,
                    processes=True,
                    dashboard_address=":0",  # a free port: never clash with 8787
                )
            )
            client = stack.enter_context(Client(cluster))  # type: ignore[no-untyped-call]
        else:
            client = stack.enter_context(Client(address))  # type: ignore[no-untyped-call]
        count = len(client.nthreads())
        rows = _gather(client, jobs, spec, progress)
    return SweepResult(
        spec=spec,
        rows=tuple(rows),
        workers=count,
        wall_seconds=time.perf_counter() - started,
        address=address,
    )


def _gather(
    client: Client, jobs: list[SimulationJob], spec: SweepSpec, progress: Progress | None
) -> list[SweepRow]:
    from distributed import as_completed

    futures: list[Future[dict[str, Any]]] = client.map(run_and_summarize, jobs, pure=False)
    where = {future.key: index for index, future in enumerate(futures)}
    rows: list[SweepRow | None] = [None] * len(jobs)
    try:
        finished = as_completed(futures)  # type: ignore[no-untyped-call]
        for done, future in enumerate(finished, start=1):
            index = where[future.key]
            rows[index] = row = _row(spec, jobs[index], future)
            if progress is not None:
                progress(row, done, len(jobs))
    finally:
        pending = [f for f in futures if not f.done()]  # type: ignore[no-untyped-call]
        if pending:
            with contextlib.suppress(OSError):  # the scheduler may already be gone
                client.cancel(pending)  # type: ignore[no-untyped-call]
    return [row for row in rows if row is not None]


def _row(spec: SweepSpec, job: SimulationJob, future: Future[dict[str, Any]]) -> SweepRow:
    """The row of `job` from its finished (or failed, cancelled, lost) future."""
    row = SweepRow(
        label=job.label,
        policy=job.policy,
        solver=job.solver,
        params={name: getattr(job, name) for name in spec.param_names},
        seed=job.seed,
        summary=None,
    )
    try:
        answer = future.result()
    except Exception as error:  # the task never ran to its end: lost worker, cancelled
        return dataclasses.replace(row, error=_message(error))
    summary = answer["summary"]
    return dataclasses.replace(
        row,
        summary=None if summary is None else RunSummary.from_dict(summary),
        error=answer["error"],
        traceback=answer["traceback"],
    )
