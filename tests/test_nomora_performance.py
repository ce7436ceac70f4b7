"""NoMora's performance functions, lookup tables and costs against values worked out by hand
from the tech report's equations 2-5 and section 5.2's cost rule."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from firmament_py.nomora.performance import (
    BUILTIN_FUNCTIONS,
    MEMCACHED,
    SPARK_GLM,
    STRADS,
    TENSORFLOW,
    FunctionFileError,
    PerformanceFunction,
    load_function,
    nomora_cost,
    save_function,
)


def test_the_cost_rule_of_section_5_2() -> None:
    assert nomora_cost(1.0) == 100  # "For a performance of 1, the cost is 100"
    assert nomora_cost(0.1) == 1000  # "For a performance of 0.1, the cost is 1000"
    assert nomora_cost(0.96) == 100  # 1/0.96 = 1.0417 -> 1.0
    assert nomora_cost(0.95) == 110  # 1/0.95 = 1.0526 -> 1.1
    assert nomora_cost(0.16) == 630  # 6.25 -> 6.3, halves up
    with pytest.raises(ValueError):
        nomora_cost(0.0)
    with pytest.raises(ValueError):
        nomora_cost(1.5)


@pytest.mark.parametrize(
    ("function", "latency_us", "performance", "cost"),
    [
        # eq. 2: 1.067 - 3.093e-3*100 + 4.084e-6*100^2 - 1.898e-9*100^3 = 0.796642
        (MEMCACHED, 100.0, 0.796642, 130),
        (MEMCACHED, 34.0, 1.0, 100),  # below the threshold (the table's entry: 30 µs)
        # at the threshold the cubic takes over: 0.9497...; 1/0.9497 = 1.053 -> 110
        (MEMCACHED, 40.0, 1.067 - 0.12372 + 0.0065344 - 0.000121472, 110),
        (MEMCACHED, 1000.0, 0.16, 630),
        # eq. 3 at 200: 1.009 - 0.419 + 0.10284 - 0.009856 = 0.682984 -> 146.4 -> 150
        (STRADS, 200.0, 0.682984, 150),
        # eq. 4 at 500: 1.0199 - 0.05805 = 0.96185 -> 103.97 -> 100
        (SPARK_GLM, 500.0, 0.96185, 100),
        (SPARK_GLM, 150.0, 1.0, 100),
        # eq. 5 at 1000: 1.005 - 0.5146 + 0.5837 - 0.346 = 0.7281 -> 137.3 -> 140
        (TENSORFLOW, 1000.0, 0.7281, 140),
    ],
)
def test_the_papers_functions_and_their_costs(
    function: PerformanceFunction, latency_us: float, performance: float, cost: int
) -> None:
    assert function(latency_us) == pytest.approx(performance, abs=1e-9)
    assert function.table().cost_of(latency_us) == cost


def test_the_table_rounds_to_the_nearest_10_microseconds_and_uses_the_worst_beyond() -> None:
    table = MEMCACHED.table()
    assert len(table.latencies_us) == 101  # 0, 10, ..., 1000
    assert table.performance_of(34.9) == 1.0  # -> 30 µs, below the threshold
    assert table.performance_of(35.0) == pytest.approx(MEMCACHED(40.0))  # -> 40 µs
    assert table.performance_of(104.0) == pytest.approx(MEMCACHED(100.0))
    # Beyond the table (1,000 µs): the smallest performance defined, not an extrapolation.
    assert table.performance_of(5000.0) == pytest.approx(0.16)
    assert table.cost_of(5000.0) == 630
    assert MEMCACHED.polynomial(np.asarray([1300.0]))[0] < 0  # the cubic would go negative


def test_the_floor_and_the_ceiling_hold() -> None:
    steep = PerformanceFunction("steep", 10.0, (1.2, -0.01))
    assert steep(20.0) == 1.0  # 1.0 by the cubic: capped at the baseline
    assert steep(15.0) == 1.0  # 1.05 by the cubic
    assert steep(500.0) == 0.1  # far below the floor
    assert steep.table().cost_of(500.0) == 1000


@given(
    name=st.sampled_from(sorted(BUILTIN_FUNCTIONS)),
    a=st.floats(min_value=0, max_value=3000, allow_nan=False),
    b=st.floats(min_value=0, max_value=3000, allow_nan=False),
)
def test_tables_are_monotone_and_within_the_floor(name: str, a: float, b: float) -> None:
    table = BUILTIN_FUNCTIONS[name].table()
    low, high = min(a, b), max(a, b)
    assert table.performance_of(low) >= table.performance_of(high)
    assert table.cost_of(low) <= table.cost_of(high)
    for latency in (a, b):
        performance = table.performance_of(latency)
        assert 0.1 <= performance <= 1.0
        assert 100 <= table.cost_of(latency) <= 1000
        assert table.cost_of(latency) % 10 == 0


@given(p=st.floats(min_value=0.1, max_value=1.0), q=st.floats(min_value=0.1, max_value=1.0))
def test_costs_fall_as_performance_rises(p: float, q: float) -> None:
    assert (nomora_cost(p) <= nomora_cost(q)) == (p >= q) or nomora_cost(p) == nomora_cost(q)
    assert abs(nomora_cost(p) - 100 / p) <= 5 * (1 + 100 / p / 1000)


def test_function_files_round_trip(tmp_path: Path) -> None:
    path = save_function(STRADS, tmp_path / "strads.json")
    loaded = load_function(path)
    assert loaded == STRADS
    assert loaded.r_squared == pytest.approx(0.994)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"format": "nomora-performance-function",\n "version": 1,\n "name": }', "line 3, column"),
        ("[1, 2]", "expected a JSON object"),
        ('{"format": "other", "version": 1}', "not a NoMora performance function"),
        ('{"format": "nomora-performance-function", "version": 1, "name": "x"}', "missing"),
        (
            '{"format": "nomora-performance-function", "version": 1, "name": "x", '
            '"threshold_us": -4, "coefficients": [1]}',
            "threshold_us must not be negative",
        ),
        (
            '{"format": "nomora-performance-function", "version": 1, "name": "x", '
            '"threshold_us": 4, "coefficients": [1], "colour": "red"}',
            "unknown field",
        ),
    ],
)
def test_bad_function_files_say_what_is_wrong(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(FunctionFileError, match=message) as error:
        load_function(path)
    assert str(path) in str(error.value)


def test_a_function_file_is_json_with_the_documented_fields(tmp_path: Path) -> None:
    data = json.loads(save_function(MEMCACHED, tmp_path / "m.json").read_text())
    assert data["threshold_us"] == 40.0
    assert data["coefficients"] == [1.067, -3.093e-3, 4.084e-6, -1.898e-9]
    assert data["floor"] == 0.1
