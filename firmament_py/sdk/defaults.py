"""The built-in defaults: an answer to every answer hook, so a policy implements only the hooks
where it differs.

Alone, the defaults schedule like Firmament's trivial cost model, adapted to this package's
cluster model: every task has an arc to the cluster aggregator, which has an arc to every machine
with as much capacity as the machine has slots to give; a task with label selectors goes through
a class of its own selectors instead, which reaches only the machines whose labels match (the
cluster state refuses any other placement).

Costs: a path through an aggregator costs 2 (Firmament's trivial model). Waiting costs 1,000,000
(Firmament's Octopus model) plus one per second waited: far above any placement cost a policy is
likely to set, so a policy that prices only placements still places every task that has a path
to a free slot, and when slots are short the tasks that waited longest go first. Preempting a
running task costs the same base plus one per second it has waited and run: a waiting task
displaces it only once it has waited longer than that.

Each per-item answer has a batch form (`*_batch`) giving the same values for many tasks,
classes, jobs or resources at once; the scheduler asks those whenever the policy leaves a
question to the defaults.

How the defaults meet a policy (the rule `PolicyManager` relies on): every implementation here
is `trylast`, and the defaults are registered after the policy. pluggy calls `trylast`
implementations after all others, and among them the one registered last comes last; it stops
at the first answer that is not None. So the defaults are asked after everything the policy
implements (its own `trylast` implementations included): the policy's answer wins wherever it
gives one, and the defaults answer the rest. Notification hooks have no defaults.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from firmament_py.model.ids import EquivClassId
from firmament_py.model.labels import LabelSelector, matches
from firmament_py.sdk.answers import (
    ArcColumns,
    ClassArcs,
    ResourceArcs,
    TaskArcs,
    TimedArcs,
    TopologyArcs,
)
from firmament_py.sdk.columns import (
    Clock,
    JobBatch,
    ResourceColumns,
    StatsColumns,
    TaskBatch,
    Topology,
)
from firmament_py.sdk.hookspecs import hookimpl
from firmament_py.sdk.types import (
    MAX_CAPACITY,
    MAX_COST,
    ArcDescriptor,
    ClusterView,
    MachineView,
    ResourceKind,
    ResourceRef,
    ResourceStats,
    ResourceView,
    TaskView,
    _model_ref,
)

__all__ = [
    "AGGREGATOR_COST",
    "CLUSTER_AGGREGATOR",
    "UNSCHEDULED_COST",
    "FirmamentDefaults",
    "schedulable_slots",
    "selector_class",
    "selectors_of_class",
]

CLUSTER_AGGREGATOR: EquivClassId = "cluster-aggregator"
"""The default equivalence class every unconstrained task belongs to (Firmament's CLUSTER_AGG),
with an arc to every machine."""

SELECTOR_CLASS_PREFIX = "selectors:"

UNSCHEDULED_COST = 1_000_000
"""The base cost of leaving a task unscheduled for a round (Firmament's Octopus model)."""

AGGREGATOR_COST = 2
"""The cost of a task's arc to the cluster aggregator or its selector class (Firmament's
trivial model): below UNSCHEDULED_COST, so a free slot is always taken."""

MICROSECONDS_PER_COST_UNIT = 1_000_000
"""Waiting (or running) this long adds one to the default unscheduled and preemption costs."""


def schedulable_slots(stats: ResourceStats, *, preemption_enabled: bool) -> int:
    """How many more tasks the scheduler may route to a resource (Firmament's
    CapacityFromResNodeToParent): its free slots, or all of its slots when running tasks may
    be preempted (their units then compete for the slots with everyone else's)."""
    return stats.slots if preemption_enabled else stats.free_slots


_SELECTOR_CLASSES: dict[EquivClassId, tuple[LabelSelector, ...]] = {}
"""The selectors behind every selector class named so far (a name stands for one set of
selectors, so one registry serves every policy and scheduler in the process)."""


def selector_class(selectors: Sequence[LabelSelector]) -> EquivClassId:
    """The default equivalence class of tasks with these label selectors: one name per set of
    selectors, whatever their order. The defaults' class arcs reach the machines that match."""
    equiv_class = SELECTOR_CLASS_PREFIX + ";".join(sorted({str(s) for s in selectors}))
    if equiv_class not in _SELECTOR_CLASSES:
        _SELECTOR_CLASSES[equiv_class] = tuple(selectors)
    return equiv_class


def selectors_of_class(equiv_class: EquivClassId) -> tuple[LabelSelector, ...] | None:
    """The selectors of a class `selector_class` named, None for any other class."""
    return _SELECTOR_CLASSES.get(equiv_class)


def _seconds(microseconds: int) -> int:
    return microseconds // MICROSECONDS_PER_COST_UNIT


def _capped(cost: int) -> int:
    return min(cost, MAX_COST)


# Descriptors are immutable values: the answers below share one per distinct value instead of
# making (and checking) a new one per call; class and topology arcs are asked 10^3-10^4 times a
# round with a handful of distinct capacities.
_FREE = ArcDescriptor(0)
_AGGREGATOR = ArcDescriptor(AGGREGATOR_COST)
_UNBOUNDED = ArcDescriptor(0, capacity=MAX_CAPACITY)
_PINNED = ArcDescriptor(0, capacity=1, min_flow=1)
_FREE_BY_CAPACITY: dict[int, ArcDescriptor] = {}
_MAX_SHARED = 4096


def _free_arc(capacity: int) -> ArcDescriptor:
    """`ArcDescriptor(0, capacity=capacity)`, shared."""
    if type(capacity) is not int:  # let the constructor convert or refuse it
        return ArcDescriptor(0, capacity=capacity)
    descriptor = _FREE_BY_CAPACITY.get(capacity)
    if descriptor is None:
        descriptor = ArcDescriptor(0, capacity=capacity)
        if len(_FREE_BY_CAPACITY) < _MAX_SHARED:
            _FREE_BY_CAPACITY[capacity] = descriptor
    return descriptor


def free_slots_arc(stats: ResourceStats, *, preemption_enabled: bool) -> ArcDescriptor:
    """The default arc into a resource with these statistics, from its parent or from a class:
    cost 0, capacity `schedulable_slots`."""
    return _free_arc(schedulable_slots(stats, preemption_enabled=preemption_enabled))


def leaf_arc(slots: int) -> ArcDescriptor:
    """The default `leaf_to_sink` arc of a machine with this many slots."""
    return _free_arc(slots)


class FirmamentDefaults:
    """The default answer to every answer hook (see the module docstring)."""

    # ------------------------------------------------------------------ capability

    @hookimpl(trylast=True)
    def preemption_enabled(self) -> bool:
        return False

    # ------------------------------------------------------------------ shape

    @hookimpl(trylast=True)
    def task_equiv_classes(self, task: TaskView) -> Sequence[EquivClassId]:
        return (selector_class(task.selectors) if task.selectors else CLUSTER_AGGREGATOR,)

    @hookimpl(trylast=True)
    def task_preference_arcs(self) -> Sequence[ResourceRef]:
        return ()

    @hookimpl(trylast=True)
    def equiv_class_preference_arcs(
        self, equiv_class: EquivClassId, cluster: ClusterView
    ) -> Sequence[ResourceRef]:
        if equiv_class == CLUSTER_AGGREGATOR:
            return [_model_ref(ResourceKind.MACHINE, m) for m in cluster.machines]
        selectors = selectors_of_class(equiv_class)
        if selectors is None:
            return ()
        return [
            machine.ref
            for machine in cluster.machines.values()
            if matches(selectors, machine.labels)
        ]

    @hookimpl(trylast=True)
    def equiv_class_to_equiv_class_arcs(self) -> Sequence[EquivClassId]:
        return ()

    # ------------------------------------------------------------------ arc descriptors

    @hookimpl(trylast=True)
    def task_to_unscheduled(self, task: TaskView, cluster: ClusterView) -> ArcDescriptor:
        waited = _seconds(task.unscheduled_time(cluster.now))
        return ArcDescriptor(_capped(UNSCHEDULED_COST + waited))

    @hookimpl(trylast=True)
    def unscheduled_to_sink(self, incoming_tasks: int) -> ArcDescriptor:
        return _free_arc(incoming_tasks)

    @hookimpl(trylast=True)
    def task_to_resource(self) -> ArcDescriptor:
        return _FREE

    @hookimpl(trylast=True)
    def resource_to_resource(self, child: ResourceView, cluster: ClusterView) -> ArcDescriptor:
        return free_slots_arc(child.stats, preemption_enabled=cluster.preemption_enabled)

    @hookimpl(trylast=True)
    def leaf_to_sink(self, machine: MachineView) -> ArcDescriptor:
        return leaf_arc(machine.slots)

    @hookimpl(trylast=True)
    def task_to_equiv_class(self, equiv_class: EquivClassId) -> ArcDescriptor:
        if equiv_class == CLUSTER_AGGREGATOR or equiv_class in _SELECTOR_CLASSES:
            return _AGGREGATOR
        return _FREE

    @hookimpl(trylast=True)
    def equiv_class_to_resource(
        self, resource: ResourceView, cluster: ClusterView
    ) -> ArcDescriptor:
        return free_slots_arc(resource.stats, preemption_enabled=cluster.preemption_enabled)

    @hookimpl(trylast=True)
    def equiv_class_to_equiv_class(self) -> ArcDescriptor:
        return _UNBOUNDED

    @hookimpl(trylast=True)
    def task_continuation(self, cluster: ClusterView) -> ArcDescriptor:
        return _FREE if cluster.preemption_enabled else _PINNED

    @hookimpl(trylast=True)
    def task_preemption(self, task: TaskView, cluster: ClusterView) -> ArcDescriptor:
        invested = task.unscheduled_time(cluster.now) + task.run_time(cluster.now)
        return ArcDescriptor(_capped(UNSCHEDULED_COST + _seconds(invested)))

    # ------------------------------------------------------------------ statistics

    @hookimpl(trylast=True)
    def prepare_stats(self, resource: ResourceView) -> ResourceStats:
        machine = resource.machine
        if machine is None:
            return ResourceStats()
        return ResourceStats.of_machine(machine)

    @hookimpl(trylast=True)
    def gather_stats(self, accumulated: ResourceStats, child_stats: ResourceStats) -> ResourceStats:
        return accumulated + child_stats

    @hookimpl(trylast=True)
    def update_stats(self, stats: ResourceStats) -> ResourceStats:
        return stats

    # ------------------------------------------------------------------ batch forms

    @hookimpl(trylast=True)
    def task_to_unscheduled_batch(self) -> TimedArcs:
        return TimedArcs(UNSCHEDULED_COST, per_second=1, clock=Clock.WAITED)

    @hookimpl(trylast=True)
    def task_continuation_batch(self, cluster: ClusterView) -> TimedArcs:
        return TimedArcs(0, capacity=1, min_flow=0 if cluster.preemption_enabled else 1)

    @hookimpl(trylast=True)
    def task_preemption_batch(self) -> TimedArcs:
        return TimedArcs(UNSCHEDULED_COST, per_second=1, clock=Clock.WAITED_AND_RAN)

    @hookimpl(trylast=True)
    def task_to_equiv_classes_batch(self, tasks: TaskBatch) -> TaskArcs[EquivClassId]:
        classes = [selector_class(s) if s else CLUSTER_AGGREGATOR for s in tasks.selectors]
        return TaskArcs.one_each(classes, cost=AGGREGATOR_COST)

    @hookimpl(trylast=True)
    def task_to_resources_batch(self) -> TaskArcs[ResourceRef]:
        return TaskArcs.none()

    @hookimpl(trylast=True)
    def equiv_class_to_resources_batch(
        self, equiv_class: EquivClassId, topology: Topology, cluster: ClusterView
    ) -> ResourceArcs:
        machines = topology.machines
        if equiv_class == CLUSTER_AGGREGATOR:
            rows = np.arange(len(machines), dtype=np.int64)
        else:
            selectors = selectors_of_class(equiv_class)
            if selectors is None:
                return ResourceArcs.none()
            rows = np.flatnonzero(machines.matching(selectors))
        slots = machines.stats.schedulable_slots(preemption_enabled=cluster.preemption_enabled)
        return ResourceArcs.to_machines(rows, 0, slots[rows])

    @hookimpl(trylast=True)
    def equiv_class_to_equiv_classes_batch(self) -> ClassArcs:
        return ClassArcs.none()

    @hookimpl(trylast=True)
    def resource_to_resource_batch(self, topology: Topology, cluster: ClusterView) -> TopologyArcs:
        preemption = cluster.preemption_enabled
        return TopologyArcs(
            ArcColumns(0, topology.machines.stats.schedulable_slots(preemption_enabled=preemption)),
            ArcColumns(0, topology.racks.stats.schedulable_slots(preemption_enabled=preemption)),
        )

    @hookimpl(trylast=True)
    def leaf_to_sink_batch(self, topology: Topology) -> ArcColumns:
        return ArcColumns(0, capacity=topology.machines.model.slots)

    @hookimpl(trylast=True)
    def machine_stats_batch(self, machines: ResourceColumns) -> StatsColumns:
        return machines.model

    @hookimpl(trylast=True)
    def unscheduled_to_sink_batch(self, jobs: JobBatch) -> ArcColumns:
        return ArcColumns(0, capacity=jobs.incoming_tasks)
