"""Leases on placements: a PLACE (or MIGRATE) is provisional until the cluster manager confirms
the task started (`task_started`); one not confirmed within the lease returns the task to the
queue and frees its slot.

A daemon run with `--lease-ms N` marks each chunk of a round's decisions with the lease
(`lease_ms` in the chunk's record). The tasks a round placed or moved under a lease hold it from
the time of the round's last chunk, when its answer goes out (a manager cannot start what it has
not been told), until that time plus the chunk's lease: the deadline is journaled with the
placement, so a daemon restarted with another lease, or with none, keeps the deadlines it gave.
Confirming drops a lease; so does the task leaving the machine it was leased on (completed,
failed, removed, preempted, its machine gone), which is found when the lease comes due rather
than tracked through every request. A lease that comes due on a task still running where it was
leased is expired: the daemon preempts the task in a record of its own (a `decisions` record with
`expired: true`), which the replica, recovery and the change feed all see.

Everything here is rebuilt from records; `grace` gives the placements a restart finds unconfirmed
one more lease, since their manager could not confirm while the daemon was down. No I/O here.
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
    """The placements not confirmed yet: for each task, its deadline (microseconds), the machine
    it is leased on, and the lease's length; those of the round being applied, which start when
    it ends; and the count of leases expired so far."""

    def __init__(self) -> None:
        self._leases: dict[int, tuple[int, str, int]] = {}  # task -> (deadline, machine, lease)
        self._due: list[tuple[int, int]] = []  # (deadline, task), a heap; may hold stale ones
        self._round: dict[int, tuple[str, int]] = {}  # task -> (machine, lease): round not over
        self.expired = 0
        """Leases expired since the journal began (placements returned to the queue)."""

    def __len__(self) -> int:
        return len(self._leases) + len(self._round)

    def take_chunk(self, record: Mapping[str, Any]) -> None:
        """Take a chunk's record: the tasks it placed or moved under a lease (`lease_ms`) hold
        one from the round's last chunk (this one, if it carries `round_ms` or `error`)."""
        lease_ms = record.get("lease_ms")
        if lease_ms is not None:
            for kind, task_id, _, to_machine in record["deltas"]:
                if kind in _LEASED_KINDS:
                    self._round[task_id] = (to_machine, lease_ms * 1000)
        if "round_ms" in record or "error" in record:
            start = record["time"]
            for task_id, (machine, lease_us) in self._round.items():
                self._lease(task_id, start + lease_us, machine, lease_us)
            self._round.clear()

    def _lease(self, task_id: int, deadline: int, machine: str, lease_us: int) -> None:
        self._leases[task_id] = (deadline, machine, lease_us)
        heapq.heappush(self._due, (deadline, task_id))

    def confirm(self, task_id: int) -> None:
        """The manager confirmed the task started (`task_started`): its lease is kept."""
        self._leases.pop(task_id, None)
        self._round.pop(task_id, None)

    def machine_of(self, task_id: int) -> str | None:
        """The machine `task_id` is leased on, if it holds a lease (or will, at its round's
        end)."""
        if task_id in self._round:
            return self._round[task_id][0]
        lease = self._leases.get(task_id)
        return None if lease is None else lease[1]

    def take_expiry(self, record: Mapping[str, Any]) -> None:
        """Take an `expired` record: its tasks' leases are over."""
        for _, task_id, _, _ in record["deltas"]:
            self._leases.pop(task_id, None)
        self.expired += len(record["deltas"])

    def grace(self, now: int) -> None:
        """Give every lease at least one more full lease from `now` (a restart: the manager
        could not confirm while the daemon was down). Not journaled: it only delays expiry."""
        for task_id, (deadline, machine, lease_us) in list(self._leases.items()):
            if deadline < now + lease_us:
                self._lease(task_id, now + lease_us, machine, lease_us)

    def due(self, cluster: ClusterState, now: int) -> list[tuple[int, str]]:
        """The (task, machine) of every lease whose deadline is `now` or before, on a task still
        running where it was leased; leases of tasks that left are dropped on the way."""
        out: list[tuple[int, str]] = []
        while self._due and self._due[0][0] <= now:
            deadline, task_id = heapq.heappop(self._due)
            lease = self._leases.get(task_id)
            if lease is None or lease[0] != deadline:
                continue  # confirmed, or leased again (a newer entry is in the heap)
            machine = lease[1]
            task = cluster.tasks.get(task_id)
            if task is None or task.state is not TaskState.RUNNING or task.machine_id != machine:
                del self._leases[task_id]  # it left that machine: nothing to confirm
                continue
            out.append((task_id, machine))
        return out

    def unconfirmed(self, cluster: ClusterState) -> int:
        """Tasks running where they were (or are being) leased, not confirmed yet."""
        tasks = cluster.tasks
        leased = [(i, lease[1]) for i, lease in self._leases.items()]
        leased += [(i, machine) for i, (machine, _) in self._round.items()]
        return sum(
            1
            for task_id, machine in leased
            if (task := tasks.get(task_id)) is not None
            and task.state is TaskState.RUNNING
            and task.machine_id == machine
        )

    def snapshot(self) -> dict[str, Any]:
        return {"leases": dict(self._leases), "round": dict(self._round), "expired": self.expired}

    @classmethod
    def restore(cls, payload: Mapping[str, Any]) -> LeaseBook:
        book = cls()
        for task_id, (deadline, machine, lease_us) in payload["leases"].items():
            book._lease(task_id, deadline, machine, lease_us)
        book._round = dict(payload["round"])
        book.expired = payload["expired"]
        return book
