"""Graph change batches: what a solver receives between two solves.

A `ChangeBatch` is the net effect of one round of `FlowGraph` mutations, already cleaned up the
way Firmament's change manager cleans its DIMACS changes (merge changes to the same arc, drop
changes to nodes that are removed later in the round). It is a plain int64 array so that it
crosses process boundaries cheaply and numba kernels can apply it directly.

Row layout (9 int64 columns), by operation in column 0:

    REMOVE_NODE  node
    REMOVE_ARC   arc  src dst low cap cost kind old_cost    (low/cap are the old ones)
    ADD_NODE     node supply kind
    SET_SUPPLY   node supply kind
    ADD_ARC      arc  src dst low cap cost kind cost
    CHANGE_ARC   arc  src dst low cap cost kind old_cost

Rows are ordered so that applying them in sequence is always valid: node removals, arc removals,
node additions, supply changes, arc additions, arc changes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

import numpy as np
import numpy.typing as npt

ROW_WIDTH = 9


class ChangeOp(IntEnum):
    """Kinds of graph change, in the order a batch applies them."""

    REMOVE_NODE = 1
    REMOVE_ARC = 2
    ADD_NODE = 3
    SET_SUPPLY = 4
    ADD_ARC = 5
    CHANGE_ARC = 6


# The same codes as plain ints, for compiled code (numba freezes module globals as constants).
OP_REMOVE_NODE = int(ChangeOp.REMOVE_NODE)
OP_REMOVE_ARC = int(ChangeOp.REMOVE_ARC)
OP_ADD_NODE = int(ChangeOp.ADD_NODE)
OP_SET_SUPPLY = int(ChangeOp.SET_SUPPLY)
OP_ADD_ARC = int(ChangeOp.ADD_ARC)
OP_CHANGE_ARC = int(ChangeOp.CHANGE_ARC)

# Column indices shared by node rows (NODE_*) and arc rows (ARC_*).
COL_OP = 0
COL_ID = 1
NODE_SUPPLY = 2
NODE_KIND = 3
ARC_SRC = 2
ARC_DST = 3
ARC_LOW = 4
ARC_CAP = 5
ARC_COST = 6
ARC_KIND = 7
ARC_OLD_COST = 8


@dataclass(frozen=True)
class ChangeBatch:
    """The net graph changes of one round.

    `reset` batches describe a whole graph from scratch (a snapshot): a solver that receives one
    drops everything it held before applying it.
    """

    rows: npt.NDArray[np.int64]
    reset: bool = False
    # How many raw mutations were merged into these rows (for statistics only).
    raw_changes: int = 0
    counts: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.rows.ndim != 2 or self.rows.shape[1] != ROW_WIDTH:
            raise ValueError(f"change rows must have shape (n, {ROW_WIDTH}), got {self.rows.shape}")
        if self.rows.dtype != np.int64:
            raise ValueError(f"change rows must be int64, got {self.rows.dtype}")
        if not self.counts:
            ops = self.rows[:, COL_OP]
            if len(ops) and (int(ops.min()) < 0 or int(ops.max()) >= len(ChangeOp) + 1):
                values, numbers = np.unique(ops, return_counts=True)  # names the bad op below
            else:
                numbers = np.bincount(ops, minlength=len(ChangeOp) + 1)
                values = np.flatnonzero(numbers)
                numbers = numbers[values]
            object.__setattr__(
                self,
                "counts",
                {ChangeOp(int(op)).name: int(k) for op, k in zip(values, numbers, strict=True)},
            )

    def __len__(self) -> int:
        return int(self.rows.shape[0])

    @staticmethod
    def empty() -> ChangeBatch:
        return ChangeBatch(np.zeros((0, ROW_WIDTH), dtype=np.int64))

    def describe(self) -> str:
        parts = [f"{name.lower()}={n}" for name, n in sorted(self.counts.items())]
        head = "reset " if self.reset else ""
        return head + (", ".join(parts) if parts else "no changes")

    def max_cost_change(self) -> int:
        """Largest |cost| among added arcs and |new - old| among changed arcs.

        Incremental cost scaling starts its epsilon here (Firmament section 6.2).
        """
        rows = self.rows
        if not len(rows):
            return 0
        op, cost = rows[:, COL_OP], rows[:, ARC_COST]
        added = np.where(op == ChangeOp.ADD_ARC, np.abs(cost), 0)
        changed = np.where(op == ChangeOp.CHANGE_ARC, np.abs(cost - rows[:, ARC_OLD_COST]), 0)
        return max(int(added.max()), int(changed.max()))
