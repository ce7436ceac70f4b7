"""`ResourceIndex`: the machines, racks and pods of the flow graph, kept as tables of columns.

One row per live resource, in the order the cluster holds them (machines as they joined), with
its graph node, what the model holds about it (slots, running tasks, capacity, reservations,
measured usage, labels) and the round's statistics. A round reads only the machines the model
says changed (`ClusterState.machines_touched_since`), so its cost follows the churn: the
tables are rebuilt from the model only when a machine joins or leaves.

The arcs between resources are tracked by role, one arc id per row: rack -> machine and
pod -> rack (the topology), machine -> sink (the leaf). Repricing them is one array change:
the round's answers (`resource_to_resource_batch`, `leaf_to_sink_batch`, or the per-item hooks
for the resources whose statistics changed) are compared with the arcs' values and written
where they differ.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import chain, compress
from operator import attrgetter, is_not
from typing import TypeVar

import numpy as np

from firmament_py.flow.graph import FlowGraph, NodeKind
from firmament_py.model.cluster import ClusterState
from firmament_py.model.entities import Machine
from firmament_py.model.ids import MachineId
from firmament_py.model.labels import Labels, LabelSelector
from firmament_py.model.resources import NO_RESOURCES, Resources
from firmament_py.scheduler.arc_edits import IntArray
from firmament_py.sdk.checks import CheckedArcs
from firmament_py.sdk.columns import (
    BoolArray,
    ResourceColumns,
    StatsColumns,
    Topology,
    machine_columns,
    sum_by_parent,
)
from firmament_py.sdk.errors import PolicyError
from firmament_py.sdk.manager import PolicyManager
from firmament_py.sdk.types import (
    ArcDescriptor,
    ClusterView,
    MachineView,
    ResourceKind,
    ResourceRef,
    ResourceStats,
    ResourceView,
)

__all__ = ["ResourceIndex", "ResourceSync"]

_TOPOLOGY = 7  # ArcType.TOPOLOGY
_TO_SINK = 8  # ArcType.TO_SINK


@dataclass(frozen=True, slots=True)
class ResourceSync:
    """What changed in the topology since the last round: machines that joined (their views,
    for `machine_added`) and left (their ids), and whether any machine's labels changed."""

    joined: list[MachineView]
    left: list[MachineId]
    labels_changed: bool

    @property
    def topology_changed(self) -> bool:
        return bool(self.joined or self.left or self.labels_changed)


class ResourceIndex:
    """The resource nodes of one flow graph and their columns (see the module docstring)."""

    def __init__(self, graph: FlowGraph, sink: int, state: ClusterState) -> None:
        self.graph = graph
        self.sink = sink
        self.state = state
        self._clock: int | None = None  # the state's machine_clock when last read
        self._membership = 0  # and its count of machines that joined or left
        # Machines: ids, the model's objects (to tell a machine that left and came back),
        # nodes, rack rows, labels, and what the model holds, by row.
        self.machine_ids: list[MachineId] = []
        self.machine_row: dict[MachineId, int] = {}
        self._machines: list[Machine] = []
        self.machine_nodes = np.zeros(0, dtype=np.int64)
        self._machine_rack = np.zeros(0, dtype=np.int64)
        self._labels: list[Labels] = []
        self._model = machine_columns([])
        # The model's objects each column was last read from (immutable: `is` tells a change).
        self._capacities: list[Resources | None] = []
        self._reserved: list[Resources | None] = []
        self._usages: list[Resources | None] = []
        # Racks and pods: ids, nodes, parent rows.
        self.rack_ids: list[str] = []
        self.rack_nodes = np.zeros(0, dtype=np.int64)
        self._rack_pod = np.zeros(0, dtype=np.int64)
        self.pod_ids: list[str] = []
        self.pod_nodes = np.zeros(0, dtype=np.int64)
        self._node_of: dict[ResourceRef, int] = {}
        self.node_machine: dict[int, MachineId] = {}
        self.node_of_machine: dict[MachineId, int] = {}
        self._machine_refs: list[ResourceRef] = []
        self._rack_refs: list[ResourceRef] = []
        self._pod_refs: list[ResourceRef] = []
        self._rack_row: dict[str, int] = {}
        self._pod_row: dict[str, int] = {}
        # The arcs by role (-1: none yet): into each machine from its rack, into each rack
        # from its pod, and from each machine to the sink.
        self._machine_in = np.zeros(0, dtype=np.int64)
        self._rack_in = np.zeros(0, dtype=np.int64)
        self._leaf = np.zeros(0, dtype=np.int64)
        self._matching: dict[tuple[LabelSelector, ...], BoolArray] = {}
        self.topology: Topology | None = None
        self._priced: Topology | None = None  # the statistics the arcs were last asked with

    # ------------------------------------------------------------------ reading

    def node(self, ref: ResourceRef) -> int:
        """The node of a live resource."""
        return self._node_of[ref]

    def machine_node(self, machine_id: MachineId) -> int | None:
        row = self.machine_row.get(machine_id)
        return None if row is None else int(self.machine_nodes[row])

    # ------------------------------------------------------------------ the model

    def sync(self) -> ResourceSync:
        """Bring the tables in step with the model: the machines changed since the last call,
        and new rows, nodes and arcs when a machine joined or left."""
        state = self.state
        if self._clock is None:
            touched = list(state.machines)
        else:
            touched = state.machines_touched_since(self._clock)
        rebuild = self._clock is None or self._membership != state.machines_joined_or_left
        self._clock = state.machine_clock
        self._membership = state.machines_joined_or_left
        if rebuild:
            return self._rebuild(touched)
        labels_changed = False
        if touched:
            rows = list(map(self.machine_row.__getitem__, touched))
            labels_changed = self._read(rows, list(map(state.machines.__getitem__, touched)))
        return ResourceSync([], [], labels_changed)

    def _read(self, rows: list[int], machines: list[Machine]) -> bool:
        """Copy what the model holds about `machines` into `rows`; True if labels changed.
        Resource vectors and labels are immutable values: one still the same object has not
        changed, and most machines a round touches changed only their tasks."""
        model = self._model
        index = np.array(rows, dtype=np.int64)
        positions = range(len(rows))
        model.slots[index] = list(map(_SLOTS, machines))
        model.running_tasks[index] = list(map(len, map(_RUNNING, machines)))
        for column, matrix, read in (
            (self._capacities, model.capacity, _CAPACITY),
            (self._reserved, model.reserved, _RESERVED),
            (self._usages, model.measured_usage, _USAGE),
            (self._labels, None, _LABELS),
        ):
            now = list(map(read, machines))
            changed = list(compress(positions, map(is_not, now, map(column.__getitem__, rows))))
            if not changed:
                continue
            if matrix is not None:
                vectors = [now[p] or NO_RESOURCES for p in changed]
                matrix[index[changed]] = np.fromiter(
                    chain.from_iterable(map(_VECTOR, vectors)), np.int64, 5 * len(vectors)
                ).reshape(-1, 5)
            for p in changed:
                column[rows[p]] = now[p]
            if matrix is None:
                self._matching = {}
                return True
        return False

    def _rebuild(self, touched: list[MachineId]) -> ResourceSync:
        """New tables for the machines the model holds now. The rows of machines that stay are
        carried over as arrays (their nodes, role arcs and columns), and only the touched
        machines are read from the model, so a machine joining or leaving costs array copies
        and a few list passes over the machine ids, not the model's reads for every machine.
        Nodes are added for resources that joined and removed (with their arcs) for those that
        left."""
        state, graph = self.state, self.graph
        live = state.machines
        old_rows, old_machines = self.machine_row, self._machines
        # A machine that left and came back is a new object in the model: a new machine here.
        left = [
            m for m in touched if m in old_rows and live.get(m) is not old_machines[old_rows[m]]
        ]
        left.sort(key=old_rows.__getitem__)
        machines = list(live.values())
        ids = list(live)
        count = len(ids)
        renewed = set(left)
        old_index = np.fromiter(
            (-1 if m in renewed else old_rows.get(m, -1) for m in ids), np.int64, count
        )
        joined_rows = np.flatnonzero(old_index < 0)
        joined = [machines[row] for row in joined_rows.tolist()]

        # The nodes of resources that left go first (with their arcs), new ones come after.
        old_nodes = self._node_of
        gone = [ResourceRef.machine(machine_id) for machine_id in left]
        gone += [ResourceRef.rack(r) for r in self.rack_ids if r not in state.racks]
        gone += [ResourceRef.pod(p) for p in self.pod_ids if p not in state.pods]
        if gone:
            graph.trusted_remove_nodes(np.array([old_nodes.pop(ref) for ref in gone], np.int64))
        # A rack's arc from its pod is kept only while the rack stays in the same pod: a rack
        # that emptied and came back elsewhere lost that arc with its old pod, or must move.
        old_pod_of = [self.pod_ids[row] for row in self._rack_pod.tolist()]
        racks = zip(self.rack_ids, old_pod_of, strict=True)
        old_rack_in = dict(zip(racks, self._rack_in.tolist(), strict=True))
        self.pod_ids = list(state.pods)
        self.rack_ids = list(state.racks)
        pod_row = {pod_id: row for row, pod_id in enumerate(self.pod_ids)}
        rack_row = {rack_id: row for row, rack_id in enumerate(self.rack_ids)}
        self._pod_row, self._rack_row = pod_row, rack_row
        self._rack_pod = np.array([pod_row[r.pod_id] for r in state.racks.values()], np.int64)
        self._pod_refs = [ResourceRef.pod(p) for p in self.pod_ids]
        self._rack_refs = [ResourceRef.rack(r) for r in self.rack_ids]
        old_refs = self._machine_refs
        self._machine_refs = [
            ResourceRef.machine(m) if row < 0 else old_refs[row]
            for m, row in zip(ids, old_index.tolist(), strict=True)
        ]
        new = [ref for ref in self._pod_refs + self._rack_refs if ref not in old_nodes]
        new += [self._machine_refs[row] for row in joined_rows.tolist()]
        new_nodes: list[int] = []
        if new:
            kinds = [
                NodeKind.LEAF if ref.kind is ResourceKind.MACHINE else NodeKind.OTHER for ref in new
            ]
            new_nodes = graph.trusted_add_nodes(
                np.zeros(len(new), dtype=np.int64), np.array(kinds, dtype=np.int64)
            ).tolist()
            old_nodes.update(zip(new, new_nodes, strict=True))
        self.pod_nodes = np.array([old_nodes[ref] for ref in self._pod_refs], np.int64)
        self.rack_nodes = np.array([old_nodes[ref] for ref in self._rack_refs], np.int64)
        self._rack_in = np.array(
            [old_rack_in.get((r.rack_id, r.pod_id), -1) for r in state.racks.values()], np.int64
        )

        # The machines' rows: carried over where they stay, read from the model where they
        # joined, and where they stay but were touched (below).
        none = np.full(len(joined), -1, np.int64)
        joined_nodes = new_nodes[len(new) - len(joined) :]  # the joined machines come last
        self.machine_nodes = _carried(self.machine_nodes, old_index, joined_nodes)
        self._machine_in = _carried(self._machine_in, old_index, none)
        self._leaf = _carried(self._leaf, old_index, none)
        old_model, fresh = self._model, machine_columns(joined)
        self._model = StatsColumns(
            **{
                name: _carried(getattr(old_model, name), old_index, getattr(fresh, name))
                for name in _STATS
            }
        )
        self._labels = _carried_list(self._labels, old_index, list(map(_LABELS, joined)))
        self._capacities = _carried_list(self._capacities, old_index, list(map(_CAPACITY, joined)))
        self._reserved = _carried_list(self._reserved, old_index, list(map(_RESERVED, joined)))
        self._usages = _carried_list(self._usages, old_index, list(map(_USAGE, joined)))
        self.machine_ids = ids
        self.machine_row = dict(zip(ids, range(count), strict=True))
        self._machines = machines
        self._machine_rack = np.fromiter(
            map(rack_row.__getitem__, map(_RACK, machines)), np.int64, count
        )
        self._node_of = old_nodes
        self.node_machine = dict(zip(self.machine_nodes.tolist(), ids, strict=True))
        self.node_of_machine.clear()  # in place: callers hold its `__getitem__`
        self.node_of_machine.update(zip(ids, self.machine_nodes.tolist(), strict=True))
        joined_ids = {machine.machine_id for machine in joined}
        stayed = [m for m in touched if m in live and m not in joined_ids]
        self._read(list(map(self.machine_row.__getitem__, stayed)), [live[m] for m in stayed])
        self._matching = {}
        self._priced = None
        return ResourceSync([MachineView(machine) for machine in joined], left, True)

    # ------------------------------------------------------------------ statistics

    def statistics(
        self, policy: PolicyManager, cluster: ClusterView
    ) -> tuple[Topology, Mapping[ResourceRef, ResourceStats]]:
        """The round's `Topology`: the model's columns, and the statistics the policy gives
        (`PolicyManager.round_statistics`); and the statistics by resource, as
        `ClusterView.stats` serves them."""
        machines = ResourceColumns(
            ResourceKind.MACHINE,
            self.machine_ids,
            self._machine_rack,
            _read_only(self._model),
            self._labels,
            self._matching,
            self._machine_refs,
            self.machine_row,
        )
        try:
            racks_model = sum_by_parent(
                self._machine_rack, len(self.rack_ids), machines.model, self.rack_ids
            )
            pods_model = sum_by_parent(self._rack_pod, len(self.pod_ids), racks_model, self.pod_ids)
        except OverflowError as error:
            raise PolicyError(policy.name, str(error), hook="machine_stats_batch") from None
        racks = ResourceColumns(
            ResourceKind.RACK,
            self.rack_ids,
            self._rack_pod,
            racks_model,
            refs=self._rack_refs,
            row_of=self._rack_row,
        )
        pods = ResourceColumns(
            ResourceKind.POD,
            self.pod_ids,
            np.full(len(self.pod_ids), -1, np.int64),
            pods_model,
            refs=self._pod_refs,
            row_of=self._pod_row,
        )
        topology = Topology(machines, racks, pods)
        by_resource = policy.round_statistics(topology=topology, cluster=cluster)
        self.topology = topology
        return topology, by_resource

    # ------------------------------------------------------------------ arcs

    def refresh_arcs(self, policy: PolicyManager, cluster: ClusterView) -> None:
        """Give every topology and leaf arc the round's answer (see the module docstring)."""
        topology = self.topology
        assert topology is not None
        machines, racks = topology.machines, topology.racks
        priced = self._priced
        if policy.per_item("resource_to_resource_batch"):
            changed_machines, changed_racks = self._changed_rows(topology, priced)
            rows = np.flatnonzero(changed_machines | (self._machine_in < 0))
            parents = np.flatnonzero(changed_racks)
            rows = np.union1d(rows, np.flatnonzero(np.isin(self._machine_rack, parents)))
            to_machines = self._ask_topology(policy, cluster, machines, rows, racks)
            rack_rows = np.flatnonzero(changed_racks | (self._rack_in < 0))
            changed_pods = self._changed_pods(topology, priced)
            rack_rows = np.union1d(rack_rows, np.flatnonzero(np.isin(self._rack_pod, changed_pods)))
            to_racks = self._ask_topology(policy, cluster, racks, rack_rows, topology.pods)
        else:
            every_machine, every_rack = policy.resource_to_resource_batch(
                topology=topology, cluster=cluster
            )
            rows = np.arange(len(machines), dtype=np.int64)
            rack_rows = np.arange(len(racks), dtype=np.int64)
            to_machines, to_racks = every_machine, every_rack
        self._machine_in = self._write(
            self._machine_in,
            rows,
            to_machines,
            self.rack_nodes[self._machine_rack[rows]],
            self.machine_nodes[rows],
            _TOPOLOGY,
        )
        self._rack_in = self._write(
            self._rack_in,
            rack_rows,
            to_racks,
            self.pod_nodes[self._rack_pod[rack_rows]],
            self.rack_nodes[rack_rows],
            _TOPOLOGY,
        )
        if policy.per_item("leaf_to_sink_batch"):
            changed_machines, _ = self._changed_rows(topology, priced)
            rows = np.flatnonzero(changed_machines | (self._leaf < 0))
            leaves = self._ask_leaves(policy, cluster, rows)
        else:
            leaves = policy.leaf_to_sink_batch(topology=topology, cluster=cluster)
            rows = np.arange(len(machines), dtype=np.int64)
        self._leaf = self._write(
            self._leaf,
            rows,
            leaves,
            self.machine_nodes[rows],
            np.full(len(rows), self.sink, np.int64),
            _TO_SINK,
        )
        self._priced = topology  # only now: a failure leaves everything to be asked again

    def _changed_rows(
        self, topology: Topology, priced: Topology | None
    ) -> tuple[BoolArray, BoolArray]:
        """The machines and racks whose statistics differ from those the arcs were asked with."""
        if priced is None:
            return (
                np.ones(len(topology.machines), dtype=np.bool_),
                np.ones(len(topology.racks), dtype=np.bool_),
            )
        return (
            ~topology.machines.stats.same_as(priced.machines.stats),
            ~topology.racks.stats.same_as(priced.racks.stats),
        )

    def _changed_pods(self, topology: Topology, priced: Topology | None) -> IntArray:
        if priced is None:
            return np.arange(len(topology.pods), dtype=np.int64)
        return np.flatnonzero(~topology.pods.stats.same_as(priced.pods.stats))

    def _ask_topology(
        self,
        policy: PolicyManager,
        cluster: ClusterView,
        children: ResourceColumns,
        rows: IntArray,
        parents: ResourceColumns,
    ) -> CheckedArcs:
        """`resource_to_resource` for the children of these rows, per item."""
        answers = [
            policy.resource_to_resource(
                parent=ResourceView(parents.refs[int(children.parents[row])], cluster),
                child=ResourceView(children.refs[row], cluster),
                cluster=cluster,
            )
            for row in rows.tolist()
        ]
        return _arcs_of(answers)

    def _ask_leaves(
        self, policy: PolicyManager, cluster: ClusterView, rows: IntArray
    ) -> CheckedArcs:
        """`leaf_to_sink` for the machines of these rows, per item."""
        machines = self._machines
        answers = [
            policy.leaf_to_sink(machine=MachineView(machines[row]), cluster=cluster)
            for row in rows.tolist()
        ]
        return _arcs_of(answers)

    def _write(
        self,
        role: IntArray,
        rows: IntArray,
        arcs: CheckedArcs,
        sources: IntArray,
        targets: IntArray,
        kind: int,
    ) -> IntArray:
        """Give the role arcs of `rows` these values, adding those that do not exist yet (or no
        longer join the right nodes: a machine that left a rack and came back in another)."""
        role = role.copy()
        if not len(rows):
            return role
        existing = role[rows]
        present = existing >= 0
        if present.any():
            graph_src = self.graph.arrays().src
            moved = present.copy()
            moved[present] = graph_src[existing[present]] != sources[present]
            if moved.any():
                self.graph.trusted_remove_arcs(existing[moved])
                present &= ~moved
            self.graph.trusted_change_arcs(
                existing[present],
                arcs.min_flow[present],
                arcs.capacity[present],
                arcs.cost[present],
            )
        missing = ~present
        if missing.any():
            role[rows[missing]] = self.graph.trusted_add_arcs(
                sources[missing],
                targets[missing],
                arcs.min_flow[missing],
                arcs.capacity[missing],
                arcs.cost[missing],
                np.full(int(missing.sum()), kind, dtype=np.int64),
            )
        return role


_T = TypeVar("_T")
_STATS = StatsColumns.__slots__
_RACK = attrgetter("rack_id")
_SLOTS = attrgetter("slots")
_RUNNING = attrgetter("running_task_ids")
_CAPACITY = attrgetter("capacity")
_RESERVED = attrgetter("reserved")
_USAGE = attrgetter("measured_usage")
_LABELS = attrgetter("labels")
_VECTOR = attrgetter(*Resources.DIMENSIONS)


def _carried(column: IntArray, old_rows: IntArray, fresh: IntArray | list[int]) -> IntArray:
    """The column of the new rows: row i is the old row `old_rows[i]`, or where that is -1 the
    next of `fresh` (the new rows' values, in order)."""
    carried = np.empty((len(old_rows), *column.shape[1:]), dtype=np.int64)
    kept = old_rows >= 0
    carried[kept] = column[old_rows[kept]]
    carried[~kept] = fresh
    return carried


def _carried_list(column: list[_T], old_rows: IntArray, fresh: list[_T]) -> list[_T]:
    """`_carried` for a list of objects."""
    new = iter(fresh)
    return [next(new) if row < 0 else column[row] for row in old_rows.tolist()]


def _read_only(stats: StatsColumns) -> StatsColumns:
    """Views of `stats` that a policy cannot write through."""
    views = {}
    for name in StatsColumns.__slots__:
        view = getattr(stats, name).view()
        view.flags.writeable = False
        views[name] = view
    return StatsColumns(**views)


def _arcs_of(descriptors: Sequence[ArcDescriptor]) -> CheckedArcs:
    """Checked per-item `ArcDescriptor`s as columns."""
    return CheckedArcs(
        np.array([d.cost for d in descriptors], dtype=np.int64),
        np.array([d.capacity for d in descriptors], dtype=np.int64),
        np.array([d.min_flow for d in descriptors], dtype=np.int64),
    )
