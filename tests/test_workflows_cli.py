"""Tests of `firmament-py workflow` (the click group `firmament_py.workflows.cli.workflow`,
invoked directly): generating a workflow file, scheduling it with every algorithm, writing the
schedules, and bad input refused with the offending element named."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from firmament_py.workflows import Schedule, TaskRun, Transfer, validate_schedule
from firmament_py.workflows.cli import workflow
from firmament_py.workflows.files import read_workflow


def test_generate_then_schedule_every_algorithm(tmp_path: Path) -> None:
    runner = CliRunner()
    path = tmp_path / "mr.json"
    result = runner.invoke(
        workflow,
        [
            "generate",
            "one-stage-mapreduce",
            "--tasks",
            "20",
            "--seed",
            "4",
            "-m",
            "3",
            "-o",
            str(path),
        ],
    )
    assert result.exit_code == 0, result.output
    work, platform = read_workflow(path)
    assert platform is not None and platform.m == 3
    out = tmp_path / "schedules.json"
    result = runner.invoke(workflow, ["schedule", str(path), "--json", str(out)])
    assert result.exit_code == 0, result.output
    for name in ("list", "glist", "glist-master", "partition", "makespan", "ratio", "OK"):
        assert name in result.output
    document = json.loads(out.read_text())
    assert [s["algorithm"] for s in document["schedules"]] == [
        "list",
        "glist",
        "glist-master",
        "partition",
    ]
    names = platform.network_machines
    for entry in document["schedules"]:
        assert entry["ratio"] >= 1 - 1e-9
        # What the file says is a valid schedule of the workflow.
        runs = {
            r["task"]: TaskRun(r["task"], r["machine"], r["start"], r["end"]) for r in entry["runs"]
        }
        transfers = [
            Transfer(
                t["source"],
                t["target"],
                t["from"],
                t["to"],
                tuple(names.index(n) for n in t["network"]),
                t["start"],
                t["end"],
            )
            for t in entry["transfers"]
        ]
        schedule = validate_schedule(Schedule(entry["algorithm"], work, platform, runs, transfers))
        assert schedule.makespan == entry["makespan"]


def test_machines_override_and_yaml(tmp_path: Path) -> None:
    runner = CliRunner()
    path = tmp_path / "sets.yaml"
    result = runner.invoke(
        workflow, ["generate", "mixed", "--count", "3", "--tasks", "8", "-o", str(path)]
    )
    assert result.exit_code == 0, result.output
    result = runner.invoke(
        workflow,
        ["schedule", str(path), "-a", "partition", "-a", "list", "-m", "2", "--network", "shared"],
    )
    assert result.exit_code == 0, result.output
    assert "partition" in result.output and "glist" not in result.output
    assert "2 machine(s)" in result.output and "1 shared network machine" in result.output


def test_bad_input_is_refused_with_the_element_named(tmp_path: Path) -> None:
    runner = CliRunner()
    cyclic = tmp_path / "cyclic.json"
    cyclic.write_text(
        json.dumps(
            {
                "tasks": [{"id": "x", "size": 1}, {"id": "y", "size": 1}],
                "arcs": [{"from": "x", "to": "y", "data": 1}, {"from": "y", "to": "x"}],
            }
        )
    )
    result = runner.invoke(workflow, ["schedule", str(cyclic), "-m", "2"])
    assert result.exit_code == 2
    assert "cycle: x -> y -> x" in result.output
    result = runner.invoke(
        workflow, ["schedule", str(cyclic).replace("cyclic", "missing"), "-m", "2"]
    )
    assert result.exit_code == 2 and "cannot read" in result.output
    chain = tmp_path / "chain.json"
    chain.write_text(
        json.dumps(
            {
                "tasks": [{"id": "x", "size": 1}, {"id": "y", "size": 1}],
                "arcs": [{"from": "x", "to": "y", "data": 1}],
            }
        )
    )
    result = runner.invoke(workflow, ["schedule", str(chain)])
    assert result.exit_code == 2 and "no platform" in result.output
    result = runner.invoke(
        workflow, ["schedule", str(chain), "-m", "2", "--network", "shared", "--channels", "0"]
    )
    assert result.exit_code == 2
    assert "no network machine, and arc x -> y carries data 1" in result.output


def test_an_unwritable_json_path_is_refused_before_scheduling(tmp_path: Path) -> None:
    runner = CliRunner()
    path = tmp_path / "mr.json"
    generate = ["generate", "one-stage-mapreduce", "--tasks", "8", "-m", "2", "-o", str(path)]
    assert runner.invoke(workflow, generate).exit_code == 0
    out = tmp_path / "missing" / "schedules.json"
    result = runner.invoke(workflow, ["schedule", str(path), "--json", str(out)])
    assert result.exit_code == 2, result.output
    assert "cannot write" in result.output and "its folder does not exist" in result.output
    assert "makespan" not in result.output  # refused before any schedule was made
