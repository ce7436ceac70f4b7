"""How a scheduling daemon serves (`DaemonConfig`), and the checks made before it starts
(`check_config`): a daemon that could not serve as configured, or would serve insecurely,
refuses to start with a `DaemonError` that says why."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from firmament_py.catalog import unknown_policy, unknown_solver
from firmament_py.service.changes import DEFAULT_WATCH_WINDOW
from firmament_py.service.endpoints import TRANSPORTS, is_loopback
from firmament_py.service.keys import CurveServerKeys
from firmament_py.service.state import DEFAULT_DEDUP_WINDOW

__all__ = ["DaemonConfig", "DaemonError", "check_config"]


class DaemonError(Exception):
    """The daemon cannot start as configured (an insecure bind, an unusable journal)."""


@dataclass(frozen=True)
class DaemonConfig:
    """How a daemon serves. Addresses are ZeroMQ endpoints (`tcp://127.0.0.1:7100`)."""

    bind: str
    journal: Path
    policy: str = "trivial"
    solver: str = "cost-scaling"
    solver_options: Mapping[str, Any] = field(default_factory=dict)
    publish: str | None = None
    """Where to publish every round's deltas (a PUB socket), if anywhere."""
    auto_schedule_ms: int | None = None
    """Run a round this often on its own (besides `schedule` requests)."""
    fsync: str = "always"
    snapshot_every: int = 100_000
    """Write a snapshot after this many records."""
    max_message_bytes: int = 1 << 20
    """Larger requests get an INVALID reply; four times as large closes the connection."""
    max_schedule_waiters: int = 1_000
    """`schedule` requests waiting beyond this many get OVERLOADED."""
    max_intake_lag_ms: int = 250
    """Writes get OVERLOADED (with a retry-after) while the request loop has gone this long
    without catching up on its socket (see `SchedulingDaemon._behind_s`)."""
    batch: int = 1_000
    """Requests read per loop turn (then the journal is flushed and replies are sent)."""
    decision_chunk: int = 64
    """A round's decisions applied per loop turn (a round's migrations go in one chunk)."""
    dedup_window: int = DEFAULT_DEDUP_WINDOW
    watch_window: int = DEFAULT_WATCH_WINDOW
    """Journal records kept for `changes` requests."""
    lease_ms: int | None = None
    """Placements not confirmed (`task_started`) within this long return to the queue
    (`leases`); None: placements need no confirmation."""
    curve: CurveServerKeys | None = None


def check_config(config: DaemonConfig) -> None:
    """DaemonError if a daemon cannot serve as `config` says: an endpoint that is none, a policy
    or solver the scheduling process could not build, an address beyond this machine without
    CURVE keys."""
    for endpoint in (config.bind, config.publish):
        # ZeroMQ's transports a daemon serves on; anything else would read as "not
        # loopback" below, which is not what is wrong with it.
        if endpoint is not None and urlsplit(endpoint).scheme not in TRANSPORTS:
            raise DaemonError(
                f"{endpoint!r} is not a ZeroMQ endpoint: use tcp://HOST:PORT or ipc://PATH"
            )
    # The scheduling process builds the policy and the solver: one it cannot build would
    # exit at start, again and again, and never schedule. Checked by name, not built: this
    # process never loads either (`catalog`), which keeps a restart short.
    if (problem := unknown_policy(config.policy)) is not None:
        raise DaemonError(problem)
    if (problem := unknown_solver(config.solver, config.solver_options)) is not None:
        raise DaemonError(problem)
    if ":" in config.solver:  # a third-party class: only importing it can tell
        from firmament_py.solvers.registry import solver_factory

        try:
            solver_factory(config.solver, **config.solver_options)
        except ValueError as error:
            raise DaemonError(str(error)) from error
    if not is_loopback(config.bind) and config.curve is None:
        raise DaemonError(
            f"binding {config.bind} reaches beyond this machine: give CURVE keys "
            "(--curve-keys DIR, made by `firmament-py keys generate`)"
        )
    if config.publish is not None and not is_loopback(config.publish) and not config.curve:
        raise DaemonError(f"publishing on {config.publish} needs CURVE keys too")
