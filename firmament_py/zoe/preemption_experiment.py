"""Zoe's preemption experiment (`firmament-py experiment zoe-preemption`, Figure 9 of the
paper): the whole workload, with interactive applications (priority 1), under SRPT; the flexible
scheduler with and without preemption (Algorithm 2 vs 1); queuing and turnaround by application
category. The pooled placement (our choice; the paper does not say how its simulator places
components), one simulation per point; medians over seeds in the tables, each claim judged on a
per-seed quantity with its 95% confidence interval (as `firmament_py.zoe.experiment` explains)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

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
from firmament_py.sim.verdicts import Interval, Outcome, Verdict, gain_interval
from firmament_py.sim.wording import plural
from firmament_py.zoe.flexible import FlexibleRules
from firmament_py.zoe.measures import CORES, MACHINES, RAM_GIB, run_measurements, zoe_capacity
from firmament_py.zoe.seeds import TEN_SEEDS, interval_text, per_seed_interval
from firmament_py.zoe.simulator import ZoeSimulator
from firmament_py.zoe.workload import (
    BATCH_ELASTIC,
    BATCH_RIGID,
    CATEGORIES,
    INTERACTIVE,
    WorkloadSpec,
    generate,
)

__all__ = ["BOTH_RULES_DEPARTURES", "ZOE_PREEMPTION", "PreemptionParams", "rules_described"]

BOTH_RULES_DEPARTURES = (
    "under both rules, Algorithm 1's line 8 read per dimension and application sizes capped "
    "(docs/zoe.md, 'What differs from the paper')"
)
"""The departures from the paper that `FlexibleRules.PAPER` keeps too, named in every Zoe
claim's last column (docs/zoe.md says what each is, how often it binds and why it is kept)."""


@dataclass(frozen=True)
class PreemptionParams:
    """`applications` applications (20% interactive) per run at `load`, for each of `seeds`,
    under the flexible scheduler and `sorting`, with and without preemption, reading Algorithms
    1 and 2 by `rules`."""

    applications: int
    load: float
    seeds: tuple[int, ...]
    sorting: str = "srpt"
    rules: FlexibleRules = FlexibleRules.OURS


def rules_described(rules: FlexibleRules) -> str:
    """What a scale's description adds for `rules`: nothing for the default, `OURS`, so that
    the descriptions of the committed runs stay as they were."""
    if FlexibleRules(rules) is FlexibleRules.OURS:
        return ""
    return "; Algorithms 1 and 2 as printed (rules paper)"


_PREEMPTION_SERIES = ("non-preemptive", "preemptive")


def _preemption_describe(p: PreemptionParams) -> str:
    return (
        f"{MACHINES} machines of {CORES:g} cores and {RAM_GIB:g} GiB; {p.applications:,} "
        f"applications per run (80% batch, 20% interactive with priority 1), offered load "
        f"{p.load:g}; flexible scheduler, {p.sorting}; {plural(len(p.seeds), 'seed')}"
        f"{rules_described(p.rules)}"
    )


def _preemption_steps(p: PreemptionParams) -> int:
    return len(p.seeds) * len(_PREEMPTION_SERIES)


def _preemption_measure(p: PreemptionParams, tracker: Tracker) -> list[Measurement]:
    capacity = zoe_capacity()
    out: list[Measurement] = []
    for seed in p.seeds:
        applications = generate(
            WorkloadSpec(applications=p.applications, load=p.load), capacity, seed
        )
        for series in _PREEMPTION_SERIES:
            result = ZoeSimulator(
                applications,
                capacity,
                scheduler="flexible",
                sorting=p.sorting,
                preemptive=series == "preemptive",
                rules=p.rules,
            ).run()
            out += run_measurements(series, p.load, seed, result)
            tracker.step(f"{series}, seed {seed}")
    return out


def _preemption_claims(p: PreemptionParams, measurements: list[Measurement]) -> list[Claim]:
    """Figure 9's two claims, each judged on a per-seed quantity (with preemption against
    without, on the same workload) with its 95% confidence interval over the seeds; the
    medians over seeds are shown beside it."""

    def get(metric: str, series: str) -> float | None:
        return medians_of(measurements, metric).get((series, p.load))

    def both(metric: str) -> str:
        before, after = get(metric, "non-preemptive"), get(metric, "preemptive")
        return (
            f"{before if before is not None else math.nan:,.1f} s -> "
            f"{after if after is not None else math.nan:,.1f} s"
        )

    def per_seed(metric: str, combine: Callable[[float, float], float]) -> Interval | None:
        return per_seed_interval(
            measurements, metric, "non-preemptive", "preemptive", p.load, combine
        )

    orders = per_seed(f"{INTERACTIVE}_queuing_mean_s", _orders_cut)
    moved = per_seed(f"{BATCH_ELASTIC}_queuing_p50_s", _log_factor)
    return [
        Claim(
            "Interactive applications queue far less with preemption",
            "about two orders of magnitude less queuing (Figure 9): seconds, not tens of minutes",
            f"{INTERACTIVE} queuing mean {both(f'{INTERACTIVE}_queuing_mean_s')}, p95 "
            f"{both(f'{INTERACTIVE}_queuing_p95_s')} (medians over seeds); cut per seed "
            f"{interval_text(orders)} orders of magnitude",
            "interactive applications have priority 1 here, so even without preemption they "
            "head the waiting line and wait only for the next departure; "
            f"{plural(len(p.seeds), 'seed')} (the paper: 10 runs); {BOTH_RULES_DEPARTURES}",
            gain_interval(
                orders,
                _PAPER_ORDERS,
                "interactive applications' mean queuing time cut by preemption, log10 of "
                f"without over with, a mean under {_QUEUING_FLOOR_S:g} s counted as "
                f"{_QUEUING_FLOOR_S:g} s, per seed: reproduced if the mean over seeds reaches "
                f"{_PAPER_ORDERS:g} orders of magnitude and its 95% confidence interval lies "
                "above 0; a smaller cut, the interval above 0: partly; the interval at or "
                "below 0: not reproduced; an interval reaching both sides of 0: inconclusive",
                "orders of magnitude",
            ),
        ),
        Claim(
            "Batch elastic applications keep their median queuing time",
            "more variability, stable median (Figure 9)",
            f"{BATCH_ELASTIC} queuing p50 {both(f'{BATCH_ELASTIC}_queuing_p50_s')}, p95 "
            f"{both(f'{BATCH_ELASTIC}_queuing_p95_s')}; {BATCH_RIGID} p50 "
            f"{both(f'{BATCH_RIGID}_queuing_p50_s')} (medians over seeds); {BATCH_ELASTIC} "
            f"p50 with over without per seed {interval_text(_as_factor(moved))}",
            f"{p.applications:,} applications per run, parametric distributions, "
            f"{plural(len(p.seeds), 'seed')} (the paper: 10 runs); {BOTH_RULES_DEPARTURES}"
            + _size_based_preemption(p.rules),
            _stable_verdict(moved),
        ),
    ]


def _orders_cut(before: float, after: float) -> float:
    """log10 of the queuing time without preemption over that with it, both floored at
    `_QUEUING_FLOOR_S` (2: two orders of magnitude less with preemption)."""
    return math.log10(max(before, _QUEUING_FLOOR_S) / max(after, _QUEUING_FLOOR_S))


def _log_factor(before: float, after: float) -> float:
    """ln of the median queuing time with preemption over that without, both floored at
    `_QUEUING_FLOOR_S` (0: unmoved; two medians of no wait are the same)."""
    return math.log(max(after, _QUEUING_FLOOR_S) / max(before, _QUEUING_FLOOR_S))


def _as_factor(logs: Interval | None) -> Interval | None:
    """An interval of ln-factors as factors (the geometric mean over seeds and its interval)."""
    if logs is None:
        return None
    return Interval(
        math.exp(logs.mean), math.exp(logs.low), math.exp(logs.high), logs.n, logs.level
    )


def _size_based_preemption(rules: FlexibleRules) -> str:
    """What the batch claim's last column adds for `rules`: under `OURS` an arrival preempts
    by the whole order, not by priority alone (departure (a) in docs/zoe.md), and batch
    applications are the ones it changes; under `PAPER`, nothing."""
    if FlexibleRules(rules) is FlexibleRules.PAPER:
        return ""
    return (
        "; Algorithm 2 read with size-based priorities (departure (a) in docs/zoe.md): under "
        "SRPT a batch arrival shorter than the serving set's tail preempts too, where the "
        "printed rules (zoe-preemption-paper) let only a higher priority preempt"
    )


_PAPER_ORDERS = 2.0
"""Figure 9: preemption cuts interactive applications' queuing by about two orders of
magnitude."""
_QUEUING_FLOOR_S = 1.0
"""A queuing time under this counts as this in a ratio: the paper's interactive applications
still queue for seconds with preemption, so a second is no wait at all."""
_STABLE_WITHIN = 1.25
"""A median queuing time is stable if preemption moves it by at most this factor (partly
within its square)."""


def _stable_verdict(moved: Interval | None) -> Verdict:
    """Batch elastic applications' median queuing time is stable under preemption: the per-seed
    factor (with over without, `_log_factor`) judged by its geometric mean over the seeds and
    that mean's 95% confidence interval. Reproduced if the whole interval lies within
    `_STABLE_WITHIN` either way; partly if the mean does (but the seeds cannot pin it there) or
    lies within its square; not reproduced beyond."""
    criterion = (
        "batch elastic applications' median queuing time with preemption over that without, "
        f"both floored at {_QUEUING_FLOOR_S:g} s, per seed: reproduced if the 95% confidence "
        f"interval of its geometric mean over seeds lies within {_STABLE_WITHIN:g}x either "
        f"way; the mean within {_STABLE_WITHIN:g}x but not the interval, or the mean within "
        f"{_STABLE_WITHIN**2:.3g}x: partly"
    )
    if moved is None or not math.isfinite(moved.mean):
        return Verdict(Outcome.NOT_MEASURED, criterion, "no median queuing time measured")
    bound = math.log(_STABLE_WITHIN)
    if -bound <= moved.low and moved.high <= bound:
        outcome = Outcome.REPRODUCED
    elif abs(moved.mean) <= 2 * bound:
        outcome = Outcome.PARTLY
    else:
        outcome = Outcome.NOT_REPRODUCED
    return Verdict(outcome, criterion, f"measured {_as_factor(moved)}x with over without")


def _preemption_plot(
    p: PreemptionParams, measurements: list[Measurement], out: Path, name: str
) -> list[Path]:
    figure, axes = new_figure(
        f"Zoe: queuing time with and without preemption ({p.sorting}, load {p.load:g})\n"
        "(medians over seeds; bar: p50, whisker to p95)",
        "application category",
    )
    drawn: list[float] = []
    for offset, series in zip((-0.2, 0.2), _PREEMPTION_SERIES, strict=True):
        colour = "C0" if series == "preemptive" else "C7"
        label = series  # on the series' first bar only, so that the legend shows its colour
        for index, category in enumerate(CATEGORIES):
            p50 = medians_of(measurements, f"{category}_queuing_p50_s").get((series, p.load))
            p95 = medians_of(measurements, f"{category}_queuing_p95_s").get((series, p.load))
            if p50 is None or p95 is None:
                continue
            bar, whisker = max(p50, 1e-3), max(p95, 1e-3)
            axes.bar(index + offset, bar, width=0.35, color=colour, alpha=0.6, label=label)
            axes.vlines(index + offset, bar, whisker, color=colour)
            drawn += [bar, whisker]
            label = "_nolegend_"
    axes.set_xticks(range(len(CATEGORIES)), list(CATEGORIES))
    log_time_axis(axes, "y", drawn, "queuing time")
    legend_below(figure, axes)
    return [save_figure(figure, out / f"{name}.png")]


ZOE_PREEMPTION = Experiment[PreemptionParams](
    name="zoe-preemption",
    title="Zoe: queuing with and without preemption (Algorithm 2)",
    x_label="offered load",
    summary_metrics=(
        f"{INTERACTIVE}_queuing_mean_s",
        f"{INTERACTIVE}_queuing_p95_s",
        f"{BATCH_ELASTIC}_queuing_p50_s",
        f"{BATCH_RIGID}_queuing_p50_s",
        "turnaround_mean_s",
    ),
    scales={
        "test": PreemptionParams(applications=120, load=1.3, seeds=(0,)),
        "quick": PreemptionParams(applications=1500, load=1.3, seeds=TEN_SEEDS),
        "full": PreemptionParams(applications=3000, load=1.3, seeds=TEN_SEEDS),
    },
    describe=_preemption_describe,
    steps=_preemption_steps,
    measure=_preemption_measure,
    claims=_preemption_claims,
    plot=_preemption_plot,
)
