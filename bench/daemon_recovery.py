"""How long the scheduling daemon takes to serve again after a `kill -9`, on a journal holding
a large cluster (issue 35's target: within 1 s per 100,000 tasks, with no stall after).

Builds a journal of `--machines` machines and `--tasks` tasks (a `--running` share of them
placed), written as the daemon writes it (a snapshot, then `--tail` records in the log after
it, which a restart replays), then `--repeats` times: starts `firmament-py serve` on it, and
measures from the start of the process until its first reply to `status` (`serving`), then
keeps asking for `status` every `--probe-ms` for `--watch` seconds and reports the longest
reply (`stall`: the loop held up after it started serving, by the scheduling process's start
say) and when the scheduling process was up (`worker`: `worker_alive`), then times one round
(`first_round`: the scheduling process builds its graph of the recovered cluster); then kills
the daemon with SIGKILL. Medians over the repeats, and each run.

    python bench/daemon_recovery.py                         # 108,000 tasks on 1,000 machines
    python bench/daemon_recovery.py --tasks 200000 --repeats 3
"""

from __future__ import annotations

import argparse
import os
import signal
import socket as pysocket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import msgpack

from firmament_py.flow.placement import DeltaKind, SchedulingDelta
from firmament_py.service import Client, DaemonTimeout
from firmament_py.service.journal import Journal
from firmament_py.service.protocol import Request
from firmament_py.service.state import ServiceState


def free_port() -> int:
    with pysocket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def build_journal(directory: Path, machines: int, tasks: int, running: float, tail: int) -> int:
    """A journal as a daemon leaves it: a snapshot of `machines` machines and `tasks` tasks
    (`running` of them placed), then `tail` submissions in the log after it. Returns the
    number of records."""
    service = ServiceState()
    journal = Journal(directory, fsync="never")
    journal.recover()
    slots = max(1, -(-int(tasks * running) // machines))
    batch = [
        {
            "machine_id": f"m{i:05d}",
            "capacity": {"cpu_millicores": 64_000},
            "slots": slots,
            "rack_id": f"r{i // 40}",
            "pod_id": f"p{i // 400}",
        }
        for i in range(machines)
    ]
    service.apply_request(Request("machines", "node_added", {"machines": batch}), 1)
    submitted = tasks - tail
    for start in range(0, submitted, 10_000):
        items = [
            {"type": "task_submitted", "body": {"task_id": t, "job_id": f"j{t % 500}"}}
            for t in range(start, min(submitted, start + 10_000))
        ]
        service.apply_batch(Request(f"b{start}", "batch", {"requests": items}), 2)
    placed = [
        SchedulingDelta(DeltaKind.PLACE, t, None, f"m{t % machines:05d}")
        for t in range(int(submitted * running))
    ]
    for start in range(0, len(placed), 5_000):
        service.apply_decisions(placed[start : start + 5_000], 3)
    journal.write_snapshot(service.seq, service.snapshot())  # the records before it: in it
    tail_records = []
    for t in range(submitted, tasks):
        _, record = service.apply_request(
            Request(f"t{t}", "task_submitted", {"task_id": t, "job_id": "tail"}), 4
        )
        assert record is not None
        tail_records.append(record)
    for start in range(0, len(tail_records), 100):  # a frame per turn of the daemon's loop
        chunk = tail_records[start : start + 100]
        journal.append_packed(msgpack.packb(chunk, use_bin_type=True), len(chunk))
    journal.flush()
    journal.close()
    return service.seq


def measure(directory: Path, probe_ms: float, watch: float) -> dict[str, float]:
    port = free_port()
    endpoint = f"tcp://127.0.0.1:{port}"
    started = time.perf_counter()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "firmament_py.cli",
            "serve",
            "--bind",
            endpoint,
            "--journal",
            str(directory),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        with Client(endpoint, timeout=0.2, retries=600) as client:
            client.status()
            serving = time.perf_counter() - started
            longest = 0.0
            worker = float("nan")
            end = time.perf_counter() + watch
            while time.perf_counter() < end:
                asked = time.perf_counter()
                try:
                    status = client.status()
                except DaemonTimeout:
                    status = {}
                longest = max(longest, time.perf_counter() - asked)
                if worker != worker and status.get("worker_alive"):
                    worker = time.perf_counter() - started
                time.sleep(probe_ms / 1000)
            asked = time.perf_counter()
            client.schedule()
            first_round = time.perf_counter() - asked
        return {
            "serving_s": serving,
            "stall_s": longest,
            "worker_s": worker,
            "first_round_s": first_round,
        }
    finally:
        os.kill(process.pid, signal.SIGKILL)
        process.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--machines", type=int, default=1_000)
    parser.add_argument("--tasks", type=int, default=108_000)
    parser.add_argument("--running", type=float, default=0.8)
    parser.add_argument("--tail", type=int, default=5_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--probe-ms", type=float, default=5.0)
    parser.add_argument("--watch", type=float, default=8.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="recovery-") as scratch:
        directory = Path(scratch) / "journal"
        began = time.perf_counter()
        records = build_journal(directory, args.machines, args.tasks, args.running, args.tail)
        print(
            f"journal: {args.tasks:,} tasks ({args.running:.0%} running) on {args.machines:,} "
            f"machines, {records:,} records, {args.tail:,} after the snapshot "
            f"(built in {time.perf_counter() - began:.1f} s)"
        )
        runs = []
        for index in range(args.repeats):
            run = measure(directory, args.probe_ms, args.watch)
            runs.append(run)
            print(
                f"run {index + 1}: serving after {run['serving_s']:.2f} s, longest status "
                f"reply after that {run['stall_s'] * 1000:.0f} ms, scheduling process up at "
                f"{run['worker_s']:.2f} s, first round {run['first_round_s']:.2f} s"
            )
        for key in ("serving_s", "stall_s", "worker_s", "first_round_s"):
            values = [run[key] for run in runs if run[key] == run[key]]
            if values:
                print(f"median {key}: {statistics.median(values):.3f}")


if __name__ == "__main__":
    main()
