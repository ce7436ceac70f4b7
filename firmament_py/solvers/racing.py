"""Race two solvers in worker processes and take the first optimal answer (Firmament section 6).

Each worker process holds its own solver and its own copy of the network, and receives the same
snapshots and change batches. A solve asks every worker; the first optimal result wins, the
others are cancelled through a flag in shared memory that their kernels poll, and are then told
to adopt the winner's flow and potentials, so that every worker starts the next round from the
same optimum. A worker that dies is replaced by a fresh one loaded from a full snapshot of the
current graph, and the replacement joins the race in progress.

The caller never waits on a loser. Per worker, a sender thread writes the commands queued for it
and a receiver thread reads its replies into one queue that the caller's thread consumes, so no
pipe can fill up and block anybody, and `apply` after a race returns at once while the losers
are still stopping and adopting. Both sides process commands strictly in order.

A batch (`load`, `apply`) goes out pickled once, before the parent's own check of it (against
`LiveIds`, the ids the workers' networks hold), because the workers check every batch
themselves and take nothing from a bad one: the check that raises to the caller overlaps the
workers' receiving and applying. For that overlap the batch is written with its length header
in one system call (a snapshot's descriptor follows in a second), and the caller lets an idle
sender thread start the write before it checks: the check holds the GIL for milliseconds, which
the sender needs to take the batch off its queue and, with `Connection.send_bytes`, again
between a large message's header and body. Their refusal of a batch the parent refused is
expected; a worker that took such a batch is replaced. Workers a hedged start will hold back get
the batch, and the last race's answer before it, only once the favourite has applied the batch
and solves (`RacingSolver._catch_up`), or with their next command if that comes first. A `load`
drops them once the parent's check has accepted the snapshot (one it refuses changes nothing).

A snapshot (`load`, also a restarted worker's) does not travel through the socket: its arrays
are written once into a memory file that every worker maps (`_SharedLoad`), and the socket
carries only the pickled rest and then, in a second system call, the file's descriptor.
Through the socket, S90's 96 MB snapshot was pickled, and then for each worker written, read
and unpickled: three more copies each, with both workers reading at once.

Flows travel as deltas against a *base*: the flow both sides know the worker holds.

* `load` resets the base to zeros; `sync` and `adopt` carry the delta to a new flow, which
  becomes the base; a winning `solve` reply carries the delta to its flow, which becomes the base.
* A loser's own solve reply is ignored (it may or may not have finished); the `adopt` that
  follows its `solve` is a delta against the base *before* that solve, which both sides keep.

A hedged start (`hedge`) lets the last winner solve alone for a while before the others join,
with an occasional probe that starts everybody at once: see `RacingSolver._hold_back`. Only the
winner of an incremental round counts: a snapshot's first race is often won by whichever worker
finished loading first. A round whose batches are much larger than recent rounds' (a big job
arriving) races everybody too: the favourite of small rounds may crawl on it. A caller away for
a while after a solve (`idle`) gives the workers time to take what was deferred and `prepare`
(cost scaling lifts adopted prices), so that such a round does not wait for it.

Cancellation is numbered: the worker writes the number of the solve it is running into the
second slot of the shared flag, and the parent cancels solve `g` by writing `g` into the first;
kernels stop when `flag[0] >= flag[1]`. A late cancel can never stop a later solve, and nobody
needs to reset the flag.

No orphans: workers ask the kernel to kill them when the parent dies (PR_SET_PDEATHSIG on Linux),
exit when their socket reaches end of file, and are stopped by a finalizer at exit.
"""

from __future__ import annotations

import contextlib
import json
import math
import mmap
import multiprocessing.connection as mpc
import os
import pickle
import queue
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from firmament_py.flow.changes import ChangeBatch
from firmament_py.flow.graph import FlowGraph
from firmament_py.solvers.base import FlowSolver, Int64Array, SolverError, SolveResult
from firmament_py.solvers.batch_check import LiveIds
from firmament_py.solvers.race_worker import (
    ERRORS,
    FLAG_BYTES,
    HEAP_BLOCKS_UNDER,
    SHARED_ALIGN,
    FlowDelta,
    apply_delta,
    borrowed_socket,
    flow_delta,
    make_solver_from_options,
)

DEFAULT_PAIR = ("relaxation", "cost-scaling")
# Incremental relaxation answers 1%-churn rounds several times faster than from scratch
# (docs/benchmarks-history.md); cost scaling covers the contended rounds where relaxation crawls.
DEFAULT_OPTIONS: dict[str, dict[str, Any]] = {"relaxation": {"incremental": True}}

# Run the worker without `-m`, which would warn that the package already imported the module.
_WORKER_BOOT = (
    "import sys; from firmament_py.solvers.race_worker import worker_main; "
    "worker_main(sys.argv[1:])"
)

# Hedged start: the last winner solves alone for DEFAULT_HEDGE x its last solve time plus the
# slack before the others join (None races everybody from the start).
DEFAULT_HEDGE: float | None = 1.5
_HEDGE_SLACK_SECONDS = 0.05

# Probes: a hedged solve learns nothing about the workers it holds back, so a favourite that
# stays within its own hedge delay would keep the race for ever, even where another solver has
# become several times faster (incremental S90: cost scaling kept answering in 500 ms rounds
# that relaxation answers in 130). After _PROBE_FIRST hedged solves in a row with the same
# winner, one solve starts everybody at once; each probe doubles the wait, up to _PROBE_MOST,
# and a favourite that turns out late (a held worker joins and wins) starts the count again.
_PROBE_FIRST = 4
_PROBE_MOST = 64

# Outsized rounds: a round whose batches hold more than _OUTSIZED_FACTOR times as many rows as
# the largest of the last _RECENT_ROUNDS rounds (or than _OUTSIZED_FACTOR x _OUTSIZED_FLOOR)
# starts everybody at once. Relaxation wins incremental S90's rounds of 1% churn, and a job of
# 10,000 tasks arriving there takes it 1.5 to 2 times cost scaling's time
# (docs/benchmarks-history.md): with relaxation the favourite, a hedge would make that round cost
# its delay plus cost scaling's time.
_OUTSIZED_FACTOR = 4
_OUTSIZED_FLOOR = 256
_RECENT_ROUNDS = 8

# Idle time: once the caller has been away from the race for DEFAULT_IDLE seconds after a
# solve, every worker takes what was deferred for it and is asked to `prepare` (cost scaling
# lifts adopted prices, 48 to 150 ms on S90's cluster). A caller back sooner (rounds back to
# back) finds everything as before; a scheduler busy with its own round meanwhile leaves one
# core free, and the held worker catches up there. On qjob10k with 100 ms between rounds,
# relaxation winning the rounds before the job, the job's round took the race 1.40 to 1.44
# times cost scaling's time when this waited as long as the last solve (150 to 300 ms), and
# 1.10 to 1.16 with 20 ms, at no cost to incremental S90's rounds (docs/benchmarks-history.md).
DEFAULT_IDLE: float | None = 0.02

# Each end's send buffer: room for a round's batch or answer (megabytes) in one write, so that
# the writer does not wait for the reader to drain the usual 200 KB a piece. The kernel caps it
# at net.core.wmem_max (4 MB on the benchmark machine).
_SOCKET_BUFFER_BYTES = 8 << 20

# How long the caller waits for an idle sender thread to start writing a batch before it checks
# the batch itself (a backstop: the thread is usually writing within a fraction of a ms).
_PICK_UP_SECONDS = 0.005

# glibc's allocator in the workers: blocks under 32 MB come from the heap, and freed memory at
# its top goes back to the kernel only once more than 64 MB is free there, as glibc itself
# settles on after freeing a mapped block of just under 32 MB. A round's arrays (a flow and its
# delta, the potentials: megabytes each) then reuse memory already faulted in instead of fresh
# mappings, whose every page faults in again: 4 to 7 ms more a job1k round once snapshots
# stopped being unpickled on the worker's heap (docs/benchmarks-history.md). Arrays with a
# reserve map their buffers themselves (`network._reserved`), whatever the heap holds.
_WORKER_ALLOCATOR = {
    "MALLOC_MMAP_THRESHOLD_": str(HEAP_BLOCKS_UNDER),
    "MALLOC_TRIM_THRESHOLD_": str(64 << 20),
}

# How long a cancelled worker may go on before it is killed and replaced (checked per race).
_CANCEL_GRACE_SECONDS = 30.0

# How much longer than the hedge's delay held workers wait for a favourite still applying the
# round's batch (a backstop: an apply may hang).
_APPLY_GRACE_SECONDS = 10.0

_DIED = None  # what a receiver thread reports when its worker's socket closes

# The base of a worker that has just loaded a snapshot: no flow yet. Shared, and read-only,
# so that the first race's losers take the winner's own delta (`RacingSolver._solve` compares
# bases by identity) instead of one computed again over the whole flow.
_NO_FLOW: Int64Array = np.zeros(0, dtype=np.int64)
_NO_FLOW.setflags(write=False)


# ---------------------------------------------------------------------- parent side


@dataclass(frozen=True)
class _SharedLoad:
    """A `load` for one worker: `payload` is the pickled `("shared", ...)` message that
    `race_worker.take_shared` reads, and `fd` this worker's own descriptor of the memory file
    holding the snapshot's arrays, sent after the payload and closed here once sent."""

    payload: bytes
    fd: int


@dataclass(eq=False)  # a handle: equal only to itself (`w in later` must not compare arrays)
class _Worker:
    """The parent's handle on one worker process."""

    algorithm: str
    process: subprocess.Popen[bytes]
    conn: mpc.Connection
    flag_map: mmap.mmap
    flag: Int64Array  # [cancel solves up to this number, the solve running now, warmed up]
    # Commands to write, in order: a message, the bytes of a pickled one, a snapshot in shared
    # memory, None to end.
    outbox: queue.SimpleQueue[tuple[Any, ...] | bytes | _SharedLoad | None] = field(
        default_factory=queue.SimpleQueue
    )
    # Commands whose replies are unread, in order: (command, solve number or 0).
    owed: deque[tuple[str, int]] = field(default_factory=deque)
    solves: int = 0  # solve commands sent; the worker numbers its solves the same way
    base: Int64Array = field(default_factory=lambda: _NO_FLOW)
    # The oldest cancelled solve it still owes an answer to, and since when it has owed it.
    cancelled_at: tuple[int, float] | None = None
    alive: bool = True
    held: bool = False  # waiting in this race for the favourite to answer (hedged start)
    # Commands for a held-back worker, not written yet, each with what it owes a reply to: the
    # round's batch (see RacingSolver._send_batch), the last race's answer (RacingSolver.solve).
    deferred: list[tuple[str, tuple[Any, ...] | bytes]] = field(default_factory=list)
    # Held by the sender thread while it writes, by the receiver thread while it closes.
    writing: threading.Lock = field(default_factory=threading.Lock)
    # Set by the sender thread as it starts writing a batch (see RacingSolver._send_batch).
    writing_batch: threading.Event = field(default_factory=threading.Event)
    sender_running: bool = True  # False once the sender thread has stopped


class _AllWorkersDiedError(SolverError):
    """Every worker of a race died before answering."""


class RacingSolver(FlowSolver):
    """Race two solvers in separate processes; first optimal answer wins.

    `algorithms` names the contenders (usually two), by default relaxation and incremental
    cost scaling; `options` maps an algorithm name to keyword arguments for its constructor.
    `hedge`: once a race of an incremental round has a winner, the last winner starts alone
    and the others join after `hedge` times its last solve time (plus 50 ms), except on probes
    (after 4 hedged solves in a row, then 8, 16 and so on up to 64) and on rounds much larger
    than recent ones; None starts everybody at once. `idle`: once the caller has been away
    for `idle` seconds after a solve, the workers catch up and prepare for the next solve (see
    DEFAULT_IDLE); None never. The race's methods are for one thread at a time.
    """

    algorithm = "race"

    def __init__(
        self,
        algorithms: tuple[str, ...] = DEFAULT_PAIR,
        options: Mapping[str, Mapping[str, Any]] | None = None,
        *,
        hedge: float | None = DEFAULT_HEDGE,
        idle: float | None = DEFAULT_IDLE,
    ) -> None:
        super().__init__()
        if idle is not None and not (math.isfinite(idle) and idle >= 0):
            raise ValueError(f"idle must be None or a finite number at least 0, got {idle}")
        self.idle = idle
        # Held by every call and by the idle timer's work, which gives way to a call.
        self._lock = threading.RLock()
        self._calls = 0  # calls so far: the idle timer's work is stale once a call came
        self._idle_timer: threading.Timer | None = None
        if hedge is not None and not (math.isfinite(hedge) and hedge >= 0):
            raise ValueError(f"hedge must be None or a finite number at least 0, got {hedge}")
        self.hedge = hedge
        if len(algorithms) < 1:
            raise ValueError("a race needs at least one algorithm")
        if "race" in algorithms:
            raise ValueError("a race cannot contain another race")
        if len(set(algorithms)) != len(algorithms):
            raise ValueError(f"a race names each algorithm once, got {algorithms}")
        self.algorithms = tuple(algorithms)
        chosen = DEFAULT_OPTIONS if options is None else options
        self._options = {name: dict(chosen.get(name, {})) for name in algorithms}
        for name in algorithms:  # fail here, not in a worker, on unknown names or options
            make_solver_from_options(name, self._options[name]).close()
        json.dumps(self._options)  # options travel to the workers as JSON
        self._ids = LiveIds()  # the parent holds no network: it checks batches against this
        self._history: list[ChangeBatch] = []  # reset batch + later batches, for restarts
        self._last: tuple[Int64Array, Int64Array] | None = None  # winner's flow, potentials
        self._replies: queue.SimpleQueue[tuple[_Worker, tuple[Any, ...] | None]]
        self._replies = queue.SimpleQueue()
        self.restarts = 0
        self._favourite: tuple[str, float] | None = None  # last winner, its solve's seconds
        self._hedged = 0  # solves since the last probe or change of favourite
        self._probe_after = _PROBE_FIRST  # probe once `_hedged` reaches this
        self._from_scratch = True  # the next solve is a snapshot's first: it names no favourite
        self._round_rows = 0  # rows of the batches taken since the last solve
        self._recent_rows: deque[int] = deque(maxlen=_RECENT_ROUNDS)  # of the last rounds
        self._workers = [self._spawn(name) for name in self.algorithms]
        self._finalizer = weakref.finalize(self, _shutdown, self._workers)

    # ------------------------------------------------------------------ life cycle

    @contextlib.contextmanager
    def _call(self) -> Iterator[None]:
        """Run a call of the caller's: it excludes, and cancels, the idle timer's work."""
        with self._lock:
            self._calls += 1
            if self._idle_timer is not None:
                self._idle_timer.cancel()
                self._idle_timer = None
            yield

    def load(self, snapshot: ChangeBatch) -> None:
        with self._call():
            self._load(snapshot)

    def _load(self, snapshot: ChangeBatch) -> None:
        self._send_batch("load", snapshot, self._ids.load)
        self._history = [snapshot]
        self._last = None
        self._favourite = None
        self._hedged, self._probe_after = 0, _PROBE_FIRST
        self._from_scratch, self._round_rows = True, 0
        self._recent_rows.clear()
        self._loaded = True

    def apply(self, changes: ChangeBatch) -> None:
        with self._call():
            self._apply(changes)

    def _apply(self, changes: ChangeBatch) -> None:
        if changes.reset:
            self._load(changes)
            return
        if not self._loaded:
            raise SolverError("apply() before load(): give the solver a snapshot first")
        self._send_batch("apply", changes, self._ids.apply)
        if self._bound_graph() is None:
            self._history.append(changes)
        self._last = None

    def _load_graph(self, graph: FlowGraph) -> None:
        self.load(graph.snapshot())  # the workers load it; the caller keeps no network

    def _apply_graph_changes(self, changes: ChangeBatch) -> None:
        self.apply(changes)  # the workers apply it (the record of live ids is checked)

    def solve_graph(self, graph: FlowGraph) -> SolveResult:
        result = super().solve_graph(graph)
        self._history = []  # the bound graph itself is the record from now on
        return result

    def sync(self, flow: Int64Array, potentials: Int64Array) -> None:
        with self._call():
            self._sync(flow, potentials)

    def _sync(self, flow: Int64Array, potentials: Int64Array) -> None:
        flow = np.array(flow, dtype=np.int64)
        potentials = np.array(potentials, dtype=np.int64)
        for w in self._live():
            self._send(w, ("sync", flow, potentials))
        self._last = (flow, potentials)  # what a restarted worker is synced to
        self._from_scratch = False

    def potentials(self) -> Int64Array:
        if self._last is None:
            raise SolverError("no solution since the last change: solve first")
        return self._last[1].copy()

    def close(self) -> None:
        with self._call():
            self._finalizer()

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Wait until every live worker has warmed up (its kernels loaded) and serves, or has
        died (the next race replaces it); False if `timeout` seconds pass first.

        Workers warm up as they start, about a second; the first race waits for the first of
        them, so this moves that wait, and the slower worker's, out of the first solve (whose
        time would otherwise include it)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while any(w.flag[2] == 0 and w.process.poll() is None for w in self._live()):
            if deadline is not None and time.monotonic() >= deadline:
                return False
            time.sleep(0.005)
        return True

    @property
    def worker_pids(self) -> list[int]:
        """Process ids of the live workers (for monitoring and the tests)."""
        return [w.process.pid for w in self._live()]

    # ------------------------------------------------------------------ the race

    def _run(self) -> dict[str, float]:
        raise SolverError("a race solves in its worker processes: call solve()")

    def solve(self) -> SolveResult:
        with self._call():
            result = self._solve()
            if self.idle is not None:
                self._idle_timer = threading.Timer(
                    self.idle, _when_idle, (weakref.ref(self), self._calls)
                )
                self._idle_timer.daemon = True
                self._idle_timer.start()
            return result

    def _use_idle_time(self, calls: int) -> None:
        """The caller has been away since call number `calls`: send every worker what was
        deferred for it, and `prepare`. A caller who is back (or was, meanwhile) goes first."""
        if not self._lock.acquire(blocking=False):
            return
        try:
            if calls == self._calls and self._finalizer.alive:
                for w in self._live():
                    self._send(w, ("prepare",))  # after the deferred commands
        finally:
            self._lock.release()

    def _solve(self) -> SolveResult:
        if not self._loaded:
            raise SolverError("solve() before load(): give the solver a snapshot first")
        start = time.perf_counter()
        favourite = None if self._favourite is None else self._favourite[0]
        probe = self._probe_due()
        try:
            winner, reply = self._race()
        except _AllWorkersDiedError:
            # Every worker died mid-race: try once more with fresh processes, then give up.
            winner, reply = self._race()
        _tag, cost, delta, potentials, solver_time, stats = reply
        from_scratch, self._from_scratch = self._from_scratch, False
        self._recent_rows.append(self._round_rows)
        self._round_rows = 0
        others = [w for w in self._live() if w is not winner]
        for w in others:
            if not w.held:
                self._stop_solve(w)  # first: the losers give the cores back
        # Bases are the parent's own arrays, and every worker whose base is the winner's gets
        # the winner's delta below, so the winner's base becomes the new flow in place (no
        # second copy of a million arcs). The caller's copies come first: before the patch, so
        # that nothing between it and the messages can fail, and before the others' messages
        # are queued, since their sender threads would take the GIL whenever a copy let go of it.
        previous = winner.base
        result_flow, result_potentials = apply_delta(previous, delta), potentials.copy()
        flow = apply_delta(previous, delta, in_place=True)
        winner.base = flow
        self._last = (flow, potentials)
        # The favourite's time is its solve in the worker, not the race as the caller saw it:
        # that includes waiting for a fresh worker's warm-up (a second), which would hold the
        # others back for as long next round. The hedge's slack covers the answer's trip back.
        # A snapshot's first race says little: who wins it is often who finished loading first.
        self._favourite = None if from_scratch else (winner.algorithm, float(solver_time))
        self._count_probes(favourite, winner.algorithm, probe)
        # Workers the next round holds back take the answer only once its favourite solves
        # (`_race`): sent now, it would share the cores with the next round's batch.
        later = self._hold_back()
        for w in others:
            # A worker that held the winner's previous flow takes the winner's own delta.
            same = delta if w.base is previous else None
            if w.held:  # never started this solve: it only needs the answer
                w.held = False
                self._send(w, ("sync", flow, potentials), delta=same, defer=w in later)
            else:
                self._send(w, ("adopt", flow, potentials), delta=same, defer=w in later)
        return SolveResult(
            cost=int(cost),
            flow=result_flow,  # the caller's to keep; `flow` stays the workers' reference
            potentials=result_potentials,
            algorithm=f"race:{winner.algorithm}",
            wall_time=time.perf_counter() - start,
            stats={**stats, "solver_time": float(solver_time), "restarts": float(self.restarts)},
        )

    def _race(self) -> tuple[_Worker, tuple[Any, ...]]:
        """Ask every live worker to solve; return the winner and its reply."""
        for w in self._live():
            if w.process.poll() is not None:  # died since its last reply (no race saw it)
                self._bury(w)
        # The history can restart a worker only if it begins with a snapshot: after a bound
        # graph is gone, it holds just the batches since.
        restartable = self._bound_graph() is not None or (
            bool(self._history) and self._history[0].reset
        )
        if not restartable and any(not w.alive for w in self._workers):
            raise SolverError(
                "a race worker died and the graph the race was bound to is gone: "
                "load a snapshot (or solve_graph a graph) before solving again"
            )
        self._replace_stuck()
        racing = set()
        held = self._hold_back()
        for w in self._live():
            w.held = w in held
            if not w.held:
                self._send(w, ("solve",))
                racing.add(id(w))
        favourites = [w for w in self._live() if not w.held]
        # Replace dead workers while the live ones already solve; the new ones join the race.
        racing |= {id(w) for w in self._restart_dead()}
        # The hedge's clock starts once the favourite has answered the batches sent before its
        # solve, or died (the others would have to apply them too before solving). While it
        # applies, a backstop bounds the wait: an apply can hang too.
        clock_waits = bool(held) and _applying(favourites)
        start_held_at = None
        if held:
            start_held_at = self._hedge_start() + (_APPLY_GRACE_SECONDS if clock_waits else 0.0)
            if not clock_waits:
                self._catch_up(held)
        failures: list[str] = []
        died = 0
        while racing or start_held_at is not None:
            if clock_waits and not _applying(favourites):  # applied, or died
                clock_waits, start_held_at = False, self._hedge_start()
                self._catch_up(held)
            if start_held_at is not None and (not racing or time.monotonic() >= start_held_at):
                # The favourite is late (or failed): the others join the race after all.
                for x in self._live():
                    if x.held:
                        x.held = False
                        self._send(x, ("solve",))
                        racing.add(id(x))
                clock_waits, start_held_at = False, None
                continue
            try:
                if start_held_at is None:
                    w, reply = self._replies.get()
                else:
                    w, reply = self._replies.get(timeout=max(0.0, start_held_at - time.monotonic()))
            except queue.Empty:
                continue
            if not w.alive:
                continue  # a buried worker's last words
            if reply is _DIED:
                self._bury(w)
                was_racing = id(w) in racing
                if was_racing:
                    racing.discard(id(w))
                    failures.append(f"{w.algorithm} worker died (exit code {w.process.poll()})")
                    died += 1
                if (was_racing or w.held) and died <= len(self._workers) and restartable:
                    # Its replacement joins this race at once: the others may be slow.
                    racing |= {id(x) for x in self._restart_dead()}
                continue
            tag, number = w.owed.popleft()
            if tag != "solve":
                # A batch the worker could not take, or took though the parent refused it:
                # its network is not the parent's, so replace it.
                if (reply[0] == "ok") == (tag == "refused"):
                    self._bury(w)
                    was_racing = id(w) in racing
                    racing.discard(id(w))
                    if tag == "refused" and restartable and (was_racing or w.held):
                        # Its replacement never sees the batch: it joins this race at once.
                        racing |= {id(x) for x in self._restart_dead()}
                    elif was_racing:
                        failures.append(
                            f"{w.algorithm} took a batch that was refused"
                            if tag == "refused"
                            else f"{w.algorithm} failed on {tag}: {reply[2]}"
                        )
                continue
            if number != w.solves or id(w) not in racing:
                continue  # the answer to an earlier, lost race
            racing.discard(id(w))
            if reply[0] == "solved":
                return w, reply
            if reply[0] == "superseded":  # cancelled by an earlier race's end; cannot win
                failures.append(f"{w.algorithm}: cancelled")
                continue
            kind, text = reply[1], reply[2]
            if kind in ("infeasible", "unbounded"):  # a property of the problem
                for x in self._live():
                    self._stop_solve(x)
                raise ERRORS[kind](text)
            failures.append(f"{w.algorithm}: {text}")
        if died and died == len(failures):
            raise _AllWorkersDiedError("; ".join(failures))
        raise SolverError("every racing solver failed: " + "; ".join(failures or ["no workers"]))

    def _hold_back(self, more_rows: int = 0) -> list[_Worker]:
        """The workers that wait while the last winner solves alone (hedged start), if the
        round's batches so far and `more_rows` more make the next solve's round.

        On two cores a full race slows the usual winner down: every worker applies each batch
        and solves at once, sharing caches and memory bandwidth with the others and the caller.
        With `hedge` set, the last winner starts alone and the others join only if it has not
        answered within `hedge` times its last solve time (plus 50 ms) once it has applied the
        round's batch: the race then costs little while the favourite stays fast, and still
        catches a round where it degrades. Now and then a solve holds nobody back (a probe,
        see _PROBE_FIRST), to find out whether another solver has become the faster; so does
        an outsized round (see _OUTSIZED_FACTOR), and every round until one that was not a
        snapshot's first has a winner.
        """
        if self.hedge is None or self._favourite is None or self._probe_due():
            return []
        if self._outsized(self._round_rows + more_rows):
            return []
        live = self._live()
        if not any(w.algorithm == self._favourite[0] for w in live):
            return []
        return [w for w in live if w.algorithm != self._favourite[0]]

    def _outsized(self, rows: int) -> bool:
        """Whether a round of `rows` rows is much larger than the recent ones."""
        usual = max(_OUTSIZED_FLOOR, max(self._recent_rows, default=0))
        return rows > _OUTSIZED_FACTOR * usual

    def _probe_due(self) -> bool:
        """Whether the next solve starts everybody at once to see if the favourite is still the
        fastest (see _PROBE_FIRST)."""
        return self.hedge is not None and self._hedged >= self._probe_after

    def _count_probes(self, favourite: str | None, winner: str, probe: bool) -> None:
        """Update the probe schedule after a solve that `winner` won, `favourite` the one
        before (None: the first race of a graph).

        A probe, whoever wins it, doubles the wait for the next (its winner is the best known
        now); a favourite that was late, so that a held worker joined and won, starts the count
        again, since the rounds have changed. Two solvers about as fast as each other thus still
        see probes thin out."""
        if favourite is None or (winner != favourite and not probe):
            self._hedged, self._probe_after = 0, _PROBE_FIRST
        elif probe:
            self._hedged, self._probe_after = 0, min(2 * self._probe_after, _PROBE_MOST)
        else:
            self._hedged += 1

    def _hedge_delay(self) -> float:
        assert self.hedge is not None and self._favourite is not None
        return self.hedge * self._favourite[1] + _HEDGE_SLACK_SECONDS

    def _hedge_start(self) -> float:
        """When held workers join if the favourite has not answered, counted from now."""
        return time.monotonic() + self._hedge_delay()

    def _stop_solve(self, w: _Worker) -> None:
        """Stop `w`'s latest solve if it is still running (its reply is still owed)."""
        if any(tag == "solve" and n == w.solves for tag, n in w.owed):
            w.flag[0] = w.solves
            if w.cancelled_at is None:  # a later cancel must not restart an older one's clock
                w.cancelled_at = (w.solves, time.monotonic())

    def _replace_stuck(self) -> None:
        """Kill workers that have ignored a cancellation for too long (they are replaced).

        The clock runs from the cancel of the oldest solve a worker still owes, and starts
        again only when that solve is answered: a worker stuck in one solve keeps being sent
        (and cancelled in) later ones, which must not keep it alive."""
        now = time.monotonic()
        for w in self._live():
            if w.cancelled_at is None:
                continue
            owed = [n for tag, n in w.owed if tag == "solve" and n <= w.flag[0]]
            if not owed:
                w.cancelled_at = None
            elif min(owed) != w.cancelled_at[0]:  # it answered that one: the next one's turn
                w.cancelled_at = (min(owed), now)
            elif now - w.cancelled_at[1] > _CANCEL_GRACE_SECONDS:
                self._bury(w)

    # ------------------------------------------------------------------ plumbing

    def _live(self) -> list[_Worker]:
        return [w for w in self._workers if w.alive]

    def _bound_graph(self) -> FlowGraph | None:
        return self._graph_ref() if self._graph_ref is not None else None

    def _send_batch(
        self, command: str, batch: ChangeBatch, check: Callable[[ChangeBatch], None]
    ) -> None:
        """Send `batch` to every live worker (`load` or `apply`), then `check` it here.

        Workers check every batch themselves and take nothing from a bad one, so the parent's
        own check, which is what raises to the caller, runs while they receive and apply the
        batch instead of before; the batch is pickled once for all of them. If the check
        raises, each worker's refusal of the batch is expected (`refused`), and one that took
        it anyway is replaced at the next race, from the history (which never held the batch)
        or the bound graph. That includes a check interrupted (Ctrl-C) after the workers took
        a good batch: the parent never recorded it, so they are replaced.
        """
        shared_fd = -1
        if command == "load":
            payload, shared_fd = _share(batch)
        else:
            payload = pickle.dumps((command, batch), protocol=pickle.HIGHEST_PROTOCOL)
        # A worker a hedged start will hold back gets the batch once the favourite has applied
        # it and solves (`_catch_up`), or with its next command if that comes first: on two
        # cores the favourite then shares them with the parent alone while it applies it.
        later = self._hold_back(len(batch)) if command == "apply" else []
        sent: list[tuple[_Worker, Int64Array]] = []  # and each one's base before (`load` resets)
        try:
            pick_up = []  # workers whose idle sender will take the batch at once
            for w in self._live():
                if w not in later:
                    base = w.base
                    idle = w.outbox.empty() and not w.writing.locked() and not w.deferred
                    if idle and w.sender_running:
                        w.writing_batch.clear()
                        pick_up.append(w)
                    own = payload if shared_fd < 0 else _SharedLoad(payload, os.dup(shared_fd))
                    self._send(w, (command,), payload=own)
                    sent.append((w, base))
            # An idle sender thread needs the GIL to take the batch off its queue, and the check
            # holds it for milliseconds: let it start writing first (it then needs no GIL).
            deadline = time.monotonic() + _PICK_UP_SECONDS
            for w in pick_up:
                w.writing_batch.wait(max(0.0, deadline - time.monotonic()))
            check(batch)
        except BaseException:
            for w, base in sent:
                w.owed[-1] = ("refused", 0)
                w.base = base
            raise
        finally:
            if shared_fd >= 0:
                os.close(shared_fd)  # each worker's sender holds its own duplicate
        if command == "load":  # taken: what was deferred for the graph before is pointless now
            for w, _base in sent:
                w.deferred.clear()
        else:
            self._round_rows += len(batch)
        for w in later:  # batches only: a load is never deferred (`later` is empty)
            w.deferred.append(("apply", payload))

    def _send(
        self,
        w: _Worker,
        message: tuple[Any, ...],
        *,
        delta: FlowDelta | None = None,
        payload: bytes | _SharedLoad | None = None,
        defer: bool = False,
    ) -> None:
        """Queue a command for `w`, after the commands deferred for it, turning whole flows
        into deltas against its base (`delta`, if given, is that delta already; `payload`, if
        given, is the whole message pickled). With `defer`, it joins the deferred commands."""
        command = message[0]
        if not defer and command != "load":  # a load leaves them to `_send_batch`
            self._flush(w)
        number = 0
        if command in ("sync", "adopt"):
            flow = message[1]
            message = (command, flow_delta(w.base, flow) if delta is None else delta, message[2])
            w.base = flow
        elif command == "load":
            w.base = _NO_FLOW  # one object for all: a first answer's delta fits them all
        elif command == "solve":
            w.solves += 1
            number = w.solves
        if defer:
            w.deferred.append((str(command), message))
            return
        w.owed.append((str(command), number))
        w.outbox.put(message if payload is None else payload)

    def _catch_up(self, held: list[_Worker]) -> None:
        """Send the held-back workers what was deferred for them (the last answer, this round's
        batch) once the favourite has applied the batch and solves: they catch up on the other
        core, and need only `solve` if the favourite turns out late."""
        for w in held:
            if w.alive and w.held:
                self._flush(w)

    @staticmethod
    def _flush(w: _Worker) -> None:
        """Queue the commands deferred for `w`."""
        for tag, deferred in w.deferred:
            w.owed.append((tag, 0))
            w.outbox.put(deferred)
        w.deferred.clear()

    def _spawn(self, algorithm: str) -> _Worker:
        options = self._options[algorithm]
        ours, theirs = socket.socketpair()
        for end in (ours, theirs):
            end.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, _SOCKET_BUFFER_BYTES)
        flag_fd = _memory_file("firmament-race-flag", FLAG_BYTES)
        flag_map = mmap.mmap(flag_fd, FLAG_BYTES)
        argv = [str(theirs.fileno()), str(flag_fd), str(os.getpid()), algorithm]
        process = subprocess.Popen(
            [sys.executable, "-c", _WORKER_BOOT, *argv, json.dumps(options)],
            pass_fds=(theirs.fileno(), flag_fd),
            stdin=subprocess.DEVNULL,
            env={**_WORKER_ALLOCATOR, **os.environ},  # the caller's own settings win
        )
        theirs.close()
        os.close(flag_fd)
        conn = mpc.Connection(ours.detach())
        flag: Int64Array = np.frombuffer(flag_map, dtype=np.int64)
        w = _Worker(algorithm, process, conn, flag_map, flag)
        for target, name in ((_sender, "send"), (_receiver, "receive")):
            threading.Thread(
                target=target,
                args=(w, self._replies),
                name=f"firmament-race-{name}-{algorithm}",
                daemon=True,
            ).start()
        return w

    def _bury(self, w: _Worker) -> None:
        w.alive = False
        _stop(w, graceful=False)

    def _restart_dead(self) -> list[_Worker]:
        """Replace dead workers with fresh ones that load a full snapshot and then solve."""
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
            for batch in [graph.snapshot()] if graph is not None else self._history:
                if batch.reset:
                    payload, fd = _share(batch)
                    self._send(fresh, ("load",), payload=_SharedLoad(payload, fd))
                else:
                    self._send(fresh, ("apply", batch))
            if self._last is not None:
                self._send(fresh, ("sync", *self._last))
            self._send(fresh, ("solve",))
            fresh_workers.append(fresh)
        return fresh_workers


def _when_idle(race: weakref.ref[RacingSolver], calls: int) -> None:
    """The idle timer's work (it holds the race weakly: a race dropped meanwhile is gone)."""
    alive = race()
    if alive is not None:
        alive._use_idle_time(calls)


def _applying(workers: list[_Worker]) -> bool:
    """Whether any of the live `workers` still owes a reply to anything but a solve (a batch,
    a snapshot, a sync)."""
    return any(w.alive and tag != "solve" for w in workers for tag, _ in w.owed)


def _write_framed(fd: int, payload: bytes) -> None:
    """Write `payload` to the blocking socket `fd` as `Connection.send_bytes` frames it (a length
    header first), header and body in one system call (barring signals).

    `send_bytes` writes a large message's header and body in two calls, and between them the
    sender thread must take the GIL back, which the caller holds while it checks the batch (a few
    ms on a 30,000-row batch): the worker got the batch only after the check. One `writev` also
    spares a copy of the body (96 MB for S90's snapshot) that joining the two would take."""
    size = len(payload)
    if size > 0x7FFFFFFF:
        header = struct.pack("!i", -1) + struct.pack("!Q", size)
    else:
        header = struct.pack("!i", size)
    views = [memoryview(header), memoryview(payload)]
    while views:
        written = os.writev(fd, views)
        while views and written >= len(views[0]):
            written -= len(views[0])
            views.pop(0)
        if views:
            views[0] = views[0][written:]


def _share(batch: ChangeBatch) -> tuple[bytes, int]:
    """`("load", batch)` for `race_worker.take_shared`: the pickled message without its array
    buffers, which go into a new memory file (each at an offset aligned for any dtype, so the
    worker's arrays are aligned views of its mapping); returns the message and the file."""
    buffers: list[pickle.PickleBuffer] = []
    rest = pickle.dumps(("load", batch), protocol=5, buffer_callback=buffers.append)
    raws = [b.raw() for b in buffers]
    offsets = []
    end = 0
    for raw in raws:
        offsets.append(end)
        end += -(-raw.nbytes // SHARED_ALIGN) * SHARED_ALIGN
    fd = _memory_file("firmament-race-snapshot", end)
    try:
        for raw, offset in zip(raws, offsets, strict=True):
            done = 0
            while done < raw.nbytes:
                done += os.pwrite(fd, raw[done:], offset + done)
        spans = [(offset, raw.nbytes) for raw, offset in zip(raws, offsets, strict=True)]
        return pickle.dumps(("shared", rest, spans), protocol=pickle.HIGHEST_PROTOCOL), fd
    except BaseException:
        os.close(fd)
        raise


def _send_descriptor(sock_fd: int, fd: int) -> None:
    """Pass `fd` to the other end of the Unix socket `sock_fd` (one byte carries it)."""
    with borrowed_socket(sock_fd) as sock:
        socket.send_fds(sock, [b"\0"], [fd])


def _shut_down(sock_fd: int) -> None:
    """End both directions of the socket `sock_fd` without closing it: the worker reads end of
    file and exits, and so does the receiver thread, which reports the worker gone."""
    with borrowed_socket(sock_fd) as sock, contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


def _sender(w: _Worker, _replies: object) -> None:
    """Write `w`'s commands in order; a broken pipe shows up as the receiver's end of file.
    Each write holds `w.writing`, so that the receiver never closes the socket under one."""
    try:
        while True:
            message = w.outbox.get()
            if message is None:
                return
            with w.writing:
                if w.conn.closed:
                    if isinstance(message, _SharedLoad):
                        os.close(message.fd)
                    return
                try:
                    _write(w, message)
                except (OSError, ValueError):
                    # A write that failed part way (a frame without its descriptor, half a
                    # frame) leaves the stream out of step: end the socket, so that the worker
                    # exits and the receiver reports it gone (the next race replaces it).
                    with contextlib.suppress(OSError, ValueError):
                        _shut_down(w.conn.fileno())
                    return
    finally:
        w.sender_running = False
        w.writing_batch.set()  # nobody waits for a sender that has stopped
        _close_unsent(w)


def _write(w: _Worker, message: tuple[Any, ...] | bytes | _SharedLoad) -> None:
    """Write one command to `w`'s socket (the caller holds `w.writing`)."""
    if isinstance(message, _SharedLoad):
        w.writing_batch.set()
        try:
            _write_framed(w.conn.fileno(), message.payload)
            _send_descriptor(w.conn.fileno(), message.fd)
        finally:
            os.close(message.fd)
    elif isinstance(message, bytes):
        w.writing_batch.set()
        _write_framed(w.conn.fileno(), message)  # a batch for every worker
    else:
        w.conn.send(message)


def _close_unsent(w: _Worker) -> None:
    """Empty the outbox of a worker whose sender has stopped, closing the descriptors of the
    snapshots in it (they will never be sent)."""
    while True:
        try:
            left = w.outbox.get_nowait()
        except queue.Empty:
            return
        if isinstance(left, _SharedLoad):
            os.close(left.fd)


def _receiver(
    w: _Worker, replies: queue.SimpleQueue[tuple[_Worker, tuple[Any, ...] | None]]
) -> None:
    """Hand every reply of `w` to the caller's thread; report the end of its socket (or
    anything else that ends the stream, garbage included: the worker is then lost), and close
    it."""
    with contextlib.suppress(Exception):
        while True:
            replies.put((w, w.conn.recv()))
    replies.put((w, _DIED))
    # After the write in progress, if any: it ends once the worker has (a broken pipe), or is
    # killed by the caller, who now hears of its end. Closed under a write, the socket's handle
    # would be gone between two of its chunks.
    with w.writing, contextlib.suppress(Exception):
        w.conn.close()


def _memory_file(name: str, size: int) -> int:
    """A descriptor of a new file of `size` zeroed bytes in memory, which other processes can
    map (the shared flag, snapshots)."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create(name)
    else:  # pragma: no cover - non-Linux
        fd, path = tempfile.mkstemp(prefix=name)
        os.unlink(path)
    try:
        os.ftruncate(fd, size)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _stop(w: _Worker, *, graceful: bool) -> None:
    if graceful and w.process.poll() is None:
        w.flag[0] = np.iinfo(np.int64).max  # cancel whatever runs
        w.outbox.put(("stop",))
        with contextlib.suppress(subprocess.TimeoutExpired):
            w.process.wait(timeout=2.0)
    w.outbox.put(None)
    if w.process.poll() is None:
        w.process.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        w.process.wait(timeout=5.0)
    if not w.sender_running:  # anything queued since the sender stopped would stay there
        _close_unsent(w)
    # The socket is the receiver thread's to close, once it has read the end of file: closed
    # here, its number could be reused by a new worker's socket under that thread's read.


def _shutdown(workers: list[_Worker]) -> None:
    for w in workers:
        _stop(w, graceful=True)
