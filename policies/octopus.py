"""The octopus policy: Firmament's Octopus cost model as Firmament runs it, the load-spreading
policy of the paper's experiments.

Source: `src/scheduling/flow/octopus_cost_model.cc` in camsas/firmament (Firmament, OSDI'16,
section 3.3 and Figure 6b). A task reaches the cluster aggregator for free; the aggregator's arc
to a machine costs the tasks the machine runs times 100 (`BUSY_PU_OFFSET`) and carries its free
slots; leaving a task waiting costs 1,000,000, flat. The prices are those of the round's start
and hold for the whole round, so the tasks placed in one round all see the same costs: a burst
of new tasks fills the machines that were emptiest when the round began, up to their free
slots, and the imbalance stays until tasks finish. That is the behaviour the paper measured;
the `load-spreading` policy (`load_spreading.py`) is this model made to balance within a round
too, at the price of a bigger graph.

Where it departs from Firmament's code: there, machines have processing-unit nodes below them
and an arc into a core also adds the core's index to its cost; here a machine is the leaf and
its slots are its capacity, so that term has no counterpart. Tasks with label selectors go
through the defaults' selector classes, priced the same way, and reach only matching machines.
Slots are the only resource counted, as in Octopus.
"""

from __future__ import annotations

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
    TimedArcs,
    Topology,
    hookimpl,
    schedulable_slots,
    selector_class,
    selectors_of_class,
)

BUSY_PU_OFFSET = 100
"""Octopus's cost per task a machine already runs."""
OCTOPUS_UNSCHEDULED_COST = 1_000_000
"""Octopus's TaskToUnscheduledAggCost: flat, whatever the task has waited."""


class OctopusPolicy:
    """Price a machine at its running tasks, fixed for the round (see the module docstring)."""

    @hookimpl
    def task_to_unscheduled_batch(self) -> TimedArcs:
        return TimedArcs(OCTOPUS_UNSCHEDULED_COST)  # per_second 0: it does not grow

    @hookimpl
    def task_to_unscheduled(self) -> ArcDescriptor:
        return ArcDescriptor(OCTOPUS_UNSCHEDULED_COST)

    @hookimpl
    def task_to_equiv_classes_batch(self, tasks: TaskBatch) -> TaskArcs[EquivClassId]:
        classes = [selector_class(s) if s else CLUSTER_AGGREGATOR for s in tasks.selectors]
        return TaskArcs.one_each(classes, cost=0)

    @hookimpl
    def task_to_equiv_class(self) -> ArcDescriptor:
        return ArcDescriptor(0)

    @hookimpl
    def equiv_class_to_resources_batch(
        self, equiv_class: EquivClassId, topology: Topology, cluster: ClusterView
    ) -> ResourceArcs | None:
        machines = topology.machines
        if equiv_class == CLUSTER_AGGREGATOR:
            rows = np.arange(len(machines), dtype=np.int64)
        else:
            selectors = selectors_of_class(equiv_class)
            if selectors is None:
                return None  # not a class of ours: leave it to the defaults
            rows = np.flatnonzero(machines.matching(selectors))
        stats = machines.stats
        slots = stats.schedulable_slots(preemption_enabled=cluster.preemption_enabled)
        return ResourceArcs.to_machines(
            rows, stats.running_tasks[rows] * BUSY_PU_OFFSET, slots[rows]
        )

    @hookimpl
    def equiv_class_to_resource(
        self, equiv_class: EquivClassId, resource: ResourceView, cluster: ClusterView
    ) -> ArcDescriptor | None:
        if equiv_class != CLUSTER_AGGREGATOR and selectors_of_class(equiv_class) is None:
            return None
        stats = resource.stats
        return ArcDescriptor(
            stats.running_tasks * BUSY_PU_OFFSET,
            capacity=schedulable_slots(stats, preemption_enabled=cluster.preemption_enabled),
        )
