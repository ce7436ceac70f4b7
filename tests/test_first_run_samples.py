"""What a new user meets first, held to what it promises.

The Google trace sample that ships with the package: `firmament-py simulate --trace` over it,
with the default duration, must show the trace reader at work (tasks arriving and finishing all
through the run, machines coming and going, a queue now and then), not one round and three
tasks. And the sample must ship: a wheel built from the source holds it, beside every module
and the type marker, and building one draws no setuptools warning about data directories that
are not declared as packages (current setuptools prints some forty lines for each).
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
import zipfile
from collections import Counter
from importlib.resources import files
from pathlib import Path

from click.testing import CliRunner

from firmament_py.cli import main

SAMPLE = Path(str(files("firmament_py.sim") / "data" / "google_sample"))
ROOT = Path(__file__).resolve().parents[1]
SECOND = 1_000_000
STRETCH = 100 * SECOND
"""The default run's ten minutes, looked at in stretches of this length."""


def test_the_default_run_over_the_shipped_sample_shows_the_trace_at_work(tmp_path: Path) -> None:
    """`firmament-py simulate --trace <the sample> --policy load-spreading`, the duration left
    to its default. No wall-clock accounting (rounds take no simulated time), so the run is the
    same every time and the counts below are the sample's, not the machine's."""
    out = tmp_path / "run"
    result = CliRunner().invoke(
        main,
        [
            *("simulate", "--trace", str(SAMPLE), "--policy", "load-spreading"),
            *("--accounting", "none", "--no-plots", "--quiet", "--out", str(out)),
        ],
    )
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["simulated_seconds"] == 600
    assert summary["tasks_submitted"] >= 400 and summary["tasks_placed"] >= 400
    assert summary["tasks_completed"] >= 200
    assert summary["rounds"] >= 300
    assert summary["tasks_removed"] > 0  # kills replayed
    assert summary["evictions"] > 0  # a machine left with tasks on it
    # Most tasks are placed as they arrive; a few wait for a slot, some for many seconds.
    latency = summary["placement_latency_s"]
    assert latency["p90"] < 1 and latency["p99"] > 5, latency

    tasks = list(csv.DictReader((out / "tasks.csv").open()))
    arrived = Counter(int(task["submit_us"]) // STRETCH for task in tasks)
    completed = Counter(
        int(task["finish_us"]) // STRETCH for task in tasks if task["end_state"] == "completed"
    )
    for stretch in range(6):
        assert arrived[stretch] >= 20 and completed[stretch] >= 20, (stretch, arrived, completed)
    rounds = list(csv.DictReader((out / "rounds.csv").open()))
    assert len({row["machines"] for row in rounds}) > 1  # machines join and leave


def source_copy(destination: Path) -> Path:
    """What a wheel is built from, copied: building in place would leave build/ and *.egg-info
    in the repository. The two symbolic links that give policies/ and plugins/ their installed
    names are copied as links."""
    destination.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, destination / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", ".*_cache")
    for folder in ("firmament_py", "policies", "plugins"):
        shutil.copytree(ROOT / folder, destination / folder, ignore=ignore)
    for link in ("firmament_policies", "firmament_plugins"):
        os.symlink(os.readlink(ROOT / link), destination / link)
    return destination


def test_a_wheel_ships_the_sample_every_module_and_no_packaging_warning(tmp_path: Path) -> None:
    """The build backend is called directly, as pip calls it (PEP 517), so that its warnings are
    seen whatever pip shows of them."""
    source = source_copy(tmp_path / "source")
    out = tmp_path / "wheel"
    build = (
        "import sys; from setuptools import build_meta; print(build_meta.build_wheel(sys.argv[1]))"
    )
    completed = subprocess.run(
        [sys.executable, "-c", build, str(out)],
        cwd=source,
        capture_output=True,
        text=True,
        timeout=300,
    )
    output = completed.stdout + completed.stderr
    assert completed.returncode == 0, output
    assert "absent from the `packages` configuration" not in output, output

    (wheel,) = out.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        shipped = set(archive.namelist())
    installed_as = {"firmament_py": "firmament_py", "policies": "firmament_policies"}
    installed_as["plugins"] = "firmament_plugins"
    expected = {"firmament_py/py.typed"}
    for folder, name in installed_as.items():
        for module in (source / folder).rglob("*.py"):
            expected.add(f"{name}/{module.relative_to(source / folder).as_posix()}")
    parts = sorted(SAMPLE.glob("*/part-*.csv.gz"))
    assert {part.parent.name for part in parts} == {"machine_events", "job_events", "task_events"}
    expected |= {f"firmament_py/sim/data/google_sample/{p.parent.name}/{p.name}" for p in parts}
    assert expected <= shipped, sorted(expected - shipped)
    assert {name.split("/")[0] for name in shipped} == {
        *installed_as.values(),
        wheel.name.split("-py3")[0] + ".dist-info",
    }
