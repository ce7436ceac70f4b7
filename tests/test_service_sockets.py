"""Where the daemon listens and who may talk to it (firmament_py/service/daemon.py, client.py,
keys.py): an IPv6 loopback address serves requests and publishes rounds like an IPv4 one, and
a client key authorised while the daemon runs is let in without a restart (issue 35)."""

from __future__ import annotations

import time
from pathlib import Path

import msgpack
import pytest
import zmq

from firmament_py.service import (
    Client,
    CurveClientKeys,
    CurveServerKeys,
    DaemonConfig,
    DaemonTimeout,
)
from firmament_py.service.keys import authorise_client, generate_key_pair

from .test_service_daemon import Running, _free_port, machines


def test_an_ipv6_loopback_address_serves_and_publishes(tmp_path: Path) -> None:
    publish = f"tcp://[::1]:{_free_port()}"
    config = DaemonConfig(bind="tcp://[::1]:*", journal=tmp_path / "j", publish=publish)
    served = Running(config)
    subscriber = zmq.Context.instance().socket(zmq.SUB)
    subscriber.setsockopt(zmq.LINGER, 0)
    subscriber.setsockopt(zmq.IPV6, 1)
    subscriber.setsockopt(zmq.SUBSCRIBE, b"deltas")
    subscriber.connect(publish)
    try:
        assert served.endpoint.startswith("tcp://[::1]:")
        with Client(served.endpoint, timeout=20) as client:
            client.add_machines(machines(1))
            client.submit_task(1, "j")
            # A subscription reaches the publisher some time after the connection: rounds are
            # asked for until one is seen (each places the task submitted before it).
            deadline = time.monotonic() + 30
            while not subscriber.poll(200):
                assert time.monotonic() < deadline, "nothing published on [::1]"
                client.submit_task(client.status()["tasks"] + 1, "j")
                client.schedule()
        _topic, payload = subscriber.recv_multipart()
        assert msgpack.unpackb(payload, raw=False)["deltas"]
    finally:
        subscriber.close()
        served.stop()


def test_ipv6_endpoints_are_told_apart() -> None:
    from firmament_py.service.endpoints import is_ipv6, is_loopback

    assert is_ipv6("tcp://[::1]:7100") and is_loopback("tcp://[::1]:7100")
    assert is_ipv6("tcp://[2001:db8::1]:*") and not is_loopback("tcp://[2001:db8::1]:*")
    for endpoint in ("tcp://127.0.0.1:7100", "tcp://*:7100", "tcp://localhost:1", "ipc:///x"):
        assert not is_ipv6(endpoint), endpoint


def test_a_client_key_authorised_while_the_daemon_runs_is_let_in(tmp_path: Path) -> None:
    """`keys authorise` copies a key into `clients/`: the running daemon allows it within a
    second (it used to take a restart), and forgets a key removed from there likewise."""
    server_dir = tmp_path / "server"
    generate_key_pair(server_dir, "server")
    alice_public, _ = generate_key_pair(tmp_path / "alice", "alice")
    authorise_client(server_dir, alice_public)
    bob_public, bob_secret = generate_key_pair(tmp_path / "bob", "bob")
    config = DaemonConfig(
        bind="tcp://127.0.0.1:*", journal=tmp_path / "j", curve=CurveServerKeys.load(server_dir)
    )
    served = Running(config)
    bob = CurveClientKeys.load(bob_secret, server_dir / "server.key")
    try:
        with (
            Client(served.endpoint, curve=bob, timeout=0.3, retries=0) as client,
            pytest.raises(DaemonTimeout),
        ):
            client.status()  # not allowed yet: no reply of any kind
        # The daemon looks at `clients/` once a second; a connection refused before that is
        # not tried again by ZeroMQ, so each attempt is a new connection.
        authorise_client(server_dir, bob_public)
        assert _comes_to_be(served.endpoint, bob, served=True)
        (server_dir / "clients" / "bob.key").unlink()
        assert _comes_to_be(served.endpoint, bob, served=False)
    finally:
        served.stop()


def _comes_to_be(endpoint: str, keys: CurveClientKeys, *, served: bool) -> bool:
    """Whether a new connection with `keys` comes to be `served` (or not) within 30 s, a new
    connection at a time."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with Client(endpoint, curve=keys, timeout=0.3, retries=0) as client:
            try:
                answered = client.status()["protocol"] == 1
            except DaemonTimeout:
                answered = False
        if answered == served:
            return True
    return False
