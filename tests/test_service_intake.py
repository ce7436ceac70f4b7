"""Backpressure on the daemon's intake (firmament_py/service/daemon.py, client.py): while the
request loop cannot empty its socket, writes are refused `overloaded` with a retry-after and
change nothing, reads are still answered, and the client sends a refused request again (the
same id) after the wait it was told."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import msgpack
import zmq

from firmament_py.service import Client, DaemonConfig, SchedulingDaemon
from firmament_py.service.protocol import Status, encode_reply, encode_request


def test_writes_are_refused_while_the_loop_is_behind_its_socket(tmp_path: Path) -> None:
    """One request per turn (batch 1) and no lag allowed: a turn that leaves requests in the
    socket puts the loop behind, so the writes of the next turns are refused until a turn
    empties it; a read in between is answered."""
    daemon = SchedulingDaemon(
        DaemonConfig(bind="tcp://127.0.0.1:*", journal=tmp_path / "j", batch=1, max_intake_lag_ms=0)
    )
    dealer: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.DEALER)
    dealer.setsockopt(zmq.LINGER, 0)
    dealer.connect(daemon.endpoint)
    try:
        machine = {"machine_id": "m", "capacity": {"cpu_millicores": 1000}, "slots": 4}
        dealer.send(encode_request("a", "node_added", {"machines": [machine]}))
        dealer.send(encode_request("b", "task_submitted", {"task_id": 1, "job_id": "j"}))
        dealer.send(encode_request("c", "status"))
        dealer.send(encode_request("d", "task_submitted", {"task_id": 2, "job_id": "j"}))
        dealer.send(encode_request("e", "task_started", {"task_id": 1}))
        time.sleep(0.5)  # all five wait in the daemon's socket
        replies: dict[str, dict[str, Any]] = {}
        deadline = time.monotonic() + 10
        while len(replies) < 5 and time.monotonic() < deadline:
            daemon.serve_once(10)
            while dealer.poll(0):
                reply = msgpack.unpackb(dealer.recv(), raw=False)
                replies[reply["id"]] = reply
        assert replies["a"]["status"] == Status.OK.value  # the loop was not behind yet
        for refused in ("b", "d"):
            assert replies[refused]["status"] == Status.OVERLOADED.value
            assert replies[refused]["body"] == {"retry_after_ms": 0}
        # A confirmation is never refused for load (a lease may be running out): this one is
        # checked, and refused for what it says (task 1 was never submitted).
        assert replies["e"]["status"] == Status.NOT_FOUND.value
        assert replies["c"]["status"] == Status.OK.value
        assert replies["c"]["body"]["overloaded"] == 1  # b, before it
        assert daemon.service.cluster.tasks == {}
        for _ in range(3):
            daemon.serve_once(10)  # a turn that empties the socket: caught up
        dealer.send(encode_request("b", "task_submitted", {"task_id": 1, "job_id": "j"}))
        while not dealer.poll(10):
            daemon.serve_once(10)
        assert msgpack.unpackb(dealer.recv(), raw=False)["status"] == Status.OK.value
        assert list(daemon.service.cluster.tasks) == [1]
    finally:
        dealer.close()
        daemon.close()


def test_the_client_sends_an_overloaded_request_again_after_the_wait() -> None:
    """A stand-in daemon refuses the first attempt OVERLOADED (retry after 200 ms) and applies
    the second: the client returns the second's answer, and both attempts carried one id."""
    router: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.ROUTER)
    router.setsockopt(zmq.LINGER, 0)
    port = router.bind_to_random_port("tcp://127.0.0.1")
    seen: list[tuple[str, float]] = []

    def serve() -> None:
        for answer in ("overloaded", "ok"):
            identity, frame = router.recv_multipart()
            request = msgpack.unpackb(frame, raw=False)
            seen.append((request["id"], time.monotonic()))
            if answer == "overloaded":
                reply = encode_reply(
                    request["id"], Status.OVERLOADED, "busy", {"retry_after_ms": 200}
                )
            else:
                reply = encode_reply(request["id"], Status.OK, "", {"seq": 7})
            router.send_multipart([identity, reply])

    server = threading.Thread(target=serve)
    server.start()
    try:
        with Client(f"tcp://127.0.0.1:{port}", timeout=5, retries=2) as client:
            assert client.submit_task(1, "j") == 7
    finally:
        server.join(10)
        router.close()
    (first, at_first), (second, at_second) = seen
    assert first == second
    assert at_second - at_first >= 0.2
