"""Application performance as a function of network latency, as NoMora models it.

The tech report (section 3.2) fits, for each application, a two-piece function of the latency
between the application's root task (server, master) and another of its tasks: the baseline
performance 1 below a threshold latency, and beyond it a polynomial fitted with scipy's
`curve_fit` to the measured performance normalised by the baseline. Its four functions
(equations 2-5; latencies in microseconds, as injected in the testbed, 2 to 1,000 µs):

============  =========  ===========================================================  =====
application   threshold  p(x) for x >= threshold                                      R^2
============  =========  ===========================================================  =====
memcached     40 µs      1.067 - 3.093e-3 x + 4.084e-6 x^2 - 1.898e-9 x^3              0.976
strads        20 µs      1.009 - 2.095e-3 x + 2.571e-6 x^2 - 1.232e-9 x^3              0.994
spark-glm     200 µs     1.0199 - 1.161e-4 x                                           -
tensorflow    40 µs      1.005 - 5.146e-4 x + 5.837e-7 x^2 - 3.46e-10 x^3              0.996
============  =========  ===========================================================  =====

(R^2 from the article; it gives none for Spark, which it leaves out.) A `PerformanceFunction`
evaluates such a function, clamped to [floor, 1]: the paper states that the normalised
performance never drops below 0.1 (section 6, why gamma = 1001), and a fitted polynomial may
overshoot 1 just past its threshold, which would make a worse placement look better than the
baseline.

Section 6: "The predictions are discretised in steps of 10 µs, and are stored in a hash table for
each job. The network latency value between two machines is rounded to the nearest latency value
for which the prediction function has an entry in the hash table. For the latency values ...
outside the interval of defined values, we use the smallest performance value defined for that
function." `PerformanceTable` is that table: entries at 0, 10, ..., `max_latency_us` (1,000 µs,
the range the functions were fitted on), and beyond the last entry the smallest value in it.

Cost (section 5.2, equation 6 and the paragraph after equation 10): d = 1 / p, rounded to two
significant digits, times 100. A performance of 1 costs 100, of 0.1 costs 1,000; every cost is a
multiple of 10 between them. `nomora_cost` computes it exactly (decimal arithmetic, halves
rounded up), and a table precomputes it for each of its entries.

Function files (what `firmament-py nomora fit` writes and the policy loads) are JSON objects:
`{"format": "nomora-performance-function", "version": 1, "name": ..., "threshold_us": ...,
"coefficients": [c0, c1, c2, c3], "floor": 0.1, "max_latency_us": 1000.0}` with optional
`"r_squared"`; coefficients in increasing powers of the latency in microseconds.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = [
    "BUILTIN_FUNCTIONS",
    "FILE_FORMAT",
    "MEMCACHED",
    "SPARK_GLM",
    "STRADS",
    "TABLE_STEP_US",
    "TENSORFLOW",
    "FunctionFileError",
    "PerformanceFunction",
    "PerformanceTable",
    "load_function",
    "nomora_cost",
    "save_function",
]

TABLE_STEP_US = 10.0
"""The paper's discretisation step."""
DEFAULT_FLOOR = 0.1
DEFAULT_MAX_LATENCY_US = 1000.0
FILE_FORMAT = "nomora-performance-function"
FILE_VERSION = 1

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def _finite(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} must be a number, not {type(value).__name__}: {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class PerformanceFunction:
    """Normalised application performance p(latency): 1 below `threshold_us`, beyond it the
    polynomial with `coefficients` (c0, c1, ... in increasing powers of the latency in µs),
    never below `floor` nor above 1. `max_latency_us` is the range it was fitted on, which its
    lookup table covers. Checked when made."""

    name: str
    threshold_us: float
    coefficients: tuple[float, ...]
    floor: float = DEFAULT_FLOOR
    max_latency_us: float = DEFAULT_MAX_LATENCY_US
    r_squared: float | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError(f"a performance function needs a name, got {self.name!r}")
        threshold = _finite("threshold_us", self.threshold_us)
        if threshold < 0:
            raise ValueError(f"threshold_us must not be negative, got {threshold}")
        if not isinstance(self.coefficients, Sequence) or not self.coefficients:
            raise ValueError(
                f"coefficients must be a non-empty sequence, got {self.coefficients!r}"
            )
        coefficients = tuple(
            _finite(f"coefficient {i}", c) for i, c in enumerate(self.coefficients)
        )
        floor = _finite("floor", self.floor)
        if not 0 < floor <= 1:
            raise ValueError(f"floor must lie in (0, 1], got {floor}")
        top = _finite("max_latency_us", self.max_latency_us)
        if top < TABLE_STEP_US:
            raise ValueError(f"max_latency_us must be at least {TABLE_STEP_US:g}, got {top}")
        object.__setattr__(self, "threshold_us", threshold)
        object.__setattr__(self, "coefficients", coefficients)
        object.__setattr__(self, "floor", floor)
        object.__setattr__(self, "max_latency_us", top)
        if self.r_squared is not None:
            object.__setattr__(self, "r_squared", _finite("r_squared", self.r_squared))

    def __call__(self, latency_us: float) -> float:
        """p(latency_us), clamped to [floor, 1]."""
        return float(self.evaluate(np.asarray([latency_us], dtype=np.float64))[0])

    def polynomial(self, latency_us: FloatArray) -> FloatArray:
        """The fitted polynomial alone (no threshold, no clamping)."""
        values: FloatArray = np.asarray(
            np.polynomial.polynomial.polyval(latency_us, self.coefficients), dtype=np.float64
        )
        return values

    def evaluate(self, latency_us: FloatArray) -> FloatArray:
        """p of each latency: 1 below the threshold, the polynomial beyond, within [floor, 1]."""
        x = np.asarray(latency_us, dtype=np.float64)
        value = np.clip(self.polynomial(x), self.floor, 1.0)
        return np.where(x < self.threshold_us, 1.0, value)

    def table(self, step_us: float = TABLE_STEP_US) -> PerformanceTable:
        return PerformanceTable(self, step_us)

    def describe(self) -> str:
        """The function as the paper writes it."""
        terms = []
        for power, c in enumerate(self.coefficients):
            x = "" if power == 0 else (" x" if power == 1 else f" x^{power}")
            terms.append(f"{c:+.4g}{x}")
        polynomial = " ".join(terms).lstrip("+")
        return f"1 for x < {self.threshold_us:g} µs, else max({self.floor:g}, {polynomial})"


def nomora_cost(performance: float) -> int:
    """NoMora's arc cost for a normalised performance in (0, 1]: 1 / p rounded to two
    significant digits (halves up), times 100 (section 5.2), p taken to nine decimals.
    ValueError outside (0, 1]."""
    p = _finite("performance", performance)
    if not 0 < p <= 1:
        raise ValueError(f"a normalised performance lies in (0, 1], got {p}")
    # Nine decimals: a polynomial evaluated in floating point lands a hair off the exact value
    # (p(1000) of equation 2 is 0.16000000000000014), which must not decide a rounding.
    inverse = Decimal(1) / Decimal(repr(round(p, 9)))
    exponent = inverse.adjusted()  # 10 ** exponent <= inverse < 10 ** (exponent + 1)
    rounded = inverse.quantize(Decimal(1).scaleb(exponent - 1), rounding=ROUND_HALF_UP)
    return int(rounded * 100)


class PerformanceTable:
    """A performance function discretised every `step_us` from 0 to its `max_latency_us`
    (section 6). A latency is rounded to the nearest entry (halves up); beyond the last entry
    it gets the table's smallest performance. `costs` are NoMora's cost of each entry."""

    def __init__(self, function: PerformanceFunction, step_us: float = TABLE_STEP_US) -> None:
        step = _finite("step_us", step_us)
        if step <= 0:
            raise ValueError(f"step_us must be positive, got {step}")
        self.function = function
        self.step_us = step
        entries = math.floor(function.max_latency_us / step + 1e-9) + 1
        self.latencies_us: FloatArray = np.arange(entries, dtype=np.float64) * step
        self.performance: FloatArray = function.evaluate(self.latencies_us)
        self.costs: IntArray = np.array(
            [nomora_cost(float(p)) for p in self.performance], dtype=np.int64
        )
        worst = int(np.argmin(self.performance))
        self.beyond_performance = float(self.performance[worst])
        self.beyond_cost = int(self.costs[worst])

    def __repr__(self) -> str:
        return (
            f"PerformanceTable({self.function.name!r}, {len(self.latencies_us)} entries of "
            f"{self.step_us:g} µs)"
        )

    def _index(self, latency_us: FloatArray) -> IntArray:
        """The entry of each latency; len(entries) for those beyond the table."""
        x = np.asarray(latency_us, dtype=np.float64)
        if np.any(~np.isfinite(x)) or np.any(x < 0):
            raise ValueError("latencies must be finite and non-negative")
        index = np.floor(x / self.step_us + 0.5).astype(np.int64)
        return np.minimum(index, len(self.latencies_us))

    def lookup(self, latency_us: FloatArray) -> FloatArray:
        """The tabulated performance of each latency."""
        values = np.append(self.performance, self.beyond_performance)
        return values[self._index(latency_us)]

    def cost(self, latency_us: FloatArray) -> IntArray:
        """NoMora's cost of each latency (100 / tabulated performance, two digits)."""
        values = np.append(self.costs, self.beyond_cost)
        return values[self._index(latency_us)]

    def performance_of(self, latency_us: float) -> float:
        return float(self.lookup(np.asarray([latency_us]))[0])

    def cost_of(self, latency_us: float) -> int:
        return int(self.cost(np.asarray([latency_us]))[0])


MEMCACHED = PerformanceFunction(
    "memcached", 40.0, (1.067, -3.093e-3, 4.084e-6, -1.898e-9), r_squared=0.976
)
"""Equation 2: Memcached (Mutilate, Facebook ETC), queries per second."""
STRADS = PerformanceFunction(
    "strads", 20.0, (1.009, -2.095e-3, 2.571e-6, -1.232e-9), r_squared=0.994
)
"""Equation 3: STRADS Lasso regression, training time."""
SPARK_GLM = PerformanceFunction("spark-glm", 200.0, (1.0199, -1.161e-4))
"""Equation 4: Spark MLlib GLM regression, training time."""
TENSORFLOW = PerformanceFunction(
    "tensorflow", 40.0, (1.005, -5.146e-4, 5.837e-7, -3.46e-10), r_squared=0.996
)
"""Equation 5: TensorFlow MNIST softmax regression, training time."""

BUILTIN_FUNCTIONS: Mapping[str, PerformanceFunction] = {
    f.name: f for f in (MEMCACHED, STRADS, SPARK_GLM, TENSORFLOW)
}
"""The paper's four functions by name."""


# ---------------------------------------------------------------------- files


class FunctionFileError(ValueError):
    """A function file that cannot be read: the message names the file and the problem."""


def function_to_json(function: PerformanceFunction) -> dict[str, Any]:
    data: dict[str, Any] = {
        "format": FILE_FORMAT,
        "version": FILE_VERSION,
        "name": function.name,
        "threshold_us": function.threshold_us,
        "coefficients": list(function.coefficients),
        "floor": function.floor,
        "max_latency_us": function.max_latency_us,
    }
    if function.r_squared is not None:
        data["r_squared"] = function.r_squared
    return data


def save_function(function: PerformanceFunction, path: str | Path) -> Path:
    """Write `function` as a function file (JSON)."""
    path = Path(path)
    path.write_text(json.dumps(function_to_json(function), indent=2) + "\n", encoding="utf-8")
    return path


def load_function(path: str | Path) -> PerformanceFunction:
    """Read a function file; FunctionFileError names the file and what is wrong with it."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise FunctionFileError(f"{path}: cannot read it: {error}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise FunctionFileError(
            f"{path}: line {error.lineno}, column {error.colno}: not JSON ({error.msg})"
        ) from None
    if not isinstance(data, dict):
        raise FunctionFileError(f"{path}: expected a JSON object, got {type(data).__name__}")
    if data.get("format") != FILE_FORMAT:
        raise FunctionFileError(
            f'{path}: not a NoMora performance function ("format" must be {FILE_FORMAT!r}, '
            f"got {data.get('format')!r})"
        )
    if data.get("version") != FILE_VERSION:
        raise FunctionFileError(
            f"{path}: unsupported version {data.get('version')!r} (this reads {FILE_VERSION})"
        )
    missing = [key for key in ("name", "threshold_us", "coefficients") if key not in data]
    if missing:
        raise FunctionFileError(f"{path}: missing {', '.join(map(repr, missing))}")
    known = {"format", "version", "name", "threshold_us", "coefficients", "floor"}
    known |= {"max_latency_us", "r_squared"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise FunctionFileError(f"{path}: unknown field(s) {', '.join(map(repr, unknown))}")
    coefficients = data["coefficients"]
    if not isinstance(coefficients, list):
        raise FunctionFileError(f'{path}: "coefficients" must be a list of numbers')
    try:
        return PerformanceFunction(
            name=data["name"],
            threshold_us=data["threshold_us"],
            coefficients=tuple(coefficients),
            floor=data.get("floor", DEFAULT_FLOOR),
            max_latency_us=data.get("max_latency_us", DEFAULT_MAX_LATENCY_US),
            r_squared=data.get("r_squared"),
        )
    except (TypeError, ValueError) as error:
        raise FunctionFileError(f"{path}: {error}") from None
