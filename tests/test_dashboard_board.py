"""The dashboard's state (firmament_py/dashboard/board.py), its two drivers' reporters
(daemon_feed.RecordReader over journal-shaped records, sim_feed.SimulationFeed over a real
simulation), the page's address rule and the static report.html."""

from __future__ import annotations

import re

import numpy as np
import pytest
from bokeh.document import Document
from bokeh.document.events import ColumnsPatchedEvent

from firmament_py.dashboard.address import DashboardError, parse_address
from firmament_py.dashboard.board import Board, MachineRow, RoundFacts, _percentiles, _Series
from firmament_py.dashboard.daemon_feed import RecordReader
from firmament_py.dashboard.page import DashboardPage, report_html
from firmament_py.dashboard.sim_feed import SimulationFeed
from firmament_py.sim.runner import SimulationJob, run_job

MS = 1_000  # µs


def a_round(number: int, time: int, algorithm: str = "relaxation") -> RoundFacts:
    phases = {"update": 1.0, "solve": 2.0, "extract": 0.5, "apply": 0.25}
    return RoundFacts(number, time, algorithm, phases, 1.5, 2.0, 0)


def test_latency_runs_from_the_start_of_each_wait_to_the_placement_that_ends_it() -> None:
    board = Board("t")
    board.machines_added([MachineRow("m1", "r1", "p1", 2), MachineRow("m2", "r1", "p1", 2)])
    board.submitted(1, 0)
    board.submitted(2, 10 * MS)
    board.placed(1, "m1", 30 * MS)  # waited 30 ms
    board.placed(2, "m1", 30 * MS)  # waited 20 ms
    board.placed(2, "m2", 40 * MS)  # a migration: no new sample
    board.unplaced(1, 50 * MS)  # preempted: waits again from 50 ms
    board.placed(1, "m2", 55 * MS)  # waited 5 ms
    board.round(a_round(1, 60 * MS))
    frame = board.frame()
    assert sorted(frame.latency_ms.tolist()) == [5.0, 20.0, 30.0]
    assert frame.latency_fraction.tolist() == pytest.approx([1 / 3, 2 / 3, 1.0])
    assert (frame.waiting, frame.running) == (0, 2)
    assert frame.machine_running.tolist() == [0, 2]  # m1, m2
    assert frame.percentiles_ms["p50"].tolist() == [20.0]


def test_a_machine_that_goes_returns_its_tasks_to_the_queue_from_that_moment() -> None:
    board = Board("t")
    board.machines_added([MachineRow("m1", "r1", "p1", 2), MachineRow("m2", "r2", "p1", 2)])
    for task in (1, 2, 3):
        board.submitted(task, 0)
    board.placed(1, "m1", 1 * MS)
    board.placed(2, "m1", 1 * MS)
    board.placed(3, "m2", 1 * MS)
    board.machine_gone("m1", 100 * MS)
    frame = board.frame()
    assert (frame.machines, frame.slots, frame.waiting, frame.running) == (1, 2, 2, 1)
    board.placed(1, "m2", 130 * MS)
    assert sorted(board.frame().latency_ms.tolist()) == [1.0, 1.0, 1.0, 30.0]
    board.ended(1, 140 * MS)
    board.ended(2, 140 * MS)  # a waiting task may end too
    board.ended(99, 140 * MS)  # one the board never saw: nothing happens
    frame = board.frame()
    assert (frame.waiting, frame.running, frame.machine_running.tolist()) == (0, 1, [1])


def test_the_heat_map_groups_machines_by_pod_and_rack_and_counts_columns_within_a_rack() -> None:
    board = Board("t")
    board.machines_added(
        [
            MachineRow("b", "r2", "p1", 1),
            MachineRow("a", "r2", "p1", 1),
            MachineRow("c", "r1", "p2", 1),
            MachineRow("d", "r9", "p0", 1),
        ]
    )
    frame = board.frame()
    assert frame.machine_ids == ["d", "a", "b", "c"]
    assert frame.racks == [("p0", "r9"), ("p1", "r2"), ("p1", "r2"), ("p2", "r1")]
    assert frame.columns.tolist() == [0, 0, 1, 0]
    layout = frame.layout
    board.placed(7, "a", 0)  # a placement is not a new layout
    assert board.frame().layout == layout
    board.machines_added([MachineRow("e", "r1", "p2", 1)])
    assert board.frame().layout != layout


def test_listed_tasks_count_but_give_no_latency_and_replayed_records_change_nothing() -> None:
    board = Board("t")
    board.task_known(1, "m1")
    board.task_known(2, None)
    board.machines_added([MachineRow("m1", "r", "p", 4)])  # listed after the tasks
    board.submitted(1, 0)  # the listing showed it already (a replayed record)
    board.placed(1, "m1", 5 * MS)  # the same placement again
    board.placed(2, "m1", 5 * MS)
    frame = board.frame()
    assert (frame.waiting, frame.running, frame.machine_running.tolist()) == (0, 2, [2])
    assert frame.latency_samples == 0


def test_what_changed_between_the_listings_comes_right_with_the_replayed_records() -> None:
    # Task 1 was listed waiting, then placed on m1 before the machines were listed; task 2 was
    # listed running on m2, which failed before the machines were listed; task 3, preempted
    # between the two task listings, was listed by neither.
    board = Board("t")
    board.task_known(1, None)
    board.task_known(2, "m2")
    board.machines_added([MachineRow("m1", "r", "p", 4)])
    board.placed(1, "m1", 1 * MS)
    board.machine_gone("m2", 2 * MS)
    board.unplaced(3, 3 * MS)
    frame = board.frame()
    assert (frame.waiting, frame.running, frame.machine_running.tolist()) == (2, 1, [1])
    board.placed(2, "m1", 4 * MS)
    board.placed(3, "m1", 4 * MS)
    frame = board.frame()
    assert (frame.waiting, frame.running, frame.machine_running.tolist()) == (0, 3, [3])
    assert sorted(frame.latency_ms.tolist()) == [1.0, 2.0]  # from the loss, the preemption


@pytest.mark.parametrize("values", [[3.0], [1.0, 2.0], [5.0, 1.0, 4.0, 2.0, 3.0], list(range(101))])
def test_a_rounds_percentiles_are_numpys(values: list[float]) -> None:
    assert _percentiles(values) == pytest.approx(tuple(np.percentile(values, (50, 90, 99))))


def test_histories_keep_the_whole_run_in_a_bounded_number_of_points() -> None:
    series = _Series(limit=8)
    for i in range(1_000):
        series.add((float(i),))
    (times,) = series.columns(1)
    assert len(times) < 8
    assert times[-1] == 999.0 and times[0] < 200
    assert np.all(np.diff(times) > 0)


def test_rates_come_from_the_rounds_in_the_last_window() -> None:
    board = Board("t", rate_window_us=10_000_000)
    board.machines_added([MachineRow("m", "r", "p", 100)])
    for second in range(5):
        for i in range(10):
            board.submitted(second * 100 + i, second * 1_000_000)
            board.placed(second * 100 + i, "m", second * 1_000_000 + 1)
        board.round(a_round(second + 1, second * 1_000_000 + 2))
    frame = board.frame()
    # 40 submissions and placements after the first round's, over its 4 seconds
    assert frame.events_per_s == pytest.approx(10.0, rel=1e-3)
    assert frame.decisions_per_s == pytest.approx(10.0, rel=1e-3)
    board.clock(30_000_000)  # nothing happened since: the window holds no round now
    assert (board.frame().events_per_s, board.frame().decisions_per_s) == (0.0, 0.0)


def test_the_daemon_records_tell_the_board_what_they_did() -> None:
    board = Board("t")
    reader = RecordReader(board)
    records = [
        {"seq": 1, "time": 0, "kind": "request", "id": "a", "type": "node_added",
         "body": {"machines": [{"machine_id": "m1", "slots": 2, "rack_id": "r1"},
                               {"machine_id": "m2", "slots": 2, "rack_id": "r1"}]}},
        {"seq": 2, "time": 1_000, "kind": "request", "id": "b", "type": "task_submitted",
         "body": {"task_id": 7, "job_id": "j"}},
        {"seq": 3, "time": 2_000, "kind": "request", "id": "c", "type": "task_submitted",
         "body": {"task_id": 8, "job_id": "j"}},
        {"seq": 4, "time": 5_000, "kind": "round", "round": 1, "ids": [],
         "deltas": [["place", 7, None, "m1"], ["place", 8, None, "m2"]], "cost": 0,
         "algorithm": "race:relaxation", "task_errors": [],
         "timings": {"update_seconds": 0.001, "solve_seconds": 0.003, "extract_seconds": 0.001,
                     "solver_seconds": 0.0025, "algorithm_seconds": 0.002}},
        {"seq": 5, "time": 6_000, "kind": "decisions", "round": 1,
         "deltas": [["place", 7, None, "m1"]], "refused": [], "done": 1},
        {"seq": 6, "time": 7_000, "kind": "decisions", "round": 1,
         "deltas": [["place", 8, None, "m2"]], "refused": [], "done": 2, "round_ms": 9.0},
        {"seq": 7, "time": 8_000, "kind": "decisions", "expired": True,
         "deltas": [["preempt", 8, "m2", None]]},
        {"seq": 8, "time": 9_000, "kind": "request", "id": "d", "type": "node_failed",
         "body": {"machine_id": "m1"}},
        {"seq": 9, "time": 9_500, "kind": "epoch", "id": "e", "manager": "x"},
    ]  # fmt: skip
    for record in records:
        reader.apply(record)
    frame = board.frame()
    assert frame.seq == 9
    assert (frame.machines, frame.waiting, frame.running) == (1, 2, 0)
    assert sorted(frame.latency_ms.tolist()) == [5.0, 5.0]
    (only,) = frame.recent_rounds
    assert only.algorithm == "race:relaxation" and only.algorithm_ms == pytest.approx(2.0)
    assert only.answer_ms == pytest.approx(2.5)
    assert only.phases["apply"] == pytest.approx(4.0)  # 9 ms at the daemon, 5 ms deciding
    assert frame.wins == {"relaxation": 1}


def test_a_simulation_board_agrees_with_the_simulators_own_records() -> None:
    job = SimulationJob(
        policy="load-spreading", solver="cost-scaling", synthetic="small", duration_s=120, seed=3
    )
    board = Board("t", latency_window=1_000_000)
    result = run_job(job, observer=SimulationFeed(board))
    frame = board.frame()
    last = result.rounds[-1]
    assert (frame.waiting, frame.running) == (last.waiting, last.running)
    assert (frame.machines, frame.slots, frame.rounds) == (
        last.machines,
        last.slots,
        len(result.rounds),
    )
    assert frame.queue_waiting.tolist()[-1] == last.waiting
    # Every wait that ended is a sample; here each task waits once (no preemption, no machine
    # lost), so the samples are the simulator's own placement latencies.
    assert all(r.placements <= 1 for r in result.tasks.values())
    latencies = sorted(
        r.placement_latency / MS for r in result.tasks.values() if r.placement_latency is not None
    )
    assert len(latencies) > 100
    assert frame.latency_samples == len(latencies)
    assert frame.latency_p50_ms == pytest.approx(np.quantile(latencies, 0.5))
    assert frame.latency_p99_ms == pytest.approx(np.quantile(latencies, 0.99))
    assert frame.latency_ms[-1] == pytest.approx(latencies[-1])
    running = {m: 0 for m in frame.machine_ids}
    for record in result.tasks.values():
        if record.end_state == "running" and record.machine_id is not None:
            running[record.machine_id] += 1
    assert frame.machine_running.tolist() == [running[m] for m in frame.machine_ids]
    assert frame.seq == result.events


def test_report_html_is_one_file_that_needs_no_network_and_holds_the_numbers() -> None:
    board = Board("a report")
    board.machines_added([MachineRow(f"m{i}", "r", "p", 4) for i in range(3)])
    board.submitted(1, 0)
    board.placed(1, "m2", 7 * MS)
    board.round(a_round(1, 8 * MS))
    page = report_html(board.frame(), title="a report")
    assert not re.search(r"<script[^>]+src=", page) and "<link" not in page
    assert '"m2"' in page and "a report" in page
    assert len(page) > 500_000  # Bokeh's own JavaScript is inside


def test_the_page_patches_only_the_machines_whose_counts_changed() -> None:
    board = Board("t")
    board.machines_added([MachineRow(f"m{i}", "r", "p", 4) for i in range(50)])
    page = DashboardPage()
    page.update(board.frame())
    document = Document()
    document.add_root(page.layout)
    events: list[object] = []
    document.on_change(lambda event: events.append(event))
    board.placed(1, "m7", 0)
    page.update(board.frame())
    machine_events = [e for e in events if getattr(e, "model", None) is page.machines]
    (patched,) = machine_events
    assert isinstance(patched, ColumnsPatchedEvent)
    at = board.frame().machine_ids.index("m7")  # in id (string) order: 47
    assert patched.patches == {"slots": [(at, 4)], "running": [(at, 1)], "used": [(at, 0.25)]}


@pytest.mark.parametrize(
    "address", ["0.0.0.0:8080", "10.1.2.3:80", "[::1]:80", "example.com:80", "::", "localhost"]
)
def test_the_page_listens_only_on_loopback(address: str) -> None:
    with pytest.raises(DashboardError, match=re.escape(repr(address))):
        parse_address(address)


@pytest.mark.parametrize(
    ("address", "expected"),
    [("127.0.0.1:8080", ("127.0.0.1", 8080)), ("localhost:0", ("localhost", 0)),
     ("8081", ("127.0.0.1", 8081)), ("127.0.0.9:1", ("127.0.0.9", 1))],
)  # fmt: skip
def test_loopback_addresses_are_taken(address: str, expected: tuple[str, int]) -> None:
    assert parse_address(address) == expected
