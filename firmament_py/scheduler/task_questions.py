"""Asking the policy about tasks: each question through its batch hook or, for a policy that
answers it only per item, through the per-item hooks, with the answers as columns either way.

The graph manager asks about the tasks it builds (those that joined or changed) and, every
round, re-asks the questions whose answers hold for one round only: per-item waiting costs
(`task_to_unscheduled`), per-item continuation and preemption costs with preemption, and
batch answers marked `this_round_only`. A question about a task that fails (a hook raising, a
bad value) leaves out that task alone, with its `PolicyError`: a batch hook that raises is
asked again about each half of the batch, down to single tasks, so that an exception about
one task (a malformed label, say) costs only that task its round, as per item.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from firmament_py.model.entities import Task
from firmament_py.sdk.batch_questions import RowErrors
from firmament_py.sdk.columns import NEVER, BoolArray, IntArray, TaskBatch
from firmament_py.sdk.errors import PolicyError
from firmament_py.sdk.manager import PolicyManager
from firmament_py.sdk.types import ArcDescriptor, ClusterView, MachineView, ResourceView, TaskView

__all__ = ["ArcsOut", "Role", "TimedAnswer", "ask_arcs_out", "ask_timed"]


class Role(enum.Enum):
    """The arcs out of a task whose costs a round may reprice, and the batch hook of each."""

    WAITING = "task_to_unscheduled_batch"
    """waiting task -> U(job)"""
    PREEMPTION = "task_preemption_batch"
    """running task -> U(job), with preemption"""
    CONTINUATION = "task_continuation_batch"
    """running task -> its machine"""


@dataclass
class TimedAnswer:
    """One arc per task of a list (`ask_timed`): its timed cost (see `TimedArcs`) with the
    origin of its clock, capacity and min_flow; rows of failed tasks hold zeros."""

    base: IntArray
    per_second: IntArray
    frozen: IntArray
    since: IntArray
    capacity: IntArray
    min_flow: IntArray
    this_round_only: bool
    errors: RowErrors = field(default_factory=dict)

    @classmethod
    def empty(cls, length: int, *, this_round_only: bool) -> TimedAnswer:
        def zeros() -> IntArray:
            return np.zeros(length, dtype=np.int64)

        never = np.full(length, NEVER, dtype=np.int64)
        return cls(zeros(), zeros(), zeros(), never, zeros(), zeros(), this_round_only)


def ask_timed(
    policy: PolicyManager, cluster: ClusterView, role: Role, tasks: Sequence[Task]
) -> TimedAnswer:
    """The `role` arc of each task (all waiting for WAITING, all running otherwise)."""
    if not tasks:
        return TimedAnswer.empty(0, this_round_only=False)
    if policy.per_item(role.value):
        return _per_item_timed(policy, cluster, role, tasks)
    batch = TaskBatch(tasks)
    ask = {
        Role.WAITING: policy.task_to_unscheduled_batch,
        Role.PREEMPTION: policy.task_preemption_batch,
        Role.CONTINUATION: policy.task_continuation_batch,
    }[role]
    checked, errors, raised = ask(tasks=batch, cluster=cluster)
    if raised and len(tasks) > 1:
        half = len(tasks) // 2
        return _joined_timed(
            ask_timed(policy, cluster, role, tasks[:half]),
            ask_timed(policy, cluster, role, tasks[half:]),
        )
    if checked is None:
        answer = TimedAnswer.empty(len(tasks), this_round_only=False)
        answer.errors = errors
        return answer
    frozen, since = batch.clock_origins(checked.clock)
    return TimedAnswer(
        checked.cost,
        checked.per_second,
        frozen,
        since,
        checked.capacity,
        checked.min_flow,
        checked.this_round_only,
        errors,
    )


def _joined_timed(first: TimedAnswer, second: TimedAnswer) -> TimedAnswer:
    """The answers about two lists of tasks, as the answer about the first list then the second."""

    def joined(name: str) -> IntArray:
        return np.concatenate([getattr(first, name), getattr(second, name)])

    offset = len(first.base)
    errors = {**first.errors, **{row + offset: e for row, e in second.errors.items()}}
    return TimedAnswer(
        joined("base"),
        joined("per_second"),
        joined("frozen"),
        joined("since"),
        joined("capacity"),
        joined("min_flow"),
        first.this_round_only or second.this_round_only,
        errors,
    )


def _per_item_timed(
    policy: PolicyManager, cluster: ClusterView, role: Role, tasks: Sequence[Task]
) -> TimedAnswer:
    """Ask the per-item hook of `role` about each task; its answer holds for this round."""
    answer = TimedAnswer.empty(len(tasks), this_round_only=True)
    base, capacity, min_flow = answer.base, answer.capacity, answer.min_flow
    machines = cluster._state.machines
    for row, task in enumerate(tasks):
        view = TaskView(task)
        descriptor: ArcDescriptor
        try:
            if role is Role.WAITING:
                descriptor = policy.task_to_unscheduled(task=view, cluster=cluster)
            elif role is Role.PREEMPTION:
                descriptor = policy.task_preemption(task=view, cluster=cluster)
            else:
                assert task.machine_id is not None
                machine = MachineView(machines[task.machine_id])
                descriptor = policy.task_continuation(task=view, machine=machine, cluster=cluster)
        except PolicyError as error:
            answer.errors[row] = error
            continue
        base[row], capacity[row], min_flow[row] = (
            descriptor.cost,
            descriptor.capacity,
            descriptor.min_flow,
        )
    return answer


@dataclass
class ArcsOut:
    """Arcs from a list of tasks to classes or to resources (`ask_arcs_out`): arc k leaves the
    task of row `rows[k]` for `targets[k]`; `depends_on_topology` per row."""

    rows: IntArray
    targets: list[object]
    cost: IntArray
    capacity: IntArray
    min_flow: IntArray
    depends_on_topology: BoolArray
    errors: RowErrors = field(default_factory=dict)


def ask_arcs_out(
    policy: PolicyManager, cluster: ClusterView, tasks: Sequence[Task], *, to_classes: bool
) -> ArcsOut:
    """The tasks' arcs to their classes (`to_classes`) or to their preferred resources."""
    hook = "task_to_equiv_classes_batch" if to_classes else "task_to_resources_batch"
    if not tasks:
        empty = np.zeros(0, dtype=np.int64)
        return ArcsOut(empty, [], empty, empty, empty, np.zeros(0, np.bool_))
    if policy.per_item(hook):
        return _per_item_arcs(policy, cluster, tasks, to_classes=to_classes)
    batch = TaskBatch(tasks)
    if to_classes:
        checked, errors, raised = policy.task_to_equiv_classes_batch(tasks=batch, cluster=cluster)
    else:
        checked, errors, raised = policy.task_to_resources_batch(tasks=batch, cluster=cluster)
    if raised and len(tasks) > 1:
        half = len(tasks) // 2
        return _joined_arcs(
            ask_arcs_out(policy, cluster, tasks[:half], to_classes=to_classes),
            ask_arcs_out(policy, cluster, tasks[half:], to_classes=to_classes),
            half,
        )
    if checked is None:
        empty = np.zeros(0, dtype=np.int64)
        return ArcsOut(empty, [], empty, empty, empty, np.zeros(len(tasks), np.bool_), errors)
    return ArcsOut(
        checked.rows,
        checked.targets,
        checked.cost,
        checked.capacity,
        checked.min_flow,
        np.asarray(checked.depends_on_topology, dtype=np.bool_),
        errors,
    )


def _joined_arcs(first: ArcsOut, second: ArcsOut, offset: int) -> ArcsOut:
    """The answers about two lists of tasks (the first `offset` long), as one."""
    return ArcsOut(
        np.concatenate([first.rows, second.rows + offset]),
        first.targets + second.targets,
        np.concatenate([first.cost, second.cost]),
        np.concatenate([first.capacity, second.capacity]),
        np.concatenate([first.min_flow, second.min_flow]),
        np.concatenate([first.depends_on_topology, second.depends_on_topology]),
        {**first.errors, **{row + offset: e for row, e in second.errors.items()}},
    )


def _per_item_arcs(
    policy: PolicyManager, cluster: ClusterView, tasks: Sequence[Task], *, to_classes: bool
) -> ArcsOut:
    """The per-item shape hooks, task by task. Every task's answer may change with the
    topology: that is what the per-item hooks were promised (they are asked again then)."""
    rows: list[int] = []
    targets: list[object] = []
    values: list[int] = []
    errors: RowErrors = {}
    for row, task in enumerate(tasks):
        view = TaskView(task)
        arcs: list[tuple[object, ArcDescriptor]] = []
        try:
            if to_classes:
                for equiv_class in policy.task_equiv_classes(task=view, cluster=cluster):
                    descriptor = policy.task_to_equiv_class(
                        task=view, equiv_class=equiv_class, cluster=cluster
                    )
                    arcs.append((equiv_class, descriptor))
            else:
                for ref in policy.task_preference_arcs(task=view, cluster=cluster):
                    resource = ResourceView(ref, cluster)
                    descriptor = policy.task_to_resource(
                        task=view, resource=resource, cluster=cluster
                    )
                    arcs.append((ref, descriptor))
        except PolicyError as error:
            errors[row] = error
            continue
        for target, descriptor in arcs:
            rows.append(row)
            targets.append(target)
            values += (descriptor.cost, descriptor.capacity, descriptor.min_flow)
    columns = np.array(values, dtype=np.int64).reshape(-1, 3)
    return ArcsOut(
        np.array(rows, dtype=np.int64),
        targets,
        columns[:, 0].copy(),
        columns[:, 1].copy(),
        columns[:, 2].copy(),
        np.ones(len(tasks), dtype=np.bool_),
        errors,
    )
