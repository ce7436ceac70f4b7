"""The daemon's link to its scheduling process (`round_worker`): the process, and the ZeroMQ
PAIR socket to it.

The daemon starts the process, which connects and says `hello`; the daemon answers with the
whole cluster state (`send_init`), and from then on forwards every record it journals and asks
for rounds. Three rules keep the daemon from ever waiting on the process:

* no send waits (`send`): a PAIR socket without its peer would hold a send until one
  connects, and no other could while the daemon's only thread waits. With a peer a send never
  has to wait (no high-water mark), so a refused send means the process is gone: it is ended,
  and the next one is sent the whole state;
* the state is sent only after `hello`, never before: a process that dies before connecting
  (a broken install, a solver that cannot load) then never holds the daemon up;
* a process that exits is started again at most once a second (`restart_due`), and one that
  has not said hello 30 s after its start is ended (`hello_overdue`).

Whoever connects to the socket first becomes the scheduling process: it is sent the whole
cluster state and its decisions are applied. So the socket is a Unix socket in a directory only
this user can enter (not a loopback TCP port, which any local user could reach first).
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from typing import Any

import zmq

from firmament_py.model.cluster import ClusterState

__all__ = ["WorkerLink", "WorkerLinkError"]

_log = logging.getLogger(__name__)

RESTART_INTERVAL_S = 1.0
"""A scheduling process that exits is started again at most this often."""
HELLO_TIMEOUT_S = 30.0
"""One that has not said hello this long after its start (it does before loading anything
heavy) is ended."""


class WorkerLinkError(Exception):
    """No socket for the scheduling process could be made."""


class WorkerLink:
    """One daemon's scheduling process (started by `start`, restarted by the daemon's loop)
    and the socket to it (`socket`, for the daemon's poller). `options` are the policy, the
    solver and its options, sent with the state."""

    def __init__(self, context: zmq.Context[zmq.Socket[bytes]], options: Mapping[str, Any]):
        self.options = dict(options)
        self.socket = context.socket(zmq.PAIR)
        self.socket.setsockopt(zmq.LINGER, 0)
        self.socket.setsockopt(zmq.SNDHWM, 0)  # never block on a scheduling process behind
        self.directory: str | None = None
        self.endpoint = self._bind()
        self.process: subprocess.Popen[bytes] | None = None
        self.ready = False
        """Whether the process said hello and was sent the state: records go to it, rounds
        may start."""
        self.started = 0.0
        """When the last process was started (monotonic seconds)."""

    def _bind(self) -> str:
        """Bind the socket where no other user can reach it: a Unix socket in a directory of
        mode 0700 (`mkdtemp`), removed by `close` (not after SIGKILL). A libzmq without the ipc
        transport (Windows builds) gets loopback TCP, and a warning in the log."""
        if not zmq.has("ipc"):
            _log.warning("no ipc transport: the scheduling process's socket is on loopback TCP")
            port = self.socket.bind_to_random_port("tcp://127.0.0.1")
            return f"tcp://127.0.0.1:{port}"
        # A Unix socket's path has a length limit (107 bytes on Linux): a long TMPDIR falls
        # back to /tmp.
        for parent in (None, "/tmp"):
            try:
                self.directory = tempfile.mkdtemp(prefix="firmament-py-", dir=parent)
            except OSError as error:
                raise WorkerLinkError(f"cannot make a directory for a socket: {error}") from error
            path = f"{self.directory}/worker"
            if len(path.encode()) <= zmq.IPC_PATH_MAX_LEN:
                self.socket.bind(f"ipc://{path}")
                return f"ipc://{path}"
            self._remove_directory()
        raise WorkerLinkError(
            f"no directory for the scheduling process's socket: {path!r} is longer than "
            f"{zmq.IPC_PATH_MAX_LEN} bytes"
        )

    def _remove_directory(self) -> None:
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None

    # ------------------------------------------------------------------ the process

    def start(self) -> None:
        """Start a scheduling process (ending one still there); `send_init` gives it the
        state once it has said hello."""
        self.stop_process()
        if self.directory is not None and not os.path.exists(f"{self.directory}/worker"):
            # Removed under us (a cleaner of old files in /tmp): a new process could never
            # connect to it, so bind a new one.
            self.socket.unbind(self.endpoint)
            self._remove_directory()
            self.endpoint = self._bind()
        self.ready = False
        self.started = time.monotonic()
        self.process = subprocess.Popen(self.command())

    def command(self) -> list[str]:
        """The scheduling process's command line."""
        return [
            sys.executable,
            "-m",
            "firmament_py.service.round_worker",
            self.endpoint,
            str(os.getpid()),
        ]

    def send_init(self, cluster: ClusterState) -> None:
        """Send the process the whole state, when it says `hello` (see the module docstring):
        until then no records are forwarded and no round starts, so the state sent is the
        state as of the hello."""
        self.ready = self.send([b"init", pickle.dumps(cluster), pickle.dumps(self.options)])

    def send_init_from_journal(self, snapshot: bytes | None, frames: list[bytes]) -> None:
        """Send the process the state as the daemon recovered it, for it to rebuild: the
        snapshot's bytes as read from the journal (`b""` for none) and the frames of records
        since (those recovery replayed, then those journaled while the process started). The
        daemon pickles nothing: on a large cluster that pickling held its loop up for
        seconds."""
        init = [b"init-journal", snapshot or b"", pickle.dumps(self.options), *frames]
        self.ready = self.send(init)

    def send(self, frames: list[bytes]) -> bool:
        """Send to the process without waiting; False if it is no longer connected, and it is
        then ended (the daemon's loop starts another, which is sent the whole state)."""
        try:
            self.socket.send_multipart(frames, zmq.NOBLOCK)
        except zmq.Again:
            _log.error("the scheduling process is not connected; starting another")
            self.ready = False
            self.stop_process()
            return False
        return True

    def exited(self) -> int | None:
        """The exit status of a process that exited (it is then forgotten), else None."""
        if self.process is None or self.process.poll() is None:
            return None
        code = self.process.returncode
        self.process = None
        self.ready = False
        return code

    def hello_overdue(self) -> bool:
        """Whether the process has not said hello within `HELLO_TIMEOUT_S` of its start."""
        return (
            self.process is not None
            and not self.ready
            and time.monotonic() - self.started > HELLO_TIMEOUT_S
        )

    def restart_wait_s(self) -> float:
        """How long until a new process may start (at most one a second: a process that dies
        at once is not respawned in a loop); 0 or less: now."""
        return self.started + RESTART_INTERVAL_S - time.monotonic()

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def stop_process(self, *, asked: bool = False) -> None:
        """Wait for the process to exit (if it was `asked` to), else end it."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        if asked:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(5)
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def close(self) -> None:
        """Ask the process to stop and wait for it (ending it if it does not), and remove the
        socket's directory. The socket itself closes with its context."""
        with contextlib.suppress(zmq.ZMQError):
            self.socket.send_multipart([b"stop"], zmq.NOBLOCK)
        self.stop_process(asked=True)
        self._remove_directory()
