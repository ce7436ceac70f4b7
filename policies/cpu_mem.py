"""The cpu-mem policy: Firmament's CPU/memory cost model, which places each task only where its
request fits and prefers the machine it fits best, as Kubernetes' default scheduler scores them.

Source: `src/scheduling/flow/cpu_cost_model.cc` (and its predecessor `cpu_mem_cost_model.cc`) in
Firmament, the cost model behind Poseidon, Firmament's Kubernetes scheduler. There, tasks with
the same request share a request aggregator with arcs only to machines where such a task fits,
priced with Kubernetes' scoring functions. Here, with ω = 1000 (Firmament's `omega_`) and
fractions those of the machine's capacity that would be reserved with the task placed:

* least requested (Kubernetes' LeastRequestedPriority): ω x the mean of the cpu and ram
  fractions, so emptier machines are cheaper;
* balanced allocation (Kubernetes' BalancedResourceAllocation): ω x |cpu fraction - ram
  fraction|, so machines whose cpu and ram would stay in proportion are cheaper.

Their sum, from 0 to 1.5ω, is the cost of the arc: the best-fitting machine is the cheapest.
Waiting costs the defaults' 1,000,000 plus one per second waited (Firmament: 2,560,000 flat), far
above any placement, so every task that fits somewhere is placed, oldest first when room is short.

The graph::

    task -> request class -> machine class -> machine -> sink

A request class holds the waiting tasks with one request vector and one set of label selectors.
It has an arc to the machine class of each machine where one such task fits (free slot, every
resource dimension, labels), with that cost and as capacity how many such tasks fit there.

Those capacities are each counted against the same free resources, so tasks of several requests
could overfill a machine together in one round. The machine class closes that gap: its one arc to
the machine lets through only as many tasks as fit whichever waiting tasks they are, that is, as
many as the largest waiting requests that could go there fit, dimension by dimension
(`batch_limit`). So no round overcommits a machine; when requests differ widely a machine may take
fewer tasks in one round than a perfect packing would, and the next round fills it further. Class
arcs are asked again every round, so the limit follows the waiting tasks, which are counted once
per round. (Firmament's per-machine classes, one per
extra task, count each request against the machine on its own, and so can overfill it.)

One arc per request and machine prices a round's tasks of one request alike: a batch goes to the
best machine up to its limit, then the next best, rather than spreading as placing tasks one by
one would. Firmament's per-extra-task classes spread it, at the price of a class and an arc per
extra task on every machine; here the next round re-prices the machines instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from firmament_py.sdk import (
    ArcDescriptor,
    ClusterView,
    EquivClassId,
    LabelSelector,
    MachineId,
    ResourceRef,
    Resources,
    ResourceStats,
    ResourceView,
    TaskView,
    hookimpl,
    selector_class,
)

OMEGA = 1000
"""The cost range of each score (Firmament's `omega_`)."""

MACHINE_CLASS_PREFIX = "machine:"


def request_class(request: Resources, selectors: Sequence[LabelSelector]) -> EquivClassId:
    """The request class of tasks with this request and these label selectors."""
    amounts = zip(Resources.DIMENSIONS, request.as_tuple(), strict=True)
    name = "request:" + (",".join(f"{dim}={value}" for dim, value in amounts if value) or "none")
    return f"{name}|{selector_class(selectors)}" if selectors else name


def machine_class(machine_id: MachineId) -> EquivClassId:
    return MACHINE_CLASS_PREFIX + machine_id


def machine_of_class(equiv_class: EquivClassId) -> MachineId | None:
    """The machine of a machine class, or None if `equiv_class` is not one."""
    if isinstance(equiv_class, str) and equiv_class.startswith(MACHINE_CLASS_PREFIX):
        return equiv_class.removeprefix(MACHINE_CLASS_PREFIX)
    return None


def how_many_fit(request: Resources, stats: ResourceStats) -> int:
    """How many tasks with this request fit in a machine's free slots and free resources."""
    count = stats.free_slots
    for wanted, free in zip(request.as_tuple(), stats.free.as_tuple(), strict=True):
        if wanted > 0:
            count = min(count, free // wanted)
    return max(count, 0)


def _fraction(used: int, total: int) -> float:
    if total <= 0:
        return 0.0 if used <= 0 else 1.0
    return min(1.0, used / total)


def placement_cost(request: Resources, stats: ResourceStats) -> int:
    """Least-requested plus balanced-allocation cost of one more such task on the machine."""
    after = stats.reserved + request
    cpu = _fraction(after.cpu_millicores, stats.capacity.cpu_millicores)
    ram = _fraction(after.ram_bytes, stats.capacity.ram_bytes)
    least_requested = (cpu + ram) / 2
    balanced_allocation = abs(cpu - ram)
    return round(OMEGA * (least_requested + balanced_allocation))


def batch_limit(free_slots: int, free: Resources, waiting: Iterable[tuple[Resources, int]]) -> int:
    """How many of the `waiting` tasks ((request, count) pairs, each request fitting `free`)
    a machine may take in one round so that any choice of that many fits: in every dimension,
    that many of the largest requests together must fit."""
    waiting = list(waiting)
    limit = min(free_slots, sum(count for _, count in waiting))
    for dimension, budget in enumerate(free.as_tuple()):
        amounts = sorted(((r.as_tuple()[dimension], n) for r, n in waiting), reverse=True)
        taken = 0
        for amount, count in amounts:
            fitting = count if amount == 0 else min(count, budget // amount)
            taken += fitting
            budget -= fitting * amount
            if fitting < count:
                break
        limit = min(limit, taken)
    return limit


@dataclass(frozen=True, slots=True)
class RequestShape:
    """What the tasks of one request class ask for, and how many of them wait this round."""

    request: Resources
    selectors: tuple[LabelSelector, ...]
    waiting: int


class CpuMemPolicy:
    """Place tasks where their whole request fits, best fit first, never overcommitting (see
    the module docstring)."""

    def __init__(self) -> None:
        # The round's waiting request classes and machine limits, made when first needed in a
        # round (`round_started` drops them).
        self._shapes: dict[EquivClassId, RequestShape] | None = None
        self._limits: dict[MachineId, int] = {}

    @hookimpl
    def round_started(self) -> None:
        """A new round: the waiting tasks are counted afresh when next needed."""
        self._shapes = None

    def _round_shapes(self, cluster: ClusterView) -> dict[EquivClassId, RequestShape]:
        if self._shapes is None:
            counts: dict[EquivClassId, tuple[TaskView, int]] = {}
            for task in cluster.waiting_tasks.values():
                key = request_class(task.request, task.selectors)
                first, count = counts.get(key, (task, 0))
                counts[key] = (first, count + 1)
            self._shapes = {
                key: RequestShape(task.request, tuple(task.selectors), count)
                for key, (task, count) in counts.items()
            }
            self._limits = {}
        return self._shapes

    def _fits(self, shape: RequestShape, machine_id: MachineId, cluster: ClusterView) -> bool:
        machine = cluster.machine(machine_id)
        return how_many_fit(shape.request, cluster.stats(machine.ref)) > 0 and all(
            selector.matches(machine.labels) for selector in shape.selectors
        )

    def _limit(self, machine_id: MachineId, cluster: ClusterView) -> int:
        shapes = self._round_shapes(cluster)
        limit = self._limits.get(machine_id)
        if limit is None:
            stats = cluster.stats(ResourceRef.machine(machine_id))
            waiting = [
                (shape.request, shape.waiting)
                for shape in shapes.values()
                if self._fits(shape, machine_id, cluster)
            ]
            limit = self._limits[machine_id] = batch_limit(stats.free_slots, stats.free, waiting)
        return limit

    @hookimpl
    def task_equiv_classes(self, task: TaskView) -> Sequence[EquivClassId]:
        return (request_class(task.request, task.selectors),)

    @hookimpl
    def equiv_class_to_equiv_class_arcs(
        self, equiv_class: EquivClassId, cluster: ClusterView
    ) -> Sequence[EquivClassId] | None:
        shape = self._round_shapes(cluster).get(equiv_class)
        if shape is None:
            return None
        return [
            machine_class(machine_id)
            for machine_id in cluster.machines
            if self._fits(shape, machine_id, cluster)
        ]

    @hookimpl
    def equiv_class_to_equiv_class(
        self, source: EquivClassId, target: EquivClassId, cluster: ClusterView
    ) -> ArcDescriptor | None:
        shape = self._round_shapes(cluster).get(source)
        machine_id = machine_of_class(target)
        if shape is None or machine_id is None:
            return None
        stats = cluster.stats(ResourceRef.machine(machine_id))
        return ArcDescriptor(
            placement_cost(shape.request, stats), capacity=how_many_fit(shape.request, stats)
        )

    @hookimpl
    def equiv_class_preference_arcs(
        self, equiv_class: EquivClassId, cluster: ClusterView
    ) -> Sequence[ResourceRef] | None:
        if equiv_class in self._round_shapes(cluster):
            return ()  # a request class reaches machines only through their machine classes
        machine_id = machine_of_class(equiv_class)
        if machine_id is None:
            return None
        return (ResourceRef.machine(machine_id),) if machine_id in cluster.machines else ()

    @hookimpl
    def equiv_class_to_resource(
        self, equiv_class: EquivClassId, resource: ResourceView, cluster: ClusterView
    ) -> ArcDescriptor | None:
        machine_id = machine_of_class(equiv_class)
        if machine_id is None:
            return None
        return ArcDescriptor(0, capacity=self._limit(machine_id, cluster))
