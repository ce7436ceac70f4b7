"""The one place that imports numba: a typed decorator for compiled kernels.

Kernels are compiled in nopython mode on first call and their machine code is cached on disk
next to the source, so only the first run after an install or an edit pays for compilation.
numba's own decorators are untyped for mypy; `kernel` keeps the decorated function's signature.

numba keys each cache entry on its own source file only, so a kernel that calls a kernel from
another module keeps running the old callee after that module is edited. `_drop_stale_caches`
guards against this: when any source file of the package changed since the caches were written,
every cached kernel of the package is dropped and recompiled.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, cast

import numba

F = TypeVar("F", bound=Callable[..., Any])

_PACKAGE = Path(__file__).resolve().parent


def _sources_digest(package: Path) -> str:
    digest = hashlib.sha256(numba.__version__.encode())
    for path in sorted(package.rglob("*.py")):
        digest.update(str(path.relative_to(package)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _drop_stale_caches(package: Path) -> bool:
    """Delete `package`'s numba caches if its sources changed since they were written.

    Returns True if it dropped them (or found none to keep).
    """
    stamp = package / "__pycache__" / "numba-sources.sha256"
    with contextlib.suppress(OSError):  # a read-only install keeps whatever it has
        current = _sources_digest(package)
        if stamp.exists() and stamp.read_text() == current:
            return False
        for pattern in ("*.nbi", "*.nbc"):
            for cached in package.rglob(pattern):
                cached.unlink(missing_ok=True)
        stamp.parent.mkdir(exist_ok=True)
        stamp.write_text(current)
    return True


_drop_stale_caches(_PACKAGE)


def kernel(fn: F) -> F:
    """Compile `fn` with numba (nopython mode, on-disk cache)."""
    return cast(F, numba.njit(cache=True)(fn))
