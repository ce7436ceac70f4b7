"""The benchmarks' headline: one command measures today's figures at the current commit, and
renders them as the table at the top of docs/benchmarks.md.

    python bench/headline.py            # the full run, 10 to 15 minutes on 2 cores: data to
                                        # docs/data/headline-<date>-<commit>/, then the doc
    python bench/headline.py --quick    # everything at a tiny scale (a smoke test): prints the
                                        # table, writes to a temporary folder, touches no doc
    python bench/headline.py --render docs/data/headline-2026-11-28-dc5313f  # data -> doc

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
import math
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any, TypeVar

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "benchmarks.md"
BEGIN = "<!-- headline:begin -->"
END = "<!-- headline:end -->"
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


def shown_path(path: Path) -> str:
    """A path relative to the repository if it lies inside it, else absolute."""
    path = path.resolve()
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


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


# ---------------------------------------------------------------------- reading the data


class DataError(Exception):
    """A data folder that cannot be rendered: missing, malformed, or --quick data for the doc."""


T = TypeVar("T")


def need(mapping: object, key: str, kind: type[T], where: object) -> T:
    value = mapping.get(key) if isinstance(mapping, dict) else None
    if not isinstance(value, kind):
        raise DataError(f"{where}: {key!r} is missing or not a {kind.__name__}")
    return value


def numbers(values: object, where: object) -> list[float]:
    if not isinstance(values, list) or not values:
        raise DataError(f"{where}: expected a non-empty list of numbers, got {values!r}")
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
        raise DataError(f"{where}: expected numbers, got {values!r}")
    return [float(v) for v in values]


def read(folder: Path, entry: dict[str, Any], field: str) -> str:
    """The text of the file a measurement's `field` names (relative to the data folder)."""
    path = folder / need(entry, field, str, f"{folder / 'run.json'}, {entry.get('name')}")
    try:
        return path.read_text()
    except OSError as error:
        raise DataError(f"{path}: cannot be read ({error.strerror})") from None


@dataclass(frozen=True)
class Row:
    """One line of the headline table, formatted."""

    measurement: str
    scale: str
    ours: str
    ortools: str = "—"
    ratio: str = "—"
    detail: str = ""


def ms(value: float) -> str:
    """Milliseconds as the tables show them, halves rounded up as a reader would."""
    step = Decimal("0.1") if value < 10 else Decimal(1)
    return f"{Decimal(repr(value)).quantize(step, ROUND_HALF_UP):,}"


def medians_of(count: int, what: str = "run") -> str:
    return f"one {what}" if count == 1 else f"medians of {count} {what}s"


def ratio(ours: float, ortools: float | None) -> str:
    return "—" if ortools is None else f"{ours / ortools:.2f}"


SCENARIOS = {
    "s50": "S50 from scratch: half the slots running, tasks waiting (Quincy shape)",
    "s90": "S90 from scratch: 90% of the slots running",
    "s105": "S105 from scratch: waiting demand to 105% of the slots",
    "ls50": "LS50 from scratch: S50 as a load-spreading graph",
    "inc90": "inc90: a round of 1% churn on S90, every solver from its last answer "
    "(OR-Tools from scratch)",
}


def scenario_title(name: str) -> str:
    if name in SCENARIOS:
        return SCENARIOS[name]
    job = re.fullmatch(r"(q?)job(\d+)k", name)
    if job:
        shape = "S90's Quincy-shaped" if job[1] else "a solved load-spreading"
        return f"{name}: a job of {int(job[2]):,},000 tasks arrives at {shape} cluster"
    return name


def solver_rows(folder: Path, entry: dict[str, Any]) -> list[Row]:
    """bench/solvers.py: one row per scenario, the fastest of ours against OR-Tools."""
    where = folder / need(entry, "json", str, folder / "run.json")
    header = re.search(r"machines=(\d+)", read(folder, entry, "stdout"))
    if header is None:
        raise DataError(f"{folder / entry['stdout']}: no 'machines=' in its first line")
    scale = f"{int(header[1]):,} machines"
    try:
        rows = json.loads(read(folder, entry, "json"))
    except json.JSONDecodeError as error:
        raise DataError(f"{where}: not JSON ({error})") from None
    if not isinstance(rows, list) or not rows:
        raise DataError(f"{where}: expected a non-empty list of rows")
    by_scenario: dict[str, dict[str, list[float]]] = {}
    for index, row in enumerate(rows):
        at = f"{where}, row {index}"
        scenario = need(row, "scenario", str, at)
        algorithm = need(row, "algorithm", str, at)
        times = numbers(need(row, "times", list, at), f"{at}, times")
        by_scenario.setdefault(scenario, {})[algorithm] = times
    table = []
    for scenario, algorithms in by_scenario.items():
        medians = {a: statistics.median(t) * 1000 for a, t in algorithms.items()}
        ortools = next((v for a, v in medians.items() if a.startswith("OR-Tools")), None)
        ours = {a: v for a, v in medians.items() if not a.startswith("OR-Tools")}
        if not ours:
            raise DataError(f"{where}: {scenario} has no row of our solvers")
        best = min(ours, key=ours.__getitem__)
        most = max(len(algorithms[a]) for a in ours)
        detail = ", ".join(
            f"{a} {ms(v)}" + (" (one run)" if len(algorithms[a]) == 1 < most else "")
            for a, v in ours.items()
        )
        counted = "round" if scenario.startswith("inc") else "run"
        table.append(
            Row(
                scenario_title(scenario),
                scale,
                f"{ms(ours[best])} ms ({best})",
                "—" if ortools is None else f"{ms(ortools)} ms",
                ratio(ours[best], ortools),
                f"{detail} ms; {medians_of(most, counted)}",
            )
        )
    return table


ROUND_HEADER = re.compile(
    r"policy (?P<policy>\S+), solver (?P<solver>\S+): (?P<machines>\d+) machines x \d+ slots, "
    r"(?P<tasks>\d+) tasks, (?P<churn>\d+) submissions .*median over (?P<rounds>\d+) rounds, "
    r"median of (?P<runs>\d+) runs"
)


def round_rows(folder: Path, entry: dict[str, Any]) -> list[Row]:
    """bench/round_cost.py's printed table: the round, its parts, OR-Tools on the same graph."""
    text = read(folder, entry, "stdout")
    where = folder / entry["stdout"]
    header = ROUND_HEADER.search(text)
    if header is None:
        raise DataError(f"{where}: no 'policy ..., solver ...' line from bench/round_cost.py")
    parts: dict[str, float] = {}
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) != 3 or cells[0] in ("part", "---"):
            continue
        try:
            runs = [float(value) for value in cells[2].split()]
        except ValueError:
            raise DataError(
                f"{where}: cannot read the runs of {cells[0]!r}: {cells[2]!r}"
            ) from None
        parts[cells[0]] = statistics.median(numbers(runs, f"{where}, {cells[0]}"))
    missing = [
        p for p in ("total", "update", "solve", "solver", "extract", "apply") if p not in parts
    ]
    if missing:
        raise DataError(f"{where}: no row for {', '.join(missing)}")
    detail = (
        f"update {ms(parts['update'])}, solve {ms(parts['solve'])} (the algorithm "
        f"{ms(parts['solver'])}), extract {ms(parts['extract'])}, apply {ms(parts['apply'])} ms"
    )
    if "first_round" in parts:
        detail += f"; the first round {ms(parts['first_round'])} ms"
    repeats, rounds = int(header["runs"]), int(header["rounds"])
    each = "each the median" if repeats > 1 else "the median"
    detail += f"; {medians_of(repeats)}, {each} of {rounds} rounds"
    solver = "" if header["solver"] == "cost-scaling" else f" ({header['solver']})"
    return [
        Row(
            f"a steady {header['policy']} round{solver}: policy, graph update, solve, decisions",
            f"{int(header['machines']):,} machines, {int(header['tasks']):,} tasks, "
            f"{int(header['churn']):,} + {int(header['churn']):,} a round",
            f"{ms(parts['total'])} ms",
            f"{ms(parts['ortools'])} ms" if "ortools" in parts else "—",
            ratio(parts["total"], parts.get("ortools")),
            detail,
        )
    ]


def ingest_rows(folder: Path, entry: dict[str, Any]) -> list[Row]:
    """bench/daemon_ingest.py's printed runs: events per second and message latency."""
    text = read(folder, entry, "stdout")
    where = folder / entry["stdout"]
    runs: list[dict[str, float]] = []
    for line in re.findall(r"^run \d+: (.*)$", text, re.MULTILINE):
        try:
            pairs = (item.split(" ", 1) for item in line.split(", "))
            runs.append({key: float(value.replace(",", "")) for key, value in pairs})
        except ValueError:
            raise DataError(f"{where}: cannot read the run {line!r}") from None
    setting = re.search(r"^median of \d+ \((.*)\):$", text, re.MULTILINE)
    path = re.search(r"^request path alone: ([\d.]+) us per event", text, re.MULTILINE)
    if not runs or setting is None or path is None:
        raise DataError(
            f"{where}: not the output of bench/daemon_ingest.py (no runs, or no summary)"
        )
    keys = ("events_per_s", "failed", "p50_ms", "p99_ms", "max_ms", "rounds_run", "round_p50_ms")
    for key in keys:
        if any(key not in run for run in runs):
            raise DataError(f"{where}: a run has no {key}")
    median = {key: statistics.median(run[key] for run in runs) for key in keys[:-1]}
    placing = [run["round_p50_ms"] for run in runs if not math.isnan(run["round_p50_ms"])]
    rounds = f"{median['rounds_run']:.0f} rounds run"
    if placing:  # a run in which no round placed anything has no round time
        rounds += f" (round p50 {ms(statistics.median(placing))} ms)"
    detail = (
        f"latency p50 {ms(median['p50_ms'])}, p99 {ms(median['p99_ms'])}, "
        f"max {ms(median['max_ms'])} ms; {rounds}; the request path alone "
        f"{float(path[1]):.1f} us an event"
    )
    if median["failed"]:
        detail += f"; {median['failed']:,.0f} events refused"
    offered = re.search(r"offered ([\d,]+) events/s", setting[1])
    return [
        Row(
            "the daemon's ingest, paced: events a second and message latency while rounds run",
            setting[1],
            f"{median['events_per_s']:,.0f} events/s"
            + (f" (of {offered[1]} offered)" if offered else ""),
            detail=f"{detail}; {medians_of(len(runs))}",
        )
    ]


def cli_rows(folder: Path, entry: dict[str, Any]) -> list[Row]:
    """The start-up times this script recorded for `firmament-py --help`."""
    where = folder / need(entry, "json", str, folder / "run.json")
    try:
        data = json.loads(read(folder, entry, "json"))
    except json.JSONDecodeError as error:
        raise DataError(f"{where}: not JSON ({error})") from None
    seconds = numbers(need(data, "seconds", list, where), f"{where}, seconds")
    return [
        Row(
            "`firmament-py --help`: the command line's start-up",
            "—",
            f"{statistics.median(seconds):.2f} s",
            detail=f"{medians_of(len(seconds))} ({min(seconds):.2f} to {max(seconds):.2f} s)",
        )
    ]


READERS: dict[str, Callable[[Path, dict[str, Any]], list[Row]]] = {
    "solvers": solver_rows,
    "round": round_rows,
    "ingest": ingest_rows,
    "cli": cli_rows,
}


# ---------------------------------------------------------------------- rendering


def load_run(folder: Path) -> dict[str, Any]:
    where = folder / "run.json"
    try:
        run = json.loads(where.read_text())
    except FileNotFoundError:
        raise DataError(f"{where}: no such file (a headline data folder holds run.json)") from None
    except json.JSONDecodeError as error:
        raise DataError(f"{where}: not JSON ({error})") from None
    if not isinstance(run, dict):
        raise DataError(f"{where}: expected an object")
    return run


def provenance(run: dict[str, Any], where: Path, data: str) -> str:
    """The sentence naming the commit, the date, the machine and the data folder."""
    commit = need(run, "commit", str, where)
    date = need(run, "date", str, where)
    try:
        day = datetime.datetime.fromisoformat(date).date().isoformat()
    except ValueError:
        raise DataError(f"{where}: date {date!r} is not an ISO date") from None
    box = need(run, "machine", dict, where)
    cpu = f"{need(box, 'cpu', str, where)}, {need(box, 'cores', int, where)} cores"
    if isinstance(box.get("memory_gib"), int | float):
        cpu += f", {box['memory_gib']:g} GiB"
    versions = [f"{label} {need(box, label.lower(), str, where)}" for label in VERSIONS]
    if isinstance(box.get("ortools"), str):
        versions.append(f"OR-Tools {box['ortools']}")
    changes = " plus uncommitted changes" if run.get("uncommitted_changes") else ""
    took = ""
    if isinstance(run.get("seconds"), int | float):
        took = f", the whole run {run['seconds'] / 60:.1f} minutes"
    return (
        f"Measured at commit `{commit[:7]}`{changes} on {day}, on {cpu}; {', '.join(versions)}. "
        f"Data: [`{data}/`]({data}/){took}."
    )


VERSIONS = ("Python", "numpy", "numba")  # the machine's fields every data folder must have


def wrap(paragraph: str) -> str:
    return textwrap.fill(paragraph, 100, break_long_words=False, break_on_hyphens=False)


def render(folder: Path, links_from: Path) -> str:
    """The headline as markdown, from the data folder alone; links relative to `links_from`."""
    run = load_run(folder)
    where = folder / "run.json"
    entries = need(run, "measurements", list, where)
    if not entries:
        raise DataError(f"{where}: no measurements")
    rows: list[Row] = []
    commands = []
    for entry in entries:
        kind = need(entry, "kind", str, where)
        if kind not in READERS:
            raise DataError(f"{where}: unknown kind {kind!r} (known: {', '.join(READERS)})")
        rows += READERS[kind](folder, entry)
        seconds = entry.get("seconds")
        took = f" ({seconds:,.0f} s)" if isinstance(seconds, int | float) else ""
        commands.append(f"- `{need(entry, 'command', str, where)}`{took}")
    inside = folder.resolve().is_relative_to(REPO)  # else a --quick folder in /tmp, say
    data = Path(os.path.relpath(folder, links_from)).as_posix() if inside else str(folder)
    lines = [wrap(provenance(run, where, data))]
    if isinstance(run.get("note"), str):
        lines += ["", wrap(run["note"])]
    lines += [
        "",
        "| measurement | scale | ours | OR-Tools | ours / OR-Tools | detail |",
        "|---|---|---:|---:|---:|---|",
    ]
    lines += [
        f"| {r.measurement} | {r.scale} | {r.ours} | {r.ortools} | {r.ratio} | {r.detail} |"
        for r in rows
    ]
    names = {entry.get("name") for entry in entries}
    absent = [m.title for m in MEASUREMENTS if m.name not in names]
    if absent:
        lines += ["", wrap(f"Not in this data: {', '.join(absent)}.")]
    lines += ["", "The commands, as run (each one's raw output is in the data folder):", ""]
    return "\n".join(lines + commands) + "\n"


def block(folder: Path, doc: Path) -> str:
    """The doc's headline block, markers included, rendered from `folder`."""
    if load_run(folder).get("quick"):
        raise DataError(f"{folder}: a --quick run; its numbers are not the headline")
    return (
        f"{BEGIN}\n<!-- rendered by `python bench/headline.py --render {shown_path(folder)}`; "
        f"do not edit by hand -->\n\n{render(folder, doc.parent)}\n{END}"
    )


def into_doc(doc: Path, folder: Path) -> None:
    """Replace the doc's headline block (between its markers) by the rendering of `folder`."""
    try:
        text = doc.read_text()
    except OSError as error:
        raise DataError(f"{doc}: cannot be read ({error.strerror})") from None
    if text.count(BEGIN) != 1 or text.count(END) != 1 or text.index(BEGIN) > text.index(END):
        raise DataError(f"{doc}: needs one {BEGIN} and, after it, one {END}")
    head, rest = text.split(BEGIN)
    doc.write_text(head + block(folder, doc) + rest.split(END, 1)[1])


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
            print(render(folder, Path.cwd()))
        else:
            into_doc(args.doc, folder)
            print(f"rendered {folder} into {args.doc}; commit both")
    except DataError as error:
        raise SystemExit(f"headline: {error}") from None


if __name__ == "__main__":
    main()
