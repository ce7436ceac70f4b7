"""The zoe policy: places the components of Zoe's applications (core and elastic) where their
cpu and ram requests fit, packing machines, core components before elastic ones.

Written for `firmament_py.zoe.placement.FlowPlacement`, which submits an admitted application's
components as tasks of one job (the application) labelled `zoe.class` = `core` or `elastic`
(and `zoe.app` = the application's id); any other task counts as elastic. The graph::

    task -> request class -> machine class -> machine -> sink
    task -> U(job) -> sink

* Request classes (Firmament's aggregators) group the waiting tasks of one component class and
  one request: `zoe-core|cpu=...,ram=...` and `zoe-elastic|...`. A request class has an arc to
  the machine class of every machine where one such task fits (a free slot, free cpu and free
  ram), with capacity how many fit there and a best-fit cost: OMEGA (1000) x the mean of the
  cpu and ram fractions the machine would still have free, so fuller machines are cheaper and
  large holes stay open for large components (Zoe packs applications).
* Label selectors: tasks with selectors (`TaskView.selectors`, e.g. `gpu=true`) get request
  classes of their own, keyed also by the selectors (`zoe-core|cpu=...,ram=...|selectors:...`,
  `selector_class`), whose arcs go only to the machine classes of machines whose labels satisfy
  all of them; so a component never reaches a machine that would refuse it.
* A machine class has one arc to its machine whose capacity lets through only as many tasks as
  fit whichever waiting tasks they are: as many as the largest waiting requests that may go
  there (fit, and whose selectors the machine satisfies) fit, dimension by dimension. So no
  round overcommits a machine (rounds at the same instant fill it further).
* Waiting costs: a core component `CORE_WAITING_COST` (100 x the defaults' UNSCHEDULED_COST)
  plus one per second waited, an elastic one the defaults' UNSCHEDULED_COST plus one per
  second. Both dwarf any placement (at most OMEGA), so whatever fits is placed; when core and
  elastic components compete for room, the solver places the core ones.

The policy does not preempt: a running component never moves or stops because of a round. The
gang of an application's core components (all of them or none) cannot be said in a flow
network whose every round must be feasible; `FlowPlacement` guarantees it (see `docs/zoe.md`):
it admits an application only when the flexible scheduler's virtual assignment has room for all
of its cores, submits them alone (no elastic component waits then), runs rounds until quiet,
and withdraws all of them if any is still waiting.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from firmament_py.sdk import (
    UNSCHEDULED_COST,
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

from .cpu_mem import how_many_fit

__all__ = [
    "APP_LABEL",
    "CLASS_LABEL",
    "CORE_WAITING_COST",
    "OMEGA",
    "ZoePolicy",
    "component_class",
    "how_many_fit",
    "machine_class",
    "packing_cost",
    "request_class",
    "safe_batch",
    "usable",
]

CLASS_LABEL = "zoe.class"
"""Task label: the component's class, `core` or `elastic`."""
APP_LABEL = "zoe.app"
"""Task label: the application's id."""

OMEGA = 1000
"""The range of the packing cost."""

CORE_WAITING_COST = 100 * UNSCHEDULED_COST
"""The base cost of leaving a core component waiting for a round."""

REQUEST_CLASS_PREFIX = "zoe-"
MACHINE_CLASS_PREFIX = "zoe-machine:"
_SECOND = 1_000_000


def component_class(task: TaskView) -> str:
    """`core` for a task labelled as a core component, `elastic` for any other."""
    return "core" if task.labels.get(CLASS_LABEL) == "core" else "elastic"


def request_class(
    kind: str, request: Resources, selectors: Sequence[LabelSelector] = ()
) -> EquivClassId:
    """The request class of waiting components of class `kind` with this request (and these
    label selectors)."""
    name = f"{REQUEST_CLASS_PREFIX}{kind}|cpu={request.cpu_millicores},ram={request.ram_bytes}"
    return f"{name}|{selector_class(selectors)}" if selectors else name


def usable(machine: MachineView, selectors: Sequence[LabelSelector]) -> bool:
    """True if a task with these selectors may run on the machine."""
    return all(selector.matches(machine.labels) for selector in selectors)


def machine_class(machine_id: MachineId) -> EquivClassId:
    return MACHINE_CLASS_PREFIX + machine_id


def _machine_of(equiv_class: EquivClassId) -> MachineId | None:
    if isinstance(equiv_class, str) and equiv_class.startswith(MACHINE_CLASS_PREFIX):
        return equiv_class.removeprefix(MACHINE_CLASS_PREFIX)
    return None


def packing_cost(request: Resources, stats: ResourceStats) -> int:
    """OMEGA x the mean of the cpu and ram fractions left free after placing one more task
    with `request`: best fit, fuller machines cheaper."""
    left = stats.free - request
    fractions = []
    for free, total in (
        (left.cpu_millicores, stats.capacity.cpu_millicores),
        (left.ram_bytes, stats.capacity.ram_bytes),
    ):
        fractions.append(min(1.0, max(0.0, free / total)) if total > 0 else 0.0)
    return round(OMEGA * sum(fractions) / len(fractions))


def safe_batch(stats: ResourceStats, requests: Sequence[Resources]) -> int:
    """How many tasks a machine may take in one round so that any choice of that many among
    tasks with `requests` (each fitting it) fits: its free slots, and in every dimension what
    is free over the largest of those requests."""
    limit = stats.free_slots
    free = stats.free.as_tuple()
    for dimension in range(len(free)):
        largest = max((request.as_tuple()[dimension] for request in requests), default=0)
        if largest > 0:
            limit = min(limit, free[dimension] // largest)
    return max(limit, 0)


@dataclass(frozen=True, slots=True)
class _Shape:
    request: Resources
    waiting: int
    selectors: tuple[LabelSelector, ...] = ()

    def may_use(self, machine: MachineView, stats: ResourceStats) -> bool:
        """Whether one such task fits the machine and its labels satisfy the selectors."""
        return how_many_fit(self.request, stats) > 0 and usable(machine, self.selectors)


class ZoePolicy:
    """Core components first, packed where their whole request fits (see the module
    docstring)."""

    def __init__(self) -> None:
        self._shapes: dict[EquivClassId, _Shape] | None = None
        self._limits: dict[MachineId, int] = {}

    @hookimpl
    def round_started(self) -> None:
        self._shapes = None
        self._limits = {}

    def _round_shapes(self, cluster: ClusterView) -> dict[EquivClassId, _Shape]:
        if self._shapes is None:
            counts: dict[EquivClassId, _Shape] = {}
            for task in cluster.waiting_tasks.values():
                key = request_class(component_class(task), task.request, task.selectors)
                known = counts.get(key)
                counts[key] = (
                    _Shape(task.request, 1, tuple(task.selectors))
                    if known is None
                    else _Shape(known.request, known.waiting + 1, known.selectors)
                )
            self._shapes = counts
        return self._shapes

    @hookimpl
    def task_equiv_classes(self, task: TaskView) -> Sequence[EquivClassId]:
        return (request_class(component_class(task), task.request, task.selectors),)

    @hookimpl
    def task_to_equiv_class(self) -> ArcDescriptor:
        return ArcDescriptor(0)

    @hookimpl
    def task_to_unscheduled(self, task: TaskView, cluster: ClusterView) -> ArcDescriptor:
        base = CORE_WAITING_COST if component_class(task) == "core" else UNSCHEDULED_COST
        return ArcDescriptor(base + task.unscheduled_time(cluster.now) // _SECOND)

    @hookimpl
    def equiv_class_to_equiv_class_arcs(
        self, equiv_class: EquivClassId, cluster: ClusterView
    ) -> Sequence[EquivClassId] | None:
        shape = self._round_shapes(cluster).get(equiv_class)
        if shape is None:
            return None
        return [
            machine_class(machine_id)
            for machine_id, machine in cluster.machines.items()
            if shape.may_use(machine, cluster.stats(machine.ref))
        ]

    @hookimpl
    def equiv_class_to_equiv_class(
        self, source: EquivClassId, target: EquivClassId, cluster: ClusterView
    ) -> ArcDescriptor | None:
        shape = self._round_shapes(cluster).get(source)
        machine_id = _machine_of(target)
        if shape is None or machine_id is None:
            return None
        stats = cluster.stats(ResourceRef.machine(machine_id))
        return ArcDescriptor(
            packing_cost(shape.request, stats), capacity=how_many_fit(shape.request, stats)
        )

    @hookimpl
    def equiv_class_preference_arcs(
        self, equiv_class: EquivClassId, cluster: ClusterView
    ) -> Sequence[ResourceRef] | None:
        machine_id = _machine_of(equiv_class)
        if machine_id is not None:
            return (ResourceRef.machine(machine_id),) if machine_id in cluster.machines else ()
        if equiv_class in self._round_shapes(cluster):
            return ()  # a request class reaches machines only through their machine classes
        return None

    @hookimpl
    def equiv_class_to_resource(
        self, equiv_class: EquivClassId, resource: ResourceView, cluster: ClusterView
    ) -> ArcDescriptor | None:
        machine_id = _machine_of(equiv_class)
        if machine_id is None:
            return None
        limit = self._limits.get(machine_id)
        if limit is None:
            stats = resource.stats
            machine = cluster.machines[machine_id]
            fitting = [
                shape.request
                for shape in self._round_shapes(cluster).values()
                if shape.may_use(machine, stats)
            ]
            limit = self._limits[machine_id] = safe_batch(stats, fitting)
        return ArcDescriptor(0, capacity=limit)
