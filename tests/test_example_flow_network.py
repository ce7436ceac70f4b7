"""The flow-network picture (examples/draw_flow_network.py): its command line writes a PNG of
README size with both highlight colours in it, and the graph it draws says what the picture
claims: one node per task, every task's unit of flow reaching the sink, the highlighted arcs
being exactly those on the tasks' paths, each placed task's path ending at the machine the round
placed it on, and the scenario's story (task 3 waits; task 4 goes through its rack, task 6
through X)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from matplotlib.image import imread

from firmament_py.flow.placement import DeltaKind
from firmament_py.scheduler import ArcType

from .examples import load_example

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "draw_flow_network.py"
GREEN, ORANGE = (44, 160, 44), (255, 127, 14)  # matplotlib's tab:green and tab:orange


@pytest.fixture(scope="module")
def example() -> ModuleType:
    return load_example(EXAMPLE, "draw_flow_network_example")


@pytest.fixture(scope="module")
def network(example: Any) -> Any:
    return example.build()


def flow_paths(network: Any) -> dict[int, list[Any]]:
    """Each task's path of arcs to the sink, peeled off the flow one unit at a time (fails if a
    unit stops short of the sink: flow not conserved)."""
    left = {id(arc): arc.flow for arc in network.arcs}
    paths: dict[int, list[Any]] = {}
    for task_id, node in network.tasks.items():
        paths[task_id] = []
        while node != network.roles["sink"][0]:
            arc = next(a for a in network.arcs if a.src == node and left[id(a)] > 0)
            left[id(arc)] -= 1
            paths[task_id].append(arc)
            node = arc.dst
    assert not any(left.values()), "flow left over after every task's unit is traced"
    return paths


def test_the_command_line_writes_a_readme_sized_png_with_both_highlights(tmp_path: Path) -> None:
    out = tmp_path / "new-folder" / "flow-network.png"
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), str(out)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert out.stat().st_size > 50_000
    pixels = np.rint(imread(out)[:, :, :3] * 255).astype(int)
    height, width = pixels.shape[:2]
    assert 1000 <= width <= 1400 and 600 <= height <= 1100
    for colour in (GREEN, ORANGE):
        assert (pixels == colour).all(axis=2).sum() > 500, colour
    assert len(np.unique(pixels.reshape(-1, 3), axis=0)) > 50  # not a blank or flat image


def test_the_picture_has_one_node_per_task_and_a_role_and_label_for_every_node(
    example: Any, network: Any
) -> None:
    tasks = {**example.RUNNING, **example.WAITING}
    assert sorted(network.tasks) == sorted(tasks)
    assert len(network.roles["task"]) == len(tasks)
    assert len(network.roles["machine"]) == len(example.BLOCKS)
    assert len(network.roles["rack"]) == len(example.RACKS)
    nodes = [node for nodes in network.roles.values() for node in nodes]
    assert len(nodes) == len(set(nodes)) == len(network.labels)
    for task_id, node in network.tasks.items():
        assert network.labels[node].startswith(f"task {task_id}\n")
    assert network.labels[network.roles["unscheduled"][0]] == "U job"
    assert network.labels[network.roles["cluster"][0]] == "X"
    # Every arc runs left to right across the picture's columns, as the drawing assumes.
    x = example.layout(network)
    assert all(x[arc.src][0] < x[arc.dst][0] for arc in network.arcs)


def test_every_task_reaches_the_sink_and_the_highlighted_arcs_are_its_path(network: Any) -> None:
    paths = flow_paths(network)
    on_paths = {id(arc) for path in paths.values() for arc in path}
    assert on_paths == {id(arc) for arc in network.arcs if arc.flow}  # the thick arcs
    assert sum(arc.cost * arc.flow for arc in network.arcs) == network.result.cost
    machines, unscheduled = set(network.roles["machine"]), network.roles["unscheduled"][0]
    placed = {d.task: d.to_machine for d in network.result.deltas if d.kind is DeltaKind.PLACE}
    for task_id, path in paths.items():
        through = [arc.dst for arc in path]
        if task_id in placed:  # placed this round: its path ends at that machine
            assert through[-2] in machines
            assert network.labels[through[-2]].startswith(f"{placed[task_id]}\n")
        elif path[0].kind is ArcType.RUNNING:  # kept running where it was
            assert through[0] in machines
        else:  # left waiting
            assert through == [unscheduled, network.roles["sink"][0]]


def test_the_scenario_tells_the_story_the_docstring_tells(network: Any) -> None:
    paths = flow_paths(network)
    label = network.labels
    assert [label[arc.dst] for arc in paths[3]] == ["U job", "sink"]  # m1 is full; 4 GiB stays
    assert [label[arc.dst] for arc in paths[4]][:2] == ["rack-1", "m2\nholds b"]
    assert label[paths[5][0].dst] == "m3\nholds c"  # straight to its data
    assert label[paths[6][0].dst] == "X"  # no input: anywhere
    for task_id in (1, 2):  # they keep running on m1
        assert paths[task_id][0].kind is ArcType.RUNNING
        assert label[network.tasks[task_id]].endswith("\nruns on m1")
