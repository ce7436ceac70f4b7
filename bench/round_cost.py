"""Round cost: the Python-side work of a steady-state scheduling round, by phase.

Builds a `Scheduler` (policy `--policy`, cost-scaling solver) over 1,000 machines of 12 slots
in racks of 48, submits 4,000 tasks (jobs of 10), runs warm-up rounds, then measures `--rounds`
rounds, each after 300 submissions and 300 removals of the oldest live tasks, one simulated
second apart (the shape the daemon's scheduling process sees under steady churn). Everything is
seeded, so every run makes the same rounds. Each round's phases are the timings
`Scheduler.run_round` reports (`update_seconds`: the graph manager's update through the policy;
`solve_seconds`: sending the changes and solving, of which `solver_seconds` is the algorithm;
`extract_seconds`: reading placements off the flow and deciding; `apply_seconds`: applying the
decisions; `total_seconds`). The script prints, per phase, the median over rounds of one run,
then the median of those over `--runs` runs (each on a fresh scheduler), in milliseconds.

    python bench/round_cost.py [--policy trivial|load-spreading|quincy]
        [--runs 5] [--rounds 20] [--warmup 3] [--machines 1000] [--tasks 4000] [--churn 300]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from firmament_py.model import MachineAdded, Resources, TaskRemoved, TaskSubmitted
from firmament_py.scheduler import Scheduler

SECOND = 1_000_000
SLOTS = 12
RACK_SIZE = 48
TASKS_PER_JOB = 10
PHASES = (
    "update_seconds",
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
        self.live: dict[int, None] = {}  # live task ids, oldest first
        self.now = 0

    def add_machines(self, count: int) -> None:
        for index in range(count):
            self.scheduler.handle(
                MachineAdded(
                    time=self.now,
                    machine_id=f"m{index:05d}",
                    capacity=Resources(cpu_millicores=32_000, ram_bytes=128 << 30),
                    slots=SLOTS,
                    rack_id=f"r{index // RACK_SIZE:03d}",
                )
            )

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

    def round(self) -> dict[str, float]:
        self.now += SECOND
        return dict(self.scheduler.run_round(self.now).timings)


def run_once(args: argparse.Namespace, seed: int) -> dict[str, float]:
    """One fresh scheduler: the median of each phase over the measured rounds, in seconds."""
    with Scheduler(args.policy, solver="cost-scaling") as scheduler:
        workload = Workload(scheduler, seed)
        workload.add_machines(args.machines)
        workload.submit(args.tasks)
        workload.round()
        for _ in range(args.warmup):
            workload.submit(args.churn)
            workload.remove_oldest(args.churn)
            workload.round()
        samples: dict[str, list[float]] = {phase: [] for phase in PHASES}
        for _ in range(args.rounds):
            workload.submit(args.churn)
            workload.remove_oldest(args.churn)
            timings = workload.round()
            for phase in PHASES:
                samples[phase].append(timings[phase])
        return {phase: statistics.median(values) for phase, values in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", default="trivial")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--machines", type=int, default=1000)
    parser.add_argument("--tasks", type=int, default=4000)
    parser.add_argument("--churn", type=int, default=300)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    started = time.perf_counter()
    runs = [run_once(args, args.seed) for _ in range(args.runs)]
    print(
        f"policy {args.policy}: {args.machines} machines x {SLOTS} slots, {args.tasks} tasks, "
        f"{args.churn} submissions + {args.churn} removals per round; median over "
        f"{args.rounds} rounds, median of {args.runs} runs ({time.perf_counter() - started:.0f} s)"
    )
    print("| phase | median ms | runs (ms) |")
    print("|---|---:|---|")
    for phase in PHASES:
        values = [run[phase] * 1000 for run in runs]
        shown = " ".join(f"{value:.1f}" for value in values)
        print(f"| {phase.removesuffix('_seconds')} | {statistics.median(values):.2f} | {shown} |")


if __name__ == "__main__":
    main()
