"""How the simulator's quantities read in text: a duration in the unit that reads best, a count
with the noun it takes. The tables, the plots' labels and the experiments' claims share them."""

from __future__ import annotations

__all__ = ["format_duration", "plural"]


def format_duration(seconds: float | None) -> str:
    """A duration in the unit that reads best: 240 µs, 12.50 ms, 3.20 s."""
    if seconds is None:
        return "-"
    if seconds == 0:
        return "0 s"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:,.2f} s"


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """`count` and the noun it takes: "1 seed", "3 seeds", "0 races", "1,200 placed tasks";
    `nouns` is the plural when it is not `noun` + "s" ("1 data set" needs no help, "1 box"
    does)."""
    return f"{count:,} {noun if count == 1 else nouns or noun + 's'}"
