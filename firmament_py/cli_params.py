"""Click parameter types the command lines share."""

from __future__ import annotations

import math
from typing import Any

import click

__all__ = ["FiniteFloat", "FiniteFloatRange"]


class FiniteFloatRange(click.FloatRange):
    """`click.FloatRange` that also refuses NaN and the infinities: NaN passes every range
    check (each comparison with it is false), and either would reach the code as a number."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


class FiniteFloat(click.types.FloatParamType):
    """A float option without a range that also refuses NaN and the infinities."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number
