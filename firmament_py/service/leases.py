"""Leases on placements: a PLACE (or MIGRATE) is provisional until the cluster manager confirms
the task started (`task_started`); one not confirmed within the lease returns the task to the
queue and frees its slot.

A daemon run with `--lease-ms N` marks each chunk of a round's decisions with the lease
(`lease_ms` in the chunk's record), and every task that chunk placed or moved holds a lease
from the record's time. Confirming drops it; so does the task leaving the machine it was
leased on (completed, failed, removed, preempted, its machine gone), which is found when the
lease comes due rather than tracked through every request. A lease that comes due on a task
still running where it was leased is expired: the daemon preempts the task in a record of its
own (a `decisions` record with `expired: true`), which the replica, recovery and the change
feed all see.

Everything here is rebuilt from records, so a daemon restarted with another lease, or with
none, treats the placements made before as they were made: leased or not. No I/O here.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from typing import Any

from firmament_py.model.cluster import ClusterState
from firmament_py.model.states import TaskState

__all__ = ["LeaseBook"]

_LEASED_KINDS = frozenset({"place", "migrate"})


class LeaseBook:
    """The placements not confirmed yet, each with the time its lease started (microseconds)
    and the machine it is on, and the count of leases expired so far."""

    def __init__(self) -> None:
        self._leases: dict[int, tuple[int, str]] = {}
        self._due: list[tuple[int, int]] = []  # (lease start, task), a heap; may hold stale
        self.expired = 0
        """Leases expired since the journal began (placements returned to the queue)."""

    def take_chunk(self, record: Mapping[str, Any]) -> None:
        """Start a lease for each task a chunk's record placed or moved, if the chunk was
        made under a lease (`lease_ms`)."""
        if "lease_ms" not in record:
            return
        start = record["time"]
        for kind, task_id, _, to_machine in record["deltas"]:
            if kind in _LEASED_KINDS:
                self._leases[task_id] = (start, to_machine)
                heapq.heappush(self._due, (start, task_id))

    def confirm(self, task_id: int) -> None:
        """The manager confirmed the task started (`task_started`): its lease is kept."""
        self._leases.pop(task_id, None)

    def take_expiry(self, record: Mapping[str, Any]) -> None:
        """Take an `expired` record: its tasks' leases are over."""
        for _, task_id, _, _ in record["deltas"]:
            self._leases.pop(task_id, None)
        self.expired += len(record["deltas"])

    def due(self, cluster: ClusterState, now: int, lease_us: int) -> list[tuple[int, str]]:
        """The (task, machine) of every lease started `lease_us` or more before `now` on a task
        still running where it was leased; leases of tasks that left are dropped on the way."""
        out: list[tuple[int, str]] = []
        while self._due and self._due[0][0] + lease_us <= now:
            start, task_id = heapq.heappop(self._due)
            lease = self._leases.get(task_id)
            if lease is None or lease[0] != start:
                continue  # confirmed, or leased again later (a newer entry is in the heap)
            machine = lease[1]
            task = cluster.tasks.get(task_id)
            if task is None or task.state is not TaskState.RUNNING or task.machine_id != machine:
                del self._leases[task_id]  # it left that machine: nothing to confirm
                continue
            out.append((task_id, machine))
        return out

    def unconfirmed(self, cluster: ClusterState) -> int:
        """Tasks running where they were leased and not confirmed yet."""
        tasks = cluster.tasks
        return sum(
            1
            for task_id, (_, machine) in self._leases.items()
            if (task := tasks.get(task_id)) is not None
            and task.state is TaskState.RUNNING
            and task.machine_id == machine
        )

    def next_start(self) -> int | None:
        """The start of the oldest lease (perhaps stale): when the next may come due."""
        return self._due[0][0] if self._due else None

    def snapshot(self) -> dict[str, Any]:
        return {"leases": dict(self._leases), "expired": self.expired}

    @classmethod
    def restore(cls, payload: Mapping[str, Any]) -> LeaseBook:
        book = cls()
        book._leases = dict(payload["leases"])
        book._due = [(start, task_id) for task_id, (start, _) in book._leases.items()]
        heapq.heapify(book._due)
        book.expired = payload["expired"]
        return book
