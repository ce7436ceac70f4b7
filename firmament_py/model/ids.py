"""The identifiers and the time unit that every part of the cluster model shares.

Ids follow Firmament: a task has an integer id (its TaskDescriptor uid), jobs and machines have
string ids (Firmament uses UUIDs; a trace reader may use the decimal form of its integer ids).
Racks and pods, the levels of the resource topology above machines, are named by strings too.
Task ids are kept within int64 so that later rooms can store them in numpy arrays.

Time is an integer count of microseconds, as in the Google cluster trace. The model never reads
a clock: every event and every placement carries the time at which it happened.
"""

from __future__ import annotations

from typing import TypeAlias

TaskId: TypeAlias = int
JobId: TypeAlias = str
MachineId: TypeAlias = str
RackId: TypeAlias = str
PodId: TypeAlias = str

EquivClassId: TypeAlias = int | str
"""An equivalence class of tasks or machines, as a policy defines them (Firmament's
EquivClass_t). The model stores none; policies compute them from tasks and machines."""

Time: TypeAlias = int
"""Microseconds since an epoch the driver chooses (the simulator: the trace start)."""

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)


def check_task_id(task_id: object) -> TaskId:
    """Return `task_id` if it is a usable task id (an int in [0, INT64_MAX]), else raise."""
    if not isinstance(task_id, int) or isinstance(task_id, bool):
        raise TypeError(f"a task id must be an int, not {type(task_id).__name__}: {task_id!r}")
    if not 0 <= task_id <= INT64_MAX:
        raise ValueError(f"a task id must lie in [0, 2**63 - 1], got {task_id}")
    return task_id


def check_name(kind: str, name: object) -> str:
    """Return `name` if it is a usable job, machine, rack or pod id (a non-empty str)."""
    if not isinstance(name, str):
        raise TypeError(f"a {kind} id must be a str, not {type(name).__name__}: {name!r}")
    if not name:
        raise ValueError(f"a {kind} id must not be empty")
    return name


def check_time(time: object) -> Time:
    """Return `time` if it is a usable timestamp (an int in [0, INT64_MAX]), else raise."""
    if not isinstance(time, int) or isinstance(time, bool):
        raise TypeError(f"a time must be an int (microseconds), not {type(time).__name__}")
    if not 0 <= time <= INT64_MAX:
        raise ValueError(f"a time must lie in [0, 2**63 - 1] microseconds, got {time}")
    return time


def check_int64(what: str, value: object) -> int:
    """Return `value` if it is an int (not a bool) that fits in int64, else raise."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{what} must be an int, not {type(value).__name__}: {value!r}")
    if not INT64_MIN <= value <= INT64_MAX:
        raise ValueError(f"{what} must fit in int64, got {value}")
    return value
