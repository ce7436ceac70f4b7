"""Round cost: a scheduling round's parts, at any cluster size, beside OR-Tools on the same graph.

Warms the solver's kernels up (as the simulator and the daemon do before their first round),
builds a `Scheduler` (policy `--policy`, solver `--solver`) over `--machines` machines of 12
slots in racks of 48, submits `--tasks` tasks (jobs of 10), settles the garbage collector as
the daemon's scheduling process does once its state is loaded (`firmament_py.collector`; the
simulator runs settled throughout), runs the first round (timed: an empty scheduler given the
whole cluster at once; `--default-collector` times it with Python's defaults instead, settling
after it), runs `--warmup` rounds, then measures
`--rounds` rounds, each after `--churn` submissions and as many removals of the oldest live
tasks, one simulated second apart (the shape the daemon's scheduling process sees under steady
churn). Everything is seeded, so every run makes the same rounds.

Each round's parts are the timings `Scheduler.run_round` reports: the graph update through the
policy (`update`, split into `resources`, `tasks`, `classes` and `jobs`), sending the changes
and solving (`solve`, of which `solver` is the algorithm), reading placements off the flow and
deciding (`extract`), applying the decisions (`apply`), and the whole round (`total`). With
`--ortools`, OR-Tools' SimpleMinCostFlow solves each measured round's graph from scratch
(building included, lower bounds moved into supplies) and must find the same optimal cost.

`--scenario join|leave|labels` makes the last measured round follow a machine joining, leaving
or changing its labels (each a fresh run per repetition), reported beside the steady rounds
before it. The script prints medians over the rounds of a run, then the median over `--runs`
runs (each on a fresh scheduler), in milliseconds.

    python bench/round_cost.py [--policy quincy] [--machines 12500] [--tasks 135000]
        [--churn 1350] [--runs 3] [--rounds 5] [--warmup 2] [--solver cost-scaling]
        [--scenario steady|join|leave|labels] [--ortools] [--default-collector]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

import numpy as np

from firmament_py import collector
from firmament_py.flow.graph import FlowGraph
from firmament_py.model import (
    MachineAdded,
    MachineRemoved,
    MachineUpdated,
    Resources,
    TaskRemoved,
    TaskSubmitted,
)
from firmament_py.scheduler import Scheduler
from firmament_py.solvers.warmup import warm_up

SECOND = 1_000_000
SLOTS = 12
RACK_SIZE = 48
TASKS_PER_JOB = 10
PHASES = (
    "update_seconds",
    "update_resources_seconds",
    "update_tasks_seconds",
    "update_classes_seconds",
    "update_jobs_seconds",
    "solve_seconds",
    "solver_seconds",
    "extract_seconds",
    "apply_seconds",
    "total_seconds",
)


class Workload:
    """Deterministic submissions and removals against one scheduler."""

    def __init__(self, scheduler: Scheduler, seed: int) -> None:
        self.scheduler = scheduler
        self.rng = random.Random(seed)
        self.next_task = 1
        self.machines = 0
        self.live: dict[int, None] = {}  # live task ids, oldest first
        self.now = 0

    def machine(self, index: int) -> MachineAdded:
        return MachineAdded(
            time=self.now,
            machine_id=f"m{index:05d}",
            capacity=Resources(cpu_millicores=32_000, ram_bytes=128 << 30),
            slots=SLOTS,
            rack_id=f"r{index // RACK_SIZE:03d}",
        )

    def add_machines(self, count: int) -> None:
        for index in range(self.machines, self.machines + count):
            self.scheduler.handle(self.machine(index))
        self.machines += count

    def submit(self, count: int) -> None:
        for _ in range(count):
            task_id = self.next_task
            self.next_task += 1
            self.scheduler.handle(
                TaskSubmitted(
                    time=self.now,
                    task_id=task_id,
                    job_id=f"j{(task_id - 1) // TASKS_PER_JOB:06d}",
                    request=Resources(
                        cpu_millicores=self.rng.choice((250, 500, 1000, 2000)),
                        ram_bytes=self.rng.choice((1, 2, 4, 8)) << 30,
                    ),
                )
            )
            self.live[task_id] = None

    def remove_oldest(self, count: int) -> None:
        # Mostly the oldest tasks, with a random pick among the oldest 2 * count.
        candidates = list(self.live)[: 2 * count]
        for task_id in sorted(self.rng.sample(candidates, min(count, len(candidates)))):
            self.scheduler.handle(TaskRemoved(time=self.now, task_id=task_id))
            del self.live[task_id]

    def change_topology(self, scenario: str) -> None:
        """A machine joins, leaves or changes its labels, now."""
        if scenario == "join":
            self.add_machines(1)
        elif scenario == "leave":
            self.scheduler.handle(MachineRemoved(time=self.now, machine_id="m00000"))
        elif scenario == "labels":
            self.scheduler.handle(
                MachineUpdated(time=self.now, machine_id="m00000", labels={"zone": "b"})
            )

    def round(self) -> dict[str, float]:
        self.now += SECOND
        return dict(self.scheduler.run_round(self.now).timings)


def ortools_solve(graph: FlowGraph) -> tuple[int, float]:
    """Optimal cost and seconds for OR-Tools' SimpleMinCostFlow on `graph`, building included.
    OR-Tools has no lower bounds: each arc's is sent at once (its cost counted, the ends'
    supplies moved), and the rest of the arc is left to the solver."""
    from ortools.graph.python import min_cost_flow

    start = time.perf_counter()
    a = graph.arrays()
    arcs = graph.arc_ids()
    src, dst, low = a.src[arcs], a.dst[arcs], a.low[arcs]
    supply = a.supply.copy()
    np.subtract.at(supply, src, low)
    np.add.at(supply, dst, low)
    mcf = min_cost_flow.SimpleMinCostFlow()
    mcf.add_arcs_with_capacity_and_unit_cost(src, dst, a.cap[arcs] - low, a.cost[arcs])
    nodes = graph.node_ids()
    mcf.set_nodes_supplies(nodes, supply[nodes])
    status = mcf.solve()
    elapsed = time.perf_counter() - start
    if status != mcf.OPTIMAL:
        raise RuntimeError(f"OR-Tools status {status}")
    return int(mcf.optimal_cost()) + int(np.dot(low, a.cost[arcs])), elapsed


def run_once(args: argparse.Namespace) -> dict[str, float]:
    """One fresh scheduler: the first round, then the median of each part over the measured
    rounds (and the topology change's round), in seconds."""
    warm_up(args.solver)  # as the simulator and the daemon do: no round loads kernels
    with Scheduler(args.policy, solver=args.solver) as scheduler:
        workload = Workload(scheduler, args.seed)
        workload.add_machines(args.machines)
        workload.submit(args.tasks)
        if not args.default_collector:
            collector.settle()
        started = time.perf_counter()
        workload.round()
        result = {"first_round_seconds": time.perf_counter() - started}
        collector.settle()
        for _ in range(args.warmup):
            workload.submit(args.churn)
            workload.remove_oldest(args.churn)
            workload.round()
        samples: dict[str, list[float]] = {phase: [] for phase in (*PHASES, "ortools_seconds")}
        for _ in range(args.rounds):
            workload.submit(args.churn)
            workload.remove_oldest(args.churn)
            timings = workload.round()
            for phase in PHASES:
                if phase in timings:  # an older scheduler reports fewer parts
                    samples[phase].append(timings[phase])
            if args.ortools:
                graph = scheduler.graph_manager.graph
                cost, seconds = ortools_solve(graph)
                ours = scheduler.solver.solve_graph(graph).cost  # no change since: the same
                if cost != ours:
                    raise RuntimeError(f"OR-Tools found cost {cost}, the round {ours}")
                samples["ortools_seconds"].append(seconds)
        result.update({p: statistics.median(v) for p, v in samples.items() if v})
        if args.scenario != "steady":
            workload.submit(args.churn)
            workload.remove_oldest(args.churn)
            workload.change_topology(args.scenario)
            changed = workload.round()
            result.update({f"{args.scenario}:{p}": changed[p] for p in PHASES if p in changed})
        return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", default="quincy")
    parser.add_argument("--solver", default="cost-scaling")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--machines", type=int, default=12_500)
    parser.add_argument("--tasks", type=int, default=135_000)
    parser.add_argument("--churn", type=int, default=1_350)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--scenario", choices=("steady", "join", "leave", "labels"), default="steady"
    )
    parser.add_argument("--ortools", action="store_true")
    parser.add_argument("--default-collector", action="store_true")
    args = parser.parse_args()
    started = time.perf_counter()
    runs = [run_once(args) for _ in range(args.runs)]
    print(
        f"policy {args.policy}, solver {args.solver}: {args.machines} machines x {SLOTS} slots, "
        f"{args.tasks} tasks, {args.churn} submissions + {args.churn} removals per round; "
        f"median over {args.rounds} rounds, median of {args.runs} runs "
        f"({time.perf_counter() - started:.0f} s)"
    )
    print("| part | median ms | runs (ms) |")
    print("|---|---:|---|")
    for phase in runs[0]:
        values = [run[phase] * 1000 for run in runs]
        shown = " ".join(f"{value:.1f}" for value in values)
        name = phase.removesuffix("_seconds").replace("update_", "update: ")
        print(f"| {name} | {statistics.median(values):.1f} | {shown} |")


if __name__ == "__main__":
    main()
