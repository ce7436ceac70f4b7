"""The daemon's dashboard process: `firmament-py serve --dashboard` starts it beside the daemon.

It follows the daemon as a client (`DaemonFollower`) and serves the page (`DashboardServer`),
in a process of its own, so that drawing pages never takes the daemon's interpreter from its
requests. It prints the page's URL on its first line of output once it serves (the daemon's
loop starts only then, so the page lists the daemon after that), logs a line to standard
error once it follows the daemon, and dies with the daemon (even by SIGKILL).
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from pathlib import Path

import click

from firmament_py.dashboard.board import Board
from firmament_py.dashboard.daemon_feed import DaemonFollower
from firmament_py.dashboard.server import DashboardError, DashboardServer
from firmament_py.parent_death import die_with_parent
from firmament_py.service.client import Client
from firmament_py.service.keys import CurveClientKeys, KeyFileError

LOAD_TIMEOUT_S = 30.0
"""How long the page may take to list the daemon's state before it says so."""

log = logging.getLogger("firmament_py.dashboard")

DASHBOARD_KEY = "dashboard"
"""The key pair (in the daemon's key directory) the dashboard connects with under CURVE."""


def client_keys(directory: Path) -> CurveClientKeys:
    """The dashboard's CURVE keys in the daemon's key directory; KeyFileError says how to make
    them when they are missing."""
    secret = directory / f"{DASHBOARD_KEY}.key_secret"
    if not secret.exists():
        raise KeyFileError(
            f"{secret}: missing. A dashboard beside a daemon with CURVE keys connects with its "
            f"own key pair: `firmament-py keys generate {directory} --name {DASHBOARD_KEY}`, "
            f"then `firmament-py keys authorise {directory} {directory / DASHBOARD_KEY}.key`"
        )
    return CurveClientKeys.load(secret, directory / "server.key")


@click.command()
@click.option("--daemon", "endpoint", required=True, help="The daemon's ZeroMQ endpoint.")
@click.option("--listen", required=True, help="HOST:PORT to serve the page on (loopback).")
@click.option("--curve-keys", type=click.Path(file_okay=False, path_type=Path))
@click.option("--parent-pid", type=int, help="Exit when this process does.")
@click.option("--interval-ms", type=click.IntRange(100), default=1_000, show_default=True)
def main(
    endpoint: str, listen: str, curve_keys: Path | None, parent_pid: int | None, interval_ms: int
) -> None:
    if parent_pid is not None:
        die_with_parent(parent_pid)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    try:
        curve = client_keys(curve_keys) if curve_keys is not None else None
        board = Board("daemon")
        server = DashboardServer(board, listen, interval_ms=interval_ms).start()
    except (DashboardError, KeyFileError) as error:
        raise click.ClickException(str(error)) from error
    follower = DaemonFollower(board, Client(endpoint, timeout=5.0, curve=curve))
    click.echo(server.url)  # serving: the daemon's command goes on (its loop answers us)
    follower.start()
    if not follower.loaded.wait(timeout=LOAD_TIMEOUT_S):
        log.warning(
            "dashboard: the daemon at %s has not answered in %.0f s%s; still trying",
            endpoint,
            LOAD_TIMEOUT_S,
            " (is the dashboard's key authorised?)" if curve is not None else "",
        )
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    signal.signal(signal.SIGINT, lambda *_: stopped.set())
    while not stopped.wait(1.0):
        if parent_pid is not None and os.getppid() != parent_pid:
            break
    follower.stop()
    server.stop()


if __name__ == "__main__":
    main()
