"""The zoe policy: places the components of Zoe's applications (core and elastic) where their
cpu and ram requests fit, packing machines, core components before elastic ones.

Written for `firmament_py.zoe.placement.FlowPlacement`, which submits an admitted application's
components as tasks of one job (the application) labelled `zoe.class` = `core` or `elastic`
(and `zoe.app` = the application's id); any other task counts as elastic. The graph::

    task -> request class -> machine -> sink
    task -> U(job) -> sink

* Request classes (Firmament's aggregators) group the waiting tasks of one component class and
  one request: `zoe-core|cpu=...,ram=...` and `zoe-elastic|...`. Every round, each machine's
  free slots, cpu and ram are dealt out among the request classes with waiting tasks
  (`firmament_py.sdk.packing`): one task to each class in turn, core classes before elastic
  ones and larger requests first, until nothing more fits. A class has an arc to every machine
  it was dealt a share of, carrying that share, at a best-fit cost: OMEGA (1000) x the mean of
  the cpu and ram fractions the machine would still have free, so fuller machines are cheaper
  and large holes stay open for large components (Zoe packs applications). The shares of one
  machine fit it together, so no round overcommits a machine.
* Label selectors: tasks with selectors (`TaskView.selectors`, e.g. `gpu=true`) get request
  classes of their own, keyed also by the selectors (`zoe-core|cpu=...,ram=...|selectors:...`,
  `selector_class`), which are dealt only machines whose labels satisfy all of them; so a
  component never reaches a machine that would refuse it.
* Waiting costs: a core component `CORE_WAITING_COST` (100 x the defaults' UNSCHEDULED_COST)
  plus one per second waited, an elastic one the defaults' UNSCHEDULED_COST plus one per
  second. Both dwarf any placement (at most OMEGA), so whatever fits is placed; when core and
  elastic components compete for room, core ones are dealt first.

The policy does not preempt: a running component never moves or stops because of a round. The
gang of an application's core components (all of them or none) cannot be said in a flow
network whose every round must be feasible; `FlowPlacement` guarantees it (see `docs/zoe.md`):
it admits an application only when the flexible scheduler's virtual assignment has room for all
of its cores, submits them alone (no elastic component waits then), runs rounds until quiet,
and withdraws all of them if any is still waiting.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from firmament_py.sdk import (
    UNSCHEDULED_COST,
    ArcDescriptor,
    ClusterView,
    EquivClassId,
    LabelSelector,
    MachineView,
    ResourceArcs,
    ResourceRef,
    Resources,
    ResourceStats,
    ResourceView,
    StatsColumns,
    TaskArcs,
    TaskBatch,
    TaskView,
    TimedArcs,
    Topology,
    hookimpl,
    selector_class,
)
from firmament_py.sdk.columns import columns_of_stats, machines_of
from firmament_py.sdk.packing import Dealing, RequestClass, request_classes

from .cpu_mem import how_many_fit

__all__ = [
    "APP_LABEL",
    "CLASS_LABEL",
    "CORE_WAITING_COST",
    "OMEGA",
    "ZoePolicy",
    "component_class",
    "how_many_fit",
    "packing_cost",
    "packing_costs",
    "request_class",
    "usable",
]

IntArray = npt.NDArray[np.int64]

CLASS_LABEL = "zoe.class"
"""Task label: the component's class, `core` or `elastic`."""
APP_LABEL = "zoe.app"
"""Task label: the application's id."""

OMEGA = 1000
"""The range of the packing cost."""

CORE_WAITING_COST = 100 * UNSCHEDULED_COST
"""The base cost of leaving a core component waiting for a round."""

REQUEST_CLASS_PREFIX = "zoe-"
_CPU = Resources.DIMENSIONS.index("cpu_millicores")
_RAM = Resources.DIMENSIONS.index("ram_bytes")


def component_class(task: TaskView) -> str:
    """`core` for a task labelled as a core component, `elastic` for any other."""
    return "core" if task.labels.get(CLASS_LABEL) == "core" else "elastic"


def request_class(
    kind: str, request: Resources, selectors: Sequence[LabelSelector] = ()
) -> EquivClassId:
    """The request class of waiting components of class `kind` with this request (and these
    label selectors): `zoe-core|cpu=1000,ram=1073741824`, with any other dimension the request
    has appended (`,net_rx_bytes_per_s=...`): the tasks of a class all ask for the same."""
    name = f"{REQUEST_CLASS_PREFIX}{kind}|cpu={request.cpu_millicores},ram={request.ram_bytes}"
    for dimension, amount in zip(Resources.DIMENSIONS, request.as_tuple(), strict=True):
        if amount and dimension not in ("cpu_millicores", "ram_bytes"):
            name += f",{dimension}={amount}"
    return f"{name}|{selector_class(selectors)}" if selectors else name


def _class_of(task: TaskView) -> EquivClassId:
    return request_class(component_class(task), task.request, task.selectors)


def usable(machine: MachineView, selectors: Sequence[LabelSelector]) -> bool:
    """True if a task with these selectors may run on the machine."""
    return all(selector.matches(machine.labels) for selector in selectors)


def packing_costs(request: Sequence[int], stats: StatsColumns, rows: IntArray) -> IntArray:
    """OMEGA x the mean of the cpu and ram fractions left free on each machine of `rows` after
    placing one more task with `request` (a `Resources.as_tuple()`): best fit, fuller
    machines cheaper."""
    left = stats.free[rows] - np.asarray(request, dtype=np.int64)
    fractions = []
    for dimension in (_CPU, _RAM):
        total = stats.capacity[rows, dimension]
        with np.errstate(divide="ignore", invalid="ignore"):
            share = np.clip(left[:, dimension] / total, 0.0, 1.0)
        fractions.append(np.where(total > 0, share, 0.0))
    return np.round(OMEGA * (fractions[0] + fractions[1]) / 2).astype(np.int64)


def packing_cost(request: Resources, stats: ResourceStats) -> int:
    """`packing_costs` of one machine with these statistics."""
    one = np.zeros(1, dtype=np.int64)
    return int(packing_costs(request.as_tuple(), columns_of_stats([stats]), one)[0])


def _dealing_order(request_class: RequestClass) -> tuple[object, ...]:
    """Core classes first, then larger requests (cpu, then ram), then by name."""
    name = str(request_class.name)
    core = name.startswith(f"{REQUEST_CLASS_PREFIX}core|")
    return (not core, -request_class.request[_CPU], -request_class.request[_RAM], name)


class ZoePolicy:
    """Core components first, packed where their whole request fits (see the module
    docstring)."""

    def __init__(self) -> None:
        self._dealing: Dealing | None = None
        """The round's dealing, made when first needed; `round_started` drops it."""

    @hookimpl
    def round_started(self) -> None:
        self._dealing = None

    def _dealt(self, cluster: ClusterView, topology: Topology | None = None) -> Dealing:
        """The round's dealing, from the batch hooks' machine columns or (asked per item) the
        cluster view's: the same numbers either way."""
        if self._dealing is None:
            machines = topology.machines if topology is not None else machines_of(cluster)
            found = request_classes(cluster.waiting_tasks.values(), _class_of)
            self._dealing = Dealing.of(machines, sorted(found.values(), key=_dealing_order))
        return self._dealing

    def _arcs(
        self, equiv_class: EquivClassId, cluster: ClusterView, topology: Topology | None = None
    ) -> tuple[IntArray, IntArray, IntArray] | None:
        """The machine rows a request class was dealt a share of, their costs and the shares;
        None for a class that is not one of the round's request classes."""
        dealing = self._dealt(cluster, topology)
        dealt, rows, shares = dealing.arcs(equiv_class)
        if dealt is None:
            return None
        return rows, packing_costs(dealt.request, dealing.machines.stats, rows), shares

    @staticmethod
    def _waiting_base(task: TaskView) -> int:
        return CORE_WAITING_COST if component_class(task) == "core" else UNSCHEDULED_COST

    # ------------------------------------------------------------------ batch forms

    @hookimpl
    def task_to_unscheduled_batch(self, tasks: TaskBatch) -> TimedArcs:
        return TimedArcs([self._waiting_base(task) for task in tasks], per_second=1)

    @hookimpl
    def task_to_equiv_classes_batch(self, tasks: TaskBatch) -> TaskArcs[EquivClassId]:
        return TaskArcs.one_each([_class_of(task) for task in tasks], cost=0)

    @hookimpl
    def equiv_class_to_resources_batch(
        self, equiv_class: EquivClassId, topology: Topology, cluster: ClusterView
    ) -> ResourceArcs | None:
        arcs = self._arcs(equiv_class, cluster, topology)
        return None if arcs is None else ResourceArcs.to_machines(*arcs)

    # ------------------------------------------------------------------ per item

    @hookimpl
    def task_equiv_classes(self, task: TaskView) -> Sequence[EquivClassId]:
        return (_class_of(task),)

    @hookimpl
    def task_to_equiv_class(self) -> ArcDescriptor:
        return ArcDescriptor(0)

    @hookimpl
    def task_to_unscheduled(self, task: TaskView, cluster: ClusterView) -> ArcDescriptor:
        return ArcDescriptor(
            self._waiting_base(task) + task.unscheduled_time(cluster.now) // 1_000_000
        )

    @hookimpl
    def equiv_class_preference_arcs(
        self, equiv_class: EquivClassId, cluster: ClusterView
    ) -> Sequence[ResourceRef] | None:
        arcs = self._arcs(equiv_class, cluster)
        if arcs is None:
            return None
        refs = self._dealt(cluster).machines.refs
        return [refs[row] for row in arcs[0].tolist()]

    @hookimpl
    def equiv_class_to_resource(
        self, equiv_class: EquivClassId, resource: ResourceView, cluster: ClusterView
    ) -> ArcDescriptor | None:
        arcs = self._arcs(equiv_class, cluster)
        if arcs is None:
            return None
        rows, costs, shares = arcs
        found = np.flatnonzero(rows == self._dealt(cluster).machines.row_of.get(resource.id, -1))
        if not len(found):
            return ArcDescriptor(0, capacity=0)
        return ArcDescriptor(int(costs[found[0]]), capacity=int(shares[found[0]]))
