"""NoMora: place a job's tasks where the network latency to its root task (server, master) gives
the application its best predicted performance, from measured latencies and a function of
performance against latency per application; optionally migrate them as latencies change.

Source: Popescu and Moore, the NoMora tech report (section 5.2, equations 6-10; section 6 for
gamma; https://arxiv.org/abs/1903.07114) and article (Table 1 of arcs and capacities). No public
implementation exists; where the papers leave a detail open this module says what it chose.

The flow network. A job's root task (its first task) is placed first, anywhere: it has an arc
to a rack drawn at random for its job (a keyed hash of the job id) at cost 0, and one to the
cluster aggregator X, which reaches every rack (capacity m x C, the rack's slots), at cost 1 in
case that rack is full. Until the root runs, the job's other tasks cannot be placed. Once it
runs on machine M_root, each other task can reach, at the cost d_m = 100 / p(latency(M_root,
m)) rounded to two significant digits (`firmament_py.nomora.performance.nomora_cost`, p from
the job's 10 µs lookup table):

* every machine m with d_m <= p_m (`machine_threshold`, 105), at cost d_m, capacity C;
* every rack r whose worst machine costs c_r = max_{m in r} d_m <= p_r (`rack_threshold`,
  110), at cost c_r, capacity m x C, and from the rack any of its machines;
* the cluster aggregator X at cost b = max_r c_r, the worst in the cluster;
* its job's unscheduled aggregator at cost a = omega x seconds waited + gamma (time counted to
  the microsecond, the fraction of a unit dropped)
  (`wait_cost_per_second` 1, `unscheduled_cost` 1001: above every placement cost, which lie in
  100..1000 since p >= 0.1).

Rack to machine arcs carry C (the machine's slots), machine to sink C, as Table 1 says.
Latencies are the worst case over paths (ECMP): the source's answer for the pair (see
`firmament_py.nomora.latency`: topology defaults, a replayed trace, or live `LatencySample`s).

How it is built on the SDK. Every cost above depends only on the job (its root's machine and
its application), so a job's non-root tasks share one equivalence class J per job: task -> J
costs 0, and J has the arcs the paper gives each task (to machines, racks, X). Class arcs are
asked every round, so costs follow the latest latencies and the root's placement without the
scheduler knowing about either; J has no arc until the root runs. An arc that cannot be cheaper
than another path to the same machines is left out, which changes no optimal solution: a
machine whose cost equals that of its rack's arc (or of X, if its rack has none), a rack whose
cost equals X's. So a Memcached job whose root's whole rack is below the threshold gets one arc
to that rack rather than 48 to its machines.

Preemption (off by default). Running tasks keep their arc to J (they may migrate) and get an arc
to the unscheduled aggregator costing a (preemption). Staying on machine m costs
d_m - beta - 1: beta is the time the task has run, one cost unit per second (counted as omega is)
(`run_credit_per_second`; `beta=BetaMode.ZERO` for the paper's beta = 0 variant), and the 1 makes
staying strictly cheaper than moving to an equal machine, which costs a multiple of 10 more.
The root keeps its arc to X; staying costs it -beta - 1. With `NomoraSettings.paper_arcs` the
root, while it waits, has only its arc to X, at cost 0, and staying costs d_m - beta. The tech
report (section 5.2) says that once the root is scheduled it has an arc to the machine it runs
on, and gives it no other; so under `paper_arcs` a running root has no arc to X (which would
cost 0 there, as much as staying with beta = 0, and let roots move between machines for
nothing, taking their jobs' prices with them): only its stay arc, at -beta, and preemption.

Where this differs from the papers, and why:

* The root's single arc to X at cost 0 (the papers) is a random rack at 0 and X at 1 here. The
  papers describe the root's placement as random; with one arc to X, which of the equal-cost
  racks the roots of a round take is the solver's choice, and ours puts them all in the same
  rack, which their tasks then overflow into other pods the next round. `paper_arcs` gives
  the papers' arc; staying's extra -1 (a tie-break: an equal machine never tempts a running
  task away) goes with it.
* U_j -> S has capacity 1 in the papers. The scheduler refuses any capacity below the number of
  the job's tasks that may wait (the flow problem would be infeasible whenever two of them have
  nowhere else to go, which is every job with three tasks or more before its root runs), so it
  gets exactly that many.
* The root is the job's first task (`JobView.root_task_id`, Firmament's rule). If it finished
  after running, its tasks are priced from the machine it last ran on; if that machine has left
  the cluster too, or the root left or finished without ever running, there is no latency to
  price them by and they may go anywhere at the application's worst cost (through X). (While a
  root waits to run again, after losing its machine, its tasks wait for it.)
* Label selectors, which the papers do not have. A task with selectors (`TaskView.selectors`,
  e.g. `gpu=true`) may only reach machines whose labels satisfy all of them (`usable`), so the
  cluster never refuses a placement of NoMora's. Such tasks get classes of their own, keyed by
  `selector_class(selectors)`: X_S (`selector_aggregator`), X for those selectors, which has
  an arc to every matching machine (capacity C, cost 0) instead of to racks; and, for a job's
  non-root tasks, J_S (`job_class(job, selectors)`), priced as J from the same d_m but over
  matching machines only: machines with d_m <= p_m; a rack only if every machine of it matches
  (c_r <= p_r); X_S at b_S, the worst d_m of a matching machine; the same arcs left out (a
  machine costing its rack's arc or b_S, a rack costing b_S). A root with selectors has X_S
  at cost 1 instead of X, and its cost-0 arc goes to a rack drawn among the racks with a
  matching machine: to the rack if all its machines match, else to its matching machines. If
  no machine matches, J_S has no arc and the task waits (nothing could take it). Without
  selectors nothing changes.

Cost of asking. The policy answers in batch: waiting and preemption costs are declared once
per task (`TimedArcs`), and the job classes' arcs come from the prices worked out once per
job and round; with preemption, the continuation costs follow the latencies, so they are asked
again every round (`this_round_only`).

Which application a job runs: the label `nomora.app` of its first task seen (one of the
functions' names: `memcached`, `strads`, `spark-glm`, `tensorflow`, or a function loaded from a
file written by `firmament-py nomora fit`), else `NomoraSettings.default_application`; a job
with neither is latency-insensitive (performance 1 everywhere). An unknown name makes the hooks
about that task raise ValueError (the scheduler reports it and leaves the task out).
"""

from __future__ import annotations

import hashlib
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt

from firmament_py.nomora.latency import LatencySource, LiveLatency, MachineIndex, TopologyLatency
from firmament_py.nomora.performance import (
    BUILTIN_FUNCTIONS,
    PerformanceFunction,
    PerformanceTable,
    load_function,
)
from firmament_py.nomora.settings import APPLICATION_LABEL, BetaMode, NomoraSettings
from firmament_py.sdk import (
    MAX_CAPACITY,
    ArcColumns,
    ArcDescriptor,
    ClassArcs,
    Clock,
    ClusterView,
    EquivClassId,
    JobId,
    LabelSelector,
    MachineId,
    MachineView,
    RackId,
    ResourceArcs,
    ResourceKind,
    ResourceRef,
    ResourceView,
    TaskArcs,
    TaskBatch,
    TaskState,
    TaskView,
    TimedArcs,
    Topology,
    TopologyArcs,
    hookimpl,
    selector_class,
    timed_cost,
)

__all__ = [
    "APPLICATION_LABEL",
    "CLUSTER_AGGREGATOR",
    "JOB_CLASS_PREFIX",
    "SELECTOR_JOB_CLASS_PREFIX",
    "BetaMode",
    "JobPrices",
    "NomoraPolicy",
    "NomoraPreemptionPolicy",
    "NomoraSettings",
    "job_class",
    "selector_aggregator",
    "usable",
]

CLUSTER_AGGREGATOR: EquivClassId = "nomora-cluster-aggregator"
"""NoMora's X: reaches every rack."""
JOB_CLASS_PREFIX = "nomora-job:"
"""Prefix of the per-job classes (see the module docstring)."""
SELECTOR_JOB_CLASS_PREFIX = "nomora-job+selectors:"
"""Prefix of the per-job classes of tasks with label selectors."""
MICROSECONDS_PER_SECOND = 1_000_000

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
Selectors = tuple[LabelSelector, ...]


def job_class(job_id: JobId, selectors: Sequence[LabelSelector] = ()) -> EquivClassId:
    """The class of job `job_id`'s non-root tasks with these label selectors (J, or J_S for
    tasks with selectors)."""
    if not selectors:
        return JOB_CLASS_PREFIX + job_id
    return f"{SELECTOR_JOB_CLASS_PREFIX}{job_id}|{selector_class(selectors)}"


def selector_aggregator(selectors: Sequence[LabelSelector]) -> EquivClassId:
    """X_S: the cluster aggregator of tasks with these label selectors, which reaches only the
    machines whose labels satisfy all of them (X itself for no selectors)."""
    if not selectors:
        return CLUSTER_AGGREGATOR
    return f"{CLUSTER_AGGREGATOR}|{selector_class(selectors)}"


def usable(machine: MachineView, selectors: Sequence[LabelSelector]) -> bool:
    """True if a task with these selectors may run on the machine."""
    return all(selector.matches(machine.labels) for selector in selectors)


@dataclass(frozen=True)
class JobPrices:
    """What one job's tasks pay, for one root machine and one set of latencies: `costs` of every
    machine of `index` (d_m), the machines and racks that get arcs and their costs, and the cost
    to X (b). For tasks with label selectors: only matching machines and racks whose machines
    all match, `aggregator` X_S and b the worst matching machine's cost; `aggregator` is None
    if no machine matches (the class then has no arc at all)."""

    index: MachineIndex
    costs: IntArray
    machine_arcs: Mapping[MachineId, int]
    rack_arcs: Mapping[RackId, int]
    cluster_cost: int
    refs: tuple[ResourceRef, ...] = field(default=())
    aggregator: EquivClassId | None = CLUSTER_AGGREGATOR

    def cost_on(self, machine_id: MachineId) -> int:
        at = self.index.position.get(machine_id)
        return self.cluster_cost if at is None else int(self.costs[at])


_INSENSITIVE = PerformanceFunction("latency-insensitive", 0.0, (1.0,))
PriceKey = tuple[str | None, MachineId, EquivClassId | None]
_FINISHED = frozenset({TaskState.COMPLETED, TaskState.FAILED})
"""A root in these states will not run again."""


class NomoraPolicy:
    """NoMora's policy (see the module docstring). Every argument is optional, so the entry
    point can make one with none: `settings` (NomoraSettings), `latency` (a latency source:
    default live samples, topology defaults where there are none), `functions` (performance
    functions by application name, added to the paper's four) and `function_files` (function
    files to load, likewise)."""

    def __init__(
        self,
        settings: NomoraSettings | None = None,
        *,
        latency: LatencySource | None = None,
        functions: Mapping[str, PerformanceFunction] | None = None,
        function_files: Sequence[str | Path] = (),
    ) -> None:
        self.settings = settings if settings is not None else NomoraSettings()
        self.latency: LatencySource = (
            latency if latency is not None else LiveLatency(TopologyLatency())
        )
        known: dict[str, PerformanceFunction] = dict(BUILTIN_FUNCTIONS)
        known.update(functions or {})
        for path in function_files:
            function = load_function(path)
            known[function.name] = function
        if (
            self.settings.default_application is not None
            and self.settings.default_application not in known
        ):
            raise ValueError(
                f"default_application {self.settings.default_application!r} is not a known "
                f"function ({', '.join(sorted(known))})"
            )
        self.functions: Mapping[str, PerformanceFunction] = known
        self._tables: dict[str, PerformanceTable] = {}
        self._index: MachineIndex | None = None
        self._index_generation = 0
        self._job_application: dict[JobId, str | None] = {}
        self._root_machine: dict[JobId, MachineId] = {}
        # The classes of tasks with label selectors: J_S -> (job, selectors) and X_S ->
        # selectors, as their tasks name them; and which live machines match, for this round.
        self._selector_jobs: dict[EquivClassId, tuple[JobId, Selectors]] = {}
        self._aggregators: dict[EquivClassId, Selectors] = {}
        self._masks: dict[EquivClassId, BoolArray] = {}
        # Prices by (application, root machine, X_S or None) with the source version they were
        # made for, kept for one round after their last use; and by (job, X_S or None), for the
        # current round.
        self._prices: dict[PriceKey, tuple[Hashable, JobPrices]] = {}
        self._previous: dict[PriceKey, tuple[Hashable, JobPrices]] = {}
        self._round: dict[tuple[JobId, EquivClassId | None], JobPrices | None] = {}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.settings.describe()})"

    # ------------------------------------------------------------------ bookkeeping

    def table(self, application: str | None) -> PerformanceTable:
        """The lookup table of an application's function (latency-insensitive for None)."""
        key = application or _INSENSITIVE.name
        table = self._tables.get(key)
        if table is None:
            function = _INSENSITIVE if application is None else self.functions.get(application)
            if function is None:
                raise ValueError(
                    f"unknown NoMora application {application!r} (label {APPLICATION_LABEL!r}); "
                    f"known: {', '.join(sorted(self.functions))}"
                )
            table = self._tables[key] = function.table()
        return table

    def _application_of(self, task: TaskView) -> str | None:
        application = self._job_application.get(task.job_id)
        if task.job_id not in self._job_application:
            application = task.labels.get(APPLICATION_LABEL, self.settings.default_application)
            self.table(application)  # an unknown name fails here, about this task
            self._job_application[task.job_id] = application
        return application

    def _machine_index(self, cluster: ClusterView) -> MachineIndex:
        if self._index is None:
            self._index = MachineIndex.of(cluster)
            self._index_generation += 1
        return self._index

    def _root_machine_of(self, job_id: JobId, cluster: ClusterView) -> MachineId | None:
        """Where the job's root runs, or last ran; None if it has not run yet."""
        job = cluster.jobs.get(job_id)
        if job is not None and job.root_task_id in cluster.tasks:
            machine = cluster.tasks[job.root_task_id].machine_id
            if machine is not None:
                self._root_machine[job_id] = machine
        machine = self._root_machine.get(job_id)
        return machine if machine is not None and machine in cluster.machines else None

    def _mask(
        self, aggregator: EquivClassId, index: MachineIndex, cluster: ClusterView
    ) -> BoolArray:
        """Which machines of `index` satisfy X_S's selectors, this round."""
        mask = self._masks.get(aggregator)
        if mask is None:
            selectors = self._aggregators[aggregator]
            machines = cluster.machines
            mask = self._masks[aggregator] = np.fromiter(
                (m in machines and usable(machines[m], selectors) for m in index.ids),
                dtype=np.bool_,
                count=len(index),
            )
        return mask

    def prices(
        self, job_id: JobId, cluster: ClusterView, selectors: Sequence[LabelSelector] = ()
    ) -> JobPrices | None:
        """What the job's non-root tasks with these label selectors pay this round; None while
        its root has not run."""
        aggregator = selector_aggregator(selectors) if selectors else None
        if aggregator is not None:
            self._aggregators.setdefault(aggregator, tuple(selectors))
        round_key = (job_id, aggregator)
        if round_key in self._round:
            return self._round[round_key]
        application = self._job_application.get(job_id, self.settings.default_application)
        table = self.table(application)
        index = self._machine_index(cluster)
        mask = None if aggregator is None else self._mask(aggregator, index, cluster)
        root = self._root_machine_of(job_id, cluster)
        prices: JobPrices | None
        if root is None:
            job = cluster.jobs.get(job_id)
            root_task = None if job is None else cluster.tasks.get(job.root_task_id)
            gone = root_task is None or root_task.state in _FINISHED
            prices = self._anywhere(index, table, aggregator, mask) if gone and len(index) else None
        else:
            key = (application, root, aggregator)
            version: Hashable = (self.latency.version(cluster), self._index_generation)
            if mask is not None:
                version = (version, mask.tobytes())
            cached = self._prices.get(key) or self._previous.get(key)
            if cached is not None and cached[0] == version:
                prices = cached[1]
            else:
                latencies = self.latency.latencies_us(root, index, cluster)
                prices = self._price(index, table.cost(latencies), aggregator, mask)
            self._prices[key] = (version, prices)
        self._round[round_key] = prices
        return prices

    def _anywhere(
        self,
        index: MachineIndex,
        table: PerformanceTable,
        aggregator: EquivClassId | None = None,
        mask: BoolArray | None = None,
    ) -> JobPrices:
        """A job whose root left without running: anywhere (any matching machine, with
        selectors), at the application's worst cost."""
        costs = np.full(len(index), table.beyond_cost, dtype=np.int64)
        if mask is None:
            return JobPrices(index, costs, {}, {}, table.beyond_cost)
        return JobPrices(
            index, costs, {}, {}, table.beyond_cost, aggregator=aggregator if mask.any() else None
        )

    def _price(
        self,
        index: MachineIndex,
        costs: IntArray,
        aggregator: EquivClassId | None = None,
        mask: BoolArray | None = None,
    ) -> JobPrices:
        """The arcs of J (no `mask`), or of J_S (`mask`: the machines X_S reaches): a rack
        counts only if all its machines are in the mask, b is the worst machine in it."""
        settings = self.settings
        if mask is None:
            considered, whole = costs, None
        elif not mask.any():
            return JobPrices(index, costs, {}, {}, int(costs.max()), aggregator=None)
        else:
            considered = np.where(mask, costs, -1)  # costs are >= 100: never a rack's worst
            whole = np.logical_and.reduceat(mask, index.rack_starts)
        rack_costs = np.maximum.reduceat(considered, index.rack_starts)
        worst = int(rack_costs.max())
        rack_arc = (rack_costs <= settings.rack_threshold) & (rack_costs < worst)
        if whole is not None:
            rack_arc &= whole
        covering = np.where(rack_arc[index.rack_of], rack_costs[index.rack_of], worst)
        machine_arc = (costs <= settings.machine_threshold) & (costs < covering)
        if mask is not None:
            machine_arc &= mask
        machines = {index.ids[i]: int(costs[i]) for i in np.flatnonzero(machine_arc).tolist()}
        racks = {index.rack_ids[r]: int(rack_costs[r]) for r in np.flatnonzero(rack_arc).tolist()}
        refs = tuple(ResourceRef.machine(m) for m in machines) + tuple(
            ResourceRef.rack(r) for r in racks
        )
        if mask is None:
            return JobPrices(index, costs, machines, racks, worst, refs)
        return JobPrices(index, costs, machines, racks, worst, refs, aggregator)

    def _is_root(self, task: TaskView, cluster: ClusterView) -> bool:
        job = cluster.jobs.get(task.job_id)
        return job is not None and job.root_task_id == task.task_id

    def _waiting_cost(self, task: TaskView, cluster: ClusterView) -> int:
        settings = self.settings
        waited = task.unscheduled_time(cluster.now)
        return timed_cost(settings.unscheduled_cost, settings.wait_cost_per_second, waited)

    def _run_credit(self) -> int:
        """Beta's rate: cost units per second run (0 for the paper's beta = 0)."""
        if self.settings.beta is BetaMode.RUN_TIME:
            return self.settings.run_credit_per_second
        return 0

    @property
    def _root_to_aggregator(self) -> int:
        """A root's cost to X: 1 beside its cost-0 random rack, 0 as its only arc (papers)."""
        return 0 if self.settings.paper_arcs else 1

    @property
    def _stay_margin(self) -> int:
        """What staying costs below d - beta: 1, or 0 in the papers' form."""
        return 0 if self.settings.paper_arcs and not self.settings.stay_tie_break else 1

    def _stay_cost(self, task: TaskView, machine_id: MachineId, cluster: ClusterView) -> int:
        """d of the task's machine (0 for a root), before beta and the 1 that keeps it there."""
        if self._is_root(task, cluster):
            return 0
        prices = self.prices(task.job_id, cluster, task.selectors)
        return 0 if prices is None else prices.cost_on(machine_id)

    def _job_of_class(self, equiv_class: EquivClassId) -> tuple[JobId, Selectors] | None:
        """The job (and the selectors) of a class J or J_S; None for any other class."""
        known = self._selector_jobs.get(equiv_class)
        if known is not None:
            return known
        if isinstance(equiv_class, str) and equiv_class.startswith(JOB_CLASS_PREFIX):
            return equiv_class.removeprefix(JOB_CLASS_PREFIX), ()
        return None

    def _class_prices(self, equiv_class: EquivClassId, cluster: ClusterView) -> JobPrices | None:
        """The prices of a class J or J_S this round (None for other classes, and while the
        job's root has not run)."""
        known = self._job_of_class(equiv_class)
        return None if known is None else self.prices(known[0], cluster, known[1])

    def _is_aggregator(self, equiv_class: EquivClassId) -> bool:
        return equiv_class == CLUSTER_AGGREGATOR or equiv_class in self._aggregators

    def _matching_machines(
        self, selectors: Sequence[LabelSelector], cluster: ClusterView
    ) -> list[ResourceRef]:
        return [m.ref for m in cluster.machines.values() if usable(m, selectors)]

    # ------------------------------------------------------------------ capability and shape

    @hookimpl
    def preemption_enabled(self) -> bool:
        return self.settings.preemption

    @hookimpl
    def task_equiv_classes(self, task: TaskView, cluster: ClusterView) -> Sequence[EquivClassId]:
        self._application_of(task)
        selectors = task.selectors
        if selectors:
            self._aggregators.setdefault(selector_aggregator(selectors), tuple(selectors))
        if self._is_root(task, cluster):
            if self.settings.paper_arcs and task.machine_id is not None:
                return ()  # the papers: once placed, the root's arc is to its machine only
            return (selector_aggregator(selectors),)
        equiv_class = job_class(task.job_id, selectors)
        if selectors:
            known = self._selector_jobs.setdefault(equiv_class, (task.job_id, tuple(selectors)))
            if known[0] != task.job_id:
                raise ValueError(
                    f"NoMora class {equiv_class!r} names jobs {known[0]!r} and {task.job_id!r}"
                )
        return (equiv_class,)

    @hookimpl
    def task_preference_arcs(self, task: TaskView, cluster: ClusterView) -> Sequence[ResourceRef]:
        if not self._is_root(task, cluster) or not cluster.racks or self.settings.paper_arcs:
            return ()
        selectors = task.selectors
        digest = hashlib.blake2b(task.job_id.encode("utf-8"), digest_size=8).digest()
        draw = int.from_bytes(digest, "little")
        if not selectors:
            racks = sorted(cluster.racks)
            return (ResourceRef.rack(racks[draw % len(racks)]),)
        # A rack drawn among those with a matching machine: the rack if all its machines
        # match, else its matching machines.
        matching: dict[RackId, list[ResourceRef]] = {}
        for machine in cluster.machines.values():
            if usable(machine, selectors):
                matching.setdefault(machine.rack_id, []).append(machine.ref)
        if not matching:
            return ()
        rack_id = sorted(matching)[draw % len(matching)]
        if len(matching[rack_id]) == len(cluster.racks[rack_id].children):
            return (ResourceRef.rack(rack_id),)
        return tuple(matching[rack_id])

    @hookimpl
    def task_to_resource(self, resource: ResourceView) -> ArcDescriptor:
        return ArcDescriptor(0, capacity=1)

    @hookimpl
    def equiv_class_preference_arcs(
        self, equiv_class: EquivClassId, cluster: ClusterView
    ) -> Sequence[ResourceRef] | None:
        if equiv_class == CLUSTER_AGGREGATOR:
            return [ResourceRef.rack(rack_id) for rack_id in cluster.racks]
        selectors = self._aggregators.get(equiv_class)
        if selectors is not None:
            return self._matching_machines(selectors, cluster)
        if self._job_of_class(equiv_class) is None:
            return None
        prices = self._class_prices(equiv_class, cluster)
        return () if prices is None else prices.refs

    @hookimpl
    def equiv_class_to_equiv_class_arcs(
        self, equiv_class: EquivClassId, cluster: ClusterView
    ) -> Sequence[EquivClassId] | None:
        prices = self._class_prices(equiv_class, cluster)
        if prices is None:
            return None
        return () if prices.aggregator is None else (prices.aggregator,)

    # ------------------------------------------------------------------ arc descriptors

    @hookimpl
    def task_to_equiv_class(self, equiv_class: EquivClassId) -> ArcDescriptor:
        return ArcDescriptor(self._root_to_aggregator if self._is_aggregator(equiv_class) else 0)

    @hookimpl
    def equiv_class_to_equiv_class(
        self, source: EquivClassId, cluster: ClusterView
    ) -> ArcDescriptor | None:
        prices = self._class_prices(source, cluster)
        if prices is None:
            return None
        return ArcDescriptor(prices.cluster_cost, capacity=MAX_CAPACITY)

    @hookimpl
    def equiv_class_to_resource(
        self, equiv_class: EquivClassId, resource: ResourceView, cluster: ClusterView
    ) -> ArcDescriptor | None:
        slots = resource.stats.slots
        if self._is_aggregator(equiv_class):
            return ArcDescriptor(0, capacity=slots)
        prices = self._class_prices(equiv_class, cluster)
        if prices is None:
            return None
        if resource.kind is ResourceKind.MACHINE:
            return ArcDescriptor(prices.machine_arcs[resource.id], capacity=slots)
        return ArcDescriptor(prices.rack_arcs[resource.id], capacity=slots)

    @hookimpl
    def resource_to_resource(self, child: ResourceView) -> ArcDescriptor:
        return ArcDescriptor(0, capacity=child.stats.slots)

    @hookimpl
    def task_to_unscheduled(self, task: TaskView, cluster: ClusterView) -> ArcDescriptor:
        return ArcDescriptor(self._waiting_cost(task, cluster))

    @hookimpl
    def task_continuation(
        self, task: TaskView, machine: MachineView, cluster: ClusterView
    ) -> ArcDescriptor | None:
        if not self.settings.preemption:
            return None  # the defaults pin it
        stay = self._stay_cost(task, machine.machine_id, cluster)
        cost = timed_cost(stay - self._stay_margin, -self._run_credit(), task.run_time(cluster.now))
        return ArcDescriptor(cost, capacity=1, min_flow=0)

    @hookimpl
    def task_preemption(self, task: TaskView, cluster: ClusterView) -> ArcDescriptor:
        return ArcDescriptor(self._waiting_cost(task, cluster))

    # ------------------------------------------------------------------ batch forms

    @hookimpl
    def task_to_unscheduled_batch(self) -> TimedArcs:
        settings = self.settings
        return TimedArcs(settings.unscheduled_cost, per_second=settings.wait_cost_per_second)

    @hookimpl
    def task_preemption_batch(self) -> TimedArcs:
        # What waiting would cost: a running task's waiting clock stands still.
        return self.task_to_unscheduled_batch()

    @hookimpl
    def task_continuation_batch(self, tasks: TaskBatch, cluster: ClusterView) -> TimedArcs | None:
        if not self.settings.preemption:
            return None  # the defaults pin them
        stays = [
            self._stay_cost(task, task.machine_id, cluster)  # type: ignore[arg-type]
            for task in tasks
        ]
        # d follows the latencies and the root's machine: asked again every round.
        return TimedArcs(
            np.array(stays, dtype=np.int64) - self._stay_margin,
            min_flow=0,
            per_second=-self._run_credit(),
            clock=Clock.RAN,
            this_round_only=True,
        )

    @hookimpl
    def task_to_equiv_classes_batch(
        self, tasks: TaskBatch, cluster: ClusterView
    ) -> TaskArcs[EquivClassId]:
        rows: list[int] = []
        classes: list[EquivClassId] = []
        for row, task in enumerate(tasks):
            for equiv_class in self.task_equiv_classes(task, cluster):  # none: a placed root
                rows.append(row)
                classes.append(equiv_class)
        costs = [self._root_to_aggregator if self._is_aggregator(c) else 0 for c in classes]
        return TaskArcs(np.array(rows, dtype=np.int64), classes, cost=costs)

    @hookimpl
    def task_to_resources_batch(
        self, tasks: TaskBatch, cluster: ClusterView
    ) -> TaskArcs[ResourceRef]:
        rows: list[int] = []
        targets: list[ResourceRef] = []
        roots = np.zeros(len(tasks), dtype=np.bool_)
        for row, task in enumerate(tasks):
            if self._is_root(task, cluster):
                roots[row] = True  # its rack is drawn among the live ones
                for ref in self.task_preference_arcs(task, cluster):
                    rows.append(row)
                    targets.append(ref)
        return TaskArcs(rows, targets, 0, 1, depends_on_topology=roots)

    @hookimpl
    def equiv_class_to_resources_batch(
        self, equiv_class: EquivClassId, topology: Topology, cluster: ClusterView
    ) -> ResourceArcs | None:
        machines, racks = topology.machines, topology.racks
        if equiv_class == CLUSTER_AGGREGATOR:
            every = np.arange(len(racks), dtype=np.int64)
            return ResourceArcs.to_racks(every, 0, racks.stats.slots)
        selectors = self._aggregators.get(equiv_class)
        if selectors is not None:
            rows = np.flatnonzero(machines.matching(selectors))
            return ResourceArcs.to_machines(rows, 0, machines.stats.slots[rows])
        if self._job_of_class(equiv_class) is None:
            return None
        prices = self._class_prices(equiv_class, cluster)
        if prices is None:
            return ResourceArcs.none()
        machine_rows = np.array([machines.row_of[m] for m in prices.machine_arcs], np.int64)
        rack_rows = np.array([racks.row_of[r] for r in prices.rack_arcs], np.int64)
        return ResourceArcs.to_machines(
            machine_rows, list(prices.machine_arcs.values()), machines.stats.slots[machine_rows]
        ) + ResourceArcs.to_racks(
            rack_rows, list(prices.rack_arcs.values()), racks.stats.slots[rack_rows]
        )

    @hookimpl
    def equiv_class_to_equiv_classes_batch(
        self, equiv_class: EquivClassId, cluster: ClusterView
    ) -> ClassArcs | None:
        prices = self._class_prices(equiv_class, cluster)
        if prices is None:
            return None
        if prices.aggregator is None:
            return ClassArcs.none()
        return ClassArcs([prices.aggregator], prices.cluster_cost, MAX_CAPACITY)

    @hookimpl
    def resource_to_resource_batch(self, topology: Topology) -> TopologyArcs:
        return TopologyArcs(
            ArcColumns(0, topology.machines.stats.slots), ArcColumns(0, topology.racks.stats.slots)
        )

    # ------------------------------------------------------------------ notifications

    @hookimpl
    def round_started(self, cluster: ClusterView) -> None:
        """A new round: latencies and the roots' machines may have changed; prices not used
        in the last round are dropped, and so is what is known of jobs that left."""
        self._previous, self._prices = self._prices, {}
        self._round.clear()
        self._masks.clear()  # machines' labels may have changed
        jobs = cluster.jobs
        for known in (self._job_application, self._root_machine):
            for job_id in [j for j in known if j not in jobs]:
                del known[job_id]
        for equiv_class in [c for c, (j, _) in self._selector_jobs.items() if j not in jobs]:
            del self._selector_jobs[equiv_class]

    @hookimpl
    def machine_added(self) -> None:
        self._index = None
        self._round.clear()
        self._masks.clear()

    @hookimpl
    def machine_removed(self) -> None:
        self._index = None
        self._round.clear()
        self._masks.clear()

    @hookimpl
    def task_added(self, task: TaskView) -> None:
        self._application_of(task)


class NomoraPreemptionPolicy(NomoraPolicy):
    """NoMora with preemption (beta = the time a task has run), for selection by name."""

    def __init__(
        self,
        settings: NomoraSettings | None = None,
        *,
        latency: LatencySource | None = None,
        functions: Mapping[str, PerformanceFunction] | None = None,
        function_files: Sequence[str | Path] = (),
    ) -> None:
        super().__init__(
            settings if settings is not None else NomoraSettings(preemption=True),
            latency=latency,
            functions=functions,
            function_files=function_files,
        )
