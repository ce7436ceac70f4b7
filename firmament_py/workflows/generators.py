"""The workflows of section VI of Giroire et al., INFOCOM'19, and the paper's small
examples (section IV's instance, a reconstruction of Figure 1's job).

Section VI draws, from statistics of the Google 2011 trace:

* the number of tasks of a workflow: heavy-tailed. The paper quotes 75% of jobs with one task
  holding 20% of the tasks, a mean of 38 tasks and a maximum of 90,000. A one-task job needs no
  scheduling with communications, so we draw the size of the multi-task jobs: their mean is then
  (38 - 0.75) / 0.25 = 149, which a log-normal with median 20 and sigma 2 matches (mean
  20 e^2 = 148); it is truncated to the experiment's `max_tasks` (the paper's 90,000-task jobs
  are out of reach of a pure-Python run) and to at least the workflow type's minimum;
* CPU task durations: heavy-tailed, mean 28 minutes, longest 5.5 days: a log-normal with
  sigma 1.5 and mean 28 (median 9.1 minutes), truncated at 7,920 minutes; durations are in
  minutes and all machines have speed 1;
* network task durations: the same distribution times the network factor rho (0 to 4,
  default 0.5), the ratio of mean network to mean CPU delay; links have capacity 1.

Workflow types (`WORKFLOW_TYPES`):

* simple MapReduce (section V.B): s -> n - 2 map tasks -> d, the map tasks of one duration, the
  s -> map transfers of one duration and the map -> d transfers of one duration;
* 1-stage MapReduce (Figure 3 right): s -> a first layer -> a second layer -> d, the share of
  the first layer drawn uniformly; every first-layer task feeds one second-layer task, and each
  other (first, second) pair is an arc with probability p, the edge density;
* random: tasks T_1..T_n, an arc T_i -> T_j (i < j) with probability p.

A data set (`mixed_workflows`) is a set of workflows, each of a type drawn with probabilities
20%, 40%, 40% (simple MapReduce, 1-stage MapReduce, random).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass

from firmament_py.workflows.model import Workflow, WorkflowError

__all__ = [
    "MINUTES_CAP",
    "WORKFLOW_TYPES",
    "WorkflowShape",
    "figure1_workflow",
    "google_duration",
    "google_task_count",
    "mixed_workflows",
    "one_stage_mapreduce",
    "random_dag",
    "section4_instance",
    "simple_mapreduce",
]

MINUTES_CAP = 5.5 * 24 * 60
"""The longest CPU task of the trace, in minutes (5.5 days)."""
DURATION_MEAN = 28.0
DURATION_SIGMA = 1.5
TASKS_MEDIAN = 20.0
TASKS_SIGMA = 2.0


def google_duration(rng: random.Random) -> float:
    """A CPU task duration in minutes: log-normal, mean 28, truncated at 5.5 days."""
    mu = math.log(DURATION_MEAN) - DURATION_SIGMA**2 / 2
    return min(MINUTES_CAP, rng.lognormvariate(mu, DURATION_SIGMA))


def google_task_count(rng: random.Random, minimum: int, maximum: int) -> int:
    """The number of tasks of a multi-task job: log-normal (median 20, sigma 2), truncated to
    [minimum, maximum]."""
    if minimum > maximum:
        raise WorkflowError(f"task count bounds {minimum} > {maximum}")
    drawn = round(rng.lognormvariate(math.log(TASKS_MEDIAN), TASKS_SIGMA))
    return max(minimum, min(maximum, drawn))


@dataclass(frozen=True)
class WorkflowShape:
    """How to draw workflows: `max_tasks` caps the task count, `rho` is the network factor,
    `density` the edge density, `prefix` names the tasks (to join several workflows)."""

    max_tasks: int = 100
    rho: float = 0.5
    density: float = 0.2
    prefix: str = ""


def _check(rho: float, density: float) -> None:
    if not (math.isfinite(rho) and rho >= 0):
        raise WorkflowError(f"network factor rho {rho} must be a finite number >= 0")
    if not 0 <= density <= 1:
        raise WorkflowError(f"edge density {density} must be between 0 and 1")


def simple_mapreduce(
    maps: int,
    *,
    source: float = 1.0,
    map_size: float = 1.0,
    sink: float = 1.0,
    scatter: float = 1.0,
    gather: float = 1.0,
    prefix: str = "",
    job: str | None = None,
) -> Workflow:
    """s -> `maps` map tasks of size `map_size` -> d; each s -> map arc carries `scatter`, each
    map -> d arc `gather` (section V.B's a and c; b is `map_size`)."""
    if maps < 1:
        raise WorkflowError(f"a simple MapReduce needs at least one map task, not {maps}")
    s, d = f"{prefix}s", f"{prefix}d"
    names = [f"{prefix}map{i}" for i in range(maps)]
    sizes = [(s, source), *((name, map_size) for name in names), (d, sink)]
    edges = [(s, name, scatter) for name in names] + [(name, d, gather) for name in names]
    jobs = {name: job for name, _ in sizes} if job else None
    return Workflow.build(sizes, edges, jobs)


def _simple_mapreduce_drawn(rng: random.Random, shape: WorkflowShape, job: str) -> Workflow:
    n = google_task_count(rng, 3, max(3, shape.max_tasks))
    return simple_mapreduce(
        n - 2,
        source=google_duration(rng),
        map_size=google_duration(rng),
        sink=google_duration(rng),
        scatter=shape.rho * google_duration(rng),
        gather=shape.rho * google_duration(rng),
        prefix=shape.prefix,
        job=job,
    )


def one_stage_mapreduce(rng: random.Random, shape: WorkflowShape, job: str = "") -> Workflow:
    """A 1-stage MapReduce workflow (Figure 3 right) drawn as section VI says."""
    _check(shape.rho, shape.density)
    n = google_task_count(rng, 4, max(4, shape.max_tasks))
    middle = n - 2
    first = min(middle - 1, max(1, round(rng.uniform(0, 1) * middle)))
    second = middle - first
    p = shape.prefix
    s, d = f"{p}s", f"{p}d"
    maps = [f"{p}map{i}" for i in range(first)]
    reduces = [f"{p}reduce{j}" for j in range(second)]
    sizes = [(name, google_duration(rng)) for name in [s, *maps, *reduces, d]]

    def data() -> float:
        return shape.rho * google_duration(rng)

    edges = [(s, name, data()) for name in maps]
    for name in maps:
        chosen = rng.randrange(second)
        for j, reduce in enumerate(reduces):
            if j == chosen or rng.random() < shape.density:
                edges.append((name, reduce, data()))
    edges += [(name, d, data()) for name in reduces]
    return Workflow.build(sizes, edges, {name: job or s for name, _ in sizes})


def random_dag(rng: random.Random, shape: WorkflowShape, job: str = "") -> Workflow:
    """A random workflow: tasks T_1..T_n and each arc T_i -> T_j, i < j, with probability p."""
    _check(shape.rho, shape.density)
    n = google_task_count(rng, 3, max(3, shape.max_tasks))
    names = [f"{shape.prefix}t{i}" for i in range(n)]
    sizes = [(name, google_duration(rng)) for name in names]
    edges = [
        (names[i], names[j], shape.rho * google_duration(rng))
        for j in range(n)
        for i in range(j)
        if rng.random() < shape.density
    ]
    return Workflow.build(sizes, edges, {name: job or names[0] for name in names})


def simple_mapreduce_drawn(rng: random.Random, shape: WorkflowShape, job: str = "") -> Workflow:
    """A simple MapReduce workflow drawn as section VI says (equal map tasks and transfers)."""
    _check(shape.rho, shape.density)
    return _simple_mapreduce_drawn(rng, shape, job or f"{shape.prefix}s")


WORKFLOW_TYPES: dict[str, Callable[[random.Random, WorkflowShape, str], Workflow]] = {
    "simple-mapreduce": simple_mapreduce_drawn,
    "one-stage-mapreduce": one_stage_mapreduce,
    "random": random_dag,
}
"""Section VI's workflow types by name; each draws one workflow from (rng, shape, job)."""

MIX: tuple[tuple[str, float], ...] = (
    ("simple-mapreduce", 0.2),
    ("one-stage-mapreduce", 0.4),
    ("random", 0.4),
)
"""Section VI's mix of workflow types in a data set."""


def mixed_workflows(rng: random.Random, count: int, shape: WorkflowShape) -> Workflow:
    """A data set: `count` workflows of types drawn 20/40/40%, joined into one forest (each a
    job, tasks prefixed `w<i>/`)."""
    if count < 1:
        raise WorkflowError(f"a data set needs at least one workflow, not {count}")
    sizes: list[tuple[str, float]] = []
    edges: list[tuple[str, str, float]] = []
    jobs: dict[str, str] = {}
    kinds, weights = zip(*MIX, strict=True)
    for i in range(count):
        kind = rng.choices(kinds, weights=weights)[0]
        job = f"w{i}"
        part = WORKFLOW_TYPES[kind](rng, _with_prefix(shape, f"{job}/"), job)
        sizes += [(name, part.sizes[v]) for v, name in enumerate(part.tasks)]
        edges += [(part.tasks[u], part.tasks[v], data) for u, v, data in part.edges]
        jobs.update({name: job for name in part.tasks})
    return Workflow.build(sizes, edges, jobs)


def _with_prefix(shape: WorkflowShape, prefix: str) -> WorkflowShape:
    return WorkflowShape(shape.max_tasks, shape.rho, shape.density, prefix)


def section4_instance(m: int) -> Workflow:
    """Theorem 1's instance for m machines: m^2 unit tasks T_1..T_{m^2}; T_{m^2+i} depends on
    T_{(i-1)m+1..im}; T_{m^2+m+1} on T_{m^2+1..m^2+m}; every arc carries one unit of data."""
    if m < 1:
        raise WorkflowError(f"section IV's instance needs m >= 1, not {m}")
    sizes = [(f"T{i}", 1.0) for i in range(1, m * m + m + 2)]
    edges = []
    for i in range(1, m + 1):
        edges += [(f"T{j}", f"T{m * m + i}", 1.0) for j in range((i - 1) * m + 1, i * m + 1)]
        edges.append((f"T{m * m + i}", f"T{m * m + m + 1}", 1.0))
    return Workflow.build(sizes, edges)


FIGURE1_ARCS: tuple[tuple[str, str], ...] = (
    ("T0", "T1"),
    ("T0", "T5"),
    ("T4", "T5"),
    ("T1", "T2"),
    ("T2", "T3"),
    ("T5", "T6"),
    ("T6", "T7"),
    ("T3", "T8"),
    ("T7", "T8"),
)
"""A reconstruction of Figure 1's job: the figure's arcs are not in the paper's text, which
says only that T0 and T4 are the sources, that T1 depends on T0 alone and T5 on T0 and T4, and
that the schedule shown takes 6 (two machines, one network machine, everything of size 1). This
DAG has those properties and an optimum of 6."""


def figure1_workflow() -> Workflow:
    """Figure 1's job as reconstructed in `FIGURE1_ARCS` (nine unit tasks, unit data)."""
    return Workflow.build(
        [(f"T{i}", 1.0) for i in range(9)], [(u, v, 1.0) for u, v in FIGURE1_ARCS]
    )
