"""The tech report's claims about NoMora's simulation (abstract, Table 2, sections 6.1-6.3),
judged from the measurements of `firmament_py.nomora.experiment` for one setting group (the
paper's setting, or this project's), with the verdict functions of `firmament_py.sim.verdicts`.

Performance claims are differences in points of the mean over jobs (the paper's "area"),
measured once per seed and judged with `gain_interval` (Student-t 95% intervals over seeds), on
both job metrics (`mean_performance`: the mean over a job's tasks; `slowest_performance`: its
slowest task), `every` metric a part. Runtime and latency claims are per-seed ratios of wall
time (on a shared 2-core machine), as % longer for the baseline, judged with `gain_interval`
too, so that a difference within the seeds' noise is "inconclusive". The beta = 0 claims are
judged at each swept omega/beta unit apart (the paper gives no unit) and decided by the best
unit (`best_unit`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from firmament_py.nomora.simulation import POLICIES, SWEPT_UNITS
from firmament_py.sim.experiment import (
    Claim,
    Measurement,
    medians_of,
    paired_by_seed,
    values_by_seed,
)
from firmament_py.sim.verdicts import Outcome, Verdict, every, factor, gain_interval, mean_interval
from firmament_py.sim.wording import format_duration

__all__ = ["GroupView", "best_unit", "group_claims"]

JOB_METRICS: tuple[tuple[str, str], ...] = (
    ("mean_performance", "mean over tasks"),
    ("slowest_performance", "slowest task"),
)
"""The two ways a job's performance is measured, each judged as a part of every claim."""

PAPER_AREA = {
    "random-arc": 47.2,
    "load-spreading": 46.8,
    "nomora": 60.2,
    "nomora-110-115": 51.85,
    "nomora-preempt": 59.0,
    "nomora-preempt-beta0": 89.6,
}
"""Section 6.1: the area (%) of each policy (random: the paper's, fixed costs)."""
RUNTIME_ABSTRACT = 1.16
"""The abstract (and Table 2): median algorithm runtime 108 ms for the baselines, 93 ms for
NoMora."""
RUNTIME_RESULTS = 1.61
"""Section 6.2: "an improvement of 1.61x for the median runtime" (not 108/93)."""
PLACEMENT = {"random-arc": 1.56, "load-spreading": 1.79}
"""Section 6.3: NoMora's median placement latency better by 1.56x (random), 1.79x
(load-spreading)."""
MIGRATION_FACTOR = 7.1 / 0.022
"""Figure 8: tasks migrated per round, 7.1% with beta = 0 against 0.022% with beta = time run."""
MIGRATION_FLOOR_PCT = 0.001
"""A mean migrated share of 0 counts as this (22x under the paper's 0.022%), so that a run that
migrates nothing with beta = time run still gives a ratio."""


@dataclass(frozen=True)
class GroupView:
    """One setting group's measurements: series are `f"{group}:{policy}"`."""

    group: str
    label: str
    measurements: Sequence[Measurement]
    reasons: Mapping[str, str]
    """The group's reason why a claim's numbers differ from the paper's, by claim key."""

    def why(self, key: str) -> str:
        return self.reasons.get(key, "")

    def series(self, policy: str) -> str:
        return f"{self.group}:{policy}"

    def has(self, policy: str) -> bool:
        return any(m.series == self.series(policy) for m in self.measurements)

    def per_seed(self, metric: str, policy: str) -> dict[int, float]:
        return values_by_seed(self.measurements, metric, self.series(policy), 0.0)

    def median(self, metric: str, policy: str) -> float | None:
        return medians_of(self.measurements, metric).get((self.series(policy), 0.0))

    def differences(self, metric: str, policy: str, other: str) -> list[float]:
        """`policy` minus `other`, seed by seed (seeds measured for both)."""
        return paired_by_seed(self.per_seed(metric, policy), self.per_seed(metric, other))

    def pct(self, metric: str, policy: str) -> str:
        value = self.median(metric, policy)
        return "-" if value is None else f"{value:.1f}%"

    def both(self, policy: str) -> str:
        """The policy's two job metrics, as "mean / slowest"."""
        return " / ".join(self.pct(metric, policy) for metric, _ in JOB_METRICS)


def _gain_parts(
    view: GroupView, policy: str, others: Sequence[tuple[str, float]], what: str
) -> list[tuple[str, Verdict]]:
    """For each job metric and each (baseline, paper's gain): the per-seed gain of `policy`
    over the baseline, judged with its interval."""
    parts: list[tuple[str, Verdict]] = []
    for metric, metric_label in JOB_METRICS:
        for other, paper in others:
            interval = mean_interval(view.differences(metric, policy, other))
            parts.append(
                (
                    f"{metric_label}, over {POLICIES[other].label}",
                    gain_interval(interval, paper, what, "points"),
                )
            )
    return parts


def _duration(view: GroupView, metric: str, policy: str) -> str:
    return format_duration(view.median(metric, policy))


def _checked(view: GroupView, claim: Claim, required: Sequence[str]) -> Claim:
    """`claim`, or, where the group did not run one of the `required` policies, the same claim
    not measured (a claim is never judged on part of its series)."""
    missing = [p for p in required if not view.has(p)]
    if not missing or claim.verdict is None:
        return claim
    verdict = Verdict(
        Outcome.NOT_MEASURED, claim.verdict.criterion, f"not run: {', '.join(missing)}"
    )
    return dataclasses.replace(claim, verdict=verdict)


def group_claims(view: GroupView) -> list[Claim]:
    """The claims, judged on one group's measurements; a claim whose series the group did not
    run is not measured."""
    prefix = f"[{view.label}] "
    return [
        _gain_claim(view, prefix),
        _threshold_claim(view, prefix),
        *_preemption_claims(view, prefix),
        *_runtime_claims(view, prefix),
    ]


def _gain_claim(view: GroupView, prefix: str) -> Claim:
    baselines = [
        (b, PAPER_AREA["nomora"] - PAPER_AREA[b]) for b in ("random-arc", "load-spreading")
    ]
    extra = [
        f"{POLICIES[p].label} {view.both(p)}"
        for p in ("nomora-our-arcs", "random", "random-task")
        if view.has(p)
    ]
    claim = Claim(
        prefix + "NoMora (105/110) improves the average application performance over "
        "the random and load-spreading policies",
        "60.2% vs random 47.2% and load-spreading 46.8% (+13.0 and +13.4 points)",
        f"mean over tasks / slowest task: NoMora {view.both('nomora')} vs random "
        f"(fixed arc costs) {view.both('random-arc')}, load-spreading "
        f"{view.both('load-spreading')}" + "".join(f"; {e}" for e in extra),
        view.why("gain"),
        every(
            _gain_parts(view, "nomora", baselines, "NoMora's gain per seed"),
            "NoMora's per-seed gain over each baseline, on each job metric, at least "
            "the paper's with its 95% interval above 0 (gain_interval)",
        ),
    )
    return _checked(view, claim, ("nomora", "random-arc", "load-spreading"))


def _threshold_claim(view: GroupView, prefix: str) -> Claim:
    paper = PAPER_AREA["nomora"] - PAPER_AREA["nomora-110-115"]
    claim = Claim(
        prefix + "Wider thresholds (110/115) place worse",
        "51.85% (vs 60.2% for 105/110)",
        f"{view.both('nomora-110-115')} (vs {view.both('nomora')})",
        view.why("thresholds"),
        every(
            [
                (
                    label,
                    gain_interval(
                        mean_interval(view.differences(metric, "nomora", "nomora-110-115")),
                        paper,
                        label,
                        "points",
                    ),
                )
                for metric, label in JOB_METRICS
            ],
            f"105/110 at least {paper:.3g} points above 110/115 per seed, on each job "
            "metric (gain_interval)",
        ),
    )
    return _checked(view, claim, ("nomora", "nomora-110-115"))


_RANK = (
    Outcome.REPRODUCED,
    Outcome.PARTLY,
    Outcome.INCONCLUSIVE,
    Outcome.NOT_REPRODUCED,
    Outcome.NOT_MEASURED,
)
"""Outcomes from best to worst, for `best_unit`."""


def best_unit(units: Sequence[tuple[str, Verdict]], criterion: str) -> Verdict:
    """A claim judged at each of several settings the paper leaves open (the omega/beta unit),
    each its own part: decided by the best one (the first of the best, in order), which
    `decided_by` names, with the others after it. The sweep can then only find the paper's
    setting, never count against it."""
    if not units:
        return Verdict(Outcome.NOT_MEASURED, criterion, "no unit measured")
    name, best = min(units, key=lambda u: _RANK.index(u[1].outcome))
    others = "; ".join(f"{n}: {v.outcome.value}" for n, v in units if n != name)
    text = f"best unit {name}: {best.decided_by}" + (f" | other units: {others}" if others else "")
    return Verdict(best.outcome, criterion, text)


def _units(view: GroupView) -> list[tuple[int, str, str]]:
    """The omega/beta units the group ran: (unit, beta = time run's series, beta = 0's)."""
    units = [(1, "nomora-preempt", "nomora-preempt-beta0")]
    units += [(u, f"nomora-preempt-unit{u}", f"nomora-preempt-beta0-unit{u}") for u in SWEPT_UNITS]
    ran = [(u, a, b) for u, a, b in units if view.has(a) or view.has(b)]
    return ran or units[:1]


def _preemption_claims(view: GroupView, prefix: str) -> list[Claim]:
    units = _units(view)
    required = ("random-arc", *(p for _, a, b in units for p in (a, b)))
    over_random = PAPER_AREA["nomora-preempt-beta0"] - PAPER_AREA["random-arc"]
    over_run_time = PAPER_AREA["nomora-preempt-beta0"] - PAPER_AREA["nomora-preempt"]
    ours = "; ".join(
        f"{u} unit/s: beta 0 {view.both(b)}, beta = time run {view.both(a)}, migrated "
        f"{_migrated(view, b)} / {_migrated(view, a)}"
        for u, a, b in units
    )
    if view.has("nomora-preempt-beta0-tie") and view.has("nomora-preempt-tie"):
        ours += (
            f"; staying wins ties (1 unit/s): beta 0 {view.both('nomora-preempt-beta0-tie')}, "
            f"beta = time run {view.both('nomora-preempt-tie')}, migrated "
            f"{_migrated(view, 'nomora-preempt-beta0-tie')} / "
            f"{_migrated(view, 'nomora-preempt-tie')}"
        )
    claims = [
        Claim(
            prefix + "Preemption with beta = 0 improves performance by 42 points over random",
            "89.6% vs random 47.2% (+42.4 points); beta = time run 59%",
            f"random (fixed arc costs) {view.both('random-arc')}; {ours}",
            view.why("preemption"),
            best_unit(
                [
                    (
                        f"{u} unit/s",
                        every(
                            _gain_parts(
                                view, beta0, [("random-arc", over_random)], "beta 0 over random"
                            ),
                            "on each job metric",
                        ),
                    )
                    for u, _, beta0 in units
                ],
                f"NoMora with preemption and beta = 0 at least {over_random:.3g} points above "
                "random per seed, on each job metric (gain_interval, every); judged at each "
                "omega/beta unit apart and decided by the best unit (the paper gives none)",
            ),
        ),
        Claim(
            prefix + "beta = 0 places better than beta = time run",
            "89.6% vs 59% (+30.6 points)",
            ours,
            view.why("beta"),
            best_unit(
                [
                    (
                        f"{u} unit/s",
                        every(
                            _gain_parts(
                                view,
                                beta0,
                                [(time_run, over_run_time)],
                                "beta 0 over beta = time run",
                            ),
                            "on each job metric",
                        ),
                    )
                    for u, time_run, beta0 in units
                ],
                f"beta = 0 at least {over_run_time:.3g} points above beta = time run at the same "
                "unit per seed, on each job metric (gain_interval, every); judged at each "
                "omega/beta unit apart and decided by the best unit (the paper gives none)",
            ),
        ),
    ]
    _, time_run, beta0 = units[0]
    claims.append(
        Claim(
            prefix + "Migrations per round with preemption (1 unit/s)",
            "0.022% of tasks on average (beta = time run), 7.1% (beta 0)",
            f"{_pct3(view.median('migrated_mean_pct', time_run))} (beta = time run), "
            f"{_pct3(view.median('migrated_mean_pct', beta0))} (beta 0)",
            view.why("migrations"),
            factor(
                _migration_ratio(
                    view.median("migrated_mean_pct", beta0),
                    view.median("migrated_mean_pct", time_run),
                ),
                MIGRATION_FACTOR,
                f"the mean share migrated per round with beta = 0 at least {MIGRATION_FACTOR:.3g}x "
                f"that with beta = time run, a share under {MIGRATION_FLOOR_PCT:g}% counted as "
                f"{MIGRATION_FLOOR_PCT:g}%",
            ),
        )
    )
    return [_checked(view, claim, required) for claim in claims]


def _faster_pct(view: GroupView, metric: str, others: Sequence[str]) -> list[float]:
    """Per seed, how much longer (%) the fastest of `others` took than NoMora: 100 x (theirs /
    NoMora's - 1), so that a per-seed interval reaching both sides of 0 is noise."""
    mine = view.per_seed(metric, "nomora")
    theirs = [view.per_seed(metric, o) for o in others]
    seeds = sorted(mine.keys() & set.intersection(*(set(t) for t in theirs)))
    return [
        100 * (min(t[seed] for t in theirs) / mine[seed] - 1) for seed in seeds if mine[seed] > 0
    ]


def _pct_faster(paper_factor: float) -> float:
    return 100 * (paper_factor - 1)


def _runtime_claims(view: GroupView, prefix: str) -> list[Claim]:
    baselines = ("random-arc", "load-spreading")
    runtime = mean_interval(_faster_pct(view, "algorithm_p50_s", baselines))
    ours_runtime = (
        f"median {_duration(view, 'algorithm_p50_s', 'nomora')} vs random "
        f"{_duration(view, 'algorithm_p50_s', 'random-arc')}, load-spreading "
        f"{_duration(view, 'algorithm_p50_s', 'load-spreading')} (wall time on a shared 2-core "
        "machine)"
    )
    criterion = (
        "per seed, the faster baseline's median algorithm runtime over NoMora's, as % longer: "
        "the mean at least {:.3g}% ({}x) with its 95% interval above 0 (gain_interval)"
    )

    def runtime_verdict(paper_factor: float) -> Verdict:
        paper = _pct_faster(paper_factor)
        return gain_interval(
            runtime, paper, criterion.format(paper, paper_factor), "% longer for the baseline"
        )

    claims = [
        Claim(
            prefix + "Median algorithm runtime (abstract): 1.16x better",
            "93 ms vs 108-109 ms",
            ours_runtime,
            view.why("runtime"),
            runtime_verdict(RUNTIME_ABSTRACT),
        ),
        Claim(
            prefix + "Median algorithm runtime (section 6.2): 1.61x better",
            '"an improvement of 1.61x for the median runtime"',
            ours_runtime,
            view.why("runtime"),
            runtime_verdict(RUNTIME_RESULTS),
        ),
        Claim(
            prefix + "Median task placement latency: 1.56x (random) to 1.79x (load-spreading) "
            "better",
            "278 ms vs 436 ms (random), 498 ms (load-spreading)",
            f"median {_duration(view, 'placement_p50_s', 'nomora')} vs random "
            f"{_duration(view, 'placement_p50_s', 'random-arc')}, load-spreading "
            f"{_duration(view, 'placement_p50_s', 'load-spreading')}",
            view.why("placement"),
            every(
                [
                    (
                        f"over {POLICIES[b].label}",
                        gain_interval(
                            mean_interval(_faster_pct(view, "placement_p50_s", (b,))),
                            _pct_faster(paper),
                            f"{b}'s median over NoMora's, as % longer per seed",
                            "% longer",
                        ),
                    )
                    for b, paper in PLACEMENT.items()
                ],
                "per seed, each baseline's median placement latency over NoMora's as % longer: "
                "the mean at least the paper's factor (56%, 79%) with its 95% interval above 0 "
                "(gain_interval)",
            ),
        ),
    ]
    required = ("nomora", *baselines)
    return [_checked(view, claim, required) for claim in claims]


def _migration_ratio(beta0: float | None, time_run: float | None) -> float | None:
    """Beta 0's mean migrated share over beta = time run's, both floored at
    `MIGRATION_FLOOR_PCT`."""
    if beta0 is None or time_run is None or math.isnan(beta0) or math.isnan(time_run):
        return None
    return max(beta0, MIGRATION_FLOOR_PCT) / max(time_run, MIGRATION_FLOOR_PCT)


def _migrated(view: GroupView, policy: str) -> str:
    return _pct3(view.median("migrated_mean_pct", policy))


def _pct3(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}%"
