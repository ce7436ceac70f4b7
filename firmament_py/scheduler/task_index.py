"""`TaskIndex`: the task nodes of the flow graph, and the arcs out of them whose costs move.

A task node is built when its task joins the graph or changes (`build`): every question about
it is asked (`task_questions.py`), its out-arcs are made exactly the answers (`reconcile`), and
two of them are remembered by role, in arrays indexed by node id: the arc to U(job) (waiting,
or preemption) and the continuation arc to its machine, each with what its cost follows (a
base, a rate per second, and the origin of the clock it grows with). In every other round a
task costs no question at all: `reprice` works the timed costs out for the round's time and
writes those that changed, in one array call. Only answers that hold for one round (per-item
hooks asked every round, batch answers marked `this_round_only`) are asked for again each
round, about every task in their role.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from firmament_py.flow.graph import FlowGraph, NodeKind
from firmament_py.flow.placement import UNPLACED
from firmament_py.model.entities import Task
from firmament_py.model.ids import EquivClassId, JobId, MachineId, TaskId, Time
from firmament_py.model.states import TaskState
from firmament_py.scheduler.arc_edits import ArcRows, IntArray, reconcile
from firmament_py.scheduler.task_questions import (
    ArcsOut,
    Role,
    TimedAnswer,
    ask_arcs_out,
    ask_timed,
)
from firmament_py.sdk.columns import NEVER, elapsed, timed_costs
from firmament_py.sdk.errors import PolicyError
from firmament_py.sdk.manager import PolicyManager
from firmament_py.sdk.types import ClusterView, ResourceRef

__all__ = ["TaskIndex", "TaskTargets"]

# Arc types (`ArcType` in graph_manager.py), as the graph stores them.
_RUNNING, _UNSCHEDULED, _PREEMPTION, _PREFERENCE, _TO_CLASS = 1, 2, 3, 4, 5


@dataclass(frozen=True, slots=True)
class TaskTargets:
    """The nodes a task's arcs go to, found (or made) by the graph manager."""

    job: Callable[[JobId], int]
    equiv_class: Callable[[EquivClassId], int]
    resource: Callable[[ResourceRef], int]
    machine: Callable[[MachineId], int]


class _RoleArcs:
    """One arc per task node (-1: none) and what its cost follows: `cost = base + per_second x
    (frozen + max(0, now - since)) / 10^6`, within +-MAX_COST; capacity and min_flow fixed."""

    _FIELDS = ("arc", "base", "per_second", "frozen", "since", "capacity", "min_flow")

    def __init__(self) -> None:
        self.arc = np.full(0, -1, dtype=np.int64)
        self.base = np.zeros(0, dtype=np.int64)
        self.per_second = np.zeros(0, dtype=np.int64)
        self.frozen = np.zeros(0, dtype=np.int64)
        self.since = np.zeros(0, dtype=np.int64)
        self.capacity = np.zeros(0, dtype=np.int64)
        self.min_flow = np.zeros(0, dtype=np.int64)

    def room(self, size: int) -> None:
        """Entries for node ids below `size`."""
        if size <= len(self.arc):
            return
        size = max(size, 2 * len(self.arc), 64)
        for name in self._FIELDS:
            old = getattr(self, name)
            fill = -1 if name == "arc" else NEVER if name == "since" else 0
            new = np.full(size, fill, dtype=np.int64)
            new[: len(old)] = old
            setattr(self, name, new)

    def set(self, nodes: IntArray, answer: TimedAnswer, rows: IntArray) -> None:
        """Give `nodes` what rows `rows` of `answer` say."""
        for name in ("base", "per_second", "frozen", "since", "capacity", "min_flow"):
            getattr(self, name)[nodes] = getattr(answer, name)[rows]

    def clear(self, nodes: IntArray) -> None:
        self.arc[nodes] = -1
        self.per_second[nodes] = 0

    def costs(self, nodes: IntArray, now: Time) -> IntArray:
        """What the arcs of `nodes` cost at `now`."""
        return timed_costs(
            self.base[nodes],
            self.per_second[nodes],
            elapsed(self.frozen[nodes], self.since[nodes], now),
        )

    def write(self, graph: FlowGraph, nodes: IntArray, now: Time) -> None:
        """Set the arcs of `nodes` to their values at `now` (the graph skips unchanged ones)."""
        if len(nodes):
            graph.trusted_change_arcs(
                self.arc[nodes], self.min_flow[nodes], self.capacity[nodes], self.costs(nodes, now)
            )


@dataclass
class _Part:
    """One timed answer about some of the tasks being built: which rows (of the task list) it
    covers, the arc type, and each row's target node."""

    role: Role
    answer: TimedAnswer
    rows: IntArray
    kind: int
    targets: IntArray


class TaskIndex:
    """The task nodes of one flow graph (see the module docstring)."""

    def __init__(self, graph: FlowGraph) -> None:
        self.graph = graph
        self.node_of: dict[TaskId, int] = {}
        self.task_of: dict[int, TaskId] = {}
        # The tasks in the graph by what their arcs say: waiting, or running on a machine.
        self.waiting: dict[TaskId, None] = {}
        self.running: dict[TaskId, MachineId] = {}
        # By node: the machine node the task ran on when last built (UNPLACED if it waited),
        # and whether its answers may change with the topology.
        self.placed_on = np.zeros(64, dtype=np.int64)
        self.depends_on_topology = np.zeros(64, dtype=np.bool_)
        self.is_task = np.zeros(64, dtype=np.bool_)
        self.to_wait = _RoleArcs()  # to U(job): waiting, or preemption
        self.to_stay = _RoleArcs()  # continuation, to the machine
        # Roles whose last answers hold for one round: asked again each round.
        self.round_only: set[Role] = set()

    def _room(self, bound: int) -> None:
        if bound > len(self.placed_on):
            grown = max(bound, 2 * len(self.placed_on))
            placed_on = np.zeros(grown, dtype=np.int64)
            placed_on[: len(self.placed_on)] = self.placed_on
            depends = np.zeros(grown, dtype=np.bool_)
            depends[: len(self.depends_on_topology)] = self.depends_on_topology
            is_task = np.zeros(grown, dtype=np.bool_)
            is_task[: len(self.is_task)] = self.is_task
            self.placed_on, self.depends_on_topology, self.is_task = placed_on, depends, is_task
        self.to_wait.room(bound)
        self.to_stay.room(bound)

    def nodes(self) -> IntArray:
        """Every task node, in node id order."""
        return np.flatnonzero(self.is_task[: self.graph.node_id_bound])

    def topology_dependent(self) -> list[TaskId]:
        """The tasks in the graph whose answers may change when the topology does."""
        nodes = self.nodes()
        task_of = self.task_of
        return [task_of[node] for node in nodes[self.depends_on_topology[nodes]].tolist()]

    # ------------------------------------------------------------------ removing

    def remove(self, task_ids: Iterable[TaskId]) -> list[TaskId]:
        """Take these tasks' nodes (and arcs) out of the graph; return those that had one."""
        removed: list[TaskId] = []
        nodes: list[int] = []
        for task_id in task_ids:
            node = self.node_of.pop(task_id, None)
            if node is None:
                continue
            del self.task_of[node]
            self.waiting.pop(task_id, None)
            self.running.pop(task_id, None)
            removed.append(task_id)
            nodes.append(node)
        if nodes:
            array = np.array(nodes, dtype=np.int64)
            self.is_task[array] = False
            self.to_wait.clear(array)
            self.to_stay.clear(array)
            self.depends_on_topology[array] = False
            self.graph.trusted_remove_nodes(array)
        return removed

    # ------------------------------------------------------------------ building

    def build(
        self,
        tasks: Sequence[Task],
        policy: PolicyManager,
        cluster: ClusterView,
        targets: TaskTargets,
    ) -> tuple[dict[TaskId, PolicyError], list[Task]]:
        """Ask every question about `tasks` (each RUNNABLE or RUNNING) and give each a node
        with exactly the arcs of its answers. Returns the errors of the tasks left out (their
        nodes removed, without `task_removed`) and the tasks that got a new node (for the
        caller's `task_added`)."""
        is_running = [task.state is TaskState.RUNNING for task in tasks]
        running = np.flatnonzero(np.array(is_running, dtype=np.bool_))
        waiting = np.flatnonzero(~np.array(is_running, dtype=np.bool_))
        preemption = policy.preemption_enabled
        shaped = np.arange(len(tasks), dtype=np.int64) if preemption else waiting
        parts = self._timed_parts(tasks, policy, cluster, targets, waiting, running)
        shape_tasks = [tasks[row] for row in shaped.tolist()]
        classes = ask_arcs_out(policy, cluster, shape_tasks, to_classes=True)
        preferences = ask_arcs_out(policy, cluster, shape_tasks, to_classes=False)
        errors: dict[int, PolicyError] = {}
        for part in parts:
            for row, error in part.answer.errors.items():
                errors.setdefault(int(part.rows[row]), error)
        for arcs_out in (classes, preferences):
            for row, error in arcs_out.errors.items():
                errors.setdefault(int(shaped[row]), error)
        _check_room_to_wait(policy, tasks, parts, errors)
        _check_min_flow(policy, tasks, parts, shaped, (classes, preferences), errors)
        ok = np.ones(len(tasks), dtype=np.bool_)
        ok[list(errors)] = False
        failed = {tasks[row].task_id: error for row, error in errors.items()}
        self.remove(failed)
        task_nodes, fresh = self._nodes_for(tasks, ok)
        self._room(self.graph.node_id_bound)
        wanted = ArcRows()
        now = cluster.now
        for part in parts:
            keep = ok[part.rows]
            rows, nodes = np.flatnonzero(keep), task_nodes[part.rows[keep]]
            answer = part.answer
            wanted.add_many(
                nodes,
                part.targets[keep],
                part.kind,
                answer.min_flow[rows],
                answer.capacity[rows],
                timed_costs(
                    answer.base[rows],
                    answer.per_second[rows],
                    elapsed(answer.frozen[rows], answer.since[rows], now),
                ),
            )
        for arcs_out, kind, lookup in (
            (classes, _TO_CLASS, targets.equiv_class),
            (preferences, _PREFERENCE, targets.resource),
        ):
            self._want_arcs_out(wanted, arcs_out, kind, lookup, shaped, ok, task_nodes)
        reconcile(self.graph, task_nodes[ok], wanted)
        self.to_wait.clear(task_nodes[ok])  # a rebuilt task's roles are its new answers'
        self.to_stay.clear(task_nodes[ok])
        for part in parts:
            keep = ok[part.rows]
            rows, nodes = np.flatnonzero(keep), task_nodes[part.rows[keep]]
            role_arcs = self.to_stay if part.role is Role.CONTINUATION else self.to_wait
            role_arcs.set(nodes, part.answer, rows)
            role_arcs.arc[nodes] = self.graph.trusted_find_out_arcs(
                nodes, part.targets[keep], np.full(len(nodes), part.kind, dtype=np.int64)
            )
            self._note_round_only(part.role, part.answer, len(part.rows))
        depends = np.zeros(len(tasks), dtype=np.bool_)
        for arcs_out in (classes, preferences):
            depends[shaped] |= arcs_out.depends_on_topology
        return failed, self._note(tasks, ok, task_nodes, fresh, depends, parts)

    def _timed_parts(
        self,
        tasks: Sequence[Task],
        policy: PolicyManager,
        cluster: ClusterView,
        targets: TaskTargets,
        waiting: IntArray,
        running: IntArray,
    ) -> list[_Part]:
        """The timed questions about the tasks: waiting ones' arcs to U(job), running ones'
        continuation and, with preemption, their arcs to U(job)."""

        def part(role: Role, rows: IntArray, kind: int, target: Callable[[Task], int]) -> _Part:
            chosen = [tasks[row] for row in rows.tolist()]
            answer = ask_timed(policy, cluster, role, chosen)
            nodes = np.fromiter(map(target, chosen), dtype=np.int64, count=len(chosen))
            return _Part(role, answer, rows, kind, nodes)

        job_node, machine_node = targets.job, targets.machine

        def job(task: Task) -> int:
            return job_node(task.job_id)

        def machine(task: Task) -> int:
            return machine_node(task.machine_id)  # type: ignore[arg-type]  # it runs

        parts = [
            part(Role.WAITING, waiting, _UNSCHEDULED, job),
            part(Role.CONTINUATION, running, _RUNNING, machine),
        ]
        if policy.preemption_enabled:
            parts.append(part(Role.PREEMPTION, running, _PREEMPTION, job))
        return parts

    def _nodes_for(self, tasks: Sequence[Task], ok: np.ndarray) -> tuple[IntArray, list[int]]:
        """Each task's node (0 for those left out): its own, or one made now for the tasks
        without one (their rows are returned)."""
        get = self.node_of.get
        known = [get(task.task_id, 0) for task in tasks]
        task_nodes = np.array(known, dtype=np.int64) * ok
        fresh = np.flatnonzero((task_nodes == 0) & ok).tolist()
        if fresh:
            task_nodes[fresh] = self.graph.trusted_add_nodes(
                np.ones(len(fresh), dtype=np.int64),
                np.full(len(fresh), NodeKind.TASK, dtype=np.int64),
            )
        return task_nodes, fresh

    @staticmethod
    def _want_arcs_out(
        wanted: ArcRows,
        arcs_out: ArcsOut,
        kind: int,
        lookup: Callable[..., int],
        shaped: IntArray,
        ok: np.ndarray,
        task_nodes: IntArray,
    ) -> None:
        task_rows = shaped[arcs_out.rows]
        keep = ok[task_rows]
        targets = [lookup(t) for t, k in zip(arcs_out.targets, keep.tolist(), strict=True) if k]
        wanted.add_many(
            task_nodes[task_rows[keep]],
            np.array(targets, dtype=np.int64),
            kind,
            arcs_out.min_flow[keep],
            arcs_out.capacity[keep],
            arcs_out.cost[keep],
        )

    def _note(
        self,
        tasks: Sequence[Task],
        ok: np.ndarray,
        task_nodes: IntArray,
        fresh: list[int],
        depends: np.ndarray,
        parts: list[_Part],
    ) -> list[Task]:
        """Record the built tasks in the maps; return those new to the graph."""
        placed = np.full(len(tasks), UNPLACED, dtype=np.int64)
        for part in parts:
            if part.role is Role.CONTINUATION:
                placed[part.rows] = part.targets
        built = np.flatnonzero(ok)
        nodes = task_nodes[built]
        self.placed_on[nodes] = placed[built]
        self.depends_on_topology[nodes] = depends[built]
        new_tasks = [tasks[row] for row in fresh]
        if new_tasks:
            ids = [task.task_id for task in new_tasks]
            made = task_nodes[fresh]
            self.node_of.update(zip(ids, made.tolist(), strict=True))
            self.task_of.update(zip(made.tolist(), ids, strict=True))
            self.is_task[made] = True
        waiting, running = self.waiting, self.running
        for row in built.tolist():
            task = tasks[row]
            machine_id = task.machine_id
            if machine_id is None:
                running.pop(task.task_id, None)
                waiting[task.task_id] = None
            else:
                waiting.pop(task.task_id, None)
                running[task.task_id] = machine_id
        return new_tasks

    # ------------------------------------------------------------------ every round

    def reprice(
        self,
        policy: PolicyManager,
        cluster: ClusterView,
        tasks: Mapping[TaskId, Task],
        built: set[TaskId],
    ) -> dict[TaskId, PolicyError]:
        """Give every arc by role its cost at the round's time, asking again the questions
        whose answers held for one round (about the tasks not `built` this round). Returns
        the errors of tasks left out (their nodes removed)."""
        errors: dict[TaskId, PolicyError] = {}
        asked: dict[Role, Mapping[TaskId, object]] = {
            Role.WAITING: self.waiting,
            Role.CONTINUATION: self.running,
        }
        if policy.preemption_enabled:
            asked[Role.PREEMPTION] = self.running
        roles = {role for role in asked if self._asks_every_round(policy, role)}
        for role in sorted(roles, key=lambda r: r.value):
            chosen = [tasks[task_id] for task_id in asked[role] if task_id not in built]
            answer = ask_timed(policy, cluster, role, chosen)
            for row, error in answer.errors.items():
                errors.setdefault(chosen[row].task_id, error)
            good = np.array(
                [row for row in range(len(chosen)) if row not in answer.errors], dtype=np.int64
            )
            nodes = np.array([self.node_of[chosen[row].task_id] for row in good.tolist()], np.int64)
            if role is not Role.CONTINUATION or not policy.preemption_enabled:
                capacity = answer.capacity[good] if len(good) else good
                for row in good[capacity < 1].tolist():
                    errors.setdefault(
                        chosen[row].task_id,
                        _no_room(policy, role, chosen[row], int(answer.capacity[row])),
                    )
            (self.to_stay if role is Role.CONTINUATION else self.to_wait).set(nodes, answer, good)
            self._note_round_only(role, answer, len(chosen))
        self.remove(errors)
        now = cluster.now
        for role_arcs in (self.to_wait, self.to_stay):
            ticking = (role_arcs.arc >= 0) & (role_arcs.per_second != 0)
            ticking &= role_arcs.since < now  # a clock that stands still leaves the cost alone
            role_arcs.write(self.graph, np.flatnonzero(ticking), now)
        for role in roles:
            role_arcs = self.to_stay if role is Role.CONTINUATION else self.to_wait
            nodes = np.array(
                [self.node_of[t] for t in asked[role] if t in self.node_of and t not in built],
                np.int64,
            )
            role_arcs.write(self.graph, nodes, now)
        return errors

    def _note_round_only(self, role: Role, answer: TimedAnswer, tasks: int) -> None:
        """A role is asked every round while its latest answer about some task says it holds
        for one round only."""
        if tasks:
            if answer.this_round_only:
                self.round_only.add(role)
            else:
                self.round_only.discard(role)

    def _asks_every_round(self, policy: PolicyManager, role: Role) -> bool:
        """Per item, waiting costs are asked every round, and continuation and preemption with
        preemption on (`hookspecs`); in batch, answers marked `this_round_only`."""
        if policy.per_item(role.value):
            return role is Role.WAITING or policy.preemption_enabled
        return role in self.round_only


def _no_room(policy: PolicyManager, role: Role, task: Task, capacity: int) -> PolicyError:
    """The arc to U(job) is what keeps every round feasible, and without preemption a running
    task's continuation is its only arc: each must carry the task."""
    per_item = {
        Role.WAITING: "task_to_unscheduled",
        Role.PREEMPTION: "task_preemption",
        Role.CONTINUATION: "task_continuation",
    }[role]
    hook = per_item if policy.per_item(role.value) else role.value
    if role is Role.CONTINUATION:
        why = (
            "without preemption the continuation is the task's only arc, so the flow problem "
            "would be infeasible"
        )
    else:
        why = (
            "the task could then neither wait nor, when no machine has room, be placed, which "
            "makes the flow problem infeasible"
        )
    return PolicyError(
        policy.name,
        f"{hook} for task {task.task_id} returned capacity {capacity}: {why}",
        hook=hook,
    )


def _check_room_to_wait(
    policy: PolicyManager, tasks: Sequence[Task], parts: list[_Part], errors: dict[int, PolicyError]
) -> None:
    """Every arc to U(job) carries its task, and so does a continuation without preemption."""
    for part in parts:
        if part.role is Role.CONTINUATION and policy.preemption_enabled:
            continue  # 0 is allowed: the task must move or be preempted
        for row in np.flatnonzero(part.answer.capacity < 1).tolist():
            task_row = int(part.rows[row])
            if row not in part.answer.errors:
                capacity = int(part.answer.capacity[row])
                errors.setdefault(task_row, _no_room(policy, part.role, tasks[task_row], capacity))


def _check_min_flow(
    policy: PolicyManager,
    tasks: Sequence[Task],
    parts: list[_Part],
    shaped: IntArray,
    arcs_out: tuple[ArcsOut, ...],
    errors: dict[int, PolicyError],
) -> None:
    """A task carries one unit: the min_flow of all its arcs together may be 1 at most."""
    pinned = np.zeros(len(tasks), dtype=np.int64)
    for part in parts:
        np.add.at(pinned, part.rows, part.answer.min_flow)
    for answer in arcs_out:
        np.add.at(pinned, shaped[answer.rows], answer.min_flow)
    for row in np.flatnonzero(pinned > 1).tolist():
        errors.setdefault(
            row,
            PolicyError(
                policy.name,
                f"the arcs out of task {tasks[row].task_id} ask for min_flow {int(pinned[row])} "
                "in total, but a task carries one unit",
            ),
        )
