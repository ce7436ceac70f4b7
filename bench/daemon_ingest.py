"""Sustained ingest through the scheduling daemon: events per second and request latency while
rounds run (issue 6's benchmark; results in docs/benchmarks.md).

Starts `firmament-py serve` on loopback with a round every `--round-ms` (auto-schedule), adds
`--machines` machines, then runs `--clients` client processes for `--seconds`. Each client
sends a stream of task events: it submits a task, and once it has `--live` tasks of its own,
removes its oldest one with each new submission, so the cluster stays near `clients x live`
tasks while rounds keep placing the new ones. A client keeps up to `--window` messages awaiting
replies (1: one at a time; more: a manager sending a burst, as `Client.pipeline` does), each
message one event or, with `--batch N`, a `batch` of N events (`Client.batch`). Every message's
latency is measured on the client (send to reply). With `--rate` the clients are paced
instead: together they offer that many events per second, and a message's latency runs from
when it was due, so a daemon that falls behind is charged for it. The clock starts when every
client process has started up and connected (processes still importing on the same CPUs
would otherwise load the first second of the run, and a late starter would run on alone at
its end). Reported: events per second (all clients), message latency p50 / p99 / max, the
rounds the daemon ran (`rounds_run`, from its status), and those that placed something
(`rounds`, from the published deltas) with the median and p99 of their wall time at the daemon
(`round_ms`: catching up on the records, deciding, applying).
A round places nothing when every task it placed was removed before its answer came back,
which happens when a client's tasks live shorter than a round takes. Medians over
`--repeats` runs; first, the request path's cost alone (no sockets). `flight` latencies run from
the send instead of the due time. `--pin` (Linux, two CPUs or more) gives the daemon's request
loop CPU 0 to itself and puts its scheduling process, the clients and this process on the other
CPUs: the request path's latency where it never waits for a core (on two CPUs the clients then
share one with the scheduling process and read their replies late, which `flight` includes).

    python bench/daemon_ingest.py                       # 1,000 machines, 8 clients, 20 s
    python bench/daemon_ingest.py --window 16            # pipelined
    python bench/daemon_ingest.py --batch 100            # batches of 100 events
    python bench/daemon_ingest.py --batch 10 --rate 20000 --window 4   # offered 20,000/s
    python bench/daemon_ingest.py --batch 20 --rate 20000 --window 4 --pin
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import socket as pysocket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

import msgpack
import numpy as np
import zmq

from firmament_py.model.resources import Resources
from firmament_py.service import Client, MachineSpec, Status
from firmament_py.service.journal import Journal
from firmament_py.service.protocol import (
    decode_reply,
    decode_request,
    encode_reply,
    encode_request,
)
from firmament_py.service.state import ServiceState


def free_port() -> int:
    with pysocket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PacedClient:
    """One client on its own DEALER socket: submits tasks and, once it holds `live` of its
    own, removes its oldest one with each new submission; up to `window` messages await
    replies, each one event or a `batch` of `batch` events.

    With `rate` 0 it sends as fast as replies come back (a closed loop: the daemon is
    saturated, and latency is measured from the send). With a `rate` (events per second, this
    client's share) message k is due at `k * batch / rate` seconds after the start, and its
    latency is measured from that due time, not from when it was sent: a daemon that falls
    behind, so that the window is full when a message is due, is charged for the wait (no
    coordinated omission)."""

    def __init__(
        self, endpoint: str, index: int, live: int, window: int, batch: int, rate: float
    ) -> None:
        self.sock: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.connect(endpoint)
        self.index, self.live, self.window, self.batch = index, live, window, batch
        self.interval = batch / rate if rate > 0 else 0.0
        self.latencies: list[float] = []
        self.in_flight: list[float] = []
        self.events = 0
        self.failed = 0
        self.sent: dict[str, tuple[float, float]] = {}  # request id -> (due, sent)
        self.next_id = index << 40
        self.own: list[int] = []
        self.counter = 0
        self.due = 0.0

    def send_due(self, deadline: float) -> None:
        """Send every message that is due, while the window has room."""
        while len(self.sent) < self.window:
            now = time.perf_counter()
            if now >= deadline or (self.interval and self.due > now):
                return
            items: list[dict[str, Any]] = []
            for _ in range(self.batch):
                if len(self.own) >= self.live:
                    items.append({"type": "task_removed", "body": {"task_id": self.own.pop(0)}})
                else:
                    body = {
                        "task_id": self.next_id,
                        "job_id": f"c{self.index}-j{self.next_id % 50}",
                    }
                    items.append({"type": "task_submitted", "body": body})
                    self.own.append(self.next_id)
                    self.next_id += 1
            self.counter += 1
            rid = f"{self.index}-{self.counter}"
            self.sent[rid] = (self.due if self.interval else now, now)
            self.due += self.interval
            if self.batch == 1:
                self.sock.send(encode_request(rid, items[0]["type"], items[0]["body"]))
            else:
                self.sock.send(encode_request(rid, "batch", {"requests": items}))

    def wake_at(self, deadline: float) -> float:
        """When this client next has something to send (infinity: only replies to await)."""
        if self.interval and len(self.sent) < self.window and self.due < deadline:
            return self.due
        if not self.interval and len(self.sent) < self.window and time.perf_counter() < deadline:
            return 0.0
        return float("inf")

    def receive(self) -> None:
        """Take every reply waiting on the socket."""
        while True:
            try:
                frame = self.sock.recv(zmq.NOBLOCK)
            except zmq.Again:
                return
            rid, status, _, reply = decode_reply(frame)
            answered = time.perf_counter()
            due_at, sent_at = self.sent.pop(rid)
            self.latencies.append(answered - due_at)
            self.in_flight.append(answered - sent_at)
            self.events += self.batch
            if self.batch == 1:
                self.failed += status is not Status.OK
            else:
                self.failed += sum(answer[0] != "ok" for answer in reply["answers"])


def clients_main(
    endpoint: str,
    indices: list[int],
    clients: int,
    seconds: float,
    live: int,
    window: int,
    batch: int,
    rate: float,
    ready: Any,
    go: Any,
    start_at: Any,
    pin: bool,
    out: Any,
) -> None:
    """Run the clients `indices` (of `clients`) in this process, all in one poll loop, from
    the shared start time to `seconds` after it; send back every message's latency, its time
    in flight (send to reply), the events sent, and how many events were not OK. `rate` is
    each client's share; paced clients take turns (client i starts i / clients of an interval
    late) rather than all sending at once.

    This process puts its pid on the `ready` queue once its imports are done and its sockets
    connect; the parent sets `start_at` (a shared `time.time()` value) and then the `go`
    event only when every client process is ready, so that no client is still starting up
    (importing on the same CPUs) while the others are measured."""
    if pin:
        os.sched_setaffinity(0, _other_cpus())
    group = [PacedClient(endpoint, i, live, window, batch, rate) for i in indices]
    poller = zmq.Poller()
    for client in group:
        poller.register(client.sock, zmq.POLLIN)
    by_socket = {client.sock: client for client in group}
    ready.put(os.getpid())
    go.wait()
    began = time.perf_counter() + (start_at.value - time.time())  # the same instant for all
    while time.perf_counter() < began:
        time.sleep(0.0005)
    deadline = began + seconds
    for client in group:
        client.due = began + client.interval * client.index / clients
    while True:
        for client in group:
            client.send_due(deadline)
        if time.perf_counter() >= deadline and not any(c.sent for c in group):
            break
        wake = min(client.wake_at(deadline) for client in group)
        if wake == float("inf") and not any(c.sent for c in group):  # paced: the end is near
            time.sleep(max(0.0, deadline - time.perf_counter()))
            continue
        timeout_ms = (
            10_000 if wake == float("inf") else max(0, int((wake - time.perf_counter()) * 1000) + 1)
        )
        ready = dict(poller.poll(timeout_ms))
        if not ready and timeout_ms == 10_000:
            raise RuntimeError(f"clients {indices}: no reply in 10 s")
        for sock in ready:
            by_socket[sock].receive()
    for client in group:
        client.sock.close()
    out.put(
        (
            [x for c in group for x in c.latencies],
            [x for c in group for x in c.in_flight],
            sum(c.events for c in group),
            sum(c.failed for c in group),
        )
    )


def request_path_us(machines: int, batch: int = 1, events: int = 20_000) -> float:
    """Microseconds per task submission through the daemon's request path alone, in this
    process and without sockets: decode and check the frame (one event, or a `batch` of
    `batch`), apply it to the state, journal the records (written, not fsynced), encode the
    reply."""
    service = ServiceState()
    added = [
        {"machine_id": f"m{i:05d}", "capacity": {"cpu_millicores": 16000}, "slots": 12}
        for i in range(machines)
    ]
    service.apply_request(
        decode_request(encode_request("add", "node_added", {"machines": added})), 1
    )
    bodies = [{"task_id": i, "job_id": f"j{i % 50}"} for i in range(events)]
    if batch == 1:
        frames = [encode_request(f"r{i}", "task_submitted", b) for i, b in enumerate(bodies)]
    else:
        frames = [
            encode_request(
                f"b{start}",
                "batch",
                {
                    "requests": [
                        {"type": "task_submitted", "body": b} for b in bodies[start:][:batch]
                    ]
                },
            )
            for start in range(0, events, batch)
        ]
    with tempfile.TemporaryDirectory() as directory:
        journal = Journal(directory, fsync="never")
        journal.recover()
        began = time.perf_counter()
        for frame in frames:
            request = decode_request(frame)
            if request.type == "batch":
                reply, records = service.apply_batch(request, service.clock(2))
            else:
                reply, record = service.apply_request(request, service.clock(2))
                records = [] if record is None else [record]
            payload = msgpack.packb(records, use_bin_type=True)
            journal.append_packed(payload, len(records))
            encode_reply(request.request_id, reply.status, reply.reason, reply.body)
        journal.flush()
        elapsed = time.perf_counter() - began
        journal.close()
    return elapsed / events * 1e6


def client_processes(args: argparse.Namespace) -> int:
    """How many processes run the clients (`--processes`, 0 meaning one per client)."""
    return max(1, min(int(args.processes) or int(args.clients), int(args.clients)))


def _other_cpus() -> set[int]:
    """Every CPU but CPU 0, which `--pin` leaves to the daemon's request loop."""
    return set(range(1, os.cpu_count() or 2))


def _children(pid: int) -> list[int]:
    """The child processes of `pid` (Linux: /proc)."""
    found: list[int] = []
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as f:
            found.extend(int(child) for child in f.read().split())
    return found


def run_clients(args: argparse.Namespace, endpoint: str, workers: list[Any]) -> list[Any]:
    """Start the client processes (appended to `workers`, for the caller to clean up), start
    their clock once all of them are up, and return each process's results when it is done."""
    context = multiprocessing.get_context("spawn")
    out, ready, go = context.Queue(), context.Queue(), context.Event()
    start_at = context.Value("d", 0.0)
    processes = client_processes(args)
    for p in range(processes):
        worker = context.Process(
            target=clients_main,
            args=(
                endpoint,
                list(range(p, args.clients, processes)),
                args.clients,
                args.seconds,
                args.live,
                args.window,
                args.batch,
                args.rate / args.clients,
                ready,
                go,
                start_at,
                args.pin,
                out,
            ),
        )
        workers.append(worker)
        worker.start()
    for _ in workers:
        ready.get(timeout=120)  # a client that cannot start fails the run here
    start_at.value = time.time() + 0.5
    go.set()
    answers = [out.get() for _ in workers]
    for worker in workers:
        worker.join()
    return answers


def run_once(args: argparse.Namespace) -> dict[str, float]:
    port, pub = free_port(), free_port()
    endpoint = f"tcp://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory() as journal:
        daemon = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "firmament_py.cli",
                "serve",
                "--bind",
                endpoint,
                "--journal",
                journal,
                "--policy",
                args.policy,
                "--fsync",
                args.fsync,
                "--auto-schedule-ms",
                str(args.round_ms),
                "--publish",
                f"tcp://127.0.0.1:{pub}",
                "--decision-chunk",
                str(args.decision_chunk),
                "--snapshot-every",
                str(args.snapshot_every),
            ],
            stderr=subprocess.DEVNULL,
        )
        if args.pin:  # before it starts its scheduling process, which inherits CPU 0
            os.sched_setaffinity(daemon.pid, {0})
        try:
            with Client(endpoint, timeout=1.0, retries=60) as client:
                rounds_before = client.status()["rounds"]
                batch = [
                    MachineSpec(f"m{i:05d}", Resources(cpu_millicores=16000), 12, f"r{i // 48}")
                    for i in range(args.machines)
                ]
                client.add_machines(batch)
            if args.pin:  # the daemon serves: its children (the scheduling process) move
                os.sched_setaffinity(0, _other_cpus())
                for child in _children(daemon.pid):
                    os.sched_setaffinity(child, _other_cpus())
            rounds: list[float] = []
            stop = threading.Event()

            def listen() -> None:
                sub: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.SUB)
                sub.setsockopt(zmq.SUBSCRIBE, b"deltas")
                sub.connect(f"tcp://127.0.0.1:{pub}")
                while not stop.is_set():
                    if sub.poll(200):
                        _, payload = sub.recv_multipart()
                        body = msgpack.unpackb(payload, raw=False)
                        rounds.append(float(body["round_ms"]) / 1000)
                sub.close(linger=0)

            listener = threading.Thread(target=listen)
            listener.start()
            workers: list[Any] = []
            try:
                answers = run_clients(args, endpoint, workers)
            finally:  # a client that died, or an interrupt: nothing is left behind
                stop.set()
                for worker in workers:
                    if worker.is_alive():
                        worker.terminate()
                listener.join()
            latencies = np.concatenate([np.array(lat) for lat, _, _, _ in answers])
            in_flight = np.concatenate([np.array(flight) for _, flight, _, _ in answers])
            events = sum(e for _, _, e, _ in answers)
            failed = sum(f for _, _, _, f in answers)
            with Client(endpoint, timeout=5.0) as client:
                rounds_run = client.status()["rounds"] - rounds_before
        finally:
            daemon.terminate()
            daemon.wait(30)
    return {
        "events_per_s": events / args.seconds,
        "failed": float(failed),
        "p50_ms": float(np.percentile(latencies, 50) * 1e3),
        "p99_ms": float(np.percentile(latencies, 99) * 1e3),
        "max_ms": float(latencies.max() * 1e3),
        # Paced runs: how much of the tail is the message waiting to be sent (a client late,
        # or its window full) rather than in flight.
        "flight_p50_ms": float(np.percentile(in_flight, 50) * 1e3),
        "flight_p99_ms": float(np.percentile(in_flight, 99) * 1e3),
        "rounds_run": float(rounds_run),
        "rounds": float(len(rounds)),
        "round_p50_ms": float(np.percentile(rounds, 50) * 1e3) if rounds else float("nan"),
        "round_p99_ms": float(np.percentile(rounds, 99) * 1e3) if rounds else float("nan"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--machines", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument(
        "--processes",
        type=int,
        default=0,
        help="client processes the clients are spread over, each running its share in one "
        "poll loop (0: a process per client)",
    )
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--live", type=int, default=500, help="tasks each client keeps")
    parser.add_argument("--round-ms", type=int, default=100)
    parser.add_argument(
        "--window", type=int, default=1, help="messages each client keeps awaiting replies"
    )
    parser.add_argument("--batch", type=int, default=1, help="events per message (a `batch`)")
    parser.add_argument(
        "--rate",
        type=float,
        default=0.0,
        help="offered events per second, all clients together (0: as fast as replies come)",
    )
    parser.add_argument("--policy", default="trivial")
    parser.add_argument(
        "--pin",
        action="store_true",
        help="the daemon's request loop alone on CPU 0, everything else on the others (Linux)",
    )
    parser.add_argument(
        "--decision-chunk", type=int, default=64, help="the daemon's --decision-chunk"
    )
    parser.add_argument("--fsync", default="always", choices=("always", "interval", "never"))
    parser.add_argument(
        "--snapshot-every", type=int, default=100_000, help="the daemon's records between snapshots"
    )
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    costs = [request_path_us(args.machines, args.batch) for _ in range(3)]
    print(f"request path alone: {statistics.median(costs):.1f} us per event (median of 3)")
    runs = []
    for repeat in range(args.repeats):
        result = run_once(args)
        runs.append(result)
        print(f"run {repeat + 1}: " + ", ".join(f"{k} {v:,.2f}" for k, v in result.items()))
    pace = f"offered {args.rate:,.0f} events/s" if args.rate else "unpaced"
    print(
        f"median of {len(runs)} ({args.machines} machines, {args.clients} clients "
        f"in {client_processes(args)} processes, "
        f"window {args.window}, batch {args.batch}, {pace}, round every {args.round_ms} ms, "
        f"fsync {args.fsync}, policy {args.policy}{', pinned' if args.pin else ''}):"
    )
    for key in runs[0]:
        print(f"  {key:>14}: {statistics.median(r[key] for r in runs):,.2f}")


if __name__ == "__main__":
    main()
