"""The benchmarks' headline: one command measures today's figures at the current commit, and
renders them as the table at the top of docs/benchmarks.md.

    python bench/headline.py            # the full run, 10 to 15 minutes on 2 cores: data to
                                        # docs/data/headline-<date>-<commit>/, then the doc
    python bench/headline.py --quick    # everything at a tiny scale (a smoke test): prints the
                                        # table, writes to a temporary folder, touches no doc
    python bench/headline.py --render docs/data/headline-2026-11-28-da5968a  # data -> doc

Each measurement is one of the existing scripts (bench/solvers.py, bench/round_cost.py,
bench/daemon_ingest.py) run as a subprocess with its own options, each repeating itself and
reporting every repetition, or `firmament-py --help` timed here. Their raw output (stdout, and
bench/solvers.py's --json rows) goes to the data folder beside `run.json`, which records the
commit, the machine, every command line and how long each took. Rendering reads nothing but that
folder, so every number in the table comes from committed data; a --quick folder is never
rendered into the doc. Commit the data folder with the doc.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Reading a data folder and rendering it: beside this file, on the path when it runs as a script.
from headline_table import REPO, DataError, into_doc, render, shown_path

DOC = REPO / "docs" / "benchmarks.md"
CLI_RUNS = {"full": 7, "quick": 2}


# ---------------------------------------------------------------------- what is measured


@dataclass(frozen=True)
class Measurement:
    """One part of the headline: a bench script's command line at either scale (none:
    `firmament-py --help`, timed here). `kind` says how its output is read."""

    name: str  # the stem of its files in the data folder
    kind: str  # "solvers", "round", "ingest" or "cli"
    title: str  # what it measures, for the line naming what a folder lacks
    full: str = ""
    quick: str = ""


SMALL = "--machines 60"  # --quick's cluster for the solver scenarios
MEASUREMENTS = (
    Measurement(
        "solvers-scratch",
        "solvers",
        "the solvers from scratch",
        "bench/solvers.py --scenarios s50,s90,s105,ls50 --repeats 3",
        f"bench/solvers.py --scenarios s50,s90,s105,ls50 --repeats 1 {SMALL}",
    ),
    Measurement(
        "solvers-job",
        "solvers",
        "the contention job",
        "bench/solvers.py --scenarios job1k,job5k,job10k --algorithms cost-scaling,race "
        "--repeats 5",
        f"bench/solvers.py --scenarios job1k --algorithms cost-scaling,race --repeats 1 {SMALL}",
    ),
    Measurement(
        "solvers-incremental",
        "solvers",
        "incremental rounds",
        "bench/solvers.py --scenarios inc90 --only race,incremental --rounds 10 --repeats 3",
        "bench/solvers.py --scenarios inc90 --only race,incremental --rounds 2 --repeats 1 "
        + SMALL,
    ),
    Measurement(
        "round-quincy",
        "round",
        "a Quincy round",
        "bench/round_cost.py --policy quincy --ortools --runs 5",
        "bench/round_cost.py --policy quincy --ortools --runs 1 --machines 60 --tasks 600 "
        "--churn 6 --rounds 2 --warmup 1",
    ),
    Measurement(
        "round-load-spreading",
        "round",
        "a load-spreading round",
        "bench/round_cost.py --policy load-spreading --ortools --runs 5",
        "bench/round_cost.py --policy load-spreading --ortools --runs 1 --machines 60 "
        "--tasks 600 --churn 6 --rounds 2 --warmup 1",
    ),
    Measurement(
        "daemon-ingest",
        "ingest",
        "the daemon's ingest",
        "bench/daemon_ingest.py --batch 20 --rate 20000 --window 4 --seconds 15 --repeats 3",
        "bench/daemon_ingest.py --batch 20 --rate 2000 --window 4 --seconds 2 --repeats 1 "
        "--machines 20 --clients 2",
    ),
    Measurement("cli-help", "cli", "`firmament-py --help`"),
)
TITLES = {m.name: m.title for m in MEASUREMENTS}  # for the table's line naming what data lacks


# ---------------------------------------------------------------------- running


def git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.strip()


def machine() -> dict[str, Any]:
    """The CPU, cores, memory and the versions that matter to the numbers."""
    cpu = platform.processor() or "unknown"
    memory = None
    if Path("/proc/cpuinfo").exists():
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory = round(int(line.split()[1]) / 2**20, 1)  # kB to GiB
    versions = {}
    for package in ("numpy", "numba", "ortools"):
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = "not installed"
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gib": memory,
        "python": platform.python_version(),
        **versions,
        "platform": platform.platform(),
    }


def shown(command: list[str]) -> str:
    """A command line as a reader types it: `python`, paths relative to the repository."""
    parts = ["python" if part == sys.executable else part for part in command]
    return shlex.join(parts)


def run_one(measurement: Measurement, scale: str, folder: Path) -> dict[str, Any]:
    """Run one measurement, its raw output into `folder`; its entry for run.json."""
    entry: dict[str, Any] = {"name": measurement.name, "kind": measurement.kind}
    entry["load_before"] = round(os.getloadavg()[0], 2)
    started = time.perf_counter()
    if measurement.kind == "cli":
        entry["command"] = f"firmament-py --help  # {CLI_RUNS[scale]} times"
        entry["json"] = f"{measurement.name}.json"
        seconds = time_cli(CLI_RUNS[scale])
        (folder / entry["json"]).write_text(json.dumps({"seconds": seconds}, indent=1) + "\n")
    else:
        arguments = measurement.full if scale == "full" else measurement.quick
        command = [sys.executable, *shlex.split(arguments)]
        if measurement.kind == "solvers":
            entry["json"] = f"{measurement.name}.json"
            command += ["--json", shown_path(folder / entry["json"])]
        entry["command"] = shown(command)
        entry["stdout"] = f"{measurement.name}.txt"
        with (folder / entry["stdout"]).open("w") as out:
            done = subprocess.run(command, cwd=REPO, stdout=out)
        if done.returncode != 0:
            raise SystemExit(
                f"{entry['command']} failed (exit {done.returncode}); its output so far is in "
                f"{folder / entry['stdout']}"
            )
    entry["seconds"] = round(time.perf_counter() - started, 1)
    return entry


def time_cli(runs: int) -> list[float]:
    """Wall seconds of `firmament-py --help`, each in a fresh process."""
    beside = Path(sys.executable).with_name("firmament-py")  # this environment's entry point
    command = [str(beside) if beside.exists() else "firmament-py", "--help"]
    seconds = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(command, cwd=REPO, stdout=subprocess.DEVNULL, check=True)
        seconds.append(round(time.perf_counter() - started, 4))
    return seconds


def measure(folder: Path, scale: str) -> None:
    """Every measurement in turn, then run.json, which names the commit they ran at."""
    folder.mkdir(parents=True, exist_ok=True)
    if any(folder.iterdir()):
        raise SystemExit(f"{folder} is not empty: the data of a run is never overwritten")
    dirty = git("status", "--porcelain", "--untracked-files=no") != ""
    run: dict[str, Any] = {
        "commit": git("rev-parse", "HEAD"),
        "uncommitted_changes": dirty,
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "quick": scale == "quick",
        "machine": machine(),
        "measurements": [],
    }
    if dirty:
        print("note: the checkout has uncommitted changes; run.json says so", flush=True)
    if os.getloadavg()[0] > 0.5:
        print(f"note: load average {os.getloadavg()[0]:.1f}: the numbers will be noisy", flush=True)
    started = time.perf_counter()
    for number, measurement in enumerate(MEASUREMENTS, 1):
        print(f"[{number}/{len(MEASUREMENTS)}] {measurement.name} ...", flush=True)
        entry = run_one(measurement, scale, folder)
        print(f"    {entry['command']}: {entry['seconds']:.0f} s", flush=True)
        run["measurements"].append(entry)
    run["seconds"] = round(time.perf_counter() - started)
    (folder / "run.json").write_text(json.dumps(run, indent=1) + "\n")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, help="the data folder to write (must be new or empty)")
    parser.add_argument("--quick", action="store_true", help="a tiny scale: a smoke test")
    parser.add_argument("--render", type=Path, metavar="FOLDER", help="render FOLDER; run nothing")
    parser.add_argument("--doc", type=Path, default=DOC, help="the doc to render into")
    parser.add_argument("--print", action="store_true", help="print the table; leave the doc")
    args = parser.parse_args(argv)
    try:
        if args.render is not None:
            folder = args.render
        else:
            if args.out is not None:
                folder = args.out
            elif args.quick:
                folder = Path(tempfile.mkdtemp(prefix="headline-quick-"))
            else:
                today = datetime.date.today().isoformat()
                commit = git("rev-parse", "--short=7", "HEAD")
                folder = REPO / "docs" / "data" / f"headline-{today}-{commit}"
            measure(folder, "quick" if args.quick else "full")
        if args.quick or args.print:
            print(render(folder, Path.cwd(), TITLES))
        else:
            into_doc(args.doc, folder, TITLES)
            print(f"rendered {folder} into {args.doc}; commit both")
    except DataError as error:
        raise SystemExit(f"headline: {error}") from None


if __name__ == "__main__":
    main()
