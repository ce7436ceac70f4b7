"""Tests of `ClusterState`: events, placement decisions, refusals that change nothing, machine
loss re-queuing tasks, time accounting, and invariants under random sequences of changes."""

from __future__ import annotations

import contextlib
import io
import pickle
from collections import Counter
from collections.abc import Callable
from functools import partial
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from firmament_py.model import (
    NO_RESOURCES,
    ClusterError,
    ClusterEvent,
    ClusterState,
    IllegalTransition,
    InvariantViolation,
    LabelSelector,
    MachineAdded,
    MachineFailed,
    MachineRemoved,
    MachineStats,
    MachineUpdated,
    Resources,
    TaskCompleted,
    TaskFailed,
    TaskRemoved,
    TaskState,
    TaskStats,
    TaskSubmitted,
    TaskTransition,
    TaskUpdated,
    TransitionCause,
)
from firmament_py.model.cluster import CLUSTER_SLOTS_LIMIT

CPU = Resources(cpu_millicores=1000, ram_bytes=1 << 30)


def snapshot(cluster: ClusterState) -> str:
    """Everything the cluster state holds, as a comparable string."""
    return repr(
        (
            cluster.now,
            list(cluster.jobs.values()),
            list(cluster.tasks.values()),
            list(cluster.machines.values()),
            list(cluster.racks.values()),
            list(cluster.pods.values()),
            list(cluster.waiting_task_ids),
        )
    )


def refused(cluster: ClusterState, change: Callable[[], object], pattern: str) -> None:
    """Assert that `change` raises ClusterError matching `pattern` and changes nothing."""
    before = snapshot(cluster)
    with pytest.raises(ClusterError, match=pattern):
        change()
    assert snapshot(cluster) == before
    cluster.validate()


def machine(machine_id: str, slots: int = 2, capacity: Resources = CPU, **kw: Any) -> MachineAdded:
    return MachineAdded(time=0, machine_id=machine_id, capacity=capacity, slots=slots, **kw)


def submit(task_id: int, job_id: str = "j", time: int = 0, **kw: Any) -> TaskSubmitted:
    return TaskSubmitted(time=time, task_id=task_id, job_id=job_id, **kw)


def cluster_with(*events: ClusterEvent) -> ClusterState:
    cluster = ClusterState()
    for event in events:
        cluster.apply(event)
    cluster.validate()
    return cluster


# ---------------------------------------------------------------------- tasks and jobs


def test_submission_creates_the_job_with_its_root_task_and_queues_the_task() -> None:
    cluster = ClusterState()
    (record,) = cluster.apply(submit(1, "j", time=10, priority=3))
    assert record == TaskTransition(
        10, 1, TaskState.CREATED, TaskState.RUNNABLE, TransitionCause.SUBMITTED
    )
    cluster.apply(submit(2, "j", time=11, priority=9))
    job = cluster.job("j")
    assert (job.root_task_id, job.priority, job.submit_time) == (1, 3, 10)
    assert list(job.task_ids) == [1, 2]
    task = cluster.task(2)
    assert (task.state, task.submit_time, task.runnable_since, task.priority) == (
        TaskState.RUNNABLE,
        11,
        11,
        9,
    )
    assert [t.task_id for t in cluster.runnable_tasks()] == [1, 2]
    assert cluster.now == 11
    cluster.validate()


def test_duplicate_and_unknown_task_ids_are_refused_without_change() -> None:
    cluster = cluster_with(submit(1, "j"))
    refused(cluster, lambda: cluster.apply(submit(1, "other")), "task 1 already exists")
    unknown: list[ClusterEvent] = [
        TaskCompleted(time=1, task_id=9),
        TaskFailed(time=1, task_id=9),
        TaskRemoved(time=1, task_id=9),
        TaskUpdated(time=1, task_id=9, priority=1),
        TaskStats(time=1, task_id=9, usage=CPU),
    ]
    for event in unknown:
        refused(cluster, partial(cluster.apply, event), "unknown task 9")
    refused(cluster, lambda: cluster.job("nope"), "unknown job 'nope'")


def test_the_trusted_calls_refuse_what_apply_refuses_without_change() -> None:
    cluster = cluster_with(machine("m"), submit(1, "j", time=10))
    cluster.place(1, "m", time=10)
    refused(cluster, lambda: cluster.trusted_submit(11, 1, "other"), "task 1 already exists")
    refused(cluster, lambda: cluster.trusted_remove(11, 9), "unknown task 9")
    refused(cluster, lambda: cluster.trusted_submit(9, 2, "j"), "time 9 is before .* 10")
    refused(cluster, lambda: cluster.trusted_remove(9, 1), "time 9 is before .* 10")


@settings(max_examples=100, deadline=None)
@given(steps=st.lists(st.tuples(st.booleans(), st.integers(0, 4), st.integers(0, 2)), max_size=25))
def test_the_trusted_calls_change_the_state_as_events_do(
    steps: list[tuple[bool, int, int]],
) -> None:
    # `trusted_submit` and `trusted_remove` are `apply` of a plain TaskSubmitted or
    # TaskRemoved without the event: the same state after every step, the same refusals.
    by_events, trusted = cluster_with(machine("m")), cluster_with(machine("m"))
    for time, (adding, task_id, wait) in enumerate(steps, start=1):
        job = f"j{task_id % 2}"
        outcomes = []
        for cluster, change in (
            (
                by_events,
                partial(
                    by_events.apply,
                    submit(task_id, job, time=time * wait)
                    if adding
                    else TaskRemoved(time=time * wait, task_id=task_id),
                ),
            ),
            (
                trusted,
                partial(trusted.trusted_submit, time * wait, task_id, job)
                if adding
                else partial(trusted.trusted_remove, time * wait, task_id),
            ),
        ):
            try:
                change()
                outcomes.append("ok")
            except ClusterError as error:
                outcomes.append(str(error))
            if task_id == 4 and outcomes[-1] == "ok" and adding:
                cluster.place(task_id, "m", time=cluster.now)  # some tasks run when removed
        assert outcomes[0] == outcomes[1]
        assert snapshot(trusted) == snapshot(by_events)
    trusted.validate()


def test_an_unpickled_state_shares_the_zero_request_again() -> None:
    # Snapshots and the daemon's scheduling process get the state by pickle. A slot-only
    # request must come back as `NO_RESOURCES` (placements skip the arithmetic for it, by
    # identity), and everything else as it was.
    cluster = cluster_with(
        machine("m", slots=4),
        submit(1, "j"),
        submit(2, "j", request=Resources()),  # zero, but not the shared vector
        submit(3, "j", request=CPU),
    )
    cluster.trusted_submit(0, 4, "j")
    cluster.place(2, "m", time=0)
    cluster.place(3, "m", time=0)
    copy = pickle.loads(pickle.dumps(cluster))
    assert snapshot(copy) == snapshot(cluster)
    assert [copy.task(t).request is NO_RESOURCES for t in (1, 2, 3, 4)] == [True, True, False, True]
    copy.place(4, "m", time=1)
    copy.apply(TaskRemoved(time=2, task_id=3))
    copy.validate()
    assert copy.machine("m").reserved == NO_RESOURCES


def test_a_state_pickled_before_zero_requests_were_shared_shares_them_on_load() -> None:
    # Older snapshots pickled every zero request as a vector of its own.
    class OldPickler(pickle.Pickler):
        def reducer_override(self, obj: object) -> object:
            if type(obj) is Resources:
                return (Resources, obj.as_tuple())
            return NotImplemented

    cluster = cluster_with(machine("m", slots=4), submit(1, "j"), submit(2, "j", request=CPU))
    buffer = io.BytesIO()
    OldPickler(buffer).dump(cluster)
    copy = pickle.loads(buffer.getvalue())
    assert [copy.task(t).request is NO_RESOURCES for t in (1, 2)] == [True, False]
    assert copy.task(2).request == CPU


def test_completing_a_task_that_does_not_run_is_an_illegal_transition() -> None:
    cluster = cluster_with(submit(1))
    with pytest.raises(IllegalTransition, match="task 1 cannot go from runnable to completed"):
        cluster.apply(TaskCompleted(time=1, task_id=1))
    assert cluster.task(1).state is TaskState.RUNNABLE


def test_a_final_task_stays_final() -> None:
    cluster = cluster_with(machine("m"), submit(1))
    cluster.place(1, "m", time=1)
    cluster.apply(TaskCompleted(time=2, task_id=1))
    refused(cluster, lambda: cluster.apply(TaskFailed(time=3, task_id=1)), "completed to failed")
    refused(cluster, lambda: cluster.place(1, "m", time=3), "completed to running")
    refused(cluster, lambda: cluster.preempt(1, time=3), "completed to evicted")


def test_failing_a_waiting_task_abandons_it() -> None:
    cluster = cluster_with(submit(1, time=5))
    (record,) = cluster.apply(TaskFailed(time=8, task_id=1, reason="killed by user"))
    assert (record.from_state, record.to_state, record.from_machine_id) == (
        TaskState.RUNNABLE,
        TaskState.FAILED,
        None,
    )
    task = cluster.task(1)
    assert (task.failure_reason, task.finish_time, task.unscheduled_time(100)) == (
        "killed by user",
        8,
        3,
    )
    cluster.validate()


def test_removing_tasks_frees_their_machine_and_drops_an_empty_job() -> None:
    cluster = cluster_with(machine("m"), submit(1, "j"), submit(2, "j"))
    cluster.place(1, "m", time=1)
    (record,) = cluster.apply(TaskRemoved(time=2, task_id=1))
    assert (record.from_state, record.to_state, record.from_machine_id) == (
        TaskState.RUNNING,
        None,
        "m",
    )
    assert cluster.machine("m").reserved == Resources()
    assert cluster.machine("m").free_slots == 2
    assert cluster.job("j").root_task_id == 1
    cluster.apply(TaskRemoved(time=3, task_id=2))
    assert "j" not in cluster.jobs
    assert not cluster.tasks
    cluster.validate()


def test_stats_are_recorded() -> None:
    cluster = cluster_with(machine("m"), submit(1))
    cluster.apply(TaskStats(time=1, task_id=1, usage=Resources(cpu_millicores=5)))
    cluster.apply(MachineStats(time=2, machine_id="m", usage=Resources(ram_bytes=7)))
    assert cluster.task(1).measured_usage == Resources(cpu_millicores=5)
    assert cluster.machine("m").measured_usage == Resources(ram_bytes=7)
    refused(
        cluster,
        lambda: cluster.apply(MachineStats(time=3, machine_id="x", usage=CPU)),
        "unknown machine 'x'",
    )


def test_time_may_not_run_backwards() -> None:
    cluster = cluster_with(machine("m"), submit(1, time=10))
    refused(cluster, lambda: cluster.apply(submit(2, time=9)), "time 9 is before .* 10")
    refused(cluster, lambda: cluster.place(1, "m", time=9), "time 9 is before")
    cluster.place(1, "m", time=10)


def test_apply_refuses_what_is_not_an_event() -> None:
    with pytest.raises(TypeError, match="not a cluster event"):
        ClusterState().apply("TaskSubmitted")  # type: ignore[arg-type]


# ---------------------------------------------------------------------- machines and topology


def test_machines_build_the_topology_in_insertion_order() -> None:
    cluster = cluster_with(
        machine("m1", rack_id="r1", pod_id="p1"),
        machine("m2", rack_id="r2", pod_id="p1"),
        machine("m3", rack_id="r1", pod_id="p1"),
        machine("m4", rack_id="r3", pod_id="p2"),
    )
    assert list(cluster.machines) == ["m1", "m2", "m3", "m4"]
    assert list(cluster.racks["r1"].machine_ids) == ["m1", "m3"]
    assert list(cluster.pods["p1"].rack_ids) == ["r1", "r2"]
    assert list(cluster.pods) == ["p1", "p2"]
    refused(cluster, lambda: cluster.apply(machine("m1")), "machine 'm1' already exists")
    refused(
        cluster,
        lambda: cluster.apply(machine("m5", rack_id="r1", pod_id="p2")),
        "rack 'r1' in pod 'p2', but that rack is in pod 'p1'",
    )
    cluster.apply(MachineRemoved(time=1, machine_id="m4"))
    assert list(cluster.racks) == ["r1", "r2"]
    assert list(cluster.pods) == ["p1"]
    cluster.apply(MachineRemoved(time=1, machine_id="m1"))
    assert list(cluster.racks["r1"].machine_ids) == ["m3"]
    refused(
        cluster, lambda: cluster.apply(MachineFailed(time=1, machine_id="m1")), "unknown machine"
    )
    cluster.validate()


def test_a_machine_without_rack_joins_the_default_rack_and_pod() -> None:
    cluster = cluster_with(machine("m"))
    assert cluster.machine("m").rack_id == "rack-0"
    assert cluster.racks["rack-0"].pod_id == "pod-0"


@pytest.mark.parametrize(
    ("lose", "cause"),
    [
        (MachineFailed(time=20, machine_id="m1", reason="power"), TransitionCause.MACHINE_FAILED),
        (MachineRemoved(time=20, machine_id="m1"), TransitionCause.MACHINE_REMOVED),
    ],
)
def test_losing_a_machine_requeues_its_running_tasks(
    lose: MachineFailed | MachineRemoved, cause: TransitionCause
) -> None:
    cluster = cluster_with(machine("m1"), machine("m2"), submit(1), submit(2), submit(3))
    cluster.place(1, "m1", time=5)
    cluster.place(2, "m2", time=5)
    cluster.place(3, "m1", time=6)
    records = cluster.apply(lose)
    assert records == (
        TaskTransition(20, 1, TaskState.RUNNING, TaskState.EVICTED, cause, "m1", None),
        TaskTransition(20, 1, TaskState.EVICTED, TaskState.RUNNABLE, TransitionCause.REQUEUED),
        TaskTransition(20, 3, TaskState.RUNNING, TaskState.EVICTED, cause, "m1", None),
        TaskTransition(20, 3, TaskState.EVICTED, TaskState.RUNNABLE, TransitionCause.REQUEUED),
    )
    assert "m1" not in cluster.machines
    assert [t.task_id for t in cluster.runnable_tasks()] == [1, 3]
    for task_id, ran in ((1, 15), (3, 14)):
        task = cluster.task(task_id)
        assert (task.machine_id, task.eviction_count, task.runnable_since) == (None, 1, 20)
        assert task.run_time(100) == ran
    assert cluster.task(2).state is TaskState.RUNNING
    cluster.validate()
    cluster.place(1, "m2", time=21)  # a re-queued task can be placed again
    cluster.validate()


def test_machine_updates_may_not_strand_running_tasks() -> None:
    cluster = cluster_with(machine("m", slots=2), submit(1, request=CPU), submit(2))
    cluster.place(1, "m", time=1)
    cluster.place(2, "m", time=1)
    refused(
        cluster,
        lambda: cluster.apply(
            MachineUpdated(time=2, machine_id="m", capacity=Resources(cpu_millicores=1000))
        ),
        r"capacity is below .*ram_bytes 1073741824 > 0",
    )
    refused(
        cluster,
        lambda: cluster.apply(MachineUpdated(time=2, machine_id="m", slots=1)),
        "cannot have 1 slots: 2 tasks run on it",
    )
    cluster.apply(MachineUpdated(time=2, machine_id="m", slots=3, labels={"zone": "b"}))
    assert (cluster.machine("m").slots, dict(cluster.machine("m").labels)) == (3, {"zone": "b"})
    bigger = CPU + CPU
    cluster.apply(MachineUpdated(time=3, machine_id="m", capacity=bigger))
    assert cluster.machine("m").free == CPU
    cluster.validate()


def test_task_updates_move_the_reservation_of_a_running_task() -> None:
    cluster = cluster_with(machine("m", capacity=CPU + CPU), submit(1, request=CPU))
    cluster.place(1, "m", time=1)
    cluster.apply(TaskUpdated(time=2, task_id=1, request=CPU + CPU, priority=4))
    assert cluster.machine("m").reserved == CPU + CPU
    assert cluster.task(1).priority == 4
    refused(
        cluster,
        lambda: cluster.apply(TaskUpdated(time=3, task_id=1, request=CPU + CPU + CPU)),
        "new request does not fit on machine 'm'",
    )
    # Selectors are checked at placement only (Kubernetes' IgnoredDuringExecution).
    cluster.apply(TaskUpdated(time=3, task_id=1, selectors=(LabelSelector.exists("gpu"),)))
    assert cluster.task(1).state is TaskState.RUNNING
    cluster.validate()


# ---------------------------------------------------------------------- decisions


def test_placing_reserves_a_slot_and_the_request() -> None:
    cluster = cluster_with(machine("m", slots=2), submit(1, time=3, request=CPU))
    record = cluster.place(1, "m", time=10)
    assert record == TaskTransition(
        10, 1, TaskState.RUNNABLE, TaskState.RUNNING, TransitionCause.PLACED, None, "m"
    )
    task, m = cluster.task(1), cluster.machine("m")
    assert (task.state, task.machine_id, task.start_time) == (TaskState.RUNNING, "m", 10)
    assert (task.total_unscheduled_time, task.unscheduled_time(50)) == (7, 7)
    assert task.run_time(50) == 40
    assert (m.reserved, m.free_slots, list(m.running_task_ids)) == (CPU, 1, [1])
    assert cluster.placement_problem(1, "m") == "task 1 already runs there"
    cluster.validate()


def test_impossible_placements_are_refused_without_change() -> None:
    cluster = cluster_with(
        machine("small", slots=4, capacity=Resources(cpu_millicores=500, ram_bytes=1 << 30)),
        machine("full", slots=1),
        machine("zoned", slots=4, labels={"zone": "b"}),
        submit(1, request=CPU),
        submit(2),
        submit(3, selectors=(LabelSelector.equals("zone", "a"),)),
        submit(4),
    )
    cluster.place(4, "full", time=1)
    refused(
        cluster,
        lambda: cluster.place(1, "small", time=2),
        r"task 1 requests more than machine 'small' has free \(cpu_millicores 1000 > 500\)",
    )
    refused(cluster, lambda: cluster.place(2, "full", time=2), "'full' has no free slot")
    refused(
        cluster, lambda: cluster.place(3, "zoned", time=2), r"fail task 3's selectors \['zone=a'"
    )
    refused(cluster, lambda: cluster.place(4, "small", time=2), "running to running")
    refused(cluster, lambda: cluster.place(99, "small", time=2), "unknown task 99")
    refused(cluster, lambda: cluster.place(2, "nowhere", time=2), "unknown machine 'nowhere'")
    assert cluster.placement_problem(2, "small") is None
    assert "fail task 3's selectors" in str(cluster.placement_problem(3, "small"))  # no zone
    assert "fail task 3's selectors" in str(cluster.placement_problem(3, "zoned"))


def test_a_selector_for_a_missing_label_is_not_satisfied() -> None:
    cluster = cluster_with(machine("m"), submit(1, selectors=(LabelSelector.equals("zone", "a"),)))
    refused(cluster, lambda: cluster.place(1, "m", time=1), "fail task 1's selectors")


def test_preemption_requeues_and_frees_the_machine() -> None:
    cluster = cluster_with(machine("m"), submit(1, request=CPU))
    cluster.place(1, "m", time=2)
    records = cluster.preempt(1, time=7)
    assert [(r.from_state, r.to_state, r.cause, r.from_machine_id) for r in records] == [
        (TaskState.RUNNING, TaskState.EVICTED, TransitionCause.PREEMPTED, "m"),
        (TaskState.EVICTED, TaskState.RUNNABLE, TransitionCause.REQUEUED, None),
    ]
    task, m = cluster.task(1), cluster.machine("m")
    assert (task.state, task.eviction_count, task.total_run_time) == (TaskState.RUNNABLE, 1, 5)
    assert (m.reserved, m.free_slots) == (Resources(), 2)
    refused(
        cluster, lambda: cluster.preempt(1, time=8), "task 1 cannot go from runnable to evicted"
    )
    cluster.place(1, "m", time=9)
    assert cluster.task(1).total_unscheduled_time == 2 + 2
    cluster.validate()


def test_migration_moves_the_reservation_and_keeps_the_task_running() -> None:
    cluster = cluster_with(
        machine("a"), machine("b", slots=1), machine("c", slots=0), submit(1, request=CPU)
    )
    cluster.place(1, "a", time=1)
    record = cluster.migrate(1, "b", time=4)
    assert record == TaskTransition(
        4, 1, TaskState.RUNNING, TaskState.RUNNING, TransitionCause.MIGRATED, "a", "b"
    )
    assert (cluster.machine("a").reserved, cluster.machine("b").reserved) == (Resources(), CPU)
    assert cluster.task(1).start_time == 1
    refused(cluster, lambda: cluster.migrate(1, "b", time=5), "already runs there")
    refused(cluster, lambda: cluster.migrate(1, "c", time=5), "'c' has no free slot")
    cluster.apply(submit(2, time=5))
    refused(
        cluster, lambda: cluster.migrate(2, "a", time=5), "cannot migrate task 2: it is runnable"
    )
    cluster.validate()


def test_tasks_trade_places_between_full_machines_in_one_move() -> None:
    big = Resources(cpu_millicores=3000)
    cluster = cluster_with(
        machine("a", slots=1),
        machine("b", slots=1),
        machine("small", slots=2, capacity=Resources(cpu_millicores=2000)),
        submit(1, request=CPU),
        submit(2, request=CPU),
        submit(3, request=big),
    )
    cluster.place(1, "a", time=1)
    cluster.place(2, "b", time=1)
    refused(cluster, lambda: cluster.migrate(1, "b", time=2), "'b' has no free slot")
    records = cluster.migrate_many({1: "b", 2: "a"}, time=2)
    assert [(r.task_id, r.from_machine_id, r.to_machine_id) for r in records] == [
        (1, "a", "b"),
        (2, "b", "a"),
    ]
    assert cluster.now == 2
    cluster.validate()
    refused(cluster, lambda: cluster.migrate_many({1: "a"}, time=3), "running 2 tasks in 1 slots")
    refused(cluster, lambda: cluster.migrate_many({1: "b"}, time=3), "already runs there")
    refused(cluster, lambda: cluster.migrate_many({3: "a"}, time=3), "it is runnable")
    refused(cluster, lambda: cluster.migrate_many({1: "nope"}, time=3), "unknown machine")
    cluster.apply(MachineAdded(time=3, machine_id="c", capacity=big, slots=1))
    cluster.place(3, "c", time=3)
    # Both fit by slots, but 3's request does not fit in small's capacity: nothing moves.
    refused(
        cluster,
        lambda: cluster.migrate_many({1: "small", 3: "small"}, time=4),
        "overcommit machine 'small'",
    )
    refused(cluster, lambda: cluster.migrate_many({1: "c"}, time=1), "before the cluster's")


def test_the_clock_advances_only_forwards() -> None:
    cluster = cluster_with(machine("m"))
    cluster.advance_to(5)
    assert cluster.now == 5
    refused(cluster, lambda: cluster.advance_to(4), "before the cluster's current time")


def test_completion_frees_the_machine_and_records_times() -> None:
    cluster = cluster_with(machine("m"), submit(1, time=1, request=CPU))
    cluster.place(1, "m", time=4)
    (record,) = cluster.apply(TaskCompleted(time=9, task_id=1))
    assert (record.to_state, record.from_machine_id) == (TaskState.COMPLETED, "m")
    task = cluster.task(1)
    assert (task.finish_time, task.total_run_time, task.total_unscheduled_time) == (9, 5, 3)
    assert (task.machine_id, cluster.machine("m").reserved) == (None, Resources())
    cluster.validate()


def test_validate_reports_corrupted_bookkeeping() -> None:
    cluster = cluster_with(machine("m"), submit(1, request=CPU))
    cluster.place(1, "m", time=1)
    cluster.machine("m").reserved = Resources()
    with pytest.raises(InvariantViolation, match="machine 'm' reserves"):
        cluster.validate()
    cluster.machine("m").reserved = CPU
    cluster.task(1).machine_id = None
    with pytest.raises(InvariantViolation, match=r"task 1 \(running\) has machine None"):
        cluster.validate()


def test_the_same_changes_give_the_same_state() -> None:
    def run() -> ClusterState:
        cluster = cluster_with(
            *(machine(f"m{i}", slots=3, rack_id=f"r{i % 2}") for i in range(4)),
            *(submit(t, f"j{t % 3}", time=t) for t in range(12)),
        )
        for task_id in range(12):
            cluster.place(task_id, f"m{task_id % 4}", time=20)
        cluster.apply(MachineFailed(time=30, machine_id="m1"))
        return cluster

    assert snapshot(run()) == snapshot(run())
    assert [t.task_id for t in run().runnable_tasks()] == [1, 5, 9]


# ---------------------------------------------------------------------- random sequences

TASK_IDS = st.integers(0, 3)
MACHINE_IDS = st.sampled_from(["m0", "m1", "m2"])
SMALL = st.just(NO_RESOURCES) | st.builds(
    Resources,
    cpu_millicores=st.integers(0, 4),
    ram_bytes=st.integers(0, 4),
    net_rx_bytes_per_s=st.integers(0, 2),
)
"""Requests: the shared zero vector (placed without arithmetic), or any small vector."""
CAPACITIES = st.builds(
    Resources,
    cpu_millicores=st.integers(0, 10),
    ram_bytes=st.integers(0, 10),
    net_rx_bytes_per_s=st.integers(0, 5),
)
STEPS = st.sampled_from([-1, 0, 1, 1, 2, 3])
"""Time advances between changes, and now and then a change is dated in the past (refused)."""


N_MOVES = st.integers(0, 5)


class RandomChanges(RuleBasedStateMachine):
    """Events and decisions drawn from small id pools, so that unknown and duplicate ids, full
    machines and illegal transitions are common alongside changes that succeed. After every
    change the invariants hold, and a refused change has left the state as it was."""

    def __init__(self) -> None:
        super().__init__()
        self.cluster = ClusterState()
        self.succeeded: Counter[str] = Counter()

    def attempt(self, kind: str, change: Callable[[], object]) -> bool:
        before = snapshot(self.cluster)
        try:
            outcome = change()
        except ClusterError:
            assert snapshot(self.cluster) == before
            return False
        records = outcome if isinstance(outcome, tuple) else (outcome,)
        for record in records:
            assert isinstance(record, TaskTransition)
            assert record.time == self.cluster.now
        final = {r.task_id: r.to_state for r in records}
        for task_id, state in final.items():
            if state is None:
                assert task_id not in self.cluster.tasks
            else:
                assert self.cluster.tasks[task_id].state is state
        self.succeeded[kind] += 1
        return True

    def at(self, step: int) -> int:
        return max(0, self.cluster.now + step)

    def some_task(self, data: st.DataObject, *, favour_running: bool = False) -> int:
        """A task in the state (running ones twice as likely if `favour_running`), or now and
        then one that never was (submitted task ids are 0-3)."""
        candidates = [*self.cluster.tasks, 4]
        if favour_running:
            candidates += [t.task_id for t in self.cluster.tasks.values() if t.machine_id]
        return data.draw(st.sampled_from(candidates), label="task")

    def some_machine(self, data: st.DataObject) -> str:
        """A live machine, or now and then one that never was."""
        return data.draw(st.sampled_from([*self.cluster.machines, "m9"]), label="machine")

    @initialize()
    def start_with_machines_and_tasks(self) -> None:
        roomy = Resources(cpu_millicores=8, ram_bytes=8, net_rx_bytes_per_s=4)
        self.cluster.apply(machine("m0", capacity=roomy, labels={"zone": "a"}))
        self.cluster.apply(machine("m1", capacity=roomy, rack_id="r1", pod_id="p1"))
        self.cluster.apply(submit(0, "j0"))
        self.cluster.apply(submit(1, "j1", request=Resources(cpu_millicores=3)))

    @rule(task_id=TASK_IDS, job=st.sampled_from(["j0", "j1"]), request=SMALL, step=STEPS)
    def submit(self, task_id: int, job: str, request: Resources, step: int) -> None:
        selectors = (LabelSelector.equals("zone", "a"),) if task_id == 3 else ()
        event = TaskSubmitted(
            time=self.at(step), task_id=task_id, job_id=job, request=request, selectors=selectors
        )
        self.attempt("submit", lambda: self.cluster.apply(event))

    @rule(
        kind=st.sampled_from([TaskCompleted, TaskFailed, TaskRemoved]),
        data=st.data(),
        step=STEPS,
    )
    def end_task(
        self,
        kind: type[TaskCompleted | TaskFailed | TaskRemoved],
        data: st.DataObject,
        step: int,
    ) -> None:
        event = kind(time=self.at(step), task_id=self.some_task(data, favour_running=True))
        self.attempt(kind.__name__, lambda: self.cluster.apply(event))

    @rule(data=st.data(), request=SMALL, step=STEPS)
    def update_task(self, data: st.DataObject, request: Resources, step: int) -> None:
        event = TaskUpdated(time=self.at(step), task_id=self.some_task(data), request=request)
        self.attempt("update", lambda: self.cluster.apply(event))

    @rule(
        machine_id=MACHINE_IDS,
        capacity=CAPACITIES,
        slots=st.integers(0, 3),
        rack=st.sampled_from(["r0", "r1"]),
        pod=st.sampled_from(["p0", "p1"]),
        labels=st.sampled_from([{}, {"zone": "a"}, {"zone": "b"}]),
        step=STEPS,
    )
    def add_machine(
        self,
        machine_id: str,
        capacity: Resources,
        slots: int,
        rack: str,
        pod: str,
        labels: dict[str, str],
        step: int,
    ) -> None:
        event = MachineAdded(
            time=self.at(step),
            machine_id=machine_id,
            capacity=capacity,
            slots=slots,
            rack_id=rack,
            pod_id=pod,
            labels=labels,
        )
        self.attempt("add", lambda: self.cluster.apply(event))

    @rule(kind=st.sampled_from([MachineFailed, MachineRemoved]), data=st.data(), step=STEPS)
    def lose_machine(
        self, kind: type[MachineFailed | MachineRemoved], data: st.DataObject, step: int
    ) -> None:
        machine_id = self.some_machine(data)
        lost = self.cluster.machines.get(machine_id)
        running = list(lost.running_task_ids) if lost is not None else []
        event = kind(time=self.at(step), machine_id=machine_id)
        if self.attempt(kind.__name__, lambda: self.cluster.apply(event)):
            assert machine_id not in self.cluster.machines
            for task_id in running:
                assert self.cluster.tasks[task_id].state is TaskState.RUNNABLE
            if running:
                self.succeeded["tasks re-queued"] += 1

    @rule(data=st.data(), capacity=CAPACITIES, slots=st.integers(0, 3), step=STEPS)
    def update_machine(
        self, data: st.DataObject, capacity: Resources, slots: int, step: int
    ) -> None:
        machine_id = self.some_machine(data)
        event = MachineUpdated(
            time=self.at(step), machine_id=machine_id, capacity=capacity, slots=slots
        )
        self.attempt("machine update", lambda: self.cluster.apply(event))

    @rule(data=st.data(), step=STEPS)
    def place(self, data: st.DataObject, step: int) -> None:
        task_id, machine_id, time = self.some_task(data), self.some_machine(data), self.at(step)
        self.attempt("place", lambda: self.cluster.place(task_id, machine_id, time=time))

    @rule(data=st.data(), step=st.integers(0, 2))
    def place_many(self, data: st.DataObject, step: int) -> None:
        moves = {self.some_task(data): self.some_machine(data) for _ in range(data.draw(N_MOVES))}
        time = self.at(step)
        transitions, refused = self.cluster.place_many(moves, time=time)
        assert [r.task_id for r in transitions] == [t for t in moves if t not in refused]
        for record in transitions:
            assert self.cluster.tasks[record.task_id].machine_id == record.to_machine_id
        self.succeeded["place many"] += bool(transitions)

    @rule(data=st.data(), step=STEPS)
    def migrate(self, data: st.DataObject, step: int) -> None:
        task_id = self.some_task(data, favour_running=True)
        machine_id, time = self.some_machine(data), self.at(step)
        self.attempt("migrate", lambda: self.cluster.migrate(task_id, machine_id, time=time))

    @rule(data=st.data(), step=STEPS)
    def preempt(self, data: st.DataObject, step: int) -> None:
        task_id, time = self.some_task(data, favour_running=True), self.at(step)
        self.attempt("preempt", lambda: self.cluster.preempt(task_id, time=time))

    @invariant()
    def consistent(self) -> None:
        self.cluster.validate()
        # The same invariants, recomputed from the tasks' side rather than trusted.
        for m in self.cluster.machines.values():
            on_m = [t for t in self.cluster.tasks.values() if t.machine_id == m.machine_id]
            assert m.reserved == sum((t.request for t in on_m), Resources())
            assert len(on_m) == len(m.running_task_ids) <= m.slots
            assert m.reserved.fits_within(m.capacity)
        for t in self.cluster.tasks.values():
            assert (t.machine_id in self.cluster.machines) == (t.state is TaskState.RUNNING)
            assert t.state not in (TaskState.CREATED, TaskState.EVICTED)


RandomChanges.TestCase.settings = settings(max_examples=200, stateful_step_count=40, deadline=None)
test_random_changes_keep_the_invariants_and_refusals_change_nothing = RandomChanges.TestCase


@settings(max_examples=300, deadline=None)
@given(
    machines=st.lists(
        st.tuples(CAPACITIES, st.integers(0, 3), st.sampled_from([{}, {"zone": "a"}])),
        min_size=1,
        max_size=4,
    ),
    tasks=st.lists(st.tuples(SMALL, st.booleans()), min_size=1, max_size=8),
    running=st.lists(st.tuples(st.integers(0, 7), st.integers(0, 3)), max_size=4),
    moves=st.lists(st.tuples(st.integers(0, 8), st.integers(0, 4)), max_size=10),
)
def test_placing_many_at_once_is_placing_them_one_at_a_time(
    machines: list[tuple[Resources, int, dict[str, str]]],
    tasks: list[tuple[Resources, bool]],
    running: list[tuple[int, int]],
    moves: list[tuple[int, int]],
) -> None:
    """The same placements, refusals (and their reasons) and state, whether a batch of
    placements goes through `place_many` or through `place` in the batch's order: tasks
    unknown, already running or failing a machine's labels, machines unknown or filling up."""
    cluster = ClusterState()
    for index, (capacity, slots, labels) in enumerate(machines):
        cluster.apply(machine(f"m{index}", slots=slots, capacity=capacity, labels=labels))
    for task_id, (request, wants_zone) in enumerate(tasks):
        selectors = (LabelSelector.equals("zone", "a"),) if wants_zone else ()
        cluster.apply(submit(task_id, request=request, selectors=selectors))
    for task_id, index in running:  # some tasks run already (where they fit)
        with contextlib.suppress(ClusterError):
            cluster.place(task_id, f"m{index}", time=0)
    placements = {task_id: f"m{index}" for task_id, index in moves}
    one_by_one = pickle.loads(pickle.dumps(cluster))

    transitions, refused = cluster.place_many(placements, time=1)

    expected: list[TaskTransition] = []
    expected_refused: dict[int, str] = {}
    for task_id, machine_id in placements.items():
        try:
            expected.append(one_by_one.place(task_id, machine_id, time=1))
        except ClusterError as error:
            expected_refused[task_id] = str(error)
    assert transitions == expected
    assert refused == expected_refused
    assert snapshot(cluster) == snapshot(one_by_one)
    assert sorted(cluster.machines_touched_since(0)) == sorted(one_by_one.machines_touched_since(0))
    cluster.validate()


def test_placing_many_refuses_a_time_in_the_past_without_change() -> None:
    cluster = cluster_with(machine("m0"), submit(0, time=5))
    refused(cluster, lambda: cluster.place_many({0: "m0"}, time=4), "before the cluster's")


def test_the_cluster_slots_stay_within_a_flow_arcs_capacity() -> None:
    """Past the limit every round would fail (the aggregators' arcs would carry more than an
    arc may): such a machine, or such an update, is refused, and the state is unchanged."""
    half = CLUSTER_SLOTS_LIMIT // 2
    cluster = cluster_with(machine("a", slots=half), machine("b", slots=half))
    before = snapshot(cluster)
    with pytest.raises(ClusterError, match="over the limit"):
        cluster.apply(machine("c", slots=1))
    with pytest.raises(ClusterError, match="over the limit"):
        cluster.apply(MachineUpdated(time=0, machine_id="a", slots=half + 1))
    assert snapshot(cluster) == before
    cluster.apply(MachineRemoved(time=0, machine_id="b"))
    cluster.apply(MachineUpdated(time=0, machine_id="a", slots=half + 1))  # room again
    copy = pickle.loads(pickle.dumps(cluster))
    del copy.__dict__["_slots"]  # a state pickled before the total was kept
    copy.__setstate__(dict(copy.__dict__))
    with pytest.raises(ClusterError, match="over the limit"):
        copy.apply(machine("c", slots=half))
    copy.apply(machine("c", slots=half - 1))


# ---------------------------------------------------------------------- machines touched


def test_the_machines_touched_since_a_reading_are_those_whose_columns_changed() -> None:
    """A reader keeping per-machine columns (the graph manager) reads only these each round:
    every change a machine's statistics or labels can see must touch it."""
    cluster = cluster_with(machine("m1"), machine("m2"), machine("m3"), submit(1), submit(2))
    mark = cluster.machine_clock
    assert cluster.machines_touched_since(mark) == []
    cluster.place(1, "m1", time=1)
    cluster.apply(MachineStats(time=1, machine_id="m2", usage=CPU))
    assert cluster.machines_touched_since(mark) == ["m2", "m1"]  # most recent first
    mark = cluster.machine_clock
    cluster.apply(MachineUpdated(time=2, machine_id="m3", labels={"a": "b"}))
    cluster.apply(TaskUpdated(time=2, task_id=1, request=Resources(cpu_millicores=7)))
    assert cluster.machines_touched_since(mark) == ["m1", "m3"]
    mark = cluster.machine_clock
    cluster.migrate(1, "m2", time=3)
    cluster.apply(TaskCompleted(time=4, task_id=1))
    assert sorted(cluster.machines_touched_since(mark)) == ["m1", "m2"]
    mark = cluster.machine_clock
    cluster.apply(MachineRemoved(time=5, machine_id="m3"))
    cluster.apply(MachineAdded(time=5, machine_id="m4", capacity=CPU, slots=2))
    assert cluster.machines_touched_since(mark) == ["m4", "m3"]
    # Nothing else touches a machine: submissions, task stats, a waiting task's update.
    mark = cluster.machine_clock
    cluster.apply(submit(5, time=6))
    cluster.apply(TaskStats(time=6, task_id=2, usage=CPU))
    cluster.apply(TaskUpdated(time=6, task_id=2, priority=3))
    assert cluster.machines_touched_since(mark) == []
    # Two readers at different marks each see what changed since theirs.
    assert set(cluster.machines_touched_since(0)) == {"m1", "m2", "m3", "m4"}
