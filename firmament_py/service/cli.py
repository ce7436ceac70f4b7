"""The daemon's commands: `firmament-py serve` and `firmament-py keys generate|authorise`."""

from __future__ import annotations

import logging
import signal
from pathlib import Path
from types import FrameType

import click
from rich.console import Console
from rich.markup import escape

from firmament_py.catalog import unknown_policy
from firmament_py.dashboard.address import DashboardError, parse_address
from firmament_py.service.changes import DEFAULT_WATCH_WINDOW
from firmament_py.service.daemon import DaemonConfig, DaemonError, SchedulingDaemon
from firmament_py.service.dashboard_process import DashboardProcess
from firmament_py.service.journal import FSYNC_POLICIES, JournalError
from firmament_py.service.keys import (
    CurveServerKeys,
    KeyFileError,
    authorise_client,
    generate_key_pair,
)

__all__ = ["keys", "serve"]


@click.command(short_help="Run the scheduling daemon (ZeroMQ + msgpack: docs/protocol.md).")
@click.option(
    "--bind",
    default="tcp://127.0.0.1:7100",
    show_default=True,
    help="The ZeroMQ endpoint to serve requests on (anything but loopback needs --curve-keys).",
)
@click.option(
    "--journal",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="The journal directory: recovered on start, created if missing.",
)
@click.option("--policy", default="trivial", show_default=True, help="An installed policy.")
@click.option("--solver", default="cost-scaling", show_default=True, help="A solver name.")
@click.option(
    "--curve-keys",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    help="A key directory (server.key_secret, clients/*.key) from `firmament-py keys`.",
)
@click.option(
    "--auto-schedule-ms",
    type=click.IntRange(1),
    help="Also run a round this often, publishing its deltas (see --publish).",
)
@click.option("--publish", help="A ZeroMQ endpoint to publish every round's deltas on (PUB).")
@click.option(
    "--fsync",
    type=click.Choice(FSYNC_POLICIES),
    default="always",
    show_default=True,
    help="When the journal is forced to disk: before every acknowledgement, at most every "
    "50 ms, or never (the kernel decides; a killed daemon still loses nothing).",
)
@click.option(
    "--snapshot-every",
    type=click.IntRange(1),
    default=100_000,
    show_default=True,
    help="Records between snapshots (written by a forked child while the daemon serves).",
)
@click.option(
    "--decision-chunk",
    type=click.IntRange(1),
    default=64,
    show_default=True,
    help="A round's decisions applied per turn of the request loop (smaller: shorter pauses).",
)
@click.option(
    "--watch-window",
    type=click.IntRange(1),
    default=DEFAULT_WATCH_WINDOW,
    show_default=True,
    help="Journal records kept for `changes` requests (a manager further behind lists again).",
)
@click.option(
    "--lease-ms",
    type=click.IntRange(1),
    default=None,
    help="Return a placed task to the queue unless its start is confirmed (task_started) "
    "within this many ms (default: placements need no confirmation).",
)
@click.option(
    "--max-intake-lag-ms",
    type=click.IntRange(0),
    default=250,
    show_default=True,
    help="Refuse writes OVERLOADED (with a retry-after) while the request loop has gone this "
    "long without emptying its socket.",
)
@click.option("--max-message-bytes", type=click.IntRange(64), default=1 << 20, show_default=True)
@click.option(
    "--dashboard",
    metavar="HOST:PORT",
    help="Serve a live page of the daemon on this loopback address (docs/dashboard.md), from "
    "a process of its own that follows the daemon as a client.",
)
@click.option("--verbose", "-v", is_flag=True, help="Log the daemon's events to stderr.")
def serve(
    bind: str,
    journal: Path,
    policy: str,
    solver: str,
    curve_keys: Path | None,
    auto_schedule_ms: int | None,
    publish: str | None,
    fsync: str,
    snapshot_every: int,
    decision_chunk: int,
    watch_window: int,
    lease_ms: int | None,
    max_intake_lag_ms: int,
    max_message_bytes: int,
    dashboard: str | None,
    verbose: bool,
) -> None:
    """Serve the scheduling daemon until SIGTERM or Ctrl-C (then finish the round, flush the
    journal, write a snapshot)."""
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    if (problem := unknown_policy(policy)) is not None:
        raise click.BadParameter(problem, param_hint="--policy")
    if dashboard is not None:
        try:
            parse_address(dashboard)
        except DashboardError as error:
            raise click.BadParameter(str(error), param_hint="--dashboard") from None
    try:
        curve = CurveServerKeys.load(curve_keys) if curve_keys is not None else None
        config = DaemonConfig(
            bind=bind,
            journal=journal,
            policy=policy,
            solver=solver,
            publish=publish,
            auto_schedule_ms=auto_schedule_ms,
            fsync=fsync,
            snapshot_every=snapshot_every,
            decision_chunk=decision_chunk,
            watch_window=watch_window,
            lease_ms=lease_ms,
            max_intake_lag_ms=max_intake_lag_ms,
            max_message_bytes=max_message_bytes,
            curve=curve,
        )
        daemon = SchedulingDaemon(config)
    except (DaemonError, JournalError, KeyFileError) as error:
        raise click.ClickException(str(error)) from error

    def stop(signum: int, frame: FrameType | None) -> None:
        daemon.stop()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    status = daemon.status()
    err = Console(stderr=True)
    err.print(
        f"firmament-py daemon on [bold]{daemon.endpoint}[/] (policy {policy}, solver {solver}, "
        f"journal {escape(str(journal))}: {status['machines']} machines, {status['tasks']} tasks, "
        f"record {status['seq']})",
        soft_wrap=True,  # one line, also in a log file, where Console would wrap at 80
    )
    page = None
    if dashboard is not None:
        try:
            page = DashboardProcess.start(daemon.endpoint, dashboard, curve_keys)
        except DashboardError as error:
            daemon.close()
            raise click.ClickException(str(error)) from None
        err.print(f"dashboard on [bold]{page.url}[/]", soft_wrap=True)
    try:
        daemon.serve()
    finally:
        if page is not None:
            page.stop()
    err.print(
        f"stopped after {daemon.rounds} round{'' if daemon.rounds == 1 else 's'}; "
        f"journal at record {daemon.service.seq}",
        soft_wrap=True,
    )


@click.group()
def keys() -> None:
    """Make CURVE keys for the daemon and its clients."""


@keys.command("generate")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.option("--name", default="server", show_default=True, help="The key pair's name.")
def generate(directory: Path, name: str) -> None:
    """Write a key pair NAME.key / NAME.key_secret into DIRECTORY. The daemon's pair is named
    `server`; give each client its own name."""
    try:
        public, secret = generate_key_pair(directory, name)
    except KeyFileError as error:
        raise click.ClickException(str(error)) from error
    click.echo(f"public key {public}\nsecret key {secret} (keep it private)")


@keys.command("authorise")
@click.argument("server_directory", type=click.Path(file_okay=False, path_type=Path))
@click.argument("client_public_key", type=click.Path(dir_okay=False, path_type=Path))
def authorise(server_directory: Path, client_public_key: Path) -> None:
    """Allow the client whose public key is CLIENT_PUBLIC_KEY to connect to the daemon whose
    keys are in SERVER_DIRECTORY (copies it into SERVER_DIRECTORY/clients)."""
    try:
        target = authorise_client(server_directory, client_public_key)
    except KeyFileError as error:
        raise click.ClickException(str(error)) from error
    click.echo(f"allowed {target}")
