"""The daemon's side of the dashboard: its journal records turned into the board's facts
(`RecordReader`), and a follower that lists the daemon's state and then follows its change feed
as any cluster manager may (`DaemonFollower`, docs/protocol.md "Following the daemon").

The follower is a client like any other: it asks for `status` about once a second, lists
machines and tasks once, and keeps one `changes` request waiting. The daemon serves those from
what it keeps anyway (its state and the records in its watch window), so a page costs the
daemon a few requests a second, whatever the cluster's size. A `gone` answer (the follower fell
behind the daemon's window, or the daemon restarted without the records it had seen) starts it
over with a fresh board state, as `ClusterView` does.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

from firmament_py.dashboard.board import Board, MachineRow, RoundFacts
from firmament_py.model.entities import DEFAULT_POD, DEFAULT_RACK
from firmament_py.model.states import TaskState
from firmament_py.service.client import Client, DaemonTimeout, RequestFailed

__all__ = ["DaemonFollower", "RecordReader"]

log = logging.getLogger(__name__)

_ENDS = ("task_completed", "task_failed", "task_removed")


class RecordReader:
    """Tells `board` what each journal record did (records in order, see the module)."""

    def __init__(self, board: Board) -> None:
        self.board = board
        self._round: Mapping[str, Any] | None = None  # the round whose decisions are coming

    def apply(self, record: Mapping[str, Any]) -> None:
        board, kind, when = self.board, record["kind"], int(record["time"])
        if kind == "request":
            self._request(record["type"], record["body"], when)
        elif kind == "round":
            self._round = record
            if "round_ms" in record:  # it decided nothing: this record ends it
                self._end_round(record, when)
        elif kind == "decisions":
            expired = bool(record.get("expired"))
            for delta_kind, task_id, _, to_machine in record["deltas"]:
                if delta_kind == "preempt":
                    board.unplaced(task_id, when, decision=not expired)
                else:
                    board.placed(task_id, to_machine, when)
            if "round_ms" in record or "error" in record:
                self._end_round(record, when)
        board.set_seq(int(record["seq"]))

    def _request(self, kind: str, body: Mapping[str, Any], when: int) -> None:
        board = self.board
        if kind == "task_submitted":
            board.submitted(body["task_id"], when)
        elif kind in _ENDS:
            board.ended(body["task_id"], when)
        elif kind == "node_added":
            board.machines_added(
                MachineRow(
                    m["machine_id"],
                    m.get("rack_id", DEFAULT_RACK),
                    m.get("pod_id", DEFAULT_POD),
                    m["slots"],
                )
                for m in body["machines"]
            )
            board.event(when)
        elif kind in ("node_failed", "node_removed"):
            board.machine_gone(body["machine_id"], when)
            board.event(when)
        else:
            if kind == "node_updated" and "slots" in body:
                board.machine_slots(body["machine_id"], body["slots"])
            board.event(when)

    def _end_round(self, record: Mapping[str, Any], when: int) -> None:
        started = self._round
        self._round = None
        if started is None or started.get("round") != record.get("round"):
            return  # the follower joined after this round began: its timings are unknown
        timings: Mapping[str, float] = started.get("timings") or {}
        phases = {
            "update": timings.get("update_seconds", 0.0) * 1e3,
            "solve": timings.get("solve_seconds", 0.0) * 1e3,
            "extract": timings.get("extract_seconds", 0.0) * 1e3,
        }
        # What the round's wall time at the daemon holds beyond deciding: the scheduling
        # process catching up before it, and the daemon applying the decisions after it.
        phases["apply"] = max(0.0, float(record.get("round_ms", 0.0)) - sum(phases.values()))
        answer_s = timings.get("solver_seconds", 0.0)
        self.board.round(
            RoundFacts(
                number=int(started["round"]),
                time=when,
                algorithm=str(started.get("algorithm", "")),
                phases=phases,
                algorithm_ms=timings.get("algorithm_seconds", answer_s) * 1e3,
                answer_ms=answer_s * 1e3,
                decisions=len(started.get("deltas", ())),
            )
        )


class DaemonFollower:
    """Keeps `board` the daemon's at `address`, in a thread of its own (see the module)."""

    def __init__(self, board: Board, client: Client, *, status_every_s: float = 1.0) -> None:
        self.board = board
        self.client = client
        self._status_every_s = status_every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="dashboard-follower", daemon=True)
        self.loaded = threading.Event()
        """Set once the board holds the daemon's listing."""

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop following (a request in flight is left to its daemon thread)."""
        self._stop.set()
        self._thread.join(timeout=1.0)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._follow()
            except (DaemonTimeout, RequestFailed) as error:
                log.warning("dashboard: listing the daemon again (%s)", error)
            except Exception:  # a bug here must not freeze the page for good
                log.exception("dashboard: listing the daemon again after an error")
            self._stop.wait(1.0)

    def _follow(self) -> None:
        client, board = self.client, self.board
        status = client.status()
        seq, boot = int(status["seq"]), str(status["boot"])
        board.reset()
        self._describe(status)
        # Running first: a task placed between the two listings is listed waiting, and its
        # replayed placement runs it; one that went the other way would be missed.
        for state in (TaskState.RUNNING, TaskState.RUNNABLE):
            for task in client.tasks(state=state, page=5_000):
                board.task_known(task.task_id, task.machine_id)
        board.machines_added(
            MachineRow(m.machine_id, m.rack_id, m.pod_id, m.slots)
            for m in client.machines(page=5_000)
        )
        board.set_seq(seq)
        reader = RecordReader(board)
        self.loaded.set()
        log.warning("dashboard: following the daemon from record %d", seq)
        next_status = time.monotonic() + self._status_every_s
        while not self._stop.is_set():
            page = client.changes(seq, limit=5_000, wait_s=0.5, boot=boot)
            boot = page.boot
            for record in page.changes:
                reader.apply(record)
                seq = int(record["seq"])
            if time.monotonic() >= next_status:
                self._describe(client.status())
                next_status = time.monotonic() + self._status_every_s

    def _describe(self, status: Mapping[str, Any]) -> None:
        self.board.clock(int(status["now_us"]))
        self.board.set_title(
            f"daemon: policy {status['policy']}, solver {status['solver']}, "
            f"{status['rounds']} rounds since its start"
        )
