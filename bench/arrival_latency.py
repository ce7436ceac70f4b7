"""Placement latency of the tasks that arrive during a simulation, apart from the starting ones,
and the rounds' wall time after the first two.

`firmament-py simulate` now prints the arrivals' latency apart in its summary; this script reads
any run's `tasks.csv` and `rounds.csv` (older runs too) and adds the rounds' wall time after the
first two rounds (the first places the starting cluster, the second re-asks about every task it
placed).

    python bench/arrival_latency.py SIMULATION_DIR [SIMULATION_DIR ...]
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

import numpy as np

PERCENTILES = (50, 90, 99, 100)


def main(directories: list[str]) -> None:
    for directory in directories:
        folder = Path(directory)
        with (folder / "tasks.csv").open(newline="") as handle:
            tasks = list(csv.DictReader(handle))
        with (folder / "rounds.csv").open(newline="") as handle:
            rounds = list(csv.DictReader(handle))
        at_start = sum(1 for task in tasks if int(task["submit_us"]) == 0)
        latency = np.array(
            [
                int(task["placement_latency_us"]) / 1000
                for task in tasks
                if int(task["submit_us"]) > 0 and task["placement_latency_us"]
            ]
        )
        round_ms = np.array([float(r["round_s"]) * 1000 for r in rounds[2:]])
        print(f"{folder.name}: {at_start} tasks at the start, {len(latency)} arrivals placed")
        if len(latency):
            values = " / ".join(f"{v:.1f}" for v in np.percentile(latency, PERCENTILES))
            print(f"  arrivals' placement latency p50 / p90 / p99 / max: {values} ms")
        if len(round_ms):
            values = " / ".join(f"{v:.1f}" for v in np.percentile(round_ms, (50, 90, 99)))
            print(f"  {len(round_ms)} rounds after the first two, p50 / p90 / p99: {values} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("directories", nargs="+", metavar="SIMULATION_DIR")
    main(parser.parse_args().directories)
