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

Describing bandwidth. A task asks for bandwidth in its request
(`TaskSubmitted(request=Resources(net_rx_bytes_per_s=...))`); a machine offers its link in its
capacity (`MachineAdded(capacity=Resources(net_rx_bytes_per_s=..., net_tx_bytes_per_s=...))`);
measured use arrives as `MachineStats(usage=Resources(net_rx_bytes_per_s=...))`. All in bytes
per second. A task that asks for none still gets a slot, on the least loaded link.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from firmament_py.sdk import (
    MAX_COST,
    ArcDescriptor,
    ClusterView,
    EquivClassId,
    LabelSelector,
    MachineId,
    MachineView,
    ResourceRef,
    Resources,
    ResourceStats,
    ResourceView,
    TaskView,
    hookimpl,
    selector_class,
)

__all__ = [
    "FULL_LINK_COST",
    "WAITING_COST",
    "NetworkAwarePolicy",
    "deal_shares",
    "request_class",
]

FULL_LINK_COST = 1000
"""The cost of an arc to a machine whose receive link the task would fill: costs are
thousandths of the link."""
WAITING_COST = 2500
"""The base cost of leaving a task unscheduled (NetCostModel's value), above any placement."""

MICROSECONDS_PER_SECOND = 1_000_000
_RX = Resources.DIMENSIONS.index("net_rx_bytes_per_s")
_OBSERVED = tuple(
    name in ("net_rx_bytes_per_s", "net_tx_bytes_per_s") for name in Resources.DIMENSIONS
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
    """How many tasks of each request a machine with `spare` resources and `slots` free slots
    takes: dealt one task to each request in turn, in the order given, a request leaving the
    turn once its `demands` are met or its next task does not fit, until no slot is left.

    Requests and spare are vectors of the same dimensions. The shares' total request fits
    within `spare` and their number within `slots`; no request with demand left could take
    one more task.
    """
    shares = [0] * len(requests)
    room = list(spare)
    turn = [kind for kind, demand in enumerate(demands) if demand > 0]
    while turn and slots > 0:
        # Whole turns in which every request still in play gets a task, dealt at once.
        total = [sum(requests[kind][d] for kind in turn) for d in range(len(room))]
        turns = min(
            slots // len(turn),
            min(demands[kind] - shares[kind] for kind in turn),
            min((r // t for r, t in zip(room, total, strict=True) if t > 0), default=slots),
        )
        for kind in turn:
            shares[kind] += turns
        room = [r - turns * t for r, t in zip(room, total, strict=True)]
        slots -= turns * len(turn)
        # Then one turn task by task, in which at least one request leaves or the slots end.
        still_in: list[int] = []
        for kind in turn:
            request = requests[kind]
            if (
                slots > 0
                and shares[kind] < demands[kind]
                and all(q <= r for q, r in zip(request, room, strict=True))
            ):
                shares[kind] += 1
                room = [r - q for r, q in zip(room, request, strict=True)]
                slots -= 1
                if shares[kind] < demands[kind]:
                    still_in.append(kind)
        turn = still_in
    return shares


def _spare(stats: ResourceStats) -> tuple[int, ...]:
    """What a machine can still give: capacity minus reservations, or minus the measured use
    in the network dimensions where that is higher; never below zero."""
    return tuple(
        max(0, capacity - (max(reserved, measured) if observed else reserved))
        for capacity, reserved, measured, observed in zip(
            stats.capacity.as_tuple(),
            stats.reserved.as_tuple(),
            stats.measured_usage.as_tuple(),
            _OBSERVED,
            strict=True,
        )
    )


@dataclass(frozen=True, slots=True)
class _Round:
    """One round's dealing: each aggregator's request and its share of each machine."""

    requests: dict[EquivClassId, Resources]
    shares: dict[EquivClassId, dict[MachineId, int]]


class NetworkAwarePolicy:
    """The network-aware policy (see the module docstring for the graph, capacities and costs).

    It takes no arguments: everything it needs is in the tasks' requests, the machines'
    capacities and the statistics.
    """

    def __init__(self) -> None:
        self._round: _Round | None = None
        """The current round's dealing, made when first needed, dropped by the next pass."""

    def __repr__(self) -> str:
        return "NetworkAwarePolicy()"

    def _dealt(self, cluster: ClusterView) -> _Round:
        if self._round is not None:
            return self._round
        demands: dict[EquivClassId, int] = {}
        requests: dict[EquivClassId, Resources] = {}
        selectors: dict[EquivClassId, tuple[LabelSelector, ...]] = {}
        for task in cluster.waiting_tasks.values():
            equiv_class = request_class(task.request, task.selectors)
            demands[equiv_class] = demands.get(equiv_class, 0) + 1
            requests[equiv_class] = task.request
            selectors[equiv_class] = task.selectors
        order = sorted(demands, key=lambda c: (-requests[c].net_rx_bytes_per_s, str(c)))
        shares: dict[EquivClassId, dict[MachineId, int]] = {c: {} for c in order}
        for machine in cluster.machines.values():
            stats = cluster.stats(machine.ref)
            allowed = [c for c in order if _matches(selectors[c], machine)]
            dealt = deal_shares(
                [requests[c].as_tuple() for c in allowed],
                [demands[c] for c in allowed],
                _spare(stats),
                stats.free_slots,
            )
            for aggregator, share in zip(allowed, dealt, strict=True):
                if share:
                    shares[aggregator][machine.machine_id] = share
        self._round = _Round(requests, shares)
        return self._round

    # ------------------------------------------------------------------ shape

    @hookimpl
    def task_equiv_classes(self, task: TaskView) -> Sequence[EquivClassId]:
        return (request_class(task.request, task.selectors),)

    @hookimpl
    def equiv_class_preference_arcs(
        self, equiv_class: EquivClassId, cluster: ClusterView
    ) -> list[ResourceRef]:
        machines = self._dealt(cluster).shares.get(equiv_class, {})
        return [ResourceRef.machine(machine_id) for machine_id in machines]

    # ------------------------------------------------------------------ arc descriptors

    @hookimpl
    def task_to_unscheduled(self, task: TaskView, cluster: ClusterView) -> ArcDescriptor:
        waited = task.unscheduled_time(cluster.now) // MICROSECONDS_PER_SECOND
        return ArcDescriptor(min(WAITING_COST + waited, MAX_COST))

    @hookimpl
    def equiv_class_to_resource(
        self, equiv_class: EquivClassId, resource: ResourceView, cluster: ClusterView
    ) -> ArcDescriptor:
        dealt = self._dealt(cluster)
        share = dealt.shares.get(equiv_class, {}).get(resource.id, 0)
        if share == 0:
            return ArcDescriptor(0, capacity=0)
        stats = resource.stats
        link = stats.capacity.net_rx_bytes_per_s
        if link == 0:  # only requests without receive bandwidth get here
            return ArcDescriptor(0, capacity=share)
        in_use = max(stats.reserved.net_rx_bytes_per_s, stats.measured_usage.net_rx_bytes_per_s)
        wanted = in_use + dealt.requests[equiv_class].net_rx_bytes_per_s
        return ArcDescriptor(min(FULL_LINK_COST * wanted // link, FULL_LINK_COST), capacity=share)

    # ------------------------------------------------------------------ statistics

    @hookimpl
    def round_started(self) -> None:
        """A new round: the previous dealing is stale."""
        self._round = None


def _matches(selectors: Sequence[LabelSelector], machine: MachineView) -> bool:
    return all(selector.matches(machine.labels) for selector in selectors)
