"""Fitting an application's performance function to measurements, as the tech report does
(section 3.2): scipy's `curve_fit` (non-linear least squares, optionally weighted by the
measurements' standard deviations) on the normalised performance against the injected latency.

The model is the paper's two pieces: performance 1 below a threshold latency, a cubic beyond it.
The threshold makes the model discontinuous, so `curve_fit` cannot move it by gradient: every
measured latency (and 0, for no constant part) is tried as the threshold, the cubic is fitted
with `curve_fit` to the measurements at or beyond it (those below count as predicted 1), and
the threshold with the least (weighted) squared error wins. R^2 is that of the whole two-piece
model on every measurement. Latencies are scaled to milliseconds inside the fit so that the
cubic's columns are of similar size; the coefficients come back per microsecond.

Measurements are a CSV file with a header row naming the columns `latency_us` and
`performance`, and optionally `std` (the standard deviation of each measurement); any other
column is refused, so that a misspelt `std` is not silently left out. A fit needs at least four
distinct latencies (a cubic is not determined by fewer).
Performance is normalised (1 = the baseline) unless `normalise` asks to divide by the baseline,
the mean performance at the smallest latency measured (for a metric where lower is better, such
as a training time, `lower_is_better` divides the baseline by each value instead).
"""

from __future__ import annotations

import csv
import math
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from firmament_py.nomora.performance import (
    DEFAULT_FLOOR,
    DEFAULT_MAX_LATENCY_US,
    PerformanceFunction,
)

__all__ = ["FitError", "FitResult", "Measurements", "fit_performance", "read_measurements"]

FloatArray = npt.NDArray[np.float64]

DEGREE = 3
_SCALE_US = 1000.0  # the fit works in milliseconds


class FitError(ValueError):
    """Measurements that cannot be read or fitted; the message says where and why."""


@dataclass(frozen=True)
class Measurements:
    """Latencies (µs), normalised performance, and standard deviations (or None)."""

    latency_us: FloatArray
    performance: FloatArray
    std: FloatArray | None = None


@dataclass(frozen=True)
class FitResult:
    """The fitted function, its R^2 over every measurement, and its residual sum of squares."""

    function: PerformanceFunction
    r_squared: float
    residual_sum_of_squares: float
    points: int


def read_measurements(
    path: str | Path, *, normalise: bool = False, lower_is_better: bool = False
) -> Measurements:
    """Read a measurements CSV (see the module docstring). FitError names the line and column
    of a bad value, or what is missing."""
    path = Path(path)
    try:
        with path.open(newline="", encoding="utf-8") as file:
            rows = list(csv.reader(file))
    except (OSError, UnicodeDecodeError) as error:
        raise FitError(f"{path}: cannot read it: {error}") from None
    except csv.Error as error:
        raise FitError(f"{path}: not a CSV file: {error}") from None
    if not rows:
        raise FitError(f"{path}: the file is empty; expected a header row then measurements")
    header = [name.strip() for name in rows[0]]
    # Columns without a name (a spreadsheet's trailing comma) are no columns.
    columns = {name: index for index, name in enumerate(header) if name}
    missing = [name for name in ("latency_us", "performance") if name not in columns]
    if missing:
        raise FitError(
            f"{path}: line 1: the header must name the columns latency_us and performance "
            f"(and optionally std); missing {', '.join(missing)} in {header}"
        )
    named = [name for name in header if name]
    unknown = [name for name in named if name not in ("latency_us", "performance", "std")]
    twice = sorted({name for name in named if named.count(name) > 1})
    if unknown or twice:
        problem = f"unknown {unknown}" if unknown else f"{twice} named twice"
        raise FitError(
            f"{path}: line 1: the columns are latency_us, performance and optionally std; "
            f"{problem} in {header}"
        )
    wanted = ["latency_us", "performance"] + (["std"] if "std" in columns else [])
    values: dict[str, list[float]] = {name: [] for name in wanted}
    for line, row in enumerate(rows[1:], start=2):
        if not row or all(not cell.strip() for cell in row):
            continue
        for name in wanted:
            column = columns[name]
            where = f"{path}: line {line}, column {column + 1} ({name})"
            if column >= len(row):
                raise FitError(f"{where}: missing (the row has {len(row)} columns)")
            text = row[column].strip()
            try:
                value = float(text)
            except ValueError:
                raise FitError(f"{where}: {text!r} is not a number") from None
            if not math.isfinite(value):
                raise FitError(f"{where}: {text!r} is not a finite number")
            if name == "latency_us" and value < 0:
                raise FitError(f"{where}: a latency cannot be negative ({text})")
            if name == "std" and value <= 0:
                raise FitError(f"{where}: a standard deviation must be positive ({text})")
            if name == "performance" and (value <= 0 if normalise else value < 0):
                raise FitError(f"{where}: performance {text} is not positive")
            values[name].append(value)
    latency = np.asarray(values["latency_us"], dtype=np.float64)
    performance = np.asarray(values["performance"], dtype=np.float64)
    std = np.asarray(values["std"], dtype=np.float64) if "std" in values else None
    if len(latency) < DEGREE + 2:
        raise FitError(
            f"{path}: {len(latency)} measurement(s); a threshold and a cubic need at least "
            f"{DEGREE + 2}"
        )
    if normalise:
        baseline = float(np.mean(performance[latency == latency.min()]))
        if lower_is_better:
            if std is not None:
                std = std * baseline / performance**2
            performance = baseline / performance
        else:
            performance = performance / baseline
            std = None if std is None else std / baseline
    return Measurements(latency, performance, std)


def _cubic(x: FloatArray, c0: float, c1: float, c2: float, c3: float) -> FloatArray:
    return c0 + x * (c1 + x * (c2 + x * c3))


def _fit_cubic(
    x: FloatArray, y: FloatArray, sigma: FloatArray | None
) -> npt.NDArray[np.float64] | None:
    """Coefficients (in milliseconds) of the least-squares cubic through (x, y), by curve_fit."""
    from scipy.optimize import curve_fit  # type: ignore[import-untyped, unused-ignore]

    with warnings.catch_warnings():
        # An exact fit has no covariance to estimate, and a close one a poorly conditioned start.
        warnings.simplefilter("ignore")
        weights = None if sigma is None else 1 / sigma
        start = np.polynomial.polynomial.polyfit(x, y, DEGREE, w=weights)
        try:
            fitted: Any = curve_fit(_cubic, x, y, p0=start, sigma=sigma, maxfev=10_000)
        except (RuntimeError, ValueError):
            return None
    return np.asarray(fitted[0], dtype=np.float64)


def fit_performance(
    measurements: Measurements,
    *,
    name: str,
    floor: float = DEFAULT_FLOOR,
    max_latency_us: float | None = None,
) -> FitResult:
    """Fit the two-piece model (see the module docstring). `max_latency_us` (default: the
    largest measured latency, at least 1,000 µs as in the paper) is the range the policy's
    lookup table will cover. FitError if no threshold leaves enough points for the cubic."""
    x_us, y, sigma = measurements.latency_us, measurements.performance, measurements.std
    distinct = len(np.unique(x_us))
    if distinct < DEGREE + 1:
        raise FitError(
            f"the measurements have {distinct} distinct latenc{'y' if distinct == 1 else 'ies'}; "
            f"a cubic in the latency needs at least {DEGREE + 1}"
        )
    order = np.argsort(x_us, kind="stable")
    x_us, y = x_us[order], y[order]
    sigma = None if sigma is None else sigma[order]
    x = x_us / _SCALE_US
    weights = np.ones_like(y) if sigma is None else 1 / sigma**2
    candidates = [0.0, *sorted(set(x_us.tolist()))]
    best: tuple[float, float, FloatArray] | None = None
    for threshold in candidates:
        beyond = x_us >= threshold
        if len(np.unique(x_us[beyond])) < DEGREE + 1:  # a cubic needs four distinct latencies
            continue
        coefficients = _fit_cubic(x[beyond], y[beyond], None if sigma is None else sigma[beyond])
        if coefficients is None:
            continue
        predicted = np.where(beyond, _cubic(x, *coefficients), 1.0)
        error = float(np.sum(weights * (y - predicted) ** 2))
        if best is None or error < best[0] - 1e-15 * max(1.0, best[0]):
            best = (error, threshold, coefficients)
    if best is None:
        raise FitError("no threshold leaves the four measurements a cubic needs beyond it")
    _, threshold, scaled = best
    per_us = tuple(float(c) / _SCALE_US**power for power, c in enumerate(scaled))
    predicted = np.where(x_us >= threshold, _cubic(x, *scaled), 1.0)
    residual = float(np.sum((y - predicted) ** 2))
    total = float(np.sum((y - y.mean()) ** 2))
    r_squared = 1.0 - residual / total if total > 0 else (1.0 if residual == 0 else 0.0)
    top = (
        max(DEFAULT_MAX_LATENCY_US, float(x_us.max())) if max_latency_us is None else max_latency_us
    )
    function = PerformanceFunction(
        name=name,
        threshold_us=threshold,
        coefficients=per_us,
        floor=floor,
        max_latency_us=top,
        r_squared=r_squared,
    )
    return FitResult(function, r_squared, residual, len(y))
