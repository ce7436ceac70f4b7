"""The binpack policy: put new tasks on the busiest machines that still have room, so that the
tasks of a cluster crowd onto as few machines as they need and the idle ones can be powered
down. It is the opposite of firmament-py's load-spreading policy.

The graph::

    task -> pack class -> machine -> sink        (and task -> U(job) -> sink, to wait)

Every waiting task has one arc, cost 0, to the pack class of its label selectors (all tasks
without selectors share the class `"binpack"`). A pack class has an arc to each machine it may
use (the selectors match) that has a free slot, with the machine's free slots as capacity and,
as cost, the machine's rank in the *packing order* of the round:

1. busy machines (running at least one task) before idle ones;
2. busy machines with the fewest free slots first (best fit: the fullest is topped up first);
3. idle machines with the most slots first (a batch of tasks wakes as few machines as it can);
4. then the order in which machines joined the cluster.

Ranks are 0, 1, 2, ...: distinct, so the min-cost flow has one optimum for the class: it fills
the machine of rank 0, then the one of rank 1, and so on. The statistics behind the order are
those of the statistics pass that opens the round, so every task placed in one round sees the
same order.

The hallmark. Within a round, the tasks of one pack class go to the machines it may use in
packing order, and a machine receives a task only if every machine before it in that order is
full afterwards. Hence:

* a task is never sent to an idle machine while a busy machine it may use has a free slot;
* N tasks that arrive together on an idle cluster land on the fewest machines that have N slots
  between them (the largest ones); on identical machines of S slots, on ceil(N / S) machines,
  all full but the last.

When several pack classes (several sets of selectors) share machines, each fills its machines
in its own order; the flow minimises their total rank, which may interleave them.

What it does not do. Like Firmament's Octopus model (and load-spreading), it counts slots, not
resources: a task whose request does not fit a machine's free resources may still be sent
there, and the cluster state refuses the placement (`RoundResult.refused`). Give machines as
many slots as tasks they can hold, or use firmament-py's cpu-mem policy, whose per-machine
classes keep the requests of one round within what a machine has. It never preempts or moves
a running task: when tasks finish, the machines they leave half empty are filled first, but
nothing is consolidated. Waiting costs the SDK default (1,000,000 plus one per second waited),
far above any rank, so every task with a path to a free slot is placed, the oldest first when
slots are short.

Cost of asking. Ranks are computed once per round and class (one pass over the machines, and a
sort), when the class is first asked about, and then looked up; `round_started` discards them.
"""

from __future__ import annotations

from collections.abc import Sequence

from firmament_py.sdk import (
    ArcDescriptor,
    ClusterView,
    EquivClassId,
    LabelSelector,
    MachineView,
    ResourceRef,
    ResourceView,
    TaskView,
    hookimpl,
    selector_class,
)

__all__ = ["PACK_CLASS", "BinPackPolicy", "pack_class", "packing_order"]

PACK_CLASS: EquivClassId = "binpack"
"""The pack class of the tasks without label selectors."""


def pack_class(selectors: Sequence[LabelSelector]) -> EquivClassId:
    """The pack class of tasks with these label selectors: one per set of selectors."""
    return f"{PACK_CLASS}|{selector_class(selectors)}" if selectors else PACK_CLASS


def usable(machine: MachineView, selectors: Sequence[LabelSelector]) -> bool:
    """True if a task with these selectors may run on the machine."""
    return all(selector.matches(machine.labels) for selector in selectors)


def packing_order(
    selectors: Sequence[LabelSelector], cluster: ClusterView
) -> dict[ResourceRef, int]:
    """The machines a task with these selectors may use that have a free slot, mapped to their
    rank in the packing order (see the module docstring), from the latest statistics pass."""
    keyed: list[tuple[bool, int, int, ResourceRef]] = []
    for joined, machine in enumerate(cluster.machines.values()):
        if not usable(machine, selectors):
            continue
        stats = cluster.stats(machine.ref)
        free = stats.free_slots
        if free > 0:
            idle = stats.running_tasks == 0
            keyed.append((idle, -free if idle else free, joined, machine.ref))
    keyed.sort()
    return {ref: rank for rank, (_, _, _, ref) in enumerate(keyed)}


class BinPackPolicy:
    """Top up the fullest busy machines first, then wake the largest idle ones (see the module
    docstring).

    It implements four hooks and leaves every other question to the SDK's defaults.
    """

    def __init__(self) -> None:
        # The selectors behind each pack class, to find its machines again. A class named once
        # keeps its entry (one per distinct set of selectors ever seen).
        self._selectors: dict[EquivClassId, tuple[LabelSelector, ...]] = {PACK_CLASS: ()}
        # This round's packing order of each class, made when the class is first asked about.
        self._orders: dict[EquivClassId, dict[ResourceRef, int]] = {}

    def __repr__(self) -> str:
        return "BinPackPolicy()"

    # ------------------------------------------------------------------ the round's orders

    @hookimpl
    def round_started(self) -> None:
        """A new round: the previous round's orders are stale (the statistics pass that comes
        next may change every machine's load)."""
        self._orders.clear()

    def _order(self, equiv_class: EquivClassId, cluster: ClusterView) -> dict[ResourceRef, int]:
        order = self._orders.get(equiv_class)
        if order is None:
            order = packing_order(self._selectors[equiv_class], cluster)
            self._orders[equiv_class] = order
        return order

    # ------------------------------------------------------------------ shape

    @hookimpl
    def task_equiv_classes(self, task: TaskView) -> Sequence[EquivClassId]:
        equiv_class = pack_class(task.selectors)
        self._selectors.setdefault(equiv_class, tuple(task.selectors))
        return (equiv_class,)

    @hookimpl
    def equiv_class_preference_arcs(
        self, equiv_class: EquivClassId, cluster: ClusterView
    ) -> Sequence[ResourceRef] | None:
        if equiv_class not in self._selectors:
            return None  # not a pack class: the defaults' business
        return tuple(self._order(equiv_class, cluster))

    # ------------------------------------------------------------------ arc descriptors

    @hookimpl
    def equiv_class_to_resource(
        self, equiv_class: EquivClassId, resource: ResourceView, cluster: ClusterView
    ) -> ArcDescriptor | None:
        if equiv_class not in self._selectors:
            return None
        order = self._order(equiv_class, cluster)
        rank = order.get(resource.ref)
        if rank is None:  # not one of the class's machines with room: an arc that carries nothing
            return ArcDescriptor(len(order), capacity=0)
        return ArcDescriptor(rank, capacity=resource.stats.free_slots)
