"""JIT warm-up: what the first solve of a process costs, cold (compiling) and from the cache.

Each measurement runs in a fresh interpreter: import the package, then solve a tiny graph with
one algorithm. "cold" points numba at an empty cache directory (as after an install or an edit);
"cached" reuses the directory the cold run filled. Run by hand; results in docs/benchmarks.md.

    python bench/warmup.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

PROBE = """
import time
start = time.perf_counter()
from firmament_py.flow import FlowGraph
from firmament_py.solvers import make_solver
imported = time.perf_counter()
g = FlowGraph()
a, b, c = g.add_node(supply=2), g.add_node(), g.add_node(supply=-2)
g.add_arc(a, b, capacity=2, cost=1)
g.add_arc(b, c, capacity=2, cost=1)
g.add_arc(a, c, capacity=1, cost=3)
solver = make_solver(ALGORITHM)
solver.solve_graph(g)
g.add_arc(c, a, capacity=1, cost=1)
solver.solve_graph(g)
solver.close()
print(imported - start, time.perf_counter() - imported)
"""


def measure(algorithm: str, cache_dir: str) -> tuple[float, float]:
    env = {**os.environ, "NUMBA_CACHE_DIR": cache_dir}
    out = subprocess.run(
        [sys.executable, "-c", PROBE.replace("ALGORITHM", repr(algorithm))],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    imported, solved = out.stdout.split()
    return float(imported), float(solved)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print("| algorithm | import s | first solves, cold cache s | first solves, cached s |")
    print("|---|---:|---:|---:|")
    for algorithm in ("ssp", "relaxation", "cost-scaling", "race"):
        cold: list[float] = []
        warm: list[float] = []
        imports: list[float] = []
        for _ in range(args.repeats):
            with tempfile.TemporaryDirectory() as cache:
                imp, first = measure(algorithm, cache)
                cold.append(first)
                imports.append(imp)
                warm.append(measure(algorithm, cache)[1])
        print(
            f"| {algorithm} | {statistics.median(imports):.2f} | {statistics.median(cold):.2f} "
            f"| {statistics.median(warm):.2f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
