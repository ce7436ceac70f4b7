"""Zoe's claims over many seeds: each is judged on a per-seed paired quantity with its 95%
confidence interval, so that seeds which disagree make a verdict partly even where their mean
reaches the paper's, and seeds which agree reproduce it; the quick and full scales run the
paper's ten seeds."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from types import SimpleNamespace

import numpy as np
import pytest

from firmament_py.sim.experiment import Claim, Measurement
from firmament_py.sim.verdicts import Outcome
from firmament_py.zoe import workload
from firmament_py.zoe.experiment import (
    ZOE_PREEMPTION,
    ZOE_PREEMPTION_PAPER,
    ZOE_TURNAROUND,
    ZOE_TURNAROUND_PAPER,
)
from firmament_py.zoe.measures import zoe_capacity
from firmament_py.zoe.seeds import TEN_SEEDS, gain_pct, paired, reduction_pct
from firmament_py.zoe.workload import BATCH_ELASTIC, INTERACTIVE


@pytest.mark.parametrize(
    "experiment",
    [ZOE_TURNAROUND, ZOE_TURNAROUND_PAPER, ZOE_PREEMPTION, ZOE_PREEMPTION_PAPER],
    ids=lambda e: e.name,
)
def test_quick_and_full_run_ten_seeds(experiment: object) -> None:
    scales = getattr(experiment, "scales")  # noqa: B009 (either experiment's params)
    for scale in ("quick", "full"):
        assert scales[scale].seeds == TEN_SEEDS == tuple(range(10))


def test_paired_values_are_per_seed_and_skip_a_seed_either_side_lacks() -> None:
    rows = [
        Measurement("a", 1.0, 0, "m", 10.0),
        Measurement("b", 1.0, 0, "m", 5.0),
        Measurement("a", 1.0, 1, "m", 10.0),  # no "b" at seed 1
        Measurement("b", 1.0, 2, "m", 2.0),  # no "a" at seed 2
        Measurement("a", 2.0, 0, "m", 99.0),  # another x
    ]
    assert paired(rows, "m", "a", "b", 1.0, reduction_pct) == [50.0]
    assert reduction_pct(0.0, 1.0) != reduction_pct(0.0, 1.0)  # NaN: no baseline to cut
    assert gain_pct(50.0, 60.0) == pytest.approx(20.0)
    # Time-weighted sums of one allocation differ in their last bits: no gain either way.
    assert gain_pct(0.1 + 0.2, 0.3) == 0.0 and not math.copysign(1, gain_pct(0.3, 0.1 + 0.2)) < 0


def _outcomes(claims: list[Claim]) -> list[Outcome | None]:
    return [c.verdict.outcome if c.verdict is not None else None for c in claims]


_TURNAROUND: dict[tuple[str, str], float] = {
    ("turnaround_p50_s", "rigid"): 2_000.0,
    ("turnaround_p50_s", "malleable"): 1_100.0,
    ("turnaround_p50_s", "flexible"): 900.0,
    ("turnaround_mean_s", "rigid"): 3_000.0,
    ("turnaround_mean_s", "malleable"): 1_250.0,
    ("turnaround_mean_s", "flexible"): 1_000.0,
    ("cpu_allocated_pct", "rigid"): 50.0,
    ("cpu_allocated_pct", "malleable"): 60.0,
    ("cpu_allocated_pct", "flexible"): 65.0,
    ("ram_allocated_pct", "rigid"): 30.0,
    ("ram_allocated_pct", "malleable"): 35.0,
    ("ram_allocated_pct", "flexible"): 40.0,
    ("waiting_mean", "rigid"): 20.0,
    ("waiting_mean", "malleable"): 9.0,
    ("waiting_mean", "flexible"): 8.0,
}
"""Each scheduler's numbers, shaped like the paper's, before a seed's scatter."""


def _turnaround(scatter: Mapping[tuple[str, str], Sequence[float]]) -> list[Outcome | None]:
    """The turnaround claims' outcomes over three seeds, `scatter` multiplying one
    (metric, scheduler)'s value seed by seed under every sorting policy."""
    p = ZOE_TURNAROUND.scales["test"]
    rows = [
        Measurement(
            f"{scheduler} {sort}",
            load,
            seed,
            metric,
            value * scatter.get((metric, scheduler), (1.0, 1.0, 1.0))[seed],
        )
        for (metric, scheduler), value in _TURNAROUND.items()
        for sort in p.sorts
        for load in p.loads
        for seed in range(3)
    ]
    return _outcomes(ZOE_TURNAROUND.claims(p, rows))


@pytest.mark.parametrize(
    ("scatter", "claim", "expected"),
    [
        # Flexible's median turnaround 900 s against rigid's 2,000 s, 10x and 0.1x: the mean
        # cut reaches 50% at a near ratio, but one seed goes the other way.
        ({("turnaround_p50_s", "flexible"): (0.1, 0.1, 2.5)}, 0, Outcome.INCONCLUSIVE),
        # Only cpu scattered: its part is inconclusive, ram's reproduced, the claim partly.
        ({("cpu_allocated_pct", "flexible"): (1.6, 1.6, 0.5)}, 1, Outcome.PARTLY),
        ({("turnaround_mean_s", "flexible"): (0.3, 0.3, 1.6)}, 2, Outcome.INCONCLUSIVE),
        ({("waiting_mean", "flexible"): (0.1, 0.1, 3.0)}, 3, Outcome.INCONCLUSIVE),
    ],
)
def test_turnaround_seeds_that_disagree_make_a_claim_inconclusive(
    scatter: dict[tuple[str, str], tuple[float, ...]], claim: int, expected: Outcome
) -> None:
    """The same claims reproduce when every seed agrees; a scatter whose mean still reaches
    the paper's, but whose interval reaches 0, makes its part inconclusive (the seeds cannot
    tell the direction) and leaves the other claims."""
    assert _turnaround({}) == [Outcome.REPRODUCED] * 4
    outcomes = _turnaround(scatter)
    assert outcomes[claim] is expected
    assert outcomes[:claim] + outcomes[claim + 1 :] == [Outcome.REPRODUCED] * 3


def test_turnaround_seeds_that_agree_on_a_smaller_gain_are_partly_and_the_text_names_it() -> None:
    outcomes = _turnaround({("turnaround_p50_s", "flexible"): (1.3, 1.35, 1.4)})
    assert outcomes[0] is Outcome.PARTLY  # 35% to 40% cut, every seed: shorter, not halved
    claims = ZOE_TURNAROUND.claims(ZOE_TURNAROUND.scales["test"], [])
    assert all(c.verdict is not None for c in claims)
    rows = [
        Measurement(f"{s} fifo", 1.3, seed, "turnaround_p50_s", v)
        for seed, (r, f) in enumerate([(2_000.0, 1_000.0), (2_000.0, 800.0)])
        for s, v in (("rigid", r), ("flexible", f))
    ]
    halved = ZOE_TURNAROUND.claims(ZOE_TURNAROUND.scales["test"], rows)[0]
    assert "(95% CI" in halved.ours and "2 seeds" in halved.ours
    assert halved.verdict is not None and "(95% CI" in halved.verdict.decided_by


def _preemption(
    interactive: Sequence[float], batch: Sequence[float]
) -> tuple[list[Outcome | None], list[Claim]]:
    """The preemption claims' outcomes: per seed, interactive applications queue 1,800 s
    without preemption and 1,800 s / 10**`interactive` with it; batch elastic ones 600 s
    without and 600 s x `batch` with."""
    p = ZOE_PREEMPTION.scales["test"]
    rows: list[Measurement] = []
    for seed, (orders, moved) in enumerate(zip(interactive, batch, strict=True)):
        rows += [
            Measurement("non-preemptive", p.load, seed, f"{INTERACTIVE}_queuing_mean_s", 1_800),
            Measurement(
                "preemptive", p.load, seed, f"{INTERACTIVE}_queuing_mean_s", 1_800 / 10**orders
            ),
            Measurement("non-preemptive", p.load, seed, f"{BATCH_ELASTIC}_queuing_p50_s", 600),
            Measurement("preemptive", p.load, seed, f"{BATCH_ELASTIC}_queuing_p50_s", 600 * moved),
        ]
    claims = ZOE_PREEMPTION.claims(p, rows)
    return _outcomes(claims), claims


@pytest.mark.parametrize(
    ("interactive", "batch", "expected"),
    [
        ((2.5, 2.6, 2.4), (1.1, 0.95, 1.05), [Outcome.REPRODUCED, Outcome.REPRODUCED]),
        # Mean 2.3 orders of magnitude, one seed the other way: the interval reaches 0.
        ((3.0, 3.0, 0.2), (1.1, 0.95, 1.05), [Outcome.INCONCLUSIVE, Outcome.REPRODUCED]),
        ((3.0, 3.0, -1.0), (1.1, 0.95, 1.05), [Outcome.INCONCLUSIVE, Outcome.REPRODUCED]),
        # Every seed above 0, the mean short of the paper's 2 orders: partly.
        ((1.0, 1.1, 0.9), (1.1, 0.95, 1.05), [Outcome.PARTLY, Outcome.REPRODUCED]),
        ((-0.5, -0.6, -0.4), (1.1, 0.95, 1.05), [Outcome.NOT_REPRODUCED, Outcome.REPRODUCED]),
        # A geometric mean of 1x, but seeds from 0.5x to 2x: the median is not pinned.
        ((2.5, 2.6, 2.4), (2.0, 0.5, 1.0), [Outcome.REPRODUCED, Outcome.PARTLY]),
        ((2.5, 2.6, 2.4), (1.4, 1.45, 1.5), [Outcome.REPRODUCED, Outcome.PARTLY]),
        ((2.5, 2.6, 2.4), (3.0, 3.1, 2.9), [Outcome.REPRODUCED, Outcome.NOT_REPRODUCED]),
    ],
)
def test_preemption_verdicts_follow_the_seeds(
    interactive: tuple[float, ...], batch: tuple[float, ...], expected: list[Outcome]
) -> None:
    outcomes, claims = _preemption(interactive, batch)
    assert outcomes == expected
    assert all("3 seeds)" in c.ours for c in claims)
    assert all(c.verdict is not None and "3 seeds)" in c.verdict.decided_by for c in claims)


def test_the_size_caps_bind_on_under_one_percent_of_a_full_scale_workload(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """docs/zoe.md ("Kept under both rules"): the caps (cores at a quarter of the cluster, all
    at half) change under 1% of the applications of a full-scale workload. Each application
    is drawn twice from the same generator state, against the cluster and against one with no
    effective bound, and the two compared."""
    capacity = zoe_capacity()
    unbounded = SimpleNamespace(total=capacity.total * 1_000_000)
    draw = workload._application
    capped: list[bool] = []

    def both(rng: np.random.Generator, index: int, category: str, cap: object) -> object:
        state = rng.bit_generator.state
        free = draw(rng, index, category, unbounded)  # type: ignore[arg-type]
        rng.bit_generator.state = state
        application = draw(rng, index, category, capacity)
        capped.append(application.components != free.components)
        return application

    monkeypatch.setattr(workload, "_application", both)
    p = ZOE_TURNAROUND.scales["full"]
    spec = workload.WorkloadSpec(applications=p.applications, load=1.3, interactive_fraction=0)
    workload.generate(spec, capacity, seed=0)
    assert len(capped) == p.applications
    assert 0 < sum(capped) < p.applications / 100
