"""Lower bounds on the makespan, the paper's ratio metric, and longest branches.

Section VI normalises every makespan by the better (larger) of two classical lower bounds: the
total work spread over the machines (sum of c_i / m, here total size / total speed, which is the
same for identical machines) and the longest branch (the heaviest path of CPU tasks at the
fastest speed). Neither counts network tasks, so the ratio also measures what communication
costs.

Longest branches with network time (a task's out-tree branch: its CPU time plus, along the
heaviest path to a sink, every task's CPU time and every arc's transfer time) are G-LIST's
tie-breaker and the master branch of G-LIST-MASTER.
"""

from __future__ import annotations

from firmament_py.workflows.model import Platform, Workflow
from firmament_py.workflows.schedule import Schedule

__all__ = [
    "branch_bound",
    "downward_branches",
    "longest_path",
    "lower_bound",
    "ratio",
    "work_bound",
]


def work_bound(workflow: Workflow, platform: Platform) -> float:
    """Total work over total speed: no schedule finishes the work sooner."""
    return workflow.total_work / sum(platform.speeds)


def branch_bound(workflow: Workflow, platform: Platform) -> float:
    """The longest chain of CPU tasks, each at the fastest speed, no network time."""
    fastest = max(platform.speeds)
    finish = [0.0] * workflow.n
    for v in workflow.topological:
        start = max((finish[u] for u, _ in workflow.parents[v]), default=0.0)
        finish[v] = start + workflow.sizes[v] / fastest
    return max(finish, default=0.0)


def lower_bound(workflow: Workflow, platform: Platform) -> float:
    """The better (larger) of `work_bound` and `branch_bound`."""
    return max(work_bound(workflow, platform), branch_bound(workflow, platform))


def ratio(schedule: Schedule) -> float:
    """The paper's metric: makespan over `lower_bound` (1 when both are 0)."""
    bound = lower_bound(schedule.workflow, schedule.platform)
    makespan = schedule.makespan
    if bound <= 0:
        return 1.0 if makespan <= 0 else float("inf")
    return makespan / bound


def downward_branches(workflow: Workflow, speed: float, rate: float) -> list[float]:
    """For each task, the longest branch of its out-tree: its own time (size / `speed`) plus the
    heaviest continuation of transfer time (data / `rate`) and CPU time down to a sink."""
    branch = [0.0] * workflow.n
    for u in reversed(workflow.topological):
        below = max(
            (data / rate + branch[v] for v, data in workflow.children[u]),
            default=0.0,
        )
        branch[u] = workflow.sizes[u] / speed + below
    return branch


def longest_path(workflow: Workflow, tasks: set[int], speed: float, rate: float) -> list[int]:
    """A heaviest path (CPU time at `speed` plus transfer time at `rate`) among `tasks` (a set
    closed under the arcs, such as a job), from a source to a sink, as task indices."""
    best: dict[int, tuple[float, int]] = {}
    for u in reversed(workflow.topological):
        if u not in tasks:
            continue
        options = [(data / rate + best[v][0], v) for v, data in workflow.children[u] if v in best]
        tail, successor = max(options, key=lambda o: (o[0], -o[1]), default=(0.0, -1))
        best[u] = (workflow.sizes[u] / speed + tail, successor)
    sources = [u for u in tasks if not workflow.parents[u]]
    if not sources:
        return []
    start = max(sorted(sources), key=lambda u: best[u][0])
    path = [start]
    while best[path[-1]][1] >= 0:
        path.append(best[path[-1]][1])
    return path
