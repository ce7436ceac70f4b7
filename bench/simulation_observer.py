"""What the dashboard's board costs a simulation: the README's quick start (100 machines,
Google-shaped workload at `--load 2`, `--speedup 50`, ten simulated minutes, load-spreading,
incremental cost scaling) run with and without a `SimulationFeed` observer, alternating,
`--repeats` times each, with deterministic rounds (`accounting none`, so both runs do the same
work). Prints each run's wall time and the medians. `simulate` attaches the observer whenever it
writes report.html (with plots, the default) or serves `--dashboard`.

    python bench/simulation_observer.py --repeats 3
"""

from __future__ import annotations

import argparse
import statistics
import time

from firmament_py.dashboard.board import Board
from firmament_py.dashboard.sim_feed import SimulationFeed
from firmament_py.sim.runner import SimulationJob, run_job
from firmament_py.solvers.warmup import warm_up


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--duration", type=float, default=600.0)
    args = parser.parse_args()
    job = SimulationJob(
        policy="load-spreading",
        solver="cost-scaling",
        synthetic="google-100",
        load=2.0,
        speedup=50.0,
        duration_s=args.duration,
        accounting="none",
    )
    warm_up(job.solver, job.solver_options)
    walls: dict[str, list[float]] = {"without": [], "with": []}
    for repeat in range(args.repeats):
        for name in walls:
            board = Board("bench")
            observer = SimulationFeed(board) if name == "with" else None
            started = time.perf_counter()
            result = run_job(job, warmed_up=True, observer=observer)
            wall = time.perf_counter() - started
            walls[name].append(wall)
            rounds, events = len(result.rounds), result.events
            print(
                f"repeat {repeat + 1} {name:>7} observer: {wall:6.2f} s "
                f"({rounds:,} rounds, {events:,} events)",
                flush=True,
            )
    for name, values in walls.items():
        print(f"median {name:>7} observer: {statistics.median(values):6.2f} s")


if __name__ == "__main__":
    main()
