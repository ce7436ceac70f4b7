"""`FlowGraphManager`: keeps the flow network in step with the cluster, asking the policy.

The graph has the shape `sdk/hookspecs.py` draws: one node per task in the graph (supply 1),
one unscheduled aggregator U(job) per job with tasks that may wait, one node per equivalence
class, pod, rack and machine (LEAF), and the sink, whose demand is the number of task nodes.
The manager owns the graph and the maps between its node ids and the cluster's ids; it reads
`ClusterState` and never changes it.

A round's update (`update`) runs Firmament's two passes, asking only about what changed:

1. The `round_started` notification. Resources (`ResourceIndex`): the machines the model says
   changed are read into columns; nodes for machines, racks and pods that joined, removal of
   those that left, and the `machine_removed` / `machine_added` notifications.
2. Pass 1, from the sink up: the statistics (the batch form, or the per-item pass), served to
   every hook for the rest of the round; then every topology and leaf-to-sink arc repriced by
   role, in one array change.
3. Pass 2, from the task nodes (`TaskIndex`): tasks that changed since the last round
   (submitted, placed, evicted, migrated, updated, finished) are added, rebuilt or removed;
   when a machine joined or left or changed labels, so are the tasks whose answers depend on
   the topology (every task, for a policy that answers per item). Every other task costs no
   question: its timed arcs are repriced for the round's time in arrays. Then every class the
   tasks reach is asked for its arcs, breadth first through class-to-class arcs, and every
   U(job) for its arc to the sink; classes and aggregators nothing points to are dropped.

Arcs out of a node are reconciled with the answers as a whole (`arc_edits.reconcile`),
identified by destination and `ArcType` (the arc kind in the graph), so an unchanged answer
changes nothing and the solvers see only real changes.

Errors. A `PolicyError` about one task leaves that task out of the graph for the round
(reported, and tried again next round); any other `PolicyError` ends the update, and the next
round starts again from what is still marked as changed, so nothing is lost.
"""

from __future__ import annotations

import enum
import time as wallclock
from collections import deque
from collections.abc import Iterable, Iterator, Mapping

import numpy as np
import numpy.typing as npt

from firmament_py.flow.graph import FlowGraph, NodeKind
from firmament_py.flow.placement import UNPLACED, extract_placement_array
from firmament_py.model.cluster import ClusterState
from firmament_py.model.ids import EquivClassId, JobId, MachineId, TaskId
from firmament_py.model.states import TaskState
from firmament_py.scheduler.arc_edits import ArcRows, IntArray, reconcile
from firmament_py.scheduler.job_index import JobIndex
from firmament_py.scheduler.resource_index import ResourceIndex
from firmament_py.scheduler.task_index import TaskIndex, TaskTargets
from firmament_py.sdk.columns import Topology
from firmament_py.sdk.errors import PolicyError
from firmament_py.sdk.manager import PolicyManager
from firmament_py.sdk.types import ResourceRef, ResourceStats, ResourceView, TaskView

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


class _RoundStats(Mapping[ResourceRef, ResourceStats]):
    """The statistics `ClusterView.stats` serves: the latest completed pass's."""

    def __init__(self) -> None:
        self.current: Mapping[ResourceRef, ResourceStats] = {}

    def __getitem__(self, ref: ResourceRef) -> ResourceStats:
        return self.current[ref]

    def __iter__(self) -> Iterator[ResourceRef]:
        return iter(self.current)

    def __len__(self) -> int:
        return len(self.current)

    def __contains__(self, ref: object) -> bool:
        return ref in self.current


class FlowGraphManager:
    """The flow graph of one cluster under one policy, updated once per scheduling round."""

    def __init__(self, policy: PolicyManager, state: ClusterState) -> None:
        self.policy = policy
        self.state = state
        self._stats = _RoundStats()
        self.cluster = policy.cluster_view(state, self._stats)
        self.graph = FlowGraph()
        self.sink = self.graph.add_node(0, NodeKind.SINK)
        self.resources = ResourceIndex(self.graph, self.sink, state)
        self.tasks = TaskIndex(self.graph)
        self._class_node: dict[EquivClassId, int] = {}
        self.jobs = JobIndex(self.graph, self.sink)
        # Tasks changed since their arcs were last built (kept until an update succeeds), and
        # whether every task, or those depending on the topology, must be rebuilt.
        self._changed: dict[TaskId, None] = {}
        self._rebuild_all = False
        self._topology_changed = False
        self.timings: dict[str, float] = {}
        """The last update's parts, in wall-clock seconds: resources (the model read, the
        statistics, the topology arcs), tasks (built, removed and repriced), classes, jobs."""
        self._targets = TaskTargets(
            job=self.jobs.node,
            equiv_class=self._class,
            resource=self.resources.node,
            machine=self.resources.node_of_machine.__getitem__,
        )

    # ------------------------------------------------------------------ reading

    @property
    def task_ids(self) -> Iterable[TaskId]:
        """The tasks in the graph (waiting or running), in the order they joined it."""
        return self.tasks.node_of.keys()

    @property
    def changed_tasks(self) -> Iterable[TaskId]:
        """Tasks marked as changed that the next update will rebuild or remove."""
        return self._changed.keys()

    def task_node(self, task_id: TaskId) -> int | None:
        return self.tasks.node_of.get(task_id)

    def machine_node(self, machine_id: MachineId) -> int | None:
        return self.resources.machine_node(machine_id)

    def machine_node_of(self, machine_id: MachineId) -> int:
        node = self.resources.machine_node(machine_id)
        assert node is not None, f"machine {machine_id!r} has no node"
        return node

    def class_node(self, equiv_class: EquivClassId) -> int | None:
        return self._class_node.get(equiv_class)

    def job_node(self, job_id: JobId) -> int | None:
        return self.jobs.node_of.get(job_id)

    @property
    def stats(self) -> Mapping[ResourceRef, ResourceStats]:
        """Every live resource's statistics from the latest pass."""
        return self._stats.current

    # ------------------------------------------------------------------ changes in

    def mark_all_changed(self) -> None:
        """Rebuild every task at the next update."""
        self._rebuild_all = True

    def mark_topology_changed(self) -> None:
        """Rebuild, at the next update, the tasks whose answers depend on the topology (a
        machine's labels changed, say); the update finds joins and leaves by itself."""
        self._topology_changed = True

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
        policy, cluster = self.policy, self.cluster
        started = wallclock.perf_counter()
        policy.round_started(cluster=cluster)
        synced = self.resources.sync()
        for machine_id in synced.left:
            policy.machine_removed(machine_id=machine_id, cluster=cluster)
        for machine in synced.joined:
            policy.machine_added(machine=machine, cluster=cluster)
        if synced.topology_changed:
            self._topology_changed = True
        topology, by_resource = self.resources.statistics(policy, cluster)
        self._stats.current = by_resource
        self.resources.refresh_arcs(policy, cluster)
        resources_done = wallclock.perf_counter()
        errors = self._update_tasks()
        tasks_done = wallclock.perf_counter()
        self._refresh_classes(topology)
        classes_done = wallclock.perf_counter()
        self.jobs.refresh(policy, cluster, self.state)
        self.graph.set_supply(self.sink, -len(self.tasks.node_of))
        self.timings = {
            "resources_seconds": resources_done - started,
            "tasks_seconds": tasks_done - resources_done,
            "classes_seconds": classes_done - tasks_done,
            "jobs_seconds": wallclock.perf_counter() - classes_done,
        }
        return errors

    def _update_tasks(self) -> list[PolicyError]:
        policy, cluster = self.policy, self.cluster
        changed = dict(self._changed)
        if self._rebuild_all or (
            self._topology_changed
            and (
                policy.per_item("task_to_equiv_classes_batch")
                or policy.per_item("task_to_resources_batch")
            )
        ):
            changed.update(dict.fromkeys(self.tasks.node_of))
        elif self._topology_changed:
            changed.update(dict.fromkeys(self.tasks.topology_dependent()))
        state_tasks = self.state.tasks
        live = (TaskState.RUNNABLE, TaskState.RUNNING)
        building = []
        gone = []
        for task_id in changed:
            task = state_tasks.get(task_id)
            if task is None or task.state not in live:
                gone.append(task_id)
            else:
                building.append(task)
        for task_id in self.tasks.remove(gone):
            policy.task_removed(task_id=task_id, cluster=cluster)
        failed, new_tasks = self.tasks.build(building, policy, cluster, self._targets)
        for task in new_tasks:
            try:
                policy.task_added(task=TaskView(task), cluster=cluster)
            except PolicyError as error:  # the task's own: it is left out, as for any hook
                failed[task.task_id] = error
                self.tasks.remove((task.task_id,))
        left_out = self.tasks.reprice(policy, cluster, state_tasks, set(changed))
        self._rebuild_all = self._topology_changed = False
        self._changed = dict.fromkeys([*failed, *left_out])
        return [*failed.values(), *left_out.values()]

    # ------------------------------------------------------------------ classes and jobs

    def _class(self, equiv_class: EquivClassId) -> int:
        node = self._class_node.get(equiv_class)
        if node is None:
            node = self.graph.trusted_add_node(0, NodeKind.OTHER)
            self._class_node[equiv_class] = node
        return node

    def _refresh_classes(self, topology: Topology) -> None:
        """Ask every class some task reaches for its arcs (breadth first through class to class
        arcs), then drop the classes nothing points to."""
        graph, policy = self.graph, self.policy
        classes = list(self._class_node)
        nodes = np.array([self._class_node[c] for c in classes], dtype=np.int64)
        reached = np.flatnonzero(graph.trusted_in_degrees(nodes) > 0) if len(nodes) else nodes
        queue = deque(classes[i] for i in reached.tolist())
        seen = set(queue)
        resource_nodes = np.concatenate(
            [self.resources.machine_nodes, self.resources.rack_nodes, self.resources.pod_nodes]
        )
        offsets = np.array(
            [0, len(topology.machines), len(topology.machines) + len(topology.racks)],
            dtype=np.int64,
        )
        wanted = ArcRows()
        sources: list[int] = []
        while queue:
            equiv_class = queue.popleft()
            node = self._class_node[equiv_class]
            sources.append(node)
            if policy.per_item("equiv_class_to_resources_batch"):
                self._class_resources_per_item(equiv_class, node, wanted)
            else:
                arcs, kinds, rows = policy.equiv_class_to_resources_batch(
                    equiv_class=equiv_class, topology=topology, cluster=self.cluster
                )
                wanted.add_many(
                    node,
                    resource_nodes[offsets[kinds] + rows],
                    ArcType.CLASS_TO_RESOURCE,
                    arcs.min_flow,
                    arcs.capacity,
                    arcs.cost,
                )
            for target in self._class_targets(equiv_class, node, wanted):
                if target not in seen:
                    seen.add(target)
                    queue.append(target)
        reconcile(graph, np.array(sources, dtype=np.int64), wanted)
        # Dropping a class can orphan the classes it pointed to, hence the loop.
        while self._class_node:
            classes = list(self._class_node)
            nodes = np.array([self._class_node[c] for c in classes], dtype=np.int64)
            orphans = np.flatnonzero(graph.trusted_in_degrees(nodes) == 0)
            if not len(orphans):
                break
            graph.trusted_remove_nodes(nodes[orphans])
            for i in orphans.tolist():
                del self._class_node[classes[i]]

    def _class_resources_per_item(
        self, equiv_class: EquivClassId, node: int, wanted: ArcRows
    ) -> None:
        policy, cluster, resources = self.policy, self.cluster, self.resources
        for ref in policy.equiv_class_preference_arcs(equiv_class=equiv_class, cluster=cluster):
            descriptor = policy.equiv_class_to_resource(
                equiv_class=equiv_class, resource=ResourceView(ref, cluster), cluster=cluster
            )
            wanted.add(
                node,
                resources.node(ref),
                ArcType.CLASS_TO_RESOURCE,
                descriptor.min_flow,
                descriptor.capacity,
                descriptor.cost,
            )

    def _class_targets(
        self, equiv_class: EquivClassId, node: int, wanted: ArcRows
    ) -> list[EquivClassId]:
        """Add the arcs from `equiv_class` to other classes to `wanted`; return those classes."""
        policy, cluster = self.policy, self.cluster
        if not policy.per_item("equiv_class_to_equiv_classes_batch"):
            arcs, targets = policy.equiv_class_to_equiv_classes_batch(
                equiv_class=equiv_class, cluster=cluster
            )
            target_nodes = np.array([self._class(t) for t in targets], dtype=np.int64)
            wanted.add_many(
                node, target_nodes, ArcType.TO_CLASS, arcs.min_flow, arcs.capacity, arcs.cost
            )
            return targets
        targets = list(
            policy.equiv_class_to_equiv_class_arcs(equiv_class=equiv_class, cluster=cluster)
        )
        for target in targets:
            descriptor = policy.equiv_class_to_equiv_class(
                source=equiv_class, target=target, cluster=cluster
            )
            wanted.add(
                node,
                self._class(target),
                ArcType.TO_CLASS,
                descriptor.min_flow,
                descriptor.capacity,
                descriptor.cost,
            )
        return targets

    # ------------------------------------------------------------------ decisions out

    def placements(self, flow: npt.NDArray[np.int64]) -> dict[TaskId, MachineId | None]:
        """Where the solved `flow` puts every task in the graph (None: unscheduled), in the
        order tasks joined the graph; see `flow.placement` for how ties are broken."""
        task_nodes, machine_nodes = self._extract(flow)
        task_of, node_machine = self.tasks.task_of, self.resources.node_machine
        machine_ids = [None if m == UNPLACED else node_machine[m] for m in machine_nodes.tolist()]
        return dict(zip(map(task_of.__getitem__, task_nodes.tolist()), machine_ids, strict=True))

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
        before = self.tasks.placed_on[task_nodes]
        moved = np.flatnonzero(machine_nodes != before)
        task_of, node_machine = self.tasks.task_of, self.resources.node_machine
        return [
            (
                task_of[task],
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

    def _extract(self, flow: npt.NDArray[np.int64]) -> tuple[IntArray, IntArray]:
        return extract_placement_array(
            self.graph, flow, self.tasks.nodes(), self.resources.machine_nodes
        )
