"""Solve a generated cluster's scheduling graph round after round, as a scheduler would.

Each round, 1% of the tasks finish and as many new ones arrive; the solver receives only the
graph's changes and starts from the previous optimum. Run:

    python examples/incremental_rounds.py [MACHINES] [ROUNDS]
"""

from __future__ import annotations

import sys

from firmament_py.flow.graphgen import ClusterGraph, ClusterSpec
from firmament_py.solvers import make_solver
from firmament_py.solvers.optimality import verify


def main(machines: int = 500, rounds: int = 5) -> None:
    cluster = ClusterGraph(ClusterSpec(machines=machines, running=0.8, waiting=machines * 2))
    solver = make_solver("race")
    try:
        for r in range(rounds + 1):
            result = solver.solve_graph(cluster.graph)
            verify(cluster.graph, result)  # independent optimality check
            waiting = sum(int(result.flow[a]) for a in cluster.tasks.unsched_arc.values())
            print(
                f"round {r}: cost {result.cost:,}, {waiting:,} tasks left waiting, "
                f"{result.wall_time * 1000:.1f} ms ({result.algorithm})"
            )
            cluster.observe(result.flow)
            cluster.next_round(churn=0.01)
    finally:
        solver.close()


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
