"""Where the daemon listens and who may talk to it (firmament_py/service/daemon.py, client.py,
keys.py): an IPv6 loopback address serves requests and publishes rounds like an IPv4 one, and
a client key authorised while the daemon runs is let in without a restart (issue 35)."""

from __future__ import annotations

import time
from pathlib import Path

import msgpack
import zmq

from firmament_py.service import Client, DaemonConfig

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
