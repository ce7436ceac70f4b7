"""Firmament's Figure 18 as an experiment (OSDI '16, section 7; the framework is
`firmament_py.sim.experiment`).

fig18 (accelerated workload): the real simulator, Quincy with input data (the paper's trace
experiments' policy) and the synthetic Google-shaped workload sped up 1x..300x; placement latency
of the tasks that arrive after the first round, as percentiles.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from firmament_py.sim.experiment import (
    Claim,
    Experiment,
    Measurement,
    Tracker,
    medians_of,
    new_figure,
    save_figure,
)
from firmament_py.sim.figures.series import (
    ALGORITHM_LABELS,
    COLOURS,
    arrival_latencies,
    count_seeds,
    format_span,
    solver_and_options,
    warm_up_series,
)
from firmament_py.sim.plots import legend_below, log_time_axis
from firmament_py.sim.runner import SimulationJob, run_job
from firmament_py.sim.simulator import SimulationResult
from firmament_py.sim.synthetic import preset
from firmament_py.sim.verdicts import Outcome, Verdict, factor, share
from firmament_py.sim.wording import format_duration
from firmament_py.solvers.algorithms import RACES

_PERCENTILES: tuple[tuple[str, float], ...] = (
    ("latency_p1_s", 1),
    ("latency_p25_s", 25),
    ("latency_p50_s", 50),
    ("latency_p75_s", 75),
    ("latency_p99_s", 99),
    ("latency_max_s", 100),
)
"""The placement latency percentiles Figure 18 plots."""


@dataclass(frozen=True)
class Fig18Params:
    """The synthetic Google-shaped workload on `machines`, sped up by each of `speedups`, run
    long enough that about `arrivals` batch tasks arrive (so that slow speeds still see enough
    tasks), under `policy` (with batch tasks reading input blocks if `input_data`), with
    Firmament's algorithm accounting. The claims judge the race `race`."""

    machines: int
    speedups: tuple[float, ...]
    arrivals: int
    seeds: tuple[int, ...]
    policy: str = "quincy"
    input_data: bool = True
    algorithms: tuple[str, ...] = ("relaxation", "cost-scaling", "race", "firmament-race")
    race: str = "firmament-race"
    """Firmament's race (relaxation from scratch against incremental cost scaling), the paper's
    configuration; ours runs beside it."""

    def duration_s(self, speedup: float) -> float:
        spec = preset("google", machines=self.machines, speedup=speedup)
        rate = sum(spec.task_rate(job_class) for job_class in spec.job_classes)
        return self.arrivals / rate


def _fig18_describe(p: Fig18Params) -> str:
    return (
        f"{p.machines:,} machines, {p.policy}"
        + (" with input data" if p.input_data else "")
        + f", speed-up {format_span(p.speedups)}x, about "
        f"{p.arrivals:,} arriving tasks per run, {count_seeds(p.seeds)}"
    )


def _fig18_steps(p: Fig18Params) -> int:
    return len(p.speedups) * len(p.algorithms) * len(p.seeds)


def _fig18_measure(p: Fig18Params, tracker: Tracker) -> list[Measurement]:
    warm_up_series(p.algorithms)
    out: list[Measurement] = []
    for seed in p.seeds:
        for speedup in p.speedups:
            for algorithm in p.algorithms:
                job = SimulationJob(
                    policy=p.policy,
                    solver=solver_and_options(algorithm)[0],
                    solver_options=solver_and_options(algorithm)[1],
                    synthetic="google",
                    machines=p.machines,
                    speedup=speedup,
                    duration_s=p.duration_s(speedup),
                    seed=seed,
                    input_data=p.input_data,
                )
                out += _latencies(run_job(job), algorithm, speedup, seed)
                tracker.step(f"{algorithm}, {speedup:g}x, seed {seed}")
    return out


def _latencies(
    result: SimulationResult, algorithm: str, speedup: float, seed: int
) -> list[Measurement]:
    """Placement latency percentiles of the tasks that arrived after the first round ended (the
    steady-state population submitted at time 0 measures the first round, not the load), an
    arrival never placed counted with its wait until the run's end (`arrival_latencies`), so
    that a race which leaves arrivals waiting cannot keep up by leaving them out."""
    latencies, unplaced = arrival_latencies(result)
    out = [
        Measurement(algorithm, speedup, seed, "tasks", len(latencies)),
        Measurement(algorithm, speedup, seed, "never_placed", unplaced),
        Measurement(algorithm, speedup, seed, "rounds", len(result.rounds)),
    ]
    runtimes = [r.algorithm_seconds for r in result.rounds]
    if runtimes:
        out.append(
            Measurement(algorithm, speedup, seed, "algorithm_p50_s", float(np.median(runtimes)))
        )
        out.append(Measurement(algorithm, speedup, seed, "algorithm_max_s", max(runtimes)))
    if latencies:
        values = np.percentile(latencies, [q for _, q in _PERCENTILES])
        out += [
            Measurement(algorithm, speedup, seed, metric, float(value))
            for (metric, _), value in zip(_PERCENTILES, values, strict=True)
        ]
    return out


def _fig18_claims(p: Fig18Params, measurements: list[Measurement]) -> list[Claim]:
    top, slow = max(p.speedups), min(p.speedups)

    def median(metric: str, algorithm: str, speedup: float) -> float | None:
        return medians_of(measurements, metric).get((algorithm, speedup))

    def by_speedup(metric: str, algorithm: str) -> dict[float, float]:
        return {x: v for (a, x), v in medians_of(measurements, metric).items() if a == algorithm}

    def slowest(metric: str) -> bool:
        """Whether the race's median `metric` at the top speed-up exceeds both algorithms'
        alone (False where any of the three was not measured)."""
        race = median(metric, p.race, top)
        alone = [median(metric, a, top) for a in ("relaxation", "cost-scaling")]
        return race is not None and all(v is not None and race > v for v in alone)

    race_name = ALGORITHM_LABELS.get(p.race, p.race).split(" (")[0]
    return [
        Claim(
            "Firmament (the race) keeps up with an accelerated workload",
            "at 300x, 75% of tasks placed in under a second",
            f"{race_name} at {top:g}x: p75 "
            f"{format_duration(median('latency_p75_s', p.race, top))}, p99 "
            f"{format_duration(median('latency_p99_s', p.race, top))}"
            + "".join(
                f"; {ALGORITHM_LABELS.get(a, a).split(' (')[0]}: p75 "
                f"{format_duration(median('latency_p75_s', a, top))}"
                for a in p.algorithms
                if a != p.race and a in RACES
            ),
            f"{p.machines:,} machines, not 12,500"
            + _solve_time(race_name, median("algorithm_p50_s", p.race, top), top)
            + (
                "; the race is the slowest here"
                + (
                    ", its median solve longer than either algorithm's alone (the cost of "
                    "shipping each round to two worker processes)"
                    if slowest("algorithm_p50_s")
                    else ""
                )
                if slowest("latency_p50_s")
                else ""
            ),
            _keeps_up_verdict(by_speedup("latency_p75_s", p.race)),
        ),
        Claim(
            "Relaxation alone falls behind at high speed-ups",
            "tail above 10 s beyond 150x",
            f"relaxation at {top:g}x: p99 "
            f"{format_duration(median('latency_p99_s', 'relaxation', top))}, max "
            f"{format_duration(median('latency_max_s', 'relaxation', top))}",
            "The largest job scales with the cluster (at most 2 tasks per machine here, "
            "where the paper's jobs reach 25,000 tasks)",
            _gap_verdict(
                by_speedup("latency_p99_s", "relaxation"),
                by_speedup("latency_p99_s", p.race),
                [s for s in p.speedups if s > _PAPER_FIG18_BEHIND_BEYOND],
                f"any speed-up beyond {_PAPER_FIG18_BEHIND_BEYOND:g}x",
                f"relaxation's p99 placement latency at least {_PAPER_FIG18_GAP:g}x the race's "
                f"and at least {_PAPER_FIG18_KEEPS_UP_S:g} s at every speed-up beyond "
                f"{_PAPER_FIG18_BEHIND_BEYOND:g}x (the paper: above 10 s where the race places "
                "75% within 1 s; its seconds are at 12,500 machines, so the gap is judged, and "
                f"the race's bound of {_PAPER_FIG18_KEEPS_UP_S:g} s is the least that counts as "
                f"behind); a smaller gap, or one under {_PAPER_FIG18_KEEPS_UP_S:g} s: partly",
            ),
        ),
        Claim(
            "Cost scaling alone is too slow even without speed-up",
            "placement latency above 10 s at 1x",
            f"cost scaling at {slow:g}x: p50 "
            f"{format_duration(median('latency_p50_s', 'cost-scaling', slow))}, p99 "
            f"{format_duration(median('latency_p99_s', 'cost-scaling', slow))}, max "
            f"{format_duration(median('latency_max_s', 'cost-scaling', slow))}",
            f"Incremental cost scaling on our {p.machines:,}-machine {p.policy} graph"
            + _solve_time("", median("algorithm_p50_s", "cost-scaling", slow), slow)
            + "; the paper's took tens of seconds per run at 12,500 machines (~30 s in Figure 16)",
            _gap_verdict(
                by_speedup("latency_p50_s", "cost-scaling"),
                by_speedup("latency_p50_s", p.race),
                [slow],
                f"{slow:g}x",
                f"cost scaling's median placement latency at {slow:g}x{_paper_at(slow, 1)} at "
                f"least {_PAPER_FIG18_GAP:g}x the race's and at least "
                f"{_PAPER_FIG18_KEEPS_UP_S:g} s (the paper: above 10 s where the race places "
                "tasks within a second; its seconds are at 12,500 machines, so the gap is judged, "
                f"and the race's bound of {_PAPER_FIG18_KEEPS_UP_S:g} s is the least that counts "
                f"as too slow); a smaller gap, or one under {_PAPER_FIG18_KEEPS_UP_S:g} s: partly",
            ),
        ),
    ]


_PAPER_FIG18_KEEPS_UP_S = 1.0
"""Figure 18: the race places 75% of tasks within a second at up to 300x. The bound is kept as it
is: latencies are set against the sped-up task runtimes, which are the same at any cluster size
(a smaller cluster's shorter rounds make it easier to meet)."""
_PAPER_FIG18_BEHIND_BEYOND = 150.0
"""Figure 18: relaxation alone falls behind beyond a 150x speed-up."""
_PAPER_FIG18_GAP = 10.0
"""How much slower a single algorithm's placement latency is than the race's where the paper
says it does not scale: an order of magnitude, its single algorithms above 10 s where the race
places tasks within a second."""
_LATENCY_FLOOR_S = 1e-6
"""A latency of 0 (placed in the round it arrived) counts as 1 µs, in a ratio as in the plot."""


def _keeps_up_verdict(race_p75: Mapping[float, float]) -> Verdict:
    """The race's p75 under `_PAPER_FIG18_KEEPS_UP_S` at every speed-up measured (`share`)."""
    held = sum(value < _PAPER_FIG18_KEEPS_UP_S for value in race_p75.values())
    top = max(race_p75, default=300)
    return share(
        held,
        len(race_p75),
        f"the race's p75 placement latency under {_PAPER_FIG18_KEEPS_UP_S:g} s at every "
        f"speed-up measured (up to {top:g}x{_paper_at(top, 300)}); the paper's bound is kept, "
        "the task runtimes it is set against being the same at our size",
        "speed-up",
    )


def _gap_verdict(
    single: Mapping[float, float],
    race: Mapping[float, float],
    speedups: Sequence[float],
    where: str,
    criterion: str,
) -> Verdict:
    """A single algorithm's latency over the race's at each of `speedups` (`where` in words),
    the smallest ratio against `_PAPER_FIG18_GAP` (`factor`); at most partly unless the single
    algorithm's latency is also at least `_PAPER_FIG18_KEEPS_UP_S` at each of them (1 ms against
    a race's 50 µs is a gap, not falling behind); not measured if none was."""
    judged = [s for s in speedups if s in single and s in race]
    if not judged:
        return Verdict(Outcome.NOT_MEASURED, criterion, f"not measured at {where}")
    ratios = [max(single[s], _LATENCY_FLOOR_S) / max(race[s], _LATENCY_FLOOR_S) for s in judged]
    verdict = factor(min(ratios), _PAPER_FIG18_GAP, criterion)
    lowest = min(single[s] for s in judged)
    if lowest >= _PAPER_FIG18_KEEPS_UP_S:
        return verdict
    outcome = Outcome.PARTLY if verdict.outcome is Outcome.REPRODUCED else verdict.outcome
    return Verdict(
        outcome,
        criterion,
        f"{verdict.decided_by}; its latency {format_duration(lowest)}, under "
        f"{_PAPER_FIG18_KEEPS_UP_S:g} s: not behind",
    )


def _paper_at(speedup: float, paper: float) -> str:
    """The paper's speed-up (", the paper's 300x") beside one of ours that differs from it."""
    return "" if speedup == paper else f", the paper's {paper:g}x"


def _solve_time(who: str, seconds: float | None, speedup: float) -> str:
    """The median solve time, to follow a why (": the race's median solve takes 2.00 ms at
    300x"); nothing where it was not measured."""
    if seconds is None:
        return ""
    whose = f" {who}'s" if who else ""
    return f":{whose} median solve takes {format_duration(seconds)} at {speedup:g}x"


def _fig18_plot(
    p: Fig18Params, measurements: list[Measurement], out: Path, name: str
) -> list[Path]:
    figure, axes = new_figure(
        "Figure 18: placement latency vs speed-up\n"
        f"{p.machines:,} machines, {p.policy}{' with input data' if p.input_data else ''}\n"
        "bars: p25-p75, whiskers p1-p99, x: max",
        "speed-up of batch runtimes and arrivals",
    )
    medians = {metric: medians_of(measurements, metric) for metric, _ in _PERCENTILES}
    speeds = sorted(p.speedups)
    width = 0.8 / max(1, len(p.algorithms))
    floor = _LATENCY_FLOOR_S
    for index, algorithm in enumerate(p.algorithms):
        colour = COLOURS.get(algorithm, f"C{index}")
        positions = [i + (index - (len(p.algorithms) - 1) / 2) * width for i in range(len(speeds))]
        for position, speed in zip(positions, speeds, strict=True):
            values = {metric: medians[metric].get((algorithm, speed)) for metric, _ in _PERCENTILES}
            p1, p25, p50, p75, p99, top = (values[metric] for metric, _ in _PERCENTILES)
            if p50 is None or p1 is None or p25 is None or p75 is None or p99 is None:
                continue
            axes.vlines(position, max(p1, floor), max(p99, floor), color=colour, linewidth=1)
            axes.bar(
                position,
                max(p75, floor) - max(p25, floor),
                width=width * 0.8,
                bottom=max(p25, floor),
                color=colour,
                alpha=0.5,
            )
            axes.plot([position], [max(p50, floor)], marker="_", color="black", markersize=10)
            if top is not None:
                axes.plot([position], [max(top, floor)], marker="x", color=colour)
        axes.plot([], [], color=colour, linewidth=6, alpha=0.5, label=ALGORITHM_LABELS[algorithm])
    axes.set_xticks(range(len(speeds)), [f"{s:g}x" for s in speeds])
    latencies = [max(m.value, floor) for m in measurements if m.metric in dict(_PERCENTILES)]
    log_time_axis(axes, "y", latencies, "task placement latency")
    legend_below(figure, axes)
    return [save_figure(figure, out / f"{name}.png")]


FIG18 = Experiment[Fig18Params](
    name="fig18",
    title="Placement latency of an accelerated workload",
    x_label="speed-up",
    summary_metrics=("latency_p50_s", "latency_p75_s", "latency_p99_s", "latency_max_s"),
    scales={
        "test": Fig18Params(machines=10, speedups=(1.0, 100.0), arrivals=40, seeds=(0,)),
        "quick": Fig18Params(machines=100, speedups=(1.0, 100.0, 300.0), arrivals=600, seeds=(0,)),
        # Quincy with input data costs a Python round of about a second at 1,250 machines;
        # four series at four speeds stay within half an hour at 300.
        "full": Fig18Params(
            machines=300, speedups=(1.0, 50.0, 150.0, 300.0), arrivals=1000, seeds=(0,)
        ),
    },
    describe=_fig18_describe,
    steps=_fig18_steps,
    measure=_fig18_measure,
    claims=_fig18_claims,
    plot=_fig18_plot,
)
