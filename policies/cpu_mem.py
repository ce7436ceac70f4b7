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

    task -> request class -> machine -> sink

A request class holds the waiting tasks with one request vector and one set of label selectors.
Its arcs to machines could each carry as many such tasks as fit there, but those capacities are
each counted against the same free resources, so tasks of several requests could overfill a
machine together in one round (Firmament's per-machine classes, one per extra task, have that
flaw). Instead, every round deals each machine's free slots and free resources out among the
request classes with waiting tasks (`firmament_py.sdk.packing`: one task to each class in turn,
largest requests first, until nothing more fits), and a class's arc to a machine carries its
share: the shares of one machine always fit it together, so no round overcommits a machine,
and the tasks of every class that fits go out in the same round. A class reaches only the
machines it was dealt a share of, those where its tasks fit (slots, every resource dimension,
labels).

One arc per request and machine prices a round's tasks of one request alike: a batch goes to the
best machine up to its share, then the next best, rather than spreading as placing tasks one by
one would; the next round prices the machines again. When requests mix, room dealt to a class
on machines its tasks do not go to stays free until the next round deals it again.

Cost of asking. The dealing is worked out once per round, in arrays over every machine; the
batch hooks read the round's machine columns, and the per-item hooks answer from the same
dealing (built from the cluster view's statistics), so both forms give the same arcs.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from firmament_py.sdk import (
    ArcDescriptor,
    ClusterView,
    EquivClassId,
    LabelSelector,
    ResourceArcs,
    ResourceRef,
    Resources,
    ResourceStats,
    ResourceView,
    StatsColumns,
    TaskArcs,
    TaskBatch,
    TaskView,
    Topology,
    hookimpl,
    selector_class,
)
from firmament_py.sdk.columns import columns_of_stats, machines_of
from firmament_py.sdk.packing import Dealing, largest_first, request_classes

__all__ = [
    "OMEGA",
    "CpuMemPolicy",
    "how_many_fit",
    "placement_cost",
    "placement_costs",
    "request_class",
]

IntArray = npt.NDArray[np.int64]

OMEGA = 1000
"""The cost range of each score (Firmament's `omega_`)."""

_CPU = Resources.DIMENSIONS.index("cpu_millicores")
_RAM = Resources.DIMENSIONS.index("ram_bytes")


def request_class(request: Resources, selectors: Sequence[LabelSelector]) -> EquivClassId:
    """The request class of tasks with this request and these label selectors."""
    amounts = zip(Resources.DIMENSIONS, request.as_tuple(), strict=True)
    name = "request:" + (",".join(f"{dim}={value}" for dim, value in amounts if value) or "none")
    return f"{name}|{selector_class(selectors)}" if selectors else name


def how_many_fit(request: Resources, stats: ResourceStats) -> int:
    """How many tasks with this request fit in a machine's free slots and free resources."""
    count = stats.free_slots
    for wanted, free in zip(request.as_tuple(), stats.free.as_tuple(), strict=True):
        if wanted > 0:
            count = min(count, free // wanted)
    return max(count, 0)


def _fractions(used: npt.NDArray[np.float64], total: IntArray) -> npt.NDArray[np.float64]:
    """`used / total` at most 1; for no capacity at all, 0 if nothing is used, else 1."""
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.minimum(1.0, used / total)
    return np.where(total <= 0, np.where(used <= 0, 0.0, 1.0), share)


def placement_costs(request: Sequence[int], stats: StatsColumns, rows: IntArray) -> IntArray:
    """Least-requested plus balanced-allocation cost of one more task with `request` (a
    `Resources.as_tuple()`) on each machine of `rows`."""
    after = stats.reserved[rows] + np.asarray(request, dtype=np.int64)
    cpu = _fractions(after[:, _CPU].astype(np.float64), stats.capacity[rows, _CPU])
    ram = _fractions(after[:, _RAM].astype(np.float64), stats.capacity[rows, _RAM])
    least_requested = (cpu + ram) / 2
    balanced_allocation = np.abs(cpu - ram)
    return np.round(OMEGA * (least_requested + balanced_allocation)).astype(np.int64)


def placement_cost(request: Resources, stats: ResourceStats) -> int:
    """`placement_costs` of one machine with these statistics."""
    one = np.zeros(1, dtype=np.int64)
    return int(placement_costs(request.as_tuple(), columns_of_stats([stats]), one)[0])


class CpuMemPolicy:
    """Place tasks where their whole request fits, best fit first, never overcommitting (see
    the module docstring)."""

    def __init__(self) -> None:
        self._dealing: Dealing | None = None
        """The round's dealing, made when first needed; `round_started` drops it."""

    @hookimpl
    def round_started(self) -> None:
        """A new round: the room is dealt afresh when next needed."""
        self._dealing = None

    def _dealt(self, cluster: ClusterView, topology: Topology | None = None) -> Dealing:
        """The round's dealing, from the batch hooks' machine columns or (asked per item) the
        cluster view's: the same numbers either way."""
        if self._dealing is None:
            machines = topology.machines if topology is not None else machines_of(cluster)
            found = request_classes(
                cluster.waiting_tasks.values(), lambda t: request_class(t.request, t.selectors)
            )
            self._dealing = Dealing.of(machines, sorted(found.values(), key=largest_first))
        return self._dealing

    def _arcs(
        self, equiv_class: EquivClassId, cluster: ClusterView, topology: Topology | None = None
    ) -> tuple[IntArray, IntArray, IntArray]:
        """The machine rows a class was dealt a share of, their costs and the shares."""
        dealing = self._dealt(cluster, topology)
        dealt, rows, shares = dealing.arcs(equiv_class)
        if dealt is None:
            return rows, rows, shares
        return rows, placement_costs(dealt.request, dealing.machines.stats, rows), shares

    # ------------------------------------------------------------------ batch forms

    @hookimpl
    def task_to_equiv_classes_batch(self, tasks: TaskBatch) -> TaskArcs[EquivClassId]:
        classes = [request_class(task.request, task.selectors) for task in tasks]
        return TaskArcs.one_each(classes, cost=0)

    @hookimpl
    def equiv_class_to_resources_batch(
        self, equiv_class: EquivClassId, topology: Topology, cluster: ClusterView
    ) -> ResourceArcs | None:
        rows, costs, shares = self._arcs(equiv_class, cluster, topology)
        if equiv_class not in self._dealt(cluster, topology).positions:
            return None  # not a request class of this round: the defaults' business
        return ResourceArcs.to_machines(rows, costs, shares)

    # ------------------------------------------------------------------ per item

    @hookimpl
    def task_equiv_classes(self, task: TaskView) -> Sequence[EquivClassId]:
        return (request_class(task.request, task.selectors),)

    @hookimpl
    def equiv_class_preference_arcs(
        self, equiv_class: EquivClassId, cluster: ClusterView
    ) -> Sequence[ResourceRef] | None:
        dealing = self._dealt(cluster)
        if equiv_class not in dealing.positions:
            return None
        rows, _, _ = self._arcs(equiv_class, cluster)
        return [dealing.machines.refs[row] for row in rows.tolist()]

    @hookimpl
    def equiv_class_to_resource(
        self, equiv_class: EquivClassId, resource: ResourceView, cluster: ClusterView
    ) -> ArcDescriptor | None:
        dealing = self._dealt(cluster)
        if equiv_class not in dealing.positions:
            return None
        rows, costs, shares = self._arcs(equiv_class, cluster)
        found = np.flatnonzero(rows == dealing.machines.row_of.get(resource.id, -1))
        if not len(found):
            return ArcDescriptor(0, capacity=0)
        return ArcDescriptor(int(costs[found[0]]), capacity=int(shares[found[0]]))
