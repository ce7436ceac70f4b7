"""The policy guide's code runs: every Python block of `docs/policy-guide.md` is a whole
program (imports included) that a plugin author may paste, so each is run here as it stands."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "policy-guide.md"
BLOCKS = re.findall(r"```python\n(.*?)```", GUIDE.read_text(encoding="utf-8"), re.S)


def test_the_guide_has_its_examples() -> None:
    assert len(BLOCKS) >= 17


@pytest.mark.parametrize("number", range(len(BLOCKS)))
def test_a_block_of_the_guide_runs_as_it_stands(number: int) -> None:
    block = BLOCKS[number]
    first = block.splitlines()[0] if block else ""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(block, f"policy-guide.md block {number} ({first})", "exec"), {})
    if "print(" in block:
        assert printed.getvalue(), "the block prints nothing"
