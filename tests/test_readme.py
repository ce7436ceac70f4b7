"""The README holds true: its Python blocks run, its links land inside the repository or on a
public address, the quick start's excerpt is what the committed run printed, and the commands
on its first screen are the ones `.ci/run` and the quick start's data use."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
QUICKSTART = ROOT / "docs" / "data" / "quickstart"


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README, flags=re.DOTALL)


@pytest.mark.parametrize("number", range(len(_blocks("python"))))
def test_every_python_block_runs(number: int, tmp_path: Path) -> None:
    code = _blocks("python")[number]
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr


def test_links_land_inside_the_repository_or_on_a_public_address() -> None:
    for target in re.findall(r"\]\(([^)]+)\)", README):
        if target.startswith(("https://", "http://")):
            continue
        assert not target.startswith(("/", "..")), target
        assert (ROOT / target.split("#")[0]).exists(), target


def test_the_quick_start_excerpt_is_the_committed_run() -> None:
    """Each row of the excerpt is a row the run printed (`docs/data/quickstart/summary.txt`)."""
    printed = (QUICKSTART / "summary.txt").read_text(encoding="utf-8")
    rows = {" ".join(line.split()) for line in printed.splitlines()}
    excerpt = _blocks("text")[0]
    cells = [cell for line in excerpt.splitlines() for cell in line.split("│      │")]
    assert len(cells) >= 10
    for cell in cells:
        row = " ".join(cell.strip().split())
        row = row if row.startswith("│") else f"│ {row}"
        row = row if row.endswith("│") else f"{row} │"
        assert row in rows, row


def test_the_first_screen_names_the_commands_that_run() -> None:
    """The quick start's command is the one whose output is committed, and the test command is
    the one `.ci/run` runs."""
    first_screen = README.split("---", 1)[0]
    command = re.search(r"(firmament-py simulate [^\n`]*)", first_screen)
    assert command is not None
    notes = (QUICKSTART / "README.md").read_text(encoding="utf-8")
    assert command.group(1).strip() in notes
    assert "python -m pytest" in first_screen
    assert "python -m pytest" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")
