"""The verdicts of NoMora's, Zoe's and the network-task workflows' experiments follow the
numbers: data shaped like each paper's reproduces every claim, and data that contradicts one
claim flips that claim's verdict (and only the outcome the change calls for)."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from firmament_py.nomora.experiment import NOMORA_GOOGLE
from firmament_py.sim.experiment import Claim, Measurement
from firmament_py.sim.verdicts import Outcome, Verdict, every, gain
from firmament_py.workflows.experiment import (
    NETWORK_TASKS,
    ONE_STAGE,
    RANDOM,
    SIMPLE,
    NetworkTasksParams,
)
from firmament_py.zoe.experiment import ZOE_TURNAROUND
from firmament_py.zoe.preemption_experiment import ZOE_PREEMPTION
from firmament_py.zoe.workload import BATCH_ELASTIC, INTERACTIVE


def _outcomes(claims: list[Claim]) -> list[Outcome | None]:
    return [c.verdict.outcome if c.verdict is not None else None for c in claims]


def test_gain_follows_the_difference() -> None:
    assert gain(13.0, 13.0, "c", "points").outcome is Outcome.REPRODUCED
    assert gain(2.0, 13.0, "c", "points").outcome is Outcome.PARTLY
    assert gain(0.0, 13.0, "c", "points").outcome is Outcome.NOT_REPRODUCED
    assert gain(None, 13.0, "c", "points").outcome is Outcome.NOT_MEASURED
    assert "+2 points against the paper's +13" in gain(2.0, 13.0, "c", "points").decided_by


def test_every_adds_up_its_parts() -> None:
    yes = Verdict(Outcome.REPRODUCED, "c", "a")
    no = Verdict(Outcome.NOT_REPRODUCED, "c", "b")
    unknown = Verdict(Outcome.NOT_MEASURED, "c", "n")
    assert every([("x", yes), ("y", yes)], "c").outcome is Outcome.REPRODUCED
    assert every([("x", yes), ("y", no)], "c").outcome is Outcome.PARTLY
    assert every([("x", no), ("y", unknown)], "c").outcome is Outcome.NOT_REPRODUCED
    assert every([("x", unknown)], "c").outcome is Outcome.NOT_MEASURED
    assert (
        every([("x", yes), ("y", no)], "c").decided_by == "x: reproduced, a; y: not reproduced, b"
    )


# ---------------------------------------------------------------------- NoMora

_UNITS = ("", "-unit10", "-unit100")
"""The preemption series' suffixes: 1, 10 and 100 cost units per second."""

_NOMORA: dict[tuple[str, str], float] = {
    ("mean_performance", "random-arc"): 47.2,
    ("mean_performance", "load-spreading"): 46.8,
    ("mean_performance", "nomora"): 60.5,
    ("mean_performance", "nomora-110-115"): 51.85,
    **{("mean_performance", f"nomora-preempt{u}"): 59.0 for u in _UNITS},
    **{("mean_performance", f"nomora-preempt-beta0{u}"): 90.0 for u in _UNITS},
    ("algorithm_p50_s", "random-arc"): 0.150,
    ("algorithm_p50_s", "load-spreading"): 0.151,
    ("algorithm_p50_s", "nomora"): 0.093,
    ("placement_p50_s", "random-arc"): 0.436,
    ("placement_p50_s", "load-spreading"): 0.498,
    ("placement_p50_s", "nomora"): 0.270,
    ("migrated_mean_pct", "nomora-preempt"): 0.02,
    ("migrated_mean_pct", "nomora-preempt-beta0"): 7.1,
}
"""The papers' numbers (a little better where the paper sits on the criterion's edge; the
baselines' median runtime at 150 ms, since the paper's own 108 ms against 93 ms is 1.16x, short
of the 1.61x its section 6.2 states)."""


def _nomora(
    changes: Mapping[tuple[str, str], float] | None = None, without: str = ""
) -> list[Outcome | None]:
    """The paper setting's claims on five seeds of these numbers (a small spread per seed,
    the slowest task 5 points under the mean)."""
    values = {**_NOMORA, **(changes or {})}
    measured = []
    for seed in range(5):
        spread = 0.2 * (seed - 2)
        for (metric, series), v in values.items():
            if series == without:
                continue
            name = f"paper:{series}"
            if metric == "mean_performance":
                measured.append(Measurement(name, 0.0, seed, metric, v + spread))
                measured.append(Measurement(name, 0.0, seed, "slowest_performance", v - 5))
            else:
                measured.append(Measurement(name, 0.0, seed, metric, v))
    claims = NOMORA_GOOGLE.claims(NOMORA_GOOGLE.scales["full"], measured)
    return _outcomes([c for c in claims if c.claim.startswith("[paper setting]")])


def test_nomora_papers_numbers_reproduce_every_claim() -> None:
    assert _nomora() == [Outcome.REPRODUCED] * 8


def _every_unit(series: str, value: float) -> dict[tuple[str, str], float]:
    return {("mean_performance", f"{series}{u}"): value for u in _UNITS}


@pytest.mark.parametrize(
    ("changes", "flipped"),
    [
        # Load-spreading is the nearer baseline now: 4.8 points above it only.
        ({("mean_performance", "load-spreading"): 55.7}, {0: Outcome.PARTLY}),
        (
            {("mean_performance", "load-spreading"): 61.0, ("mean_performance", "random-arc"): 61},
            {0: Outcome.NOT_REPRODUCED, 2: Outcome.PARTLY},  # beta 0 29 points over random
        ),
        ({("mean_performance", "nomora-110-115"): 58.0}, {1: Outcome.PARTLY}),
        ({("mean_performance", "nomora-110-115"): 61.0}, {1: Outcome.NOT_REPRODUCED}),
        # beta 0 27.8 points over random, still 31 over beta = time run.
        (
            {**_every_unit("nomora-preempt-beta0", 75.0), **_every_unit("nomora-preempt", 44.0)},
            {2: Outcome.PARTLY},
        ),
        # The beta = 0 claims are decided by the best unit: one bad unit does not count.
        ({("mean_performance", "nomora-preempt-beta0-unit100"): 45.0}, {}),
        (
            _every_unit("nomora-preempt-beta0", 45.0),
            {2: Outcome.NOT_REPRODUCED, 3: Outcome.NOT_REPRODUCED},
        ),
        (_every_unit("nomora-preempt", 80.0), {3: Outcome.PARTLY}),
        (_every_unit("nomora-preempt", 95.0), {3: Outcome.NOT_REPRODUCED}),
        ({("migrated_mean_pct", "nomora-preempt"): 1.0}, {4: Outcome.PARTLY}),
        ({("migrated_mean_pct", "nomora-preempt-beta0"): 0.0}, {4: Outcome.NOT_REPRODUCED}),
        # No migration at all with beta = time run still gives a ratio (floored at 0.001%).
        ({("migrated_mean_pct", "nomora-preempt"): 0.0}, {}),
        # 1.25x: the abstract's 1.16x holds, section 6.2's 1.61x only partly.
        ({("algorithm_p50_s", "nomora"): 0.120}, {6: Outcome.PARTLY}),
        ({("algorithm_p50_s", "nomora"): 0.140}, {5: Outcome.PARTLY, 6: Outcome.PARTLY}),
        (
            {("algorithm_p50_s", "nomora"): 0.2},
            {5: Outcome.NOT_REPRODUCED, 6: Outcome.NOT_REPRODUCED},
        ),
        ({("placement_p50_s", "nomora"): 0.400}, {7: Outcome.PARTLY}),
        ({("placement_p50_s", "nomora"): 2.0}, {7: Outcome.NOT_REPRODUCED}),
    ],
)
def test_nomora_verdicts_follow_the_numbers(
    changes: dict[tuple[str, str], float], flipped: dict[int, Outcome]
) -> None:
    outcomes = _nomora(changes)
    assert outcomes == [flipped.get(i, Outcome.REPRODUCED) for i in range(8)]


def test_nomora_claims_without_a_series_are_not_measured() -> None:
    outcomes = _nomora(without="load-spreading")
    assert outcomes[0] is Outcome.NOT_MEASURED
    assert outcomes[5:] == [Outcome.NOT_MEASURED] * 3


# ---------------------------------------------------------------------- Zoe

_ZOE: dict[tuple[str, str], float] = {
    ("turnaround_p50_s", "rigid"): 2_000.0,
    ("turnaround_p50_s", "malleable"): 1_100.0,
    ("turnaround_p50_s", "flexible"): 1_000.0,
    ("turnaround_mean_s", "rigid"): 3_000.0,
    ("turnaround_mean_s", "malleable"): 1_200.0,
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
"""Each scheduler's numbers, the same under every sorting policy and load."""


def _zoe(
    changes: Mapping[tuple[str, str], float] | None = None, sort: str | None = None
) -> list[Outcome | None]:
    """The turnaround claims' outcomes, `changes` applied under `sort` only (every sort if
    None)."""
    p = ZOE_TURNAROUND.scales["test"]
    measured = []
    for each in p.sorts:
        values = {**_ZOE, **(changes or {})} if sort in (None, each) else _ZOE
        measured += [
            Measurement(f"{scheduler} {each}", load, 0, metric, v)
            for (metric, scheduler), v in values.items()
            for load in p.loads
        ]
    return _outcomes(ZOE_TURNAROUND.claims(p, measured))


def test_zoe_papers_shape_reproduces_every_turnaround_claim() -> None:
    assert _zoe() == [Outcome.REPRODUCED] * 4


@pytest.mark.parametrize(
    ("changes", "sort", "claim", "expected"),
    [
        ({("turnaround_p50_s", "rigid"): 1_500.0}, None, 0, Outcome.PARTLY),
        ({("turnaround_p50_s", "rigid"): 900.0}, None, 0, Outcome.NOT_REPRODUCED),
        ({("turnaround_p50_s", "rigid"): 900.0}, "sjf", 0, Outcome.PARTLY),  # fifo still halves
        ({("ram_allocated_pct", "flexible"): 33.0}, None, 1, Outcome.PARTLY),
        ({("cpu_allocated_pct", "flexible"): 45.0}, None, 1, Outcome.PARTLY),  # ram still 1.33x
        ({("turnaround_mean_s", "malleable"): 1_050.0}, None, 2, Outcome.PARTLY),
        ({("turnaround_mean_s", "malleable"): 950.0}, None, 2, Outcome.NOT_REPRODUCED),
        ({("waiting_mean", "flexible"): 25.0}, "fifo", 3, Outcome.PARTLY),
        ({("waiting_mean", "flexible"): 25.0}, None, 3, Outcome.NOT_REPRODUCED),
    ],
)
def test_zoe_turnaround_verdicts_follow_the_numbers(
    changes: dict[tuple[str, str], float], sort: str | None, claim: int, expected: Outcome
) -> None:
    outcomes = _zoe(changes, sort)
    assert outcomes[claim] is expected
    assert outcomes[:claim] + outcomes[claim + 1 :] == [Outcome.REPRODUCED] * 3


def test_zoe_malleable_is_judged_against_each_sorts_own_factor() -> None:
    """SJF's paper factor (1.16) is above FIFO's (1.10): 1.13x holds for FIFO only."""
    outcomes = _zoe({("turnaround_mean_s", "malleable"): 1_130.0})
    assert outcomes[2] is Outcome.PARTLY


_PREEMPTION: dict[tuple[str, str], float] = {
    (f"{INTERACTIVE}_queuing_mean_s", "non-preemptive"): 1_800.0,
    (f"{INTERACTIVE}_queuing_mean_s", "preemptive"): 5.0,
    (f"{BATCH_ELASTIC}_queuing_p50_s", "non-preemptive"): 600.0,
    (f"{BATCH_ELASTIC}_queuing_p50_s", "preemptive"): 650.0,
}


def _preemption(changes: Mapping[tuple[str, str], float] | None = None) -> list[Outcome | None]:
    p = ZOE_PREEMPTION.scales["test"]
    values = {**_PREEMPTION, **(changes or {})}
    measured = [Measurement(s, p.load, 0, metric, v) for (metric, s), v in values.items()]
    return _outcomes(ZOE_PREEMPTION.claims(p, measured))


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({}, [Outcome.REPRODUCED, Outcome.REPRODUCED]),
        ({(f"{INTERACTIVE}_queuing_mean_s", "preemptive"): 60.0}, [Outcome.PARTLY] * 1),
        ({(f"{INTERACTIVE}_queuing_mean_s", "preemptive"): 2_000.0}, [Outcome.NOT_REPRODUCED]),
        # Both under a second: no wait either way, nothing cut.
        (
            {
                (f"{INTERACTIVE}_queuing_mean_s", "non-preemptive"): 0.5,
                (f"{INTERACTIVE}_queuing_mean_s", "preemptive"): 0.0,
            },
            [Outcome.NOT_REPRODUCED],
        ),
        ({(f"{BATCH_ELASTIC}_queuing_p50_s", "preemptive"): 900.0}, [None, Outcome.PARTLY]),
        (
            {(f"{BATCH_ELASTIC}_queuing_p50_s", "preemptive"): 2_000.0},
            [None, Outcome.NOT_REPRODUCED],
        ),
        # Two medians of no wait are the same.
        (
            {
                (f"{BATCH_ELASTIC}_queuing_p50_s", "non-preemptive"): 0.0,
                (f"{BATCH_ELASTIC}_queuing_p50_s", "preemptive"): 0.2,
            },
            [None, Outcome.REPRODUCED],
        ),
    ],
)
def test_zoe_preemption_verdicts_follow_the_numbers(
    changes: dict[tuple[str, str], float], expected: list[Outcome | None]
) -> None:
    outcomes = _preemption(changes)
    for got, want in zip(outcomes, expected, strict=False):
        if want is not None:
            assert got is want


# ---------------------------------------------------------------------- network tasks

_SWEEP = NetworkTasksParams(
    machines=(1, 4, 16),
    densities=(0.0, 0.2, 0.5, 0.8, 1.0),
    rhos=(0.0, 2.0),
    seeds=1,
    max_tasks=10,
    mixed_count=2,
    mixed_max_tasks=5,
)
_RATIOS: dict[tuple[str, float], dict[str, float]] = {
    ("machines", 1): {"list": 1.0, "glist": 1.0, "glist-master": 1.0, "partition": 1.0},
    ("machines", 4): {"list": 2.0, "glist": 1.2, "glist-master": 1.3, "partition": 1.4},
    ("machines", 16): {"list": 3.0, "glist": 1.5, "glist-master": 1.6, "partition": 1.7},
    ("density", 0.0): {"list": 2.0, "glist": 1.2, "glist-master": 1.3, "partition": 1.4},
    ("density", 0.2): {"list": 2.0, "glist": 1.2, "glist-master": 1.3, "partition": 1.4},
    ("density", 0.5): {"list": 2.0, "glist": 1.3, "glist-master": 1.3, "partition": 1.1},
    ("density", 0.8): {"list": 2.0, "glist": 1.3, "glist-master": 1.3, "partition": 1.1},
    ("density", 1.0): {"list": 2.0, "glist": 1.3, "glist-master": 1.3, "partition": 1.1},
    ("rho", 0.0): {"list": 1.02, "glist": 1.0, "glist-master": 1.0, "partition": 1.01},
    ("rho", 2.0): {"list": 5.0, "glist": 2.0, "glist-master": 2.1, "partition": 1.5},
}
"""Mean ratios shaped like the paper's figures, the same for every workflow type but 1-stage
MapReduce in Figure 4, where PARTITION beats G-LIST (`_ONE_STAGE_PARTITION`); our variation
(PARTITION choosing k by makespan) measures as PARTITION does."""
_ONE_STAGE_PARTITION = {4.0: 1.1, 16.0: 1.2}
_SEEDS = (0.0, 0.02, -0.02)
"""Three data sets per point, around each ratio, so that the intervals are real ones."""


def _workflows(
    changes: Mapping[tuple[str, str, float, str], float] | None = None,
) -> list[Outcome | None]:
    """The claims' outcomes; `changes` keyed (figure, workflow type, x, algorithm)."""
    kinds = {
        "machines": _SWEEP.figure4_types(),
        "density": _SWEEP.figure5_types(),
        "rho": _SWEEP.figure6_types(),
    }
    measured = []
    for (figure, x), ratios in _RATIOS.items():
        for kind in kinds[figure]:
            for algorithm, value in {**ratios, "partition-makespan": ratios["partition"]}.items():
                if figure == "machines" and kind == ONE_STAGE and "partition" in algorithm:
                    value = _ONE_STAGE_PARTITION.get(x, value)
                value = (changes or {}).get((figure, kind, x, algorithm), value)
                for seed, noise in enumerate(_SEEDS):
                    metric = f"ratio_{figure}_{kind}"
                    measured.append(Measurement(algorithm, x, seed, metric, value + noise))
    return _outcomes(NETWORK_TASKS.claims(_SWEEP, measured))


def test_workflows_papers_shape_reproduces_every_claim() -> None:
    assert _workflows() == [Outcome.REPRODUCED] * 9


@pytest.mark.parametrize(
    ("changes", "claims", "expected"),
    [
        ({("machines", RANDOM, 1, "list"): 1.2}, (0,), Outcome.PARTLY),
        ({("machines", SIMPLE, 16, "partition"): 1.4}, (1,), Outcome.PARTLY),
        # A tie is no win: the difference's interval must lie above 0.
        ({("machines", SIMPLE, 16, "partition"): 1.5}, (1,), Outcome.PARTLY),
        (
            {
                ("machines", SIMPLE, x, algorithm): 1.9
                for x in (4, 16)
                for algorithm in ("glist", "glist-master")
            },
            (1,),
            Outcome.NOT_REPRODUCED,
        ),
        ({("machines", ONE_STAGE, 16, "partition"): 1.6}, (2,), Outcome.NOT_REPRODUCED),
        ({("density", ONE_STAGE, 0.8, "glist"): 1.0}, (3, 4), Outcome.PARTLY),
        ({("density", ONE_STAGE, 1.0, "partition-makespan"): 1.5}, (4,), Outcome.PARTLY),
        ({("density", RANDOM, 0.5, "glist"): 1.0}, (5,), Outcome.PARTLY),
        ({("rho", RANDOM, 2.0, "glist"): 1.4}, (6,), Outcome.PARTLY),
        ({("machines", ONE_STAGE, 16, "list"): 1.0}, (7,), Outcome.PARTLY),
        ({("rho", SIMPLE, 0.0, "partition"): 1.3}, (8,), Outcome.PARTLY),
    ],
)
def test_workflows_verdicts_follow_the_numbers(
    changes: dict[tuple[str, str, float, str], float],
    claims: tuple[int, ...],
    expected: Outcome,
) -> None:
    outcomes = _workflows(changes)
    for index, outcome in enumerate(outcomes):
        assert outcome is (expected if index in claims else Outcome.REPRODUCED), index
