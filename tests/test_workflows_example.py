"""examples/workflow_partition.py: a DAG job on the flow scheduler following PARTITION's
grouping through a policy written against the SDK. Every task completes, each runs on the
machine of its PARTITION group, the DAG's order is respected (one wave per round), and the
data crossing machines is exactly PARTITION's cut, less than under load-spreading."""

from __future__ import annotations

import random
from pathlib import Path

from firmament_py.workflows import Platform, partition_placement
from firmament_py.workflows.generators import WorkflowShape, one_stage_mapreduce

from .examples import load_example

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "workflow_partition.py"


def test_the_example_follows_partition() -> None:
    example = load_example(EXAMPLE, "workflow_partition")
    runs = example.main(["--machines", "4", "--seed", "10"])
    workflow = one_stage_mapreduce(
        random.Random(10), WorkflowShape(max_tasks=40, rho=0.25, density=0.3)
    )
    expected = partition_placement(workflow, Platform.links(4))
    preferred = runs["partition preferences"]
    assert preferred.placement == {task: f"m{machine}" for task, machine in expected.items()}
    cut = sum(
        data
        for u, v, data in workflow.edges
        if data > 0 and expected[workflow.tasks[u]] != expected[workflow.tasks[v]]
    )
    assert abs(preferred.crossing_data - cut) < 1e-9
    spread = runs["load-spreading"]
    assert set(spread.placement) == set(workflow.tasks)
    assert preferred.crossing_data < spread.crossing_data
    assert preferred.rounds == max(workflow.layers) + 1 == spread.rounds
