"""The guard against numba's per-file cache keys: editing any module drops every cached kernel."""

from __future__ import annotations

from pathlib import Path

import numba
import pytest

from firmament_py.jit import _drop_stale_caches


def _package(tmp_path: Path) -> Path:
    package = tmp_path / "pkg"
    (package / "__pycache__").mkdir(parents=True)
    (package / "kernels.py").write_text("@kernel\ndef f(): return 1\n")
    (package / "caller.py").write_text(
        f"from {package.name}.kernels import f\n@kernel\ndef g(): return f()\n"
    )
    (package / "limits.py").write_text("LIMIT = 1\n")  # imported by no kernel module
    (package / "sdk.py").write_text("def hook(): pass\n")
    return package


def _cache_files(package: Path) -> list[str]:
    return sorted(p.name for p in package.rglob("*.nb?"))


def test_caches_survive_while_sources_are_unchanged(tmp_path: Path) -> None:
    package = _package(tmp_path)
    assert _drop_stale_caches(package)  # first sight: no stamp yet
    (package / "__pycache__" / "caller.g-1.py311.nbi").write_bytes(b"index")
    (package / "__pycache__" / "caller.g-1.py311.1.nbc").write_bytes(b"code")
    assert not _drop_stale_caches(package)
    assert _cache_files(package) == ["caller.g-1.py311.1.nbc", "caller.g-1.py311.nbi"]


def test_editing_another_module_drops_the_callers_cache(tmp_path: Path) -> None:
    package = _package(tmp_path)
    _drop_stale_caches(package)
    (package / "__pycache__" / "caller.g-1.py311.nbi").write_bytes(b"index")
    (package / "kernels.py").write_text("@kernel\ndef f(): return 2\n")  # the callee changes
    assert _drop_stale_caches(package)
    assert _cache_files(package) == []
    assert not _drop_stale_caches(package)  # and the new stamp holds


def test_caches_under_numba_cache_dir_are_dropped_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = _package(tmp_path)
    elsewhere = tmp_path / "numba-cache" / "pkg_abc123"
    elsewhere.mkdir(parents=True)
    monkeypatch.setattr(numba.config, "CACHE_DIR", str(tmp_path / "numba-cache"))
    _drop_stale_caches(package)
    (elsewhere / "caller.g-1.py311.nbi").write_bytes(b"index")
    (elsewhere / "unrelated.h-1.py311.nbi").write_bytes(b"another package's")
    (package / "kernels.py").write_text("@kernel\ndef f(): return 3\n")
    assert _drop_stale_caches(package)
    assert sorted(p.name for p in elsewhere.iterdir()) == ["unrelated.h-1.py311.nbi"]


def test_editing_code_that_no_kernel_uses_keeps_the_caches(tmp_path: Path) -> None:
    package = _package(tmp_path)
    _drop_stale_caches(package)
    (package / "__pycache__" / "caller.g-1.py311.nbi").write_bytes(b"index")
    (package / "sdk.py").write_text("def hook(): return 1\n")
    (package / "limits.py").write_text("LIMIT = 2\n")
    assert not _drop_stale_caches(package)
    assert _cache_files(package) == ["caller.g-1.py311.nbi"]


def test_editing_a_module_a_kernel_imports_drops_the_caches(tmp_path: Path) -> None:
    package = _package(tmp_path)
    (package / "caller.py").write_text(
        f"from {package.name}.limits import LIMIT\n@kernel\ndef g(): return LIMIT\n"
    )
    _drop_stale_caches(package)
    (package / "__pycache__" / "caller.g-1.py311.nbi").write_bytes(b"index")
    (package / "limits.py").write_text("LIMIT = 2\n")  # a constant numba froze into g
    assert _drop_stale_caches(package)
    assert _cache_files(package) == []
