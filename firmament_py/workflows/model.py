"""The problem SCHEDULING WITH NETWORK TASKS (Giroire et al., INFOCOM'19, section III):
workflows (DAGs of CPU tasks whose arcs carry data) and platforms (CPU machines with speeds and
network machines with capacities), checked when they are made.

A `Workflow` is a forest of DAGs, one per job: each task has a size (its work; it runs for
size / speed on a CPU machine) and each arc (i, j) the amount of data i hands to j. When i and
j run on different CPU machines, a network task T_{i->j} of duration data / capacity must run on
network machines after i ends and before j starts; on the same machine nothing is sent.

A `Platform` has m CPU machines and its network machines, in one of two shapes:

* `links` (section III.B, a data center with full bisection bandwidth such as a fat tree): each
  server p has an upload link up(p) and a download link down(p); a transfer from p to q runs on
  up(p) and down(q) during the same interval, at the smaller of the two capacities.
* `shared` (the bus or radio model of section III.B, and the single network machine of section
  IV's instance): k channels, and a transfer runs on any one of them.

Bad input is refused with `WorkflowError` (a ValueError) naming the offending task, arc or
machine: a cycle, an arc to an unknown task, a negative or non-finite size, data amount, speed
or capacity, a duplicate, and (`check_instance`) a platform with several CPU machines but no
network machine while the workflow has data to send.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import networkx as nx

__all__ = [
    "NetworkKind",
    "Platform",
    "Workflow",
    "WorkflowError",
    "check_instance",
]


class WorkflowError(ValueError):
    """A workflow, a platform or a pair of them that cannot be scheduled, with the reason."""


def _amount(what: str, value: object, *, positive: bool = False) -> float:
    """`value` as a finite float >= 0 (> 0 if `positive`), or WorkflowError naming `what`."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise WorkflowError(f"{what} must be a number, not {value!r}")
    number = float(value)
    if not math.isfinite(number):
        raise WorkflowError(f"{what} must be finite, not {value!r}")
    if number < 0:
        raise WorkflowError(f"{what} {value!r} is negative")
    if positive and number == 0:
        raise WorkflowError(f"{what} must be positive, not 0")
    return number


def _task_name(value: object, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise WorkflowError(f"{where}: a task id must be a non-empty string, not {value!r}")
    return value


@dataclass(frozen=True, eq=False)
class Workflow:
    """A checked forest of task DAGs. Build one with `Workflow.build` or `Workflow.from_graph`.

    Tasks keep the order they were given in (`tasks`); algorithms work on their indices.
    `graph` is a networkx DiGraph with node attributes `size` and `job` and arc attribute
    `data`; treat it as read-only."""

    graph: Any
    tasks: tuple[str, ...]

    @classmethod
    def build(
        cls,
        sizes: Mapping[str, float] | Iterable[tuple[str, float]],
        edges: Iterable[tuple[str, str, float]] = (),
        jobs: Mapping[str, str] | None = None,
    ) -> Workflow:
        """A workflow of tasks (`sizes`: id -> size, in order) and arcs (source, target, data).
        `jobs` maps task ids to job names; by default each weakly connected component is a job
        named after its first task. WorkflowError if anything is wrong."""
        items = list(sizes.items()) if isinstance(sizes, Mapping) else list(sizes)
        graph = nx.DiGraph()
        for position, item in enumerate(items):
            if not isinstance(item, tuple) or len(item) != 2:
                raise WorkflowError(f"task #{position}: expected (id, size), got {item!r}")
            name = _task_name(item[0], f"task #{position}")
            if name in graph:
                raise WorkflowError(f"task {name!r} is defined twice")
            graph.add_node(name, size=_amount(f"task {name!r}: size", item[1]))
        for position, edge in enumerate(edges):
            if not isinstance(edge, tuple) or len(edge) != 3:
                raise WorkflowError(
                    f"arc #{position}: expected (source, target, data), got {edge!r}"
                )
            source = _task_name(edge[0], f"arc #{position}")
            target = _task_name(edge[1], f"arc #{position}")
            for end in (source, target):
                if end not in graph:
                    raise WorkflowError(
                        f"arc #{position} ({source} -> {target}): unknown task {end!r}"
                    )
            if source == target:
                raise WorkflowError(f"arc #{position}: task {source!r} depends on itself (a cycle)")
            if graph.has_edge(source, target):
                raise WorkflowError(f"arc {source} -> {target} is given twice")
            data = _amount(f"arc {source} -> {target}: data", edge[2])
            graph.add_edge(source, target, data=data)
        return cls._checked(graph, [name for name, _ in items], jobs)

    @classmethod
    def from_graph(
        cls,
        graph: Any,
        *,
        size: str = "size",
        data: str = "data",
        job: str = "job",
    ) -> Workflow:
        """A workflow from a networkx DiGraph whose nodes (task ids, strings) carry `size` and
        optionally `job`, and whose arcs carry `data` (0 if absent)."""
        if not isinstance(graph, nx.DiGraph) or graph.is_multigraph():
            raise WorkflowError(f"expected a networkx DiGraph, not {type(graph).__name__}")
        sizes = []
        jobs: dict[str, str] = {}
        for node, attributes in graph.nodes(data=True):
            if size not in attributes:
                raise WorkflowError(f"task {node!r} has no {size!r} attribute")
            sizes.append((node, attributes[size]))
            if job in attributes:
                jobs[node] = attributes[job]
        edges = [(u, v, attributes.get(data, 0.0)) for u, v, attributes in graph.edges(data=True)]
        return cls.build(sizes, edges, jobs if jobs else None)

    @classmethod
    def _checked(cls, graph: Any, order: Sequence[str], jobs: Mapping[str, str] | None) -> Workflow:
        if not nx.is_directed_acyclic_graph(graph):
            cycle = nx.find_cycle(graph)
            path = " -> ".join([str(u) for u, _ in cycle] + [str(cycle[0][0])])
            raise WorkflowError(f"the workflow has a cycle: {path}")
        if jobs is None:
            position = {name: index for index, name in enumerate(order)}
            for component in nx.weakly_connected_components(graph):
                first = min(component, key=position.__getitem__)
                for name in component:
                    graph.nodes[name]["job"] = first
        else:
            for name in order:
                if name not in jobs:
                    raise WorkflowError(f"task {name!r} has no job")
                job = jobs[name]
                if not isinstance(job, str) or not job:
                    raise WorkflowError(f"task {name!r}: a job name must be a non-empty string")
                graph.nodes[name]["job"] = job
            unknown = sorted(set(jobs) - set(order))
            if unknown:
                raise WorkflowError(f"a job is given for unknown task {unknown[0]!r}")
            for u, v in graph.edges:
                if jobs[u] != jobs[v]:
                    raise WorkflowError(
                        f"arc {u} -> {v} joins two jobs ({jobs[u]!r} and {jobs[v]!r})"
                    )
        return cls(graph, tuple(order))

    # ------------------------------------------------------------------ indexed views

    @property
    def n(self) -> int:
        return len(self.tasks)

    @cached_property
    def index(self) -> dict[str, int]:
        """Task id -> index in `tasks`."""
        return {name: i for i, name in enumerate(self.tasks)}

    @cached_property
    def sizes(self) -> tuple[float, ...]:
        return tuple(float(self.graph.nodes[name]["size"]) for name in self.tasks)

    @cached_property
    def parents(self) -> tuple[tuple[tuple[int, float], ...], ...]:
        """For each task, its (parent index, data) pairs, parents in task order."""
        index = self.index
        return tuple(
            tuple(
                sorted(
                    (index[u], float(self.graph.edges[u, name]["data"]))
                    for u in self.graph.predecessors(name)
                )
            )
            for name in self.tasks
        )

    @cached_property
    def children(self) -> tuple[tuple[tuple[int, float], ...], ...]:
        """For each task, its (child index, data) pairs, children in task order."""
        index = self.index
        return tuple(
            tuple(
                sorted(
                    (index[v], float(self.graph.edges[name, v]["data"]))
                    for v in self.graph.successors(name)
                )
            )
            for name in self.tasks
        )

    @cached_property
    def edges(self) -> tuple[tuple[int, int, float], ...]:
        """Every arc as (source index, target index, data), by target then source."""
        return tuple((u, v, data) for v, parents in enumerate(self.parents) for u, data in parents)

    @cached_property
    def topological(self) -> tuple[int, ...]:
        """A topological order: the lexicographically smallest by task order (so a workflow
        given in a feasible single-machine order keeps it)."""
        index = self.index
        return tuple(
            index[name]
            for name in nx.lexicographical_topological_sort(self.graph, key=index.__getitem__)
        )

    @cached_property
    def jobs(self) -> tuple[str, ...]:
        """The job names, in order of their first task."""
        return tuple(dict.fromkeys(self.graph.nodes[name]["job"] for name in self.tasks))

    @cached_property
    def job_of(self) -> tuple[int, ...]:
        """For each task, the index of its job in `jobs`."""
        position = {job: i for i, job in enumerate(self.jobs)}
        return tuple(position[self.graph.nodes[name]["job"]] for name in self.tasks)

    @cached_property
    def layers(self) -> tuple[int, ...]:
        """For each task, its layer: 0 for a task without parents, else 1 + its parents' max."""
        layer = [0] * self.n
        for v in self.topological:
            for u, _ in self.parents[v]:
                layer[v] = max(layer[v], layer[u] + 1)
        return tuple(layer)

    @property
    def total_work(self) -> float:
        return sum(self.sizes)

    @property
    def total_data(self) -> float:
        return sum(data for _, _, data in self.edges)

    def reversed(self) -> Workflow:
        """The reverse workflow (section V.A, feature 2): every arc turned around, same tasks,
        jobs and data."""
        graph = self.graph.reverse(copy=True)
        return Workflow(graph, self.tasks)

    def describe(self) -> str:
        return (
            f"{self.n} tasks, {len(self.edges)} arcs, {len(self.jobs)} job(s), "
            f"work {self.total_work:g}, data {self.total_data:g}"
        )


class NetworkKind(enum.StrEnum):
    """The shape of the network machines (see the module docstring)."""

    LINKS = "links"
    SHARED = "shared"


@dataclass(frozen=True)
class Platform:
    """m CPU machines (`speeds`) and the network machines: with `links`, an upload and a
    download link per CPU machine (`upload[p]`, `download[p]` capacities); with `shared`, the
    `channels` capacities. Network machines are numbered: up(p) = 2p and down(p) = 2p + 1 for
    links, channel c = c for shared."""

    speeds: tuple[float, ...]
    network: NetworkKind = NetworkKind.LINKS
    upload: tuple[float, ...] = ()
    download: tuple[float, ...] = ()
    channels: tuple[float, ...] = ()
    _names: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        speeds = tuple(
            _amount(f"machine {p}: speed", s, positive=True) for p, s in enumerate(self.speeds)
        )
        if not speeds:
            raise WorkflowError("a platform needs at least one CPU machine")
        object.__setattr__(self, "speeds", speeds)
        try:
            network = NetworkKind(self.network)
        except ValueError:
            known = ", ".join(kind.value for kind in NetworkKind)
            raise WorkflowError(f"unknown network {self.network!r}; known: {known}") from None
        object.__setattr__(self, "network", network)
        m = len(speeds)
        if network is NetworkKind.LINKS:
            for name in ("upload", "download"):
                values = getattr(self, name) or (1.0,) * m
                if len(values) != m:
                    raise WorkflowError(f"{name}: {len(values)} capacities for {m} machines")
                checked = tuple(
                    _amount(f"machine {p}: {name} capacity", c, positive=True)
                    for p, c in enumerate(values)
                )
                object.__setattr__(self, name, checked)
            if self.channels:
                raise WorkflowError("a links network has no shared channels")
            names = tuple(f"{d}{p}" for p in range(m) for d in ("up", "down"))
        else:
            if self.upload or self.download:
                raise WorkflowError("a shared network has channels, not upload/download links")
            object.__setattr__(
                self,
                "channels",
                tuple(
                    _amount(f"channel {c}: capacity", x, positive=True)
                    for c, x in enumerate(self.channels)
                ),
            )
            names = tuple(f"net{c}" for c in range(len(self.channels)))
        object.__setattr__(self, "_names", names)

    @classmethod
    def links(cls, machines: int, *, speed: float = 1.0, capacity: float = 1.0) -> Platform:
        """`machines` identical servers, each with an upload and a download link of `capacity`
        (the data center model of section III.B)."""
        if machines < 1:
            raise WorkflowError(f"a platform needs at least one CPU machine, not {machines}")
        return cls(
            (speed,) * machines,
            NetworkKind.LINKS,
            upload=(capacity,) * machines,
            download=(capacity,) * machines,
        )

    @classmethod
    def shared(
        cls, machines: int, *, channels: int = 1, speed: float = 1.0, capacity: float = 1.0
    ) -> Platform:
        """`machines` identical servers sharing `channels` network machines of `capacity` (a bus;
        section IV's instance has one)."""
        if machines < 1:
            raise WorkflowError(f"a platform needs at least one CPU machine, not {machines}")
        if channels < 0:
            raise WorkflowError(f"the number of channels {channels} is negative")
        return cls((speed,) * machines, NetworkKind.SHARED, channels=(capacity,) * channels)

    @property
    def m(self) -> int:
        return len(self.speeds)

    @property
    def network_machines(self) -> tuple[str, ...]:
        """The network machines' names, by number."""
        return self._names

    def routes(self, source: int, target: int) -> list[tuple[tuple[int, ...], float]]:
        """The ways a transfer from CPU machine `source` to `target` may run: for each, the
        network machines it occupies together and the rate it runs at."""
        if self.network is NetworkKind.LINKS:
            rate = min(self.upload[source], self.download[target])
            return [((2 * source, 2 * target + 1), rate)]
        return [((c,), rate) for c, rate in enumerate(self.channels)]

    @cached_property
    def reference_rate(self) -> float:
        """The rate a transfer typically runs at (the smallest link or channel capacity): what
        algorithms use to weigh data against work before placing anything."""
        if self.network is NetworkKind.LINKS:
            return min(min(self.upload), min(self.download))
        return min(self.channels) if self.channels else math.inf

    def swapped(self) -> Platform:
        """The platform seen by the reverse workflow: upload and download links exchanged (a
        transfer p -> q of the reverse schedule is q -> p of the real one)."""
        if self.network is NetworkKind.SHARED:
            return self
        return Platform(self.speeds, self.network, upload=self.download, download=self.upload)

    def describe(self) -> str:
        speeds = set(self.speeds)
        cpu = f"{self.m} machine(s)" + (
            f" of speed {self.speeds[0]:g}"
            if len(speeds) == 1
            else " of speeds " + ", ".join(f"{s:g}" for s in self.speeds)
        )
        if self.network is NetworkKind.LINKS:
            capacities = set(self.upload) | set(self.download)
            net = "an upload and a download link each" + (
                f" of capacity {self.upload[0]:g}" if len(capacities) == 1 else ""
            )
        else:
            net = f"{len(self.channels)} shared network machine(s)"
        return f"{cpu}, {net}"

    def to_dict(self) -> dict[str, Any]:
        if self.network is NetworkKind.LINKS:
            return {
                "speeds": list(self.speeds),
                "network": self.network.value,
                "upload": list(self.upload),
                "download": list(self.download),
            }
        return {
            "speeds": list(self.speeds),
            "network": self.network.value,
            "channels": list(self.channels),
        }


def check_instance(workflow: Workflow, platform: Platform) -> None:
    """WorkflowError if `platform` cannot run `workflow`: several CPU machines but no network
    machine while some arc carries data (a schedule using more than one machine could never
    send it). Every algorithm checks this first."""
    if platform.m > 1 and not platform.network_machines:
        for u, v, data in workflow.edges:
            if data > 0:
                raise WorkflowError(
                    f"the platform has {platform.m} CPU machines but no network machine, and "
                    f"arc {workflow.tasks[u]} -> {workflow.tasks[v]} carries data {data:g}: "
                    "give it a network machine (or one CPU machine)"
                )
