"""Write-ups rendered from committed experiment CSVs (firmament_py.sim.results_doc and
`firmament-py render-docs`): a block is made anew from its CSV with the current claim code, a
changed verdict makes the document stale, and bad markers or data fail naming the line. The
repository's own docs must be up to date with their data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from firmament_py.cli import main
from firmament_py.sim.experiments import run_experiment
from firmament_py.sim.results_doc import END, render, stale

REPOSITORY = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory with a test-scale run of fig7 (CSV, plot, summary, provenance)."""
    out = tmp_path_factory.mktemp("data")
    run_experiment("fig7", out, scale="test")
    return out


def _document(tmp_path: Path, data: Path, body: str) -> Path:
    path = tmp_path / "doc.md"
    path.write_text(body.replace("DATA", str(data)), encoding="utf-8")
    return path


def test_a_block_is_rendered_from_its_csv(tmp_path: Path, data: Path) -> None:
    provenance = json.loads((data / "fig7.json").read_text())
    assert {"commit", "date", "machine", "versions", "wall_seconds"} <= set(provenance)
    doc = _document(
        tmp_path, data, f"# Title\n\n<!-- rendered from DATA/fig7.csv -->\nold text\n{END}\nafter\n"
    )
    text = render(doc)
    assert "old text" not in text
    assert text.startswith("# Title\n") and text.endswith(f"{END}\nafter\n")
    assert f"Measured at commit `{provenance['commit']}`" in text
    assert "| Relaxation is the fastest algorithm on Quincy graphs |" in text
    assert "reproduced" in text or "not reproduced" in text or "partly" in text
    assert "![fig7](" in text  # the plot beside the CSV
    assert stale([doc]) == [doc]
    doc.write_text(text, encoding="utf-8")
    assert stale([doc]) == [] and render(doc) == text  # rendering is idempotent


def test_a_block_shows_its_own_plots_not_those_of_a_longer_name(tmp_path: Path) -> None:
    """zoe-turnaround-paper's plots lie beside zoe-turnaround's and match its glob."""
    run_experiment("zoe-turnaround", tmp_path, scale="test")
    for stem in ("zoe-turnaround-paper", "zoe-turnaround-paper-queuing"):
        (tmp_path / f"{stem}.png").write_bytes((tmp_path / "zoe-turnaround.png").read_bytes())
    doc = _document(tmp_path, tmp_path, f"<!-- rendered from DATA/zoe-turnaround.csv -->\n{END}\n")
    text = render(doc)
    assert "![zoe-turnaround](" in text and "![zoe-turnaround-queuing](" in text
    assert "zoe-turnaround-paper" not in text


def test_a_changed_verdict_makes_the_document_stale(
    tmp_path: Path, data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    doc = _document(tmp_path, data, f"<!-- rendered from DATA/fig7.csv -->\n{END}\n")
    doc.write_text(render(doc), encoding="utf-8")
    from firmament_py.sim.figures import fig7

    monkeypatch.setattr(fig7, "share", lambda *args: fig7.Verdict(fig7.Outcome.PARTLY, "c", "d"))
    assert stale([doc]) == [doc]


def test_the_summary_lists_every_claim_of_every_csv(tmp_path: Path, data: Path) -> None:
    doc = _document(tmp_path, data, f"<!-- rendered summary from DATA -->\n{END}\n")
    text = render(doc)
    assert "| `fig7` (test) | Relaxation is the fastest algorithm on Quincy graphs |" in text
    assert "| `fig7` (test) | Successive shortest path does not scale |" in text


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("<!-- rendered from DATA/fig7.csv -->\nno end\n", "without"),
        ("<!-- rendered from DATA/none.csv -->\n" + END + "\n", "none.csv"),
        ("<!-- rendered summary from DATA/empty -->\n" + END + "\n", "no experiment CSV"),
    ],
)
def test_bad_markers_and_data_fail_naming_the_line(
    tmp_path: Path, data: Path, body: str, message: str
) -> None:
    (data / "empty").mkdir(exist_ok=True)
    doc = _document(tmp_path, data, body)
    with pytest.raises(ValueError, match=rf"doc.md:1: .*{message}"):
        render(doc)


def test_the_command_renders_and_checks(tmp_path: Path, data: Path) -> None:
    doc = _document(tmp_path, data, f"<!-- rendered from DATA/fig7.csv -->\n{END}\n")
    runner = CliRunner()
    checked = runner.invoke(main, ["render-docs", "--check", str(doc)])
    assert checked.exit_code == 1 and "out of date" in checked.output
    rendered = runner.invoke(main, ["render-docs", str(doc)])
    assert rendered.exit_code == 0 and "rendered" in rendered.output
    again = runner.invoke(main, ["render-docs", "--check", str(doc)])
    assert again.exit_code == 0, again.output


def test_the_repositorys_docs_are_rendered_from_their_data() -> None:
    documents = sorted((REPOSITORY / "docs").glob("*.md"))
    assert stale(documents) == [], "run `firmament-py render-docs`"
