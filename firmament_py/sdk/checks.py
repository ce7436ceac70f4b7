"""Checking policy answers: what makes an answer acceptable to the flow graph, in one place.

The scheduler never trusts a policy (third-party code) and its solvers' compiled kernels assume
valid input, so every answer is checked before anything is built from it. Per-item answers are
checked one value at a time; array answers (`sdk/answers.py`) a column at a time, with a
problem for each bad row worded as the per-item check would word it, so that the scheduler can
leave out just the task a row is about.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from firmament_py.model.ids import EquivClassId
from firmament_py.sdk.answers import ArcColumns, ClassArcs, ResourceArcs, TaskArcs, TimedArcs
from firmament_py.sdk.columns import BoolArray, Clock, IntArray, StatsColumns, Topology
from firmament_py.sdk.types import (
    MAX_CAPACITY,
    MAX_COST,
    ClusterView,
    ResourceRef,
    arc_values_problem,
)

__all__ = [
    "AnswerError",
    "CheckedArcs",
    "CheckedTaskArcs",
    "CheckedTimedArcs",
    "arc_problems",
    "check_arc_columns",
    "check_class_arcs",
    "check_resource_arcs",
    "check_stats_columns",
    "check_task_arcs",
    "check_timed_arcs",
    "equiv_class_problem",
    "is_sequence",
]

Problems = dict[int, str]
"""Bad rows of an answer, each with what is wrong with it."""


class AnswerError(ValueError):
    """An answer that is wrong as a whole (its shape, its types), not in some rows."""


class CheckedArcs(NamedTuple):
    """One arc per row, checked: every column as long as the batch."""

    cost: IntArray
    capacity: IntArray
    min_flow: IntArray


class CheckedTimedArcs(NamedTuple):
    """A `TimedArcs` answer, checked and spelt out to one value per row."""

    cost: IntArray
    capacity: IntArray
    min_flow: IntArray
    per_second: IntArray
    clock: Clock
    this_round_only: bool


class CheckedTaskArcs(NamedTuple):
    """A `TaskArcs` answer, checked: arc k from batch row `rows[k]` to `targets[k]`; and per
    batch row whether it depends on the topology."""

    rows: IntArray
    targets: list[object]
    cost: IntArray
    capacity: IntArray
    min_flow: IntArray
    depends_on_topology: BoolArray


# ---------------------------------------------------------------------- single values


def is_sequence(value: object) -> bool:
    """A list or tuple (or another sequence that is not a str or bytes)."""
    if type(value) is tuple or type(value) is list:  # the usual answers, without the ABC check
        return True
    return isinstance(value, Sequence) and not isinstance(value, str | bytes)


def equiv_class_problem(value: object) -> str | None:
    """Why `value` is not an equivalence class id (an int or a non-empty str), or None."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        return "is not an equivalence class (an int or a str)"
    if value == "":
        return "is an empty str"
    return None


# ---------------------------------------------------------------------- columns


def spelt_out(column: IntArray, length: int, name: str) -> IntArray:
    """`column` with one value per row: a column of one broadcast to `length`. AnswerError if
    it has another length."""
    if len(column) == length:
        return column
    if len(column) == 1:
        return np.full(length, column[0], dtype=np.int64)
    raise AnswerError(f"{name} has {len(column)} values for {length} rows")


def arc_problems(
    cost: IntArray, capacity: IntArray, min_flow: IntArray, *, max_min_flow: int | None = None
) -> Problems:
    """The rows whose (cost, capacity, min_flow) no arc may have, worded as for an
    `ArcDescriptor`; with `max_min_flow`, also those asking for more min_flow than that."""
    bad = (np.abs(cost) > MAX_COST) | (capacity < 0) | (capacity > MAX_CAPACITY)
    bad |= (min_flow < 0) | (min_flow > capacity)
    if max_min_flow is not None:
        bad |= min_flow > max_min_flow
    problems: Problems = {}
    for row in np.flatnonzero(bad).tolist():
        values = int(cost[row]), int(capacity[row]), int(min_flow[row])
        problem = arc_values_problem(*values)
        if problem is None:
            problem = f"min_flow {values[2]} exceeds the one unit a task carries"
        problems[row] = problem
    return problems


def check_arc_columns(
    answer: object, length: int, *, max_min_flow: int | None = None
) -> tuple[CheckedArcs, Problems]:
    """An `ArcColumns` answer for a batch of `length` rows, and its bad rows."""
    if not isinstance(answer, ArcColumns):
        raise AnswerError(f"expected ArcColumns, got {type(answer).__name__}")
    checked = CheckedArcs(
        spelt_out(answer.cost, length, "cost"),
        spelt_out(answer.capacity, length, "capacity"),
        spelt_out(answer.min_flow, length, "min_flow"),
    )
    return checked, arc_problems(*checked, max_min_flow=max_min_flow)


def check_timed_arcs(answer: object, length: int) -> tuple[CheckedTimedArcs, Problems]:
    """A `TimedArcs` answer for `length` tasks, and its bad rows (arcs out of tasks: min_flow at
    most 1; a rate beyond +-MAX_COST per second is refused too)."""
    if not isinstance(answer, TimedArcs):
        raise AnswerError(f"expected TimedArcs, got {type(answer).__name__}")
    arcs, problems = check_arc_columns(answer, length, max_min_flow=1)
    per_second = spelt_out(answer.per_second, length, "per_second")
    for row in np.flatnonzero(np.abs(per_second) > MAX_COST).tolist():
        problems.setdefault(
            row, f"per_second {per_second[row]} exceeds the limit of {MAX_COST} in magnitude"
        )
    return CheckedTimedArcs(*arcs, per_second, answer.clock, answer.this_round_only), problems


def check_task_arcs(
    answer: object,
    length: int,
    *,
    to_classes: bool,
    cluster: ClusterView,
) -> tuple[CheckedTaskArcs, Problems]:
    """A `TaskArcs` answer for a batch of `length` tasks, and its bad rows: the batch rows whose
    task has an arc with bad values, a target that is no class (`to_classes`) or no live
    resource, or two arcs to one target. Problems are keyed by batch row."""
    if not isinstance(answer, TaskArcs):
        raise AnswerError(f"expected TaskArcs, got {type(answer).__name__}")
    rows = answer.rows
    arcs = len(rows)
    if len(answer.targets) != arcs:
        raise AnswerError(f"{arcs} rows but {len(answer.targets)} targets")
    if arcs and (int(rows.min()) < 0 or int(rows.max()) >= length):
        raise AnswerError(
            f"rows must lie within 0..{length - 1}, got {int(rows.min())}..{int(rows.max())}"
        )
    depends = answer.depends_on_topology
    if len(depends) not in (1, length):
        raise AnswerError(f"depends_on_topology has {len(depends)} values for {length} rows")
    checked = CheckedTaskArcs(
        rows,
        list(answer.targets),
        spelt_out(answer.cost, arcs, "cost"),
        spelt_out(answer.capacity, arcs, "capacity"),
        spelt_out(answer.min_flow, arcs, "min_flow"),
        np.broadcast_to(depends, length) if len(depends) == 1 else depends,
    )
    problems: Problems = {}
    for arc, problem in arc_problems(*checked[2:5], max_min_flow=1).items():
        problems.setdefault(int(rows[arc]), f"arc {arc}: {problem}")
    for arc, problem in _target_problems(checked.targets, to_classes, cluster).items():
        problems.setdefault(int(rows[arc]), f"arc {arc}: target {checked.targets[arc]!r} {problem}")
    for arc in _duplicates(rows, checked.targets):
        problems.setdefault(int(rows[arc]), f"arc {arc}: a second arc to {checked.targets[arc]!r}")
    return checked, problems


def _target_problems(targets: list[object], to_classes: bool, cluster: ClusterView) -> Problems:
    problems: Problems = {}
    if to_classes:
        for arc, target in enumerate(targets):
            if type(target) is not str or not target:  # the usual case checked first
                problem = equiv_class_problem(target)
                if problem is not None:
                    problems[arc] = problem
        return problems
    has_resource = cluster.has_resource
    for arc, target in enumerate(targets):
        if type(target) is not ResourceRef:
            problems[arc] = "is not a ResourceRef"
        elif not has_resource(target):
            problems[arc] = "is not a live resource"
    return problems


def _duplicates(rows: IntArray, targets: list[object]) -> list[int]:
    """The arcs that repeat an earlier arc's (row, target)."""
    if len(rows) < 2 or bool(np.all(rows[1:] > rows[:-1])):
        return []  # each row once (the usual `one_each`): no pair can repeat
    seen: set[tuple[int, object]] = set()
    repeated: list[int] = []
    for arc, key in enumerate(zip(rows.tolist(), targets, strict=True)):
        try:
            if key in seen:
                repeated.append(arc)
            seen.add(key)
        except TypeError:  # unhashable: its type is reported instead
            continue
    return repeated


def check_resource_arcs(
    answer: object, topology: Topology
) -> tuple[CheckedArcs, IntArray, IntArray, Problems]:
    """A `ResourceArcs` answer: the checked values, each arc's level code and row, and the bad
    arcs (a row outside its level, a second arc to one resource, bad values)."""
    if not isinstance(answer, ResourceArcs):
        raise AnswerError(f"expected ResourceArcs, got {type(answer).__name__}")
    arcs = len(answer.rows)
    checked = CheckedArcs(
        spelt_out(answer.cost, arcs, "cost"),
        spelt_out(answer.capacity, arcs, "capacity"),
        spelt_out(answer.min_flow, arcs, "min_flow"),
    )
    kinds, rows = spelt_out(answer.kinds, arcs, "kinds"), answer.rows
    problems = arc_problems(*checked)
    sizes = np.array([len(topology.machines), len(topology.racks), len(topology.pods)])
    outside = (kinds < 0) | (kinds > 2) | (rows < 0) | (rows >= sizes[np.clip(kinds, 0, 2)])
    for arc in np.flatnonzero(outside).tolist():
        problems.setdefault(arc, f"row {rows[arc]} is not a resource of its level")
    keys = kinds * (1 << 40) + rows
    _, first = np.unique(keys, return_index=True)
    repeated = np.ones(arcs, dtype=np.bool_)
    repeated[first] = False
    for arc in np.flatnonzero(repeated).tolist():
        problems.setdefault(arc, "a second arc to the same resource")
    return checked, kinds, rows, problems


def check_class_arcs(
    answer: object, source: EquivClassId
) -> tuple[CheckedArcs, list[EquivClassId], Problems]:
    """A `ClassArcs` answer from class `source`, and its bad arcs."""
    if not isinstance(answer, ClassArcs):
        raise AnswerError(f"expected ClassArcs, got {type(answer).__name__}")
    targets: list[EquivClassId] = list(answer.targets)
    arcs = len(targets)
    checked = CheckedArcs(
        spelt_out(answer.cost, arcs, "cost"),
        spelt_out(answer.capacity, arcs, "capacity"),
        spelt_out(answer.min_flow, arcs, "min_flow"),
    )
    problems = arc_problems(*checked)
    seen: set[object] = set()
    for arc, target in enumerate(targets):
        problem = equiv_class_problem(target)
        if problem is None and target == source:
            problem = "is the class itself (a self-loop)"
        elif problem is None and target in seen:
            problem = "is a duplicate"
        if problem is not None:
            problems.setdefault(arc, f"target {target!r} {problem}")
        elif problem is None:
            seen.add(target)
    return checked, targets, problems


def check_stats_columns(answer: object, length: int) -> StatsColumns:
    """A `StatsColumns` answer for `length` machines; AnswerError naming the first problem
    (statistics feed every arc of the round: there is no leaving a row out)."""
    if not isinstance(answer, StatsColumns):
        raise AnswerError(f"expected StatsColumns, got {type(answer).__name__}")
    for name in ("machines", "slots", "running_tasks"):
        column = getattr(answer, name)
        if (
            not isinstance(column, np.ndarray)
            or column.dtype != np.int64
            or column.shape != (length,)
        ):
            raise AnswerError(f"{name} must be an int64 array of {length} values")
    for name in ("capacity", "reserved", "measured_usage"):
        matrix = getattr(answer, name)
        if (
            not isinstance(matrix, np.ndarray)
            or matrix.dtype != np.int64
            or matrix.shape != (length, 5)
        ):
            raise AnswerError(f"{name} must be an int64 array of shape ({length}, 5)")
    for name in ("machines", "slots", "running_tasks", "capacity", "reserved", "measured_usage"):
        negative = np.flatnonzero((getattr(answer, name) < 0).reshape(length, -1).any(axis=1))
        if len(negative):
            raise AnswerError(f"row {int(negative[0])}: {name} must not be negative")
    return answer
