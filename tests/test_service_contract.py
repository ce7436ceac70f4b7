"""Where docs/protocol.md and the daemon used to differ (issue 35), held to the text: a
retried batch's outer reason, the request types a batch may hold, the rack and pod of a
machine added without them, evicted tasks (listed as waiting again), failed machines (gone
from the cluster, as removed ones), and resource values (integers up to 2^63-1, `usage` a
resources map like a request's) (firmament_py/service/protocol.py, state.py)."""

from __future__ import annotations

from typing import Any

import pytest

from firmament_py.model.ids import INT64_MAX
from firmament_py.service.listing import list_machines, list_tasks
from firmament_py.service.protocol import (
    STATE_CHANGING_TYPES,
    ProtocolError,
    Status,
)
from firmament_py.service.state import ServiceState

from .test_service_protocol import MACHINE, fingerprint, request


def _apply(service: ServiceState, kind: str, body: dict[str, Any], rid: str) -> Any:
    reply, _ = service.apply_request(request(kind, body, rid), 10)
    return reply


def test_a_retried_batch_says_already_applied_when_all_of_it_was() -> None:
    service = ServiceState()
    items = [
        {"type": "node_added", "body": {"machines": [MACHINE]}},
        {"type": "task_submitted", "body": {"task_id": 1, "job_id": "j"}},
    ]
    first, _ = service.apply_batch(request("batch", {"requests": items}, "b"), 5)
    assert (first.status, first.reason) == (Status.OK, "")
    again, records = service.apply_batch(request("batch", {"requests": items}, "b"), 6)
    assert (again.status, again.reason, records) == (Status.OK, "already applied", [])
    # A request refused the first time (task 9 is unknown) is tried again, not answered from
    # memory: the batch as a whole was not all applied before.
    items = [
        {"type": "task_submitted", "body": {"task_id": 2, "job_id": "j"}},
        {"type": "task_completed", "body": {"task_id": 9}},
    ]
    partly, _ = service.apply_batch(request("batch", {"requests": items}, "c"), 7)
    retried, _ = service.apply_batch(request("batch", {"requests": items}, "c"), 8)
    assert partly.reason == retried.reason == ""
    assert [answer[:2] for answer in retried.body["answers"]] == [
        ["ok", "already applied"],
        ["not_found", "no task 9"],
    ]


@pytest.mark.parametrize("kind", ["batch", "schedule", "status", "tasks", "machines", "nope"])
def test_a_batch_holds_state_changing_requests_only(kind: str) -> None:
    items = [{"type": kind, "body": {}}]
    with pytest.raises(ProtocolError, match=r"body.requests\[0\].type must be one of") as info:
        request("batch", {"requests": items})
    named = info.value.reason.split("must be one of ", 1)[1].split(", got")[0].split(", ")
    assert set(named) == STATE_CHANGING_TYPES


def test_every_state_changing_request_may_be_in_a_batch() -> None:
    bodies: dict[str, dict[str, Any]] = {
        "task_submitted": {"task_id": 1, "job_id": "j"},
        "task_started": {"task_id": 1},
        "task_completed": {"task_id": 1},
        "task_failed": {"task_id": 1},
        "task_removed": {"task_id": 1},
        "task_updated": {"task_id": 1, "priority": 1},
        "node_added": {"machines": [MACHINE]},
        "node_failed": {"machine_id": "m0"},
        "node_removed": {"machine_id": "m0"},
        "node_updated": {"machine_id": "m0", "slots": 1},
        "task_stats": {"task_id": 1, "usage": {"cpu_millicores": 1}},
        "node_stats": {"machine_id": "m0", "usage": {}},
        "latency_stats": {"machine_id": "m0", "peer_id": "m1", "latency_us": 5},
    }
    assert set(bodies) == STATE_CHANGING_TYPES
    items = [{"type": kind, "body": body} for kind, body in bodies.items()]
    assert len(request("batch", {"requests": items}).body["requests"]) == len(items)


def test_a_machine_added_without_rack_or_pod_is_in_rack_0_of_pod_0() -> None:
    service = ServiceState()
    _apply(service, "node_added", {"machines": [MACHINE]}, "a")
    listed = list_machines(service, {}).body["machines"]
    assert listed == [["m0", "rack-0", "pod-0", 2, 0]]


def test_an_evicted_task_is_listed_as_waiting_again_and_its_machine_as_gone() -> None:
    """A failed machine leaves the cluster as a removed one does: it is not listed, and may be
    added again; its tasks are evicted and wait again at once (`runnable`), so `state:
    evicted` lists none."""
    service = ServiceState()
    machines = [MACHINE, {**MACHINE, "machine_id": "m1"}]
    _apply(service, "node_added", {"machines": machines}, "a")
    _apply(service, "task_submitted", {"task_id": 1, "job_id": "j"}, "s")
    outcome, _ = service.apply_decisions([_place(1, "m0")], 10)
    assert outcome.applied
    assert _apply(service, "node_failed", {"machine_id": "m0"}, "f").status is Status.OK
    assert [row[0] for row in list_machines(service, {}).body["machines"]] == ["m1"]
    assert list_tasks(service, {}).body["tasks"] == [[1, "j", "runnable", None]]
    assert list_tasks(service, {"state": "evicted"}).body["tasks"] == []
    assert _apply(service, "node_failed", {"machine_id": "m0"}, "f2").status is Status.NOT_FOUND
    assert _apply(service, "node_added", {"machines": [MACHINE]}, "back").status is Status.OK


def _place(task_id: int, machine_id: str) -> Any:
    from firmament_py.flow.placement import DeltaKind, SchedulingDelta

    return SchedulingDelta(DeltaKind.PLACE, task_id, None, machine_id)


@pytest.mark.parametrize("field", ["request", "usage"])
def test_resource_values_are_integers_up_to_2_63_minus_1(field: str) -> None:
    kind = "task_submitted" if field == "request" else "task_stats"
    body: dict[str, Any] = {"task_id": 1, "job_id": "j"} if field == "request" else {"task_id": 1}
    largest = request(kind, {**body, field: {"ram_bytes": INT64_MAX}})
    assert largest.body[field] == {"ram_bytes": INT64_MAX}
    wrong = ((INT64_MAX + 1, "must be in"), (-1, "must be in"), (1.5, "must be an integer"))
    for value, words in wrong:
        with pytest.raises(ProtocolError, match=f"body.{field}.ram_bytes {words}"):
            request(kind, {**body, field: {"ram_bytes": value}})
    with pytest.raises(ProtocolError, match=f"body.{field}.gpus is not a resource"):
        request(kind, {**body, field: {"gpus": 1}})


def test_usage_reaches_the_task() -> None:
    service = ServiceState()
    _apply(service, "node_added", {"machines": [MACHINE]}, "a")
    _apply(service, "task_submitted", {"task_id": 1, "job_id": "j"}, "s")
    before = fingerprint(service)
    usage = {"cpu_millicores": 250, "ram_bytes": 1 << 20}
    assert _apply(service, "task_stats", {"task_id": 1, "usage": usage}, "u").status is Status.OK
    assert fingerprint(service)[:2] == before[:2]  # a measurement moves no task
    assert service.cluster.tasks[1].measured_usage.as_tuple()[:2] == (250, 1 << 20)
