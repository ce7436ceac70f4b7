"""NoMora's simulation results as an experiment (`firmament-py experiment nomora-google`): the
tech report's Figures 6-9 and the article's Table 2, run first in the paper's setting and then in
this project's, side by side, at a scale this machine runs in minutes.

Setting groups (`SettingGroup`; series are named `group:policy`):

* `paper`: the paper's setting as far as it states it (`PAPER_SETUP`): racks of 48 machines, most
  machine pairs across pods, a full cluster (90% of slots busy, our choice: the paper gives no
  utilisation, only that long-running jobs take many places), trace-sized jobs (the Google
  preset's sizes, scaled with the cluster), tier latencies with medians 50 / 200 / 500 µs (our
  choice: the paper names its traces, GCE / Azure / EC2, but gives no values; 500 µs across pods
  puts random placement near the paper's 47%), the paper's baselines (random with fixed arc
  costs, load-spreading) and NoMora with the papers' root and stay arcs
  (`NomoraSettings.paper_arcs`), preemption at 1, 10 and 100 cost units per second for omega and
  beta; plus `nomora-our-arcs` (this port's root arcs) and `random-task` (ours) for contrast.
* `ours`: the setup this project ran before (half the slots busy, medians 25 / 100 / 300 µs,
  this port's arcs) with the same baselines and Firmament's per-round `random`.

Metrics (x = 0 for single numbers; x = a percentile for distributions, which the plots draw as
CDFs):

* `mean_performance`: the area between the CDF of jobs' average application performance and
  y = 1, i.e. the mean over jobs (the paper's Figure 6 numbers), a job's performance being the
  mean over its tasks; `slowest_performance`: the same with each job's slowest task (a
  synchronous application goes at its slowest worker's pace); `task_performance` weighs tasks
  instead of jobs; `job_performance` / `job_slowest` at x = q: q-th percentiles over jobs;
* `algorithm_*_s`: the solver's runtime per round (Figure 7, Table 2);
* `placement_*_s`: task placement latency, submission to first placement (Figure 9);
* `migrated_*_pct`: tasks migrated per round, as a percentage of the running tasks (Figure 8).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from firmament_py.nomora.claims import GroupView, group_claims
from firmament_py.nomora.simulation import (
    POLICIES,
    NomoraRun,
    NomoraSetup,
    run_nomora,
    with_paper_arcs,
)
from firmament_py.sim.experiment import (
    Claim,
    Experiment,
    Measurement,
    Tracker,
    medians_of,
    new_figure,
    save_figure,
)
from firmament_py.sim.plots import legend_below, log_time_axis
from firmament_py.sim.wording import plural

__all__ = ["NOMORA_GOOGLE", "NomoraParams", "SettingGroup"]

PERCENTILES: tuple[int, ...] = (1, 5, *range(10, 100, 10), 95, 99)
PAPER_SERIES: tuple[str, ...] = (
    "random-arc",
    "load-spreading",
    "random-task",
    "nomora",
    "nomora-our-arcs",
    "nomora-110-115",
    "nomora-preempt",
    "nomora-preempt-beta0",
    "nomora-preempt-unit10",
    "nomora-preempt-beta0-unit10",
    "nomora-preempt-unit100",
    "nomora-preempt-beta0-unit100",
    "nomora-preempt-tie",
    "nomora-preempt-beta0-tie",
)
"""The paper setting's policies: its baselines, NoMora's variants, the omega/beta sweep, and
preemption with this port's tie-break on staying."""
OUR_SERIES: tuple[str, ...] = (
    "random-arc",
    "random",
    "random-task",
    "load-spreading",
    "nomora",
    "nomora-110-115",
    "nomora-preempt",
    "nomora-preempt-beta0",
)
"""This project's setup's policies (as before, and the paper's random baseline)."""
TEST_PAPER_SERIES = (
    "random-arc",
    "load-spreading",
    "nomora",
    "nomora-preempt",
    "nomora-preempt-beta0",
)
TEST_OUR_SERIES = ("random-arc", "load-spreading", "nomora")
"""The test scale's policies: each claim's series, in a few seconds."""
PAPER_MEDIANS_US = (50.0, 200.0, 500.0)
"""The paper setting's latency medians within a rack, a pod, across pods (assumed)."""


@dataclass(frozen=True)
class SettingGroup:
    """One setting: a `setup` (its seed replaced by each seed) under each policy of `series`,
    NoMora with the papers' arcs if `paper_arcs`."""

    name: str
    label: str
    setup: NomoraSetup
    series: tuple[str, ...]
    paper_arcs: bool = False


@dataclass(frozen=True)
class NomoraParams:
    """The setting groups, in order (the paper's first), each run with each of `seeds`."""

    groups: tuple[SettingGroup, ...]
    seeds: tuple[int, ...]

    def series(self) -> list[str]:
        return [f"{g.name}:{s}" for g in self.groups for s in g.series]


def _describe(p: NomoraParams) -> str:
    groups = "; ".join(f"{g.label}: {g.setup.describe()}" for g in p.groups)
    return f"{groups}; {plural(len(p.seeds), 'seed')}"


def _steps(p: NomoraParams) -> int:
    return len(p.seeds) * len(p.series())


def _measurements(run: NomoraRun, series: str, seed: int) -> list[Measurement]:
    out: list[Measurement] = []

    def add(metric: str, value: float, x: float = 0.0) -> None:
        if not math.isnan(value):
            out.append(Measurement(series, x, seed, metric, float(value)))

    add("mean_performance", 100 * run.mean_performance())
    add("slowest_performance", 100 * run.slowest_performance())
    add("task_performance", 100 * run.task_performance)
    add("jobs", len(run.job_performance))
    add("rounds", len(run.result.rounds))
    add("wall_s", run.result.wall_seconds)
    for metric, values in (
        ("job_performance", list(run.job_performance.values())),
        ("job_slowest", list(run.job_slowest.values())),
    ):
        if values:
            for q, value in zip(PERCENTILES, np.percentile(values, PERCENTILES), strict=True):
                add(metric, 100 * float(value), q)
    runtimes = run.algorithm_seconds()
    if runtimes:
        add("algorithm_p50_s", float(np.median(runtimes)))
        add("algorithm_p99_s", float(np.percentile(runtimes, 99)))
        add("algorithm_max_s", max(runtimes))
        for q, value in zip(PERCENTILES, np.percentile(runtimes, PERCENTILES), strict=True):
            add("algorithm_s", float(value), q)
    latencies = run.placement_latencies_s()
    if latencies:
        for q in (50, 90, 99):
            add(f"placement_p{q}_s", float(np.percentile(latencies, q)))
        for q, value in zip(PERCENTILES, np.percentile(latencies, PERCENTILES), strict=True):
            add("placement_s", float(value), q)
    migrated = run.migrated_percent()
    if migrated:
        add("migrated_mean_pct", float(np.mean(migrated)))
        add("migrated_p99_pct", float(np.percentile(migrated, 99)))
    return out


def _measure(p: NomoraParams, tracker: Tracker) -> list[Measurement]:
    out: list[Measurement] = []
    for seed in p.seeds:
        for group in p.groups:
            setup = dataclasses.replace(group.setup, seed=seed)
            for policy in group.series:
                variant = POLICIES[policy]
                if group.paper_arcs:
                    variant = with_paper_arcs(variant)
                series = f"{group.name}:{policy}"
                out += _measurements(run_nomora(setup, variant), series, seed)
                tracker.step(f"{series}, seed {seed}")
    return out


_WHY: dict[str, dict[str, str]] = {
    "paper": {
        "gain": "Paper setting (full cluster, 90% busy): the root takes any free slot and its "
        "rack is nearly full, so most of a job's tasks go wherever X sends them. With the "
        "papers' single cost-0 arc to X the solver puts a round's roots in the same rack, "
        "which their tasks then overflow; nomora-our-arcs (a random rack per root) shows "
        "what that costs. Latencies are synthetic, with medians we chose",
        "thresholds": "Both thresholds admit only the root's rack for Memcached here (the next "
        "tier costs over 150), so they differ only for STRADS and TensorFlow",
        "preemption": "With the papers' stay cost d - beta and beta = 0, a running task costs "
        "the same on any machine of equal d, so as latencies shift each second the solver may "
        "move it for nothing; the tie-break series (staying 1 unit cheaper) shows how much of "
        "the migration that is. A running root has no arc to X (section 5.2), only its stay "
        "arc. A larger unit makes beta (with beta = time run) outweigh the 10-unit cost step "
        "sooner",
        "beta": "beta only matters once a task has run long enough for beta to reach the cost "
        "step between machines: 10 units, i.e. 10 s at 1 unit/s, 1 s at 10, 0.1 s at 100",
        "migrations": "Latencies change every second. With beta = 0 and the papers' stay cost "
        "d - beta, a task on a machine that ties with a free one may move at no cost: compare "
        "the tie-break series (staying 1 unit cheaper) in the preemption row",
        "runtime": "Hundreds of machines, not 12,500: every round is solved in about a "
        "millisecond; wall time on a 2-core machine shared with other runs",
        "placement": "A non-root task waits one round for its root (rounds 0.1 s apart while "
        "tasks wait); the baselines place a job's tasks with its root",
    },
    "ours": {
        "gain": "Half the slots free: a job's tasks nearly always fit in its root's rack, so "
        "every policy that keeps a job together (Firmament's per-round random, "
        "load-spreading) scores near NoMora",
        "thresholds": "Performance 0.91-0.95 (cost 110) counts as good enough; with room near "
        "the root the difference is small",
        "preemption": "Without preemption NoMora already reaches most of what is reachable "
        "here, so migration has little left to correct",
        "beta": "At 1 unit/s, beta stays below the 10-unit cost step for the first 10 s of a "
        "task's run",
        "migrations": "Latencies change every second in both; most tasks already sit where "
        "nothing cheaper is free",
        "runtime": "Hundreds of machines, not 12,500: every round is solved in about a "
        "millisecond; wall time on a 2-core machine shared with other runs",
        "placement": "A non-root task waits one round for its root (rounds 0.1 s apart while "
        "tasks wait); the baselines place a job's tasks with its root",
    },
}
"""Why each group's numbers differ from the paper's, by claim."""


def _claims(p: NomoraParams, measurements: list[Measurement]) -> list[Claim]:
    out: list[Claim] = []
    for group in p.groups:
        out += group_claims(
            GroupView(group.name, group.label, measurements, _WHY.get(group.name, {}))
        )
    return out


def _cdf_plot(
    group: SettingGroup,
    measurements: list[Measurement],
    metrics: tuple[str, ...],
    title: str,
    x_label: str,
    path: Path,
    *,
    durations: bool = False,
) -> Path:
    """The CDF of each of `metrics`' percentiles (medians over seeds), a line per policy of
    `group` (the second metric dashed). With `durations` the x axis holds seconds: a log axis
    in the unit that reads best, `x_label` naming the quantity without a unit."""
    import matplotlib  # only where a plot is drawn: it is slow to import

    colours = matplotlib.colormaps["tab20"]  # twenty: the paper setting draws twelve policies
    figure, axes = new_figure(f"{title} ({group.label})", x_label, "CDF")
    values: list[float] = []
    for style, metric in zip(("-", "--"), metrics, strict=False):
        medians = medians_of(measurements, metric)
        for index, policy in enumerate(group.series):
            series = f"{group.name}:{policy}"
            xs = [medians[(series, float(q))] for q in PERCENTILES if (series, float(q)) in medians]
            if not xs:
                continue
            values += xs
            axes.plot(
                xs,
                [q / 100 for q in PERCENTILES[: len(xs)]],
                style,
                marker=".",
                label=POLICIES[policy].label if style == "-" else None,
                color=colours(index % 20),
            )
    if durations:
        log_time_axis(axes, "x", values, x_label)
    legend_below(figure, axes)
    return save_figure(figure, path)


def _plot(p: NomoraParams, measurements: list[Measurement], out: Path, name: str) -> list[Path]:
    paths: list[Path] = []
    for group in p.groups:
        stem = out / f"{name}-{group.name}"
        paths += [
            _cdf_plot(
                group,
                measurements,
                ("job_performance", "job_slowest"),
                "Figure 6: jobs' performance",
                "average application performance [%] (solid: mean over tasks; dashed: slowest)",
                Path(f"{stem}-performance.png"),
            ),
            _cdf_plot(
                group,
                measurements,
                ("algorithm_s",),
                "Figure 7: algorithm runtime per round",
                "algorithm runtime",
                Path(f"{stem}-runtime.png"),
                durations=True,
            ),
            _cdf_plot(
                group,
                measurements,
                ("placement_s",),
                "Figure 9: task placement latency",
                "placement latency",
                Path(f"{stem}-placement.png"),
                durations=True,
            ),
        ]
        figure, axes = new_figure(
            f"Figure 8: tasks migrated per round ({group.label})",
            "policy",
            "migrated tasks per round [%]",
        )
        means = medians_of(measurements, "migrated_mean_pct")
        tops = medians_of(measurements, "migrated_p99_pct")
        names = [s for s in group.series if s.startswith("nomora-preempt")]
        keys = [(f"{group.name}:{s}", 0.0) for s in names]
        axes.bar(range(len(names)), [means.get(k, 0.0) for k in keys], label="mean")
        axes.scatter(range(len(names)), [tops.get(k, 0.0) for k in keys], color="C3", label="p99")
        labels = [
            POLICIES[s].label.removeprefix("NoMora 105/110, ").replace(", ", "\n") for s in names
        ]
        axes.set_xticks(range(len(names)), labels, fontsize="small")
        legend_below(figure, axes)
        paths.append(save_figure(figure, Path(f"{stem}-migrations.png")))
    return paths


def _paper(machines: int, duration_s: int, series_per_tier: int | None = None) -> SettingGroup:
    """The paper setting (see the module docstring) at a size."""
    setup = NomoraSetup(
        machines=machines,
        duration_s=duration_s,
        racks_per_pod=1,
        slot_utilisation=0.9,
        tier_medians_us=PAPER_MEDIANS_US,
    )
    if series_per_tier is not None:
        setup = dataclasses.replace(setup, series_per_tier=series_per_tier)
    return SettingGroup("paper", "paper setting", setup, PAPER_SERIES, paper_arcs=True)


def _ours(
    machines: int, duration_s: int, racks_per_pod: int, series_per_tier: int | None = None
) -> SettingGroup:
    """This project's setup (see the module docstring) at a size."""
    setup = NomoraSetup(
        machines=machines,
        duration_s=duration_s,
        racks_per_pod=racks_per_pod,
    )
    if series_per_tier is not None:
        setup = dataclasses.replace(setup, series_per_tier=series_per_tier)
    return SettingGroup("ours", "ours", setup, OUR_SERIES)


NOMORA_GOOGLE = Experiment[NomoraParams](
    name="nomora-google",
    title="NoMora vs random and load-spreading on a Google-shaped workload (Table 2, Figs 6-9)",
    x_label="x (0: single value; else percentile)",
    summary_metrics=(
        "mean_performance",
        "slowest_performance",
        "algorithm_p50_s",
        "placement_p50_s",
        "migrated_mean_pct",
    ),
    scales={
        "test": NomoraParams(
            (
                dataclasses.replace(_paper(96, 8, series_per_tier=4), series=TEST_PAPER_SERIES),
                dataclasses.replace(_ours(96, 8, 1, series_per_tier=4), series=TEST_OUR_SERIES),
            ),
            seeds=(0,),
        ),
        "quick": NomoraParams((_paper(192, 30), _ours(192, 30, 2)), seeds=(0, 1)),
        "full": NomoraParams((_paper(192, 40), _ours(384, 40, 2)), seeds=(0, 1, 2, 3, 4)),
    },
    describe=_describe,
    steps=_steps,
    measure=_measure,
    claims=_claims,
    plot=_plot,
)
"""The experiment, by scale: test (seconds; the paper setting without the unit sweep), quick
(a few minutes), full (about ten)."""
