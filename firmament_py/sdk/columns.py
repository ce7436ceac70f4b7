"""What batch hooks receive: many tasks, jobs or resources at once, as columns.

A per-item hook answers one question about one task (`task_to_unscheduled(task, cluster)`); its
batch form answers it for many (`task_to_unscheduled_batch(tasks, cluster)`), so that a round
costs a few array operations instead of a Python call per task or machine. The columns here are
what those hooks are given:

* `TaskBatch`: the tasks a question is about, row by row. Columns are numpy arrays where the
  values are numbers (ids, times, requests) and lists where they are Python objects (job ids,
  labels, selectors); each is made when first read, so a hook pays only for what it reads.
  `views` gives the per-item `TaskView`s, for work that is per task anyway.
* `JobBatch`: the jobs whose unscheduled aggregator reaches the sink, with how many tasks wait
  there.
* `Topology`: every live machine, rack and pod, one `ResourceColumns` table per level, with the
  round's statistics as columns (`StatsColumns`). Answers about resources name them by their
  row in these tables.

And the clocks that timed costs grow with (`Clock`, `elapsed`, `timed_cost`): a cost declared
as `base + per_second x time` when a task changes is worked out again every round from these,
without asking the policy (`sdk/answers.py`, `TimedArcs`).

Rows follow the cluster's order (tasks as the scheduler asks about them, machines in the order
they joined, racks and pods likewise), so answers are reproducible.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Mapping, Sequence
from functools import cached_property

import numpy as np
import numpy.typing as npt

from firmament_py.model.cluster import ClusterState
from firmament_py.model.entities import Job, Machine, Task
from firmament_py.model.ids import JobId, MachineId, Time
from firmament_py.model.labels import Labels, LabelSelector, matches
from firmament_py.model.resources import NO_RESOURCES, Resources
from firmament_py.model.states import TaskState
from firmament_py.sdk.types import (
    MAX_COST,
    ClusterView,
    JobView,
    ResourceKind,
    ResourceRef,
    ResourceStats,
    TaskView,
    _model_ref,
    _stats_from_values,
)

__all__ = [
    "DIMENSIONS",
    "Clock",
    "IntArray",
    "JobBatch",
    "ResourceColumns",
    "StatsColumns",
    "TaskBatch",
    "Topology",
    "TopologyStats",
    "columns_of_stats",
    "elapsed",
    "machine_columns",
    "machines_of",
    "sum_by_parent",
    "timed_cost",
    "timed_costs",
    "topology_of",
]

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

DIMENSIONS = Resources.DIMENSIONS
"""The columns of a resource matrix (n x 5), in this order."""

MICROSECONDS_PER_SECOND = 1_000_000
NEVER: Time = 2**62
"""A clock that does not tick started at this time: `now - NEVER` is never positive."""
_MAX_SECONDS = 2**31
"""Elapsed times are capped at this many seconds when costed: any rate of at least one unit per
second has then reached MAX_COST already, and the products below stay within int64."""


# ---------------------------------------------------------------------- clocks and timed costs


class Clock(enum.Enum):
    """What a timed cost grows with: a time in microseconds, read at each round's time."""

    WAITED = "waited"
    """Time spent waiting in total: `task.unscheduled_time(now)`. Ticks while the task waits."""
    RAN = "ran"
    """Time spent running in total: `task.run_time(now)`. Ticks while the task runs."""
    THIS_RUN = "this_run"
    """Time since the task last started: `now - task.start_time` while it runs, 0 while it
    waits (Quincy's run credit: the work that moving the task would throw away)."""
    WAITED_AND_RAN = "waited_and_ran"
    """`task.unscheduled_time(now) + task.run_time(now)`: all the time the task has spent
    in the cluster since it was submitted (the default preemption cost)."""


def clock_origin(task: Task, clock: Clock) -> tuple[int, Time]:
    """`(frozen, since)` such that the clock reads `frozen + max(0, now - since)` for as long
    as the task stays in its current state: what it has counted so far, and when it started
    ticking (`NEVER` if it does not tick in this state)."""
    waiting = task.state is TaskState.RUNNABLE and task.runnable_since is not None
    running = task.state is TaskState.RUNNING and task.start_time is not None
    if clock is Clock.WAITED:
        return task.total_unscheduled_time, task.runnable_since if waiting else NEVER  # type: ignore[return-value]
    if clock is Clock.RAN:
        return task.total_run_time, task.start_time if running else NEVER  # type: ignore[return-value]
    if clock is Clock.THIS_RUN:
        return 0, task.start_time if running else NEVER  # type: ignore[return-value]
    since = task.runnable_since if waiting else task.start_time if running else NEVER
    return task.total_unscheduled_time + task.total_run_time, since  # type: ignore[return-value]


def elapsed(frozen: IntArray, since: IntArray, now: Time) -> IntArray:
    """What clocks with these origins (`clock_origin`) read at `now`, in microseconds."""
    return frozen + np.maximum(now - since, 0)


def timed_cost(base: int, per_second: int, microseconds: int) -> int:
    """`base + per_second x microseconds / 1,000,000`, the fraction dropped (towards zero),
    within +-MAX_COST: what a timed cost is once its clock reads `microseconds`."""
    seconds, rest = divmod(max(microseconds, 0), MICROSECONDS_PER_SECOND)
    rate = abs(per_second)
    grown = rate * min(seconds, _MAX_SECONDS) + rate * rest // MICROSECONDS_PER_SECOND
    cost = base + grown if per_second >= 0 else base - grown
    return max(-MAX_COST, min(cost, MAX_COST))


def timed_costs(base: IntArray, per_second: IntArray, microseconds: IntArray) -> IntArray:
    """`timed_cost` of every row, as arrays (values within the limits `TimedArcs` checks)."""
    seconds, rest = np.divmod(np.maximum(microseconds, 0), MICROSECONDS_PER_SECOND)
    rate = np.abs(per_second)
    grown = rate * np.minimum(seconds, _MAX_SECONDS) + rate * rest // MICROSECONDS_PER_SECOND
    cost: IntArray = np.clip(
        np.where(per_second >= 0, base + grown, base - grown), -MAX_COST, MAX_COST
    )
    return cost


# ---------------------------------------------------------------------- tasks and jobs


class TaskBatch(Sequence[TaskView]):
    """Many tasks, row by row: what a task batch hook is asked about.

    Also a sequence of `TaskView`s (`batch[i]`, `for task in batch`), for work that is per task.
    The columns are read from the tasks when first asked for, as they are at the time of the
    question; a hook must not keep the batch beyond the call.
    """

    def __init__(self, tasks: Sequence[Task]) -> None:
        self._tasks = tasks

    def __repr__(self) -> str:
        return f"TaskBatch({len(self._tasks)} tasks)"

    def __len__(self) -> int:
        return len(self._tasks)

    def __getitem__(self, row: int) -> TaskView:  # type: ignore[override]
        return TaskView(self._tasks[row])

    def __iter__(self) -> Iterator[TaskView]:
        return map(TaskView, self._tasks)

    @cached_property
    def views(self) -> tuple[TaskView, ...]:
        """Each row's `TaskView`."""
        return tuple(map(TaskView, self._tasks))

    @cached_property
    def task_ids(self) -> IntArray:
        return np.fromiter((t.task_id for t in self._tasks), np.int64, len(self._tasks))

    @cached_property
    def job_ids(self) -> list[JobId]:
        return [t.job_id for t in self._tasks]

    @cached_property
    def running(self) -> BoolArray:
        """True for the rows whose task runs (its machine in `machine_ids`)."""
        running = TaskState.RUNNING
        return np.fromiter((t.state is running for t in self._tasks), np.bool_, len(self._tasks))

    @cached_property
    def machine_ids(self) -> list[MachineId | None]:
        """The machine each task runs on; None for those that wait."""
        return [t.machine_id for t in self._tasks]

    @cached_property
    def priorities(self) -> IntArray:
        return np.fromiter((t.priority for t in self._tasks), np.int64, len(self._tasks))

    @cached_property
    def submit_times(self) -> IntArray:
        return np.fromiter((t.submit_time for t in self._tasks), np.int64, len(self._tasks))

    @cached_property
    def requests(self) -> IntArray:
        """One row per task, one column per resource dimension (`DIMENSIONS`)."""
        return _resource_matrix([t.request for t in self._tasks])

    @cached_property
    def labels(self) -> list[Labels]:
        return [t.labels for t in self._tasks]

    @cached_property
    def selectors(self) -> list[tuple[LabelSelector, ...]]:
        return [t.selectors for t in self._tasks]

    @cached_property
    def has_selectors(self) -> BoolArray:
        return np.fromiter((bool(t.selectors) for t in self._tasks), np.bool_, len(self._tasks))

    def elapsed(self, clock: Clock, now: Time) -> IntArray:
        """What `clock` reads at `now` for every row, in microseconds."""
        frozen, since = self.clock_origins(clock)
        return elapsed(frozen, since, now)

    def clock_origins(self, clock: Clock) -> tuple[IntArray, IntArray]:
        """`(frozen, since)` of `clock` for every row (`clock_origin` of each task)."""
        cached = self._origins.get(clock)
        if cached is None:
            tasks, count = self._tasks, len(self._tasks)
            runnable, running = TaskState.RUNNABLE, TaskState.RUNNING
            waiting_since = np.fromiter(
                (
                    NEVER
                    if t.state is not runnable or t.runnable_since is None
                    else t.runnable_since
                    for t in tasks
                ),
                np.int64,
                count,
            )
            running_since = np.fromiter(
                (
                    NEVER if t.state is not running or t.start_time is None else t.start_time
                    for t in tasks
                ),
                np.int64,
                count,
            )
            waited = np.fromiter((t.total_unscheduled_time for t in tasks), np.int64, count)
            ran = np.fromiter((t.total_run_time for t in tasks), np.int64, count)
            if clock is Clock.WAITED:
                cached = (waited, waiting_since)
            elif clock is Clock.RAN:
                cached = (ran, running_since)
            elif clock is Clock.THIS_RUN:
                cached = (np.zeros(count, dtype=np.int64), running_since)
            else:
                cached = (waited + ran, np.minimum(waiting_since, running_since))
            self._origins[clock] = cached
        return cached

    @cached_property
    def _origins(self) -> dict[Clock, tuple[IntArray, IntArray]]:
        return {}


class JobBatch(Sequence[JobView]):
    """The jobs whose unscheduled aggregator U(job) is in the graph, row by row (`job_ids`),
    with `incoming_tasks`: how many of each job's tasks have an arc into it. Its `JobView`s
    (`batch[i]`, iteration) are made when asked for."""

    def __init__(
        self, job_ids: Sequence[JobId], incoming_tasks: IntArray, jobs: Mapping[JobId, Job]
    ) -> None:
        self.job_ids = job_ids
        self.incoming_tasks = incoming_tasks
        self._jobs = jobs

    def __repr__(self) -> str:
        return f"JobBatch({len(self.job_ids)} jobs)"

    def __len__(self) -> int:
        return len(self.job_ids)

    def __getitem__(self, row: int) -> JobView:  # type: ignore[override]
        return JobView(self._jobs[self.job_ids[row]])

    def __iter__(self) -> Iterator[JobView]:
        jobs = self._jobs
        return (JobView(jobs[job_id]) for job_id in self.job_ids)


# ---------------------------------------------------------------------- resources


def _resource_matrix(vectors: Sequence[Resources]) -> IntArray:
    matrix = np.zeros((len(vectors), len(DIMENSIONS)), dtype=np.int64)
    if vectors:
        matrix[:] = [vector.as_tuple() for vector in vectors]
    return matrix


class StatsColumns:
    """A level's statistics as columns: what `ResourceStats` holds for one resource, for every
    row at once. `capacity`, `reserved` and `measured_usage` are n x 5 (`DIMENSIONS`)."""

    __slots__ = ("capacity", "machines", "measured_usage", "reserved", "running_tasks", "slots")

    def __init__(
        self,
        *,
        machines: IntArray,
        slots: IntArray,
        running_tasks: IntArray,
        capacity: IntArray,
        reserved: IntArray,
        measured_usage: IntArray,
    ) -> None:
        self.machines = machines
        self.slots = slots
        self.running_tasks = running_tasks
        self.capacity = capacity
        self.reserved = reserved
        self.measured_usage = measured_usage

    def __len__(self) -> int:
        return len(self.slots)

    @property
    def free_slots(self) -> IntArray:
        """Slots not taken by running tasks (never below zero)."""
        free: IntArray = np.maximum(self.slots - self.running_tasks, 0)
        return free

    @property
    def free(self) -> IntArray:
        """Resources not reserved by running tasks (n x 5)."""
        return self.capacity - self.reserved

    def schedulable_slots(self, *, preemption_enabled: bool) -> IntArray:
        """`schedulable_slots` of every row: free slots, or all slots with preemption."""
        return self.slots.copy() if preemption_enabled else self.free_slots

    def same_as(self, other: StatsColumns) -> BoolArray:
        """Rows whose every statistic equals the same row of `other` (of equal length)."""
        same: BoolArray = (self.slots == other.slots) & (self.running_tasks == other.running_tasks)
        same &= self.machines == other.machines
        for mine, theirs in (
            (self.capacity, other.capacity),
            (self.reserved, other.reserved),
            (self.measured_usage, other.measured_usage),
        ):
            same &= np.asarray((mine == theirs).all(axis=1), dtype=np.bool_)
        return same


class ResourceColumns:
    """One level of the resource topology (machines, racks or pods) as a table: row i is
    `ids[i]`, in the order they joined, with the round's statistics as columns.

    `stats` are the round's statistics (what `ResourceView.stats` serves), `model` what the
    cluster model itself holds: a machine's own slots, running tasks and resources, and for a
    rack or pod their sums (they differ only when a policy adjusts statistics).

    `parents[i]` is the row of the resource above it in the next table up (a machine's rack, a
    rack's pod; -1 for pods); `children(i)` the rows below it. Machines also carry their
    `labels`, and `matching(selectors)` which of them satisfy a set of selectors.
    """

    def __init__(
        self,
        kind: ResourceKind,
        ids: Sequence[str],
        parents: IntArray,
        model: StatsColumns,
        labels: Sequence[Labels] = (),
        matching_cache: dict[tuple[LabelSelector, ...], BoolArray] | None = None,
        refs: Sequence[ResourceRef] | None = None,
        row_of: Mapping[str, int] | None = None,
    ) -> None:
        self.kind = kind
        self.ids = ids
        self.parents = parents
        self.model = model
        self.stats = model
        self.labels = labels
        self._matching = {} if matching_cache is None else matching_cache
        if refs is not None:  # known already (the scheduler keeps them while nobody joins)
            self.__dict__["refs"] = refs
        if row_of is not None:
            self.__dict__["row_of"] = row_of
        # The rows of the level below, grouped by the row of this level they belong to, and
        # where each group starts (`Topology` sets them: it knows the level below).
        self._child_rows = np.zeros(0, dtype=np.int64)
        self._child_starts = np.zeros(len(ids) + 1, dtype=np.int64)

    def __repr__(self) -> str:
        return f"ResourceColumns({self.kind.value}, {len(self.ids)} rows)"

    def __len__(self) -> int:
        return len(self.ids)

    @cached_property
    def row_of(self) -> Mapping[str, int]:
        """The row of each id."""
        return {resource_id: row for row, resource_id in enumerate(self.ids)}

    @cached_property
    def refs(self) -> Sequence[ResourceRef]:
        """Each row as a `ResourceRef`."""
        return tuple(_model_ref(self.kind, resource_id) for resource_id in self.ids)

    def matching(self, selectors: Sequence[LabelSelector]) -> BoolArray:
        """Which machines' labels satisfy every one of `selectors` (all, for none); worked out
        once for as long as no machine joins, leaves or changes its labels."""
        key = tuple(selectors)
        mask = self._matching.get(key)
        if mask is None:
            if not key:
                mask = np.ones(len(self.ids), dtype=np.bool_)
            else:
                mask = np.fromiter(
                    (matches(key, labels) for labels in self.labels), np.bool_, len(self.ids)
                )
            self._matching[key] = mask
        return mask

    def children(self, row: int) -> IntArray:
        """The rows of the resources directly below row `row`, in the order they joined."""
        return self._child_rows[self._child_starts[row] : self._child_starts[row + 1]]


class Topology:
    """Every live machine, rack and pod, one `ResourceColumns` per level, for one round."""

    def __init__(
        self, machines: ResourceColumns, racks: ResourceColumns, pods: ResourceColumns
    ) -> None:
        self.machines = machines
        self.racks = racks
        self.pods = pods
        for level, below in ((racks, machines), (pods, racks)):
            level._child_rows = np.argsort(below.parents, kind="stable").astype(np.int64)
            counts = np.bincount(below.parents, minlength=len(level))
            np.cumsum(counts, out=level._child_starts[1:])

    def __repr__(self) -> str:
        return (
            f"Topology({len(self.machines)} machines, {len(self.racks)} racks, "
            f"{len(self.pods)} pods)"
        )

    def level(self, kind: ResourceKind) -> ResourceColumns:
        if kind is ResourceKind.MACHINE:
            return self.machines
        return self.racks if kind is ResourceKind.RACK else self.pods


def machine_columns(machines: Sequence[Machine]) -> StatsColumns:
    """What the model holds about `machines`, as the columns of their statistics."""
    count = len(machines)
    columns = _empty_stats(count)
    if count:
        columns.slots[:] = [machine.slots for machine in machines]
        columns.running_tasks[:] = [len(machine.running_task_ids) for machine in machines]
        columns.capacity[:] = [machine.capacity.as_tuple() for machine in machines]
        columns.reserved[:] = [machine.reserved.as_tuple() for machine in machines]
        columns.measured_usage[:] = [
            (machine.measured_usage or NO_RESOURCES).as_tuple() for machine in machines
        ]
    return columns


def _empty_stats(count: int) -> StatsColumns:
    return StatsColumns(
        machines=np.ones(count, dtype=np.int64),
        slots=np.zeros(count, dtype=np.int64),
        running_tasks=np.zeros(count, dtype=np.int64),
        capacity=np.zeros((count, len(DIMENSIONS)), dtype=np.int64),
        reserved=np.zeros((count, len(DIMENSIONS)), dtype=np.int64),
        measured_usage=np.zeros((count, len(DIMENSIONS)), dtype=np.int64),
    )


def columns_of_stats(stats: Sequence[ResourceStats]) -> StatsColumns:
    """The columns of a list of `ResourceStats`."""
    columns = _empty_stats(len(stats))
    if stats:
        columns.machines[:] = [s.machines for s in stats]
        columns.slots[:] = [s.slots for s in stats]
        columns.running_tasks[:] = [s.running_tasks for s in stats]
        columns.capacity[:] = [s.capacity.as_tuple() for s in stats]
        columns.reserved[:] = [s.reserved.as_tuple() for s in stats]
        columns.measured_usage[:] = [s.measured_usage.as_tuple() for s in stats]
    return columns


_INT64_MAX = np.iinfo(np.int64).max


def sum_by_parent(
    parents: IntArray, groups: int, stats: StatsColumns, names: Sequence[str]
) -> StatsColumns:
    """The statistics of the level above: for each of `groups` parents (every one has at least
    one member: the model drops empty racks and pods), the sum over the rows whose `parents`
    entry it is. OverflowError naming the parent (`names`) and the column if a sum leaves
    int64, as adding `ResourceStats` one by one would."""
    order = np.argsort(parents, kind="stable")
    counts = np.bincount(parents, minlength=groups)
    starts = np.zeros(groups, dtype=np.int64)
    np.cumsum(counts[:-1], out=starts[1:])
    largest = int(counts.max()) if groups else 0
    summed: dict[str, IntArray] = {}
    for name in StatsColumns.__slots__:
        column: IntArray = getattr(stats, name)
        if not groups:
            summed[name] = np.zeros((0, *column.shape[1:]), dtype=np.int64)
            continue
        if len(column) and int(np.abs(column).max()) * largest > _INT64_MAX:
            exact = np.add.reduceat(column[order].astype(object), starts, axis=0)
            over = np.flatnonzero((np.abs(exact.reshape(groups, -1)) > _INT64_MAX).any(axis=1))
            if len(over):
                raise OverflowError(
                    f"the statistics of {names[int(over[0])]} leave the int64 range in {name}"
                )
        summed[name] = np.add.reduceat(column[order], starts, axis=0)
    return StatsColumns(**summed)


def topology_of(state: ClusterState) -> Topology:
    """A cluster's topology as columns, each level's statistics the model's own (sums for
    racks and pods): what the scheduler keeps up to date round by round, made at once (for
    tests and tools; `sdk.testing.PolicyHarness` uses it)."""
    machines = list(state.machines.values())
    rack_ids, pod_ids = list(state.racks), list(state.pods)
    rack_row = {rack_id: row for row, rack_id in enumerate(rack_ids)}
    pod_row = {pod_id: row for row, pod_id in enumerate(pod_ids)}
    machine_rack = np.array([rack_row[m.rack_id] for m in machines], dtype=np.int64)
    rack_pod = np.array([pod_row[r.pod_id] for r in state.racks.values()], dtype=np.int64)
    model = machine_columns(machines)
    rack_model = sum_by_parent(machine_rack, len(rack_ids), model, rack_ids)
    pod_model = sum_by_parent(rack_pod, len(pod_ids), rack_model, pod_ids)
    return Topology(
        ResourceColumns(
            ResourceKind.MACHINE,
            [m.machine_id for m in machines],
            machine_rack,
            model,
            [m.labels for m in machines],
        ),
        ResourceColumns(ResourceKind.RACK, rack_ids, rack_pod, rack_model),
        ResourceColumns(ResourceKind.POD, pod_ids, np.full(len(pod_ids), -1, np.int64), pod_model),
    )


def machines_of(cluster: ClusterView) -> ResourceColumns:
    """The live machines as a table whose statistics are the round's (`cluster.stats`), in the
    rows the batch hooks' `topology.machines` has: so that a policy's per-item hooks can
    answer from the same array code as its batch hooks. Costs a pass over every machine."""
    views = list(cluster.machines.values())
    rack_rows: dict[str, int] = {}
    racks = np.array(
        [rack_rows.setdefault(machine.rack_id, len(rack_rows)) for machine in views],
        dtype=np.int64,
    )
    refs = [machine.ref for machine in views]
    table = ResourceColumns(
        ResourceKind.MACHINE,
        [machine.machine_id for machine in views],
        racks,
        columns_of_stats([cluster.stats(ref) for ref in refs]),
        [machine.labels for machine in views],
        refs=refs,
    )
    return table


class TopologyStats(Mapping[ResourceRef, ResourceStats]):
    """Every live resource's statistics from a `Topology`, as `ResourceStats` made when first
    asked for: what `ClusterView.stats` and `ResourceView.stats` serve to per-item hooks.
    Iterates machines, then racks, then pods."""

    def __init__(self, topology: Topology) -> None:
        self._topology = topology
        self._made: dict[ResourceRef, ResourceStats] = {}

    def __getitem__(self, ref: ResourceRef) -> ResourceStats:
        made = self._made.get(ref)
        if made is not None:
            return made
        if not isinstance(ref, ResourceRef):
            raise KeyError(ref)
        level = self._topology.level(ref.kind)
        row = level.row_of.get(ref.id)
        if row is None:
            raise KeyError(ref)
        stats = level.stats
        made = self._made[ref] = _stats_from_values(
            int(stats.machines[row]),
            int(stats.slots[row]),
            int(stats.running_tasks[row]),
            stats.capacity[row].tolist(),
            stats.reserved[row].tolist(),
            stats.measured_usage[row].tolist(),
        )
        return made

    def __iter__(self) -> Iterator[ResourceRef]:
        for level in (self._topology.machines, self._topology.racks, self._topology.pods):
            yield from level.refs

    def __len__(self) -> int:
        topology = self._topology
        return len(topology.machines) + len(topology.racks) + len(topology.pods)

    def __contains__(self, ref: object) -> bool:
        if not isinstance(ref, ResourceRef):
            return False
        return ref.id in self._topology.level(ref.kind).row_of
