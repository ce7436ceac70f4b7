"""The dashboard beside the daemon (`serve --dashboard`): a process of its own, started and
stopped with the daemon (`DashboardProcess`).

The process (`python -m firmament_py.dashboard`) follows the daemon as any client does and
serves the page, so drawing pages never takes this process's interpreter from its requests.
It is started by module name: the daemon imports nothing of the dashboard, which loads Bokeh and
numpy. It dies with the daemon, even by SIGKILL.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO

from firmament_py.dashboard.address import DashboardError

__all__ = ["DashboardProcess", "local_endpoint"]

START_TIMEOUT_S = 60.0


def local_endpoint(endpoint: str) -> str:
    """The daemon's bound endpoint as this machine reaches it (a wildcard host: loopback)."""
    for wildcard in ("tcp://0.0.0.0:", "tcp://*:"):
        if endpoint.startswith(wildcard):
            return "tcp://127.0.0.1:" + endpoint.removeprefix(wildcard)
    if endpoint.startswith("tcp://[::]:"):
        return "tcp://[::1]:" + endpoint.removeprefix("tcp://[::]:")
    return endpoint


def _forward(stream: IO[str]) -> None:
    for line in stream:
        sys.stderr.write(line)
        sys.stderr.flush()


class DashboardProcess:
    """A running dashboard process and the URL of its page."""

    def __init__(self, process: subprocess.Popen[str], url: str) -> None:
        self.process = process
        self.url = url

    @classmethod
    def start(cls, endpoint: str, address: str, curve_keys: Path | None) -> DashboardProcess:
        """Start it for the daemon at `endpoint`, serving on `address`; DashboardError (with
        the process's own words) if it does not serve within a minute. It lists the daemon
        once the daemon's loop runs, and says on standard error when it follows it."""
        command = [
            sys.executable,
            "-m",
            "firmament_py.dashboard",
            "--daemon",
            local_endpoint(endpoint),
            "--listen",
            address,
            "--parent-pid",
            str(os.getpid()),
        ]
        if curve_keys is not None:
            command += ["--curve-keys", str(curve_keys)]
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        stdout, stderr = process.stdout, process.stderr
        assert stdout is not None and stderr is not None
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.append(stdout.readline()), daemon=True)
        reader.start()
        reader.join(START_TIMEOUT_S)
        url = lines[0].strip() if lines else ""
        if not url.startswith("http"):
            process.kill()
            process.wait()
            said = stderr.read().strip().splitlines()
            raise DashboardError(
                f"the dashboard did not start: {said[-1] if said else 'no output'}"
            )
        # From now on what it says goes to this process's standard error (never a full pipe).
        threading.Thread(target=_forward, args=(stderr,), daemon=True).start()
        return cls(process, url)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
