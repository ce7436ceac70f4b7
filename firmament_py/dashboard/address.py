"""Where a dashboard may listen: loopback only (`parse_address`).

The page shows a cluster's machines, tasks and timings to whoever can open it, and has no
login; the daemon refuses to serve beyond loopback without CURVE keys, and the page, which has
no such keys, refuses to serve beyond loopback at all, naming the way to reach it from another
machine (an SSH tunnel). IPv6's loopback is refused too: Bokeh's list of allowed origins for
the page's websocket takes no IPv6 address. This module loads nothing else, so that `serve`
checks the address before it starts the daemon.
"""

from __future__ import annotations

import ipaddress

__all__ = ["DashboardError", "parse_address"]


class DashboardError(ValueError):
    """A dashboard address that cannot be served (not loopback, malformed, port in use)."""


def parse_address(address: str) -> tuple[str, int]:
    """`HOST:PORT` (or `PORT`, meaning 127.0.0.1) as a loopback host and a port; port 0 picks a
    free one. DashboardError names what is wrong."""
    host, _, port_text = address.rpartition(":")
    host = host or "127.0.0.1"
    try:
        port = int(port_text)
    except ValueError:
        raise DashboardError(f"dashboard address {address!r}: expected HOST:PORT") from None
    if not 0 <= port <= 65_535:
        raise DashboardError(f"dashboard address {address!r}: port {port} is out of range")
    try:
        loopback = host == "localhost" or ipaddress.IPv4Address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise DashboardError(
            f"dashboard address {address!r}: the page has no login, so it listens on loopback "
            "only (127.0.0.1 or localhost); from another machine, reach it through an SSH "
            "tunnel (ssh -L PORT:127.0.0.1:PORT host)"
        )
    return host, port
