"""A DAG job on the flow scheduler, placed after PARTITION's machine grouping.

PARTITION (firmament_py.workflows.partition, Giroire et al., INFOCOM'19 section V.C)
splits a workflow into parts that balance CPU work while cutting little data between them.
Its first phase alone (`partition_placement`) says which machine each task should share with
which others; here that grouping becomes placement preferences of Firmament's flow scheduler:

* each task is submitted with the label `partition.machine=<machine id>`;
* the policy below, `PartitionPreferences`, written against the public SDK only, gives such a
  task a preference arc of cost 0 to that machine, and makes its arc to the cluster aggregator
  (any machine) cost 100: a task runs on its group's machine when that has a free slot and
  elsewhere otherwise, rather than wait;
* the job is a DAG, which the flow scheduler knows nothing about, so this driver submits a
  task once all its parents have completed (each round's tasks complete before the next).

The same DAG under the built-in load-spreading policy, which ignores the data, serves as a
comparison: the output shows, for both, how many arcs cross machines (each would be a network
task) and how much data they carry. Run::

    python examples/workflow_partition.py [--machines N] [--seed S]

`run_dag`, `partition_labels` and `main` are the API the test uses.
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rich.console import Console
from rich.table import Table

from firmament_py.model import MachineAdded, Resources, TaskCompleted, TaskSubmitted
from firmament_py.scheduler import Scheduler
from firmament_py.sdk import ArcDescriptor, EquivClassId, ResourceRef, TaskView, hookimpl
from firmament_py.workflows import Platform, Workflow, partition_placement
from firmament_py.workflows.generators import WorkflowShape, one_stage_mapreduce

LABEL = "partition.machine"
"""The task label naming the machine of the task's PARTITION group."""
SECOND = 1_000_000


class PartitionPreferences:
    """Tasks labelled `partition.machine=M` prefer machine M (cost 0) to any other (cost 100);
    tasks without the label keep the defaults."""

    @hookimpl
    def task_preference_arcs(self, task: TaskView) -> Sequence[ResourceRef] | None:
        machine = task.labels.get(LABEL)
        return [ResourceRef.machine(machine)] if machine else None

    @hookimpl
    def task_to_resource(self, task: TaskView) -> ArcDescriptor | None:
        return ArcDescriptor(0) if LABEL in task.labels else None

    @hookimpl
    def task_to_equiv_class(
        self, task: TaskView, equiv_class: EquivClassId
    ) -> ArcDescriptor | None:
        return ArcDescriptor(100) if LABEL in task.labels else None


def machine_id(index: int) -> str:
    return f"m{index}"


def partition_labels(workflow: Workflow, platform: Platform) -> dict[str, dict[str, str]]:
    """Each task's labels: its PARTITION group's machine."""
    placement = partition_placement(workflow, platform)
    return {task: {LABEL: machine_id(machine)} for task, machine in placement.items()}


@dataclass
class DagRun:
    """Where each task of the DAG ran, and what that placement costs in network tasks."""

    placement: dict[str, str]
    rounds: int
    crossing_arcs: int
    crossing_data: float


def run_dag(
    workflow: Workflow,
    scheduler: Scheduler,
    machines: int,
    slots: int,
    labels: Mapping[str, Mapping[str, str]] | None = None,
) -> DagRun:
    """Submit `workflow` to `scheduler` (machines m0..m<machines-1> with `slots` slots each)
    as its tasks become ready, one round per wave, until every task completed."""
    for index in range(machines):
        scheduler.handle(
            MachineAdded(
                time=0,
                machine_id=machine_id(index),
                slots=slots,
                capacity=Resources(cpu_millicores=1000 * slots),
            )
        )
    task_id = {name: number for number, name in enumerate(workflow.tasks)}
    name_of = {number: name for name, number in task_id.items()}
    missing = {name: len(workflow.parents[workflow.index[name]]) for name in workflow.tasks}
    submitted: set[str] = set()
    placement: dict[str, str] = {}
    now = 0
    rounds = 0
    while len(placement) < workflow.n:
        for name in workflow.tasks:
            if missing[name] == 0 and name not in submitted:
                scheduler.handle(
                    TaskSubmitted(
                        time=now,
                        task_id=task_id[name],
                        job_id="dag",
                        labels=dict((labels or {}).get(name, {})),
                    )
                )
                submitted.add(name)
        rounds += 1
        if rounds > 10 * workflow.n:
            raise RuntimeError("the DAG does not make progress")
        result = scheduler.run_round(now)
        if result.refused or result.task_errors:
            raise RuntimeError(f"round {rounds}: {result.refused or result.task_errors}")
        now += SECOND
        running = [
            task
            for task in scheduler.state.tasks.values()
            if task.machine_id is not None and name_of[task.task_id] not in placement
        ]
        for task in running:
            name = name_of[task.task_id]
            placement[name] = task.machine_id or ""
            scheduler.handle(TaskCompleted(time=now, task_id=task.task_id))
            for child, _ in workflow.children[workflow.index[name]]:
                missing[workflow.tasks[child]] -= 1
        scheduler.state.validate()
    crossing = [
        data
        for u, v, data in workflow.edges
        if data > 0 and placement[workflow.tasks[u]] != placement[workflow.tasks[v]]
    ]
    return DagRun(placement, rounds, len(crossing), sum(crossing))


def main(argv: Sequence[str] | None = None) -> dict[str, DagRun]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--machines", type=int, default=4)
    parser.add_argument("--seed", type=int, default=10)
    args = parser.parse_args(argv)
    workflow = one_stage_mapreduce(
        random.Random(args.seed), WorkflowShape(max_tasks=40, rho=0.25, density=0.3)
    )
    platform = Platform.links(args.machines)
    slots = workflow.n  # room for a whole wave on any machine: preferences are never overruled
    labels = partition_labels(workflow, platform)
    runs = {}
    with Scheduler(policy=PartitionPreferences()) as scheduler:
        runs["partition preferences"] = run_dag(workflow, scheduler, args.machines, slots, labels)
    with Scheduler(policy="load-spreading") as scheduler:
        runs["load-spreading"] = run_dag(workflow, scheduler, args.machines, slots)
    table = Table(
        title=f"A 1-stage MapReduce DAG ({workflow.describe()}) on {args.machines} machines"
    )
    table.add_column("policy", style="bold")
    table.add_column("rounds", justify="right")
    table.add_column("tasks per machine", justify="right")
    table.add_column("arcs across machines", justify="right")
    table.add_column("data across machines", justify="right")
    for name, run in runs.items():
        counts = [list(run.placement.values()).count(machine_id(i)) for i in range(args.machines)]
        table.add_row(
            name,
            str(run.rounds),
            " ".join(map(str, counts)),
            str(run.crossing_arcs),
            f"{run.crossing_data:,.0f}",
        )
    Console().print(table)
    return runs


if __name__ == "__main__":
    main()
