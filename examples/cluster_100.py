"""A 100-machine cluster scheduled under every installed policy: what "the policy SDK and the
scheduling core work" means, end to end, through the public API only.

For each policy the script builds the same cluster (10 racks of 10 machines in two pods; most
machines standard, every fifth a large one with a GPU; half the racks with SSDs; data blocks
replicated three times across racks), hands a mix of jobs to `Scheduler.handle` as events, and
runs rounds one simulated second apart until the cluster is quiet. Then churn: a third of the
running tasks complete, the busiest machine fails (its tasks are re-queued) and new jobs
arrive; rounds again until quiet. Two tables per phase compare the policies, each narrow
enough for an 80-column terminal: what became of the tasks (placed, waiting, refused, policy
errors, moved), and how the machines were used and what the rounds cost (machines used, the
spread of tasks and of CPU reservations across machines, rounds, milliseconds spent in the
solver and in whole rounds).

The jobs take about half the slots, and every machine has room in every resource for as many
of the largest tasks as it has slots, so a free slot always has room for any task and policies
that count only slots (trivial, random, load-spreading, quincy) are never refused a placement.
Whether every task is placed depends on the policy: one that fills the GPU machines with other
work strands ml tasks. The tables count such tasks as waiting, and separately the waiting tasks
that would fit on some machine right now, which should be none once the cluster is quiet
(Quincy lets a task wait a second or two for a slot near its data first). The jobs:

========  ==========================================================================
web       small services: 0.5 cores, 1 GiB, 10 MB/s each way
batch     data-parallel jobs: 1 core, 4 GiB, 40 MB/s in; each task reads one 256 MiB
          block, named in the `quincy.input` label (machines list the blocks they
          hold in `quincy.blocks`), which is how the quincy policy learns the layout
ml        2 cores, 8 GiB, 60 MB/s in; selector `gpu=true`
db        1 core, 8 GiB, 20 MB/s each way; selector `disk=ssd`
========  ==========================================================================

A policy that fails to load (one still being written, say) is skipped with a note; one that
fails during a round is reported and makes the exit status 1. Times are wall-clock: a tiny round
first loads the compiled kernels, but with `--solver race` each policy's scheduler starts its own
worker processes, and that shows in its first phase. Run::

    python examples/cluster_100.py [--policy NAME ...] [--solver NAME] [--machines N] [--seed N]

The functions are the API the tests use: `build_cluster` (the machines and where data lives),
`workload` (the jobs), `drive` (the phases, on a given `Scheduler`), `run_policy` (one policy,
start to finish) and `main`.
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from rich.console import Console
from rich.table import Table

from firmament_py.model import (
    ClusterEvent,
    LabelSelector,
    Machine,
    MachineAdded,
    MachineFailed,
    Resources,
    Task,
    TaskCompleted,
    TaskState,
    TaskSubmitted,
    matches,
)
from firmament_py.scheduler import DeltaKind, RoundResult, Scheduler
from firmament_py.sdk import PolicyError, available_policies, load_policy
from firmament_py.sim.wording import plural
from firmament_py.solvers import SolverError, solver_names

SECOND = 1_000_000
"""Times are microseconds; rounds run one simulated second apart."""
MIB = 1 << 20
GIB = 1 << 30
MB_PER_S = 1_000_000

RACK_SIZE = 10
RACKS_PER_POD = 5
BLOCK_BYTES = 256 * MIB
REPLICAS = 3

DEFAULT_SOLVER = "cost-scaling"
"""The scheduler's default: steady on every graph shape (docs/solvers.md)."""

INITIAL_LOAD = {"web": 0.15, "batch": 0.25, "ml": 0.10, "db": 0.05}
"""The initial jobs, as fractions of the cluster's slots (55% in all)."""
CHURN_LOAD = {"web": 0.05, "batch": 0.15}
"""The jobs that arrive with the churn, as fractions of the cluster's slots."""

STANDARD = (16, Resources(32_000, 128 * GIB, 2_000 * GIB, 1_250 * MB_PER_S, 1_250 * MB_PER_S))
LARGE = (32, Resources(64_000, 256 * GIB, 4_000 * GIB, 3_125 * MB_PER_S, 3_125 * MB_PER_S))
"""(slots, capacity) of the two machine types: 10 and 25 Gb/s links."""

REQUESTS = {
    "web": Resources(500, 1 * GIB, 0, 10 * MB_PER_S, 10 * MB_PER_S),
    "batch": Resources(1_000, 4 * GIB, 0, 40 * MB_PER_S, 0),
    "ml": Resources(2_000, 8 * GIB, 0, 60 * MB_PER_S, 0),
    "db": Resources(1_000, 8 * GIB, 0, 20 * MB_PER_S, 20 * MB_PER_S),
}
SELECTORS = {
    "ml": (LabelSelector.equals("gpu", "true"),),
    "db": (LabelSelector.equals("disk", "ssd"),),
}


# ---------------------------------------------------------------------- the cluster


@dataclass(frozen=True)
class Cluster:
    """The machines to add, and the data they hold: `blocks` maps each block to the machines
    with a replica (also listed in each machine's `quincy.blocks` label)."""

    machines: tuple[MachineAdded, ...]
    blocks: dict[str, tuple[str, ...]]

    @property
    def slots(self) -> int:
        return sum(m.slots for m in self.machines)

    @property
    def racks(self) -> int:
        return len({m.rack_id for m in self.machines})

    @property
    def pods(self) -> int:
        return len({m.pod_id for m in self.machines})


def build_cluster(machines: int = 100, *, seed: int = 0) -> Cluster:
    """`machines` machines, RACK_SIZE to a rack and RACKS_PER_POD racks to a pod. Every fifth
    machine is LARGE and labelled `gpu=true`; even racks have `disk=ssd`, odd ones `disk=hdd`.
    Two blocks of data per machine are stored HDFS-style: one replica on a random machine, two
    on one other rack (when there is one)."""
    if machines < 1:
        raise ValueError(f"a cluster needs at least one machine, got {machines}")
    rng = random.Random(seed)
    names = [f"r{i // RACK_SIZE:02d}m{i % RACK_SIZE}" for i in range(machines)]
    racks: dict[int, list[str]] = {}
    for i, name in enumerate(names):
        racks.setdefault(i // RACK_SIZE, []).append(name)
    blocks: dict[str, tuple[str, ...]] = {}
    for b in range(2 * machines):
        first = rng.randrange(machines)
        others = [r for r in racks if r != first // RACK_SIZE] or [first // RACK_SIZE]
        pool = [m for m in racks[rng.choice(others)] if m != names[first]]
        blocks[f"blk{b:04d}"] = (names[first], *rng.sample(pool, min(REPLICAS - 1, len(pool))))
    held: dict[str, list[str]] = {name: [] for name in names}
    for block, replicas in blocks.items():
        for name in replicas:
            held[name].append(block)
    events = []
    for i, name in enumerate(names):
        rack = i // RACK_SIZE
        large = i % 5 == 4
        slots, capacity = LARGE if large else STANDARD
        labels = {"disk": "ssd" if rack % 2 == 0 else "hdd", "quincy.blocks": ",".join(held[name])}
        if large:
            labels["gpu"] = "true"
        events.append(
            MachineAdded(
                time=0,
                machine_id=name,
                capacity=capacity,
                slots=slots,
                rack_id=f"rack{rack:02d}",
                pod_id=f"pod{rack // RACKS_PER_POD}",
                labels=labels,
            )
        )
    return Cluster(tuple(events), blocks)


# ---------------------------------------------------------------------- the jobs


def job_tasks(
    kind: str,
    job_id: str,
    count: int,
    *,
    first_task: int,
    time: int,
    cluster: Cluster,
    rng: random.Random,
) -> list[TaskSubmitted]:
    """`count` tasks of one job of `kind` (see the module docstring), ids from `first_task`."""
    block_names = sorted(cluster.blocks)
    tasks = []
    for task_id in range(first_task, first_task + count):
        labels = {"job-kind": kind}
        if kind == "batch":
            labels["quincy.input"] = f"{rng.choice(block_names)}:{BLOCK_BYTES}"
        tasks.append(
            TaskSubmitted(
                time=time,
                task_id=task_id,
                job_id=job_id,
                request=REQUESTS[kind],
                labels=labels,
                selectors=SELECTORS.get(kind, ()),
            )
        )
    return tasks


def workload(
    cluster: Cluster,
    load: dict[str, float],
    *,
    first_task: int,
    time: int,
    rng: random.Random,
    tag: str,
) -> list[TaskSubmitted]:
    """Jobs of each kind in `load`, sized as fractions of the cluster's slots (at least one
    task each); web and batch work is split into jobs of about 100 tasks."""
    tasks: list[TaskSubmitted] = []
    for kind, fraction in load.items():
        total = max(1, round(fraction * cluster.slots))
        jobs = max(1, round(total / 100)) if kind in ("web", "batch") else 1
        for j in range(jobs):
            count = total // jobs + (1 if j < total % jobs else 0)
            tasks += job_tasks(
                kind,
                f"{tag}-{kind}-{j}",
                count,
                first_task=first_task + len(tasks),
                time=time,
                cluster=cluster,
                rng=rng,
            )
    return tasks


# ---------------------------------------------------------------------- running


@dataclass(frozen=True)
class PhaseSummary:
    """The cluster at the end of one phase, and what the phase's rounds did."""

    phase: str
    submitted: int
    """tasks submitted so far"""
    completed: int
    """tasks completed so far"""
    placed: int
    """tasks running at the end"""
    waiting: int
    waiting_that_fit: int
    """waiting tasks that some live machine has a free slot, the resources and the labels for"""
    refused: int
    """decisions the cluster state refused, in this phase"""
    task_errors: int
    """policy errors about single tasks, in this phase"""
    moved: int
    """preemptions and migrations, in this phase"""
    machines: int
    machines_used: int
    tasks_per_machine: tuple[int, int]
    """fewest and most tasks on a live machine"""
    cpu_utilisation: tuple[float, float]
    """lowest and highest share of a live machine's cpu that running tasks reserve"""
    rounds: int
    quiet: bool
    """whether the last round decided nothing"""
    solver_seconds: float
    round_seconds: float

    @property
    def task_spread(self) -> int:
        return self.tasks_per_machine[1] - self.tasks_per_machine[0]

    @property
    def cpu_spread(self) -> float:
        return self.cpu_utilisation[1] - self.cpu_utilisation[0]


@dataclass(frozen=True)
class Summary:
    """One policy's run: a summary per phase."""

    policy: str
    solver: str
    phases: tuple[PhaseSummary, ...]


def settle(
    scheduler: Scheduler, start: int, *, patience: int = 3, max_rounds: int = 50
) -> tuple[list[RoundResult], int]:
    """Run rounds one simulated second apart from `start` until a round decides nothing and no
    task waits, or `patience` rounds in a row decided nothing (a policy may keep tasks waiting
    on purpose, as Quincy does near their data), or `max_rounds` ran. Returns the rounds and
    the time of the last one."""
    results: list[RoundResult] = []
    idle = 0
    time = start
    for _ in range(max_rounds):
        result = scheduler.run_round(time)
        results.append(result)
        idle = 0 if result.decided else idle + 1
        if idle and (result.waiting_tasks == 0 or idle >= patience):
            break
        time += SECOND
    return results, time


def fits_somewhere(task: Task, machines: Sequence[Machine]) -> bool:
    """Whether some machine has a free slot, room for the task's request and matching labels:
    the placement the cluster state would accept now."""
    return any(
        m.free_slots > 0 and task.request.fits_within(m.free) and matches(task.selectors, m.labels)
        for m in machines
    )


def summarise(
    scheduler: Scheduler, phase: str, results: Sequence[RoundResult], *, submitted: int
) -> PhaseSummary:
    state = scheduler.state
    tasks = list(state.tasks.values())
    machines = list(state.machines.values())
    waiting = [t for t in tasks if t.state is TaskState.RUNNABLE]
    per_machine = [len(m.running_task_ids) for m in machines] or [0]
    cpu = [
        m.reserved.cpu_millicores / m.capacity.cpu_millicores
        for m in machines
        if m.capacity.cpu_millicores
    ] or [0.0]
    return PhaseSummary(
        phase=phase,
        submitted=submitted,
        completed=sum(1 for t in tasks if t.state is TaskState.COMPLETED),
        placed=sum(1 for t in tasks if t.state is TaskState.RUNNING),
        waiting=len(waiting),
        waiting_that_fit=sum(1 for t in waiting if fits_somewhere(t, machines)),
        refused=sum(len(r.refused) for r in results),
        task_errors=sum(len(r.task_errors) for r in results),
        moved=sum(r.count(DeltaKind.PREEMPT) + r.count(DeltaKind.MIGRATE) for r in results),
        machines=len(machines),
        machines_used=sum(1 for n in per_machine if n),
        tasks_per_machine=(min(per_machine), max(per_machine)),
        cpu_utilisation=(min(cpu), max(cpu)),
        rounds=len(results),
        quiet=bool(results) and not results[-1].decided,
        solver_seconds=sum(r.timings.get("solver_seconds", 0.0) for r in results),
        round_seconds=sum(r.timings.get("total_seconds", 0.0) for r in results),
    )


def drive(scheduler: Scheduler, cluster: Cluster, *, seed: int = 0) -> Summary:
    """The two phases on `scheduler` (which should be fresh): the cluster and the initial jobs,
    rounds until quiet; then churn, rounds until quiet. Checks the cluster state's invariants
    after each phase (`ClusterState.validate` raises if one is broken)."""
    rng = random.Random(seed)
    events: list[ClusterEvent] = [*cluster.machines]
    initial = workload(cluster, INITIAL_LOAD, first_task=0, time=0, rng=rng, tag="initial")
    events += initial
    for event in events:
        scheduler.handle(event)
    results, time = settle(scheduler, 0)
    scheduler.state.validate()
    phases = [summarise(scheduler, "initial", results, submitted=len(initial))]

    # Churn, one second after the cluster went quiet.
    time += SECOND
    running = sorted(
        t.task_id for t in scheduler.state.tasks.values() if t.state is TaskState.RUNNING
    )
    churn: list[ClusterEvent] = [
        TaskCompleted(time=time, task_id=task_id)
        for task_id in sorted(rng.sample(running, len(running) // 3))
    ]
    busiest = max(scheduler.state.machines.values(), key=lambda m: len(m.running_task_ids))
    churn.append(MachineFailed(time=time, machine_id=busiest.machine_id, reason="churn"))
    arrivals = workload(
        cluster, CHURN_LOAD, first_task=len(initial), time=time, rng=rng, tag="churn"
    )
    churn += arrivals
    for event in churn:
        scheduler.handle(event)
    results, time = settle(scheduler, time)
    scheduler.state.validate()
    submitted = len(initial) + len(arrivals)
    phases.append(summarise(scheduler, "churn", results, submitted=submitted))
    return Summary(scheduler.policy.name, scheduler.solver.algorithm, tuple(phases))


def run_policy(
    name: str, *, machines: int = 100, solver: str = DEFAULT_SOLVER, seed: int = 0
) -> Summary:
    """Run the installed policy `name` on a fresh cluster of `machines` machines.

    Raises PolicyError if the policy cannot be loaded or fails in a round, SolverError if the
    solver fails, and InvariantViolation if the cluster state contradicts itself (a bug).
    """
    policy = load_policy(name)
    cluster = build_cluster(machines, seed=seed)
    with Scheduler(policy, solver=solver) as scheduler:
        return drive(scheduler, cluster, seed=seed)


class DefaultsOnly:
    """A policy with no hooks: the SDK's defaults alone."""


def warm_up(solver: str) -> None:
    """One tiny round under `solver`, so that the first policy's timings do not include loading
    (or compiling) the solver's and the graph's compiled kernels."""
    with Scheduler(DefaultsOnly(), solver=solver) as scheduler:
        scheduler.handle(MachineAdded(time=0, machine_id="m", capacity=Resources(), slots=1))
        scheduler.handle(TaskSubmitted(time=0, task_id=0, job_id="j"))
        scheduler.run_round()


# ---------------------------------------------------------------------- output


def phase_tables(rows: Sequence[tuple[str, PhaseSummary]]) -> tuple[Table, Table]:
    """One phase's two tables, a row per policy: the tasks, then the machines and rounds.

    Split in two so that each fits 80 columns with every cell whole: a cell holds one number or
    range, units go in the headers, and headers are broken into short lines here (were rich left
    to narrow the columns itself, it would cut words with an ellipsis). The policy column never
    wraps, so a name is never cut."""
    tasks = Table(title="tasks", title_justify="left")
    machines = Table(title="machines and rounds", title_justify="left")
    for table in (tasks, machines):
        table.add_column("policy", no_wrap=True)
    for header in ("placed", "waiting", "of them\nfit", "refused", "errors", "moved"):
        tasks.add_column(header, justify="right")
    for header in (
        "machines\nused",
        "tasks per\nmachine",
        "cpu\nutil",
        "rounds",
        "solver\nms",
        "round\nms",
    ):
        machines.add_column(header, justify="right")
    for name, s in rows:
        tasks.add_row(
            name,
            f"{s.placed:,}",
            f"{s.waiting:,}",
            f"{s.waiting_that_fit:,}",
            f"{s.refused:,}",
            f"{s.task_errors:,}",
            f"{s.moved:,}",
        )
        low, high = s.cpu_utilisation
        machines.add_row(
            name,
            f"{s.machines_used}/{s.machines}",
            f"{s.tasks_per_machine[0]}-{s.tasks_per_machine[1]}",
            f"{100 * low:.0f}-{100 * high:.0f}%",
            f"{s.rounds}",
            f"{1000 * s.solver_seconds:,.0f}",
            f"{1000 * s.round_seconds:,.0f}",
        )
    return tasks, machines


def parse_arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Schedule a mix of jobs on a simulated cluster under each installed policy."
    )
    parser.add_argument(
        "--policy",
        action="append",
        metavar="NAME",
        help="a policy to run (repeatable; default: every installed policy)",
    )
    parser.add_argument(
        "--solver",
        default=DEFAULT_SOLVER,
        choices=solver_names(),
        help=f"min-cost flow solver (default: {DEFAULT_SOLVER})",
    )
    parser.add_argument(
        "--machines", type=int, default=100, metavar="N", help="cluster size (default: 100)"
    )
    parser.add_argument("--seed", type=int, default=0, help="workload seed (default: 0)")
    arguments = parser.parse_args(argv)
    if arguments.machines < 1:
        parser.error("--machines must be at least 1")
    return arguments


def main(argv: Sequence[str] | None = None, *, console: Console | None = None) -> int:
    """Run the policies, print a table per phase; 1 if some policy failed during a run."""
    arguments = parse_arguments(argv)
    console = console or Console()
    names: list[str] = arguments.policy or available_policies()
    cluster = build_cluster(arguments.machines, seed=arguments.seed)
    console.print(
        f"{plural(len(cluster.machines), 'machine')} in {plural(cluster.racks, 'rack')} and "
        f"{plural(cluster.pods, 'pod')}, "
        f"{cluster.slots:,} slots; solver {arguments.solver}, seed {arguments.seed}"
    )
    warm_up(arguments.solver)
    summaries: list[Summary] = []
    failed = False
    for name in names:
        try:
            load_policy(name)
        except PolicyError as error:
            console.print(f"[yellow]skipped[/] {name}: it does not load ({error})")
            continue
        try:
            summary = run_policy(
                name, machines=arguments.machines, solver=arguments.solver, seed=arguments.seed
            )
        except (PolicyError, SolverError) as error:
            console.print(f"[red]failed[/] {name}: {type(error).__name__}: {error}")
            failed = True
            continue
        summaries.append(summary)
    if summaries:
        initial, churn = summaries[0].phases
        arrived = churn.submitted - initial.submitted
        titles = (
            f"After the initial jobs: {initial.submitted:,} tasks",
            f"After churn: a third of the running tasks completed, the busiest machine failed, "
            f"{arrived:,} more tasks arrived",
        )
        for index, title in enumerate(titles):
            console.print()
            console.print(title, style="bold")
            for table in phase_tables([(s.policy, s.phases[index]) for s in summaries]):
                console.print(table)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
