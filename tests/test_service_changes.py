"""What a cluster manager follows the daemon by (firmament_py/service/changes.py, listing.py,
view.py, and the daemon's fencing): the change feed in order and without gaps, waiting for the
next change, `gone` when changes are no longer kept; a past round fetched by number; only the
last manager to register may write; a `ClusterView` loaded while the cluster changes ends equal
to the daemon's state."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgpack
import pytest
import zmq
from hypothesis import given, settings
from hypothesis import strategies as st

from firmament_py.flow.placement import DeltaKind, SchedulingDelta
from firmament_py.model.states import TaskState
from firmament_py.service import Client, DaemonConfig, RequestFailed, SchedulingDaemon, Status
from firmament_py.service.changes import ChangeFeed, FeedGone, Watches
from firmament_py.service.listing import list_machines, list_tasks
from firmament_py.service.protocol import ProtocolError, Request, decode_request, encode_request
from firmament_py.service.state import ServiceState
from firmament_py.service.view import ClusterView, ViewMachine, ViewTask

from .test_service_daemon import Running, machines


def _records(first: int, last: int) -> list[dict[str, int]]:
    return [{"seq": seq} for seq in range(first, last + 1)]


def test_too_many_waiting_requests_are_told_to_retry() -> None:
    watches = Watches(ChangeFeed(base=0), limit=1)
    assert watches.request(b"a", "w1", {"after": 0, "wait_ms": 1000}) is None
    assert watches.request(b"a2", "w1", {"after": 0, "wait_ms": 1000}) is None  # a retry
    refused = msgpack.unpackb(watches.request(b"b", "w2", {"after": 0, "wait_ms": 1000}))
    assert (refused["status"], refused["body"]) == ("overloaded", {"retry_after_ms": 100})
    assert [identity for identity, _ in watches.wake(now=1e12)] == [b"a2"]


def test_records_seen_from_another_boot_past_what_recovery_found_are_gone() -> None:
    """A follower read up to record 7 from an earlier boot of the daemon; this boot recovered
    only up to record 5 (a crash of the machine lost 6 and 7) and has written new 6 to 9: the
    follower is told to list again, not handed the new 8 and 9 after records it never saw."""
    feed = ChangeFeed(base=0)
    feed.add(_records(1, 9))
    watches = Watches(feed, boot="new", recovered=5)

    def status(body: dict[str, Any]) -> str:
        reply = watches.request(b"x", "r", body)
        assert reply is not None
        return str(msgpack.unpackb(reply)["status"])

    assert status({"after": 7, "boot": "old"}) == "gone"
    assert status({"after": 7, "boot": "old", "wait_ms": 1000}) == "gone"
    assert status({"after": 5, "boot": "old"}) == "ok"  # up to 5 survived
    assert status({"after": 7, "boot": "new"}) == "ok"
    assert status({"after": 7}) == "ok"  # a follower that does not say


def _add(feed: ChangeFeed, first: int, last: int) -> None:
    """Records `first` to `last`, each in a frame of its own (as single requests journal them)."""
    for record in _records(first, last):
        feed.add([record])


def test_the_feed_answers_in_order_and_says_when_it_cannot() -> None:
    feed = ChangeFeed(base=10, window=5)
    _add(feed, 11, 13)
    assert feed.since(10, 100) == (_records(11, 13), False)
    assert feed.since(11, 1) == (_records(12, 12), True)
    assert feed.since(13, 100) == ([], False)
    _add(feed, 14, 17)  # 11 and 12 drop out of the window of five
    assert feed.base == 12
    assert feed.since(12, 100) == (_records(13, 17), False)
    with pytest.raises(FeedGone, match="no longer kept"):
        feed.since(11, 100)
    with pytest.raises(FeedGone, match="beyond the last one written"):
        feed.since(18, 100)
    with pytest.raises(ValueError, match="do not follow"):
        feed.add(_records(19, 19))


def test_the_feed_keeps_frames_whole_and_answers_from_inside_one() -> None:
    """A batch's records are one frame: a request may start in its middle, and the frame drops
    out of the window whole, once the frames after it hold the window's records."""
    feed = ChangeFeed(base=0, window=4)
    feed.add(_records(1, 3))
    feed.add(_records(4, 6))
    assert feed.since(1, 3) == (_records(2, 4), True)
    assert (feed.base, feed.since(2, 100)) == (0, (_records(3, 6), False))
    feed.add(_records(7, 7))  # 4-7 are the window: the first frame goes
    assert feed.base == 3
    restored = ChangeFeed.unpacked(7, feed.packed(5), window=4)
    assert (restored.base, restored.since(3, 100)) == (3, (_records(4, 7), False))


def test_a_waiting_request_is_woken_by_a_record_or_the_end_of_its_wait() -> None:
    feed = ChangeFeed(base=0)
    watches = Watches(feed)
    assert watches.request(b"a", "w1", {"after": 0, "wait_ms": 1000}) is None
    assert watches.request(b"b", "w2", {"after": 0, "wait_ms": 10}) is None
    assert watches.request(b"c", "w3", {"after": 0}) is not None  # no wait asked: answered
    assert len(watches) == 2
    assert watches.wake(now=0.0) == []
    feed.add(_records(1, 1))
    woken = watches.wake(now=0.0)
    assert [identity for identity, _ in woken] == [b"a", b"b"]
    assert watches.request(b"d", "w4", {"after": 1, "wait_ms": 10}) is None
    (ended,) = watches.wake(now=1e12)  # its wait is long over: answered with nothing
    assert ended[0] == b"d"


def test_the_envelope_carries_an_epoch_and_the_new_requests_are_checked() -> None:
    request = decode_request(encode_request("r", "task_removed", {"task_id": 1}, epoch=3))
    assert request.epoch == 3
    assert decode_request(encode_request("r", "status")).epoch is None
    for bad in (0, True, 1.0, "3"):
        with pytest.raises(ProtocolError, match="epoch"):
            decode_request(encode_request("r", "status", epoch=bad))  # type: ignore[arg-type]
    with pytest.raises(ProtocolError, match=r"body\.wait_ms must be at most 60,000"):
        decode_request(encode_request("r", "changes", {"after": 0, "wait_ms": 60_001}))
    with pytest.raises(ProtocolError, match=r"body\.after is missing"):
        decode_request(encode_request("r", "changes", {}))
    with pytest.raises(ProtocolError, match=r"body\.round must be in"):
        decode_request(encode_request("r", "round", {"round": 0}))
    with pytest.raises(ProtocolError, match=r"body\.manager must not be empty"):
        decode_request(encode_request("r", "register", {"manager": ""}))


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Running]:
    running = Running(DaemonConfig(bind="tcp://127.0.0.1:*", journal=tmp_path / "journal"))
    yield running
    running.stop()


def test_every_change_is_in_the_feed_in_order(served: Running) -> None:
    with Client(served.endpoint, timeout=20) as client:
        client.add_machines(machines(2))
        for task_id in range(5):
            client.submit_task(task_id, "j")
        round_ = client.schedule()
        client.complete_task(round_.deltas[0].task)
        page = client.changes(0)
    seqs = [change["seq"] for change in page.changes]
    assert seqs == list(range(1, page.seq + 1))
    assert not page.more
    kinds = [change["kind"] for change in page.changes]
    assert kinds[:6] == ["request"] * 6
    assert "round" in kinds and "decisions" in kinds
    placed = [d for c in page.changes if c["kind"] == "decisions" for d in c["deltas"]]
    assert sorted(d[1] for d in placed) == sorted(d.task for d in round_.deltas)


def test_a_change_wakes_a_waiting_request(served: Running) -> None:
    with Client(served.endpoint, timeout=20) as client:
        client.add_machines(machines(1))
        seq = client.status()["seq"]
        answer: list[object] = []
        waiter = threading.Thread(
            target=lambda: answer.append(
                Client(served.endpoint, timeout=20).changes(seq, wait_s=30)
            )
        )
        waiter.start()
        while client.status()["watching"] == 0:
            pass
        client.submit_task(7, "j")
        waiter.join(30)
    (page,) = answer
    assert [c["body"] for c in page.changes] == [{"task_id": 7, "job_id": "j"}]  # type: ignore[attr-defined]


def test_a_wait_that_ends_answers_no_changes(served: Running) -> None:
    with Client(served.endpoint) as client:
        seq = client.status()["seq"]
        page = client.changes(seq, wait_s=0.2)
        assert (page.changes, page.more, page.seq) == ([], False, seq)
        with pytest.raises(RequestFailed) as beyond:
            client.changes(seq + 5)
        assert beyond.value.status is Status.GONE


def test_a_restart_keeps_the_last_changes_and_older_ones_are_gone(tmp_path: Path) -> None:
    """A clean stop writes a snapshot, which keeps the feed's last records: a follower asks on
    across the restart. One further behind than the window is told to list again."""
    config = DaemonConfig(bind="tcp://127.0.0.1:*", journal=tmp_path / "j", watch_window=3)
    running = Running(config)
    with Client(running.endpoint) as client:
        client.add_machines(machines(1))
        for task_id in range(4):
            client.submit_task(task_id, "j")
        before = client.changes(2).changes
    running.stop()
    running = Running(config)
    try:
        with Client(running.endpoint) as client:
            assert client.changes(2).changes == before  # records 3-5, kept by the snapshot
            with pytest.raises(RequestFailed) as gone:
                client.changes(1)
            assert gone.value.status is Status.GONE
            assert "list the tasks and machines again" in gone.value.reason
            assert client.status()["changes_after"] == 2
            client.submit_task(9, "j")
            assert [c["seq"] for c in client.changes(5).changes] == [6]
    finally:
        running.stop()


def test_a_round_is_fetched_by_its_number_across_a_restart(tmp_path: Path) -> None:
    config = DaemonConfig(bind="tcp://127.0.0.1:*", journal=tmp_path / "j")
    running = Running(config)
    with Client(running.endpoint, timeout=20) as client:
        client.add_machines(machines(2))
        for task_id in range(3):
            client.submit_task(task_id, "j")
        answered = client.schedule()
        assert client.round(answered.round) == answered
        with pytest.raises(RequestFailed, match="has not been journaled") as unknown:
            client.round(answered.round + 1)
        assert unknown.value.status is Status.NOT_FOUND
    running.stop()
    running = Running(config)
    try:
        with Client(running.endpoint) as client:
            assert client.round(answered.round) == answered
    finally:
        running.stop()


def test_only_the_last_manager_to_register_may_write(tmp_path: Path) -> None:
    config = DaemonConfig(bind="tcp://127.0.0.1:*", journal=tmp_path / "j")
    running = Running(config)
    with (
        Client(running.endpoint, timeout=20) as first,
        Client(running.endpoint, timeout=20) as second,
        Client(running.endpoint, timeout=20) as bystander,
    ):
        bystander.add_machines(machines(1))  # nobody registered yet: writes need no epoch
        bystander.epoch = 5
        with pytest.raises(RequestFailed, match="never given") as unknown:
            bystander.submit_task(9, "j")
        assert unknown.value.status is Status.FENCED
        bystander.epoch = None
        old = first.register("a")
        first.submit_task(1, "j")
        new = second.register("b")
        assert new > old
        for write in (lambda: first.submit_task(2, "j"), first.schedule):
            with pytest.raises(RequestFailed) as fenced:
                write()
            assert fenced.value.status is Status.FENCED
            assert f"the current epoch is {new}" in fenced.value.reason
        with pytest.raises(RequestFailed) as without:
            bystander.submit_task(3, "j")
        assert without.value.status is Status.FENCED
        assert [t.task_id for t in first.tasks()] == [1]  # reads are anyone's
        second.submit_task(4, "j")
        assert second.schedule().round >= 1
        again = second.request("register", {"manager": "b"}, request_id="b-again")
        assert second.request("register", {"manager": "b"}, request_id="b-again") == again
    running.stop()
    running = Running(config)
    try:
        with Client(running.endpoint) as client:
            assert client.status()["epoch"] == again["epoch"]
            client.epoch = new
            with pytest.raises(RequestFailed) as after_restart:
                client.submit_task(5, "j")
            assert after_restart.value.status is Status.FENCED
    finally:
        running.stop()


def _view_matches(view: ClusterView, client: Client) -> None:
    listed = {t.task_id: (t.job_id, t.state, t.machine_id) for t in client.tasks()}
    mirrored = {i: (t.job_id, t.state, t.machine_id) for i, t in view.tasks.items()}
    assert mirrored == listed
    assert {m.machine_id: (m.rack_id, m.pod_id, m.slots) for m in client.machines()} == {
        i: (m.rack_id, m.pod_id, m.slots) for i, m in view.machines.items()
    }


def test_a_view_loaded_while_the_cluster_changes_ends_equal_to_it(served: Running) -> None:
    """A writer submits, schedules, completes, fails machines and adds them back while a view
    lists page by page (pages of 3, so the listing spans many changes), then follows."""
    stop = threading.Event()

    def churn() -> None:
        rng = random.Random(5)
        with Client(served.endpoint, timeout=20) as writer:
            writer.add_machines(machines(6))
            task_id = 0
            while not stop.is_set():
                for _ in range(4):
                    writer.submit_task(task_id, f"j{task_id % 3}")
                    task_id += 1
                for delta in writer.schedule().deltas[:2]:
                    writer.complete_task(delta.task)
                if rng.random() < 0.3:
                    machine = f"m{rng.randrange(6)}"
                    writer.fail_machine(machine)
                    (spec,) = [m for m in machines(6) if m.machine_id == machine]
                    writer.add_machines([spec])

    writer = threading.Thread(target=churn)
    writer.start()
    try:
        with Client(served.endpoint, timeout=20) as client:
            while client.status()["tasks"] < 20:
                pass
            view = ClusterView.load(client, page=3)
            for _ in range(5):
                view.catch_up(client)
    finally:
        stop.set()
        writer.join(60)
    with Client(served.endpoint, timeout=20) as client:
        view.catch_up(client)
        assert view.seq == client.status()["seq"]
        _view_matches(view, client)
        assert any(t.state is TaskState.RUNNING for t in view.tasks.values())


def test_a_view_follows_on_across_a_restart(tmp_path: Path) -> None:
    config = DaemonConfig(bind="tcp://127.0.0.1:*", journal=tmp_path / "j")
    running = Running(config)
    with Client(running.endpoint, timeout=20) as client:
        client.add_machines(machines(2))
        client.submit_task(1, "j")
        view = ClusterView.load(client)
        first_boot = view.boot
        client.schedule()
        view.catch_up(client)
    running.stop()
    running = Running(config)
    try:
        with Client(running.endpoint, timeout=20) as client:
            client.submit_task(2, "j")
            view.catch_up(client)  # from the boot before: every record it saw survived
            assert view.boot != first_boot
            _view_matches(view, client)
    finally:
        running.stop()


def test_a_view_follows_changes_live(served: Running) -> None:
    with Client(served.endpoint, timeout=20) as client:
        client.add_machines(machines(2))
        view = ClusterView.load(client)
        client.submit_task(1, "j")
        client.schedule()
        followed = view.follow(client, wait_s=5)
        while view.seq < client.status()["seq"]:
            next(followed)
        _view_matches(view, client)
        assert view.running_on(view.tasks[1].machine_id or "") == [1]


def test_a_superseded_registration_retried_is_fenced() -> None:
    service = ServiceState()
    first, _ = service.register(Request("a", "register", {"manager": "a"}), 1)
    service.register(Request("b", "register", {"manager": "b"}), 2)
    again, record = service.register(Request("a", "register", {"manager": "a"}), 3)
    assert (again.status, record) == (Status.FENCED, None)
    assert again.body == {"epoch": 2} and first.body["epoch"] == 1
    assert service.manager == "b"


def test_a_registration_fences_the_schedule_requests_waiting_for_the_next_round(
    tmp_path: Path,
) -> None:
    """Driven turn by turn: a round in flight, a second `schedule` waiting for the next one,
    then another manager registers: the waiting request is answered `fenced`, the round in
    flight still answers its own."""
    daemon = SchedulingDaemon(DaemonConfig(bind="tcp://127.0.0.1:*", journal=tmp_path / "j"))
    dealer = zmq.Context.instance().socket(zmq.DEALER)
    dealer.setsockopt(zmq.LINGER, 0)
    dealer.connect(daemon.endpoint)
    replies: dict[str, dict[str, Any]] = {}

    def turn_until(done: Any) -> None:
        deadline = time.monotonic() + 60
        while not done():
            assert time.monotonic() < deadline
            daemon.serve_once(10)
            while dealer.poll(0):
                reply = msgpack.unpackb(dealer.recv(), raw=False)
                replies[reply["id"]] = reply

    try:
        turn_until(lambda: daemon.link.ready)
        dealer.send(encode_request("first", "schedule"))
        turn_until(lambda: daemon._round is not None)
        dealer.send(encode_request("second", "schedule"))
        turn_until(lambda: len(daemon._next_round_waiters) == 1)
        dealer.send(encode_request("take-over", "register", {"manager": "b"}))
        turn_until(lambda: {"first", "second", "take-over"} <= replies.keys())
        assert replies["second"]["status"] == Status.FENCED.value
        assert replies["first"]["status"] == Status.OK.value
        assert replies["take-over"]["body"]["epoch"] == daemon.service.epoch
    finally:
        dealer.close()
        daemon.close()


def test_a_daemon_on_a_snapshot_keeps_the_epoch(tmp_path: Path) -> None:
    config = DaemonConfig(bind="tcp://127.0.0.1:*", journal=tmp_path / "j", snapshot_every=2)
    running = Running(config)
    with Client(running.endpoint) as client:
        epoch = client.register("a")
        client.add_machines(machines(1))
        client.submit_task(1, "j")
    running.stop()
    restarted = SchedulingDaemon(config)
    try:
        assert restarted.service.epoch == epoch
    finally:
        restarted.close()


# ---------------------------------------------------------------------- the view, by property

_OPS = st.lists(
    st.tuples(
        st.sampled_from(
            ["submit", "complete", "fail", "remove", "place", "preempt", "migrate", "machine"]
        ),
        st.integers(0, 7),
        st.integers(0, 2),
    ),
    max_size=40,
)


def _records_of(ops: list[tuple[str, int, int]]) -> tuple[ServiceState, list[dict[str, Any]]]:
    """Apply `ops` to a fresh state (what the state refuses is left out): a task op on task
    `n`, a decision to machine `m{k}`, "machine" fails machine `m{k}` and adds it back."""
    service = ServiceState()
    records: list[dict[str, Any]] = []
    now = 0

    def write(kind: str, body: dict[str, Any]) -> None:
        nonlocal now
        now += 1
        _, record = service.apply_request(Request(f"r{now}", kind, body), now)
        if record is not None:
            records.append(record)

    def machine(name: str) -> dict[str, Any]:
        rack = f"r{name[-1] != '0'}"
        return {"machine_id": name, "capacity": {}, "slots": 2, "rack_id": rack}

    write("node_added", {"machines": [machine(f"m{k}") for k in range(3)]})
    for op, n, k in ops:
        task = service.cluster.tasks.get(n)
        if op == "submit":
            write("task_submitted", {"task_id": n, "job_id": f"j{n % 2}"})
        elif op in ("complete", "fail", "remove"):
            write(
                {"complete": "task_completed", "fail": "task_failed"}.get(op, "task_removed"),
                {"task_id": n},
            )
        elif op == "machine":
            write("node_failed", {"machine_id": f"m{k}"})
            write("node_added", {"machines": [machine(f"m{k}")]})
        elif task is not None:
            kind = {"place": DeltaKind.PLACE, "preempt": DeltaKind.PREEMPT}.get(
                op, DeltaKind.MIGRATE
            )
            source = task.machine_id if kind is not DeltaKind.PLACE else None
            target = None if kind is DeltaKind.PREEMPT else f"m{k}"
            if (kind is DeltaKind.PLACE) != (task.machine_id is None) or source == target:
                continue  # not a decision at all (the state refuses the rest)
            now += 1
            _, record = service.apply_decisions([SchedulingDelta(kind, n, source, target)], now)
            if record is not None:
                records.append(record)
    return service, records


def _listed(service: ServiceState) -> ClusterView:
    """The view a listing of `service` gives (at its sequence number)."""
    view = ClusterView(service.seq)
    for task_id, job_id, state, machine_id in list_tasks(service, {"limit": 10_000}).body["tasks"]:
        view.tasks[task_id] = ViewTask(job_id, TaskState(state), machine_id)
    for machine_id, rack, pod, slots, _ in list_machines(service, {}).body["machines"]:
        view.machines[machine_id] = ViewMachine(rack, pod, slots)
    return view


def _same(a: ClusterView, b: ClusterView) -> bool:
    return (a.seq, a.tasks, a.machines) == (b.seq, b.tasks, b.machines)


@settings(max_examples=200, deadline=None)
@given(ops=_OPS, data=st.data())
def test_a_listing_then_the_changes_since_an_earlier_seq_give_the_final_state(
    ops: list[tuple[str, int, int]], data: st.DataObject
) -> None:
    """The claim `ClusterView.load` rests on (docs/protocol.md, "List, then follow"): a
    listing taken at any point, with every change after an earlier sequence number applied
    over it in order, gives the daemon's final state; so does following every change from an
    empty view."""
    service, records = _records_of(ops)
    final = _listed(service)
    from_scratch = ClusterView()
    for record in records:
        from_scratch.apply(record)
    assert _same(from_scratch, final)
    listed_at = data.draw(st.integers(0, len(records)), label="listing after record")
    follow_from = data.draw(st.integers(0, listed_at), label="following from record")
    replayed = ServiceState()  # the state as of `listed_at` records, rebuilt by replay
    replayed.replay(records[:listed_at])
    view = _listed(replayed)
    view.seq = records[follow_from - 1]["seq"] if follow_from else 0
    for record in records[follow_from:]:
        view.apply(record)
    assert _same(view, final)
