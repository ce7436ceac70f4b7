"""The headline table of docs/benchmarks.md, from a data folder bench/headline.py wrote: reading
and checking the folder (its run.json and each measurement's raw output), rendering the table as
markdown, and writing it between the doc's markers. It runs nothing; its command line is
`python bench/headline.py --render FOLDER` (with `--print` to print it instead).

Every number in the table comes from the folder alone. Data that cannot be rendered (a missing or
malformed file, a --quick run bound for the doc) raises DataError saying what and where.
"""

from __future__ import annotations

import datetime
import json
import math
import os
import re
import statistics
import textwrap
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any, TypeVar

REPO = Path(__file__).resolve().parents[1]
BEGIN = "<!-- headline:begin -->"
END = "<!-- headline:end -->"


def shown_path(path: Path) -> str:
    """A path relative to the repository if it lies inside it, else absolute."""
    path = path.resolve()
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


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


def render(folder: Path, links_from: Path, titles: Mapping[str, str]) -> str:
    """The headline as markdown, from the data folder alone; links relative to `links_from`.
    `titles` holds the name and title of every measurement a full run makes: what a folder
    lacks is named under the table."""
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
    absent = [title for name, title in titles.items() if name not in names]
    if absent:
        lines += ["", wrap(f"Not in this data: {', '.join(absent)}.")]
    lines += ["", "The commands, as run (each one's raw output is in the data folder):", ""]
    return "\n".join(lines + commands) + "\n"


def block(folder: Path, doc: Path, titles: Mapping[str, str]) -> str:
    """The doc's headline block, markers included, rendered from `folder`."""
    if load_run(folder).get("quick"):
        raise DataError(f"{folder}: a --quick run; its numbers are not the headline")
    return (
        f"{BEGIN}\n<!-- rendered by `python bench/headline.py --render {shown_path(folder)}`; "
        f"do not edit by hand -->\n\n{render(folder, doc.parent, titles)}\n{END}"
    )


def into_doc(doc: Path, folder: Path, titles: Mapping[str, str]) -> None:
    """Replace the doc's headline block (between its markers) by the rendering of `folder`."""
    try:
        text = doc.read_text()
    except OSError as error:
        raise DataError(f"{doc}: cannot be read ({error.strerror})") from None
    if text.count(BEGIN) != 1 or text.count(END) != 1 or text.index(BEGIN) > text.index(END):
        raise DataError(f"{doc}: needs one {BEGIN} and, after it, one {END}")
    head, rest = text.split(BEGIN)
    doc.write_text(head + block(folder, doc, titles) + rest.split(END, 1)[1])
