"""The example third-party policy (examples/policy-package, distribution `firmament-binpack`)
installs and runs as any third-party policy would: pip builds it and installs it into a
temporary folder, the entry-point group `firmament_py.policies` then finds it by name, the
scheduler runs it end to end, and the package's own tests pass against the installed copy.

Installing needs a build backend. This environment builds offline when its setuptools can make
wheels by itself (70.1 or later, or an older one beside the `wheel` package); otherwise pip
builds in an isolated environment and fetches setuptools from the package index. A failed
install fails these tests, with pip's output.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import math
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from firmament_py.model import MachineAdded, Resources, TaskCompleted, TaskSubmitted
from firmament_py.scheduler import DeltaKind, Scheduler
from firmament_py.sdk import available_policies, load_policy

PACKAGE = Path(__file__).resolve().parents[1] / "examples" / "policy-package"
SECOND = 1_000_000


def offline_build_possible() -> bool:
    """True if pip can build the package here without fetching a build backend: setuptools
    ships `bdist_wheel` from 70.1 on; before that it needs the `wheel` package."""
    try:
        version = importlib.metadata.version("setuptools")
    except importlib.metadata.PackageNotFoundError:
        return False
    major, minor = (int(part) for part in re.findall(r"\d+", version)[:2])
    return (major, minor) >= (70, 1) or importlib.util.find_spec("wheel") is not None


@pytest.fixture(scope="module")
def package_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A clean copy of the package's source: building in place would leave build/ and
    *.egg-info in the repository."""
    copy = tmp_path_factory.mktemp("binpack") / "source"
    shutil.copytree(
        PACKAGE,
        copy,
        ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build", ".*_cache"),
    )
    return copy


@pytest.fixture(scope="module")
def installed(package_copy: Path) -> Path:
    """The folder pip installed the package into (`pip install --target`)."""
    target = package_copy.parent / "site"
    command = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--no-deps",  # firmament-py is the one under test, already importable
        "--no-input",
        "--disable-pip-version-check",
        "--target",
        str(target),
    ]
    if offline_build_possible():
        command += ["--no-build-isolation", "--no-index"]
    command.append(str(package_copy))
    try:
        completed = subprocess.run(command, capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired as timeout:
        pytest.fail(f"pip install did not finish in {timeout.timeout} s: {command}", pytrace=False)
    if completed.returncode != 0:
        pytest.fail(
            f"pip could not install {PACKAGE} (exit {completed.returncode}):\n"
            f"$ {' '.join(command)}\n{completed.stdout}\n{completed.stderr}",
            pytrace=False,
        )
    return target


@pytest.fixture
def on_path(installed: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The installed folder on sys.path for one test, where importlib.metadata finds its
    dist-info and entry point; the package's modules are forgotten afterwards."""
    monkeypatch.syspath_prepend(str(installed))
    yield installed
    for name in [m for m in sys.modules if m.split(".")[0] == "firmament_binpack"]:
        del sys.modules[name]


def test_pip_installs_the_package_with_its_entry_point_and_type_marker(installed: Path) -> None:
    (dist_info,) = installed.glob("firmament_binpack-*.dist-info")
    entry_points = (dist_info / "entry_points.txt").read_text()
    assert "[firmament_py.policies]" in entry_points
    assert re.search(r"^binpack = firmament_binpack\.policy:BinPackPolicy$", entry_points, re.M)
    assert "Requires-Dist: firmament-py" in (dist_info / "METADATA").read_text()
    assert (installed / "firmament_binpack" / "py.typed").is_file()
    assert (installed / "firmament_binpack" / "policy.py").is_file()


def test_the_installed_policy_is_listed_and_loaded_by_name(on_path: Path) -> None:
    names = available_policies()
    assert "binpack" in names and "trivial" in names  # beside the built-ins
    manager = load_policy("binpack")
    plugin = manager.plugin_manager.get_plugin("binpack")
    assert type(plugin).__name__ == "BinPackPolicy"
    module_file = Path(sys.modules[type(plugin).__module__].__file__ or "")
    assert module_file.is_relative_to(on_path)  # the installed copy, not the source tree
    assert manager.implemented_hooks == {
        "round_started",
        "task_equiv_classes",
        "equiv_class_preference_arcs",
        "equiv_class_to_resource",
    }


def test_scheduler_selected_by_name_packs_tasks_onto_the_fewest_machines(on_path: Path) -> None:
    slots, machines, tasks = 4, 5, 10
    with Scheduler(policy="binpack") as scheduler:
        assert scheduler.policy.name == "binpack"
        for i in range(machines):
            scheduler.handle(
                MachineAdded(
                    time=0,
                    machine_id=f"m{i}",
                    capacity=Resources(cpu_millicores=4000),
                    slots=slots,
                )
            )
        for task_id in range(tasks):
            scheduler.handle(TaskSubmitted(time=0, task_id=task_id, job_id="batch"))
        first, quiet = scheduler.run_until_quiet()
        assert first.count(DeltaKind.PLACE) == tasks and not first.refused
        assert not quiet.decided
        load = {m: len(s.running_task_ids) for m, s in scheduler.state.machines.items()}
        assert sum(1 for n in load.values() if n) == math.ceil(tasks / slots)
        assert load == {"m0": 4, "m1": 4, "m2": 2, "m3": 0, "m4": 0}

        # Two tasks finish on m0; the next two go to the busiest machine with room: m0
        # (2 free) and m2 (2 free) tie on room, and m0 joined first.
        for task_id in list(scheduler.state.machines["m0"].running_task_ids)[:2]:
            scheduler.handle(TaskCompleted(time=SECOND, task_id=task_id))
        for task_id in range(tasks, tasks + 3):
            scheduler.handle(TaskSubmitted(time=SECOND, task_id=task_id, job_id="more"))
        scheduler.run_until_quiet(SECOND)
        load = {m: len(s.running_task_ids) for m, s in scheduler.state.machines.items()}
        assert load == {"m0": 4, "m1": 4, "m2": 3, "m3": 0, "m4": 0}
        scheduler.state.validate()


def test_the_packages_own_tests_pass_against_the_installed_copy(
    package_copy: Path, installed: Path, tmp_path: Path
) -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(installed), env.get("PYTHONPATH")]))
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    completed = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(package_copy)],
        cwd=tmp_path,  # not the source folder, which `python -m` would put on sys.path
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    output = completed.stdout + completed.stderr
    assert completed.returncode == 0, output
    summary = re.search(r"(\d+) passed", output)
    assert summary is not None and int(summary.group(1)) >= 20, output
    assert not re.search(r"\d+ (failed|error|skipped|xfailed|xpassed)", output), output


def test_the_package_type_checks_against_the_installed_firmament_py(package_copy: Path) -> None:
    """A plugin author's `mypy --strict`, run in the package's own folder (outside this
    repository), finds firmament-py as installed here (editable, in CI: a plain path entry) and
    checks the policy against the SDK's types."""
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--cache-dir",
            str(package_copy.parent / "mypy-cache"),
            "firmament_binpack",
        ],
        cwd=package_copy,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert "Success: no issues found" in completed.stdout
