"""Network-aware scheduling: place a task only where its network bandwidth fits, and prefer the
machines whose links carry the least traffic.

Source: Firmament's OSDI 2016 paper, §3.3 and Figure 6c (§7.5 shows it keeping short batch
tasks off busy links), and its NetCostModel (src/scheduling/flow/net_cost_model.cc).

The graph. Every waiting task has one arc, cost 0, to the request aggregator of its request:
one per distinct receive bandwidth asked for (and, where tasks ask for them, per distinct other
resources and label selectors). An aggregator has an arc to each machine where at least one
more of its tasks fits now; each machine has its slots to the sink. Preemption is off, as in
NetCostModel, which leaves it unimplemented.

Spare bandwidth. A machine's spare receive (and transmit) bandwidth is its capacity minus what
its running tasks reserve or, when its latest MachineStats report more than that (traffic the
scheduler did not place, tasks using more than they asked for), minus the measured use. So the
arcs follow the observed bandwidth: a machine reported busy loses its arcs the next round. The
request's other dimensions (cpu, ram, disk) must fit in capacity minus reservations, because
the cluster state refuses a placement that does not fit in every dimension.

Capacities. NetCostModel gives a request aggregator one unit arc per task that fits on a
machine, through per-machine classes that aggregators with different requests share, so one
round can overfill a machine: each aggregator sees room for its own tasks, not for everyone's.
A flow network cannot say that tasks of several sizes draw on one budget (that is a knapsack
constraint), so here each round deals every machine's spare bandwidth and free slots out among
the aggregators with waiting tasks: one task to each in turn, largest request first, until
nothing more fits. An aggregator's arc capacity is its share. The shares never add up to more
than the machine has, so no round overcommits a link whatever arcs the solver uses; an
aggregator with n waiting tasks takes at most n from a machine, and a large request is never
crowded out by many small ones. The price: an aggregator holds its shares on every machine at
once, so in a round that mixes requests, bandwidth held for it on machines its tasks do not go
to stays idle until the next round deals again.

Costs. NetCostModel's arc to a machine costs the request plus the bandwidth in use there, in
MB/s on 10 Gb/s (1,250 MB/s) links, so tasks go to the least loaded link, and waiting costs
2,500. Here the same sum is counted in thousandths of the machine's receive capacity,
`1000 x (in use + request) / capacity`, so costs stay within 0..1,000 on links of any speed and
a mixed cluster fills its links evenly by fraction. (NetCostModel charges each further task on
a machine one more request; here an aggregator's tasks on one machine pay the same within a
round, and the next round prices the new reservations.) Waiting costs 2,500 plus one per second
waited, so when room is short the tasks that waited longest go first.

Cost of asking. The dealing is `firmament_py.sdk.packing.deal_room`, worked out once per round
in arrays over every machine; the batch hooks read the round's machine columns, and the
per-item hooks answer from the same dealing.

Describing bandwidth. A task asks for bandwidth in its request
(`TaskSubmitted(request=Resources(net_rx_bytes_per_s=...))`); a machine offers its link in its
capacity (`MachineAdded(capacity=Resources(net_rx_bytes_per_s=..., net_tx_bytes_per_s=...))`);
measured use arrives as `MachineStats(usage=Resources(net_rx_bytes_per_s=...))`. All in bytes
per second. A task that asks for none still gets a slot, on the least loaded link.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from firmament_py.sdk import (
    MAX_COST,
    ArcDescriptor,
    ClusterView,
    EquivClassId,
    LabelSelector,
    ResourceArcs,
    ResourceColumns,
    ResourceRef,
    Resources,
    ResourceView,
    TaskArcs,
    TaskBatch,
    TaskView,
    TimedArcs,
    Topology,
    hookimpl,
    selector_class,
)
from firmament_py.sdk.columns import machines_of
from firmament_py.sdk.packing import Dealing, deal_room, request_classes

__all__ = [
    "FULL_LINK_COST",
    "WAITING_COST",
    "NetworkAwarePolicy",
    "deal_shares",
    "request_class",
]

IntArray = npt.NDArray[np.int64]

FULL_LINK_COST = 1000
"""The cost of an arc to a machine whose receive link the task would fill: costs are
thousandths of the link."""
WAITING_COST = 2500
"""The base cost of leaving a task unscheduled (NetCostModel's value), above any placement."""

_RX = Resources.DIMENSIONS.index("net_rx_bytes_per_s")
_OBSERVED = np.array(
    [name in ("net_rx_bytes_per_s", "net_tx_bytes_per_s") for name in Resources.DIMENSIONS]
)
"""The dimensions in which measured use, when above the reservations, counts as used."""


def request_class(request: Resources, selectors: Sequence[LabelSelector] = ()) -> str:
    """The request aggregator of the tasks with this request and these selectors, named after
    them: `"net-rx=600000000"`, `"net-rx=0 cpu_millicores=500 selectors:zone=b"`."""
    parts = [f"net-rx={request.net_rx_bytes_per_s}"]
    parts += [
        f"{name}={value}"
        for position, (name, value) in enumerate(
            zip(Resources.DIMENSIONS, request.as_tuple(), strict=True)
        )
        if value and position != _RX
    ]
    if selectors:
        parts.append(str(selector_class(selectors)))
    return " ".join(parts)


def deal_shares(
    requests: Sequence[tuple[int, ...]],
    demands: Sequence[int],
    spare: Sequence[int],
    slots: int,
) -> list[int]:
    """How many tasks of each request one machine with `spare` resources and `slots` free
    slots takes (`deal_room` for one machine that every request may use)."""
    shares = deal_room(
        np.array(requests, dtype=np.int64).reshape(len(demands), len(spare)),
        np.array(demands, dtype=np.int64),
        np.array([spare], dtype=np.int64),
        np.array([slots], dtype=np.int64),
        np.ones((1, len(demands)), dtype=np.bool_),
    )
    return [int(share) for share in shares[0]]


def spare_room(machines: ResourceColumns) -> IntArray:
    """What each machine can still give: capacity minus reservations, or minus the measured
    use in the network dimensions where that is higher; never below zero."""
    stats = machines.stats
    used = np.where(_OBSERVED, np.maximum(stats.reserved, stats.measured_usage), stats.reserved)
    return np.maximum(stats.capacity - used, 0)


def link_costs(dealing: Dealing, equiv_class: EquivClassId) -> tuple[IntArray, IntArray, IntArray]:
    """The machine rows an aggregator was dealt a share of, each arc's cost (thousandths of
    the receive link in use with one more such task, at most `FULL_LINK_COST`) and its share."""
    dealt, rows, shares = dealing.arcs(equiv_class)
    if dealt is None:
        return rows, rows, shares
    stats = dealing.machines.stats
    link = stats.capacity[rows, _RX]
    in_use = np.maximum(stats.reserved[rows, _RX], stats.measured_usage[rows, _RX])
    wanted = in_use + dealt.request[_RX]
    cost = np.where(
        link > 0,
        np.minimum(FULL_LINK_COST * wanted // np.maximum(link, 1), FULL_LINK_COST),
        0,  # only requests without receive bandwidth are dealt a machine without a link
    )
    return rows, cost, shares


class NetworkAwarePolicy:
    """The network-aware policy (see the module docstring for the graph, capacities and costs).

    It takes no arguments: everything it needs is in the tasks' requests, the machines'
    capacities and the statistics.
    """

    def __init__(self) -> None:
        self._round: Dealing | None = None
        """The current round's dealing, made when first needed, dropped by the next round."""

    def __repr__(self) -> str:
        return "NetworkAwarePolicy()"

    def _dealt(self, cluster: ClusterView, topology: Topology | None = None) -> Dealing:
        """The round's dealing, from the batch hooks' machine columns or (asked per item) the
        cluster view's: the same numbers either way."""
        if self._round is None:
            machines = topology.machines if topology is not None else machines_of(cluster)
            found = request_classes(
                cluster.waiting_tasks.values(), lambda t: request_class(t.request, t.selectors)
            )
            order = sorted(found.values(), key=lambda c: (-c.request[_RX], str(c.name)))
            self._round = Dealing.of(machines, order, spare_room(machines))
        return self._round

    @hookimpl
    def round_started(self) -> None:
        """A new round: the previous dealing is stale."""
        self._round = None

    # ------------------------------------------------------------------ batch forms

    @hookimpl
    def task_to_unscheduled_batch(self) -> TimedArcs:
        return TimedArcs(WAITING_COST, per_second=1)

    @hookimpl
    def task_to_equiv_classes_batch(self, tasks: TaskBatch) -> TaskArcs[EquivClassId]:
        classes = [request_class(task.request, task.selectors) for task in tasks]
        return TaskArcs.one_each(classes, cost=0)

    @hookimpl
    def equiv_class_to_resources_batch(
        self, equiv_class: EquivClassId, topology: Topology, cluster: ClusterView
    ) -> ResourceArcs:
        rows, cost, shares = link_costs(self._dealt(cluster, topology), equiv_class)
        return ResourceArcs.to_machines(rows, cost, shares)

    # ------------------------------------------------------------------ per item

    @hookimpl
    def task_equiv_classes(self, task: TaskView) -> Sequence[EquivClassId]:
        return (request_class(task.request, task.selectors),)

    @hookimpl
    def task_to_equiv_class(self) -> ArcDescriptor:
        return ArcDescriptor(0)

    @hookimpl
    def equiv_class_preference_arcs(
        self, equiv_class: EquivClassId, cluster: ClusterView
    ) -> list[ResourceRef]:
        dealt = self._dealt(cluster)
        _, rows, _ = dealt.arcs(equiv_class)
        refs = dealt.machines.refs
        return [refs[row] for row in rows.tolist()]

    @hookimpl
    def task_to_unscheduled(self, task: TaskView, cluster: ClusterView) -> ArcDescriptor:
        waited = task.unscheduled_time(cluster.now) // 1_000_000
        return ArcDescriptor(min(WAITING_COST + waited, MAX_COST))

    @hookimpl
    def equiv_class_to_resource(
        self, equiv_class: EquivClassId, resource: ResourceView, cluster: ClusterView
    ) -> ArcDescriptor:
        dealt = self._dealt(cluster)
        rows, cost, shares = link_costs(dealt, equiv_class)
        row = dealt.machines.row_of.get(resource.id)
        found = np.flatnonzero(rows == row) if row is not None else rows[:0]
        if not len(found):
            return ArcDescriptor(0, capacity=0)
        return ArcDescriptor(int(cost[found[0]]), capacity=int(shares[found[0]]))
