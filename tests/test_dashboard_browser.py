"""The dashboard in a real browser (headless Chromium, tests/browser.py): `firmament-py serve
--dashboard` beside a daemon that a client drives, `simulate --dashboard` and its
report.html. The page's numbers are read from what the browser holds (Bokeh's models by name)
and checked against the daemon's own `status` and listings, and the simulator's summary."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from firmament_py.model.resources import Resources
from firmament_py.service import Client, MachineSpec

from .browser import bokeh_column, bokeh_text, chromium, wait_until

MACHINES = 24  # 4 racks of 6 in 2 pods
SLOTS = 4


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def summary_number(text: str | None, field: str) -> int | None:
    """A whole number the page's summary shows for `field` (None: not shown yet)."""
    found = re.search(rf'data-field="{re.escape(field)}">([\d,]+)', text or "")
    return int(found.group(1).replace(",", "")) if found else None


def firmament(*arguments: str, tmp: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "firmament_py.cli", *arguments],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1", "TMPDIR": str(tmp)},
    )


class Said:
    """What a process writes to standard error, line by line, read on a thread of its own so
    that waiting for a line can time out."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        assert process.stderr is not None
        self.lines: list[str] = []
        self._stream = process.stderr
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self._stream:
            self.lines.append(line)

    def wait_for(self, pattern: str, timeout: float = 120.0) -> re.Match[str]:
        """The first line that matches `pattern`; AssertionError (with every line) after
        `timeout` seconds without one."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(self.lines):
                if found := re.search(pattern, line):
                    return found
            time.sleep(0.05)
        raise AssertionError(f"no line matched {pattern!r}:\n{self}")

    def __str__(self) -> str:
        return "".join(self.lines)


def drive(client: Client) -> None:
    """A small cluster: machines in racks and pods, tasks placed over a few rounds, some of
    them finished, some machine lost (its tasks wait again, then are placed again)."""
    client.add_machines(
        MachineSpec(
            f"m{i:02d}", Resources(cpu_millicores=4_000), SLOTS, f"rack{i // 6}", f"pod{i // 12}"
        )
        for i in range(MACHINES)
    )
    for task in range(70):
        client.submit_task(task, f"job{task // 10}")
        if task % 10 == 9:
            client.schedule()
    for task in range(0, 70, 4):
        client.complete_task(task)
    client.fail_machine("m03")
    client.schedule()
    for task in range(70, 80):
        client.submit_task(task, "late")
    client.schedule()


def test_the_daemons_dashboard_shows_its_real_numbers(tmp_path: Path) -> None:
    port, page_port = free_port(), free_port()
    daemon = firmament(
        "serve",
        "--bind",
        f"tcp://127.0.0.1:{port}",
        "--journal",
        str(tmp_path / "journal"),
        "--policy",
        "load-spreading",
        "--dashboard",
        f"127.0.0.1:{page_port}",
        tmp=tmp_path,
    )
    said = Said(daemon)
    try:
        url = said.wait_for(r"dashboard on (http://\S+)").group(1)
        assert url == f"http://127.0.0.1:{page_port}/"
        # Driven only once the page follows, so that every wait it sees began after it listed.
        said.wait_for(r"dashboard: following the daemon from record 0")
        with Client(f"tcp://127.0.0.1:{port}", timeout=5.0) as client:
            drive(client)
            status = client.status()
            listed = {m.machine_id: m.running for m in client.machines()}
            placed = sum(  # every placement the daemon applied ended a wait
                1
                for change in _all_changes(client)
                if change["kind"] == "decisions"
                for delta in change["deltas"]
                if delta[0] == "place"
            )
        assert status["running"] > 0 and status["waiting"] >= 0
        with chromium() as browser:
            browser.get(url)

            wait_until(
                lambda: (
                    summary_number(bokeh_text(browser, "summary"), "journal record")
                    == status["seq"]
                ),
                what="the page to follow the daemon to its last record",
            )
            running = bokeh_column(browser, "machines", "running")
            assert running is not None and sum(running) == status["running"]
            machines = bokeh_column(browser, "machines", "machine")
            assert machines is not None
            assert dict(zip(machines, running, strict=True)) == listed
            assert sorted(machines) == sorted(listed) and len(machines) == MACHINES - 1
            assert bokeh_column(browser, "machines", "slots") == [SLOTS] * len(machines)
            racks = bokeh_column(browser, "machines", "rack")
            assert racks is not None and {tuple(r) for r in racks} == {
                (f"pod{i // 12}", f"rack{i // 6}") for i in range(MACHINES)
            }
            fractions = wait_until(
                lambda: bokeh_column(browser, "latency_cdf", "fraction"),
                what="the latency CDF",
            )
            assert fractions[-1] == pytest.approx(1.0) and len(fractions) == placed
            summary = bokeh_text(browser, "summary")
            for field in ("waiting", "running"):
                assert summary_number(summary, field) == status[field], field
            # every round decided something, and the page saw each from its start
            assert summary_number(summary, "rounds seen") == status["rounds"]
            assert summary_number(summary, "journal record") == status["seq"]
            assert "load-spreading" in (summary or "")
            phases = bokeh_column(browser, "rounds", "solve")
            assert phases is not None and len(phases) == status["rounds"]
            browser.save_screenshot(str(tmp_path / "dashboard.png"))
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=60)
    assert daemon.returncode == 0, str(said)


def _all_changes(client: Client) -> list[dict[str, Any]]:
    changes: list[dict[str, Any]] = []
    after = 0
    while True:
        page = client.changes(after, limit=10_000)
        changes += page.changes
        if not page.more:
            return changes
        after = page.changes[-1]["seq"]


def test_a_simulations_dashboard_and_report_show_the_runs_numbers(tmp_path: Path) -> None:
    page_port = free_port()
    out = tmp_path / "run"
    run = firmament(
        "simulate", "--synthetic", "small", "--duration", "60", "--out", str(out), "--quiet",
        "--dashboard", f"127.0.0.1:{page_port}", "--hold", tmp=tmp_path,
    )  # fmt: skip
    said = Said(run)
    try:
        url = said.wait_for(r"dashboard on (http://\S+)").group(1)
        said.wait_for(r"the run is over", timeout=300)
        rounds = (out / "rounds.csv").read_text().splitlines()
        header, last = rounds[0].split(","), rounds[-1].split(",")
        final = dict(zip(header, last, strict=True))
        with chromium() as browser:
            for address in (url, (out / "report.html").as_uri()):
                browser.get(address)
                running = wait_until(
                    lambda: bokeh_column(browser, "machines", "running"),
                    what=f"the heat map of {address}",
                )
                assert sum(running) == int(final["running"])
                assert len(running) == int(final["machines"])
                summary = bokeh_text(browser, "summary")
                assert summary_number(summary, "waiting") == int(final["waiting"])
                assert summary_number(summary, "rounds seen") == len(rounds) - 1
                assert bokeh_column(browser, "latency_cdf", "fraction")
            browser.save_screenshot(str(tmp_path / "report.png"))
    finally:
        run.send_signal(signal.SIGTERM)  # (SIGINT may be ignored: a background job's)
        run.wait(timeout=60)
    assert run.returncode == 0, str(said)
    assert json.loads((out / "summary.json").read_text())


def test_a_dashboard_beyond_loopback_is_refused_before_anything_starts(tmp_path: Path) -> None:
    for command in (
        ["serve", "--journal", str(tmp_path / "j"), "--dashboard", "0.0.0.0:8000"],
        ["simulate", "--out", str(tmp_path / "s"), "--dashboard", "192.168.1.5:80"],
    ):
        done = subprocess.run(
            [sys.executable, "-m", "firmament_py.cli", *command],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 2
        assert "loopback" in done.stderr and "--dashboard" in done.stderr
    assert not (tmp_path / "j").exists() and not (tmp_path / "s" / "rounds.csv").exists()


def test_beside_a_daemon_with_curve_keys_the_page_connects_with_its_own_key(
    tmp_path: Path,
) -> None:
    keys = tmp_path / "keys"
    for command in (
        ["keys", "generate", str(keys)],
        ["keys", "generate", str(keys), "--name", "manager"],
        ["keys", "authorise", str(keys), str(keys / "manager.key")],
    ):
        subprocess.run([sys.executable, "-m", "firmament_py.cli", *command], check=True)
    serve = ["serve", "--journal", str(tmp_path / "j"), "--curve-keys", str(keys),
             "--bind", f"tcp://127.0.0.1:{free_port()}", "--dashboard", "127.0.0.1:0"]  # fmt: skip
    refused = subprocess.run(
        [sys.executable, "-m", "firmament_py.cli", *serve],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert refused.returncode == 1
    assert f"keys generate {keys} --name dashboard" in " ".join(refused.stderr.split())
    for command in (
        ["keys", "generate", str(keys), "--name", "dashboard"],
        ["keys", "authorise", str(keys), str(keys / "dashboard.key")],
    ):
        subprocess.run([sys.executable, "-m", "firmament_py.cli", *command], check=True)
    daemon = firmament(*serve, tmp=tmp_path)
    said = Said(daemon)
    try:
        url = said.wait_for(r"dashboard on (http://\S+)").group(1)
        said.wait_for(r"dashboard: following the daemon")  # its key let it in
        with urllib.request.urlopen(url, timeout=30) as page:
            assert page.status == 200 and b"Bokeh" in page.read()
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=60)
    assert daemon.returncode == 0, str(said)
