"""Where and when a result was measured: the code's commit, the date, the machine and the
library versions, written beside every experiment's CSV (`NAME.json`) so that a table rendered
from the CSV later says what it is a measurement of."""

from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

__all__ = ["Provenance", "code_commit", "read_provenance", "write_provenance"]

Provenance = dict[str, Any]
"""A JSON object: experiment, scale, description (the scale's parameters in words), commit
(short hash, "+dirty" when the tree had changes, "unknown" outside a git checkout), date (UTC,
ISO 8601), machine, versions, wall_seconds."""

_LIBRARIES = ("numpy", "numba", "scipy")


def code_commit() -> str:
    """The commit of the code that runs, if it runs from a git checkout. Ask when a run
    starts: a commit made while it runs (its data, say) is not the code it measured."""
    here = Path(__file__).resolve().parent
    try:
        head = subprocess.run(
            ["git", "-C", str(here), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return f"{head}+dirty" if dirty else head


def _machine() -> str:
    return (
        f"{os.cpu_count()} CPUs, {platform.processor() or platform.machine()}, {platform.system()}"
    )


def _versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for name in _LIBRARIES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def write_provenance(
    path: Path, experiment: str, scale: str, description: str, commit: str, wall_seconds: float
) -> Path:
    """Write the provenance of a run that has just ended to `path`: `commit` is
    `code_commit()` as the run started, `description` the scale's parameters as they were (a
    later commit may change what the scale means)."""
    record: Provenance = {
        "experiment": experiment,
        "scale": scale,
        "description": description,
        "commit": commit,
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": _machine(),
        "versions": _versions(),
        "wall_seconds": round(wall_seconds, 3),
    }
    path.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return path


def read_provenance(path: Path) -> Provenance | None:
    """The provenance written at `path`, or None if there is none (runs from before it was
    written); ValueError if the file is there but not a JSON object."""
    if not path.exists():
        return None
    record = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(record, dict):
        raise ValueError(f"{path}: not a provenance record (a JSON object)")
    return record
