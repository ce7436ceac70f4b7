"""Packing tasks that ask for several resources: the round's request classes, and every
machine's free room dealt out among them.

A flow network cannot say that tasks of several sizes draw on one budget (that is a knapsack
constraint): a class whose arc to a machine has capacity n lets n of its tasks through,
whatever the other classes send there, so capacities worked out class by class (as many of
this request as fit) overfill a machine the moment two classes use it in one round. Dealing
avoids that: each round, every machine's free slots and free resources are dealt out among
the request classes with waiting tasks, one task to each class in turn (in an order the policy
chooses, largest request first as a rule), until nothing more fits; a class's arc to a machine
carries its share. The shares never add up to more than the machine has, so no round
overcommits it whatever arcs the solver uses. A first pass deals each class no more than it
has waiting across the whole cluster, so that the first classes in the order cannot take every
machine's room while the others wait (`deal_room`); a second deals the room left, so the solver
can still choose among machines. A large request is never crowded out by many small ones.

Used by the cpu-mem, network-aware and zoe policies, once per round::

    classes = request_classes(cluster.waiting_tasks.values(), name=my_class_name)
    order = sorted(classes.values(), key=largest_first)
    dealing = Dealing.of(topology.machines, order)   # each machine's free room, by default
    rows, shares = dealing.arcs(equiv_class)          # the class's machines and its shares

`deal_room` is the dealing itself, on plain arrays.

The price: a class holds its shares on every machine at once, so in a round that mixes
requests, room dealt to a class on machines its tasks do not go to stays idle until the next
round deals again (a round later).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from firmament_py.model.ids import EquivClassId
from firmament_py.model.labels import LabelSelector
from firmament_py.sdk.columns import ResourceColumns
from firmament_py.sdk.types import TaskView

__all__ = ["Dealing", "RequestClass", "deal_room", "largest_first", "request_classes"]

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True, slots=True)
class RequestClass:
    """The waiting tasks that share a class: their request (`Resources.as_tuple()`), their
    label selectors, and how many wait this round."""

    name: EquivClassId
    request: tuple[int, ...]
    selectors: tuple[LabelSelector, ...]
    waiting: int


def request_classes(
    waiting: Iterable[TaskView], name: Callable[[TaskView], EquivClassId]
) -> dict[EquivClassId, RequestClass]:
    """The waiting tasks grouped by `name(task)`, in the order the first of each was seen. All
    the tasks of one name must have the same request and selectors (a name that says them,
    as `request_class` names in the policies do, guarantees it); ValueError if not."""
    found: dict[EquivClassId, RequestClass] = {}
    counts: dict[EquivClassId, int] = {}
    for task in waiting:
        key = name(task)
        known = found.get(key)
        if known is None:
            found[key] = RequestClass(key, task.request.as_tuple(), tuple(task.selectors), 0)
        elif known.request != task.request.as_tuple() or known.selectors != tuple(task.selectors):
            raise ValueError(
                f"class {key!r} holds tasks with different requests or selectors "
                f"(task {task.task_id}): name classes after both"
            )
        counts[key] = counts.get(key, 0) + 1
    return {
        key: RequestClass(c.name, c.request, c.selectors, counts[key]) for key, c in found.items()
    }


def largest_first(request_class: RequestClass) -> tuple[object, ...]:
    """A dealing order: the largest requests first (dimension by dimension, in the order of
    `Resources.DIMENSIONS`), then by name."""
    return (*(-amount for amount in request_class.request), str(request_class.name))


@dataclass(frozen=True, slots=True)
class Dealing:
    """One round's dealing: the classes in the order they were dealt, and each one's share of
    each machine of `machines` (`shares[machine row, class position]`)."""

    machines: ResourceColumns
    order: tuple[RequestClass, ...]
    shares: IntArray
    positions: dict[EquivClassId, int]

    @classmethod
    def of(
        cls,
        machines: ResourceColumns,
        order: Iterable[RequestClass],
        room: IntArray | None = None,
    ) -> Dealing:
        """Deal `machines`' free slots and `room` (default: their free resources) among the
        classes of `order`, in that order, each only on the machines its selectors match."""
        order = tuple(order)
        stats = machines.stats
        allowed = (
            np.stack([machines.matching(c.selectors) for c in order], axis=1)
            if order
            else np.zeros((len(machines), 0), dtype=np.bool_)
        )
        shares = deal_room(
            np.array([c.request for c in order], dtype=np.int64).reshape(len(order), -1),
            np.array([c.waiting for c in order], dtype=np.int64),
            np.maximum(stats.free, 0) if room is None else room,
            stats.free_slots,
            allowed,
        )
        return cls(machines, order, shares, {c.name: k for k, c in enumerate(order)})

    def arcs(self, equiv_class: EquivClassId) -> tuple[RequestClass | None, IntArray, IntArray]:
        """A class, the rows of the machines it was dealt a share of, and those shares (none
        for a class that was not dealt)."""
        k = self.positions.get(equiv_class)
        if k is None:
            empty = np.zeros(0, dtype=np.int64)
            return None, empty, empty
        rows = np.flatnonzero(self.shares[:, k] > 0)
        return self.order[k], rows, self.shares[rows, k]


def deal_room(
    requests: IntArray,
    demands: IntArray,
    room: IntArray,
    slots: IntArray,
    allowed: BoolArray,
) -> IntArray:
    """How many tasks of each class every machine takes this round: `shares[m, k]`.

    `requests` (classes x dimensions) is what one task of each class asks for, `demands`
    (classes) how many of each wait, `room` (machines x dimensions) what each machine can
    still give, `slots` (machines) its free slots, `allowed` (machines x classes) whether a
    class may use a machine at all (its selectors match). Each machine is dealt one task to
    each class in turn, in the order of the rows of `requests`, a class leaving the turn once
    its next task does not fit, until no class is left or no slot. Two passes:

    - First, a class takes no more tasks across the whole cluster than it has waiting (the
      machines of one turn take from it in row order), so the first classes cannot take every
      machine's room while the others wait: each class's demand is dealt where room allows.
    - Then what room is left is dealt again, a class now taking on each machine up to its
      demand, so the solver can choose among machines (costs decide which shares are used).

    Machine by machine, the shares' total request fits within `room`, their number within
    `slots`, no class holds more than its demand, and no class with demand left could take one
    more task.
    """
    room = np.array(room, dtype=np.int64).reshape(len(slots), -1)
    requests = np.asarray(requests, dtype=np.int64).reshape(len(demands), room.shape[1])
    demands = np.asarray(demands, dtype=np.int64)
    slots = np.array(slots, dtype=np.int64)
    allowed = np.asarray(allowed, dtype=np.bool_).reshape(len(slots), len(demands))
    caps = np.broadcast_to(demands, allowed.shape)
    first = _deal(requests, caps, room, slots, allowed, across=demands.copy())
    second = _deal(requests, caps - first, room, slots, allowed, across=None)
    shares: IntArray = first + second
    return shares


def _deal(
    requests: IntArray,
    caps: IntArray,
    room: IntArray,
    slots: IntArray,
    allowed: BoolArray,
    across: IntArray | None,
) -> IntArray:
    """One pass of `deal_room`: turns on every machine at once, class k taking at most
    `caps[m, k]` on machine m and, if `across` is given, at most `across[k]` in all. `room`,
    `slots` and `across` are used up in place."""
    machines, classes = caps.shape
    # Column-major: the turns below work a class (a column) at a time.
    shares = np.zeros((machines, classes), dtype=np.int64, order="F")
    caps = np.asfortranarray(caps)
    in_play = np.asfortranarray(allowed & (caps > 0))
    if across is not None:
        in_play &= across > 0
    never = np.iinfo(np.int64).max
    while True:
        playing = in_play.sum(axis=1)
        active = (playing > 0) & (slots > 0)
        if not active.any():
            return shares
        # Whole turns in which every class still in play gets a task, dealt at once.
        total = in_play.astype(np.int64) @ requests
        left = np.where(in_play, caps - shares, never)
        if across is not None:  # as many whole turns as a class's demand covers everywhere
            where = (in_play & active[:, None]).sum(axis=0)
            left = np.minimum(left, np.where(in_play, across // np.maximum(where, 1), never))
        by_room = np.where(total > 0, room // np.maximum(total, 1), never).min(axis=1)
        turns = np.minimum(np.minimum(slots // np.maximum(playing, 1), left.min(axis=1)), by_room)
        turns = np.where(active, turns, 0)
        dealt = in_play * turns[:, None]
        shares += dealt
        room -= turns[:, None] * total
        slots -= turns * playing
        if across is not None:
            across -= dealt.sum(axis=0)
        # Then one turn task by task, in which at least one class leaves or the slots end.
        for k in np.flatnonzero(in_play.any(axis=0)).tolist():
            take = in_play[:, k] & (slots > 0) & (shares[:, k] < caps[:, k])
            take &= (requests[k] <= room).all(axis=1)
            if across is not None:
                takers = np.flatnonzero(take)
                take[takers[across[k] :]] = False
                across[k] -= min(len(takers), int(across[k]))
            shares[:, k] += take
            room -= take[:, None] * requests[k]
            slots -= take
            in_play[:, k] = take & (shares[:, k] < caps[:, k])
            if across is not None and across[k] == 0:
                in_play[:, k] = False
