"""Firmament's Figures 8 and 16 as an experiment (OSDI '16, section 7; the framework is
`firmament_py.sim.experiment`).

fig8-16 (near oversubscription): Figure 8's snapshot (a Quincy-shaped cluster at 80%, then
one job taking it to 85..106% of its slots; the job's round is timed) and Figure 16's run over
time: a replay of a Quincy-shaped cluster at 97% whose arrivals double for a while, where each
round lasts as long as its solver ran (the simulator's algorithm accounting), so that a slow
solver sees more changes at its next round. Both drive generated graphs directly: at the sizes
where solvers differ, the simulator's Python round overhead (re-pricing every running task
each round under Quincy) would take hours.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from firmament_py.flow.changes import ChangeBatch
from firmament_py.flow.graphgen import ClusterGraph, ClusterSpec
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
    check_costs,
    count_seeds,
    format_span,
    format_times,
    plot_series_medians,
    ratio,
    series_solver,
    values_of,
    warm_up_series,
)
from firmament_py.sim.plots import legend_below, log_time_axis, ticks_at
from firmament_py.sim.verdicts import Outcome, Verdict, factor, share
from firmament_py.sim.wording import format_duration, plural


@dataclass(frozen=True)
class Fig816Params:
    """Figure 8: a Quincy-shaped cluster of `snapshot_machines` with `snapshot_utilisation` of
    its slots busy, solved; then one job that takes it to each of `utilisations` (above 1:
    oversubscribed), whose round is timed (relaxation from scratch, cost scaling and the race
    incrementally from the snapshot's optimum).

    Figure 16: a replay of `replay_machines` at `replay_utilisation`, `horizon_s` long. Tasks
    finish at rate 1 / `mean_runtime_s` each and arrive at the rate that keeps the cluster at
    that utilisation, times `burst_factor` during [`burst_start_s`, `burst_end_s`) and times
    `drain_factor` after it. A round lasts its solver's runtime (at least `interval_s`), and the
    changes of that time are applied before the next."""

    snapshot_machines: int
    utilisations: tuple[float, ...]
    seeds: tuple[int, ...]
    replay_machines: int
    horizon_s: float
    burst_start_s: float
    burst_end_s: float
    replay_seeds: tuple[int, ...]
    snapshot_utilisation: float = 0.8
    replay_utilisation: float = 0.97
    burst_factor: float = 2.0
    drain_factor: float = 0.5
    mean_runtime_s: float = 60.0
    interval_s: float = 1.0
    slots_per_machine: int = 12
    recovered_waiting: float = 0.005
    """The backlog counts as cleared when at most this fraction of the slots' worth waits."""
    algorithms: tuple[str, ...] = ("relaxation", "cost-scaling", "race")

    def arrivals(self, start: float, end: float) -> float:
        """Expected arrivals in [start, end): the rate is piecewise constant."""
        slots = self.replay_machines * self.slots_per_machine
        base = self.replay_utilisation * slots / self.mean_runtime_s
        edges = [
            (0.0, self.burst_start_s, 1.0),
            (self.burst_start_s, self.burst_end_s, self.burst_factor),
            (self.burst_end_s, math.inf, self.drain_factor),
        ]
        return sum(
            base * factor * max(0.0, min(end, high) - max(start, low))
            for low, high, factor in edges
        )


def _fig816_describe(p: Fig816Params) -> str:
    return (
        f"Fig. 8: {p.snapshot_machines:,} machines x {p.slots_per_machine} slots at "
        f"{p.snapshot_utilisation:.0%} + one job to "
        f"{format_span([100 * u for u in p.utilisations])}%"
        f", {count_seeds(p.seeds)}; Fig. 16: {p.replay_machines:,} machines at "
        f"{p.replay_utilisation:.0%}, arrivals x{p.burst_factor:g} in "
        f"[{p.burst_start_s:g}, {p.burst_end_s:g}) s, {p.horizon_s:g} s, "
        f"{count_seeds(p.replay_seeds)}"
    )


def _fig816_steps(p: Fig816Params) -> int:
    return len(p.seeds) * len(p.utilisations) + len(p.replay_seeds) * len(p.algorithms)


def _fig816_measure(p: Fig816Params, tracker: Tracker) -> list[Measurement]:
    warm_up_series(p.algorithms)
    return _fig8_snapshots(p, tracker) + _fig16_replays(p, tracker)


def _fig8_xs(p: Fig816Params) -> list[float]:
    """Figure 8's x values: the utilisations with the job, in percent."""
    return [round(100 * utilisation, 3) for utilisation in p.utilisations]


def _fig8_snapshots(p: Fig816Params, tracker: Tracker) -> list[Measurement]:
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


def _unscheduled(cluster: ClusterGraph, flow: np.ndarray[Any, np.dtype[np.int64]]) -> int:
    """Tasks left waiting by `flow`: the flow through the unscheduled aggregators."""
    graph = cluster.graph
    return sum(int(flow[arc]) for node in cluster.job_node.values() for arc in graph.out_arcs(node))


def _fig16_replays(p: Fig816Params, tracker: Tracker) -> list[Measurement]:
    out: list[Measurement] = []
    for seed in p.replay_seeds:
        for algorithm in p.algorithms:
            out += _replay(p, algorithm, seed)
            tracker.step(f"Fig. 16, {algorithm}, seed {seed}")
    return out


def _replay(p: Fig816Params, algorithm: str, seed: int) -> list[Measurement]:
    """One run of Figure 16's replay (see `Fig816Params`): per round, its start, its solver's
    runtime and the tasks left waiting."""
    cluster = ClusterGraph(
        ClusterSpec(
            machines=p.replay_machines,
            slots_per_machine=p.slots_per_machine,
            machines_per_rack=40,
            running=p.replay_utilisation,
            waiting=0,
            shape="quincy",
            seed=seed,
            round_seconds=p.interval_s,
        )
    )
    rng = np.random.default_rng([seed, 16])
    solver = series_solver(algorithm)
    out: list[Measurement] = []
    now = 0.0
    try:
        while now < p.horizon_s:
            result = solver.solve_graph(cluster.graph)
            cluster.observe(result.flow)
            x = round(now, 3)
            out.append(
                Measurement(algorithm, x, seed, "round_s", result.wall_time, result.algorithm)
            )
            out.append(
                Measurement(algorithm, x, seed, "waiting", _unscheduled(cluster, result.flow))
            )
            step = max(result.wall_time, p.interval_s)
            arrivals = int(rng.poisson(p.arrivals(now, now + step)))
            cluster.next_round(1.0 - math.exp(-step / p.mean_runtime_s), arrivals=arrivals)
            now += step
    finally:
        solver.close()
    return out


@dataclass(frozen=True)
class _Phases:
    """One replay's summary: the median round before the burst (the first round, which loads
    the graph, left out) and while the backlog stood (from the burst's start until it cleared);
    when the backlog cleared and when rounds were back to normal (seconds after the burst's
    start; None: not within the run)."""

    before: float | None
    during: float | None
    cleared: float | None
    recovered: float | None


_RECOVERY_WINDOW = 5
"""Rounds are back to normal once the median of this many consecutive rounds is at most
`_RECOVERY_FACTOR` times the median before the burst."""
_RECOVERY_FACTOR = 2.0


def _replay_phases(
    p: Fig816Params, measurements: Sequence[Measurement], algorithm: str, seed: int
) -> _Phases:
    rounds = sorted(
        (m.x, m.value)
        for m in measurements
        if m.series == algorithm and m.seed == seed and m.metric == "round_s"
    )
    waiting = {
        m.x: m.value
        for m in measurements
        if m.series == algorithm and m.seed == seed and m.metric == "waiting"
    }
    threshold = p.recovered_waiting * p.replay_machines * p.slots_per_machine
    before = [value for x, value in rounds[1:] if x < p.burst_start_s]
    cleared = next(
        (x for x, _ in rounds if x >= p.burst_end_s and waiting.get(x, 0) <= threshold), None
    )
    end = cleared if cleared is not None else math.inf
    during = [value for x, value in rounds if p.burst_start_s <= x < end]
    baseline = statistics.median(before) if before else None
    recovered = None
    if baseline is not None:
        for index, (x, _) in enumerate(rounds):
            window = [value for _, value in rounds[index : index + _RECOVERY_WINDOW]]
            if (
                x >= p.burst_end_s
                and len(window) == _RECOVERY_WINDOW
                and statistics.median(window) <= _RECOVERY_FACTOR * baseline
            ):
                recovered = x
                break
    return _Phases(
        before=baseline,
        during=statistics.median(during) if during else None,
        cleared=None if cleared is None else cleared - p.burst_start_s,
        recovered=None if recovered is None else recovered - p.burst_start_s,
    )


def _median_of(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def _fig816_claims(p: Fig816Params, measurements: list[Measurement]) -> list[Claim]:
    return _fig8_claims(p, measurements) + _fig16_claims(p, measurements)


def _fig8_claims(p: Fig816Params, measurements: list[Measurement]) -> list[Claim]:
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
    race = {u: medians.get(("race", u)) for u in utilisations}
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
            f"{format_duration(cs[top])} ({format_times(ratio(relax[top], cs[top]))}), race "
            f"{format_duration(race[top])}"
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
        _fig8_race_claim(measurements, medians, utilisations),
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


def _fig16_claims(p: Fig816Params, measurements: list[Measurement]) -> list[Claim]:
    """Figure 16's claims: the race's rounds during the backlog, and how soon each algorithm's
    rounds were back to normal."""
    phases = {
        a: [_replay_phases(p, measurements, a, seed) for seed in p.replay_seeds]
        for a in p.algorithms
    }

    def phase(a: str, pick: Callable[[_Phases], float | None]) -> float | None:
        return _median_of(pick(ph) for ph in phases[a])

    def when(a: str, pick: Callable[[_Phases], float | None]) -> str:
        value = phase(a, pick)
        return "not within the run" if value is None else f"{value:,.0f} s"

    def name(a: str) -> str:
        return ALGORITHM_LABELS.get(a, a).split(" (")[0]

    winners = [
        m.note.removeprefix("race:")
        for m in measurements
        if m.series == "race" and m.metric == "round_s" and m.x > 0
    ]
    relax_wins = sum(w == "relaxation" for w in winners)
    during = {a: phase(a, lambda ph: ph.during) for a in p.algorithms}
    return [
        Claim(
            "Fig. 16: while oversubscribed, the race follows the faster algorithm",
            "relaxation hundreds of s per run; cost scaling ~30 s; Firmament 10-15 s "
            "(incremental cost scaling wins)",
            "median round before / during the backlog: "
            + "; ".join(
                f"{name(a)} {format_duration(phase(a, lambda ph: ph.before))} / "
                f"{format_duration(during[a])}"
                for a in p.algorithms
            )
            + f" (relaxation won {relax_wins} of {plural(len(winners), 'race')})",
            f"{p.replay_machines:,} machines, not 12,500; our race runs relaxation "
            "incrementally where Firmament's runs it from scratch (section 6.1), and ships every "
            "round to two worker processes",
            _follows_verdict(during),
        ),
        Claim(
            "Fig. 16: recovery after the overload",
            "sub-second again 1,500 s after the overload began with relaxation alone, "
            "1,000 s with Firmament",
            "rounds back to normal after: "
            + ", ".join(f"{name(a)} {when(a, lambda ph: ph.recovered)}" for a in p.algorithms)
            + "; backlog cleared after: "
            + ", ".join(f"{name(a)} {when(a, lambda ph: ph.cleared)}" for a in p.algorithms),
            f"The paper's overload came from the trace at 97% of slots, ours is a "
            f"{p.burst_end_s - p.burst_start_s:g} s burst of x{p.burst_factor:g} arrivals on a "
            f"cluster {12_500 / p.replay_machines:.0f}x smaller; the paper's relaxation ran for "
            "hundreds of seconds, leaving the slots freed meanwhile idle until its next run",
            _recovery_verdict(p, phases),
        ),
    ]


_FOLLOWS_WITHIN = 1.5
"""The race follows the faster algorithm if its median round during the backlog is within this
factor of the faster algorithm's alone: the paper's race was below it (10-15 s against cost
scaling's ~30 s), ours also ships every round to two worker processes."""


def _follows_verdict(during: Mapping[str, float | None]) -> Verdict:
    """Reproduced if the race's median round during the backlog is within `_FOLLOWS_WITHIN` of
    the faster algorithm's alone and below the slower's; partly if it is nearer the faster than
    the slower (below their geometric mean); not reproduced if nearer the slower. Not measured
    where the two alone are within `_FOLLOWS_WITHIN` of each other: the race within that factor
    of the faster could then be following either."""
    criterion = (
        f"the race's median round during the backlog within {_FOLLOWS_WITHIN:g}x of the faster "
        "algorithm's alone and below the slower's; nearer the faster than the slower (below "
        "their geometric mean): partly; judged only where the two alone are "
        f"{_FOLLOWS_WITHIN:g}x apart or more"
    )
    race, relax, cs = during.get("race"), during.get("relaxation"), during.get("cost-scaling")
    if race is None or relax is None or cs is None or min(relax, cs) <= 0:
        return Verdict(Outcome.NOT_MEASURED, criterion, "no backlog measured for every algorithm")
    (fast_name, fast), (slow_name, slow) = sorted(
        (("relaxation", relax), ("cost scaling", cs)), key=lambda pair: pair[1]
    )
    numbers = (
        f"race {format_duration(race)}, {fast_name} {format_duration(fast)}, {slow_name} "
        f"{format_duration(slow)}"
    )
    if slow < _FOLLOWS_WITHIN * fast:
        return Verdict(
            Outcome.NOT_MEASURED,
            criterion,
            f"{numbers}: the two alone only {slow / fast:.2g}x apart, which the race follows "
            "cannot be told",
        )
    if race <= _FOLLOWS_WITHIN * fast and race < slow:
        outcome = Outcome.REPRODUCED
    elif race <= math.sqrt(fast * slow):
        outcome = Outcome.PARTLY
    else:
        outcome = Outcome.NOT_REPRODUCED
    return Verdict(outcome, criterion, f"{numbers}: {race / fast:.2g}x the faster")


_PAPER_FIG16_RECOVERY = 1.5
"""Figure 16: relaxation alone sub-second again 1,500 s after the overload began, Firmament
after 1,000 s; relaxation's recovery takes 1.5x the race's."""


def _recovery_verdict(p: Fig816Params, phases: Mapping[str, Sequence[_Phases]]) -> Verdict:
    """Relaxation's recovery over the race's, against the paper's factor (`factor`): the median
    over seeds of the time from the burst's start until the rounds are back to normal, a run
    that never recovers counted as recovering at its end (a lower bound). A run without rounds
    before the burst has no normal to return to and is left out."""
    end = p.horizon_s - p.burst_start_s

    def recovery(algorithm: str) -> float | None:
        times = [
            end if ph.recovered is None else ph.recovered
            for ph in phases.get(algorithm, [])
            if ph.before is not None
        ]
        return statistics.median(times) if times else None

    def recovered(algorithm: str) -> bool:
        """Whether any run of `algorithm` with rounds before the burst recovered in time."""
        return any(
            ph.recovered is not None for ph in phases.get(algorithm, []) if ph.before is not None
        )

    relax, race = recovery("relaxation"), recovery("race")
    verdict = factor(
        ratio(relax, race),
        _PAPER_FIG16_RECOVERY,
        "the time from the burst's start until relaxation's rounds are back to normal "
        f"({_RECOVERY_WINDOW} consecutive rounds' median within {_RECOVERY_FACTOR:g}x of the "
        f"median before the burst) over the race's, at least the paper's "
        f"{_PAPER_FIG16_RECOVERY:g}x (1,500 s against 1,000 s); a run that never recovers "
        "counts as recovering at its end; not measured if neither recovered",
    )
    if relax is None or race is None:
        missing = "relaxation" if relax is None else "the race"
        return dataclasses.replace(
            verdict, decided_by=f"no run of {missing} with rounds before the burst to return to"
        )
    if not recovered("relaxation") and not recovered("race"):
        return dataclasses.replace(
            verdict,
            outcome=Outcome.NOT_MEASURED,
            decided_by=f"neither recovered within the run ({end:,.0f} s after the burst's start)",
        )
    return dataclasses.replace(
        verdict, decided_by=f"{verdict.decided_by}: relaxation {relax:,.0f} s, race {race:,.0f} s"
    )


def _fig8_race_claim(
    measurements: Sequence[Measurement],
    medians: Mapping[tuple[str, float], float],
    utilisations: Sequence[float],
) -> Claim:
    """Which algorithm answered the race's job rounds, and what racing cost over the faster
    algorithm alone."""
    winners = {
        (m.x, m.seed): m.note.removeprefix("race:")
        for m in measurements
        if m.series == "race" and m.metric == "job_round_s"
    }

    def won(algorithm: str, fitting: bool) -> str:
        rounds = [w for (x, _), w in winners.items() if (x <= 100) == fitting]
        return f"{sum(w == algorithm for w in rounds)} of {plural(len(rounds), 'job round')}"

    overheads = [
        medians[("race", u)] / faster
        for u in utilisations
        if ("race", u) in medians
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


def _fig816_plot(
    p: Fig816Params, measurements: list[Measurement], out: Path, name: str
) -> list[Path]:
    figure, axes = new_figure(
        "Figure 8: one job pushes a cluster towards oversubscription\n"
        f"Quincy-shaped graph, {p.snapshot_machines:,} machines at "
        f"{p.snapshot_utilisation:.0%} before the job (median of {count_seeds(p.seeds)})",
        "slot utilisation with the job [%]",
    )
    plot_series_medians(axes, measurements, "job_round_s", p.algorithms)
    axes.axvline(100, color="grey", linestyle=":", linewidth=1)
    ticks_at(axes.xaxis, [*_fig8_xs(p), 100])  # 100: where the dotted line marks a full cluster
    log_time_axis(axes, "y", values_of(measurements, "job_round_s"), "runtime of the job's round")
    legend_below(figure, axes)
    paths = [save_figure(figure, out / f"{name}-fig8.png")]

    from matplotlib.figure import Figure

    figure = Figure(figsize=(6.4, 5.6), dpi=100, layout="constrained")
    top, bottom = figure.subplots(2, 1, sharex=True, height_ratios=(3, 2))
    seed = p.replay_seeds[0]
    top.set_title(
        "Figure 16: runtime over time through an overload\n"
        f"{p.replay_machines:,} machines at {p.replay_utilisation:.0%}, arrivals "
        f"x{p.burst_factor:g} in [{p.burst_start_s:g}, {p.burst_end_s:g}) s (seed {seed})",
        fontsize="medium",
    )
    for algorithm in p.algorithms:
        colour = COLOURS.get(algorithm, "C4")
        rows = sorted(
            (m.x, m.value, m.metric)
            for m in measurements
            if m.series == algorithm and m.seed == seed and m.metric in ("round_s", "waiting")
        )
        label = ALGORITHM_LABELS.get(algorithm, algorithm)
        top.plot(
            [x for x, _, k in rows if k == "round_s"],
            [v for _, v, k in rows if k == "round_s"],
            color=colour,
            linewidth=0.9,
            marker=".",
            markersize=3,  # a run of one round (a slow race's first) is a point, not a line
            label=label,
        )
        bottom.step(
            [x for x, _, k in rows if k == "waiting"],
            [v for _, v, k in rows if k == "waiting"],
            where="post",
            color=colour,
            linewidth=0.9,
        )
    for axes_ in (top, bottom):
        axes_.axvspan(p.burst_start_s, p.burst_end_s, color="grey", alpha=0.15)
        axes_.grid(True, alpha=0.3)
    replay = [m.value for m in measurements if m.metric == "round_s" and m.seed == seed]
    log_time_axis(top, "y", replay, "solver runtime per round")
    legend_below(figure, top)
    bottom.set_ylabel("tasks waiting")
    bottom.set_xlabel("simulated time [s]")
    paths.append(save_figure(figure, out / f"{name}-fig16.png"))
    return paths


FIG8_16 = Experiment[Fig816Params](
    name="fig8-16",
    title="Near oversubscription: relaxation degrades, cost scaling holds, the race follows",
    x_label="utilisation %",
    summary_metrics=("job_round_s",),
    scales={
        "test": Fig816Params(
            snapshot_machines=20,
            utilisations=(0.9, 1.05),
            seeds=(0,),
            replay_machines=20,
            horizon_s=8.0,
            burst_start_s=2.0,
            burst_end_s=4.0,
            replay_seeds=(0,),
        ),
        "quick": Fig816Params(
            snapshot_machines=800,
            utilisations=(0.85, 0.9, 0.95, 0.97, 1.0, 1.03, 1.06),
            seeds=(0, 1, 2),
            replay_machines=400,
            horizon_s=150.0,
            burst_start_s=20.0,
            burst_end_s=50.0,
            replay_seeds=(0,),
        ),
        "full": Fig816Params(
            snapshot_machines=2500,
            utilisations=(0.85, 0.9, 0.93, 0.95, 0.97, 1.0, 1.02, 1.04, 1.06),
            seeds=(0, 1, 2),
            replay_machines=1000,
            horizon_s=240.0,
            burst_start_s=30.0,
            burst_end_s=80.0,
            replay_seeds=(0, 1, 2),
        ),
    },
    describe=_fig816_describe,
    steps=_fig816_steps,
    measure=_fig816_measure,
    claims=_fig816_claims,
    plot=_fig816_plot,
)
