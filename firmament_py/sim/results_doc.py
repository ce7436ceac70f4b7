"""Markdown write-ups whose results are rendered from committed experiment CSVs, so that they
cannot drift from their data. Between a marker naming a CSV and an end marker, a document holds
what `read_result` makes of that CSV with the current code: where and when it was measured, the
claims with their computed verdicts, the medians and the plots beside the CSV. A summary marker
naming a directory holds every claim of every experiment CSV in it.

    <!-- rendered from data/experiments/full/fig7.csv -->
    (replaced by every render)
    <!-- end rendered -->

    <!-- rendered summary from data/experiments/full -->
    <!-- end rendered -->

Paths are relative to the document. `render(path)` returns the document's text rendered anew;
`firmament-py render-docs` writes it back, or with `--check` names the documents that are out of
date (a test runs that check on docs/, so a change to a verdict's code fails until the write-up
is rendered again).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from firmament_py.sim.experiment import ExperimentResult
from firmament_py.sim.experiments import experiment_names, read_result
from firmament_py.sim.provenance import Provenance

__all__ = ["END", "render", "stale"]

_START = re.compile(r"^<!-- rendered (summary )?from (\S+) -->$")
END = "<!-- end rendered -->"


def render(path: Path) -> str:
    """The text of the Markdown document at `path` with every rendered block made anew from
    its data. ValueError names the line of a marker without an end, or data that cannot be
    read."""
    lines = path.read_text(encoding="utf-8").splitlines()
    out: list[str] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        out.append(line)
        index += 1
        match = _START.match(line.strip())
        if match is None:
            continue
        end = _end_of_block(lines, index, path)
        source = path.parent / match.group(2)
        try:
            block = _summary(source, path) if match.group(1) else _experiment(source, path)
        except (OSError, ValueError) as error:
            raise ValueError(f"{path}:{index}: cannot render {match.group(2)}: {error}") from None
        out += ["", *block, "", END]
        index = end + 1
    return "\n".join(out) + "\n"


def stale(paths: list[Path]) -> list[Path]:
    """The documents among `paths` whose rendered blocks differ from what `render` makes."""
    return [path for path in paths if render(path) != path.read_text(encoding="utf-8")]


def _end_of_block(lines: list[str], start: int, path: Path) -> int:
    for index in range(start, len(lines)):
        if lines[index].strip() == END:
            return index
        if _START.match(lines[index].strip()):
            break
    raise ValueError(f"{path}:{start}: a rendered block without {END!r} before the next one")


def _link(target: Path, document: Path) -> str:
    return Path(os.path.relpath(target, document.parent)).as_posix()


def _measured(provenance: Provenance | None) -> str:
    if provenance is None:
        return "Measured before the commit and machine were recorded with each run."
    versions = provenance.get("versions", {})
    libraries = ", ".join(f"{name} {version}" for name, version in versions.items())
    return (
        f"Measured at commit `{provenance.get('commit', 'unknown')}` on "
        f"{str(provenance.get('date', 'an unknown date'))[:10]}, {provenance.get('machine', '')}"
        f" ({libraries})."
    )


def _experiment(csv_path: Path, document: Path) -> list[str]:
    result = read_result(csv_path)
    lines = [_measured(result.provenance), "", *result.markdown().rstrip("\n").splitlines()]
    plots = sorted(csv_path.parent.glob(f"{result.name}.png")) + sorted(
        csv_path.parent.glob(f"{result.name}-*.png")
    )
    # zoe-turnaround-paper.png is not one of zoe-turnaround's plots but its own run's
    others = [n for n in experiment_names() if n.startswith(f"{result.name}-")]
    plots = [p for p in plots if not any(_plot_of(p, other) for other in others)]
    for plot in plots:
        lines += ["", f"![{plot.stem}]({_link(plot, document)})"]
    return lines


def _plot_of(plot: Path, name: str) -> bool:
    """Whether `plot` is one the experiment `name` draws (`NAME.png`, `NAME-*.png`)."""
    return plot.stem == name or plot.stem.startswith(f"{name}-")


def _summary(directory: Path, document: Path) -> list[str]:
    results: list[ExperimentResult] = [
        read_result(path) for path in sorted(directory.glob("*.csv"), key=_paper_order)
    ]
    if not results:
        raise ValueError(f"no experiment CSV in {directory}")
    lines = [
        "| experiment | claim | paper | ours | verdict |",
        "|---|---|---|---|---|",
    ]
    for result in results:
        for claim in result.claims:
            lines.append(
                f"| `{result.name}` ({result.scale}) | {claim.claim} | {claim.paper} | "
                f"{claim.ours} | {claim.verdict_text} |"
            )
    commits = sorted({str((r.provenance or {}).get("commit", "unrecorded")) for r in results})
    where = _link(directory, document)
    measured = ", ".join(f"`{commit}`" for commit in commits)
    lines += ["", f"Data: [{where}]({where}), measured at {measured}."]
    return lines


def _paper_order(path: Path) -> tuple[int, str]:
    """Experiments in the registry's order (the paper's), others after by name."""
    names = experiment_names()
    return (names.index(path.stem) if path.stem in names else len(names), path.stem)
