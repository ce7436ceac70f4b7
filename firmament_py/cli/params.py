"""Click parameter types the command lines share."""

from __future__ import annotations

import math
from typing import Any

import click

__all__ = ["FiniteFloat", "FiniteFloatRange"]


def _finite(
    kind: click.ParamType[Any],
    number: Any,
    value: Any,
    param: click.Parameter | None,
    ctx: click.Context | None,
) -> Any:
    if not math.isfinite(number):
        kind.fail(f"{value!r} is not a finite number", param, ctx)
    return number


class FiniteFloat(click.types.FloatParamType):
    """A float option that also refuses NaN and the infinities: either would reach the code as
    a number."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        return _finite(self, super().convert(value, param, ctx), value, param, ctx)


class FiniteFloatRange(click.FloatRange):
    """`FiniteFloat` within a range (`click.FloatRange`'s checks, which NaN passes: each
    comparison with it is false)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        return _finite(self, super().convert(value, param, ctx), value, param, ctx)
