"""Leases on placements (firmament_py/service/leases.py and the daemon's `--lease-ms`): a
placement not confirmed (`task_started`) within the lease returns the task to the queue, in a
record that replay, the replica and the change feed all see; a confirmed one, or one whose task
left its machine, is not touched; placements made without a lease need no confirmation, even
after a restart with one."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from firmament_py.model.states import TaskState
from firmament_py.service import Client, DaemonConfig, RequestFailed, Status
from firmament_py.service.protocol import Request
from firmament_py.service.state import ServiceState
from firmament_py.service.view import ClusterView

from .test_service_daemon import Running, machines

SECOND = 1_000_000


def _state_with_round(lease_ms: int | None) -> tuple[ServiceState, list[dict[str, Any]]]:
    """Two machines of two slots, tasks 1-3 submitted, and a round placing 1 and 2 on m0 and 3
    on m1 at t = 1 s, applied in one chunk under `lease_ms`; the records made."""
    service = ServiceState()
    records: list[dict[str, Any]] = []

    def request(kind: str, body: dict[str, Any], at: int = 0) -> None:
        reply, record = service.apply_request(Request(f"{kind}-{len(records)}", kind, body), at)
        assert reply.status is Status.OK, reply.reason
        assert record is not None
        records.append(record)

    machine = {"capacity": {"cpu_millicores": 1000}, "slots": 2}
    request("node_added", {"machines": [{"machine_id": m, **machine} for m in ("m0", "m1")]})
    for task_id in (1, 2, 3):
        request("task_submitted", {"task_id": task_id, "job_id": "j"})
    decided = {
        "deltas": [["place", 1, None, "m0"], ["place", 2, None, "m0"], ["place", 3, None, "m1"]],
        "cost": 0,
        "algorithm": "test",
        "timings": {},
        "task_errors": [],
    }
    record, _ = service.begin_round(1, ["r"], decided, SECOND, 0.0)
    records.append(record)
    chunk, finished = service.apply_round_chunk(64, SECOND, 1.0, lease_ms)
    assert finished is not None
    records.append(chunk)
    return service, records


def _running(service: ServiceState) -> dict[int, str | None]:
    tasks = service.cluster.tasks
    return {i: t.machine_id for i, t in tasks.items() if t.state is TaskState.RUNNING}


def test_an_unconfirmed_placement_returns_to_the_queue_when_its_lease_ends() -> None:
    service, records = _state_with_round(lease_ms=500)
    reply, record = service.apply_request(Request("c", "task_started", {"task_id": 1}), SECOND)
    assert reply.status is Status.OK and record is not None
    records.append(record)
    assert service.leases.unconfirmed(service.cluster) == 2
    assert service.expire_leases(SECOND + 400_000) is None  # not yet
    expired = service.expire_leases(SECOND + 500_000)
    assert expired is not None
    records.append(expired)
    assert expired["expired"] and sorted(d[1] for d in expired["deltas"]) == [2, 3]
    assert _running(service) == {1: "m0"}
    assert sorted(service.cluster.waiting_task_ids) == [2, 3]
    assert (service.leases.expired, service.leases.unconfirmed(service.cluster)) == (2, 0)
    assert service.expire_leases(10 * SECOND) is None  # each expires once
    # Replaying the records gives the same state, leases included.
    replayed = ServiceState()
    replayed.replay(records)
    assert _running(replayed) == _running(service)
    assert replayed.leases.expired == 2
    restored = ServiceState.from_snapshot(service.snapshot())
    assert restored.leases.snapshot() == service.leases.snapshot()


def test_a_task_that_left_its_machine_has_nothing_to_confirm() -> None:
    service, _ = _state_with_round(lease_ms=500)
    for kind, body in (("task_completed", {"task_id": 1}), ("node_failed", {"machine_id": "m1"})):
        reply, _ = service.apply_request(Request(kind, kind, body), SECOND)
        assert reply.status is Status.OK
    expired = service.expire_leases(5 * SECOND)
    assert expired is not None and [d[1] for d in expired["deltas"]] == [2]


def test_placements_made_without_a_lease_need_no_confirmation() -> None:
    service, records = _state_with_round(lease_ms=None)
    assert service.expire_leases(100 * SECOND) is None
    replayed = ServiceState()
    replayed.replay(records)  # a daemon restarted with --lease-ms on this journal
    assert replayed.expire_leases(100 * SECOND) is None
    assert len(_running(replayed)) == 3


def test_confirming_a_task_that_does_not_run_is_refused() -> None:
    service, _ = _state_with_round(lease_ms=500)
    service.apply_request(Request("s", "task_submitted", {"task_id": 4, "job_id": "j"}), SECOND)
    reply, record = service.apply_request(Request("c4", "task_started", {"task_id": 4}), SECOND)
    assert (reply.status, record) == (Status.INVALID, None)
    assert "task 4 is runnable, not running" in reply.reason
    reply, _ = service.apply_request(Request("c9", "task_started", {"task_id": 9}), SECOND)
    assert reply.status is Status.NOT_FOUND
    elsewhere = {"task_id": 3, "machine_id": "m0"}  # 3 runs on m1
    reply, _ = service.apply_request(Request("c3", "task_started", elsewhere), SECOND)
    assert reply.status is Status.INVALID and "runs on 'm1', not 'm0'" in reply.reason
    here = {"task_id": 3, "machine_id": "m1"}
    assert (
        service.apply_request(Request("c3b", "task_started", here), SECOND)[0].status is Status.OK
    )


def test_a_lease_runs_from_the_end_of_the_round_and_survives_a_restart_without_one() -> None:
    """A round applied in chunks leases what it placed from its last chunk (when its answer
    goes out), for the lease its chunks were made under; a daemon restarted with no lease keeps
    the deadline, and the restart grants one more lease."""
    service = ServiceState()
    machine = {"capacity": {"cpu_millicores": 1000}, "slots": 4}
    body = {"machines": [{"machine_id": "m0", **machine}]}
    service.apply_request(Request("m", "node_added", body), 0)
    for task_id in (1, 2):
        submit = {"task_id": task_id, "job_id": "j"}
        service.apply_request(Request(f"s{task_id}", "task_submitted", submit), 0)
    decided = {
        "deltas": [["place", 1, None, "m0"], ["place", 2, None, "m0"]],
        "cost": 0,
        "algorithm": "test",
        "timings": {},
        "task_errors": [],
    }
    service.begin_round(1, [], decided, SECOND, 0.0)
    service.apply_round_chunk(1, SECOND, 0.0, 500)  # task 1, the round not over
    assert service.expire_leases(100 * SECOND) is None  # no lease runs yet
    service.apply_round_chunk(1, 3 * SECOND, 0.0, 500)  # task 2: the round's end
    assert service.expire_leases(3 * SECOND + 499_999) is None
    restored = ServiceState.from_snapshot(service.snapshot())  # restarted with no lease
    restored.leases.grace(3 * SECOND + 200_000)  # the restart: one more lease from now
    assert restored.expire_leases(3 * SECOND + 600_000) is None
    expired = restored.expire_leases(3 * SECOND + 700_000)
    assert expired is not None and sorted(d[1] for d in expired["deltas"]) == [1, 2]


def test_the_daemon_requeues_what_its_manager_never_started(tmp_path: Path) -> None:
    running = Running(DaemonConfig(bind="tcp://127.0.0.1:*", journal=tmp_path / "j", lease_ms=300))
    try:
        with Client(running.endpoint, timeout=20) as client:
            client.add_machines(machines(2))
            client.submit_task(1, "j")
            client.submit_task(2, "j")
            view = ClusterView.load(client)
            placed = {d.task: d.to_machine for d in client.schedule().deltas}
            assert set(placed) == {1, 2}
            client.confirm_task(1, placed[1])
            deadline = time.monotonic() + 20
            while client.status()["lease_expired"] < 1:
                assert time.monotonic() < deadline, "the lease never expired"
                time.sleep(0.05)
            status = client.status()
            assert (status["unconfirmed"], status["waiting"], status["running"]) == (0, 1, 1)
            view.catch_up(client)
            assert view.tasks[2].state is TaskState.RUNNABLE
            assert view.tasks[1].state is TaskState.RUNNING
            assert client.schedule().deltas[0].task == 2  # placed again, leased again
            with pytest.raises(RequestFailed) as refused:
                client.confirm_task(3)
            assert refused.value.status is Status.NOT_FOUND
    finally:
        running.stop()


def test_an_expiry_wakes_a_follower_waiting_for_changes(tmp_path: Path) -> None:
    """Nothing else happens after the placement: the record that returns the unconfirmed task
    reaches a `changes` request waiting for the next change (not its wait's end, which would
    answer with nothing)."""
    running = Running(DaemonConfig(bind="tcp://127.0.0.1:*", journal=tmp_path / "j", lease_ms=300))
    try:
        with Client(running.endpoint, timeout=20) as client:
            client.add_machines(machines(1))
            client.submit_task(1, "j")
            client.schedule()
            page = client.changes(client.status()["seq"], wait_s=30)
        (change,) = page.changes
        assert change["expired"] and change["deltas"][0][1] == 1
    finally:
        running.stop()
