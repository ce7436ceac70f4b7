"""ZeroMQ endpoints as the daemon and its client read them: which transports a daemon serves
on, which addresses only this machine can reach (binding anything else needs CURVE keys), and
which are IPv6 (a ZeroMQ socket binds or connects to one only with its `IPV6` option set: else
`tcp://[::1]:7100` fails with "No such device")."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

import zmq

__all__ = ["TRANSPORTS", "is_ipv6", "is_loopback", "open_ipv6"]

TRANSPORTS = ("tcp", "ipc", "inproc", "pgm", "epgm", "vmci", "ws", "wss")
"""ZeroMQ's transports, the schemes of the endpoints a daemon may serve on."""


def _tcp_host(endpoint: str) -> str | None:
    """The host part of a `tcp://HOST:PORT` endpoint, without IPv6 brackets; None for another
    transport."""
    parts = urlsplit(endpoint)
    if parts.scheme != "tcp":
        return None
    return parts.netloc.rsplit(":", 1)[0].strip("[]")


def is_loopback(endpoint: str) -> bool:
    """Whether `endpoint` can only be reached from this machine (tcp on a loopback address,
    ipc, inproc)."""
    if urlsplit(endpoint).scheme in ("ipc", "inproc"):
        return True
    host = _tcp_host(endpoint)
    if host is None:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # "*", an interface name, a host name


def is_ipv6(endpoint: str) -> bool:
    """Whether `endpoint` is tcp on an IPv6 address (`tcp://[::1]:7100`)."""
    host = _tcp_host(endpoint)
    if host is None:
        return False
    try:
        return ipaddress.ip_address(host).version == 6
    except ValueError:
        return False


def open_ipv6(socket: zmq.Socket[bytes], endpoint: str) -> None:
    """Let `socket` bind or connect to `endpoint` if it is an IPv6 address (call it first)."""
    if is_ipv6(endpoint):
        socket.setsockopt(zmq.IPV6, 1)
