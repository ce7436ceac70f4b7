"""Fitting NoMora's two-piece model (threshold, then a cubic) with scipy's curve_fit, reading
measurements, and the `nomora` command group."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from firmament_py.nomora.cli import nomora
from firmament_py.nomora.fitting import FitError, Measurements, fit_performance, read_measurements
from firmament_py.nomora.performance import MEMCACHED, load_function

LATENCIES = np.arange(2.0, 1001.0, 10.0)  # as swept on the testbed: 2 µs to 1 ms


def _write(path: Path, latency: np.ndarray, performance: np.ndarray) -> Path:
    rows = ["latency_us,performance"]
    rows += [f"{x!r},{y!r}" for x, y in zip(latency.tolist(), performance.tolist(), strict=True)]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def test_the_papers_memcached_function_is_recovered_from_its_own_values() -> None:
    x = np.concatenate(([2.0, 10.0, 20.0, 30.0], np.arange(40.0, 1001.0, 20.0)))
    y = np.where(x < 40, 1.0, MEMCACHED.polynomial(x))
    result = fit_performance(Measurements(x, y), name="memcached")
    assert result.function.threshold_us == 40.0
    np.testing.assert_allclose(result.function.coefficients, MEMCACHED.coefficients, rtol=1e-6)
    assert result.r_squared == pytest.approx(1.0)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(
    threshold=st.sampled_from([22.0, 52.0, 102.0, 202.0]),
    c1=st.floats(min_value=-3e-3, max_value=-3e-4),
    c2=st.floats(min_value=0.0, max_value=3e-6),
    c3=st.floats(min_value=-1.5e-9, max_value=0.0),
)
def test_the_fit_recovers_known_parameters(
    threshold: float, c1: float, c2: float, c3: float
) -> None:
    c0 = 0.98 - (c1 * threshold + c2 * threshold**2 + c3 * threshold**3)  # p(threshold) = 0.98
    coefficients = (c0, c1, c2, c3)
    beyond = np.polynomial.polynomial.polyval(LATENCIES[threshold <= LATENCIES], coefficients)
    assume(bool(np.all(beyond < 0.99)) and bool(np.all(beyond > 0.05)))
    y = np.where(
        threshold > LATENCIES, 1.0, np.polynomial.polynomial.polyval(LATENCIES, coefficients)
    )
    fitted = fit_performance(Measurements(LATENCIES, y), name="app").function
    assert fitted.threshold_us == threshold
    np.testing.assert_allclose(
        fitted.polynomial(LATENCIES),
        np.polynomial.polynomial.polyval(LATENCIES, coefficients),
        atol=1e-7,
    )
    np.testing.assert_allclose(fitted.coefficients[:2], coefficients[:2], rtol=1e-4, atol=1e-9)


def test_noisy_measurements_fit_with_their_standard_deviations(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    y = np.where(LATENCIES < 40, 1.0, MEMCACHED.polynomial(LATENCIES))
    noisy = y + rng.normal(0, 0.01, size=len(y))
    path = tmp_path / "m.csv"
    lines = ["latency_us,performance,std"]
    lines += [f"{x},{v},0.01" for x, v in zip(LATENCIES.tolist(), noisy.tolist(), strict=True)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = fit_performance(read_measurements(path), name="m")
    assert result.function.threshold_us <= 60.0
    assert result.r_squared > 0.97
    for latency in (100.0, 300.0, 500.0, 900.0):
        assert abs(result.function(latency) - MEMCACHED(latency)) < 0.03


def test_raw_times_are_normalised_by_the_baseline(tmp_path: Path) -> None:
    # A training time of 100 s at the baseline, 125 s where performance is 0.8.
    path = tmp_path / "t.csv"
    path.write_text(
        "latency_us,performance\n2,100\n2,100\n50,100\n400,125\n800,200\n", encoding="utf-8"
    )
    data = read_measurements(path, normalise=True, lower_is_better=True)
    np.testing.assert_allclose(data.performance, [1.0, 1.0, 1.0, 0.8, 0.5])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "the file is empty"),
        ("latency,perf\n1,1\n", "line 1: the header must name"),
        ("latency_us,performance\n1,1\n2,abc\n", "line 3, column 2 \\(performance\\): 'abc'"),
        ("performance,latency_us\n1,-5\n", "line 2, column 2 \\(latency_us\\): a latency"),
        ("latency_us,performance\n1\n", "line 2, column 2 \\(performance\\): missing"),
        ("latency_us,performance\n1,1\n2,1\n", "2 measurement\\(s\\)"),
        ("latency_us,performance,std\n1,1,0\n", "line 2, column 3 \\(std\\)"),
        ("latency_us,performance,stdev\n1,1,1\n", "line 1: .*unknown \\['stdev'\\]"),
        ("latency_us,performance,latency_us\n1,1,1\n", "line 1: .*\\['latency_us'\\] named twice"),
    ],
)
def test_bad_measurement_files_name_the_line_and_column(
    tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(FitError, match=message):
        read_measurements(path)


def test_the_fit_command_prints_the_fit_and_writes_a_function_file(tmp_path: Path) -> None:
    y = np.where(LATENCIES < 40, 1.0, MEMCACHED.polynomial(LATENCIES))
    path = _write(tmp_path / "kv.csv", LATENCIES, y)
    result = CliRunner().invoke(nomora, ["fit", str(path), "--name", "kv"])
    assert result.exit_code == 0, result.output
    assert "threshold    42 µs" in result.output  # the first measured latency at or past 40
    assert "R^2          1.0000" in result.output
    function = load_function(tmp_path / "kv.json")
    assert function.name == "kv"
    assert function.threshold_us == 42.0
    assert json.loads((tmp_path / "kv.json").read_text())["format"] == (
        "nomora-performance-function"
    )


def test_the_fit_command_reports_bad_files_without_a_traceback(tmp_path: Path) -> None:
    path = tmp_path / "bad.csv"
    path.write_text("latency_us,performance\n1,x\n", encoding="utf-8")
    result = CliRunner().invoke(nomora, ["fit", str(path)])
    assert result.exit_code == 1
    assert "line 2, column 2 (performance): 'x' is not a number" in result.output
    assert "Traceback" not in result.output


def test_the_functions_command_lists_the_papers_functions_and_files(tmp_path: Path) -> None:
    from firmament_py.nomora.performance import PerformanceFunction, save_function

    save_function(PerformanceFunction("mine", 30.0, (1.0, -1e-3)), tmp_path / "mine.json")
    result = CliRunner().invoke(nomora, ["functions", str(tmp_path / "mine.json")])
    assert result.exit_code == 0, result.output
    for name in ("memcached", "strads", "spark-glm", "tensorflow", "mine"):
        assert name in result.output
    assert "100 µs: 130" in result.output  # Memcached at 100 µs


def test_the_trace_command_writes_a_trace_set(tmp_path: Path) -> None:
    from firmament_py.nomora.latency import read_traces

    out = tmp_path / "traces.csv"
    result = CliRunner().invoke(
        nomora, ["trace", str(out), "--duration", "20", "--series", "2", "--seed", "3"]
    )
    assert result.exit_code == 0, result.output
    traces = read_traces(out)
    assert traces.steps == 20
    assert [len(traces.names[t]) for t in ("rack", "pod", "cross-pod")] == [2, 2, 2]


@pytest.mark.parametrize("latencies", [[100.0] * 6, [1.0, 1.0, 2.0, 2.0, 3.0, 3.0]])
def test_too_few_distinct_latencies_are_no_fit(latencies: list[float]) -> None:
    """A cubic through one to three latencies fits anything exactly (R^2 1): no model."""
    x = np.asarray(latencies)
    data = Measurements(x, np.linspace(1.0, 0.5, len(x)), None)
    with pytest.raises(FitError, match=r"distinct latenc.*at least 4"):
        fit_performance(data, name="flat")


def test_a_header_with_a_trailing_comma_reads_as_without(tmp_path: Path) -> None:
    path = tmp_path / "export.csv"
    rows = "".join(f"{latency},{1.0 - latency / 1000},\n" for latency in (0, 100, 200, 300, 400))
    path.write_text("latency_us,performance,\n" + rows, encoding="utf-8")
    assert read_measurements(path).latency_us.tolist() == [0, 100, 200, 300, 400]


def test_thresholds_that_leave_fewer_than_four_latencies_are_not_tried() -> None:
    """Seven points at five latencies: a threshold past the second would leave a cubic three
    latencies, which it fits exactly whatever they are; no such threshold may win, and numpy's
    poorly-conditioned warning must not reach the user."""
    x = np.array([0.0, 100, 200, 300, 400, 400, 400])
    y = np.array([1.0, 1.0, 0.9, 0.7, 0.2, 0.25, 0.3])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = fit_performance(Measurements(x, y, None), name="few")
    assert result.function.threshold_us <= 100
