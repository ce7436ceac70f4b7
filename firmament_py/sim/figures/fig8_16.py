"""Firmament's Figures 8 and 16 as one experiment, `fig8-16` (OSDI '16, section 7.3; the
framework is `firmament_py.sim.experiment`): near oversubscription, relaxation degrades, cost
scaling holds and the race follows. This module holds the parameters and the experiment's
record; Figure 8's snapshot is measured, judged and drawn in `fig8`, Figure 16's replay over
time in `fig16`. Both drive generated Quincy-shaped graphs directly, so that every algorithm
meets the very same graph and only the solve is timed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from firmament_py.sim.experiment import (
    Claim,
    Experiment,
    Measurement,
    Tracker,
)
from firmament_py.sim.figures import fig8, fig16
from firmament_py.sim.figures.series import (
    count_seeds,
    format_span,
    warm_up_series,
)


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
    algorithms: tuple[str, ...] = ("relaxation", "cost-scaling", "race", "firmament-race")
    race: str = "firmament-race"
    """The race the claims judge: Firmament's (relaxation from scratch against incremental cost
    scaling, section 6.1), the paper's configuration; ours runs beside it."""

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
    return fig8.measure(p, tracker) + fig16.measure(p, tracker)


def _fig816_claims(p: Fig816Params, measurements: list[Measurement]) -> list[Claim]:
    return fig8.claims(p, measurements) + fig16.claims(p, measurements)


def _fig816_plot(
    p: Fig816Params, measurements: list[Measurement], out: Path, name: str
) -> list[Path]:
    return [fig8.plot(p, measurements, out, name), fig16.plot(p, measurements, out, name)]


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
