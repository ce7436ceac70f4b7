"""Analytic applications as Zoe schedules them: components of two classes, and an amount of work.

An application (the paper's "request", section 2.2) has an arrival time, a priority, a list of
components, each core or elastic with a cpu and ram request, and an amount of work W. Core
components are all needed for it to make progress; elastic ones only speed it up. The service
model is the paper's: with C core components and x(t) elastic ones granted, the application
works at rate C - 2 + x(t) (the two coordinators of a framework such as Spark's client and
master do no work), so it runs for W / (C - 2 + x) while x stays put; the simulator recomputes
the finishing time whenever x changes, from the work left. The number of coordinators is a
field (`coordinators`, 2 by default), and an application must have more core components than
coordinators, or it could never make progress.

`nominal_runtime` is the runtime in an empty cluster with every component granted,
W / (C - 2 + E): the "size" of the SJF policies and the denominator of the slowdown.

Bad input fails where it is made: `Application(...)` and `application_from_mapping` raise
`ApplicationError` (a ValueError) naming the application and the offending field, for a
component with a zero or negative request, an unknown class, missing or non-positive work, too
few core components. Whether an application fits the cluster at all is the scheduler's check
(`ApplicationRefused`, at submission).
"""

from __future__ import annotations

import bisect
import enum
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from firmament_py.zoe.capacity import Demand

__all__ = [
    "DEFAULT_COORDINATORS",
    "Application",
    "ApplicationError",
    "ApplicationRefused",
    "Component",
    "ComponentClass",
    "application_from_mapping",
    "applications_from_json",
]

DEFAULT_COORDINATORS = 2
"""Core components per application that coordinate and do no work (the paper's "- 2")."""


class ApplicationError(ValueError):
    """An application description is malformed; the message names the application and field."""


class ApplicationRefused(ApplicationError):
    """An application can never run on this cluster (its core components cannot fit even the
    empty cluster, or one of its components fits no machine); refused at submission."""


class ComponentClass(enum.Enum):
    """A component's class: core components are all needed to make progress, elastic ones only
    speed an application up."""

    CORE = "core"
    ELASTIC = "elastic"


@dataclass(frozen=True, slots=True)
class Component:
    """One component (a container): its class and what it reserves."""

    kind: ComponentClass
    request: Demand


@dataclass(frozen=True, eq=False)
class Application:
    """An application: arrival time (seconds), work (component-seconds), components, priority
    (higher is served first, before the sorting policy's order) and a free-form `category`
    (the workload's B-E, B-R, Int).

    Components are kept in the given order within each class: an application granted G elastic
    components runs the first G of its elastic ones.
    """

    app_id: str
    arrival: float
    work: float
    components: tuple[Component, ...]
    priority: int = 0
    coordinators: int = DEFAULT_COORDINATORS
    category: str = ""
    core: tuple[Component, ...] = field(init=False, repr=False)
    elastic: tuple[Component, ...] = field(init=False, repr=False)
    core_demand: Demand = field(init=False, repr=False)
    """What all core components reserve together."""
    full_demand: Demand = field(init=False, repr=False)
    """What every component reserves together (the rigid scheduler's request)."""
    _prefix_cpu: tuple[int, ...] = field(init=False, repr=False)
    _prefix_ram: tuple[int, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        name = f"application {self.app_id!r}"
        if not isinstance(self.app_id, str) or not self.app_id:
            raise ApplicationError(f"application id must be a non-empty str, got {self.app_id!r}")
        _require_number(name, "arrival", self.arrival, minimum=0.0, strict=False)
        _require_number(name, "work", self.work, minimum=0.0, strict=True)
        if isinstance(self.priority, bool) or not isinstance(self.priority, int):
            raise ApplicationError(f"{name}: priority must be an int, got {self.priority!r}")
        if isinstance(self.coordinators, bool) or not isinstance(self.coordinators, int):
            raise ApplicationError(
                f"{name}: coordinators must be an int, got {self.coordinators!r}"
            )
        if self.coordinators < 0:
            raise ApplicationError(
                f"{name}: coordinators must not be negative, got {self.coordinators}"
            )
        components = tuple(self.components)
        for index, component in enumerate(components):
            where = f"{name}: components[{index}]"
            if not isinstance(component, Component):
                raise ApplicationError(f"{where} is not a Component: {component!r}")
            if not isinstance(component.kind, ComponentClass):
                raise ApplicationError(
                    f"{where}.class: unknown class {component.kind!r} (expected core or elastic)"
                )
            for dimension in ("cpu_millicores", "ram_bytes"):
                value = getattr(component.request, dimension)
                if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                    raise ApplicationError(
                        f"{where}.{dimension} must be a positive int, got {value!r}"
                    )
        core = tuple(c for c in components if c.kind is ComponentClass.CORE)
        elastic = tuple(c for c in components if c.kind is ComponentClass.ELASTIC)
        if len(core) <= self.coordinators:
            raise ApplicationError(
                f"{name}: components: {len(core)} core component(s), but {self.coordinators} "
                "of them coordinate and do no work; at least one more is needed to make progress"
            )
        object.__setattr__(self, "components", components)
        object.__setattr__(self, "core", core)
        object.__setattr__(self, "elastic", elastic)
        object.__setattr__(self, "core_demand", _sum(c.request for c in core))
        cpu, ram = [0], [0]
        for component in elastic:
            cpu.append(cpu[-1] + component.request.cpu_millicores)
            ram.append(ram[-1] + component.request.ram_bytes)
        object.__setattr__(self, "_prefix_cpu", tuple(cpu))
        object.__setattr__(self, "_prefix_ram", tuple(ram))
        object.__setattr__(self, "full_demand", self.core_demand + Demand(cpu[-1], ram[-1]))

    def __repr__(self) -> str:
        return (
            f"Application({self.app_id!r}, arrival={self.arrival:g}, work={self.work:g}, "
            f"core={len(self.core)}, elastic={len(self.elastic)})"
        )

    # ------------------------------------------------------------------ sizes

    @property
    def productive_cores(self) -> int:
        """Core components that do work: all but the coordinators."""
        return len(self.core) - self.coordinators

    def rate(self, elastic_running: int) -> int:
        """Work done per second with `elastic_running` elastic components: C - 2 + x."""
        return self.productive_cores + elastic_running

    @property
    def nominal_runtime(self) -> float:
        """Seconds to finish in an empty cluster with every component: W / (C - 2 + E)."""
        return self.work / self.rate(len(self.elastic))

    def elastic_demand(self, count: int) -> Demand:
        """What the first `count` elastic components reserve together."""
        return Demand(self._prefix_cpu[count], self._prefix_ram[count])

    def elastic_fitting(self, room: Demand, *, granted: int = 0) -> int:
        """How many more elastic components, after the first `granted`, fit in `room`: the
        largest k with elastic_demand(granted + k) - elastic_demand(granted) within room."""
        cpu_limit = self._prefix_cpu[granted] + room.cpu_millicores
        ram_limit = self._prefix_ram[granted] + room.ram_bytes
        last = min(
            bisect.bisect_right(self._prefix_cpu, cpu_limit),
            bisect.bisect_right(self._prefix_ram, ram_limit),
        )
        return max(0, last - 1 - granted)

    def allocated(self, elastic_granted: int) -> Demand:
        """What the application reserves with its cores and `elastic_granted` elastic ones."""
        return self.core_demand + self.elastic_demand(elastic_granted)


def _sum(demands: Iterable[Demand]) -> Demand:
    total = Demand()
    for demand in demands:
        total = total + demand
    return total


def _require_number(
    name: str, field_name: str, value: object, *, minimum: float, strict: bool
) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ApplicationError(f"{name}: {field_name} must be a number, got {value!r}")
    number = float(value)
    if not math.isfinite(number) or number < minimum or (strict and number <= minimum):
        bound = f"{'above' if strict else 'at least'} {minimum:g}"
        raise ApplicationError(f"{name}: {field_name} must be finite and {bound}, got {value!r}")
    return number


# ---------------------------------------------------------------------- descriptions


_APPLICATION_FIELDS = frozenset(
    {"id", "arrival", "work", "priority", "coordinators", "category", "components"}
)
_COMPONENT_FIELDS = frozenset({"class", "cpu_millicores", "ram_bytes", "count"})


def application_from_mapping(data: Mapping[str, object], *, index: int = 0) -> Application:
    """An application from a plain description (as parsed from JSON)::

        {"id": "spark-1", "arrival": 0, "work": 3600, "priority": 0,
         "components": [{"class": "core", "cpu_millicores": 1000, "ram_bytes": 2147483648,
                         "count": 3},
                        {"class": "elastic", "cpu_millicores": 2000, "ram_bytes": 8589934592,
                         "count": 20}]}

    `priority` (0), `coordinators` (2), `category` ("") and a component's `count` (1) are
    optional. Raises ApplicationError naming the application (by id, or by position `index`
    if it has none) and the field: a missing field, an unknown field or class, a value of the
    wrong type, a zero or negative request or count.
    """
    if not isinstance(data, Mapping):
        raise ApplicationError(f"application [{index}] must be an object, got {data!r}")
    app_id = data.get("id")
    name = f"application {app_id!r}" if isinstance(app_id, str) and app_id else f"[{index}]"
    unknown = sorted(set(data) - _APPLICATION_FIELDS)
    if unknown:
        raise ApplicationError(f"application {name}: unknown field(s) {', '.join(unknown)}")
    for required in ("id", "arrival", "work", "components"):
        if required not in data:
            raise ApplicationError(f"application {name}: {required} is missing")
    raw_components = data["components"]
    if not isinstance(raw_components, Sequence) or isinstance(raw_components, str | bytes):
        raise ApplicationError(f"application {name}: components must be a list")
    components: list[Component] = []
    for position, raw in enumerate(raw_components):
        where = f"application {name}: components[{position}]"
        if not isinstance(raw, Mapping):
            raise ApplicationError(f"{where} must be an object, got {raw!r}")
        unknown = sorted(set(raw) - _COMPONENT_FIELDS)
        if unknown:
            raise ApplicationError(f"{where}: unknown field(s) {', '.join(unknown)}")
        for required in ("class", "cpu_millicores", "ram_bytes"):
            if required not in raw:
                raise ApplicationError(f"{where}.{required} is missing")
        try:
            kind = ComponentClass(raw["class"])
        except ValueError:
            raise ApplicationError(
                f"{where}.class: unknown class {raw['class']!r} (expected core or elastic)"
            ) from None
        values: dict[str, int] = {}
        for dimension in ("cpu_millicores", "ram_bytes", "count"):
            value = raw.get(dimension, 1)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ApplicationError(f"{where}.{dimension} must be a positive int, got {value!r}")
            values[dimension] = value
        request = Demand(values["cpu_millicores"], values["ram_bytes"])
        components += [Component(kind, request)] * values["count"]
    priority = data.get("priority", 0)
    coordinators = data.get("coordinators", DEFAULT_COORDINATORS)
    category = data.get("category", "")
    if not isinstance(category, str):
        raise ApplicationError(f"application {name}: category must be a str, got {category!r}")
    return Application(
        app_id=app_id,  # type: ignore[arg-type]  # checked by Application
        arrival=data["arrival"],  # type: ignore[arg-type]
        work=data["work"],  # type: ignore[arg-type]
        components=tuple(components),
        priority=priority,  # type: ignore[arg-type]
        coordinators=coordinators,  # type: ignore[arg-type]
        category=category,
    )


def applications_from_json(data: object) -> list[Application]:
    """Applications from a parsed JSON document: a list of descriptions (see
    `application_from_mapping`), or an object with such a list under "applications". Ids must
    be unique. Raises ApplicationError naming the first bad application and field."""
    if isinstance(data, Mapping):
        data = data.get("applications")
    if not isinstance(data, list):
        raise ApplicationError("expected a list of applications (or {'applications': [...]})")
    applications = [application_from_mapping(item, index=i) for i, item in enumerate(data)]
    seen: set[str] = set()
    for application in applications:
        if application.app_id in seen:
            raise ApplicationError(f"application {application.app_id!r}: id is a duplicate")
        seen.add(application.app_id)
    return applications
