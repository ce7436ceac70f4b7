"""Figure 8 of Firmament's evaluation (OSDI '16, section 7.3), the snapshot half of the
`fig8-16` experiment (`fig8_16.py` holds the experiment's record and parameters): a
Quincy-shaped cluster at 80% of its slots, then one job taking it to 85..106%; the job's round
is timed for every algorithm, on generated graphs solved directly.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from firmament_py.flow.changes import ChangeBatch
from firmament_py.flow.graphgen import ClusterGraph, ClusterSpec
from firmament_py.sim.experiment import (
    Claim,
    Measurement,
    Tracker,
    medians_of,
    new_figure,
    save_figure,
)
from firmament_py.sim.figures.series import (
    ALGORITHM_LABELS,
    check_costs,
    count_seeds,
    format_times,
    plot_series_medians,
    ratio,
    series_solver,
    values_of,
)
from firmament_py.sim.plots import legend_below, log_time_axis, ticks_at
from firmament_py.sim.verdicts import Outcome, Verdict, share
from firmament_py.sim.wording import format_duration, plural

if TYPE_CHECKING:
    from firmament_py.sim.figures.fig8_16 import Fig816Params


def xs(p: Fig816Params) -> list[float]:
    """Figure 8's x values: the utilisations with the job, in percent."""
    return [round(100 * utilisation, 3) for utilisation in p.utilisations]


def measure(p: Fig816Params, tracker: Tracker) -> list[Measurement]:
    out: list[Measurement] = []
    slots = p.snapshot_machines * p.slots_per_machine
    for seed in p.seeds:
        for utilisation in p.utilisations:
            cluster = ClusterGraph(
                ClusterSpec(
                    machines=p.snapshot_machines,
                    slots_per_machine=p.slots_per_machine,
                    machines_per_rack=40,
                    running=p.snapshot_utilisation,
                    waiting=0,
                    shape="quincy",
                    seed=seed,
                )
            )
            snapshot = cluster.graph.snapshot()
            cluster.graph.discard_changes()
            # Fresh solvers for every graph: a relaxation solver that loads a snapshot smaller
            # than one it solved before can loop forever (its work arrays keep the old size).
            solvers = {algorithm: series_solver(algorithm) for algorithm in p.algorithms}
            try:
                for solver in solvers.values():
                    solver.load(snapshot)
                    solver.solve()
                cluster.submit_job(max(1, round((utilisation - p.snapshot_utilisation) * slots)))
                batch: ChangeBatch = cluster.graph.take_changes()
                costs: dict[str, int] = {}
                for algorithm, solver in solvers.items():
                    solver.apply(batch)
                    result = solver.solve()
                    costs[algorithm] = result.cost
                    out.append(
                        Measurement(
                            algorithm,
                            round(100 * utilisation, 3),
                            seed,
                            "job_round_s",
                            result.wall_time,
                            result.algorithm,
                        )
                    )
            finally:
                for solver in solvers.values():
                    solver.close()
            check_costs(costs, f"{utilisation:.0%} utilisation, seed {seed}")
            tracker.step(f"Fig. 8, job to {utilisation:.0%} of slots, seed {seed}")
    return out


def claims(p: Fig816Params, measurements: list[Measurement]) -> list[Claim]:
    """Figure 8's claims: where relaxation overtakes cost scaling, who is slowest once the
    cluster is oversubscribed, and which algorithm the race answered with."""
    medians = medians_of(measurements, "job_round_s")
    utilisations = sorted(
        {
            m.x
            for m in measurements
            if m.metric == "job_round_s"
            and ("relaxation", m.x) in medians
            and ("cost-scaling", m.x) in medians
        }
    )
    relax = {u: medians[("relaxation", u)] for u in utilisations}
    cs = {u: medians[("cost-scaling", u)] for u in utilisations}
    race = {u: medians.get((p.race, u)) for u in utilisations}
    crossover = _crossover(utilisations, relax, cs)
    scale = 12_500 / p.snapshot_machines
    if utilisations:
        top, calm = utilisations[-1], utilisations[0]
        crossover_ours = (
            (
                f"relaxation slower from {crossover:g}% on"
                if crossover is not None
                else f"relaxation not slower at {top:g}%"
            )
            + f"; at {calm:g}%: relaxation {format_duration(relax[calm])}, cost scaling "
            f"{format_duration(cs[calm])}"
        )
        slowest_ours = (
            f"at {top:g}%: relaxation {format_duration(relax[top])}, cost scaling "
            f"{format_duration(cs[top])} ({format_times(ratio(relax[top], cs[top]))}), "
            f"{ALGORITHM_LABELS.get(p.race, p.race).split(' (')[0]} {format_duration(race[top])}"
        )
    else:
        crossover_ours = slowest_ours = "no job round measured"
    return [
        Claim(
            "Fig. 8: relaxation degrades near oversubscription; cost scaling does not",
            "relaxation overtakes cost scaling at about 93% utilisation",
            crossover_ours,
            f"Generated Quincy graphs {scale:.0f}x smaller than the Google cluster"
            + (
                "; relaxation stays fast until the job stops fitting: until then, its tasks can "
                "reach free preferred machines in one pass"
                if crossover is not None and crossover > 100
                else ""
            ),
            _crossover_verdict(utilisations, crossover),
        ),
        Claim(
            "Fig. 8: oversubscribed, relaxation is slowest",
            "over 400 s (12,500 machines)",
            slowest_ours,
            f"A cluster {scale:.0f}x smaller; our tree limit and blocking-flow sweeps cap "
            "relaxation's wandering (docs/benchmarks.md: 432 s to 42 s at 12,500 machines)",
            _slowest_verdict(medians, utilisations),
        ),
        _fig8_race_claim(p.race, measurements, medians, utilisations),
    ]


_PAPER_FIG8_CROSSOVER = 93.0
"""Figure 8's crossover: relaxation slower than cost scaling from about 93% utilisation."""
_CROSSOVER_BAND = 5.0
"""How far, in percentage points, our crossover may lie from the paper's and count as
reproduced: the paper's "about", and a step of our utilisation grid (2 to 5 points), since what
we see of a crossover is the first utilisation measured past it. Utilisation is a share of the
slots, so its position needs no rescaling to a smaller cluster."""


def _crossover(
    utilisations: Sequence[float], relax: Mapping[float, float], cs: Mapping[float, float]
) -> float | None:
    """The utilisation from which relaxation stays slower than cost scaling up to the highest
    measured (a slower point below a faster one is noise, not the crossover); None if it is not
    slower at the highest."""
    start = None
    for u in sorted(utilisations, reverse=True):
        if relax[u] <= cs[u]:
            break
        start = u
    return start


def _crossover_verdict(utilisations: Sequence[float], crossover: float | None) -> Verdict:
    """Reproduced if relaxation stays slower than cost scaling from a crossover (`_crossover`)
    within `_CROSSOVER_BAND` points of the paper's; partly if the crossover lies outside; not
    reproduced without one (not slower at the top, or slower at every utilisation measured)."""
    low = _PAPER_FIG8_CROSSOVER - _CROSSOVER_BAND
    high = _PAPER_FIG8_CROSSOVER + _CROSSOVER_BAND
    criterion = (
        "a crossover, from which relaxation stays slower than cost scaling (and is not at the "
        f"utilisation below), within {low:g}-{high:g}% (the paper's "
        f"{_PAPER_FIG8_CROSSOVER:g}% +/- {_CROSSOVER_BAND:g} points); outside that range: partly"
    )
    if not utilisations:
        return Verdict(Outcome.NOT_MEASURED, criterion, "no utilisation measured")
    if crossover is None:
        return Verdict(
            Outcome.NOT_REPRODUCED, criterion, f"relaxation not slower at {max(utilisations):g}%"
        )
    if crossover == min(utilisations):
        return Verdict(
            Outcome.NOT_REPRODUCED,
            criterion,
            f"relaxation slower at every utilisation measured, from {crossover:g}%",
        )
    inside = abs(crossover - _PAPER_FIG8_CROSSOVER) <= _CROSSOVER_BAND
    outcome = Outcome.REPRODUCED if inside else Outcome.PARTLY
    return Verdict(outcome, criterion, f"crossover at {crossover:g}%")


def _slowest_verdict(
    medians: Mapping[tuple[str, float], float], utilisations: Sequence[float]
) -> Verdict:
    """Relaxation slower than every other algorithm measured at each oversubscribed utilisation;
    the paper's 400 s is at 12,500 machines, so only the order is judged."""
    over = [u for u in utilisations if u > 100]
    held = [
        u
        for u in over
        if all(
            medians[("relaxation", u)] > value
            for (series, x), value in medians.items()
            if x == u and series != "relaxation"
        )
    ]
    return share(
        len(held),
        len(over),
        "relaxation slower than every other algorithm measured at every oversubscribed "
        "utilisation (above 100%); the paper's seconds are at 12,500 machines, so only the order "
        "is judged",
        "oversubscribed utilisation",
    )


def _fig8_race_claim(
    race: str,
    measurements: Sequence[Measurement],
    medians: Mapping[tuple[str, float], float],
    utilisations: Sequence[float],
) -> Claim:
    """Which algorithm answered the job rounds of the race `race` (a series), and what racing
    cost over the faster algorithm alone."""
    winners = {
        (m.x, m.seed): m.note.removeprefix("race:")
        for m in measurements
        if m.series == race and m.metric == "job_round_s"
    }

    def won(algorithm: str, fitting: bool) -> str:
        rounds = [w for (x, _), w in winners.items() if (x <= 100) == fitting]
        return f"{sum(w == algorithm for w in rounds)} of {plural(len(rounds), 'job round')}"

    overheads = [
        medians[(race, u)] / faster
        for u in utilisations
        if (race, u) in medians
        and (faster := min(medians[("relaxation", u)], medians[("cost-scaling", u)])) > 0
    ]
    overhead = statistics.median(overheads) if overheads else None
    return Claim(
        "Fig. 8: the race answers with the faster algorithm",
        "Firmament takes whichever algorithm finishes first (section 6.1)",
        f"relaxation won {won('relaxation', True)} up to 100%, cost scaling "
        f"{won('cost-scaling', False)} above; race / faster algorithm alone: median "
        f"{format_times(overhead)}",
        "Both workers apply every batch, sharing the machine's cores with the caller; flows "
        "travel between processes; and the race's cost scaling starts from the last winner's "
        "potentials rather than its own",
        _winner_verdict(measurements, winners),
    )


_CLEAR_WIN = 2.0
"""A job round tells which algorithm the race should answer with only where one algorithm alone
was at least this much faster than the other: closer than that, which of the two finishes first
in the race is a toss-up (its relaxation runs incrementally, the one alone from scratch)."""


def _winner_verdict(
    measurements: Sequence[Measurement], winners: Mapping[tuple[float, int], str]
) -> Verdict:
    """In how many job rounds with a clear winner alone (`_CLEAR_WIN`) the race answered with
    that algorithm, comparing each round with the same utilisation and seed alone (a round
    that took no time alone for either tells nothing)."""
    alone = {(m.series, m.x, m.seed): m.value for m in measurements if m.metric == "job_round_s"}
    held = cases = 0
    for (x, seed), winner in winners.items():
        relax, cs = alone.get(("relaxation", x, seed)), alone.get(("cost-scaling", x, seed))
        if relax is None or cs is None or max(relax, cs) <= 0:
            continue
        if max(relax, cs) < _CLEAR_WIN * min(relax, cs):
            continue
        cases += 1
        held += winner == ("relaxation" if relax < cs else "cost-scaling")
    return share(
        held,
        cases,
        "the race answered with the algorithm that was faster alone, in every job round where "
        f"one was {_CLEAR_WIN:g}x faster than the other",
        "decisive job round",
    )


def plot(p: Fig816Params, measurements: list[Measurement], out: Path, name: str) -> Path:
    """Figure 8: the job's round time against the utilisation it brings the cluster to."""
    figure, axes = new_figure(
        "Figure 8: one job pushes a cluster towards oversubscription\n"
        f"Quincy-shaped graph, {p.snapshot_machines:,} machines at "
        f"{p.snapshot_utilisation:.0%} before the job (median of {count_seeds(p.seeds)})",
        "slot utilisation with the job [%]",
    )
    plot_series_medians(axes, measurements, "job_round_s", p.algorithms)
    axes.axvline(100, color="grey", linestyle=":", linewidth=1)
    ticks_at(axes.xaxis, [*xs(p), 100])  # 100: where the dotted line marks a full cluster
    log_time_axis(axes, "y", values_of(measurements, "job_round_s"), "runtime of the job's round")
    legend_below(figure, axes)
    return save_figure(figure, out / f"{name}-fig8.png")
