"""Figure 14's verdicts follow the measured numbers (firmament_py.sim.figures.fig14): the
latency factor against Quincy, Firmament's sub-second bounds and the placement quality each
flip when the data says otherwise."""

from __future__ import annotations

import pytest

from firmament_py.sim.experiment import Measurement
from firmament_py.sim.figures import FIG14, Fig14Params
from firmament_py.sim.figures.fig14 import FIRMAMENT, QUINCY
from firmament_py.sim.verdicts import Outcome

PARAMS = Fig14Params(machines=(100, 1_000), duration_s=60.0, seeds=(0, 1))


def _measured(
    fast: dict[str, float], slow: dict[str, float], at: float = 1_000
) -> list[Measurement]:
    return [
        Measurement(series, at, seed, metric, value)
        for series, values in ((FIRMAMENT, fast), (QUINCY, slow))
        for metric, value in values.items()
        for seed in PARAMS.seeds
    ]


GOOD_FAST = {
    "latency_p50_s": 0.2,
    "latency_p75_s": 0.5,
    "latency_p90_s": 1.2,
    "input_on_machine": 0.60,
    "input_in_rack": 0.80,
}
GOOD_SLOW = {
    "latency_p50_s": 30.0,
    "latency_p75_s": 40.0,
    "latency_p90_s": 55.0,
    "input_on_machine": 0.61,
    "input_in_rack": 0.79,
}


def _outcomes(fast: dict[str, float], slow: dict[str, float]) -> list[Outcome]:
    claims = FIG14.claims(PARAMS, _measured(fast, slow))
    return [claim.verdict.outcome for claim in claims if claim.verdict is not None]


def test_the_papers_numbers_reproduce_every_claim() -> None:
    assert _outcomes(GOOD_FAST, GOOD_SLOW) == [Outcome.REPRODUCED] * 3


@pytest.mark.parametrize(
    ("quincy_p50", "expected"),
    [(30.0, Outcome.REPRODUCED), (2.0, Outcome.PARTLY), (0.2, Outcome.NOT_REPRODUCED)],
)
def test_the_factor_follows_quincys_latency(quincy_p50: float, expected: Outcome) -> None:
    assert _outcomes(GOOD_FAST, GOOD_SLOW | {"latency_p50_s": quincy_p50})[0] is expected


@pytest.mark.parametrize(
    ("p50", "p75", "expected"),
    [
        (0.2, 0.5, Outcome.REPRODUCED),
        (0.2, 1.5, Outcome.PARTLY),
        (1.2, 1.5, Outcome.NOT_REPRODUCED),
    ],
)
def test_sub_second_follows_the_percentiles(p50: float, p75: float, expected: Outcome) -> None:
    fast = GOOD_FAST | {"latency_p50_s": p50, "latency_p75_s": p75}
    assert _outcomes(fast, GOOD_SLOW)[1] is expected


@pytest.mark.parametrize(
    ("on_machine", "in_rack", "expected"),
    [
        (0.60, 0.80, Outcome.REPRODUCED),
        (0.40, 0.80, Outcome.PARTLY),
        (0.40, 0.50, Outcome.NOT_REPRODUCED),
    ],
)
def test_quality_follows_the_shares(on_machine: float, in_rack: float, expected: Outcome) -> None:
    fast = GOOD_FAST | {"input_on_machine": on_machine, "input_in_rack": in_rack}
    assert _outcomes(fast, GOOD_SLOW)[2] is expected


def test_only_the_largest_size_decides() -> None:
    measured = _measured(GOOD_FAST, GOOD_SLOW) + _measured(
        GOOD_FAST | {"latency_p50_s": 50.0}, GOOD_SLOW, at=100
    )
    claims = FIG14.claims(PARAMS, measured)
    assert claims[0].verdict is not None and claims[0].verdict.outcome is Outcome.REPRODUCED


def test_nothing_measured_is_said_so() -> None:
    claims = FIG14.claims(PARAMS, [])
    assert [c.verdict.outcome for c in claims if c.verdict] == [Outcome.NOT_MEASURED] * 3
