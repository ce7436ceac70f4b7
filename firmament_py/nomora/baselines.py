"""The baselines NoMora's simulation is compared with, beside Firmament's built-in `random` and
`load-spreading` policies: the paper's random policy with fixed costs (`RandomFixedArcCosts`)
and this project's random machine per task (`RandomMachinePerTask`).

The tech report (section 6.1) compares NoMora with "a random policy that uses fixed costs
(tasks always schedule if resources are idle)". Firmament's RandomCostModel draws a new cost
each time an arc is priced, so the cheapest machine of a round takes a whole job (which lands
beside its root); the paper's policy draws each arc's cost once. Both random policies here are
keyed hashes, so a run is deterministic in its seed.
"""

from __future__ import annotations

import hashlib

from firmament_py.sdk import (
    ArcDescriptor,
    ClusterView,
    EquivClassId,
    ResourceRef,
    ResourceView,
    TaskView,
    hookimpl,
    schedulable_slots,
)

__all__ = ["RandomFixedArcCosts", "RandomMachinePerTask"]


def _draw(*key: object) -> int:
    """A 64-bit number fixed by `key` (a keyed hash: the same key, the same number)."""
    text = ":".join(str(part) for part in key)
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")


class RandomFixedArcCosts:
    """The paper's random policy: every arc gets a random cost drawn once, when the arc is first
    priced, from a hash of the seed and the arc's ends, so it never changes for that arc and a
    seed gives the same costs in every run.

    The arcs are Firmament's RandomCostModel's, with its cost ranges on a scale of 100 (on a
    scale of 1,000 the solver's first round takes 30 times longer, which would make the
    placement-latency comparison one of cost ranges): each task has `preference_arcs` arcs to
    machines drawn for it (cost 1-33) and one to the cluster aggregator X (cost 1-50), X one to
    every machine (cost 1-50, capacity its free slots), and the task's arc to its unscheduled
    aggregator costs 101-199, above any path to a machine,
    so a task always runs if a slot is idle (the paper's "tasks always schedule if resources are
    idle"). Costs do not grow with waiting: there is nothing to wait for."""

    PREFERENCE_COST = 33
    AGGREGATOR_COST = 50
    UNSCHEDULED_COST = 101

    def __init__(self, seed: int, preference_arcs: int = 2) -> None:
        if preference_arcs < 0:
            raise ValueError(f"preference_arcs must be >= 0, got {preference_arcs}")
        self.seed = seed
        self.preference_arcs = preference_arcs

    def cost(self, high: int, *arc: object) -> int:
        """The fixed cost (1..`high`) of the arc named by `arc`."""
        return 1 + _draw(self.seed, *arc) % high

    @hookimpl
    def task_preference_arcs(self, task: TaskView, cluster: ClusterView) -> list[ResourceRef]:
        machines = sorted(cluster.machines)
        if not machines:
            return []
        chosen: list[ResourceRef] = []
        for index in range(min(self.preference_arcs, len(machines))):
            machine = machines[_draw(self.seed, "prefer", task.task_id, index) % len(machines)]
            ref = ResourceRef.machine(machine)
            if ref not in chosen:
                chosen.append(ref)
        return chosen

    @hookimpl
    def task_to_resource(self, task: TaskView, resource: ResourceView) -> ArcDescriptor:
        return ArcDescriptor(self.cost(self.PREFERENCE_COST, "task", task.task_id, resource.id))

    @hookimpl
    def task_to_equiv_class(self, task: TaskView, equiv_class: EquivClassId) -> ArcDescriptor:
        return ArcDescriptor(self.cost(self.AGGREGATOR_COST, "class", task.task_id, equiv_class))

    @hookimpl
    def equiv_class_to_resource(
        self, equiv_class: EquivClassId, resource: ResourceView, cluster: ClusterView
    ) -> ArcDescriptor:
        slots = schedulable_slots(resource.stats, preemption_enabled=cluster.preemption_enabled)
        return ArcDescriptor(
            self.cost(self.AGGREGATOR_COST, "resource", equiv_class, resource.id), capacity=slots
        )

    @hookimpl
    def task_to_unscheduled(self, task: TaskView) -> ArcDescriptor:
        return ArcDescriptor(
            self.UNSCHEDULED_COST
            + self.cost(self.UNSCHEDULED_COST - 2, "unscheduled", task.task_id)
            - 1
        )


class RandomMachinePerTask:
    """This project's random placement, task by task: each task prefers one machine drawn
    uniformly at random (a keyed hash of the task and how often it was placed) at cost 0, and
    may go anywhere else at cost 1. Firmament's RandomCostModel (our `random`) draws one cost
    per machine per round instead, so a job whose tasks arrive together floods the round's
    cheapest machine, landing beside its root."""

    @hookimpl
    def task_preference_arcs(self, task: TaskView, cluster: ClusterView) -> list[ResourceRef]:
        machines = list(cluster.machines)
        if not machines:
            return []
        draw = _draw(task.task_id, task.eviction_count, task.total_run_time)
        return [ResourceRef.machine(machines[draw % len(machines)])]

    @hookimpl
    def task_to_resource(self) -> ArcDescriptor:
        return ArcDescriptor(0)

    @hookimpl
    def task_to_equiv_class(self) -> ArcDescriptor:
        return ArcDescriptor(1)
