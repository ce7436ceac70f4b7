"""The daemon's scheduling process: a `Scheduler` on a replica of the daemon's state.

Rounds (graph update, solve, extraction) take tens of milliseconds and more on a large
cluster; the daemon must answer requests in well under that. So rounds run here, in a process
of their own, and the daemon only applies what they decide. The two talk over one ZeroMQ PAIR
socket, in order, as multipart messages:

* daemon -> worker: `init` (the pickled cluster state to start from, the policy, the solver and
  its options) or, for the first process after the daemon recovered, `init-journal` (the
  journal's snapshot as read from disk, the options, then frames of the records after the
  snapshot, which the process replays itself), `records` (a msgpack list of the records the
  daemon journaled, in order),
  `decide` (a round id and the round's time), `stop`;
* worker -> daemon: `hello` (once connected: the daemon answers with `init`), `ready`,
  `decided` (the round id, its decisions in wire form, its cost,
  algorithm and timings, the policy's per-task errors) or `failed` (the round id and why), and
  `diverged` (a record did not apply to the replica: the daemon restarts the worker).

The replica replays exactly the records the daemon's state applied, in the same order, and a
round's decisions reach the replica only as the daemon's record of those it accepted; so the
replica's state is always the daemon's state as of the last record sent. The daemon waits for
a round's answer (and sends its record) before asking for the next round.

Garbage collection. The replica and the imported modules, some 10^5 objects, live as long as
the process. So after `init` they are moved out of the cyclic collector's sight and young
collections are made rarer (`firmament_py.collector.settle`, which says why).
"""

from __future__ import annotations

import gc
import pickle
import sys
from typing import Any

import msgpack
import zmq

from firmament_py.collector import settle as settle_collector
from firmament_py.model.cluster import ClusterState
from firmament_py.parent_death import die_with_parent
from firmament_py.scheduler import Scheduler
from firmament_py.service.protocol import decision_to_wire
from firmament_py.service.replay import ReplayError, StateReplica, replay
from firmament_py.solvers.warmup import warm_up

__all__ = ["run_worker"]


def _pack(value: Any) -> bytes:
    return bytes(msgpack.packb(value, use_bin_type=True))


def _recovered_state(snapshot: bytes, frames: list[bytes]) -> ClusterState:
    """The daemon's state as it recovered it (`init-journal`): the journal's snapshot (none:
    an empty state) with the records after it replayed, as the daemon replayed them."""
    payload = pickle.loads(snapshot) if snapshot else None
    state = ClusterState() if payload is None else payload["cluster"]
    base = 0 if payload is None else payload["seq"]
    replica = StateReplica(state)
    for frame in frames:
        for record in msgpack.unpackb(frame, raw=False):
            if record["seq"] > base:
                replay(replica, record)
    return state


def run_worker(endpoint: str, daemon_pid: int | None = None) -> None:
    """Serve rounds for the daemon listening on `endpoint` until it says `stop`. The daemon
    starts it as `python -m firmament_py.service.round_worker ENDPOINT DAEMON_PID`, and it dies
    with the daemon (a daemon killed by SIGKILL cannot say `stop`, and a PAIR socket does not
    notice its peer is gone)."""
    if daemon_pid is not None:
        die_with_parent(daemon_pid)
    context = zmq.Context()
    socket = context.socket(zmq.PAIR)
    socket.setsockopt(zmq.LINGER, 1000)
    socket.setsockopt(zmq.RCVHWM, 0)  # the daemon never waits for this process to catch up
    socket.connect(endpoint)
    socket.send_multipart([b"hello"])  # the daemon sends `init` once it hears this
    scheduler: Scheduler | None = None
    try:
        while True:
            kind, *parts = socket.recv_multipart()
            if kind == b"stop":
                break
            if kind in (b"init", b"init-journal"):
                if scheduler is not None:
                    scheduler.close()
                    scheduler = None
                    gc.unfreeze()  # let the collector free the old replica's cycles, if any
                if kind == b"init":
                    state, options = pickle.loads(parts[0]), pickle.loads(parts[1])
                else:
                    state, options = _recovered_state(parts[0], parts[2:]), pickle.loads(parts[1])
                # Kernels load (or compile) now, not in the first round (`solvers.warmup`).
                warm_up(options["solver"], options["solver_options"])
                scheduler = Scheduler(
                    options["policy"],
                    solver=options["solver"],
                    solver_options=options["solver_options"],
                    state=state,
                )
                # A race's workers warm up in their own processes; past a minute, go on.
                scheduler.solver.wait_ready(timeout=60.0)
                settle_collector()  # see the module docstring
                socket.send_multipart([b"ready"])
                continue
            if scheduler is None:
                raise RuntimeError(f"the daemon sent {kind!r} before init")
            if kind == b"records":
                try:
                    for record in msgpack.unpackb(parts[0], raw=False):
                        replay(scheduler, record)
                except ReplayError as error:
                    socket.send_multipart([b"diverged", str(error).encode()])
            elif kind == b"decide":
                round_id, time = msgpack.unpackb(parts[0], raw=False)
                try:
                    pending = scheduler.decide(time)
                except Exception as error:
                    message = f"{type(error).__name__}: {error}"
                    socket.send_multipart([b"failed", _pack([round_id, message])])
                    continue
                answer = {
                    "round": round_id,
                    "time": pending.time,
                    "deltas": [decision_to_wire(d) for d in pending.decisions],
                    "cost": pending.cost,
                    "algorithm": pending.algorithm,
                    "timings": dict(pending.timings),
                    "task_errors": [str(error) for error in pending.task_errors],
                }
                socket.send_multipart([b"decided", _pack(answer)])
    finally:
        if scheduler is not None:
            scheduler.close()
        socket.close()
        context.term()


if __name__ == "__main__":
    run_worker(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else None)
