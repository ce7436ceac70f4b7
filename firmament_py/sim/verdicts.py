"""Whether a paper's claim held in our measurements, decided from the measured numbers against a
criterion stated beside the verdict, never written in advance.

A `Verdict` says the outcome (reproduced, partly, not reproduced), the criterion in words and
the numbers that decided it. The functions below are the criteria the experiments use, each a
plain rule over numbers: in how many of the cases a property held (`share`), whether a ratio
reaches the paper's factor in the paper's direction (`factor`), whether a difference reaches the
paper's (`gain`, or `gain_interval` over seeds with a confidence interval from
`mean_interval`), whether a value falls within a factor of the paper's (`near`), and how parts
judged apart add up (`every`). An experiment's claim code measures, picks a criterion and
passes the numbers; tests feed the same code numbers that must flip the outcome.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass

from firmament_py.sim.wording import plural

__all__ = [
    "Interval",
    "Outcome",
    "Verdict",
    "every",
    "factor",
    "gain",
    "gain_interval",
    "mean_interval",
    "near",
    "share",
]


class Outcome(enum.Enum):
    """How far a claim held."""

    REPRODUCED = "reproduced"
    PARTLY = "partly"
    NOT_REPRODUCED = "not reproduced"
    INCONCLUSIVE = "inconclusive"
    """Measured over seeds, and the seeds cannot tell the direction (`gain_interval`)."""
    NOT_MEASURED = "not measured"


@dataclass(frozen=True)
class Verdict:
    """The outcome, the criterion it was decided by, and the measured numbers that decided it."""

    outcome: Outcome
    criterion: str
    decided_by: str

    def __str__(self) -> str:
        return f"{self.outcome.value}: {self.criterion} ({self.decided_by})"


def share(
    held: int, cases: int, criterion: str, case: str, cases_noun: str | None = None
) -> Verdict:
    """Reproduced if the property held in every case, partly in some, not in none; `case`
    names one case ("size"), `cases_noun` the plural where it is not `case` + "s"."""
    what = plural(cases, case, cases_noun).partition(" ")[2]
    if cases <= 0:
        return Verdict(
            Outcome.NOT_MEASURED, criterion, f"no {plural(0, case, cases_noun)[2:]} measured"
        )
    if held == cases:
        outcome = Outcome.REPRODUCED
    elif held > 0:
        outcome = Outcome.PARTLY
    else:
        outcome = Outcome.NOT_REPRODUCED
    return Verdict(outcome, criterion, f"held at {held:,} of {cases:,} {what}")


def factor(ratio: float | None, paper: float, criterion: str) -> Verdict:
    """A ratio that the paper puts at `paper` (> 1: the claim's side wins by that factor):
    reproduced at `paper` or more, partly above 1 (the same direction, a smaller gap), not
    reproduced at 1 or below (no gap, or the other way)."""
    if ratio is None or not math.isfinite(ratio):
        return Verdict(Outcome.NOT_MEASURED, criterion, "no ratio measured")
    if ratio >= paper:
        outcome = Outcome.REPRODUCED
    elif ratio > 1:
        outcome = Outcome.PARTLY
    else:
        outcome = Outcome.NOT_REPRODUCED
    return Verdict(outcome, criterion, f"measured {ratio:.3g}x against the paper's {paper:g}x")


def gain(difference: float | None, paper: float, criterion: str, unit: str) -> Verdict:
    """A difference that the paper puts at `paper` (> 0, in `unit`: "points"): reproduced at
    `paper` or more, partly above 0 (the same direction, a smaller gain), not reproduced at 0 or
    below."""
    if difference is None or not math.isfinite(difference):
        return Verdict(Outcome.NOT_MEASURED, criterion, "no difference measured")
    if difference >= paper:
        outcome = Outcome.REPRODUCED
    elif difference > 0:
        outcome = Outcome.PARTLY
    else:
        outcome = Outcome.NOT_REPRODUCED
    return Verdict(
        outcome, criterion, f"measured {difference:+.3g} {unit} against the paper's {paper:+g}"
    )


def every(parts: Sequence[tuple[str, Verdict]], criterion: str) -> Verdict:
    """Parts of one claim judged apart (per sorting policy, per metric), each named: reproduced
    if every measured part is, not reproduced if every part the measurements decide is not,
    inconclusive if they decide none, partly between; not measured if no part was measured.
    An inconclusive part keeps a claim from being reproduced but not from being refuted by the
    parts that are decided."""
    measured = [(name, v) for name, v in parts if v.outcome is not Outcome.NOT_MEASURED]
    decided_by = "; ".join(f"{name}: {v.outcome.value}, {v.decided_by}" for name, v in parts)
    outcomes = {v.outcome for _, v in measured}
    decided = outcomes - {Outcome.INCONCLUSIVE}
    if not measured:
        outcome = Outcome.NOT_MEASURED
    elif outcomes == {Outcome.REPRODUCED}:
        outcome = Outcome.REPRODUCED
    elif not decided:
        outcome = Outcome.INCONCLUSIVE
    elif decided == {Outcome.NOT_REPRODUCED}:
        outcome = Outcome.NOT_REPRODUCED
    else:
        outcome = Outcome.PARTLY
    return Verdict(outcome, criterion, decided_by or "no part measured")


def near(value: float | None, paper: float, within: float, criterion: str) -> Verdict:
    """A quantity the paper measured at `paper`: reproduced within a factor `within` of it,
    partly within `within` squared, not reproduced beyond."""
    if value is None or not math.isfinite(value) or value <= 0 or paper <= 0:
        return Verdict(Outcome.NOT_MEASURED, criterion, "no value measured")
    off = max(value / paper, paper / value)
    if off <= within:
        outcome = Outcome.REPRODUCED
    elif off <= within * within:
        outcome = Outcome.PARTLY
    else:
        outcome = Outcome.NOT_REPRODUCED
    return Verdict(outcome, criterion, f"measured {value:.3g} against the paper's {paper:.3g}")


@dataclass(frozen=True)
class Interval:
    """The mean of a quantity measured once per seed and its two-sided confidence interval
    (Student's t over the seeds: the seeds are independent runs, too few for a normal
    approximation). With one seed the interval is the point itself and `n` says so."""

    mean: float
    low: float
    high: float
    n: int
    level: float = 0.95

    def __str__(self) -> str:
        if self.n < 2:
            return f"{self.mean:.3g} (one seed, no interval)"
        return (
            f"{self.mean:.3g} ({self.level:.0%} CI {self.low:.3g} to {self.high:.3g}, "
            f"{self.n} seeds)"
        )


def mean_interval(values: Sequence[float], level: float = 0.95) -> Interval | None:
    """The mean of `values` (one per seed) with its `level` confidence interval; None if there
    are no finite values."""
    # scipy only where an interval is asked for: it is slow to import.
    from scipy import stats  # type: ignore[import-untyped, unused-ignore]

    finite = [float(v) for v in values if math.isfinite(v)]
    if not finite:
        return None
    n = len(finite)
    mean = math.fsum(finite) / n
    if n < 2:
        return Interval(mean, mean, mean, n, level)
    sd = math.sqrt(math.fsum((v - mean) ** 2 for v in finite) / (n - 1))
    half = float(stats.t.ppf(0.5 + level / 2, n - 1)) * sd / math.sqrt(n)
    return Interval(mean, mean - half, mean + half, n, level)


def gain_interval(interval: Interval | None, paper: float, criterion: str, unit: str) -> Verdict:
    """A per-seed difference that the paper puts at `paper` (> 0, in `unit`), judged with its
    confidence interval: reproduced if the mean reaches `paper` and the whole interval lies
    above 0; partly if the whole interval lies above 0 but the mean falls short (a smaller
    gain); not reproduced if the whole interval lies at or below 0 (no gain, or the other way);
    inconclusive if the interval reaches both sides of 0: the seeds cannot tell the direction,
    and the sign of the mean alone would decide on noise."""
    if interval is None or not math.isfinite(interval.mean):
        return Verdict(Outcome.NOT_MEASURED, criterion, "no difference measured")
    if interval.low > 0:
        outcome = Outcome.REPRODUCED if interval.mean >= paper else Outcome.PARTLY
    elif interval.high <= 0:
        outcome = Outcome.NOT_REPRODUCED
    else:
        outcome = Outcome.INCONCLUSIVE
    return Verdict(outcome, criterion, f"measured {interval} {unit} against the paper's {paper:+g}")
