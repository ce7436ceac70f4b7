"""Carrying Zoe's virtual assignment out through the flow scheduler.

`FlowPlacement` is a `firmament_py.zoe.simulator.Placement` that owns a
`firmament_py.scheduler.Scheduler` over the cluster's machines (policy `zoe` by default,
`policies/zoe.py`). Each application in service is a job (its id) whose components are tasks:
every core component must run, and elastic ones may run up to the application's grant. After
each scheduling event, `realize` brings the tasks in step with the assignment, all at the
event's instant:

1. applications that left service lose their tasks; an application whose grant shrank loses
   its last elastic components (the only preemption Zoe does: elastic, never core);
2. the core components of newly admitted applications are submitted, alone (no elastic
   component is waiting then), and rounds run until quiet;
3. the gang check: an admitted application any of whose core components is still waiting is
   withdrawn, its placed cores removed at once (it never started) and reported as failed, for
   the simulator to put it back in line;
4. the granted elastic components still missing are submitted, in the serving set's order, and
   rounds run until quiet; those that found no machine are removed again (the next event tries
   anew), so what runs is exactly what is reported.

Core components of an application that started are never removed before it completes: step 1
removes elastic components only, and the policy does not preempt.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from firmament_py.model.events import (
    MachineAdded,
    TaskCompleted,
    TaskRemoved,
    TaskSubmitted,
)
from firmament_py.model.resources import Resources
from firmament_py.model.states import TaskState
from firmament_py.scheduler import Scheduler
from firmament_py.sdk import PolicyManager
from firmament_py.zoe.application import Application, Component
from firmament_py.zoe.capacity import ClusterCapacity
from firmament_py.zoe.simulator import PlacementOutcome

__all__ = ["APP_LABEL", "CLASS_LABEL", "FlowPlacement"]

CLASS_LABEL = "zoe.class"
APP_LABEL = "zoe.app"
DEFAULT_SLOTS = 4096
"""Slots per machine: far more than cpu and ram let run, so that requests decide."""


@dataclass
class _ApplicationTasks:
    core: list[int] = field(default_factory=list)
    elastic: list[int] = field(default_factory=list)


class FlowPlacement:
    """Places applications' components on `capacity`'s machines with the flow scheduler (see
    the module docstring). `policy` is a policy name, manager or object (default: the
    installed `zoe` policy); `solver` a solver name."""

    name = "flow"

    def __init__(
        self,
        capacity: ClusterCapacity,
        *,
        policy: str | PolicyManager | object = "zoe",
        solver: str = "cost-scaling",
        slots: int = DEFAULT_SLOTS,
    ) -> None:
        self.scheduler = Scheduler(policy=policy, solver=solver)
        for index, machine in enumerate(capacity.machines):
            self.scheduler.handle(
                MachineAdded(
                    time=0,
                    machine_id=f"m{index:04d}",
                    capacity=Resources(
                        cpu_millicores=machine.cpu_millicores, ram_bytes=machine.ram_bytes
                    ),
                    slots=slots,
                )
            )
        self._tasks: dict[str, _ApplicationTasks] = {}
        self._owner: dict[int, str] = {}
        self._next_task = 0
        self._time = 0
        self.rounds = 0
        self.refused_decisions = 0
        self.gang_failures = 0

    def close(self) -> None:
        self.scheduler.close()

    def __enter__(self) -> FlowPlacement:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------------ reading

    def tasks_of(self, app_id: str) -> tuple[list[int], list[int]]:
        """The task ids of an application's core and elastic components (empty if none)."""
        tasks = self._tasks.get(app_id, _ApplicationTasks())
        return list(tasks.core), list(tasks.elastic)

    def running(self, task_ids: Sequence[int]) -> int:
        """How many of `task_ids` run."""
        tasks = self.scheduler.state.tasks
        return sum(1 for t in task_ids if t in tasks and tasks[t].state is TaskState.RUNNING)

    # ------------------------------------------------------------------ the protocol

    def realize(
        self, now: float, serving: Sequence[Application], grants: Mapping[str, int]
    ) -> PlacementOutcome:
        time = self._microseconds(now)
        in_service = {application.app_id for application in serving}
        for app_id in [a for a in self._tasks if a not in in_service]:
            self._remove_application(app_id, time)
        for application in serving:
            tasks = self._tasks.get(application.app_id)
            if tasks is not None:
                while len(tasks.elastic) > grants[application.app_id]:
                    self._remove_task(tasks.elastic.pop(), time)
        admitted = [a for a in serving if a.app_id not in self._tasks]
        for application in admitted:
            tasks = self._tasks[application.app_id] = _ApplicationTasks()
            tasks.core = [self._submit(application, c, time) for c in application.core]
        if admitted:
            self._run_rounds(time)
        failed = tuple(
            application.app_id
            for application in admitted
            if self.running(self._tasks[application.app_id].core) < len(application.core)
        )
        for app_id in failed:
            self.gang_failures += 1
            self._remove_application(app_id, time)
        grew = False
        for application in serving:
            tasks = self._tasks.get(application.app_id)
            if tasks is None:
                continue
            wanted = grants[application.app_id]
            for component in application.elastic[len(tasks.elastic) : wanted]:
                tasks.elastic.append(self._submit(application, component, time))
                grew = True
        if grew:
            self._run_rounds(time)
        elastic_running: dict[str, int] = {}
        state = self.scheduler.state
        for app_id, tasks in self._tasks.items():
            placed: list[int] = []
            for task_id in tasks.elastic:
                if state.tasks[task_id].state is TaskState.RUNNING:
                    placed.append(task_id)
                else:
                    self._remove_task(task_id, time)
            tasks.elastic = placed
            elastic_running[app_id] = len(placed)
        return PlacementOutcome(elastic_running, failed)

    def release(self, application: Application, now: float) -> None:
        self._remove_application(application.app_id, self._microseconds(now), completed=True)

    # ------------------------------------------------------------------ tasks

    def _microseconds(self, now: float) -> int:
        self._time = max(self._time, round(now * 1_000_000))
        return self._time

    def _submit(self, application: Application, component: Component, time: int) -> int:
        task_id = self._next_task
        self._next_task += 1
        request = component.request
        self.scheduler.handle(
            TaskSubmitted(
                time=time,
                task_id=task_id,
                job_id=application.app_id,
                request=Resources(
                    cpu_millicores=request.cpu_millicores, ram_bytes=request.ram_bytes
                ),
                priority=application.priority,
                labels={CLASS_LABEL: component.kind.value, APP_LABEL: application.app_id},
            )
        )
        self._owner[task_id] = application.app_id
        return task_id

    def _remove_task(self, task_id: int, time: int, *, completed: bool = False) -> None:
        task = self.scheduler.state.tasks.get(task_id)
        if task is not None:
            if completed and task.state is TaskState.RUNNING:
                self.scheduler.handle(TaskCompleted(time=time, task_id=task_id))
            else:
                self.scheduler.handle(TaskRemoved(time=time, task_id=task_id))
        self._owner.pop(task_id, None)

    def _remove_application(self, app_id: str, time: int, *, completed: bool = False) -> None:
        tasks = self._tasks.pop(app_id, None)
        if tasks is None:
            return
        for task_id in tasks.core + tasks.elastic:
            self._remove_task(task_id, time, completed=completed)

    def _run_rounds(self, time: int) -> None:
        for result in self.scheduler.run_until_quiet(time, max_rounds=1000):
            self.rounds += 1
            self.refused_decisions += len(result.refused)
