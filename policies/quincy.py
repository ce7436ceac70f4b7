"""Quincy: run batch tasks close to their input data, trading locality against waiting time
and against preempting tasks that already run.

Source: Isard et al., "Quincy: fair scheduling for distributed computing clusters" (SOSP 2009,
§4.2), as Firmament ports it in src/scheduling/flow/quincy_cost_model.cc (replicated blocks
counted as in sim/simulated_quincy_cost_model.cc); Firmament's OSDI 2016 paper, §3.3 and
Figure 6b, §7.3 for the preference threshold.

Arcs out of a task, and what they cost (one cost unit: one MiB of input read through a rack
switch; Firmament charges per whole GB, which makes every input under 1 GB free to move):

* to each machine holding at least `machine_threshold` (10%, Firmament's default) of the task's
  input: the transfer the placement would need, `tor x (input in the machine's rack but not on
  it) + core x (input outside its rack)`, with tor = 1 and core = 2 per MiB (Firmament's 1 and 2
  per GB: the core switch is the scarcer link);
* to each rack holding at least `rack_threshold` (10%) of it: the worst such cost over the
  rack's machines. The rack node of the resource topology is Quincy's rack aggregator: flow
  that reaches it goes on to any machine of the rack;
* to the cluster aggregator X, which reaches every machine through the pods: the worst cost
  over the whole cluster (the whole input through the core switch, if a rack holds none of it);
* to its job's unscheduled aggregator: `1 + wait_cost_per_second x seconds waited` (Quincy's
  omega x nu; 512 per second is Firmament's 0.5 per second per GB): a task waits for a slot
  near its data for a while, then settles for its rack, then for anywhere. The 1 makes a
  placement that moves no data better than waiting, even at once.

Quincy preempts. A running task keeps its preference arcs (so it may migrate) and has two more:
continuing on its machine costs the transfer cost there, minus `run_credit_per_second` (1,024,
Quincy's theta: one Firmament unit per second) per second of its current run, the work a move
would throw away, minus 1 so that it stays rather than trade places with an equal rival;
preempting it costs what waiting would. Capacities are the defaults': one unit out of a task,
and each machine's slots below every aggregator, rack and pod (Quincy is slot-based: it does
not look at resource requests).

Describing the data. A task's input is a set of blocks and the bytes it reads from each; a
block is stored on one or more machines (its replicas). Give them to the policy either way:

* `DataLayout`, passed as `QuincyPolicy(layout=...)`: `layout.store("blockA", ["m1", "m4"])`
  and `layout.set_input(task_id, {"blockA": 512 << 20})`.
* Labels, for tasks and machines that arrive through events: the task label `quincy.input`
  holds `"blockA:536870912,blockB:1073741824"` (block:bytes, comma-separated), and the machine
  label `quincy.blocks` holds `"blockA,blockC"` (the blocks it has a replica of). A manager
  that knows where a task's blocks are when it submits the task (as HDFS tells a client) may
  say so on the task instead, leaving the machines' labels alone: the task label
  `quincy.replicas` holds a JSON object from block to machines, `{"blockA": ["m1", "m4"]}`.

A task's input is its layout entry if it has one, else its label; a block's replicas are the
machines the layout names, those whose label lists it and, for the task that names them, those
of its `quincy.replicas` label; replicas on machines that are not (or no longer) in the cluster
do not count. A task without input costs nothing to place
anywhere. A malformed `quincy.input` or `quincy.replicas` label makes the hooks about that
task raise ValueError
(the scheduler leaves that task out of the round and reports it).

The scheduler asks for a task's preference arcs when the task joins the graph, and again only
when it changes (updated, placed, evicted), or, for a task with input, when a machine joins or
leaves or a machine's labels change. So describe a task's input and where its blocks are
before submitting it: a later change to a `DataLayout` reaches a task only when the scheduler
next asks about it.

Cost of asking. The policy answers in batch: waiting, preemption and continuation costs are
declared once per task (`TimedArcs`: 512 per second waited; the transfer cost minus 1,024 per
second of the current run), so a round reprices running and waiting tasks in arrays without
asking; a task without input costs no locality work at all. The per-item hooks give the same
answers, for tests and tools that ask one question at a time.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np

from firmament_py.sdk import (
    MAX_COST,
    ArcDescriptor,
    Clock,
    ClusterView,
    EquivClassId,
    MachineId,
    MachineView,
    RackId,
    ResourceArcs,
    ResourceKind,
    ResourceRef,
    ResourceView,
    TaskArcs,
    TaskBatch,
    TaskId,
    TaskView,
    Time,
    TimedArcs,
    Topology,
    hookimpl,
    selector_class,
)

__all__ = [
    "BLOCKS_LABEL",
    "CLUSTER_AGGREGATOR",
    "INPUT_LABEL",
    "REPLICAS_LABEL",
    "DataLayout",
    "QuincyPolicy",
    "parse_blocks_label",
    "parse_input_label",
    "parse_replicas_label",
]

INPUT_LABEL = "quincy.input"
"""Task label: the blocks the task reads, as `"block:bytes,block:bytes"`."""
BLOCKS_LABEL = "quincy.blocks"
"""Machine label: the blocks the machine holds a replica of, as `"block,block"`."""
REPLICAS_LABEL = "quincy.replicas"
"""Task label: where the blocks it reads are, as a JSON object `{"block": ["machine", ...]}`."""
CLUSTER_AGGREGATOR: EquivClassId = "quincy-cluster-aggregator"
"""Quincy's X: the class every unconstrained task has an arc to, reaching every machine."""

MIB = 1 << 20
MICROSECONDS_PER_SECOND = 1_000_000


# ---------------------------------------------------------------------- describing the data


def parse_input_label(value: str) -> dict[str, int]:
    """The blocks and byte counts in a `quincy.input` label; ValueError if it is malformed."""
    blocks: dict[str, int] = {}
    for item in value.split(","):
        if not item.strip():
            continue
        block, separator, size = item.strip().rpartition(":")
        block, size = block.strip(), size.strip()
        if not separator or not block or not (size.isascii() and size.isdigit()):
            raise ValueError(
                f"label {INPUT_LABEL!r}: {item.strip()!r} is not 'block:bytes' (in {value!r})"
            )
        if block in blocks:
            raise ValueError(f"label {INPUT_LABEL!r}: block {block!r} appears twice in {value!r}")
        blocks[block] = int(size)
    return blocks


def parse_blocks_label(value: str) -> frozenset[str]:
    """The block names in a `quincy.blocks` label."""
    return frozenset(block.strip() for block in value.split(",") if block.strip())


def parse_replicas_label(value: str) -> dict[str, list[MachineId]]:
    """The machines holding each block in a `quincy.replicas` label; ValueError if it is not a
    JSON object from block names to lists of machine names."""
    try:
        replicas = json.loads(value)
    except ValueError as exc:
        raise ValueError(f"label {REPLICAS_LABEL!r}: not JSON ({exc}) in {value[:80]!r}") from None
    if not isinstance(replicas, dict) or not all(
        isinstance(machines, list) and all(isinstance(m, str) for m in machines)
        for machines in replicas.values()
    ):
        raise ValueError(
            f"label {REPLICAS_LABEL!r}: need an object from block to a list of machine names, "
            f"got {value[:80]!r}"
        )
    return replicas


class DataLayout:
    """Where blocks are stored and what each task reads: the data a program (a simulator, a
    test, a file-system adapter) hands to the policy directly. It may change between rounds;
    the policy reads it afresh every round."""

    def __init__(
        self,
        replicas: Mapping[str, Iterable[MachineId]] | None = None,
        inputs: Mapping[TaskId, Mapping[str, int]] | None = None,
    ) -> None:
        self._replicas: dict[str, frozenset[MachineId]] = {}
        self._inputs: dict[TaskId, Mapping[str, int]] = {}
        for block, machines in (replicas or {}).items():
            self.store(block, machines)
        for task_id, blocks in (inputs or {}).items():
            self.set_input(task_id, blocks)

    def __repr__(self) -> str:
        return f"DataLayout({len(self._replicas)} blocks, {len(self._inputs)} task inputs)"

    def store(self, block: str, machines: Iterable[MachineId]) -> None:
        """Record that `block` has a replica on each of `machines` (replacing what was known)."""
        if not isinstance(block, str) or not block:
            raise ValueError(f"a block name must be a non-empty str, got {block!r}")
        self._replicas[block] = frozenset(machines)

    def set_input(self, task_id: TaskId, blocks: Mapping[str, int]) -> None:
        """Record that task `task_id` reads `blocks[b]` bytes of each block `b`."""
        for block, size in blocks.items():
            if not isinstance(size, int) or isinstance(size, bool) or size < 0:
                raise ValueError(
                    f"task {task_id} reads {size!r} bytes of {block!r}: need an int >= 0"
                )
        self._inputs[task_id] = MappingProxyType(dict(blocks))

    def forget_input(self, task_id: TaskId) -> None:
        """Drop what is known of task `task_id`'s input (its label applies again)."""
        self._inputs.pop(task_id, None)

    def replicas(self, block: str) -> frozenset[MachineId]:
        """The machines the layout says hold `block` (empty if it knows none)."""
        return self._replicas.get(block, frozenset())

    @property
    def inputs(self) -> Mapping[TaskId, Mapping[str, int]]:
        """What each task the layout knows of reads (a read-only view)."""
        return MappingProxyType(self._inputs)

    def input_of(self, task_id: TaskId) -> Mapping[str, int] | None:
        """The blocks task `task_id` reads and how many bytes of each, if the layout knows."""
        return self._inputs.get(task_id)


@dataclass(frozen=True, slots=True)
class _Locality:
    """How much of one task's input sits on each machine and in each rack (a block counts once
    per machine and once per rack however many replicas it has there)."""

    input_bytes: int
    on_machine: Mapping[MachineId, int]
    on_rack: Mapping[RackId, int]
    holders: Mapping[RackId, tuple[int, int]]
    """By rack: how many of its machines hold some of the input, and the least any of them
    holds (what the rack's worst machine has, when every machine holds some)."""


def _holding(on: Mapping[str, int], threshold: float, input_bytes: int) -> list[str]:
    """The machines or racks in `on` that hold at least `threshold` of an input of
    `input_bytes`, those with most first."""
    if input_bytes == 0:
        return []
    enough = threshold * input_bytes
    return sorted((key for key, size in on.items() if size >= enough), key=lambda k: (-on[k], k))


# ---------------------------------------------------------------------- the policy


class QuincyPolicy:
    """Quincy's locality policy (see the module docstring for the graph and its costs).

    All arguments are optional, so the entry point `quincy` can make one with none. Costs are
    ints in the units of the module docstring.
    """

    def __init__(
        self,
        layout: DataLayout | None = None,
        *,
        machine_threshold: float = 0.1,
        rack_threshold: float = 0.1,
        tor_cost_per_mib: int = 1,
        core_cost_per_mib: int = 2,
        wait_cost_per_second: int = 512,
        run_credit_per_second: int = 1024,
    ) -> None:
        for name, fraction in (
            ("machine_threshold", machine_threshold),
            ("rack_threshold", rack_threshold),
        ):
            if not 0.0 <= fraction <= 1.0:
                raise ValueError(f"{name} must lie in [0, 1], got {fraction}")
        for name, cost in (
            ("tor_cost_per_mib", tor_cost_per_mib),
            ("core_cost_per_mib", core_cost_per_mib),
            ("wait_cost_per_second", wait_cost_per_second),
            ("run_credit_per_second", run_credit_per_second),
        ):
            if not isinstance(cost, int) or isinstance(cost, bool) or cost < 0:
                raise ValueError(f"{name} must be an int >= 0, got {cost!r}")
        self.layout = layout if layout is not None else DataLayout()
        self.machine_threshold = machine_threshold
        self.rack_threshold = rack_threshold
        self.tor_cost_per_mib = tor_cost_per_mib
        self.core_cost_per_mib = core_cost_per_mib
        self.wait_cost_per_second = wait_cost_per_second
        self.run_credit_per_second = run_credit_per_second
        # Caches for one round, emptied when the next starts: the replicas that machine
        # labels declare, each task's locality and each rack's machine count.
        self._labelled_replicas: dict[str, list[MachineId]] | None = None
        self._localities: dict[TaskId, _Locality] = {}
        self._rack_sizes: dict[str, int] = {}

    def __repr__(self) -> str:
        return f"QuincyPolicy({self.layout!r})"

    # ------------------------------------------------------------------ locality and costs

    def _replicas(self, block: str, cluster: ClusterView) -> set[MachineId]:
        if self._labelled_replicas is None:
            labelled: dict[str, list[MachineId]] = {}
            for machine in cluster.machines.values():
                for name in parse_blocks_label(machine.labels.get(BLOCKS_LABEL, "")):
                    labelled.setdefault(name, []).append(machine.machine_id)
            self._labelled_replicas = labelled
        machines = set(self.layout.replicas(block))
        machines.update(self._labelled_replicas.get(block, ()))
        return {machine_id for machine_id in machines if machine_id in cluster.machines}

    def _reading_rows(self, tasks: TaskBatch) -> list[int]:
        """The rows of `tasks` whose task reads anything (a layout entry, or the input label):
        only their costs depend on where data sits, so only they take per-task work."""
        inputs = self.layout.inputs
        if not inputs:  # the labels say it all
            return [row for row, labels in enumerate(tasks.labels) if INPUT_LABEL in labels]
        rows = enumerate(zip(tasks.task_ids.tolist(), tasks.labels, strict=True))
        return [row for row, (task_id, labels) in rows if _reads(inputs.get(task_id), labels)]

    def _input(self, task: TaskView) -> Mapping[str, int]:
        known = self.layout.input_of(task.task_id)
        if known is not None:
            return known
        label = task.labels.get(INPUT_LABEL)
        if label is None:
            return {}
        try:
            return parse_input_label(label)
        except ValueError as exc:
            raise ValueError(f"task {task.task_id}: {exc}") from None

    @staticmethod
    def _named_replicas(task: TaskView) -> Mapping[str, list[MachineId]]:
        label = task.labels.get(REPLICAS_LABEL)
        if label is None:
            return {}
        try:
            return parse_replicas_label(label)
        except ValueError as exc:
            raise ValueError(f"task {task.task_id}: {exc}") from None

    def _locality(self, task: TaskView, cluster: ClusterView) -> _Locality:
        locality = self._localities.get(task.task_id)
        if locality is not None:
            return locality
        inputs = self._input(task)
        named = self._named_replicas(task)
        on_machine: dict[MachineId, int] = {}
        on_rack: dict[RackId, int] = {}
        rack_of: dict[MachineId, RackId] = {}
        for block, size in inputs.items():
            machines = self._replicas(block, cluster)
            machines.update(m for m in named.get(block, ()) if m in cluster.machines)
            for machine_id in machines:
                on_machine[machine_id] = on_machine.get(machine_id, 0) + size
                if machine_id not in rack_of:
                    rack_of[machine_id] = cluster.machine(machine_id).rack_id
            for rack_id in {rack_of[machine_id] for machine_id in machines}:
                on_rack[rack_id] = on_rack.get(rack_id, 0) + size
        holders: dict[RackId, tuple[int, int]] = {}
        for machine_id, held in on_machine.items():
            rack_id = rack_of[machine_id]
            count, least = holders.get(rack_id, (0, held))
            holders[rack_id] = (count + 1, min(least, held))
        locality = _Locality(sum(inputs.values()), on_machine, on_rack, holders)
        self._localities[task.task_id] = locality
        return locality

    def _transfer_cost(self, locality: _Locality, machine: MachineView) -> int:
        """What running on `machine` costs in data moved: through its rack switch, the input in
        its rack but not on it; through the core switch, the input outside its rack."""
        local = locality.on_machine.get(machine.machine_id, 0)
        return self._cost(locality, local, locality.on_rack.get(machine.rack_id, 0))

    def _cost(self, locality: _Locality, local: int, in_rack: int) -> int:
        """The transfer cost on a machine holding `local` bytes of the input, in a rack holding
        `in_rack` bytes: the fewer bytes on the machine, the higher."""
        through_tor = in_rack - local
        through_core = locality.input_bytes - in_rack
        cost = (self.tor_cost_per_mib * through_tor + self.core_cost_per_mib * through_core) // MIB
        return min(cost, MAX_COST)

    def _rack_cost(self, locality: _Locality, rack: ResourceView, cluster: ClusterView) -> int:
        """The worst transfer cost over the rack's machines, what the rack arc promises: that
        of the machine holding the least input (none, unless every machine holds some)."""
        machines = self._rack_sizes.get(rack.id)
        if machines is None:
            machines = self._rack_sizes[rack.id] = len(rack.children)
        if machines == 0:
            return 0
        count, least = locality.holders.get(rack.id, (0, 0))
        local = least if count == machines else 0
        return self._cost(locality, local, locality.on_rack.get(rack.id, 0))

    def _cluster_cost(self, locality: _Locality, cluster: ClusterView) -> int:
        """The worst transfer cost over the cluster: what the arc to X promises."""
        if len(locality.on_rack) < len(cluster.racks):
            # Some rack holds none of the input: the whole of it would cross the core switch.
            return min(self.core_cost_per_mib * locality.input_bytes // MIB, MAX_COST)
        return max(
            (self._rack_cost(locality, rack, cluster) for rack in cluster.racks.values()),
            default=0,
        )

    def _waiting_cost(self, task: TaskView, now: Time) -> int:
        waited = task.unscheduled_time(now)
        return min(1 + self.wait_cost_per_second * waited // MICROSECONDS_PER_SECOND, MAX_COST)

    @staticmethod
    def _allowed(task: TaskView, machine: MachineView) -> bool:
        return all(selector.matches(machine.labels) for selector in task.selectors)

    # ------------------------------------------------------------------ capability

    @hookimpl
    def preemption_enabled(self) -> bool:
        return True

    # ------------------------------------------------------------------ batch forms

    @hookimpl
    def task_to_unscheduled_batch(self) -> TimedArcs:
        return TimedArcs(1, per_second=self.wait_cost_per_second, clock=Clock.WAITED)

    @hookimpl
    def task_preemption_batch(self) -> TimedArcs:
        # What waiting would cost: a running task's waiting clock stands still.
        return TimedArcs(1, per_second=self.wait_cost_per_second, clock=Clock.WAITED)

    @hookimpl
    def task_continuation_batch(self, tasks: TaskBatch, cluster: ClusterView) -> TimedArcs:
        transfer = np.zeros(len(tasks), dtype=np.int64)
        for row in self._reading_rows(tasks):
            task = tasks[row]
            assert task.machine_id is not None
            locality = self._locality(task, cluster)
            transfer[row] = self._transfer_cost(locality, cluster.machine(task.machine_id))
        return TimedArcs(
            transfer - 1, min_flow=0, per_second=-self.run_credit_per_second, clock=Clock.THIS_RUN
        )

    @hookimpl
    def task_to_equiv_classes_batch(
        self, tasks: TaskBatch, cluster: ClusterView
    ) -> TaskArcs[EquivClassId]:
        targets = [selector_class(s) if s else CLUSTER_AGGREGATOR for s in tasks.selectors]
        costs = np.zeros(len(tasks), dtype=np.int64)
        depends = np.zeros(len(tasks), dtype=np.bool_)
        for row in self._reading_rows(tasks):  # their costs depend on where the input is
            costs[row] = self._cluster_cost(self._locality(tasks[row], cluster), cluster)
            depends[row] = True
        return TaskArcs.one_each(targets, cost=costs, depends_on_topology=depends)

    @hookimpl
    def task_to_resources_batch(
        self, tasks: TaskBatch, cluster: ClusterView
    ) -> TaskArcs[ResourceRef]:
        rows: list[int] = []
        targets: list[ResourceRef] = []
        costs: list[int] = []
        depends = np.zeros(len(tasks), dtype=np.bool_)
        for row in self._reading_rows(tasks):
            task = tasks[row]
            depends[row] = True
            for ref in self.task_preference_arcs(task, cluster):
                rows.append(row)
                targets.append(ref)
                costs.append(self.task_to_resource(task, cluster.resource(ref), cluster).cost)
        return TaskArcs(rows, targets, costs, depends_on_topology=depends)

    @hookimpl
    def equiv_class_to_resources_batch(
        self, equiv_class: EquivClassId, topology: Topology
    ) -> ResourceArcs | None:
        if equiv_class != CLUSTER_AGGREGATOR:
            return None
        pods = topology.pods
        return ResourceArcs.to_pods(
            np.arange(len(pods), dtype=np.int64),
            0,
            pods.stats.schedulable_slots(preemption_enabled=True),
        )

    # ------------------------------------------------------------------ shape, per item

    @hookimpl
    def task_equiv_classes(self, task: TaskView) -> Sequence[EquivClassId] | None:
        # A task with label selectors takes the defaults' class of its selectors instead: it
        # reaches only the machines it may run on. Its arc there costs what X's would.
        if task.selectors:
            return None
        return (CLUSTER_AGGREGATOR,)

    @hookimpl
    def task_preference_arcs(self, task: TaskView, cluster: ClusterView) -> list[ResourceRef]:
        locality = self._locality(task, cluster)
        preferred: list[ResourceRef] = []
        for machine_id in _holding(
            locality.on_machine, self.machine_threshold, locality.input_bytes
        ):
            machine = cluster.machine(machine_id)
            # A running task reaches its own machine through its continuation arc.
            if machine_id != task.machine_id and self._allowed(task, machine):
                preferred.append(machine.ref)
        for rack_id in _holding(locality.on_rack, self.rack_threshold, locality.input_bytes):
            rack = cluster.racks[rack_id]
            # Flow into a rack may go on to any of its machines: each must be allowed.
            if not task.selectors or all(
                self._allowed(task, cluster.machine(ref.id)) for ref in rack.children
            ):
                preferred.append(rack.ref)
        return preferred

    @hookimpl
    def equiv_class_preference_arcs(
        self, equiv_class: EquivClassId, cluster: ClusterView
    ) -> list[ResourceRef] | None:
        if equiv_class != CLUSTER_AGGREGATOR:
            return None
        return [ResourceRef.pod(pod_id) for pod_id in cluster.pods]

    # ------------------------------------------------------------------ arc descriptors

    @hookimpl
    def task_to_unscheduled(self, task: TaskView, cluster: ClusterView) -> ArcDescriptor:
        return ArcDescriptor(self._waiting_cost(task, cluster.now))

    @hookimpl
    def task_to_resource(
        self, task: TaskView, resource: ResourceView, cluster: ClusterView
    ) -> ArcDescriptor:
        locality = self._locality(task, cluster)
        if resource.kind is ResourceKind.MACHINE:
            return ArcDescriptor(self._transfer_cost(locality, cluster.machine(resource.id)))
        return ArcDescriptor(self._rack_cost(locality, resource, cluster))  # tasks prefer no pod

    @hookimpl
    def task_to_equiv_class(self, task: TaskView, cluster: ClusterView) -> ArcDescriptor:
        return ArcDescriptor(self._cluster_cost(self._locality(task, cluster), cluster))

    @hookimpl
    def task_continuation(
        self, task: TaskView, machine: MachineView, cluster: ClusterView
    ) -> ArcDescriptor:
        started = task.start_time if task.start_time is not None else cluster.now
        credit = self.run_credit_per_second * (cluster.now - started) // MICROSECONDS_PER_SECOND
        cost = self._transfer_cost(self._locality(task, cluster), machine) - credit - 1
        return ArcDescriptor(max(cost, -MAX_COST), capacity=1, min_flow=0)

    @hookimpl
    def task_preemption(self, task: TaskView, cluster: ClusterView) -> ArcDescriptor:
        return ArcDescriptor(self._waiting_cost(task, cluster.now))

    # ------------------------------------------------------------------ statistics

    @hookimpl
    def round_started(self) -> None:
        """Start a new round: machine labels, the layout and the topology may have changed, so
        the caches built from them are dropped."""
        self._labelled_replicas = None
        self._localities.clear()
        self._rack_sizes.clear()
        return None


def _reads(known: Mapping[str, int] | None, labels: Mapping[str, str]) -> bool:
    """Whether a task reads input: what the layout knows of it, else its input label."""
    return bool(known) if known is not None else INPUT_LABEL in labels
