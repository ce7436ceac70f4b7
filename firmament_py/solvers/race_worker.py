"""The worker process of a `RacingSolver`: one solver serving commands over a pipe.

`RacingSolver` starts each worker as a plain Python subprocess that calls `worker_main` with the
pipe and flag descriptors, the parent's pid, the algorithm and its options as JSON. It does not
use multiprocessing, so a worker never re-imports the parent's `__main__` (user scripts need no
`if __name__ == "__main__"` guard), and it shares nothing with the parent but a socket and a
24-byte flag in shared memory (cancel, and whether it has warmed up). The protocol is described
in `racing.py`.
"""

from __future__ import annotations

import contextlib
import json
import mmap
import multiprocessing.connection as mpc
import os
import pickle
import platform
import signal
import socket
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from firmament_py.parent_death import die_with_parent
from firmament_py.solvers.algorithms import make_algorithm
from firmament_py.solvers.base import (
    FlowSolver,
    InfeasibleError,
    SolverCancelled,
    SolverError,
    UnboundedError,
)

Int64Array = npt.NDArray[np.int64]

# Offsets of a shared snapshot's buffers are multiples of this (any dtype's alignment, and a
# cache line).
SHARED_ALIGN = 64

# Workers' glibc serves blocks under this many bytes from its heap (`racing._WORKER_ALLOCATOR`).
HEAP_BLOCKS_UNDER = 32 << 20

# The most heap a worker touches after a load (`_warm_heap`): under HEAP_BLOCKS_UNDER, whatever
# else glibc adds to a block.
_HEAP_WARM_MAX_BYTES = HEAP_BLOCKS_UNDER - (1 << 20)

# `_warm_heap` looks for a waiting command before each chunk this size (about a millisecond of
# page faults on the benchmark VM).
_HEAP_WARM_CHUNK_BYTES = 1 << 20

# The shared flag: [cancel solves numbered up to this, number of the solve running now, 1 once
# the worker has warmed up and serves]. The solver polls the first two (its cancel flag).
FLAG_BYTES = 24

ERRORS: dict[str, type[SolverError]] = {
    "infeasible": InfeasibleError,
    "unbounded": UnboundedError,
    "cancelled": SolverCancelled,
    "error": SolverError,
}


def make_solver_from_options(algorithm: str, options: Mapping[str, Any]) -> FlowSolver:
    """A worker's solver: one of the single-process algorithms (a race holds no race)."""
    return make_algorithm(algorithm, **options)


FlowDelta = tuple[int, Int64Array, Int64Array]


def flow_delta(base: Int64Array, flow: Int64Array) -> FlowDelta:
    """What turns `base` into `flow`: (length, changed indices, their values).

    Flows travel between parent and workers as deltas against the last flow both sides hold
    for that worker: a round changes a few thousand of a million arcs.
    """
    n = min(len(base), len(flow))
    changed = np.flatnonzero(base[:n] != flow[:n])
    if len(base) == len(flow):  # the usual case
        return n, changed, flow[changed]
    # Past the shorter one, the missing entries count as zeros: only the longer one's nonzero
    # entries differ (comparing padded copies took 3.4 ms where the arrays grow to 612,000).
    longer = flow if len(flow) > n else base
    tail = n + np.flatnonzero(longer[n:])
    tail_values = flow[tail] if longer is flow else np.zeros(len(tail), dtype=np.int64)
    values = np.concatenate((flow[changed], tail_values))
    return len(longer), np.concatenate((changed, tail)), values


def apply_delta(base: Int64Array, delta: FlowDelta, *, in_place: bool = False) -> Int64Array:
    """`base` with `delta` applied (the inverse of `flow_delta`): a new array, or with
    `in_place` `base` itself when the length is unchanged and `base` is writeable."""
    length, changed, values = delta
    if length == len(base) and in_place and base.flags.writeable:
        base[changed] = values
        return base
    if length == len(base):
        out = base.copy()
    else:
        out = np.zeros(length, dtype=np.int64)
        keep = min(length, len(base))
        out[:keep] = base[:keep]
    out[changed] = values
    return out


@contextlib.contextmanager
def borrowed_socket(fd: int) -> Iterator[socket.socket]:
    """A socket object for the descriptor `fd`, which stays open and blocking afterwards (it is
    a `Connection`'s to close; a default timeout set elsewhere would make it non-blocking)."""
    sock = socket.socket(fileno=fd)
    try:
        yield sock
    finally:
        sock.setblocking(True)
        sock.detach()


def take_shared(conn: mpc.Connection, message: tuple[Any, ...]) -> tuple[Any, ...]:
    """The `load` a `("shared", rest, [(offset, size), ...])` message stands for: its array
    buffers are in a memory file whose descriptor follows on the socket. They become views of a
    private (copy-on-write) mapping of that file, so a snapshot is not copied again here."""
    _tag, rest, spans = message
    with borrowed_socket(conn.fileno()) as sock:
        byte, fds, _flags, _address = socket.recv_fds(sock, 1, 1)
    if not byte:
        raise EOFError("the socket ended before a shared snapshot's descriptor")
    if len(fds) != 1:
        for fd in fds:
            os.close(fd)
        raise SolverError(f"a shared snapshot came with {len(fds)} descriptors, not 1")
    try:
        size = max((offset + length for offset, length in spans), default=0)
        # A mapping cannot be empty: a snapshot of zero rows has one buffer, of zero bytes.
        whole = memoryview(mmap.mmap(fds[0], size, flags=mmap.MAP_PRIVATE) if size else bytearray())
        buffers = [whole[offset : offset + length] for offset, length in spans]
    finally:
        os.close(fds[0])
    loaded: tuple[Any, ...] = pickle.loads(rest, buffers=buffers)
    return loaded


def _warm_heap(solver: FlowSolver, waiting: Callable[[], bool]) -> None:
    """Touch, once, as much heap as a round's arrays take (flows, a delta, potentials: four
    int64 entries per arc and node), and free it again: the first rounds after a load then
    reuse those pages instead of faulting in fresh ones. This needs the parent's glibc settings
    (`racing._WORKER_ALLOCATOR`), which serve a block this size from the heap and keep it there
    once freed; under another allocator, or other settings, it is skipped. On job1k the
    favourite's solve faulted in about 600 pages without this, 50 to 90 with it
    (docs/benchmarks-history.md).

    It goes a chunk at a time and stops once `waiting()` says a command has come: in a race
    from scratch the parent's `solve` often arrives while this runs (16 to 36 ms on S50's
    load-spreading graph), and a solve's own arrays fault the pages in anyway."""
    if os.environ.get("MALLOC_MMAP_THRESHOLD_") != str(HEAP_BLOCKS_UNDER):
        return
    if platform.libc_ver()[0] != "glibc":
        return
    block = np.empty(heap_warm_bytes(solver), dtype=np.uint8)  # not touched yet
    for start in range(0, len(block), _HEAP_WARM_CHUNK_BYTES):
        if waiting():
            return
        block[start : start + _HEAP_WARM_CHUNK_BYTES] = 1  # written: its pages fault in


def heap_warm_bytes(solver: FlowSolver) -> int:
    """How much heap `_warm_heap` touches for `solver`'s network."""
    network = solver.network
    return min(4 * 8 * (network.arc_bound + network.node_bound), _HEAP_WARM_MAX_BYTES)


def _error_kind(exc: BaseException) -> str:
    for kind, cls in ERRORS.items():
        if type(exc) is cls:
            return kind
    return "error"


def worker_main(argv: list[str]) -> None:
    """Serve one solver until the pipe closes or a `stop` message arrives.

    Arguments: pipe fd, cancel-flag fd, parent pid, algorithm, options as JSON.
    """
    pipe_fd, flag_fd, parent_pid = int(argv[0]), int(argv[1]), int(argv[2])
    algorithm, options = argv[3], json.loads(argv[4])
    die_with_parent(parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    conn = mpc.Connection(pipe_fd)
    flag_map = mmap.mmap(flag_fd, FLAG_BYTES)
    flag: Int64Array = np.frombuffer(flag_map, dtype=np.int64)
    from firmament_py.solvers.warmup import warm_up  # here: only a worker needs it

    warm_up(algorithm, options)
    solver = make_solver_from_options(algorithm, options)
    solver.use_cancel_flag(flag[:2])
    flag[2] = 1  # warmed up: the parent may stop waiting (`RacingSolver.wait_ready`)
    base: Int64Array = np.zeros(0, dtype=np.int64)  # the last flow the parent knows we hold
    before_solve = base  # the base when the last solve began: what `adopt` deltas refer to
    solves = 0
    warm = False  # warm the heap once this command's reply is sent (after a load)
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        command = message[0]
        try:
            if command == "shared":  # a snapshot in a memory file (see `take_shared`)
                message = take_shared(conn, message)
                command = message[0]
            if command == "stop":
                conn.send(("ok",))
                return
            if command == "load":
                solver.load(message[1])  # a refused snapshot changes nothing, base included
                base = np.zeros(0, dtype=np.int64)
                reply: tuple[Any, ...] = ("ok",)
                warm = True
            elif command == "apply":
                solver.apply(message[1])
                reply = ("ok",)
            elif command in ("sync", "adopt"):
                # `adopt` follows a lost solve: its delta is against the base before that solve.
                flow = apply_delta(base if command == "sync" else before_solve, message[1])
                solver.sync(flow, message[2])
                base = flow
                reply = ("ok",)
            elif command == "solve":
                solves += 1
                flag[1] = solves
                before_solve = base
                r = solver.solve()
                base = r.flow
                if solver.cancel_requested():
                    reply = ("superseded",)  # finished, but lost: the parent sends `adopt`
                else:
                    delta = flow_delta(before_solve, r.flow)
                    reply = ("solved", r.cost, delta, r.potentials, r.wall_time, r.stats)
            elif command == "prepare":  # the caller is away: do the next solve's first work
                solver.prepare()
                reply = ("ok",)
            elif command == "crash":  # used by the tests: die without a word
                os._exit(3)
            else:
                reply = ("error", "error", f"unknown command {command!r}")
        except Exception as exc:  # reported to the parent, which decides what to do
            reply = ("error", _error_kind(exc), str(exc))
        message = ()  # let a snapshot (and its shared mapping) go before the next command
        try:
            conn.send(reply)
        except (BrokenPipeError, OSError):
            return
        if warm:  # after the reply: the parent's hedge clock waits for a load's answer
            warm = False
            with contextlib.suppress(MemoryError):  # only ever a saving
                _warm_heap(solver, lambda: conn.poll(0))
