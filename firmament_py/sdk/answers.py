"""What batch hooks return: arcs for many tasks, jobs or resources at once, as arrays.

Each answer holds integer columns (numpy arrays, or anything numpy turns into int64: a list of
ints, a single int that every row shares). Making one only converts the columns; the values are
checked by the scheduler row by row, so that one bad row leaves out only the task it is about
(a per-item `ArcDescriptor` is checked when made, because it is about one arc only). The rules
are the same as for `ArcDescriptor`: |cost| <= MAX_COST, 0 <= min_flow <= capacity <=
MAX_CAPACITY, and at most 1 unit of min_flow on an arc out of a task.

* `ArcColumns`: one arc per row of the batch asked about (`unscheduled_to_sink_batch`,
  `leaf_to_sink_batch`, and each level of `TopologyArcs`).
* `TimedArcs`: one arc per task whose cost may grow with time, declared once: cost
  `base + per_second x clock` (`sdk/columns.py`: `Clock`, `timed_cost`). The scheduler works the
  cost out every round from the task's clock, and asks again only when the task changes
  (`this_round_only=True` asks again every round, for costs that follow anything else).
* `TaskArcs`: arcs from tasks of the batch to classes or resources, any number per task.
* `ResourceArcs`: arcs from one class to resources, by their rows in the round's `Topology`.
* `ClassArcs`: arcs from one class to other classes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Generic, TypeVar

import numpy as np

from firmament_py.model.ids import EquivClassId
from firmament_py.sdk.columns import BoolArray, Clock, IntArray
from firmament_py.sdk.types import MAX_CAPACITY, ResourceKind

__all__ = [
    "ArcColumns",
    "ClassArcs",
    "IntColumn",
    "ResourceArcs",
    "TaskArcs",
    "TimedArcs",
    "TopologyArcs",
    "int_column",
]

IntColumn = IntArray | Sequence[int] | int
"""A column of integers: an array, a sequence, or one int for every row."""

T = TypeVar("T")

_KIND_CODES = {ResourceKind.MACHINE: 0, ResourceKind.RACK: 1, ResourceKind.POD: 2}
KIND_OF_CODE = (ResourceKind.MACHINE, ResourceKind.RACK, ResourceKind.POD)


def int_column(value: object, name: str) -> IntArray:
    """`value` as a one-dimensional int64 array (a scalar as an array of one, to broadcast).

    TypeError naming `name` for anything that is not integers: floats, bools (as for
    `ArcDescriptor`, a bool is not a cost), objects, or more than one dimension.
    """
    if isinstance(value, bool | np.bool_):
        raise TypeError(f"{name} must be integers, not a bool")
    array = np.asarray(value)
    if array.dtype.kind not in "iu":
        if array.dtype == object or array.size:  # an empty list is fine, whatever its dtype
            raise TypeError(f"{name} must be integers, got an array of {array.dtype}")
    if array.ndim > 1:
        raise TypeError(f"{name} must be one-dimensional, got shape {array.shape}")
    if array.dtype.kind == "u" and array.size and int(array.max()) > np.iinfo(np.int64).max:
        raise TypeError(f"{name} holds a value beyond int64")
    return np.atleast_1d(array).astype(np.int64, copy=False)


class ArcColumns:
    """One arc per row of the batch asked about: its cost, capacity and min_flow."""

    __slots__ = ("capacity", "cost", "min_flow")

    def __init__(self, cost: IntColumn, capacity: IntColumn = 1, min_flow: IntColumn = 0) -> None:
        self.cost = int_column(cost, "cost")
        self.capacity = int_column(capacity, "capacity")
        self.min_flow = int_column(min_flow, "min_flow")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({_preview(self.cost)} ...)"


class TimedArcs(ArcColumns):
    """One arc per task of the batch, whose cost is `cost + per_second x clock / 10^6` at each
    round's time (the fraction dropped towards zero, within +-MAX_COST): `cost` is the base, and
    `clock` what the growth follows (`Clock.WAITED` for waiting costs, `Clock.THIS_RUN` for
    Quincy's run credit, ...). A negative `per_second` makes the cost fall with time.

    The answer holds until the task changes (it is submitted, placed, evicted, migrated or
    updated), when the hook is asked again; with `this_round_only=True` it holds for this round
    only, and the hook is asked about every task it covers again next round (for costs that
    follow something else than time: latencies, random draws).
    """

    __slots__ = ("clock", "per_second", "this_round_only")

    def __init__(
        self,
        cost: IntColumn,
        capacity: IntColumn = 1,
        min_flow: IntColumn = 0,
        *,
        per_second: IntColumn = 0,
        clock: Clock = Clock.WAITED,
        this_round_only: bool = False,
    ) -> None:
        super().__init__(cost, capacity, min_flow)
        if not isinstance(clock, Clock):
            raise TypeError(f"clock must be a Clock, got {clock!r}")
        self.per_second = int_column(per_second, "per_second")
        self.clock = clock
        self.this_round_only = bool(this_round_only)


class TaskArcs(Generic[T]):
    """Arcs from tasks of the batch to classes (`T` = EquivClassId) or resources (`T` =
    ResourceRef): arc k leaves the task of row `rows[k]` for `targets[k]`. A task may have any
    number of arcs, in any order, but one at most to each target.

    `depends_on_topology` says, per row of the batch (or for all of them), whether the task's
    answer may change when a machine joins, leaves or changes its labels: those tasks are asked
    again then, the others not.
    """

    __slots__ = ("capacity", "cost", "depends_on_topology", "min_flow", "rows", "targets")

    def __init__(
        self,
        rows: IntColumn,
        targets: Sequence[T],
        cost: IntColumn = 0,
        capacity: IntColumn = 1,
        min_flow: IntColumn = 0,
        *,
        depends_on_topology: bool | Sequence[bool] | BoolArray = False,
    ) -> None:
        self.rows = int_column(rows, "rows")
        if isinstance(targets, str | bytes) or not isinstance(targets, Sequence):
            raise TypeError(f"targets must be a list or tuple, got {type(targets).__name__}")
        self.targets = targets
        self.cost = int_column(cost, "cost")
        self.capacity = int_column(capacity, "capacity")
        self.min_flow = int_column(min_flow, "min_flow")
        mask = np.asarray(depends_on_topology)
        if mask.dtype != np.bool_ or mask.ndim > 1:
            raise TypeError("depends_on_topology must be a bool or a one-dimensional bool array")
        self.depends_on_topology: BoolArray = np.atleast_1d(mask)

    def __repr__(self) -> str:
        return f"TaskArcs({len(self.targets)} arcs)"

    @classmethod
    def one_each(
        cls,
        targets: Sequence[T],
        cost: IntColumn = 0,
        capacity: IntColumn = 1,
        min_flow: IntColumn = 0,
        *,
        depends_on_topology: bool | Sequence[bool] | BoolArray = False,
    ) -> TaskArcs[T]:
        """One arc from each row of the batch, in order, to `targets[row]`."""
        return cls(
            np.arange(len(targets), dtype=np.int64),
            targets,
            cost,
            capacity,
            min_flow,
            depends_on_topology=depends_on_topology,
        )

    @classmethod
    def none(cls) -> TaskArcs[T]:
        """No arc at all."""
        return cls(np.zeros(0, dtype=np.int64), ())


class ResourceArcs:
    """Arcs from one class to resources of the round's `Topology`, each named by its level and
    its row there: `ResourceArcs.to_machines(rows, cost, capacity)`, `.to_racks`, `.to_pods`,
    added together with `+` for a class that reaches several levels. One arc at most to each
    resource."""

    __slots__ = ("capacity", "cost", "kinds", "min_flow", "rows")

    def __init__(
        self,
        kind: ResourceKind,
        rows: IntColumn,
        cost: IntColumn,
        capacity: IntColumn,
        min_flow: IntColumn = 0,
    ) -> None:
        if not isinstance(kind, ResourceKind):
            raise TypeError(f"kind must be a ResourceKind, got {kind!r}")
        self.rows = int_column(rows, "rows")
        self.kinds = np.full(len(self.rows), _KIND_CODES[kind], dtype=np.int64)
        self.cost = int_column(cost, "cost")
        self.capacity = int_column(capacity, "capacity")
        self.min_flow = int_column(min_flow, "min_flow")

    def __repr__(self) -> str:
        return f"ResourceArcs({len(self.rows)} arcs)"

    @classmethod
    def to_machines(
        cls, rows: IntColumn, cost: IntColumn, capacity: IntColumn, min_flow: IntColumn = 0
    ) -> ResourceArcs:
        """Arcs to the machines of these rows of `topology.machines`."""
        return cls(ResourceKind.MACHINE, rows, cost, capacity, min_flow)

    @classmethod
    def to_racks(
        cls, rows: IntColumn, cost: IntColumn, capacity: IntColumn, min_flow: IntColumn = 0
    ) -> ResourceArcs:
        """Arcs to the racks of these rows of `topology.racks`."""
        return cls(ResourceKind.RACK, rows, cost, capacity, min_flow)

    @classmethod
    def to_pods(
        cls, rows: IntColumn, cost: IntColumn, capacity: IntColumn, min_flow: IntColumn = 0
    ) -> ResourceArcs:
        """Arcs to the pods of these rows of `topology.pods`."""
        return cls(ResourceKind.POD, rows, cost, capacity, min_flow)

    @classmethod
    def none(cls) -> ResourceArcs:
        """No arc at all."""
        return cls(ResourceKind.MACHINE, np.zeros(0, dtype=np.int64), 0, 0)

    def __add__(self, other: ResourceArcs) -> ResourceArcs:
        if not isinstance(other, ResourceArcs):
            return NotImplemented
        both = ResourceArcs.none()
        for name in ("rows", "kinds", "cost", "capacity", "min_flow"):
            mine, theirs = getattr(self, name), getattr(other, name)
            # Scalars broadcast within one answer; spell them out before joining two.
            mine = np.broadcast_to(mine, len(self.rows)) if len(mine) == 1 else mine
            theirs = np.broadcast_to(theirs, len(other.rows)) if len(theirs) == 1 else theirs
            setattr(both, name, np.concatenate([mine, theirs]))
        return both


class ClassArcs:
    """Arcs from one class to other classes: arc k goes to `targets[k]` (no class twice, and
    never the class itself). The capacity defaults to `MAX_CAPACITY`, a free pass-through."""

    __slots__ = ("capacity", "cost", "min_flow", "targets")

    def __init__(
        self,
        targets: Sequence[EquivClassId],
        cost: IntColumn = 0,
        capacity: IntColumn = MAX_CAPACITY,
        min_flow: IntColumn = 0,
    ) -> None:
        if isinstance(targets, str | bytes) or not isinstance(targets, Sequence):
            raise TypeError(f"targets must be a list or tuple, got {type(targets).__name__}")
        self.targets = targets
        self.cost = int_column(cost, "cost")
        self.capacity = int_column(capacity, "capacity")
        self.min_flow = int_column(min_flow, "min_flow")

    def __repr__(self) -> str:
        return f"ClassArcs({len(self.targets)} arcs)"

    @classmethod
    def none(cls) -> ClassArcs:
        return cls(())


class TopologyArcs:
    """The topology arcs of a round: `machines[i]` is the arc from the rack of machine row i to
    it, `racks[j]` the arc from the pod of rack row j to it (one `ArcColumns` per level, in the
    rows of `Topology.machines` and `Topology.racks`)."""

    __slots__ = ("machines", "racks")

    def __init__(self, machines: ArcColumns, racks: ArcColumns) -> None:
        for name, value in (("machines", machines), ("racks", racks)):
            if not isinstance(value, ArcColumns):
                raise TypeError(f"{name} must be ArcColumns, got {type(value).__name__}")
        self.machines = machines
        self.racks = racks

    def __repr__(self) -> str:
        return f"TopologyArcs({len(self.machines.cost)}, {len(self.racks.cost)})"


def _preview(values: IntArray) -> str:
    shown = ", ".join(str(v) for v in values[:3].tolist())
    return f"[{shown}{', ...' if len(values) > 3 else ''}]"
