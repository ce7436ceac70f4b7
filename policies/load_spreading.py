"""The load-spreading policy: Firmament's Octopus cost model, which balances the number of tasks
per machine, made to balance within a round as well as across rounds.

Source: `src/scheduling/flow/octopus_cost_model.cc` in camsas/firmament (the paper's
load-spreading policy, Firmament, OSDI'16, section 3.3 and Figure 6b). Octopus prices a
machine at the number of tasks it already runs and leaves a task waiting at 1,000,000. Those
costs are fixed for a round, so every task placed in one round sees the same prices: a batch of
new tasks piles onto the machines that were emptiest when the round began, up to their free slots,
and the imbalance lasts until tasks finish (the `octopus` policy, `octopus.py`, is that model as
it is, for the experiments that reproduce the paper's).

Here the k-th new task on a machine pays what the machine would then run. The SDK allows one arc
per (class, resource) pair, so the increasing marginal costs come from a hierarchy of classes::

    task -> spread class -> level 0, 1, ..., n-1 -> machines -> sink

An arc from level i to machine m has capacity 1 and cost running(m) + i, and exists only while
i < free slots of m: the i-th extra task on m costs what m would run with it, so the min-cost
flow fills machines like water, always the least loaded next. Hence the hallmark: whenever a
machine still has a free slot, no machine the same tasks may use runs more than one task more
than it (given a balanced start, such as an empty cluster). The spread class reaches the levels
for free (the defaults' class-to-class arc), and a task reaches its spread class for free, as in
Octopus.

Size. The flow uses only the W cheapest (machine, level) arcs, W being the tasks waiting, so a
level arc exists only if its cost is at most the W-th smallest cost (ties included), and levels
stop at the deepest one still needed: an empty cluster of M machines needs at most M + W level
arcs, not one per free slot. W counts all waiting tasks, not only one spread class's, so spread
classes whose machines overlap still keep enough arcs that no task waits while one of its
machines has a free slot.

Waiting costs the defaults' 1,000,000 plus one per second waited (Octopus: 1,000,000 flat), far
above any level's cost, so every task with a path to a free slot is placed, oldest first when
slots are short. Tasks with label selectors get a spread class (and levels) of their own that
reach only matching machines. Slots are the only resource counted, as in Octopus: a task whose
request does not fit a machine's free resources may still be sent there, and the cluster state
refuses it (use the cpu-mem policy when requests matter).

Cost of asking. Each round's plan is worked out once, in arrays over the round's machine
columns (the batch hooks get them as `Topology`); the per-item hooks answer from the same plan,
so both forms give the same arcs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from firmament_py.sdk import (
    ArcDescriptor,
    ClassArcs,
    ClusterView,
    EquivClassId,
    LabelSelector,
    MachineView,
    ResourceArcs,
    ResourceRef,
    ResourceView,
    TaskArcs,
    TaskBatch,
    TaskView,
    Topology,
    hookimpl,
    selector_class,
)

IntArray = npt.NDArray[np.int64]

SPREAD_CLASS = "spread"
"""The spread class of tasks without label selectors."""


def spread_class(selectors: Sequence[LabelSelector]) -> EquivClassId:
    """The spread class of tasks with these label selectors."""
    return f"{SPREAD_CLASS}|{selector_class(selectors)}" if selectors else SPREAD_CLASS


def level_class(group: EquivClassId, level: int) -> EquivClassId:
    return f"{group}#{level}"


def usable(machine: MachineView, selectors: Sequence[LabelSelector]) -> bool:
    """True if a task with these selectors may run on the machine."""
    return all(selector.matches(machine.labels) for selector in selectors)


@dataclass(frozen=True, slots=True)
class MachineLoad:
    """A machine a spread class may use, as the round's statistics pass saw it."""

    ref: ResourceRef
    running: int
    free: int


@dataclass(frozen=True, slots=True)
class SpreadPlan:
    """One spread class's levels for a round: the `rows` (of the round's machine table) of the
    machines it may use that have a free slot, with their `running` tasks and `free` slots, and
    the most a level arc may cost (`cost_cap`) for the flow still to have every arc it needs.
    `all_refs` names every row of the table."""

    all_refs: Sequence[ResourceRef]
    rows: IntArray
    running: IntArray
    free: IntArray
    cost_cap: int
    depth: int

    def level(self, level: int) -> IntArray:
        """Which of the plan's machines level `level` reaches (positions in `rows`)."""
        return np.flatnonzero((level < self.free) & (self.running + level <= self.cost_cap))

    def level_machines(self, level: int) -> list[ResourceRef]:
        return [self.all_refs[i] for i in self.rows[self.level(level)].tolist()]


def _arcs_within(running: IntArray, free: IntArray, cap: int) -> int:
    return int(np.maximum(0, np.minimum(free, cap - running + 1)).sum())


def cheapest_cap(running: IntArray, free: IntArray, needed: int) -> int:
    """The least cap such that at least `needed` (machine, level) arcs cost no more than it, or
    the dearest arc's cost if there are fewer arcs than that (-1 if none is needed); machine i
    has `free[i]` levels, costing `running[i]`, `running[i] + 1`, ..."""
    if needed <= 0 or not len(running):
        return -1
    low = int(running.min())
    high = int((running + free - 1).max())
    if _arcs_within(running, free, high) <= needed:
        return high
    while low < high:  # the least cap in [low, high] with arcs_within(cap) >= needed
        middle = (low + high) // 2
        if _arcs_within(running, free, middle) >= needed:
            high = middle
        else:
            low = middle + 1
    return low


def cheapest_cost_cap(machines: Sequence[MachineLoad], needed: int) -> int:
    """`cheapest_cap` of a list of machines."""
    running = np.array([load.running for load in machines], dtype=np.int64)
    free = np.array([load.free for load in machines], dtype=np.int64)
    return cheapest_cap(running, free, needed)


def plan_levels(
    refs: Sequence[ResourceRef],
    running: IntArray,
    free: IntArray,
    usable: npt.NDArray[np.bool_],
    waiting: int,
) -> SpreadPlan:
    """The plan of a spread class over machines with these loads, of which it may use those in
    `usable`, for a round with `waiting` tasks waiting in all."""
    rows = np.flatnonzero(usable & (free > 0))
    running, free = running[rows], free[rows]
    cost_cap = cheapest_cap(running, free, waiting)
    depth = int(np.minimum(free, cost_cap - running + 1).max()) if len(rows) else 0
    return SpreadPlan(refs, rows, running, free, cost_cap, max(depth, 0))


class LoadSpreadingPolicy:
    """Balance running tasks across machines, within and across rounds (see the module
    docstring)."""

    def __init__(self) -> None:
        # Spread and level classes of the current round, made when first needed in a round
        # (`round_started` drops them).
        self._plans: dict[EquivClassId, SpreadPlan] | None = None
        self._levels: dict[EquivClassId, tuple[SpreadPlan, int]] = {}

    @hookimpl
    def round_started(self) -> None:
        """A new round: the plans are made afresh when next needed."""
        self._plans = None

    def _round_plans(
        self, cluster: ClusterView, topology: Topology | None = None
    ) -> dict[EquivClassId, SpreadPlan]:
        """The round's plans, from the machine columns of `topology`, or (asked per item, with
        no topology at hand) from the cluster view: the same numbers either way."""
        if self._plans is not None:
            return self._plans
        waiting = cluster.waiting_tasks
        # The distinct selectors first (a first round has 10^5 tasks waiting, with a few).
        distinct = dict.fromkeys(task.selectors for task in waiting.values())
        groups: dict[EquivClassId, tuple[LabelSelector, ...]] = {}
        for selectors in distinct:
            groups.setdefault(spread_class(selectors), selectors)
        if topology is not None:
            machines = topology.machines
            refs: Sequence[ResourceRef] = machines.refs
            running, free = machines.stats.running_tasks, machines.stats.free_slots
        else:
            views = list(cluster.machines.values())
            refs = [machine.ref for machine in views]
            loads = [cluster.stats(ref) for ref in refs]
            running = np.array([stats.running_tasks for stats in loads], dtype=np.int64)
            free = np.array([stats.free_slots for stats in loads], dtype=np.int64)
        self._plans, self._levels = {}, {}
        for group, selectors in groups.items():
            if topology is not None:
                mask = topology.machines.matching(selectors)
            else:
                mask = np.array([usable(m, selectors) for m in views], dtype=np.bool_)
            plan = plan_levels(refs, running, free, mask, len(waiting))
            self._plans[group] = plan
            for level in range(plan.depth):
                self._levels[level_class(group, level)] = (plan, level)
        return self._plans

    # ------------------------------------------------------------------ batch forms

    @hookimpl
    def task_to_equiv_classes_batch(self, tasks: TaskBatch) -> TaskArcs[EquivClassId]:
        return TaskArcs.one_each([spread_class(s) for s in tasks.selectors], cost=0)

    @hookimpl
    def equiv_class_to_equiv_classes_batch(
        self, equiv_class: EquivClassId, cluster: ClusterView
    ) -> ClassArcs | None:
        plan = self._round_plans(cluster).get(equiv_class)
        if plan is None:
            return None
        return ClassArcs([level_class(equiv_class, level) for level in range(plan.depth)])

    @hookimpl
    def equiv_class_to_resources_batch(
        self, equiv_class: EquivClassId, topology: Topology, cluster: ClusterView
    ) -> ResourceArcs | None:
        if equiv_class in self._round_plans(cluster, topology):
            return ResourceArcs.none()  # a spread class reaches machines only through levels
        level = self._levels.get(equiv_class)
        if level is None:
            return None
        plan, index = level
        reached = plan.level(index)
        return ResourceArcs.to_machines(plan.rows[reached], plan.running[reached] + index, 1)

    # ------------------------------------------------------------------ per item

    @hookimpl
    def task_equiv_classes(self, task: TaskView) -> Sequence[EquivClassId]:
        return (spread_class(task.selectors),)

    @hookimpl
    def task_to_equiv_class(self) -> ArcDescriptor:
        return ArcDescriptor(0)

    @hookimpl
    def equiv_class_to_equiv_class_arcs(
        self, equiv_class: EquivClassId, cluster: ClusterView
    ) -> Sequence[EquivClassId] | None:
        plan = self._round_plans(cluster).get(equiv_class)
        if plan is None:
            return None
        return [level_class(equiv_class, level) for level in range(plan.depth)]

    @hookimpl
    def equiv_class_preference_arcs(
        self, equiv_class: EquivClassId, cluster: ClusterView
    ) -> Sequence[ResourceRef] | None:
        if equiv_class in self._round_plans(cluster):
            return ()  # a spread class reaches machines only through its levels
        level = self._levels.get(equiv_class)
        if level is None:
            return None
        plan, index = level
        return plan.level_machines(index)

    @hookimpl
    def equiv_class_to_resource(
        self, equiv_class: EquivClassId, resource: ResourceView, cluster: ClusterView
    ) -> ArcDescriptor | None:
        self._round_plans(cluster)
        level = self._levels.get(equiv_class)
        if level is None:
            return None
        _, index = level
        return ArcDescriptor(resource.stats.running_tasks + index, capacity=1)
