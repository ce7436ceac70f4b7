"""The random policy: Firmament's RandomCostModel, random costs on the arcs that decide
placements, reproducible from a seed.

Source: `src/scheduling/flow/random_cost_model.cc` in camsas/firmament, with `M` its
`--flow_max_arc_cost` (1000). Firmament draws, each time it asks:

==============================  =====================  ==========================================
arc                             Firmament              here
==============================  =====================  ==========================================
task -> unscheduled aggregator  M/2 + 1 .. M           M/2 + 1 .. M
task -> cluster aggregator      -1 .. waiting - 2      0 .. M/4 - 1
cluster aggregator -> machine   1 .. M/2               1 .. M/4, capacity the free slots
==============================  =====================  ==========================================

Firmament's comment says a placement should always cost "slightly less" than waiting, but its
two hops through the aggregator can add up to more than the waiting cost, leaving a task waiting
beside a free machine. Here they share the lower half of the range, so any placement path costs
at most M/2 - 1, below every waiting cost: a task is placed whenever it has a path to a free slot,
and the random draws decide which machine it gets and, when slots are short, which tasks wait.
Firmament's other random arcs are left out: preference arcs to random machines through a class of
the task's binary (this model has no binaries) and topology arcs, which carry no flow here since
aggregators reach machines directly. Waiting cost does not grow with time, as in Firmament, but
it is drawn afresh each round, so no task is unlucky for ever.

Draws. A cost is a keyed hash of the seed, the arc and the cluster's current time, mapped onto
the arc's range. A shared `random.Random(seed)` stream would make each cost depend on how many
questions the scheduler asked before, and in what order, which the SDK leaves to the scheduler;
with a keyed hash the same question in the same round always gets the same answer, a new round
(a later time) draws afresh, and the same events under the same seed give the same schedule.
"""

from __future__ import annotations

import hashlib

import numpy as np

from firmament_py.sdk import (
    CLUSTER_AGGREGATOR,
    ArcDescriptor,
    ClusterView,
    EquivClassId,
    ResourceArcs,
    ResourceView,
    TaskArcs,
    TaskBatch,
    TaskView,
    TimedArcs,
    Topology,
    hookimpl,
    schedulable_slots,
    selector_class,
    selectors_of_class,
)

FIRMAMENT_MAX_ARC_COST = 1000
"""Firmament's `--flow_max_arc_cost` default: the top of the waiting cost's range."""


class RandomPolicy:
    """Random costs on the waiting, task-to-class and class-to-machine arcs (see the module
    docstring), reproducible from `seed`, with every placement path cheaper than waiting."""

    def __init__(self, seed: int = 0, *, max_arc_cost: int = FIRMAMENT_MAX_ARC_COST) -> None:
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise TypeError(f"seed must be an int, got {seed!r}")
        if isinstance(max_arc_cost, bool) or not isinstance(max_arc_cost, int):
            raise TypeError(f"max_arc_cost must be an int, got {max_arc_cost!r}")
        if max_arc_cost < 4:
            raise ValueError(f"max_arc_cost must be at least 4, got {max_arc_cost}")
        self.seed = seed
        self.max_arc_cost = max_arc_cost

    def draw(self, low: int, high: int, *key: object) -> int:
        """A number in [low, high] determined by the seed and `key` alone."""
        text = "\x1f".join(repr(part) for part in (self.seed, *key))
        digest = hashlib.blake2b(text.encode(), digest_size=8).digest()
        return low + int.from_bytes(digest, "big") % (high - low + 1)

    # ------------------------------------------------------------------ batch forms

    @hookimpl
    def task_to_unscheduled_batch(self, tasks: TaskBatch, cluster: ClusterView) -> TimedArcs:
        top, now = self.max_arc_cost, cluster.now
        costs = [self.draw(top // 2 + 1, top, "wait", t, now) for t in tasks.task_ids.tolist()]
        return TimedArcs(costs, this_round_only=True)  # drawn afresh every round

    @hookimpl
    def task_to_equiv_classes_batch(
        self, tasks: TaskBatch, cluster: ClusterView
    ) -> TaskArcs[EquivClassId]:
        # The defaults' classes, at random costs.
        classes = [selector_class(s) if s else CLUSTER_AGGREGATOR for s in tasks.selectors]
        quarter, now = self.max_arc_cost // 4, cluster.now
        costs = [
            self.draw(0, quarter - 1, "task-class", task_id, equiv_class, now)
            for task_id, equiv_class in zip(tasks.task_ids.tolist(), classes, strict=True)
        ]
        # Drawn whenever asked, which per item is also whenever the topology changes.
        return TaskArcs.one_each(classes, cost=costs, depends_on_topology=True)

    @hookimpl
    def equiv_class_to_resources_batch(
        self, equiv_class: EquivClassId, topology: Topology, cluster: ClusterView
    ) -> ResourceArcs:
        # The defaults' machines for the class, at random costs.
        machines = topology.machines
        if equiv_class == CLUSTER_AGGREGATOR:
            rows = np.arange(len(machines), dtype=np.int64)
        else:
            selectors = selectors_of_class(equiv_class)
            if selectors is None:
                return ResourceArcs.none()
            rows = np.flatnonzero(machines.matching(selectors))
        quarter, now = self.max_arc_cost // 4, cluster.now
        refs = machines.refs
        costs = [
            self.draw(1, quarter, "class-resource", equiv_class, refs[row], now)
            for row in rows.tolist()
        ]
        slots = machines.stats.schedulable_slots(preemption_enabled=cluster.preemption_enabled)
        return ResourceArcs.to_machines(rows, costs, slots[rows])

    # ------------------------------------------------------------------ per item

    @hookimpl
    def task_to_unscheduled(self, task: TaskView, cluster: ClusterView) -> ArcDescriptor:
        top = self.max_arc_cost
        return ArcDescriptor(self.draw(top // 2 + 1, top, "wait", task.task_id, cluster.now))

    @hookimpl
    def task_to_equiv_class(
        self, task: TaskView, equiv_class: EquivClassId, cluster: ClusterView
    ) -> ArcDescriptor:
        quarter = self.max_arc_cost // 4
        key = ("task-class", task.task_id, equiv_class, cluster.now)
        return ArcDescriptor(self.draw(0, quarter - 1, *key))

    @hookimpl
    def equiv_class_to_resource(
        self, equiv_class: EquivClassId, resource: ResourceView, cluster: ClusterView
    ) -> ArcDescriptor:
        quarter = self.max_arc_cost // 4
        cost = self.draw(1, quarter, "class-resource", equiv_class, resource.ref, cluster.now)
        slots = schedulable_slots(resource.stats, preemption_enabled=cluster.preemption_enabled)
        return ArcDescriptor(cost, capacity=slots)
