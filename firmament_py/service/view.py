"""A cluster manager's mirror of the daemon's tasks and machines, kept by following the change
feed instead of diffing every task (`ClusterView`).

`ClusterView.load` reads the daemon's last sequence number, then lists every task and machine,
then follows the changes after that number until it has caught up: each change is applied over
the listing in order. A change the listing already showed is applied again on the way, which
may set a task back for a moment (listed as running, the replayed submission makes it
runnable), but every task's last change is applied last, so once the view has followed the
changes up to some sequence number it holds the daemon's state as of that number. `follow`
then keeps it current. A `gone` reply (the view fell behind the daemon's window of kept
changes, or the daemon's journal does not hold what the view saw) is answered by loading
again.

A change is a journal record (`docs/protocol.md`, "Changes"); `apply` reads the kinds that
move tasks and machines (requests, and the decisions a round applied) and skips the others
(a round's own record, a registration), and any request type it does not know, so that a
newer daemon's additions do not stop an older manager.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from firmament_py.model.entities import DEFAULT_POD, DEFAULT_RACK
from firmament_py.model.states import TaskState

if TYPE_CHECKING:
    from firmament_py.service.client import Client

__all__ = ["ClusterView", "ViewMachine", "ViewTask"]


@dataclass
class ViewTask:
    """A task as the view has it."""

    job_id: str
    state: TaskState
    machine_id: str | None = None


@dataclass
class ViewMachine:
    """A machine as the view has it."""

    rack_id: str
    pod_id: str
    slots: int


_ENDS = {"task_completed": TaskState.COMPLETED, "task_failed": TaskState.FAILED}


class ClusterView:
    """The daemon's tasks and machines as of change `seq`."""

    def __init__(self, seq: int = 0, boot: str | None = None) -> None:
        self.seq = seq
        self.boot = boot
        """The daemon's boot `seq` was read from (None: not known yet)."""
        self.tasks: dict[int, ViewTask] = {}
        self.machines: dict[str, ViewMachine] = {}

    @classmethod
    def load(cls, client: Client, *, page: int = 1_000) -> ClusterView:
        """List the daemon's state and follow the changes made meanwhile (see the module)."""
        status = client.status()
        view = cls(int(status["seq"]), str(status["boot"]))
        for task in client.tasks(page=page):
            view.tasks[task.task_id] = ViewTask(task.job_id, task.state, task.machine_id)
        for machine in client.machines(page=page):
            view.machines[machine.machine_id] = ViewMachine(
                machine.rack_id, machine.pod_id, machine.slots
            )
        view.catch_up(client)
        return view

    def catch_up(self, client: Client) -> int:
        """Apply every change the daemon has made since `seq`; returns how many."""
        count = 0
        while True:
            page = client.changes(self.seq, boot=self.boot)
            self.boot = page.boot
            for change in page.changes:
                self.apply(change)
            count += len(page.changes)
            if not page.more:
                return count

    def follow(self, client: Client, *, wait_s: float = 10.0) -> Iterator[Mapping[str, Any]]:
        """Apply the daemon's changes as they happen, yielding each after it is applied
        (endless; stop iterating to stop). RequestFailed (`gone`) if the view fell behind."""
        while True:
            page = client.changes(self.seq, wait_s=wait_s, boot=self.boot)
            self.boot = page.boot
            for change in page.changes:
                self.apply(change)
                yield change

    def running_on(self, machine_id: str) -> list[int]:
        """The tasks the view has running on `machine_id`, in id order."""
        return sorted(
            task_id
            for task_id, task in self.tasks.items()
            if task.state is TaskState.RUNNING and task.machine_id == machine_id
        )

    # ------------------------------------------------------------------ changes

    def apply(self, change: Mapping[str, Any]) -> None:
        """Apply one change (a journal record) that follows `seq`; ValueError if it does not
        (a gap: load again)."""
        seq = change["seq"]
        if seq != self.seq + 1:
            raise ValueError(f"change {seq} does not follow change {self.seq}: a gap")
        kind = change["kind"]
        if kind == "request":
            self._request(change["type"], change["body"])
        elif kind == "decisions":
            for delta_kind, task_id, _, to_machine in change["deltas"]:
                task = self.tasks.get(task_id)
                if task is None:
                    continue
                if delta_kind == "preempt":
                    task.state, task.machine_id = TaskState.RUNNABLE, None
                else:  # place, migrate
                    task.state, task.machine_id = TaskState.RUNNING, to_machine
        self.seq = seq

    def _request(self, kind: str, body: Mapping[str, Any]) -> None:
        tasks = self.tasks
        if kind == "task_submitted":
            tasks[body["task_id"]] = ViewTask(body["job_id"], TaskState.RUNNABLE)
        elif kind in _ENDS:
            task = tasks.get(body["task_id"])
            if task is not None:
                task.state, task.machine_id = _ENDS[kind], None
        elif kind == "task_removed":
            tasks.pop(body["task_id"], None)
        elif kind == "node_added":
            for machine in body["machines"]:
                self.machines[machine["machine_id"]] = ViewMachine(
                    machine.get("rack_id", DEFAULT_RACK),
                    machine.get("pod_id", DEFAULT_POD),
                    machine["slots"],
                )
        elif kind in ("node_failed", "node_removed"):
            machine_id = body["machine_id"]
            self.machines.pop(machine_id, None)
            for task in tasks.values():  # its tasks are evicted and wait again
                if task.state is TaskState.RUNNING and task.machine_id == machine_id:
                    task.state, task.machine_id = TaskState.RUNNABLE, None
        elif kind == "node_updated" and "slots" in body:
            machine = self.machines.get(body["machine_id"])
            if machine is not None:
                machine.slots = body["slots"]
