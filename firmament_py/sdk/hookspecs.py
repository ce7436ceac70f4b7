"""The policy API: every hook a scheduling policy can implement, in one place.

A policy is a pluggy plugin: an object (module or instance) whose functions are marked with
`hookimpl` and named after the hooks below. The hooks mirror Firmament's CostModelInterface in
Python terms. The scheduler's graph manager asks them while it keeps this flow network in step
with the cluster::

    task --task_to_unscheduled--> U(job) --unscheduled_to_sink--> sink
    task --task_to_equiv_class--> class [--equiv_class_to_equiv_class--> class ...]
         --equiv_class_to_resource--> pod | rack | machine
    task --task_to_resource--> pod | rack | machine
    pod --resource_to_resource--> rack --resource_to_resource--> machine --leaf_to_sink--> sink
    running task --task_continuation--> its machine
                 --task_preemption--> U(job)                    (only with preemption enabled)

Each task is a source of one unit of flow and the sink drains them all. A unit that reaches the
sink through a machine places the task there; one that goes through its job's unscheduled
aggregator U(job) leaves it waiting (or preempts it, if it was running). Without preemption a
running task has only its continuation arc; with it, the task also keeps its class and preference
arcs, so the solver may migrate it.

The hooks, by phase (`ALL_HOOKS` lists them in this order):

Capability
    preemption_enabled           may running tasks be preempted and migrated? (asked once)
Shape: which arcs exist (asked for every task and class the manager reaches in its pass
from the task nodes)
    task_equiv_classes           the equivalence classes a task has arcs to
    task_preference_arcs         the resources a task has direct arcs to
    equiv_class_preference_arcs  the resources a class has arcs to
    equiv_class_to_equiv_class_arcs  the classes a class has arcs to
Arc descriptors: cost, capacity and minimum flow of each arc
    task_to_unscheduled          task -> its job's unscheduled aggregator (cost of waiting)
    unscheduled_to_sink          unscheduled aggregator -> sink
    task_to_resource             task -> a resource it prefers
    resource_to_resource         topology arc, parent -> child
    leaf_to_sink                 machine -> sink
    task_to_equiv_class          task -> one of its classes
    equiv_class_to_resource      class -> a resource it prefers
    equiv_class_to_equiv_class   class -> class
    task_continuation            running task -> its machine (cost of staying)
    task_preemption              running task -> unscheduled aggregator (cost of preempting)
Statistics: the pass from the sink up the resource topology, before any arc is asked for
    prepare_stats                a resource's own statistics, before its children's are added
    gather_stats                 fold a child's final statistics into its parent's
    update_stats                 a resource's final statistics, once all children are in
Notifications
    round_started                a scheduling round begins (drop per-round caches here)
    machine_added, machine_removed, task_added, task_removed

The rules:

* Every hook but the notifications is `firstresult`: pluggy asks the implementations in turn
  (`tryfirst` ones first, `trylast` ones last) and the first answer that is not None wins. The
  built-in defaults (`firmament_py.sdk.defaults`) are `trylast` and registered after the
  policy, which puts them after every implementation the policy has: a policy answers the hooks
  it implements, may return None to leave one particular question to the defaults, and never
  has to implement a hook whose default suits it. A `wrapper=True` implementation sees (and may
  replace) the answer of everything else, the defaults included.
* An implementation may take any subset of its hook's arguments, by name.
* Answers are checked (`PolicyManager`): a wrong type, an out-of-range descriptor, an unknown
  resource or a duplicate raises `PolicyError` naming the policy, the hook and the value.
* Answer hooks are asked many times per round, in an order the manager chooses, and may be asked
  again about things that did not change: they should depend only on their arguments and the
  cluster view, and change nothing but the policy's own caches.
* Notifications are called on every plugin that implements them and return nothing; they are
  where a policy keeps the caches its answers need.

Batch forms (asked instead of the per-item hooks they stand for; `BATCH_HOOKS` lists them)
    task_to_unscheduled_batch, task_continuation_batch, task_preemption_batch
                                 declared once per task, timed: `TimedArcs`
    task_to_equiv_classes_batch, task_to_resources_batch
                                 a task's classes or preferences and their arcs: `TaskArcs`
    equiv_class_to_resources_batch, equiv_class_to_equiv_classes_batch
                                 a class's arcs: `ResourceArcs`, `ClassArcs`
    resource_to_resource_batch, leaf_to_sink_batch, machine_stats_batch
                                 the topology, for every machine, rack and pod at once
    unscheduled_to_sink_batch    every job's arc to the sink

A batch hook takes columns (`sdk/columns.py`: `TaskBatch`, `JobBatch`, `Topology`) and returns
arrays (`sdk/answers.py`). For each question the scheduler asks the batch form when the policy
implements it, or when the policy implements none of the per-item hooks it stands for (the
defaults then answer it, in batch); a policy that implements only the per-item hooks is asked
per item, exactly as before. Every built-in policy and the defaults have batch forms. The
three task hooks whose costs grow with time are declared once: `task_to_unscheduled_batch`
answers for a task when it changes, and the scheduler works out `base + per_second x clock`
every round itself (per item, `task_to_unscheduled` is asked every round instead).

When the scheduler asks (so an answer that depends on something else goes stale until then):
`round_started` and the statistics every round; topology and leaf-to-sink arcs when the
statistics of the resources they join change (in batch: every round); a task's classes,
preferences and their arcs when the task changes (submitted, placed, evicted, migrated,
updated), and when a machine joins, leaves or changes labels: for every task per item, in
batch for the tasks marked `depends_on_topology`; per item, `task_to_unscheduled` every round
for every waiting task, and continuation and preemption every round for running tasks when
preemption is on, while their batch forms are asked when the task changes (or every round,
for answers marked `this_round_only`); every class's arcs every round; `unscheduled_to_sink`
every round. So an answer that depends on the waiting tasks or on time belongs on a class's
arcs (asked every round) or in a timed cost, not on a machine's. The same holds for latencies
between machines (`cluster.latency_us`, from `LatencySample` events): a new sample marks
nothing as changed, so costs that follow it belong on class arcs, or in answers that hold for
one round.
"""

from __future__ import annotations

from collections.abc import Sequence

import pluggy

from firmament_py.model.ids import EquivClassId, MachineId, TaskId
from firmament_py.sdk.answers import (
    ArcColumns,
    ClassArcs,
    ResourceArcs,
    TaskArcs,
    TimedArcs,
    TopologyArcs,
)
from firmament_py.sdk.columns import JobBatch, ResourceColumns, StatsColumns, TaskBatch, Topology
from firmament_py.sdk.types import (
    ArcDescriptor,
    ClusterView,
    JobView,
    MachineView,
    ResourceRef,
    ResourceStats,
    ResourceView,
    TaskView,
)

PROJECT_NAME = "firmament_py"
"""pluggy's project name: hook implementations are recognised by this marker."""

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)
"""Marks a policy's function as the implementation of the hook of the same name."""


# ---------------------------------------------------------------------- capability


@hookspec(firstresult=True)
def preemption_enabled() -> bool | None:
    """Whether the scheduler may preempt and migrate running tasks under this policy.

    Asked once, when the policy is selected; the answer fixes the shape of the graph and is
    available to every hook as `cluster.preemption_enabled`. Must be a bool.
    Default: False (Firmament's `--preemption` default): running tasks stay where they are.
    """


# ---------------------------------------------------------------------- shape


@hookspec(firstresult=True)
def task_equiv_classes(task: TaskView, cluster: ClusterView) -> Sequence[EquivClassId] | None:
    """The equivalence classes a waiting task has arcs to (Firmament's GetTaskEquivClasses).

    A class is any int or non-empty str the policy chooses; tasks that share a class share its
    node, and the arcs out of it. The manager creates a class node when some task first names
    it and drops it when no arc leads to it. A list or tuple without duplicates.
    Default: the cluster aggregator `CLUSTER_AGGREGATOR`, or for a task with label selectors, a
    class of all tasks with the same selectors (reaching only machines whose labels match).
    """


@hookspec(firstresult=True)
def task_preference_arcs(task: TaskView, cluster: ClusterView) -> Sequence[ResourceRef] | None:
    """The resources (pods, racks or machines) a waiting task has direct arcs to
    (Firmament's GetTaskPreferenceArcs). Each must be live; a list or tuple without duplicates.
    Default: none.
    """


@hookspec(firstresult=True)
def equiv_class_preference_arcs(
    equiv_class: EquivClassId, cluster: ClusterView
) -> Sequence[ResourceRef] | None:
    """The resources a class has arcs to (Firmament's GetOutgoingEquivClassPrefArcs).
    Each must be live; a list or tuple without duplicates.
    Default: every machine for the cluster aggregator, every machine whose labels match for a
    default selector class, none for any other class.
    """


@hookspec(firstresult=True)
def equiv_class_to_equiv_class_arcs(
    equiv_class: EquivClassId, cluster: ClusterView
) -> Sequence[EquivClassId] | None:
    """The classes a class has arcs to (Firmament's GetEquivClassToEquivClassesArcs), for
    policies that build hierarchies of aggregators. A list or tuple without duplicates that
    does not contain `equiv_class` itself.
    Default: none.
    """


# ---------------------------------------------------------------------- arc descriptors


@hookspec(firstresult=True)
def task_to_unscheduled(task: TaskView, cluster: ClusterView) -> ArcDescriptor | None:
    """The arc from a waiting task to its job's unscheduled aggregator: its cost is the price
    of leaving the task unscheduled for another round (Firmament's TaskToUnscheduledAgg).

    Asked again every round for every waiting task, so the cost may grow with waiting time, as
    Firmament intends. Any placement path that costs less than this is preferred to waiting;
    a policy whose placement costs exceed the default should raise this too.
    Default: cost `UNSCHEDULED_COST` (1,000,000, Firmament's Octopus model) plus one per whole
    second the task has waited in total; capacity 1.
    """


@hookspec(firstresult=True)
def unscheduled_to_sink(
    job: JobView, incoming_tasks: int, cluster: ClusterView
) -> ArcDescriptor | None:
    """The arc from a job's unscheduled aggregator to the sink (Firmament's
    UnscheduledAggToSink).

    `incoming_tasks` is the number of the job's tasks with an arc into the aggregator (its
    waiting tasks, plus its running ones when preemption is enabled). The capacity must be at
    least that, or the flow problem could be infeasible; a smaller one is refused.
    Default: cost 0, capacity `incoming_tasks`.
    """


@hookspec(firstresult=True)
def task_to_resource(
    task: TaskView, resource: ResourceView, cluster: ClusterView
) -> ArcDescriptor | None:
    """A task's preference arc to a resource from `task_preference_arcs`
    (Firmament's TaskToResourceNode). A task carries one unit: min_flow at most 1.
    Default: cost 0, capacity 1.
    """


@hookspec(firstresult=True)
def resource_to_resource(
    parent: ResourceView, child: ResourceView, cluster: ClusterView
) -> ArcDescriptor | None:
    """A topology arc: pod -> rack or rack -> machine (Firmament's ResourceNodeToResourceNode).
    Flow on it is flow of tasks placed below `child`.
    Default: cost 0, capacity `schedulable_slots(child.stats)`: the free slots below the child,
    or all its slots with preemption (Firmament's CapacityFromResNodeToParent).
    """


@hookspec(firstresult=True)
def leaf_to_sink(machine: MachineView, cluster: ClusterView) -> ArcDescriptor | None:
    """The arc from a machine to the sink (Firmament's LeafResourceNodeToSink): its capacity
    bounds how many tasks the machine runs. Without preemption the machine's running tasks are
    pinned to it, so a capacity below their number is refused.
    Default: cost 0, capacity the machine's slots.
    """


@hookspec(firstresult=True)
def task_to_equiv_class(
    task: TaskView, equiv_class: EquivClassId, cluster: ClusterView
) -> ArcDescriptor | None:
    """A task's arc to one of its classes from `task_equiv_classes`
    (Firmament's TaskToEquivClassAggregator). min_flow at most 1.
    Default: cost 2 to the cluster aggregator and default selector classes (Firmament's trivial
    model), 0 to any other class; capacity 1.
    """


@hookspec(firstresult=True)
def equiv_class_to_resource(
    equiv_class: EquivClassId, resource: ResourceView, cluster: ClusterView
) -> ArcDescriptor | None:
    """A class's arc to a resource from `equiv_class_preference_arcs`
    (Firmament's EquivClassToResourceNode).
    Default: cost 0, capacity `schedulable_slots(resource.stats)`.
    """


@hookspec(firstresult=True)
def equiv_class_to_equiv_class(
    source: EquivClassId, target: EquivClassId, cluster: ClusterView
) -> ArcDescriptor | None:
    """A class's arc to a class from `equiv_class_to_equiv_class_arcs`
    (Firmament's EquivClassToEquivClass).
    Default: cost 0, capacity `MAX_CAPACITY` (a free pass-through).
    """


@hookspec(firstresult=True)
def task_continuation(
    task: TaskView, machine: MachineView, cluster: ClusterView
) -> ArcDescriptor | None:
    """The arc from a running task to the machine it runs on: the cost of letting it continue
    (Firmament's TaskContinuation). min_flow 1 pins the task; at most 1.
    Default: cost 0, capacity 1, min_flow 1 without preemption (the task cannot be moved, as
    Firmament's PinTaskToNode does) and 0 with it.
    """


@hookspec(firstresult=True)
def task_preemption(task: TaskView, cluster: ClusterView) -> ArcDescriptor | None:
    """The arc from a running task to its job's unscheduled aggregator, when preemption is
    enabled: the cost of taking the task off its machine (Firmament's TaskPreemption).
    min_flow at most 1.
    Default: cost `UNSCHEDULED_COST` plus one per whole second the task has waited and run in
    total, so a waiting task displaces it only after waiting longer than that; capacity 1.
    """


# ---------------------------------------------------------------------- statistics


@hookspec(firstresult=True)
def prepare_stats(resource: ResourceView, cluster: ClusterView) -> ResourceStats | None:
    """A resource's statistics before any child's are gathered into it (Firmament's
    PrepareStats): what the resource contributes itself.

    The pass (`PolicyManager.statistics_pass`) visits every live resource once per round,
    machines first, then racks, then pods, after the round's events and before any arc is asked
    for. `resource.stats` still holds the
    previous pass's value (and raises LookupError for a resource no pass has reached).
    Default: a machine's own slots, running tasks, capacity, reservations and measured usage;
    zero for racks and pods.
    """


@hookspec(firstresult=True)
def gather_stats(
    parent: ResourceView,
    accumulated: ResourceStats,
    child: ResourceView,
    child_stats: ResourceStats,
    cluster: ClusterView,
) -> ResourceStats | None:
    """Fold a child's final statistics into its parent's accumulated ones (Firmament's
    GatherStats), once per topology arc. Return the new accumulated statistics.
    Default: `accumulated + child_stats`, field by field.
    """


@hookspec(firstresult=True)
def update_stats(
    resource: ResourceView, stats: ResourceStats, cluster: ClusterView
) -> ResourceStats | None:
    """A resource's final statistics, once every child has been gathered (Firmament's
    UpdateStats). The result is what the arc hooks see as `resource.stats` and what its parent
    gathers; a policy may derive values here or note them for its own caches.
    Default: `stats` unchanged.
    """


# ---------------------------------------------------------------------- batch forms
#
# Each stands for the per-item hooks named in `BATCH_HOOKS`, and is asked instead of them (see
# the module docstring for when). An answer's rows follow the batch's: row i of the answer is
# about row i of `tasks`, `jobs` or a `topology` level. A bad value in one row is reported
# against that row's task (which is left out of the round, as a per-item error would leave it)
# or, for any other row, fails the round naming the hook, the row and the value.


@hookspec(firstresult=True)
def task_to_unscheduled_batch(tasks: TaskBatch, cluster: ClusterView) -> TimedArcs | None:
    """The arc from each waiting task to its job's unscheduled aggregator (`task_to_unscheduled`
    for many), declared once: asked when the tasks join the graph or change, after which the
    scheduler works out each round's cost from the answer's clock (`TimedArcs`). Capacity at
    least 1: the arc is what keeps every round feasible.
    Default: cost `UNSCHEDULED_COST` plus 1 per second `Clock.WAITED`, capacity 1.
    """


@hookspec(firstresult=True)
def task_continuation_batch(tasks: TaskBatch, cluster: ClusterView) -> TimedArcs | None:
    """The arc from each running task to the machine it runs on (`tasks.machine_ids`): the cost
    of staying (`task_continuation` for many), declared once as `task_to_unscheduled_batch` is.
    Default: cost 0, capacity 1, min_flow 1 without preemption (pinned) and 0 with it.
    """


@hookspec(firstresult=True)
def task_preemption_batch(tasks: TaskBatch, cluster: ClusterView) -> TimedArcs | None:
    """The arc from each running task to its job's unscheduled aggregator, with preemption:
    the cost of taking it off its machine (`task_preemption` for many), declared once.
    Default: cost `UNSCHEDULED_COST` plus 1 per second `Clock.WAITED_AND_RAN`, capacity 1.
    """


@hookspec(firstresult=True)
def task_to_equiv_classes_batch(
    tasks: TaskBatch, cluster: ClusterView
) -> TaskArcs[EquivClassId] | None:
    """Each task's equivalence classes and its arc to each (`task_equiv_classes` and
    `task_to_equiv_class` for many), asked when the tasks join the graph or change, and when a
    machine joins, leaves or changes labels for the rows marked `depends_on_topology`.
    Default: the cluster aggregator at cost `AGGREGATOR_COST`, or for a task with label
    selectors its `selector_class`, at the same cost; capacity 1.
    """


@hookspec(firstresult=True)
def task_to_resources_batch(tasks: TaskBatch, cluster: ClusterView) -> TaskArcs[ResourceRef] | None:
    """Each task's preferred resources (live pods, racks or machines) and its arc to each
    (`task_preference_arcs` and `task_to_resource` for many), asked as
    `task_to_equiv_classes_batch` is.
    Default: none.
    """


@hookspec(firstresult=True)
def equiv_class_to_resources_batch(
    equiv_class: EquivClassId, topology: Topology, cluster: ClusterView
) -> ResourceArcs | None:
    """A class's arcs to resources, by their rows in `topology` (`equiv_class_preference_arcs`
    and `equiv_class_to_resource` in one), asked every round for every class some task reaches.
    Default: every machine for the cluster aggregator, the machines whose labels match for a
    `selector_class`, none for any other class; cost 0, capacity the schedulable slots.
    """


@hookspec(firstresult=True)
def equiv_class_to_equiv_classes_batch(
    equiv_class: EquivClassId, cluster: ClusterView
) -> ClassArcs | None:
    """A class's arcs to other classes (`equiv_class_to_equiv_class_arcs` and
    `equiv_class_to_equiv_class` in one), asked every round for every class some task reaches.
    Default: none.
    """


@hookspec(firstresult=True)
def resource_to_resource_batch(topology: Topology, cluster: ClusterView) -> TopologyArcs | None:
    """Every topology arc, rack -> machine and pod -> rack (`resource_to_resource` for all),
    asked every round after the statistics.
    Default: cost 0, capacity the child's schedulable slots.
    """


@hookspec(firstresult=True)
def leaf_to_sink_batch(topology: Topology, cluster: ClusterView) -> ArcColumns | None:
    """Every machine's arc to the sink (`leaf_to_sink` for all), one per row of
    `topology.machines`, asked every round. Without preemption a capacity below a machine's
    running tasks is refused.
    Default: cost 0, capacity the machine's slots.
    """


@hookspec(firstresult=True)
def machine_stats_batch(machines: ResourceColumns, cluster: ClusterView) -> StatsColumns | None:
    """Every machine's statistics (`prepare_stats`, `gather_stats` and `update_stats` in one),
    one row per row of `machines`, whose `stats` hold what the model knows of each machine
    (slots, running tasks, capacity, reservations, measured usage). A rack's and a pod's are the
    sums over their machines. Asked every round, before any arc.
    Default: `machines.stats` as it is.
    """


@hookspec(firstresult=True)
def unscheduled_to_sink_batch(jobs: JobBatch, cluster: ClusterView) -> ArcColumns | None:
    """Every job's arc from its unscheduled aggregator to the sink (`unscheduled_to_sink` for
    all), one per row of `jobs`, asked every round. The capacity must be at least
    `jobs.incoming_tasks` of its row.
    Default: cost 0, capacity `jobs.incoming_tasks`.
    """


# ---------------------------------------------------------------------- notifications


@hookspec
def round_started(cluster: ClusterView) -> None:
    """A scheduling round begins: the round's events are applied and `cluster.now` is the
    round's time; nothing has been asked yet (the statistics pass comes next). The place to drop
    caches that hold for one round only, such as what the waiting tasks need in total."""


@hookspec
def machine_added(machine: MachineView, cluster: ClusterView) -> None:
    """A machine joined the graph (Firmament's AddMachine)."""


@hookspec
def machine_removed(machine_id: MachineId, cluster: ClusterView) -> None:
    """A machine left the graph (Firmament's RemoveMachine); it is no longer in `cluster`."""


@hookspec
def task_added(task: TaskView, cluster: ClusterView) -> None:
    """A task joined the graph, when it first became runnable (Firmament's AddTask)."""


@hookspec
def task_removed(task_id: TaskId, cluster: ClusterView) -> None:
    """A task left the graph: it completed, failed or was removed (Firmament's RemoveTask).
    It may no longer be in `cluster`."""


# ---------------------------------------------------------------------- the list

CAPABILITY_HOOKS = ("preemption_enabled",)
SHAPE_HOOKS = (
    "task_equiv_classes",
    "task_preference_arcs",
    "equiv_class_preference_arcs",
    "equiv_class_to_equiv_class_arcs",
)
ARC_HOOKS = (
    "task_to_unscheduled",
    "unscheduled_to_sink",
    "task_to_resource",
    "resource_to_resource",
    "leaf_to_sink",
    "task_to_equiv_class",
    "equiv_class_to_resource",
    "equiv_class_to_equiv_class",
    "task_continuation",
    "task_preemption",
)
STATISTICS_HOOKS = ("prepare_stats", "gather_stats", "update_stats")
NOTIFICATION_HOOKS = (
    "round_started",
    "machine_added",
    "machine_removed",
    "task_added",
    "task_removed",
)

BATCH_HOOKS: dict[str, tuple[str, ...]] = {
    "task_to_unscheduled_batch": ("task_to_unscheduled",),
    "task_continuation_batch": ("task_continuation",),
    "task_preemption_batch": ("task_preemption",),
    "task_to_equiv_classes_batch": ("task_equiv_classes", "task_to_equiv_class"),
    "task_to_resources_batch": ("task_preference_arcs", "task_to_resource"),
    "equiv_class_to_resources_batch": ("equiv_class_preference_arcs", "equiv_class_to_resource"),
    "equiv_class_to_equiv_classes_batch": (
        "equiv_class_to_equiv_class_arcs",
        "equiv_class_to_equiv_class",
    ),
    "resource_to_resource_batch": ("resource_to_resource",),
    "leaf_to_sink_batch": ("leaf_to_sink",),
    "machine_stats_batch": STATISTICS_HOOKS,
    "unscheduled_to_sink_batch": ("unscheduled_to_sink",),
}
"""Each batch hook, and the per-item hooks it stands for."""

ANSWER_HOOKS = CAPABILITY_HOOKS + SHAPE_HOOKS + ARC_HOOKS + STATISTICS_HOOKS + tuple(BATCH_HOOKS)
"""The `firstresult` hooks: the defaults answer every one of them."""
ALL_HOOKS = ANSWER_HOOKS + NOTIFICATION_HOOKS

TASK_ARC_HOOKS = frozenset(
    {
        "task_to_unscheduled",
        "task_to_resource",
        "task_to_equiv_class",
        "task_continuation",
        "task_preemption",
    }
)
"""Hooks describing arcs out of a task node, which carries one unit: min_flow <= 1."""
