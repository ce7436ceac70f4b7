"""What a connected dashboard costs the daemon's rounds (issue 37: "measure a round with and
without a connected page at 12,500 machines").

Starts `firmament-py serve` (load-spreading, cost scaling) on a fresh journal, adds `--machines`
machines (40 to a rack, 10 racks to a pod, `--slots` each) and fills `--fill` of the slots,
then, after `--settle` seconds, runs `--rounds` measured rounds, each after `--churn`
completions and as many new submissions, and records each round's `round_ms` (the round's wall
time at the daemon) and the wall time of the `schedule` request at the client.

Three times per repeat, in turn: without a dashboard (`none`); with `--dashboard` but no page
open (`process`: the dashboard's process following the daemon); with a headless Chromium
holding the page open (`browser`, Debian's `chromium` and `chromium-driver`; it is redrawn
every second, on the same two cores here, where a user's browser would be on another machine).
Medians per variant over every measured round of every repeat, and each repeat's median; for
the variants with a dashboard, the share of a core its process took during the measured rounds,
and the browser's (all its processes).

    python bench/dashboard_cost.py                          # 12,500 machines, 3 repeats
    python bench/dashboard_cost.py --machines 1000 --repeats 1 --screenshot docs/images
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket as pysocket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from firmament_py.model.resources import Resources
from firmament_py.service import Client, MachineSpec


def cpu_seconds(marker: str) -> float:
    """User and system CPU seconds of every process whose command line contains `marker`."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for proc in Path("/proc").iterdir():
        try:
            if marker.encode() not in (proc / "cmdline").read_bytes():
                continue
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        total += (int(fields[11]) + int(fields[12])) / ticks
    return total


def free_port() -> int:
    with pysocket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def daemon(journal: Path, port: int, page_port: int | None) -> Iterator[str | None]:
    """`firmament-py serve` until the block ends; yields the page's URL (with a dashboard)."""
    command = [
        sys.executable, "-m", "firmament_py.cli", "serve", "--bind", f"tcp://127.0.0.1:{port}",
        "--journal", str(journal), "--policy", "load-spreading", "--solver", "cost-scaling",
        "--fsync", "never",
    ]  # fmt: skip
    if page_port is not None:
        command += ["--dashboard", f"127.0.0.1:{page_port}"]
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    try:
        url = None
        assert process.stderr is not None
        for line in process.stderr:
            if page_port is None and "daemon on" in line:
                break
            if "dashboard on" in line:
                url = line.split("dashboard on", 1)[1].strip()
                break
        yield url
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=120)


@contextmanager
def browser(url: str | None) -> Iterator[Any]:
    if url is None:
        yield None
        return
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = shutil.which("chromium") or "chromium"
    for argument in ("--headless=new", "--no-sandbox", "--window-size=1400,1250"):
        options.add_argument(argument)
    driver = webdriver.Chrome(options=options, service=Service(shutil.which("chromedriver")))
    try:
        driver.get(url)
        yield driver
    finally:
        driver.quit()


VARIANTS = ("none", "process", "browser")


def run(
    args: argparse.Namespace, variant: str, repeat: int
) -> tuple[list[float], list[float], tuple[float, float]]:
    port = free_port()
    page_port = None if variant == "none" else free_port()
    with (
        tempfile.TemporaryDirectory() as scratch,
        daemon(Path(scratch) / "j", port, page_port) as url,
    ):
        client = Client(f"tcp://127.0.0.1:{port}", timeout=120.0)
        specs = [
            MachineSpec(f"m{i:05d}", Resources(cpu_millicores=32_000), args.slots,
                        f"r{i // 40:04d}", f"p{i // 400:03d}")
            for i in range(args.machines)
        ]  # fmt: skip
        for start in range(0, len(specs), 1_000):
            client.add_machines(specs[start : start + 1_000])
        tasks = int(args.machines * args.slots * args.fill)
        for start in range(0, tasks, 10_000):
            client.batch(
                [
                    ("task_submitted", {"task_id": t, "job_id": f"j{t // 100}"})
                    for t in range(start, min(start + 10_000, tasks))
                ]
            )
        client.schedule()  # the first round places the fill
        with browser(url if variant == "browser" else None) as page:
            # Every variant waits alike: the dashboard follows the set-up's 160,000 records
            # meanwhile, and the page has loaded and draws every second from then on.
            time.sleep(args.settle)
            round_ms, request_ms = [], []
            next_id, done = tasks, 0
            cpu = cpu_seconds("firmament_py.dashboard"), cpu_seconds("chromium")
            loop_started = time.perf_counter()
            for _ in range(args.rounds):
                ends = [("task_completed", {"task_id": done + i}) for i in range(args.churn)]
                news = [
                    ("task_submitted", {"task_id": next_id + i, "job_id": "c"})
                    for i in range(args.churn)
                ]
                client.batch([*ends, *news])
                done, next_id = done + args.churn, next_id + args.churn
                started = time.perf_counter()
                reply = client.request("schedule")
                request_ms.append((time.perf_counter() - started) * 1e3)
                round_ms.append(float(reply["round_ms"]))
            elapsed = time.perf_counter() - loop_started
            cpu = (
                (cpu_seconds("firmament_py.dashboard") - cpu[0]) / elapsed,
                (cpu_seconds("chromium") - cpu[1]) / elapsed,
            )
            if page is not None and args.screenshot is not None and repeat == 0:
                time.sleep(2)
                args.screenshot.mkdir(parents=True, exist_ok=True)
                page.save_screenshot(str(args.screenshot / "dashboard.png"))
        client.close()
    return round_ms, request_ms, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--machines", type=int, default=12_500)
    parser.add_argument("--slots", type=int, default=8)
    parser.add_argument("--fill", type=float, default=0.8)
    parser.add_argument("--churn", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--screenshot", type=Path, help="Save the page of the first run here.")
    parser.add_argument("--settle", type=float, default=15.0, help="Seconds before measuring.")
    parser.add_argument("--variants", default=",".join(VARIANTS), help="Which, comma-separated.")
    args = parser.parse_args()
    print(f"# {args.machines} machines x {args.slots} slots, {args.fill:.0%} full, "
          f"{args.churn} completions + {args.churn} submissions before each of {args.rounds} "
          f"rounds; cpus {os.cpu_count()}; python {sys.version.split()[0]}")  # fmt: skip
    variants = args.variants.split(",")
    results: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in variants}
    for repeat in range(args.repeats):
        for name in variants:
            round_ms, request_ms, (page_cpu, browser_cpu) = run(args, name, repeat)
            results[name][0].extend(round_ms)
            results[name][1].extend(request_ms)
            print(f"repeat {repeat + 1} {name:>7}: round_ms median "
                  f"{statistics.median(round_ms):8.1f}  schedule request median "
                  f"{statistics.median(request_ms):8.1f}  cores: dashboard {page_cpu:5.1%} "
                  f"browser {browser_cpu:5.1%}", flush=True)  # fmt: skip
    for name, (round_ms, request_ms) in results.items():
        print(f"ALL {name:>7}: round_ms median {statistics.median(round_ms):8.1f} "
              f"p90 {statistics.quantiles(round_ms, n=10)[-1]:8.1f}  schedule request median "
              f"{statistics.median(request_ms):8.1f}  ({len(round_ms)} rounds)")  # fmt: skip


if __name__ == "__main__":
    main()
