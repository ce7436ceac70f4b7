"""The values a policy receives and returns: arc descriptors, resource references, statistics,
and read-only views of the cluster model.

A policy never sees `ClusterState` or the flow graph. It receives views: thin wrappers that read
the model's entities at the moment they are asked (so they are never stale) and offer no way to
change them. Everything a policy returns is an immutable value checked when it is made, so a
descriptor that exists is one the flow graph accepts.
"""

from __future__ import annotations

import enum
import operator
from collections.abc import Callable, Iterator, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Generic, SupportsIndex, TypeVar, cast

from firmament_py.flow.limits import MAX_CAPACITY, MAX_COST
from firmament_py.model.cluster import ClusterState
from firmament_py.model.entities import Job, Machine, Pod, Rack, Task
from firmament_py.model.errors import ClusterError
from firmament_py.model.ids import (
    EquivClassId,
    JobId,
    MachineId,
    PodId,
    RackId,
    TaskId,
    Time,
    check_int64,
)
from firmament_py.model.labels import Labels, LabelSelector
from firmament_py.model.resources import NO_RESOURCES, Resources
from firmament_py.model.states import TaskState

__all__ = [
    "MAX_CAPACITY",
    "MAX_COST",
    "ArcDescriptor",
    "ClusterView",
    "EquivClassId",
    "JobView",
    "MachineView",
    "ResourceKind",
    "ResourceRef",
    "ResourceStats",
    "ResourceView",
    "TaskView",
    "arc_descriptor_problem",
    "arc_values_problem",
]


# ---------------------------------------------------------------------- arc descriptors


def _integer(name: str, value: object) -> int:
    """`value` as an int if it is an integer (numpy integers included, bools not)."""
    if type(value) is int:
        return value
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise TypeError(f"{name} must be an integer, not {type(value).__name__} ({value!r})")
    return operator.index(cast(SupportsIndex, value))


def arc_values_problem(cost: int, capacity: int, min_flow: int) -> str | None:
    """Why (cost, capacity, min_flow) cannot describe an arc of the flow graph, or None.

    The rules are the flow graph's: |cost| <= MAX_COST and 0 <= min_flow <= capacity <=
    MAX_CAPACITY.
    """
    if not -MAX_COST <= cost <= MAX_COST:
        return f"cost {cost} exceeds the limit of {MAX_COST} in magnitude"
    if capacity < 0:
        return f"capacity {capacity} is negative"
    if capacity > MAX_CAPACITY:
        return f"capacity {capacity} exceeds the limit of {MAX_CAPACITY}"
    if min_flow < 0:
        return f"min_flow {min_flow} is negative"
    if min_flow > capacity:
        return f"min_flow {min_flow} exceeds capacity {capacity}"
    return None


@dataclass(frozen=True, slots=True)
class ArcDescriptor:
    """What a policy says about one arc of the flow network (Firmament's ArcDescriptor).

    `cost` is what each unit of flow pays on the arc: the policy's preference, lower is better,
    negative allowed. `capacity` is the most units the arc may carry and `min_flow` the fewest
    it must carry. A task is one unit of flow, so an arc out of a task needs capacity 1; arcs
    out of aggregators carry many tasks. Integer fields accept numpy integers and store ints.

    Checked when made (TypeError for a non-integer, ValueError for a value out of range), so a
    policy's mistake surfaces at the line that made the descriptor.
    """

    cost: int
    capacity: int = 1
    min_flow: int = 0

    def __post_init__(self) -> None:
        cost, capacity, min_flow = self.cost, self.capacity, self.min_flow
        if not (type(cost) is int and type(capacity) is int and type(min_flow) is int):
            cost = _integer("cost", cost)
            capacity = _integer("capacity", capacity)
            min_flow = _integer("min_flow", min_flow)
            object.__setattr__(self, "cost", cost)
            object.__setattr__(self, "capacity", capacity)
            object.__setattr__(self, "min_flow", min_flow)
        problem = arc_values_problem(cost, capacity, min_flow)
        if problem is not None:
            raise ValueError(f"invalid ArcDescriptor: {problem}")


def arc_descriptor_problem(value: object) -> str | None:
    """Why `value` is not a valid `ArcDescriptor`, or None if it is one.

    The policy manager applies this to every descriptor a hook returns. Construction already
    checks the values; this check also catches objects made around the constructor.
    """
    if not isinstance(value, ArcDescriptor):
        return f"expected an ArcDescriptor, got {type(value).__name__}"
    # Unrolled (every hook answer passes here, 10^4 times a round).
    cost, capacity, min_flow = value.cost, value.capacity, value.min_flow
    if type(cost) is not int:
        return f"cost {cost!r} is not an int"
    if type(capacity) is not int:
        return f"capacity {capacity!r} is not an int"
    if type(min_flow) is not int:
        return f"min_flow {min_flow!r} is not an int"
    return arc_values_problem(cost, capacity, min_flow)


# ---------------------------------------------------------------------- resources


class ResourceKind(enum.Enum):
    """The levels of the resource topology, from the top down. Machines are the leaves."""

    POD = "pod"
    RACK = "rack"
    MACHINE = "machine"


@dataclass(frozen=True, slots=True, repr=False)
class ResourceRef:
    """Names one node of the resource topology: what preference hooks return and what
    statistics are keyed by. Hashable and comparable."""

    kind: ResourceKind
    id: str

    def __post_init__(self) -> None:
        if not isinstance(self.kind, ResourceKind):
            raise TypeError(f"a resource kind must be a ResourceKind, got {self.kind!r}")
        if not isinstance(self.id, str) or not self.id:
            raise ValueError(f"a resource id must be a non-empty str, got {self.id!r}")

    @classmethod
    def machine(cls, machine_id: MachineId) -> ResourceRef:
        return cls(ResourceKind.MACHINE, machine_id)

    @classmethod
    def rack(cls, rack_id: RackId) -> ResourceRef:
        return cls(ResourceKind.RACK, rack_id)

    @classmethod
    def pod(cls, pod_id: PodId) -> ResourceRef:
        return cls(ResourceKind.POD, pod_id)

    def __hash__(self) -> int:
        # The generated hash would hash the ResourceKind member, which Enum does in Python
        # (hash of its name); the member's value, a str, hashes in C with its hash cached. Refs
        # are dict keys everywhere a round touches a resource. Equal refs still hash equally.
        return hash((self.kind._value_, self.id))

    def __repr__(self) -> str:
        return f"ResourceRef.{self.kind.value}({self.id!r})"

    def __str__(self) -> str:
        return f"{self.kind.value} {self.id!r}"


_new_object = object.__new__
_set_field = object.__setattr__


def _model_ref(kind: ResourceKind, resource_id: str) -> ResourceRef:
    """A `ResourceRef` of an id the cluster model holds, which it has already checked to be a
    non-empty str, so the constructor's checks are skipped (views make refs by the thousand)."""
    ref = _new_object(ResourceRef)
    _set_field(ref, "kind", kind)
    _set_field(ref, "id", resource_id)
    return ref


@dataclass(frozen=True, slots=True)
class ResourceStats:
    """What the statistics pass (Firmament's prepare/gather/update) knows about a resource
    and everything below it: for a machine, the machine itself; for a rack or pod, the sums
    over its machines. Arc hooks read them from `ResourceView.stats`.

    `measured_usage` sums the latest usage machines reported (a machine that reported nothing
    adds zero). Counts and resources are checked to be non-negative when made.
    """

    machines: int = 0
    slots: int = 0
    running_tasks: int = 0
    capacity: Resources = NO_RESOURCES
    reserved: Resources = NO_RESOURCES
    measured_usage: Resources = NO_RESOURCES

    def __post_init__(self) -> None:
        for name in ("machines", "slots", "running_tasks"):
            if check_int64(name, getattr(self, name)) < 0:
                raise ValueError(f"{name} must not be negative, got {getattr(self, name)}")
        for name in ("capacity", "reserved", "measured_usage"):
            value = getattr(self, name)
            if not isinstance(value, Resources):
                raise TypeError(f"{name} must be Resources, not {type(value).__name__}")
            value.require_non_negative(name)

    @classmethod
    def of_machine(cls, machine: MachineView) -> ResourceStats:
        """A machine's own statistics: one machine, its slots, running tasks, capacity,
        reservations and measured usage (zero if it reported none). The model guarantees these
        values, so they are not checked again (every round makes one per machine)."""
        return _machine_stats(cls, machine)

    @property
    def free_slots(self) -> int:
        """Slots not taken by running tasks (never below zero)."""
        return max(0, self.slots - self.running_tasks)

    @property
    def free(self) -> Resources:
        """Resources not reserved by running tasks."""
        return self.capacity - self.reserved

    def __add__(self, other: ResourceStats) -> ResourceStats:
        if not isinstance(other, ResourceStats):
            return NotImplemented
        # Sums of valid statistics are valid (non-negative; Resources checks the int64 range),
        # so the constructor's checks are skipped: the statistics pass adds thousands per round.
        # Same fields in the same order as before, unrolled: the Resources sums come first, so
        # an int64 overflow raises before anything is made.
        capacity = self.capacity + other.capacity
        reserved = self.reserved + other.reserved
        measured_usage = self.measured_usage + other.measured_usage
        result = _new_object(ResourceStats)
        _set_field(result, "machines", self.machines + other.machines)
        _set_field(result, "slots", self.slots + other.slots)
        _set_field(result, "running_tasks", self.running_tasks + other.running_tasks)
        _set_field(result, "capacity", capacity)
        _set_field(result, "reserved", reserved)
        _set_field(result, "measured_usage", measured_usage)
        return result


def _machine_stats(cls: type[ResourceStats], machine: Machine | MachineView) -> ResourceStats:
    """`ResourceStats.of_machine` of a machine or the model's machine (unchecked: the model
    guarantees the values)."""
    result = _new_object(cls)
    _set_field(result, "machines", 1)
    _set_field(result, "slots", machine.slots)
    _set_field(result, "running_tasks", len(machine.running_task_ids))
    _set_field(result, "capacity", machine.capacity)
    _set_field(result, "reserved", machine.reserved)
    _set_field(result, "measured_usage", machine.measured_usage or NO_RESOURCES)
    return result


def _stats_from_values(
    machines: int,
    slots: int,
    running_tasks: int,
    capacity: list[int],
    reserved: list[int],
    measured_usage: list[int],
) -> ResourceStats:
    """A `ResourceStats` of values already checked (columns the scheduler keeps)."""
    result = _new_object(ResourceStats)
    _set_field(result, "machines", machines)
    _set_field(result, "slots", slots)
    _set_field(result, "running_tasks", running_tasks)
    _set_field(result, "capacity", _unchecked_resources(capacity))
    _set_field(result, "reserved", _unchecked_resources(reserved))
    _set_field(result, "measured_usage", _unchecked_resources(measured_usage))
    return result


def _unchecked_resources(values: list[int]) -> Resources:
    if not any(values):
        return NO_RESOURCES
    result = _new_object(Resources)
    for name, value in zip(Resources.DIMENSIONS, values, strict=True):
        _set_field(result, name, value)
    return result


# ---------------------------------------------------------------------- entity views


class TaskView:
    """A read-only view of a task: the model's fields, read when asked."""

    __slots__ = ("_task",)

    def __init__(self, task: Task) -> None:
        self._task = task

    def __repr__(self) -> str:
        return f"TaskView({self._task.task_id})"

    @property
    def task_id(self) -> TaskId:
        return self._task.task_id

    @property
    def job_id(self) -> JobId:
        return self._task.job_id

    @property
    def state(self) -> TaskState:
        return self._task.state

    @property
    def machine_id(self) -> MachineId | None:
        """The machine the task runs on; None unless RUNNING."""
        return self._task.machine_id

    @property
    def request(self) -> Resources:
        return self._task.request

    @property
    def priority(self) -> int:
        return self._task.priority

    @property
    def labels(self) -> Labels:
        return self._task.labels

    @property
    def selectors(self) -> tuple[LabelSelector, ...]:
        """Every one must match a machine's labels for the task to be placed there."""
        return self._task.selectors

    @property
    def submit_time(self) -> Time:
        return self._task.submit_time

    @property
    def start_time(self) -> Time | None:
        """When the task last started running."""
        return self._task.start_time

    @property
    def finish_time(self) -> Time | None:
        return self._task.finish_time

    @property
    def runnable_since(self) -> Time | None:
        """When it last became RUNNABLE; None unless RUNNABLE."""
        return self._task.runnable_since

    @property
    def total_unscheduled_time(self) -> int:
        return self._task.total_unscheduled_time

    @property
    def total_run_time(self) -> int:
        return self._task.total_run_time

    @property
    def eviction_count(self) -> int:
        return self._task.eviction_count

    @property
    def measured_usage(self) -> Resources | None:
        return self._task.measured_usage

    def unscheduled_time(self, now: Time) -> int:
        """Microseconds spent waiting for a machine, up to `now`."""
        return self._task.unscheduled_time(now)

    def run_time(self, now: Time) -> int:
        """Microseconds spent running, up to `now`."""
        return self._task.run_time(now)


class JobView:
    """A read-only view of a job."""

    __slots__ = ("_job",)

    def __init__(self, job: Job) -> None:
        self._job = job

    def __repr__(self) -> str:
        return f"JobView({self._job.job_id!r})"

    @property
    def job_id(self) -> JobId:
        return self._job.job_id

    @property
    def root_task_id(self) -> TaskId:
        return self._job.root_task_id

    @property
    def priority(self) -> int:
        return self._job.priority

    @property
    def submit_time(self) -> Time:
        return self._job.submit_time

    @property
    def task_ids(self) -> AbstractSet[TaskId]:
        """The job's tasks in the cluster state, in submission order."""
        return self._job.task_ids.keys()


class MachineView:
    """A read-only view of a machine, the leaf of the resource topology."""

    __slots__ = ("_machine",)

    def __init__(self, machine: Machine) -> None:
        self._machine = machine

    def __repr__(self) -> str:
        return f"MachineView({self._machine.machine_id!r})"

    @property
    def machine_id(self) -> MachineId:
        return self._machine.machine_id

    @property
    def ref(self) -> ResourceRef:
        """The machine as a node of the resource topology."""
        return _model_ref(ResourceKind.MACHINE, self._machine.machine_id)

    @property
    def rack_id(self) -> RackId:
        return self._machine.rack_id

    @property
    def capacity(self) -> Resources:
        return self._machine.capacity

    @property
    def slots(self) -> int:
        return self._machine.slots

    @property
    def labels(self) -> Labels:
        return self._machine.labels

    @property
    def added_time(self) -> Time:
        return self._machine.added_time

    @property
    def reserved(self) -> Resources:
        """The sum of the requests of the tasks running here."""
        return self._machine.reserved

    @property
    def free(self) -> Resources:
        return self._machine.free

    @property
    def free_slots(self) -> int:
        return self._machine.free_slots

    @property
    def running_task_ids(self) -> AbstractSet[TaskId]:
        """The tasks running here, in the order they were placed."""
        return self._machine.running_task_ids.keys()

    @property
    def measured_usage(self) -> Resources | None:
        return self._machine.measured_usage


class ResourceView:
    """A read-only view of one node of the resource topology (pod, rack or machine), with the
    statistics the latest completed statistics pass gathered for it."""

    __slots__ = ("_cluster", "_ref")

    def __init__(self, ref: ResourceRef, cluster: ClusterView) -> None:
        self._ref = ref
        self._cluster = cluster

    def __repr__(self) -> str:
        return f"ResourceView({self._ref})"

    @property
    def ref(self) -> ResourceRef:
        return self._ref

    @property
    def kind(self) -> ResourceKind:
        return self._ref.kind

    @property
    def id(self) -> str:
        return self._ref.id

    @property
    def stats(self) -> ResourceStats:
        """This resource's statistics from the latest completed pass (see ClusterView.stats)."""
        return self._cluster.stats(self._ref)

    @property
    def machine(self) -> MachineView | None:
        """The machine, if this resource is one."""
        if self._ref.kind is ResourceKind.MACHINE:
            return self._cluster.machine(self._ref.id)
        return None

    @property
    def parent(self) -> ResourceRef | None:
        """The resource above this one: a machine's rack, a rack's pod; None for a pod."""
        if self._ref.kind is ResourceKind.MACHINE:
            return _model_ref(ResourceKind.RACK, self._cluster.machine(self._ref.id).rack_id)
        if self._ref.kind is ResourceKind.RACK:
            return _model_ref(ResourceKind.POD, self._cluster._rack(self._ref.id).pod_id)
        return None

    @property
    def children(self) -> tuple[ResourceRef, ...]:
        """The resources directly below this one, in the order they joined."""
        kind = self._ref.kind
        if kind is ResourceKind.POD:
            pod = self._cluster._pod(self._ref.id)
            return tuple([_model_ref(ResourceKind.RACK, rack_id) for rack_id in pod.rack_ids])
        if kind is ResourceKind.RACK:
            rack = self._cluster._rack(self._ref.id)
            return tuple([_model_ref(ResourceKind.MACHINE, m) for m in rack.machine_ids])
        return ()


# ---------------------------------------------------------------------- the cluster view

K = TypeVar("K")
E = TypeVar("E")
V = TypeVar("V")


class _ViewMapping(Mapping[K, V], Generic[K, E, V]):
    """A live, read-only mapping that wraps each of the model's entities in its view."""

    __slots__ = ("_entities", "_view")

    def __init__(self, entities: Mapping[K, E], view: Callable[[E], V]) -> None:
        self._entities = entities
        self._view = view

    def __getitem__(self, key: K) -> V:
        return self._view(self._entities[key])

    def __iter__(self) -> Iterator[K]:
        return iter(self._entities)

    def __len__(self) -> int:
        return len(self._entities)

    def __contains__(self, key: object) -> bool:
        return key in self._entities


class _WaitingTasks(Mapping[TaskId, Task]):
    """The cluster's RUNNABLE tasks by id, through its index of them."""

    __slots__ = ("_state",)

    def __init__(self, state: ClusterState) -> None:
        self._state = state

    def __getitem__(self, key: TaskId) -> Task:
        if key not in self._state.waiting_task_ids:
            raise KeyError(key)
        return self._state.tasks[key]

    def __iter__(self) -> Iterator[TaskId]:
        return iter(self._state.waiting_task_ids)

    def __len__(self) -> int:
        return len(self._state.waiting_task_ids)

    def __contains__(self, key: object) -> bool:
        return key in self._state.waiting_task_ids


class ClusterView:
    """What a policy may know about the cluster: every task, job, machine, rack and pod (as
    read-only views), the current time, the resources' statistics, the latencies reported
    between machines, and whether the graph is built with preemption. Every hook that needs
    more than its own arguments takes this as `cluster`.

    The scheduler builds one over its `ClusterState` and the statistics it keeps; lookups of
    unknown ids raise the model's `ClusterError` (a `ValueError`), as `ClusterState` does.
    """

    __slots__ = ("_preemption_enabled", "_state", "_stats")

    def __init__(
        self,
        state: ClusterState,
        *,
        preemption_enabled: bool,
        stats: Mapping[ResourceRef, ResourceStats] | None = None,
    ) -> None:
        self._state = state
        self._preemption_enabled = preemption_enabled
        self._stats: Mapping[ResourceRef, ResourceStats] = {} if stats is None else stats

    def __repr__(self) -> str:
        return (
            f"ClusterView(now={self._state.now}, {len(self._state.tasks)} tasks, "
            f"{len(self._state.machines)} machines)"
        )

    @property
    def now(self) -> Time:
        """The cluster's current time in microseconds (the latest accepted change)."""
        return self._state.now

    @property
    def preemption_enabled(self) -> bool:
        """Whether running tasks may be preempted or migrated: the selected policy's answer to
        the `preemption_enabled` hook, which fixes the shape of the graph."""
        return self._preemption_enabled

    @property
    def tasks(self) -> Mapping[TaskId, TaskView]:
        """Tasks in any state until removed, in submission order."""
        return _ViewMapping(self._state.tasks, TaskView)

    @property
    def waiting_tasks(self) -> Mapping[TaskId, TaskView]:
        """The RUNNABLE tasks, in the order they became runnable; cheap to read every round
        (the cluster keeps this index), unlike filtering `tasks`."""
        return _ViewMapping(_WaitingTasks(self._state), TaskView)

    @property
    def jobs(self) -> Mapping[JobId, JobView]:
        return _ViewMapping(self._state.jobs, JobView)

    @property
    def machines(self) -> Mapping[MachineId, MachineView]:
        """Live machines, in the order they were added."""
        return _ViewMapping(self._state.machines, MachineView)

    @property
    def racks(self) -> Mapping[RackId, ResourceView]:
        """Racks holding at least one live machine."""
        return _ViewMapping(
            self._state.racks, lambda rack: ResourceView(ResourceRef.rack(rack.rack_id), self)
        )

    @property
    def pods(self) -> Mapping[PodId, ResourceView]:
        """Pods holding at least one rack."""
        return _ViewMapping(
            self._state.pods, lambda pod: ResourceView(ResourceRef.pod(pod.pod_id), self)
        )

    def task(self, task_id: TaskId) -> TaskView:
        return TaskView(self._state.task(task_id))

    def job(self, job_id: JobId) -> JobView:
        return JobView(self._state.job(job_id))

    def machine(self, machine_id: MachineId) -> MachineView:
        return MachineView(self._state.machine(machine_id))

    def resource(self, ref: ResourceRef) -> ResourceView:
        """The view of a live resource; ClusterError if there is none."""
        if not self.has_resource(ref):
            raise ClusterError(f"unknown {ref}")
        return ResourceView(ref, self)

    def has_resource(self, ref: ResourceRef) -> bool:
        """True if `ref` names a live machine, rack or pod."""
        if ref.kind is ResourceKind.MACHINE:
            return ref.id in self._state.machines
        if ref.kind is ResourceKind.RACK:
            return ref.id in self._state.racks
        return ref.id in self._state.pods

    def latency_us(self, machine_id: MachineId, peer_id: MachineId) -> float | None:
        """The network latency between two machines in microseconds, as the latest
        `LatencySample` events report it: the largest of the latest samples of every direction
        and path between them (the worst case over paths); None if none was reported."""
        return self._state.latency_us(machine_id, peer_id)

    def latencies_from(self, machine_id: MachineId) -> Mapping[MachineId, float]:
        """Every machine with a reported latency to or from `machine_id`, and that latency in
        microseconds (as `latency_us`), read-only."""
        return self._state.latencies_from(machine_id)

    @property
    def latency_version(self) -> int:
        """A count that grows whenever a reported latency changes: a policy that prices by
        latency can keep its costs while this stays the same."""
        return self._state.latency_version

    def stats(self, ref: ResourceRef) -> ResourceStats:
        """The statistics of `ref` from the latest completed statistics pass.

        During a pass (inside `prepare_stats`, `gather_stats`, `update_stats`) these are still
        the previous pass's. LookupError if no pass has reached the resource yet.
        """
        try:
            return self._stats[ref]
        except KeyError:
            raise LookupError(
                f"no statistics for {ref} yet: the statistics pass has not reached it"
            ) from None

    def _rack(self, rack_id: RackId) -> Rack:
        try:
            return self._state.racks[rack_id]
        except KeyError:
            raise ClusterError(f"unknown rack {rack_id!r}") from None

    def _pod(self, pod_id: PodId) -> Pod:
        try:
            return self._state.pods[pod_id]
        except KeyError:
            raise ClusterError(f"unknown pod {pod_id!r}") from None
