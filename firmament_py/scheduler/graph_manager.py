"""`FlowGraphManager`: keeps the flow network in step with the cluster, asking the policy.

The graph has the shape `sdk/hookspecs.py` draws: one node per task in the graph (supply 1),
one unscheduled aggregator U(job) per job with tasks that may wait, one node per equivalence
class, pod, rack and machine (LEAF), and the sink, whose demand is the number of task nodes.
The manager owns the graph and the maps between its node ids and the cluster's ids; it reads
`ClusterState` and never changes it.

A round's update (`update`) runs Firmament's two passes, in this order:

1. The `round_started` notification. Resources: nodes for machines, racks and pods that
   joined, removal of those that left (with their arcs), and the `machine_added` /
   `machine_removed` notifications.
2. Pass 1, from the sink up: the policy's statistics pass over the resource topology; its
   results are what `ResourceView.stats` serves for the rest of the round. The topology and
   leaf-to-sink arcs of a resource are asked again when its statistics or a child's changed.
3. Pass 2, from the task nodes: tasks that changed since the last round (submitted, placed,
   evicted, migrated, updated, finished) are added, rebuilt or removed; the other waiting
   tasks only have their unscheduled arc priced again, since waiting costs grow with time
   (running tasks their continuation and preemption arcs, with preemption). When a machine
   joined or left, every task in the graph is rebuilt, because its preference arcs may change.
   Then every class the tasks reach, breadth first through class-to-class arcs, is asked for
   its arcs; classes and aggregators nothing points to any more are dropped.

Each node's out-arcs are reconciled with the policy's answer as a whole (`_reconcile`): an arc is
identified by its destination and its type (`ArcType`, stored as the flow graph's arc kind), so
an unchanged answer changes nothing and the solver sees only real changes. A pass collects the
arcs to add and remove, and the task nodes to add and remove, in an `_Edits` and hands them to
the graph at its end in a few array calls, which costs a few microseconds less per edit than a
graph call for each. Nothing in a pass reads what its own edits change (a task node's
out-arcs are read once, when it is rebuilt; in-degrees only after the pass).

Errors. A `PolicyError` from a hook about one task leaves that task out of the graph for the
round (reported, and tried again next round); any other `PolicyError` ends the update, and the
next round starts again from what is still marked as changed, so nothing is lost.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Iterable, Mapping

import numpy as np
import numpy.typing as npt

from firmament_py.flow.graph import FlowGraph, NodeKind
from firmament_py.flow.placement import UNPLACED, extract_placement_array
from firmament_py.model.cluster import ClusterState
from firmament_py.model.entities import Task
from firmament_py.model.ids import EquivClassId, JobId, MachineId, PodId, RackId, TaskId
from firmament_py.model.states import TaskState
from firmament_py.sdk.manager import PolicyError, PolicyManager
from firmament_py.sdk.types import (
    ArcDescriptor,
    JobView,
    MachineView,
    ResourceKind,
    ResourceRef,
    ResourceStats,
    ResourceView,
    TaskView,
)

__all__ = ["ArcType", "FlowGraphManager"]


class ArcType(enum.IntEnum):
    """What an arc stands for, stored as its kind in the flow graph (and in DIMACS output).
    0 and 1 keep Firmament's meaning (other, running)."""

    OTHER = 0
    RUNNING = 1
    """running task -> its machine (continuation)"""
    UNSCHEDULED = 2
    """waiting task -> U(job)"""
    PREEMPTION = 3
    """running task -> U(job), with preemption"""
    PREFERENCE = 4
    """task -> pod, rack or machine"""
    TO_CLASS = 5
    """task -> class, class -> class"""
    CLASS_TO_RESOURCE = 6
    TOPOLOGY = 7
    """pod -> rack, rack -> machine"""
    TO_SINK = 8
    """machine -> sink, U(job) -> sink"""


ArcKey = tuple[int, int]
"""An out-arc of a node, identified by (destination node, ArcType)."""

# The arc types the manager keys most often, as plain ints, as `ArcKey`s hold them.
_RUNNING = int(ArcType.RUNNING)
_UNSCHEDULED = int(ArcType.UNSCHEDULED)
_PREEMPTION = int(ArcType.PREEMPTION)
_TO_CLASS = int(ArcType.TO_CLASS)
_PREFERENCE = int(ArcType.PREFERENCE)
_TOPOLOGY = int(ArcType.TOPOLOGY)
_CLASS_TO_RESOURCE = int(ArcType.CLASS_TO_RESOURCE)
_TO_SINK = int(ArcType.TO_SINK)


class _Edits:
    """A pass's graph edits, kept until `apply`: arcs to change, task nodes and arcs to remove,
    task nodes and arcs to add. Rows of ints in flat lists, which the cyclic collector does not
    track: a round's edits add nothing to its work."""

    __slots__ = ("added", "changed", "changed_by_key", "drop_arcs", "drop_nodes", "new_tasks")

    def __init__(self) -> None:
        self.changed: list[int] = []  # arc, lower, capacity, cost
        self.changed_by_key: list[int] = []  # node, target, arc type, lower, capacity, cost
        self.drop_arcs: list[int] = []
        self.drop_nodes: list[int] = []
        # Task nodes to add, in order, with the machine node each runs on (UNPLACED if it
        # waits); until `apply` adds them, arcs out of the i-th have source -1 - i.
        self.new_tasks: dict[TaskId, int] = {}
        self.added: list[int] = []  # source, target, lower, capacity, cost, arc type

    def add_task(self, task_id: TaskId, machine_node: int) -> int:
        """Add a task node; return the stand-in for its id that `add_arcs` takes."""
        if task_id in self.new_tasks:
            raise AssertionError(f"task {task_id} is added twice in one pass")
        self.new_tasks[task_id] = machine_node
        return -len(self.new_tasks)

    def add_arcs(self, node: int, arcs: dict[ArcKey, ArcDescriptor]) -> None:
        """Add `arcs` out of `node` (or out of the task node `add_task` stood `node` for), in
        order."""
        added = self.added
        for (target, arc_type), descriptor in arcs.items():
            added += (
                node,
                target,
                descriptor.min_flow,
                descriptor.capacity,
                descriptor.cost,
                arc_type,
            )

    def change_arc(self, arc: int, descriptor: ArcDescriptor) -> None:
        """Give the live arc `arc` these values."""
        self.changed += (arc, descriptor.min_flow, descriptor.capacity, descriptor.cost)

    def change_arc_to(
        self, node: int, target: int, arc_type: ArcType, descriptor: ArcDescriptor
    ) -> None:
        """Give the first arc of this type from `node` to `target` (which must exist) these
        values."""
        self.changed_by_key += (
            node,
            target,
            arc_type,
            descriptor.min_flow,
            descriptor.capacity,
            descriptor.cost,
        )

    def apply(self, graph: FlowGraph) -> npt.NDArray[np.int64]:
        """Make the edits (removals before additions, so their ids are free again); return the
        new task nodes' ids, in the order of `new_tasks`. Every edit is made even when a keyed
        change finds no arc (a bug: AssertionError after the rest), so the graph always says
        what the manager's maps say."""
        changes = np.array(self.changed, dtype=np.int64).reshape(-1, 4)
        missing = np.zeros(0, dtype=np.int64)
        if self.changed_by_key:
            keyed = np.array(self.changed_by_key, dtype=np.int64).reshape(-1, 6)
            ends = (keyed[:, 0].copy(), keyed[:, 1].copy(), keyed[:, 2].copy())
            arcs = graph.trusted_find_out_arcs(*ends)
            missing = np.flatnonzero(arcs < 0)
            found = np.column_stack([arcs, keyed[:, 3:]])[arcs >= 0]
            changes = np.concatenate([changes, found])
        if len(changes):
            graph.trusted_change_arcs(changes[:, 0], changes[:, 1], changes[:, 2], changes[:, 3])
        # Arcs before nodes: an arc that a removed node also takes with it goes only once.
        if self.drop_arcs:
            graph.trusted_remove_arcs(np.array(self.drop_arcs, dtype=np.int64))
        if self.drop_nodes:
            graph.trusted_remove_nodes(np.array(self.drop_nodes, dtype=np.int64))
        count = len(self.new_tasks)
        nodes = np.zeros(0, dtype=np.int64)
        if count:
            nodes = graph.trusted_add_nodes(
                np.ones(count, dtype=np.int64), np.full(count, NodeKind.TASK, dtype=np.int64)
            )
        if self.added:
            rows = np.array(self.added, dtype=np.int64).reshape(-1, 6)
            src = rows[:, 0]
            stand_in = src < 0
            src[stand_in] = nodes[-1 - src[stand_in]]
            graph.trusted_add_arcs(*rows.T)
        if missing.size:
            node, target, arc_type = keyed[missing[0], :3].tolist()
            raise AssertionError(
                f"node {node} has no {ArcType(arc_type).name} arc to node {target}"
            )
        return nodes


class FlowGraphManager:
    """The flow graph of one cluster under one policy, updated once per scheduling round."""

    def __init__(self, policy: PolicyManager, state: ClusterState) -> None:
        self.policy = policy
        self.state = state
        self._stats: dict[ResourceRef, ResourceStats] = {}
        self.cluster = policy.cluster_view(state, self._stats)
        self.graph = FlowGraph()
        self.sink = self.graph.add_node(0, NodeKind.SINK)
        self._task_node: dict[TaskId, int] = {}
        self._node_task: dict[int, TaskId] = {}
        self._job_node: dict[JobId, int] = {}
        self._class_node: dict[EquivClassId, int] = {}
        self._resource_node: dict[ResourceRef, int] = {}
        self._node_machine: dict[int, MachineId] = {}
        # The live resources' refs by id (made once, not every round) and machines' nodes.
        self._machine_ref: dict[MachineId, ResourceRef] = {}
        self._rack_ref: dict[RackId, ResourceRef] = {}
        self._pod_ref: dict[PodId, ResourceRef] = {}
        self._machine_node: dict[MachineId, int] = {}
        # Tasks in the graph by what their arcs describe: waiting, or running on a machine.
        self._waiting: dict[TaskId, None] = {}
        self._running: dict[TaskId, MachineId] = {}
        # Tasks changed since their arcs were last built (kept until an update succeeds), and
        # whether every task must be rebuilt (a machine joined or left).
        self._changed: dict[TaskId, None] = {}
        self._rebuild_all = False
        # The statistics each resource's out-arcs were last asked with.
        self._priced: dict[ResourceRef, ResourceStats] = {}
        # By node id, for the graph's task nodes: the machine node the task runs on as its arcs
        # were last built, UNPLACED (0) if it waits. Written whenever a task is built, so an
        # entry is only read for a node whose build finished; other entries mean nothing.
        self._placed_on = np.zeros(64, dtype=np.int64)

    # ------------------------------------------------------------------ reading

    @property
    def task_ids(self) -> Iterable[TaskId]:
        """The tasks in the graph (waiting or running), in the order they joined it."""
        return self._task_node.keys()

    @property
    def changed_tasks(self) -> Iterable[TaskId]:
        """Tasks marked as changed that the next update will rebuild or remove."""
        return self._changed.keys()

    def task_node(self, task_id: TaskId) -> int | None:
        return self._task_node.get(task_id)

    def machine_node(self, machine_id: MachineId) -> int | None:
        return self._machine_node.get(machine_id)

    def class_node(self, equiv_class: EquivClassId) -> int | None:
        return self._class_node.get(equiv_class)

    def job_node(self, job_id: JobId) -> int | None:
        return self._job_node.get(job_id)

    @property
    def stats(self) -> Mapping[ResourceRef, ResourceStats]:
        """Every live resource's statistics from the latest pass."""
        return self._stats

    # ------------------------------------------------------------------ changes in

    def mark_all_changed(self) -> None:
        """Rebuild every task at the next update (machine labels changed, say, which may change
        any task's classes and preferences)."""
        self._rebuild_all = True

    def mark_changed(self, task_ids: Iterable[TaskId]) -> None:
        """Note tasks whose state, machine or attributes changed: the next update rebuilds
        (or removes) their nodes and arcs."""
        for task_id in task_ids:
            self._changed[task_id] = None

    # ------------------------------------------------------------------ the update

    def update(self) -> list[PolicyError]:
        """Bring the graph in step with the cluster state (see the module docstring).

        Returns the errors of tasks left out of the graph this round. Raises PolicyError,
        leaving what is marked as changed for the next update, if a hook about a resource, a
        class or a job fails.
        """
        self.policy.round_started(cluster=self.cluster)
        if self._sync_resources():
            self._rebuild_all = True
        statistics = self.policy.statistics_pass(self.cluster)  # sees the previous pass's
        self._stats.clear()
        self._stats.update(statistics)
        self._refresh_resources()
        errors = self._update_tasks(rebuild_all=self._rebuild_all)
        self._rebuild_all = False
        self._refresh_classes()
        self._refresh_jobs()
        self.graph.set_supply(self.sink, -len(self._task_node))
        return errors

    def _sync_resources(self) -> bool:
        """Add and remove resource nodes; True if any machine joined or left."""
        changed = False
        state = self.state
        live: dict[ResourceKind, Mapping[str, object]] = {
            ResourceKind.MACHINE: state.machines,
            ResourceKind.RACK: state.racks,
            ResourceKind.POD: state.pods,
        }
        # Look for resources that left only if the ids differ (a set comparison in C).
        if (
            self._machine_ref.keys() != state.machines.keys()
            or self._rack_ref.keys() != state.racks.keys()
            or self._pod_ref.keys() != state.pods.keys()
        ):
            for ref in [ref for ref in self._resource_node if ref.id not in live[ref.kind]]:
                node = self._resource_node.pop(ref)
                self.graph.trusted_remove_node(node)
                if ref.kind is ResourceKind.MACHINE:
                    del self._node_machine[node]
                    del self._machine_ref[ref.id]
                    del self._machine_node[ref.id]
                    self.policy.machine_removed(machine_id=ref.id, cluster=self.cluster)
                    changed = True
                elif ref.kind is ResourceKind.RACK:
                    del self._rack_ref[ref.id]
                else:
                    del self._pod_ref[ref.id]
        for pod_id in state.pods:
            if pod_id not in self._pod_ref:
                ref = ResourceRef.pod(pod_id)
                self._resource(ref)
                self._pod_ref[pod_id] = ref
        for rack_id in state.racks:
            if rack_id not in self._rack_ref:
                ref = ResourceRef.rack(rack_id)
                self._resource(ref)
                self._rack_ref[rack_id] = ref
        machine_refs = self._machine_ref
        for machine_id, machine in state.machines.items():
            if machine_id not in machine_refs:
                ref = ResourceRef.machine(machine_id)
                node = self._resource(ref)
                machine_refs[machine_id] = ref
                self._machine_node[machine_id] = node
                self._node_machine[node] = machine_id
                self.policy.machine_added(machine=MachineView(machine), cluster=self.cluster)
                changed = True
        return changed

    def _resource(self, ref: ResourceRef) -> int:
        node = self._resource_node.get(ref)
        if node is None:
            kind = NodeKind.LEAF if ref.kind is ResourceKind.MACHINE else NodeKind.OTHER
            node = self.graph.trusted_add_node(0, kind)
            self._resource_node[ref] = node
        return node

    def _refresh_resources(self) -> None:
        """Ask for the topology and leaf-to-sink arcs of resources whose statistics, or whose
        children's, changed since their arcs were last asked for (new resources: never)."""
        stats, priced = self._stats, self._priced
        for ref in [ref for ref in priced if ref not in stats]:
            del priced[ref]
        # Each resource's statistics compared once (not again as some parent's child).
        changed = {
            ref for ref, new in stats.items() if (old := priced.get(ref)) is not new and new != old
        }
        state, machine_refs, rack_refs = self.state, self._machine_ref, self._rack_ref
        resource_node = self._resource_node
        edits = _Edits()
        for ref, node in resource_node.items():
            # The children of `ResourceView(ref).children`, read here without the views.
            kind = ref.kind
            if kind is ResourceKind.MACHINE:
                children: tuple[ResourceRef, ...] = ()
            elif kind is ResourceKind.RACK:
                children = tuple([machine_refs[m] for m in state.racks[ref.id].machine_ids])
            else:
                children = tuple([rack_refs[r] for r in state.pods[ref.id].rack_ids])
            if ref not in changed and changed.isdisjoint(children):
                continue
            topology, leaf = self.policy.resource_arcs(ref, children, self.cluster)
            desired: dict[ArcKey, ArcDescriptor] = {
                (resource_node[child], _TOPOLOGY): descriptor
                for child, descriptor in zip(children, topology, strict=True)
            }
            if leaf is not None:
                desired[(self.sink, _TO_SINK)] = leaf
            self._reconcile(node, desired, edits)
        edits.apply(self.graph)
        # Only now: a failed pass leaves everything to be asked again next time.
        priced.update(stats)

    # ------------------------------------------------------------------ tasks

    def _update_tasks(self, *, rebuild_all: bool) -> list[PolicyError]:
        errors: list[PolicyError] = []
        changed = self._changed
        if rebuild_all:
            changed = {**changed, **dict.fromkeys(self._task_node)}
        still_changed: dict[TaskId, None] = {}
        tasks = self.state.tasks  # a new read-only view per access: fetch it once
        edits = _Edits()
        try:
            for task_id in changed:
                task = tasks.get(task_id)
                if task is None or task.state not in (TaskState.RUNNABLE, TaskState.RUNNING):
                    self._remove_task(task_id, edits)
                    continue
                try:
                    self._build_task(task, edits)
                except PolicyError as error:
                    errors.append(error)
                    self._remove_task(task_id, edits, notify=False)
                    still_changed[task_id] = None
            priced = [(task_id, self._price_waiting) for task_id in self._waiting]
            if self.policy.preemption_enabled:
                priced += [(task_id, self._price_running) for task_id in self._running]
            for task_id, price in priced:
                if task_id in changed:
                    continue
                try:
                    price(tasks[task_id], edits)
                except PolicyError as error:
                    errors.append(error)
                    self._remove_task(task_id, edits, notify=False)
                    still_changed[task_id] = None
        finally:
            # Even after an unexpected error: the maps already say what the edits do.
            self._apply_task_edits(edits)
        self._changed = still_changed
        return errors

    def _apply_task_edits(self, edits: _Edits) -> None:
        nodes = edits.apply(self.graph)
        ids = nodes.tolist()
        self._task_node.update(zip(edits.new_tasks, ids, strict=True))
        self._node_task.update(zip(ids, edits.new_tasks, strict=True))
        if ids:
            self._placed_on_room(max(ids))
            self._placed_on[nodes] = list(edits.new_tasks.values())

    def _remove_task(self, task_id: TaskId, edits: _Edits, *, notify: bool = True) -> None:
        node = self._task_node.pop(task_id, None)
        if node is None:
            return
        del self._node_task[node]
        self._waiting.pop(task_id, None)
        self._running.pop(task_id, None)
        edits.drop_nodes.append(node)
        if notify:
            self.policy.task_removed(task_id=task_id, cluster=self.cluster)

    def _build_task(self, task: Task, edits: _Edits) -> None:
        """Ask every hook about `task`, then give its node exactly those arcs (in `edits`)."""
        view = TaskView(task)
        cluster = self.cluster
        ask = self.policy
        running = task.state is TaskState.RUNNING
        # Answers first, nodes after: a failing hook must not leave half a task behind.
        continuation: ArcDescriptor | None = None
        waiting: ArcDescriptor | None = None
        waiting_arc = _UNSCHEDULED
        to_classes: list[tuple[EquivClassId, ArcDescriptor]] = []
        to_resources: list[tuple[ResourceRef, ArcDescriptor]] = []
        pinned = 0
        if running:
            assert task.machine_id is not None
            machine = MachineView(self.state.machines[task.machine_id])
            continuation = ask.task_continuation(task=view, machine=machine, cluster=cluster)
            pinned += continuation.min_flow
        if not running or ask.preemption_enabled:
            if running:
                waiting = ask.task_preemption(task=view, cluster=cluster)
                waiting_arc = _PREEMPTION
            else:
                waiting = ask.task_to_unscheduled(task=view, cluster=cluster)
            self._require_path_to_wait(task, waiting)
            pinned += waiting.min_flow
            for equiv_class in ask.task_equiv_classes(task=view, cluster=cluster):
                descriptor = ask.task_to_equiv_class(
                    task=view, equiv_class=equiv_class, cluster=cluster
                )
                to_classes.append((equiv_class, descriptor))
                pinned += descriptor.min_flow
            for ref in ask.task_preference_arcs(task=view, cluster=cluster):
                resource = ResourceView(ref, cluster)
                descriptor = ask.task_to_resource(task=view, resource=resource, cluster=cluster)
                to_resources.append((ref, descriptor))
                pinned += descriptor.min_flow
        if pinned > 1:
            raise PolicyError(
                ask.name,
                f"the arcs out of task {task.task_id} ask for min_flow {pinned} in total, but a "
                "task carries one unit",
            )
        # Targets in the order of the arcs: the continuation's machine, U(job) (made here if
        # new), the classes (likewise), the preferred resources.
        desired: dict[ArcKey, ArcDescriptor] = {}
        if continuation is not None:
            assert task.machine_id is not None
            desired[(self._machine_node[task.machine_id], _RUNNING)] = continuation
        if waiting is not None:
            desired[(self._job(task.job_id), waiting_arc)] = waiting
            for equiv_class, descriptor in to_classes:
                desired[(self._class(equiv_class), _TO_CLASS)] = descriptor
            resource_node = self._resource_node
            for ref, descriptor in to_resources:
                desired[(resource_node[ref], _PREFERENCE)] = descriptor
        machine_node = UNPLACED
        if running:
            assert task.machine_id is not None
            machine_node = self._machine_node[task.machine_id]
        node = self._task_node.get(task.task_id)
        if node is None:
            ask.task_added(task=view, cluster=cluster)
            edits.add_arcs(edits.add_task(task.task_id, machine_node), desired)
        else:
            self._reconcile(node, desired, edits)
            self._note_placement(node, machine_node)
        if running:
            assert task.machine_id is not None
            self._waiting.pop(task.task_id, None)
            self._running[task.task_id] = task.machine_id
        else:
            self._running.pop(task.task_id, None)
            self._waiting[task.task_id] = None

    def _note_placement(self, node: int, machine_node: int) -> None:
        self._placed_on_room(node)
        self._placed_on[node] = machine_node

    def _placed_on_room(self, node: int) -> None:
        """Grow `_placed_on` to hold an entry for `node`."""
        placed_on = self._placed_on
        if node >= len(placed_on):
            grown = np.zeros(max(node + 1, 2 * len(placed_on)), dtype=np.int64)
            grown[: len(placed_on)] = placed_on
            self._placed_on = grown

    def _require_path_to_wait(self, task: Task, descriptor: ArcDescriptor) -> None:
        """The arc to U(job) is what keeps every round feasible: it must carry the task."""
        if descriptor.capacity < 1:
            hook = "task_preemption" if task.state is TaskState.RUNNING else "task_to_unscheduled"
            raise PolicyError(
                self.policy.name,
                f"{hook} for task {task.task_id} returned capacity {descriptor.capacity}: the "
                "task could then neither wait nor, when no machine has room, be placed, which "
                "makes the flow problem infeasible",
                hook=hook,
            )

    def _price_waiting(self, task: Task, edits: _Edits) -> None:
        descriptor = self.policy.task_to_unscheduled(task=TaskView(task), cluster=self.cluster)
        self._require_path_to_wait(task, descriptor)
        edits.change_arc_to(
            self._task_node[task.task_id],
            self._job_node[task.job_id],
            ArcType.UNSCHEDULED,
            descriptor,
        )

    def _price_running(self, task: Task, edits: _Edits) -> None:
        view = TaskView(task)
        assert task.machine_id is not None
        node = self._task_node[task.task_id]
        machine = MachineView(self.state.machines[task.machine_id])
        continuation = self.policy.task_continuation(
            task=view, machine=machine, cluster=self.cluster
        )
        preemption = self.policy.task_preemption(task=view, cluster=self.cluster)
        self._require_path_to_wait(task, preemption)
        machine_node = self.machine_node_of(task.machine_id)
        edits.change_arc_to(node, machine_node, ArcType.RUNNING, continuation)
        edits.change_arc_to(node, self._job_node[task.job_id], ArcType.PREEMPTION, preemption)

    def machine_node_of(self, machine_id: MachineId) -> int:
        return self._machine_node[machine_id]

    # ------------------------------------------------------------------ classes and jobs

    def _class(self, equiv_class: EquivClassId) -> int:
        node = self._class_node.get(equiv_class)
        if node is None:
            node = self.graph.trusted_add_node(0, NodeKind.OTHER)
            self._class_node[equiv_class] = node
        return node

    def _job(self, job_id: JobId) -> int:
        node = self._job_node.get(job_id)
        if node is None:
            node = self.graph.trusted_add_node(0, NodeKind.OTHER)
            self._job_node[job_id] = node
        return node

    def _refresh_classes(self) -> None:
        """Ask every class some task reaches for its arcs (breadth first through class to class
        arcs), then drop the classes nothing points to."""
        graph, cluster, ask = self.graph, self.cluster, self.policy
        resource_node = self._resource_node
        in_degree = graph.trusted_in_degree
        queue = deque(c for c, node in self._class_node.items() if in_degree(node) > 0)
        seen = set(queue)
        edits = _Edits()
        while queue:
            equiv_class = queue.popleft()
            desired: dict[ArcKey, ArcDescriptor] = {
                (resource_node[ref], _CLASS_TO_RESOURCE): descriptor
                for ref, descriptor in ask.class_arcs(equiv_class, cluster)
            }
            for target in ask.equiv_class_to_equiv_class_arcs(
                equiv_class=equiv_class, cluster=cluster
            ):
                descriptor = ask.equiv_class_to_equiv_class(
                    source=equiv_class, target=target, cluster=cluster
                )
                desired[(self._class(target), ArcType.TO_CLASS)] = descriptor
                if target not in seen:
                    seen.add(target)
                    queue.append(target)
            self._reconcile(self._class_node[equiv_class], desired, edits)
        edits.apply(graph)
        # Dropping a class can orphan the classes it pointed to, hence the loop.
        while True:
            orphans = [c for c, node in self._class_node.items() if in_degree(node) == 0]
            if not orphans:
                break
            for equiv_class in orphans:
                graph.trusted_remove_node(self._class_node.pop(equiv_class))

    def _refresh_jobs(self) -> None:
        """Drop unscheduled aggregators no task points to; ask for the others' sink arcs."""
        edits = _Edits()
        for job_id, node in list(self._job_node.items()):
            incoming = self.graph.trusted_in_degree(node)
            if incoming == 0:
                self.graph.trusted_remove_node(node)
                del self._job_node[job_id]
                continue
            descriptor = self.policy.unscheduled_to_sink(
                job=JobView(self.state.jobs[job_id]), incoming_tasks=incoming, cluster=self.cluster
            )
            self._reconcile(node, {(self.sink, ArcType.TO_SINK): descriptor}, edits)
        edits.apply(self.graph)

    # ------------------------------------------------------------------ arcs

    def _reconcile(self, node: int, desired: dict[ArcKey, ArcDescriptor], edits: _Edits) -> None:
        """Make `node`'s out-arcs exactly `desired` (in `edits`): change the arcs that stay,
        remove the others, add the new ones. Consumes `desired`."""
        graph = self.graph
        # The node's arcs with their values, read in one go; an arc whose values already match
        # is left alone (`change_arc` would change nothing there either).
        for arc, dst, kind, low, cap, cost in graph.trusted_out_arcs(node):
            descriptor = desired.pop((dst, kind), None)
            if descriptor is None:
                edits.drop_arcs.append(arc)
            elif (
                descriptor.cost != cost or descriptor.capacity != cap or descriptor.min_flow != low
            ):
                edits.change_arc(arc, descriptor)
        edits.add_arcs(node, desired)

    # ------------------------------------------------------------------ decisions out

    def placements(self, flow: npt.NDArray[np.int64]) -> dict[TaskId, MachineId | None]:
        """Where the solved `flow` puts every task in the graph (None: unscheduled), in the
        order tasks joined the graph; see `flow.placement` for how ties are broken."""
        task_nodes, machine_nodes = self._extract(flow)
        node_task, node_machine = self._node_task, self._node_machine
        machine_ids = [None if m == UNPLACED else node_machine[m] for m in machine_nodes.tolist()]
        return dict(zip(map(node_task.__getitem__, task_nodes.tolist()), machine_ids, strict=True))

    def placement_changes(
        self, flow: npt.NDArray[np.int64]
    ) -> list[tuple[TaskId, MachineId | None, MachineId | None]]:
        """The tasks the solved `flow` puts elsewhere than where they are, in the order tasks
        joined the graph: (task, its machine now, its machine by the flow), None for waiting.
        "Now" is as of the task's last build, which after `update` is the cluster's: every
        change of a task's machine marks the task changed, and `update` rebuilds it. What
        comparing `placements(flow)` with every task's machine gives, without a dict of every
        task in the graph (a round's extraction is then proportional to what moves)."""
        task_nodes, machine_nodes = self._extract(flow)
        before = self._placed_on[task_nodes]
        moved = np.flatnonzero(machine_nodes != before)
        node_task, node_machine = self._node_task, self._node_machine
        return [
            (
                node_task[task],
                None if old == UNPLACED else node_machine[old],
                None if new == UNPLACED else node_machine[new],
            )
            for task, old, new in zip(
                task_nodes[moved].tolist(),
                before[moved].tolist(),
                machine_nodes[moved].tolist(),
                strict=True,
            )
        ]

    def _extract(self, flow: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], ...]:
        tasks = np.fromiter(self._node_task, dtype=np.int64, count=len(self._node_task))
        machines = np.fromiter(self._node_machine, dtype=np.int64, count=len(self._node_machine))
        return extract_placement_array(self.graph, flow, tasks, machines)
