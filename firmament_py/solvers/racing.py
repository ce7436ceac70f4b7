"""Race two solvers in worker processes and take the first optimal answer (Firmament section 6).

Each worker process holds its own solver and its own copy of the network, and receives the same
snapshots and change batches. A solve asks both; the first optimal result wins, the other worker
is cancelled through a flag in shared memory that its kernels poll, and, once it has stopped, is
re-synced from the winner's flow and potentials so that both start the next round from the same
optimum. A worker that dies is replaced by a fresh one loaded from a full snapshot of the
current graph.

Protocol, parent to worker over a pipe: every message gets exactly one reply, in order. Replies
to `load`, `apply` and `sync` are read lazily (the parent never waits for a worker to finish
applying a batch before sending the next command), and a cancelled loser's reply is read only
when the parent next needs that worker. The parent never sends a large message to a worker whose
large reply it has not read yet, so the two cannot block each other on full pipes.

No orphans: workers ask the kernel to kill them when the parent dies
(PR_SET_PDEATHSIG on Linux), and exit when their pipe reaches end of file.
"""

from __future__ import annotations

import contextlib
import json
import mmap
import multiprocessing.connection as mpc
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from firmament_py.flow.changes import ChangeBatch
from firmament_py.flow.graph import FlowGraph
from firmament_py.solvers.base import FlowSolver, Int64Array, SolverError, SolveResult
from firmament_py.solvers.batch_check import LiveIds
from firmament_py.solvers.race_worker import (
    ERRORS,
    apply_delta,
    flow_delta,
    make_solver_from_options,
)

DEFAULT_PAIR = ("relaxation", "cost-scaling")
# Incremental relaxation answers 1%-churn rounds several times faster than from scratch
# (docs/benchmarks.md); cost scaling covers the contended rounds where relaxation crawls.
DEFAULT_OPTIONS: dict[str, dict[str, Any]] = {"relaxation": {"incremental": True}}

# Run the worker without `-m`, which would warn that the package already imported the module.
_WORKER_BOOT = (
    "import sys; from firmament_py.solvers.race_worker import worker_main; "
    "worker_main(sys.argv[1:])"
)

# How long a cancelled worker may take to notice its flag before it is killed and replaced.
_CANCEL_GRACE_SECONDS = 30.0


# ---------------------------------------------------------------------- parent side


@dataclass
class _Worker:
    """The parent's handle on one worker process and the replies it still owes."""

    algorithm: str
    options: dict[str, Any]
    process: subprocess.Popen[bytes]
    conn: mpc.Connection
    flag_map: mmap.mmap
    cancel: Int64Array
    owed: deque[str] = field(default_factory=deque)  # commands whose replies are unread
    cancelled: bool = False  # its running solve was cancelled; drain before reuse
    pending_sync: tuple[Int64Array, Int64Array] | None = None  # sync once it has stopped
    # The last flow this worker reported or was synced to; flows travel as deltas against it.
    base: Int64Array = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    alive: bool = True
    feeder: threading.Thread | None = None  # still sending a restarted worker its snapshot


class WorkerDiedError(Exception):
    """A worker process exited or its pipe broke."""


class _AllWorkersDiedError(SolverError):
    """Every worker of a race died before answering."""


class RacingSolver(FlowSolver):
    """Race two solvers in separate processes; first optimal answer wins.

    `algorithms` names the two (or more) contenders, by default relaxation and incremental
    cost scaling; `options` maps an algorithm name to keyword arguments for its constructor.
    """

    algorithm = "race"

    def __init__(
        self,
        algorithms: tuple[str, ...] = DEFAULT_PAIR,
        options: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        super().__init__()
        if len(algorithms) < 1:
            raise ValueError("a race needs at least one algorithm")
        if "race" in algorithms:
            raise ValueError("a race cannot contain another race")
        self.algorithms = tuple(algorithms)
        chosen = DEFAULT_OPTIONS if options is None else options
        self._options = {name: dict(chosen.get(name, {})) for name in algorithms}
        for name in algorithms:  # fail here, not in a worker, on unknown names or options
            make_solver_from_options(name, self._options[name]).close()
        json.dumps(self._options)  # options travel to the workers as JSON
        self._ids = LiveIds()  # the parent holds no network: it checks batches against this
        self._history: list[ChangeBatch] = []  # reset batch + later batches, for restarts
        self._last: tuple[Int64Array, Int64Array] | None = None  # winner's flow, potentials
        self.restarts = 0
        self._workers = [self._spawn(name) for name in self.algorithms]
        self._finalizer = weakref.finalize(self, _shutdown, self._workers)

    # ------------------------------------------------------------------ life cycle

    def load(self, snapshot: ChangeBatch) -> None:
        self._ids.load(snapshot)
        self._history = [snapshot]
        self._last = None
        self._loaded = True
        for w in self._live():
            self._tell(w, ("load", snapshot))

    def apply(self, changes: ChangeBatch) -> None:
        if changes.reset:
            self.load(changes)
            return
        if not self._loaded:
            raise SolverError("apply() before load(): give the solver a snapshot first")
        self._ids.apply(changes)
        if self._bound_graph() is None:
            self._history.append(changes)
        self._last = None
        for w in self._live():
            self._tell(w, ("apply", changes))

    def solve_graph(self, graph: FlowGraph) -> SolveResult:
        result = super().solve_graph(graph)
        self._history = []  # the bound graph itself is the record from now on
        return result

    def sync(self, flow: Int64Array, potentials: Int64Array) -> None:
        flow = np.array(flow, dtype=np.int64)
        for w in self._live():
            self._tell(w, ("sync", flow, potentials))

    def potentials(self) -> Int64Array:
        if self._last is None:
            raise SolverError("no solution since the last change: solve first")
        return self._last[1].copy()

    def close(self) -> None:
        self._finalizer()

    @property
    def worker_pids(self) -> list[int]:
        """Process ids of the live workers (for monitoring and the tests)."""
        return [w.process.pid for w in self._live()]

    # ------------------------------------------------------------------ the race

    def _run(self) -> dict[str, float]:
        raise SolverError("a race solves in its worker processes: call solve()")

    def solve(self) -> SolveResult:
        if not self._loaded:
            raise SolverError("solve() before load(): give the solver a snapshot first")
        start = time.perf_counter()
        try:
            winner, reply, racing = self._race()
        except _AllWorkersDiedError:
            # Every worker died mid-race: try once more with fresh processes, then give up.
            winner, reply, racing = self._race()
        losers = racing
        _tag, cost, delta, potentials, solver_time, stats = reply
        flow = apply_delta(winner.base, delta)
        winner.base = flow
        for w in losers:
            w.pending_sync = (flow, potentials)
        self._cancel_all(losers)
        self._last = (flow, potentials)
        elapsed = time.perf_counter() - start
        result = SolveResult(
            cost=int(cost),
            flow=flow.copy(),  # the caller's to keep; `flow` stays the workers' reference
            potentials=potentials.copy(),
            algorithm=f"race:{winner.algorithm}",
            wall_time=elapsed,
            stats={**stats, "solver_time": float(solver_time), "restarts": float(self.restarts)},
        )
        return result

    def _race(self) -> tuple[_Worker, tuple[Any, ...], list[_Worker]]:
        """Ask every live worker to solve; return the winner, its reply, and the others."""
        restartable = self._bound_graph() is not None or bool(self._history)
        if not restartable and any(not w.alive for w in self._workers):
            raise SolverError(
                "a race worker died and the graph the race was bound to is gone: "
                "load a snapshot (or solve_graph a graph) before solving again"
            )
        racing = [w for w in self._live() if self._tell(w, ("solve",))]
        # Replace dead workers while the live ones already solve; the new ones join the race.
        racing += self._restart_dead()
        failures: list[str] = []
        died = 0
        while racing:
            mpc.wait([w.conn for w in racing])  # a dead worker's pipe reads as end of file
            for w in list(racing):
                try:
                    answer = self._pump(w)
                except WorkerDiedError as exc:
                    failures.append(f"{w.algorithm} worker died ({exc})")
                    died += 1
                    racing.remove(w)
                    self._bury(w)
                    if died <= len(self._workers) and restartable:
                        # Its replacement joins this race at once: the others may be slow.
                        racing += self._restart_dead()
                    continue
                if answer is None:
                    continue
                if answer[0] == "solved":
                    return w, answer, [x for x in racing if x is not w]
                racing.remove(w)
                kind, text = answer[1], answer[2]
                if kind in ("infeasible", "unbounded"):  # a property of the problem
                    self._cancel_all(racing)
                    raise ERRORS[kind](text)
                failures.append(f"{w.algorithm}: {text}")
        if died and died == len(failures):
            raise _AllWorkersDiedError("; ".join(failures))
        raise SolverError("every racing solver failed: " + "; ".join(failures or ["no workers"]))

    def _pump(self, w: _Worker) -> tuple[Any, ...] | None:
        """Read the replies `w` has sent so far; return its solve reply once it is there."""
        while w.owed:
            try:
                ready = w.conn.poll(0)
            except (EOFError, OSError) as exc:
                raise WorkerDiedError(f"exit code {w.process.poll()}") from exc
            if not ready:
                return None
            tag = w.owed[0]
            reply = self._recv(w)
            if tag == "solve":
                return reply
            if reply[0] != "ok":  # a batch the worker could not take: replace it
                raise WorkerDiedError(f"failed on {tag}: {reply[2]}")
        raise SolverError("internal error: no solve outstanding")

    def _cancel_all(self, workers: list[_Worker]) -> None:
        for w in workers:
            if w.owed and w.owed[-1] == "solve":
                w.cancel[0] = 1
                w.cancelled = True

    # ------------------------------------------------------------------ plumbing

    def _live(self) -> list[_Worker]:
        return [w for w in self._workers if w.alive]

    def _bound_graph(self) -> FlowGraph | None:
        return self._graph_ref() if self._graph_ref is not None else None

    def _tell(self, w: _Worker, message: tuple[Any, ...]) -> bool:
        """Send a command; a worker found dead is buried (and replaced before the next race)."""
        try:
            self._send(w, message)
        except WorkerDiedError:
            self._bury(w)
            return False
        return True

    def _send(self, w: _Worker, message: tuple[Any, ...]) -> None:
        """Send a command, first settling a cancelled solve and its deferred sync.

        `w.base` (the flow both sides hold for this worker) must move in the order the worker
        sees its messages, so it is read only after the earlier replies are settled: a `sync`
        message carries a whole flow and leaves as a delta against the base, a `load` resets
        the base.
        """
        if w.feeder is not None:
            w.feeder.join()
            w.feeder = None
        command = message[0]
        try:
            if w.cancelled:
                # A load replaces the graph: the winner's flow of the old one is no use.
                self._settle(w, resync=command != "load")
            if command == "sync":
                flow = message[1]
                message = ("sync", flow_delta(w.base, flow), message[2])
                w.base = flow
            elif command == "load":
                w.base = np.zeros(0, dtype=np.int64)
            w.conn.send(message)
        except (BrokenPipeError, EOFError, OSError) as exc:
            raise WorkerDiedError(w.algorithm) from exc
        w.owed.append(str(command))

    def _settle(self, w: _Worker, *, resync: bool = True) -> None:
        """Wait for a cancelled worker to stop, then give it the winner's solution."""
        deadline = time.monotonic() + _CANCEL_GRACE_SECONDS
        solved_anyway = False
        while w.owed:
            if not w.conn.poll(max(0.0, deadline - time.monotonic())):
                raise WorkerDiedError(f"{w.algorithm} ignored its cancellation")
            tag = w.owed[0]
            reply = self._recv(w)
            if tag == "solve":
                solved_anyway = reply[0] == "solved"
                if solved_anyway:
                    w.base = apply_delta(w.base, reply[2])
            elif reply[0] != "ok":
                raise WorkerDiedError(f"{w.algorithm} failed on {tag}: {reply[2]}")
        w.cancel[0] = 0
        w.cancelled = False
        sync, w.pending_sync = w.pending_sync, None
        if sync is not None and resync and not solved_anyway:
            w.conn.send(("sync", flow_delta(w.base, sync[0]), sync[1]))
            w.owed.append("sync")
            w.base = sync[0]

    def _recv(self, w: _Worker) -> tuple[Any, ...]:
        try:
            reply: tuple[Any, ...] = w.conn.recv()
        except (EOFError, OSError) as exc:
            raise WorkerDiedError(w.algorithm) from exc
        w.owed.popleft()
        return reply

    def _spawn(self, algorithm: str) -> _Worker:
        options = self._options[algorithm]
        ours, theirs = socket.socketpair()
        flag_fd = _shared_flag_fd()
        flag_map = mmap.mmap(flag_fd, 8)
        argv = [str(theirs.fileno()), str(flag_fd), str(os.getpid()), algorithm]
        process = subprocess.Popen(
            [sys.executable, "-c", _WORKER_BOOT, *argv, json.dumps(options)],
            pass_fds=(theirs.fileno(), flag_fd),
            stdin=subprocess.DEVNULL,
        )
        theirs.close()
        os.close(flag_fd)
        conn = mpc.Connection(ours.detach())
        cancel: Int64Array = np.frombuffer(flag_map, dtype=np.int64)
        return _Worker(algorithm, options, process, conn, flag_map, cancel)

    def _bury(self, w: _Worker) -> None:
        w.alive = False
        _stop(w, graceful=False)

    def _restart_dead(self) -> list[_Worker]:
        """Replace dead workers with fresh ones that load a full snapshot and then solve.

        A background thread feeds each new worker (it reads nothing until its kernels are
        warm, and a snapshot is larger than a socket buffer), so the race goes on meanwhile.
        """
        fresh_workers: list[_Worker] = []
        for i, w in enumerate(self._workers):
            if w.alive:
                continue
            fresh = self._spawn(w.algorithm)
            self._workers[i] = fresh  # in place: the finalizer holds this very list
            self.restarts += 1
            if not self._loaded:
                continue
            graph = self._bound_graph()
            batches = [graph.snapshot()] if graph is not None else self._history

            messages: list[tuple[Any, ...]] = [("load" if b.reset else "apply", b) for b in batches]
            if self._last is not None:
                flow, potentials = self._last
                messages.append(("sync", flow_delta(fresh.base, flow), potentials))
                fresh.base = flow
            messages.append(("solve",))
            fresh.owed.extend(str(m[0]) for m in messages)
            fresh.feeder = threading.Thread(
                target=_feed, args=(fresh.conn, messages), name="firmament-race-feeder", daemon=True
            )
            fresh.feeder.start()
            fresh_workers.append(fresh)
        return fresh_workers


def _feed(conn: mpc.Connection, messages: list[tuple[Any, ...]]) -> None:
    """Send messages in order; a broken pipe shows up to the parent as the worker's death."""
    with contextlib.suppress(OSError):
        for message in messages:
            conn.send(message)


def _shared_flag_fd() -> int:
    """A file descriptor of 8 zeroed bytes that parent and worker both map (the cancel flag)."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("firmament-race-cancel")
    else:  # pragma: no cover - non-Linux
        fd, path = tempfile.mkstemp(prefix="firmament-race-")
        os.unlink(path)
    os.ftruncate(fd, 8)
    return fd


def _stop(w: _Worker, *, graceful: bool) -> None:
    if graceful and w.process.poll() is None:
        with contextlib.suppress(Exception):
            w.cancel[0] = 1
            w.conn.send(("stop",))
            w.process.wait(timeout=2.0)
    if w.process.poll() is None:
        w.process.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        w.process.wait(timeout=5.0)
    with contextlib.suppress(Exception):
        w.conn.close()


def _shutdown(workers: list[_Worker]) -> None:
    for w in workers:
        _stop(w, graceful=True)
