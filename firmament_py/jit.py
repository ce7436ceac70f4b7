"""The one place that imports numba: a typed decorator for compiled kernels.

Kernels are compiled in nopython mode on first call and their machine code is cached on disk
next to the source, so only the first run after an install or an edit pays for compilation.
numba's own decorators are untyped for mypy; `kernel` keeps the decorated function's signature.

numba keys each cache entry on its own source file only, so a kernel that calls a kernel from
another module keeps running the old callee after that module is edited. `_drop_stale_caches`
guards against this: when any module that compiled code depends on changed since the caches
were written, every cached kernel of the package is dropped and recompiled.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, cast

import numba

F = TypeVar("F", bound=Callable[..., Any])

_PACKAGE = Path(__file__).resolve().parent


_IMPORT = re.compile(rb"^\s*from\s+(\w+(?:\.\w+)*)\s+import|^\s*import\s+(\w+(?:\.\w+)*)", re.M)


def _compiled_sources(package: Path) -> list[Path]:
    """The modules compiled code can depend on: those defining kernels, and what they import
    from the package (callees and the constants numba freezes into machine code), transitively.
    Editing any other module (the SDK, the model) keeps the caches."""
    files = {p.resolve(): p.read_bytes() for p in package.rglob("*.py")}
    todo = [p for p, text in files.items() if b"@kernel" in text]
    seen = set(todo)
    while todo:
        for match in _IMPORT.finditer(files[todo.pop()]):
            parts = (match.group(1) or match.group(2)).decode().split(".")
            if parts[0] != package.name:
                continue
            base = package.joinpath(*parts[1:])
            for target in (base.with_suffix(".py"), base / "__init__.py"):
                target = target.resolve()
                if target in files and target not in seen:
                    seen.add(target)
                    todo.append(target)
    return sorted(seen)


def _sources_digest(package: Path) -> str:
    digest = hashlib.sha256(numba.__version__.encode())
    for path in _compiled_sources(package):
        digest.update(str(path.relative_to(package.resolve())).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _numba_cache_dir() -> str:
    """NUMBA_CACHE_DIR as numba read it ("" when caches sit beside the sources)."""
    return str(getattr(numba.config, "CACHE_DIR", ""))


def _cache_files(package: Path) -> list[Path]:
    """numba's cache files for `package`: beside the sources, or under NUMBA_CACHE_DIR."""
    found = [p for pattern in ("*.nbi", "*.nbc") for p in package.rglob(pattern)]
    if _numba_cache_dir():
        # The cache dir mirrors source paths in a way numba keeps private: match by module name
        # (dropping a same-named module's cache of another package only costs a recompile).
        stems = {f"{p.stem}." for p in package.rglob("*.py")}
        for pattern in ("*.nbi", "*.nbc"):
            for p in Path(_numba_cache_dir()).rglob(pattern):
                if any(p.name.startswith(stem) for stem in stems):
                    found.append(p)
    return found


def _drop_stale_caches(package: Path) -> bool:
    """Delete `package`'s numba caches if its sources changed since they were written.

    Returns True if it dropped them. Where the stamp cannot be written (a read-only install)
    nothing is dropped: numba cannot cache there either, or caches elsewhere per file.
    """
    cache_root = Path(_numba_cache_dir() or package)
    stamp = cache_root / "__pycache__" / "firmament-numba-sources.sha256"
    try:
        current = _sources_digest(package)
        if stamp.exists() and stamp.read_text() == current:
            return False
        stamp.parent.mkdir(parents=True, exist_ok=True)
        stamp.write_text(current)
    except OSError:
        return False
    for cached in _cache_files(package):
        with contextlib.suppress(OSError):
            cached.unlink()
    return True


_drop_stale_caches(_PACKAGE)


def kernel(fn: F) -> F:
    """Compile `fn` with numba (nopython mode, on-disk cache)."""
    return cast(F, numba.njit(cache=True)(fn))
