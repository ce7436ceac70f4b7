"""The one place that imports numba: a typed decorator for compiled kernels.

Kernels are compiled in nopython mode on first call and their machine code is cached on disk
next to the source, so only the first run after an install or an edit pays for compilation.
numba's own decorators are untyped for mypy; `kernel` keeps the decorated function's signature.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

import numba

F = TypeVar("F", bound=Callable[..., Any])


def kernel(fn: F) -> F:
    """Compile `fn` with numba (nopython mode, on-disk cache)."""
    return cast(F, numba.njit(cache=True)(fn))
