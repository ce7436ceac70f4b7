"""The cluster example (examples/cluster_100.py) at small scale: its cluster is what it claims to
be, every installed policy that loads schedules its workload sanely through the public API (no
refused decisions, no policy errors, the cluster's invariants hold, every waiting task that
fits somewhere is placed once the cluster is quiet, the counts add up), and its command line
prints a table per phase and skips policies that do not load."""

from __future__ import annotations

import random
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from rich.console import Console

from firmament_py.scheduler import Scheduler
from firmament_py.sdk import PolicyError, available_policies, load_policy

from .examples import load_example

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "cluster_100.py"
MACHINES = 20


@pytest.fixture(scope="module")
def example() -> ModuleType:
    """examples/cluster_100.py as a module."""
    return load_example(EXAMPLE, "cluster_100_example")


def test_the_cluster_has_racks_pods_labels_and_replicated_data(example: Any) -> None:
    cluster = example.build_cluster(100, seed=1)
    machines = {m.machine_id: m for m in cluster.machines}
    assert len(machines) == 100 and cluster.racks == 10 and cluster.pods == 2
    assert sum(1 for m in machines.values() if m.labels.get("gpu") == "true") == 20
    assert sum(1 for m in machines.values() if m.labels["disk"] == "ssd") == 50
    assert cluster.slots == 80 * 16 + 20 * 32
    racks = {m.machine_id: m.rack_id for m in machines.values()}
    assert len(cluster.blocks) == 200
    for block, replicas in cluster.blocks.items():
        assert len(set(replicas)) == 3 and len({racks[m] for m in replicas}) == 2
        for machine_id in replicas:
            assert block in machines[machine_id].labels["quincy.blocks"].split(",")
    # The claim the workload rests on: a free slot always has room for any task.
    for m in machines.values():
        for request in example.REQUESTS.values():
            for dimension in request.DIMENSIONS:
                wanted = getattr(request, dimension) * m.slots
                assert wanted <= getattr(m.capacity, dimension), (m.machine_id, dimension)


def test_the_workload_is_sized_by_slots_with_unique_task_ids(example: Any) -> None:
    cluster = example.build_cluster(MACHINES)
    tasks = example.workload(
        cluster, example.INITIAL_LOAD, first_task=5, time=0, rng=random.Random(0), tag="t"
    )
    assert [t.task_id for t in tasks] == list(range(5, 5 + len(tasks)))
    assert len(tasks) == sum(round(f * cluster.slots) for f in example.INITIAL_LOAD.values())
    kinds = {t.labels["job-kind"] for t in tasks}
    assert kinds == set(example.INITIAL_LOAD)
    for t in tasks:
        if t.labels["job-kind"] == "batch":
            block, size = t.labels["quincy.input"].split(":")
            assert block in cluster.blocks and int(size) == example.BLOCK_BYTES


@pytest.mark.parametrize("name", available_policies())
def test_every_policy_that_loads_schedules_the_workload_sanely(example: Any, name: str) -> None:
    try:
        policy = load_policy(name)
    except PolicyError as error:
        pytest.skip(f"policy {name} does not load: {error}")
    cluster = example.build_cluster(MACHINES)
    with Scheduler(policy) as scheduler:
        summary = example.drive(scheduler, cluster)
        scheduler.state.validate()
    assert summary.policy == name
    initial, churn = summary.phases
    assert initial.submitted < churn.submitted
    assert (initial.machines, churn.machines) == (MACHINES, MACHINES - 1)
    assert initial.placed > 0
    for phase in summary.phases:
        context = (name, phase)
        assert phase.quiet, context
        assert phase.refused == 0 and phase.task_errors == 0, context
        assert phase.waiting_that_fit == 0, context
        assert phase.placed + phase.waiting == phase.submitted - phase.completed, context
        assert 0 < phase.machines_used <= phase.machines, context
        assert 0 <= phase.tasks_per_machine[0] <= phase.tasks_per_machine[1], context
        assert 0.0 <= phase.cpu_utilisation[0] <= phase.cpu_utilisation[1] <= 1.0, context
        assert 1 <= phase.rounds < 50 and phase.solver_seconds >= 0.0, context
    assert churn.completed > 0


def test_the_command_line_prints_two_tables_per_phase_and_skips_what_does_not_load(
    example: Any,
) -> None:
    console = Console(record=True, width=200)
    status = example.main(
        ["--machines", "12", "--policy", "trivial", "--policy", "no-such-policy"], console=console
    )
    output = console.export_text()
    assert status == 0, output
    assert "skipped no-such-policy" in output
    assert "12 machines in 2 racks and 1 pod," in output
    assert "After the initial jobs" in output and "After churn" in output
    assert output.count("│ trivial ") == 4


@pytest.mark.parametrize("width", [80, 120])
def test_the_tables_fit_a_terminal_with_every_cell_whole(example: Any, width: int) -> None:
    """At 80 columns and at 120, no line is wider than the terminal, no cell or header is cut
    with an ellipsis, and the longest policy name is shown whole in each of the four tables."""
    longest = max(available_policies(), key=len)
    console = Console(record=True, width=width)
    status = example.main(["--machines", "12", "--policy", longest], console=console)
    output = console.export_text()
    assert status == 0, output
    assert max(len(line) for line in output.splitlines()) <= width, output
    assert "…" not in output and "..." not in output, output
    assert output.count(f"│ {longest} ") == 4, output
    for header in ("placed", "of them", "refused", "moved", "machines", "tasks per", "solver"):
        assert header in output, (header, output)


def test_the_command_line_rejects_bad_arguments(example: Any) -> None:
    for argv in (["--machines", "0"], ["--solver", "no-such-solver"]):
        with pytest.raises(SystemExit) as exit_info:
            example.main(argv, console=Console(record=True))
        assert exit_info.value.code == 2
