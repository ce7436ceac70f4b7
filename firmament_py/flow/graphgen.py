"""Firmament-shaped scheduling flow graphs, for solver benchmarks and tests.

`ClusterGraph` builds the flow network a flow scheduler would hold for a cluster (tasks, per-job
unscheduled aggregators, cluster and rack aggregators, machines, the sink) without running a
scheduler, and then changes it round by round as tasks finish and new jobs arrive.

Two shapes, as in the Firmament paper (section 3.3, Figure 6):

* ``quincy``: locality-oriented. A task has arcs to its job's unscheduled aggregator, to the
  cluster aggregator X, and preference arcs to machines and racks holding at least 10% of its
  input. Running tasks keep all their arcs (they stay eligible for rescheduling) plus a
  continuation arc to their machine. X feeds every rack, a rack every machine in it, with zero
  cost and the slots below as capacity; machines drain `slots` units into the sink.
* ``load-spreading``: waiting tasks have one arc to X; X feeds every machine; each machine drains
  into the sink through one unit arc per slot whose cost grows with the slot's rank, so the
  marginal cost of a machine's next task is proportional to the tasks it already runs.

Costs (integers; one cost unit is 100 MB moved through a top-of-rack switch):

* input data: each task reads 1-6 blocks of a job-specific size, each block stored on three
  machines (two in one rack, one in another, as HDFS does); transfer cost to a machine is
  `1 x (data elsewhere in its rack) + 2 x (data in other racks)` (Quincy's ToR and core costs);
  a rack's cost is that of its worst machine; X's cost assumes all data crosses the core.
* unscheduled: `1000 + 5 x seconds waited`; preempting a running task costs the same as leaving
  it waiting. Continuation: transfer cost to the current machine minus one unit per 10 s run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import numpy.typing as npt

from firmament_py.flow.graph import FlowGraph, NodeKind
from firmament_py.flow.limits import MAX_ID

Int64Array = npt.NDArray[np.int64]
Shape = Literal["quincy", "load-spreading"]

UNSCHEDULED_BASE = 1000
WAIT_COST_PER_SECOND = 5
TOR_COST = 1
CORE_COST = 2
RUN_SECONDS_PER_UNIT = 10
LOAD_COST_PER_TASK = 10
PREFERENCE_FRACTION = 0.1
MAX_PREFERENCES = 10


@dataclass(frozen=True)
class ClusterSpec:
    """What to generate. `running` is the fraction of slots busy; `waiting` a task count."""

    machines: int = 100
    slots_per_machine: int = 12
    machines_per_rack: int = 48
    running: float = 0.5
    waiting: int = 100
    shape: Shape = "quincy"
    seed: int = 0
    round_seconds: float = 10.0

    def __post_init__(self) -> None:
        if self.machines < 1:
            raise ValueError("a cluster needs at least one machine")
        if self.slots_per_machine < 1 or self.machines_per_rack < 1:
            raise ValueError("slots per machine and machines per rack must be positive")
        if not 0.0 <= self.running <= 1.0:
            raise ValueError(f"running fraction {self.running} is not within [0, 1]")
        if self.waiting < 0:
            raise ValueError("waiting task count must be non-negative")
        if self.shape not in ("quincy", "load-spreading"):
            raise ValueError(f"unknown shape {self.shape!r}: use 'quincy' or 'load-spreading'")
        # A node per machine, rack, task and job at most: past the graph's id limit it could
        # not be built (and would run out of memory long before).
        nodes = self.machines * (1 + self.slots_per_machine) + 2 * self.waiting
        if nodes >= MAX_ID:
            raise ValueError(
                f"{self.machines} machines of {self.slots_per_machine} slots and {self.waiting} "
                f"waiting tasks need about {nodes:,} nodes, past the limit of {MAX_ID - 1:,}"
            )

    @property
    def slots(self) -> int:
        return self.machines * self.slots_per_machine


@dataclass
class _Tasks:
    """Per-task bookkeeping, indexed by task node id."""

    job: dict[int, int] = field(default_factory=dict)
    unsched_arc: dict[int, int] = field(default_factory=dict)
    waited: dict[int, float] = field(default_factory=dict)


class ClusterGraph:
    """A generated cluster's flow graph, and the rounds of changes that follow it."""

    def __init__(self, spec: ClusterSpec) -> None:
        self.spec = spec
        self.rng = np.random.default_rng(spec.seed)
        self.graph = FlowGraph(node_hint=spec.slots + spec.waiting + 64)
        g = self.graph
        self.sink = g.add_node(0, NodeKind.SINK)
        self.cluster_agg = g.add_node()
        racks = (spec.machines + spec.machines_per_rack - 1) // spec.machines_per_rack
        self.racks = g.add_nodes(racks)
        self.machines = g.add_nodes(spec.machines, 0, NodeKind.LEAF)
        self.rack_of = np.arange(spec.machines, dtype=np.int64) // spec.machines_per_rack
        self.job_node: dict[int, int] = {}
        self.job_tasks: dict[int, int] = {}
        self.tasks = _Tasks()
        self._next_job = 0
        self._build_resources()
        running = round(spec.running * spec.slots)
        slots = self.rng.permutation(spec.slots)[:running]
        self._add_jobs(running, machine_of=slots // spec.slots_per_machine)
        self._add_jobs(spec.waiting, machine_of=None)
        g.discard_changes()

    # ------------------------------------------------------------------ structure

    def _build_resources(self) -> None:
        g, spec = self.graph, self.spec
        per_rack = np.bincount(self.rack_of, minlength=len(self.racks)) * spec.slots_per_machine
        if spec.shape == "quincy":
            g.add_arcs(self.cluster_agg, self.racks, capacity=per_rack, cost=0)
            g.add_arcs(
                self.racks[self.rack_of], self.machines, capacity=spec.slots_per_machine, cost=0
            )
            g.add_arcs(self.machines, self.sink, capacity=spec.slots_per_machine, cost=0)
        else:
            g.add_arcs(self.cluster_agg, self.machines, capacity=spec.slots_per_machine, cost=0)
            rank = np.tile(np.arange(spec.slots_per_machine), spec.machines)
            g.add_arcs(
                np.repeat(self.machines, spec.slots_per_machine),
                self.sink,
                capacity=1,
                cost=rank * LOAD_COST_PER_TASK,
            )

    def _job_sizes(self, total: int) -> list[int]:
        """Split `total` tasks into jobs: most jobs tiny, most tasks in big jobs (Google trace)."""
        sizes: list[int] = []
        left = total
        while left > 0:
            if self.rng.random() < 0.6:
                size = 1
            else:
                size = int(min(20_000, max(2, self.rng.pareto(1.1) * 20)))
            size = min(size, left)
            sizes.append(size)
            left -= size
        return sizes

    def submit_job(self, tasks: int) -> Int64Array:
        """Submit one job of `tasks` waiting tasks (Figure 9's contention case); return them."""
        if tasks < 1:
            raise ValueError(f"a job needs at least one task, got {tasks}")
        return self._add_jobs(tasks, machine_of=None, sizes=[tasks])

    def _add_jobs(
        self, count: int, machine_of: Int64Array | None, sizes: list[int] | None = None
    ) -> Int64Array:
        """Add `count` tasks in new jobs; running ones (machine_of given) are placed there."""
        if count == 0:
            return np.zeros(0, dtype=np.int64)
        g, spec, rng = self.graph, self.spec, self.rng
        sizes = self._job_sizes(count) if sizes is None else sizes
        jobs = np.arange(self._next_job, self._next_job + len(sizes))
        self._next_job += len(sizes)
        job_nodes = g.add_nodes(len(sizes))
        g.add_arcs(job_nodes, self.sink, capacity=sizes, cost=0)
        job_of_task = np.repeat(np.arange(len(sizes)), sizes)
        tasks = g.add_nodes(count, 1, NodeKind.TASK)
        g.set_supply(self.sink, g.supply(self.sink) - count)
        running = machine_of is not None
        waited = rng.exponential(20.0, count) if running else rng.uniform(0.0, 60.0, count)
        unsched = UNSCHEDULED_BASE + (WAIT_COST_PER_SECOND * waited).astype(np.int64)
        unsched_arcs = g.add_arcs(tasks, job_nodes[job_of_task], capacity=1, cost=unsched)
        for j, node, size in zip(jobs.tolist(), job_nodes.tolist(), sizes, strict=True):
            self.job_node[j] = node
            self.job_tasks[j] = size
        for t, j, a, w in zip(
            tasks.tolist(),
            jobs[job_of_task].tolist(),
            unsched_arcs.tolist(),
            waited.tolist(),
            strict=True,
        ):
            self.tasks.job[t] = j
            self.tasks.unsched_arc[t] = a
            if not running:
                self.tasks.waited[t] = w
        if spec.shape == "quincy":
            self._add_quincy_arcs(tasks, job_of_task, machine_of)
        elif running:
            assert machine_of is not None
            g.add_arcs(tasks, self.machines[machine_of], capacity=1, cost=0)
        else:
            g.add_arcs(tasks, self.cluster_agg, capacity=1, cost=0)
        return tasks

    def _add_quincy_arcs(
        self, tasks: Int64Array, job_of_task: Int64Array, machine_of: Int64Array | None
    ) -> None:
        g, spec, rng = self.graph, self.spec, self.rng
        n = len(tasks)
        m = spec.machines
        job_block_gb = rng.lognormal(np.log(0.8), 0.7, job_of_task.max() + 1)
        blocks = rng.integers(1, 7, n)
        block_gb = job_block_gb[job_of_task]
        input_units = np.maximum(1, np.round(blocks * block_gb * 10)).astype(np.int64)
        # Replicas: (task, machine, units) for every copy of every block.
        owner = np.repeat(np.arange(n), blocks)
        unit = np.repeat(input_units // blocks, blocks)
        first = rng.integers(0, m, len(owner))
        rack_size = spec.machines_per_rack
        same_rack = (first // rack_size) * rack_size + rng.integers(0, rack_size, len(owner))
        same_rack = np.minimum(same_rack, m - 1)
        other = rng.integers(0, m, len(owner))
        rep_task = np.concatenate([owner, owner, owner])
        rep_machine = np.concatenate([first, same_rack, other])
        rep_units = np.concatenate([unit, unit, unit])
        # Data per (task, machine) and per (task, rack); a machine holding two replicas of a
        # block is counted once per copy, as Firmament's model does.
        key = rep_task * m + rep_machine
        mkeys, inv = np.unique(key, return_inverse=True)
        mdata = np.bincount(inv, weights=rep_units).astype(np.int64)
        m_task, m_machine = mkeys // m, mkeys % m
        racks = len(self.racks)
        rkey_all = rep_task * racks + self.rack_of[rep_machine]
        rkeys, rinv = np.unique(rkey_all, return_inverse=True)
        rdata = np.bincount(rinv, weights=rep_units).astype(np.int64)
        r_task, r_rack = rkeys // racks, rkeys % racks
        total = input_units * 3  # every byte is stored three times
        # machine preference costs
        rack_key = m_task * racks + self.rack_of[m_machine]
        rack_data = rdata[np.searchsorted(rkeys, rack_key)]
        remote = total[m_task] - rack_data
        m_cost = TOR_COST * (rack_data - mdata) + CORE_COST * remote
        m_cost = m_cost // 3
        m_pref = mdata >= PREFERENCE_FRACTION * total[m_task]
        # rack preference costs: the worst machine in a rack holds none of the data
        r_cost = (TOR_COST * rdata + CORE_COST * (total[r_task] - rdata)) // 3
        r_pref = rdata >= PREFERENCE_FRACTION * total[r_task]
        x_cost = CORE_COST * input_units
        running = machine_of is not None
        # drop preference arcs to the current machine: the continuation arc replaces them
        if running:
            assert machine_of is not None
            m_pref &= m_machine != machine_of[m_task]
        pm_task, pm_machine, pm_cost = m_task[m_pref], m_machine[m_pref], m_cost[m_pref]
        pr_task, pr_rack, pr_cost = r_task[r_pref], r_rack[r_pref], r_cost[r_pref]
        pm_task, pm_machine, pm_cost = _cap_per_task(pm_task, pm_machine, pm_cost, MAX_PREFERENCES)
        pr_task, pr_rack, pr_cost = _cap_per_task(pr_task, pr_rack, pr_cost, 3)
        g.add_arcs(tasks, self.cluster_agg, capacity=1, cost=x_cost)
        g.add_arcs(tasks[pm_task], self.machines[pm_machine], capacity=1, cost=pm_cost)
        g.add_arcs(tasks[pr_task], self.racks[pr_rack], capacity=1, cost=pr_cost)
        if running:
            assert machine_of is not None
            # transfer cost to the current machine, from the per-(task, machine) table
            here = np.searchsorted(mkeys, np.arange(n) * m + machine_of)
            found = (here < len(mkeys)) & (
                mkeys[np.minimum(here, len(mkeys) - 1)] == (np.arange(n) * m + machine_of)
            )
            to_here = np.where(found, m_cost[np.minimum(here, len(mkeys) - 1)], x_cost)
            run_s = rng.exponential(600.0, n)
            cont = to_here - (run_s // RUN_SECONDS_PER_UNIT).astype(np.int64)
            g.add_arcs(tasks, self.machines[machine_of], capacity=1, cost=cont)

    # ------------------------------------------------------------------ rounds

    def live_tasks(self) -> Int64Array:
        return np.fromiter(self.tasks.job.keys(), dtype=np.int64, count=len(self.tasks.job))

    def next_round(self, churn: float = 0.01, *, arrivals: int | None = None) -> None:
        """Finish `churn` of the live tasks, submit as many new ones, and age the waiting ones.

        `arrivals` overrides the number of new tasks (a large job, say).
        """
        if not 0.0 <= churn <= 1.0:
            raise ValueError(f"churn {churn} is not within [0, 1]")
        g, rng = self.graph, self.rng
        live = self.live_tasks()
        done = rng.choice(live, size=round(churn * len(live)), replace=False)
        for t in done.tolist():
            self._finish(t)
        new = len(done) if arrivals is None else arrivals
        step = self.spec.round_seconds
        for t, waited in list(self.tasks.waited.items()):
            self.tasks.waited[t] = waited + step
            cost = UNSCHEDULED_BASE + int(WAIT_COST_PER_SECOND * (waited + step))
            g.change_arc(self.tasks.unsched_arc[t], cost=cost)
        self._add_jobs(new, machine_of=None)

    def observe(self, flow: Int64Array) -> None:
        """Tell the generator which waiting tasks a solve placed (they stop ageing)."""
        for t in list(self.tasks.waited):
            if flow[self.tasks.unsched_arc[t]] == 0:
                del self.tasks.waited[t]

    def _finish(self, task: int) -> None:
        g = self.graph
        job = self.tasks.job.pop(task)
        del self.tasks.unsched_arc[task]
        self.tasks.waited.pop(task, None)
        g.remove_node(task)
        g.set_supply(self.sink, g.supply(self.sink) + 1)
        self.job_tasks[job] -= 1
        node = self.job_node[job]
        if self.job_tasks[job] == 0:
            g.remove_node(node)
            del self.job_node[job]
            del self.job_tasks[job]
        else:
            (arc,) = g.out_arcs(node)
            g.change_arc(arc, capacity=self.job_tasks[job])


def _cap_per_task(
    task: Int64Array, target: Int64Array, cost: Int64Array, limit: int
) -> tuple[Int64Array, Int64Array, Int64Array]:
    """Keep each task's `limit` cheapest entries (Quincy caps preference arcs per task)."""
    order = np.lexsort((cost, task))
    task, target, cost = task[order], target[order], cost[order]
    starts = np.searchsorted(task, task, side="left")
    rank = np.arange(len(task)) - starts
    keep = rank < limit
    return task[keep], target[keep], cost[keep]
