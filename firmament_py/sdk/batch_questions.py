"""The batch hooks as typed, checked methods of `PolicyManager` (the per-item ones are in
`sdk/manager.py`).

Each method asks one batch hook and checks its answer (`sdk/checks.py`). An answer about tasks
may be wrong in some rows only: the method returns the checked columns and, by batch row, a
`PolicyError` naming the task, so that the scheduler leaves out just those tasks (a hook that
fails as a whole, raising or answering the wrong type or shape, fails every row). An answer
about classes, resources or jobs feeds arcs every task may need, so any bad row fails it with a
`PolicyError` naming the hook, the row and the value.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, NamedTuple, TypeVar

import numpy as np

from firmament_py.model.ids import EquivClassId
from firmament_py.sdk.checks import (
    AnswerError,
    CheckedArcs,
    CheckedTaskArcs,
    CheckedTimedArcs,
    Problems,
    check_arc_columns,
    check_class_arcs,
    check_resource_arcs,
    check_stats_columns,
    check_task_arcs,
    check_timed_arcs,
)
from firmament_py.sdk.columns import (
    IntArray,
    JobBatch,
    ResourceColumns,
    StatsColumns,
    TaskBatch,
    Topology,
)
from firmament_py.sdk.errors import PolicyError
from firmament_py.sdk.types import ClusterView

__all__ = ["BatchQuestions", "RowErrors", "TaskAnswer"]

RowErrors = dict[int, PolicyError]
"""The rows of a task batch that an answer leaves out, each with its error."""

A = TypeVar("A", CheckedTimedArcs, CheckedTaskArcs)


class TaskAnswer(NamedTuple, Generic[A]):
    """A task batch hook's checked answer (None if it failed as a whole), the rows it leaves
    out, and whether the hook raised (the scheduler then asks about smaller batches, so that an
    exception about one task leaves out that task only)."""

    answer: A | None
    errors: RowErrors
    raised: bool


class BatchQuestions:
    """The batch half of `PolicyManager`: one method per batch hook, named after it, taking
    its arguments by keyword."""

    # What `PolicyManager` provides: its name, the preemption switch, asking a hook (the
    # policy first, then the defaults) and naming a bad answer.
    name: str
    preemption_enabled: bool
    _ask: Callable[[str, dict[str, object]], object]
    _wrong: Callable[[str, dict[str, object], object, str], PolicyError]

    # ------------------------------------------------------------------ about tasks

    def _task_answer(
        self, hook: str, tasks: TaskBatch, cluster: ClusterView
    ) -> tuple[object, dict[str, object], RowErrors | None]:
        """Ask a task batch hook; errors for every row if it raises."""
        arguments: dict[str, object] = {"tasks": tasks, "cluster": cluster}
        try:
            return self._ask(hook, arguments), arguments, None
        except PolicyError as error:
            return None, arguments, self._every_row(tasks, error)

    def _every_row(self, tasks: TaskBatch, error: PolicyError) -> RowErrors:
        ids = tasks.task_ids.tolist()
        return {
            row: PolicyError(
                self.name, f"{error.problem} (so task {task_id} is left out)", hook=error.hook
            )
            for row, task_id in enumerate(ids)
        }

    def _row_errors(
        self,
        hook: str,
        arguments: dict[str, object],
        answer: object,
        tasks: TaskBatch,
        problems: Problems,
    ) -> RowErrors:
        ids = tasks.task_ids
        return {
            row: self._wrong(
                hook, arguments, answer, f"row {row} (task {int(ids[row])}): {problem}"
            )
            for row, problem in problems.items()
        }

    def _timed(
        self, hook: str, tasks: TaskBatch, cluster: ClusterView
    ) -> TaskAnswer[CheckedTimedArcs]:
        answer, arguments, failed = self._task_answer(hook, tasks, cluster)
        if failed is not None:
            return TaskAnswer(None, failed, True)
        try:
            checked, problems = check_timed_arcs(answer, len(tasks))
        except AnswerError as error:
            wrong = self._wrong(hook, arguments, answer, str(error))
            return TaskAnswer(None, self._every_row(tasks, wrong), False)
        return TaskAnswer(
            checked, self._row_errors(hook, arguments, answer, tasks, problems), False
        )

    def task_to_unscheduled_batch(
        self, *, tasks: TaskBatch, cluster: ClusterView
    ) -> TaskAnswer[CheckedTimedArcs]:
        """The waiting tasks' arcs to U(job), and the failed rows."""
        return self._timed("task_to_unscheduled_batch", tasks, cluster)

    def task_continuation_batch(
        self, *, tasks: TaskBatch, cluster: ClusterView
    ) -> TaskAnswer[CheckedTimedArcs]:
        """The running tasks' arcs to their machines, and the failed rows."""
        return self._timed("task_continuation_batch", tasks, cluster)

    def task_preemption_batch(
        self, *, tasks: TaskBatch, cluster: ClusterView
    ) -> TaskAnswer[CheckedTimedArcs]:
        """The running tasks' arcs to U(job) with preemption, and the failed rows."""
        return self._timed("task_preemption_batch", tasks, cluster)

    def _task_arcs(
        self, hook: str, tasks: TaskBatch, cluster: ClusterView, *, to_classes: bool
    ) -> TaskAnswer[CheckedTaskArcs]:
        answer, arguments, failed = self._task_answer(hook, tasks, cluster)
        if failed is not None:
            return TaskAnswer(None, failed, True)
        try:
            checked, problems = check_task_arcs(
                answer, len(tasks), to_classes=to_classes, cluster=cluster
            )
        except AnswerError as error:
            wrong = self._wrong(hook, arguments, answer, str(error))
            return TaskAnswer(None, self._every_row(tasks, wrong), False)
        return TaskAnswer(
            checked, self._row_errors(hook, arguments, answer, tasks, problems), False
        )

    def task_to_equiv_classes_batch(
        self, *, tasks: TaskBatch, cluster: ClusterView
    ) -> TaskAnswer[CheckedTaskArcs]:
        """The tasks' arcs to their classes, and the failed rows."""
        return self._task_arcs("task_to_equiv_classes_batch", tasks, cluster, to_classes=True)

    def task_to_resources_batch(
        self, *, tasks: TaskBatch, cluster: ClusterView
    ) -> TaskAnswer[CheckedTaskArcs]:
        """The tasks' arcs to their preferred resources, and the failed rows."""
        return self._task_arcs("task_to_resources_batch", tasks, cluster, to_classes=False)

    # ------------------------------------------------------------------ about the rest

    def _whole(self, hook: str, arguments: dict[str, object], check: Any) -> Any:
        """Ask `hook` and check its answer with `check(answer) -> (checked, problems)`; raise
        PolicyError for any problem."""
        answer = self._ask(hook, arguments)
        try:
            checked, problems = check(answer)
        except AnswerError as error:
            raise self._wrong(hook, arguments, answer, str(error)) from None
        if problems:
            row, problem = min(problems.items())
            raise self._wrong(hook, arguments, answer, f"row {row}: {problem}")
        return checked

    def equiv_class_to_resources_batch(
        self, *, equiv_class: EquivClassId, topology: Topology, cluster: ClusterView
    ) -> tuple[CheckedArcs, IntArray, IntArray]:
        """A class's arcs to resources: their values, and each one's level code (0 machine, 1
        rack, 2 pod) and row."""

        def check(answer: object) -> tuple[tuple[CheckedArcs, IntArray, IntArray], Problems]:
            arcs, kinds, rows, problems = check_resource_arcs(answer, topology)
            return (arcs, kinds, rows), problems

        arguments: dict[str, object] = {
            "equiv_class": equiv_class,
            "topology": topology,
            "cluster": cluster,
        }
        result: tuple[CheckedArcs, IntArray, IntArray] = self._whole(
            "equiv_class_to_resources_batch", arguments, check
        )
        return result

    def equiv_class_to_equiv_classes_batch(
        self, *, equiv_class: EquivClassId, cluster: ClusterView
    ) -> tuple[CheckedArcs, list[EquivClassId]]:
        """A class's arcs to other classes: their values and targets."""

        def check(answer: object) -> tuple[tuple[CheckedArcs, list[EquivClassId]], Problems]:
            arcs, targets, problems = check_class_arcs(answer, equiv_class)
            return (arcs, targets), problems

        arguments: dict[str, object] = {"equiv_class": equiv_class, "cluster": cluster}
        result: tuple[CheckedArcs, list[EquivClassId]] = self._whole(
            "equiv_class_to_equiv_classes_batch", arguments, check
        )
        return result

    def resource_to_resource_batch(
        self, *, topology: Topology, cluster: ClusterView
    ) -> tuple[CheckedArcs, CheckedArcs]:
        """The topology arcs into every machine (from its rack) and every rack (from its pod)."""
        from firmament_py.sdk.answers import TopologyArcs

        def check(answer: object) -> tuple[tuple[CheckedArcs, CheckedArcs], Problems]:
            if not isinstance(answer, TopologyArcs):
                raise AnswerError(f"expected TopologyArcs, got {type(answer).__name__}")
            machines, machine_problems = check_arc_columns(answer.machines, len(topology.machines))
            racks, rack_problems = check_arc_columns(answer.racks, len(topology.racks))
            problems = {
                row: f"machine {topology.machines.ids[row]!r}: {p}"
                for row, p in machine_problems.items()
            }
            for row, problem in rack_problems.items():
                problems.setdefault(
                    len(topology.machines) + row, f"rack {topology.racks.ids[row]!r}: {problem}"
                )
            return (machines, racks), problems

        arguments: dict[str, object] = {"topology": topology, "cluster": cluster}
        result: tuple[CheckedArcs, CheckedArcs] = self._whole(
            "resource_to_resource_batch", arguments, check
        )
        return result

    def leaf_to_sink_batch(self, *, topology: Topology, cluster: ClusterView) -> CheckedArcs:
        """Every machine's arc to the sink; without preemption, a capacity below the machine's
        running (pinned) tasks is refused."""
        machines = topology.machines

        def check(answer: object) -> tuple[CheckedArcs, Problems]:
            arcs, problems = check_arc_columns(answer, len(machines))
            if not cluster.preemption_enabled:
                running = machines.model.running_tasks
                for row in np.flatnonzero(arcs.capacity < running).tolist():
                    problems.setdefault(
                        row,
                        f"capacity {arcs.capacity[row]} is below the {running[row]} tasks pinned "
                        "to the machine (preemption is disabled), which makes the flow problem "
                        "infeasible",
                    )
            return arcs, {row: f"machine {machines.ids[row]!r}: {p}" for row, p in problems.items()}

        arguments: dict[str, object] = {"topology": topology, "cluster": cluster}
        result: CheckedArcs = self._whole("leaf_to_sink_batch", arguments, check)
        return result

    def machine_stats_batch(
        self, *, machines: ResourceColumns, cluster: ClusterView
    ) -> StatsColumns:
        """Every machine's statistics for the round."""

        def check(answer: object) -> tuple[StatsColumns, Problems]:
            return check_stats_columns(answer, len(machines)), {}

        arguments: dict[str, object] = {"machines": machines, "cluster": cluster}
        result: StatsColumns = self._whole("machine_stats_batch", arguments, check)
        return result

    def unscheduled_to_sink_batch(self, *, jobs: JobBatch, cluster: ClusterView) -> CheckedArcs:
        """Every job's arc from U(job) to the sink; a capacity below the job's incoming tasks
        is refused (it could make the flow problem infeasible)."""

        def check(answer: object) -> tuple[CheckedArcs, Problems]:
            arcs, problems = check_arc_columns(answer, len(jobs))
            incoming = jobs.incoming_tasks
            for row in np.flatnonzero(arcs.capacity < incoming).tolist():
                problems.setdefault(
                    row,
                    f"capacity {arcs.capacity[row]} is below the {incoming[row]} tasks that may "
                    "wait here, which could make the flow problem infeasible",
                )
            ids = jobs.job_ids
            return arcs, {row: f"job {ids[row]!r}: {p}" for row, p in problems.items()}

        arguments: dict[str, object] = {"jobs": jobs, "cluster": cluster}
        result: CheckedArcs = self._whole("unscheduled_to_sink_batch", arguments, check)
        return result
