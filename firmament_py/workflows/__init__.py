"""Scheduling workflows with network tasks (Giroire et al., INFOCOM'19,
https://ieeexplore.ieee.org/document/8737415).

Jobs are DAG workflows of CPU tasks; when two dependent tasks run on different CPU machines, a
network task must carry the data on network machines (the sender's upload link and the
receiver's download link in the same interval, or a shared channel). The goal is the makespan.

* `model`: `Workflow`, `Platform`, `WorkflowError`, `check_instance`;
* `schedule`: `Schedule` and the validator (`validate_schedule`, `schedule_problems`);
* `list_scheduler`, `glist`, `partition`: the four algorithms (`ALGORITHMS`);
* `bounds`: the two lower bounds and the paper's ratio;
* `generators`: section VI's workflows (simple and 1-stage MapReduce, random DAGs, Google-trace
  shaped sizes); `files`: JSON/YAML workflow files; `cli`: `firmament-py workflow`;
  `experiment`: the `network-tasks` experiment (Figures 4-6).

```python
from firmament_py.workflows import Platform, Workflow, schedule_workflow

workflow = Workflow.build({"s": 1, "a": 1, "b": 1, "d": 1},
                          [("s", "a", 1), ("s", "b", 1), ("a", "d", 1), ("b", "d", 1)])
schedule = schedule_workflow(workflow, Platform.links(2), "glist")  # validated
print(schedule.makespan)
```
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from firmament_py.workflows.bounds import lower_bound, ratio
from firmament_py.workflows.glist import glist_schedule
from firmament_py.workflows.list_scheduler import list_schedule
from firmament_py.workflows.model import NetworkKind, Platform, Workflow, WorkflowError
from firmament_py.workflows.partition import partition_placement, partition_schedule
from firmament_py.workflows.schedule import (
    Schedule,
    ScheduleError,
    TaskRun,
    Transfer,
    schedule_problems,
    validate_schedule,
)

__all__ = [
    "ALGORITHMS",
    "NetworkKind",
    "Platform",
    "Schedule",
    "ScheduleError",
    "TaskRun",
    "Transfer",
    "Workflow",
    "WorkflowError",
    "glist_schedule",
    "list_schedule",
    "lower_bound",
    "partition_placement",
    "partition_schedule",
    "ratio",
    "schedule_problems",
    "schedule_workflow",
    "validate_schedule",
]

ALGORITHMS: dict[str, Callable[[Workflow, Platform], Schedule]] = {
    "list": list_schedule,
    "glist": glist_schedule,
    "glist-master": partial(glist_schedule, master=True),
    "partition": partition_schedule,
}
"""The algorithms by name: the List Scheduler (the baseline), G-LIST, G-LIST-MASTER, PARTITION."""


def schedule_workflow(workflow: Workflow, platform: Platform, algorithm: str) -> Schedule:
    """Schedule `workflow` on `platform` with the named algorithm and validate the result
    (ScheduleError if it breaks a rule: that would be a bug). ValueError names the known
    algorithms when given an unknown one; WorkflowError if the platform cannot run the
    workflow."""
    try:
        run = ALGORITHMS[algorithm]
    except KeyError:
        raise ValueError(
            f"unknown algorithm {algorithm!r}; known: {', '.join(ALGORITHMS)}"
        ) from None
    return validate_schedule(run(workflow, platform))
