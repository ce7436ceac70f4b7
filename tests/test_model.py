"""Tests of the model's values: resource vectors, labels and selectors, the task state machine,
and the checks events make when they are constructed."""

from __future__ import annotations

import dataclasses
import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from firmament_py.model import (
    ALLOWED_TRANSITIONS,
    FINAL_STATES,
    IllegalTransition,
    LabelSelector,
    MachineAdded,
    MachineUpdated,
    Resources,
    SelectorOp,
    TaskState,
    TaskStats,
    TaskSubmitted,
    TaskUpdated,
    check_transition,
    freeze_labels,
    matches,
)
from firmament_py.model.ids import INT64_MAX, INT64_MIN

# ---------------------------------------------------------------------- resources

int64s = st.integers(min_value=INT64_MIN // 4, max_value=INT64_MAX // 4)
vectors = st.builds(Resources, int64s, int64s, int64s, int64s, int64s)


def test_resources_default_to_zero_and_keep_their_units() -> None:
    r = Resources(cpu_millicores=1500, ram_bytes=2**30)
    assert r.as_tuple() == (1500, 2**30, 0, 0, 0)
    assert Resources().as_tuple() == (0, 0, 0, 0, 0)
    assert tuple(f.name for f in dataclasses.fields(Resources)) == Resources.DIMENSIONS


def test_resources_add_and_subtract_per_dimension() -> None:
    a = Resources(1, 2, 3, 4, 5)
    b = Resources(10, 20, 30, 40, 50)
    assert a + b == Resources(11, 22, 33, 44, 55)
    assert b - a == Resources(9, 18, 27, 36, 45)
    assert (a - b).as_tuple() == (-9, -18, -27, -36, -45)


@given(vectors, vectors)
def test_resource_arithmetic_is_exact(a: Resources, b: Resources) -> None:
    assert (a + b) - b == a
    assert a + b == b + a
    assert a.fits_within(a + b) == b.is_non_negative()


def test_resources_refuse_non_ints_and_values_outside_int64() -> None:
    with pytest.raises(TypeError, match="ram_bytes"):
        Resources(ram_bytes=1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="cpu_millicores"):
        Resources(cpu_millicores=True)
    with pytest.raises(ValueError, match="disk_bytes"):
        Resources(disk_bytes=INT64_MAX + 1)
    with pytest.raises(ValueError, match="int64"):
        _ = Resources(cpu_millicores=INT64_MAX) + Resources(cpu_millicores=1)
    with pytest.raises(ValueError, match="int64"):
        _ = Resources(net_tx_bytes_per_s=INT64_MIN) - Resources(net_tx_bytes_per_s=1)


def test_resources_are_immutable() -> None:
    r = Resources(cpu_millicores=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.cpu_millicores = 2  # type: ignore[misc]


def test_fits_within_needs_every_dimension_to_fit() -> None:
    capacity = Resources(cpu_millicores=4000, ram_bytes=8 << 30, net_rx_bytes_per_s=1000)
    assert Resources(cpu_millicores=4000, ram_bytes=8 << 30).fits_within(capacity)
    assert Resources().fits_within(capacity)
    too_much = Resources(cpu_millicores=100, net_rx_bytes_per_s=1001)
    assert not too_much.fits_within(capacity)
    assert too_much.exceeded_dimensions(capacity) == ("net_rx_bytes_per_s",)
    assert too_much.describe_excess(capacity) == "net_rx_bytes_per_s 1001 > 1000"


def test_non_negative_checks_name_the_negative_dimensions() -> None:
    assert Resources(0, 1, 2, 3, 4).is_non_negative()
    negative = Resources(cpu_millicores=-1, disk_bytes=-5)
    assert not negative.is_non_negative()
    with pytest.raises(ValueError, match=r"a request .*cpu_millicores=-1, disk_bytes=-5"):
        negative.require_non_negative("a request")


# ---------------------------------------------------------------------- labels


def test_selectors_follow_kubernetes_semantics() -> None:
    labels = freeze_labels({"zone": "a", "disk": "ssd"})
    assert LabelSelector.equals("zone", "a").matches(labels)
    assert not LabelSelector.equals("zone", "b").matches(labels)
    assert LabelSelector.is_in("zone", "b", "a").matches(labels)
    assert not LabelSelector.is_in("gpu", "yes").matches(labels)
    assert LabelSelector.not_in("zone", "b", "c").matches(labels)
    assert not LabelSelector.not_in("zone", "a").matches(labels)
    assert LabelSelector.not_in("gpu", "yes").matches(labels)  # an absent key is "not in"
    assert LabelSelector.exists("disk").matches(labels)
    assert not LabelSelector.exists("gpu").matches(labels)
    assert LabelSelector.does_not_exist("gpu").matches(labels)
    assert not LabelSelector.does_not_exist("disk").matches(labels)


def test_matches_is_a_conjunction() -> None:
    labels = {"zone": "a", "disk": "ssd"}
    assert matches([], labels)
    assert matches([LabelSelector.equals("zone", "a"), LabelSelector.exists("disk")], labels)
    assert not matches([LabelSelector.equals("zone", "a"), LabelSelector.exists("gpu")], labels)


def test_selectors_validate_their_values() -> None:
    with pytest.raises(ValueError, match="at least one value"):
        LabelSelector.is_in("zone")
    with pytest.raises(ValueError, match="takes no values"):
        LabelSelector("zone", SelectorOp.EXISTS, ("a",))
    with pytest.raises(ValueError, match="non-empty"):
        LabelSelector.exists("")
    with pytest.raises(TypeError, match="not the str"):
        LabelSelector("zone", SelectorOp.IN, "ab")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="must be str"):
        LabelSelector("zone", SelectorOp.IN, (1,))  # type: ignore[arg-type]


def test_selectors_normalise_values_and_print_like_kubernetes() -> None:
    selector = LabelSelector.is_in("zone", "b", "a", "b")
    assert selector.values == ("a", "b")
    assert selector == LabelSelector.is_in("zone", "a", "b")
    assert str(selector) == "zone in (a,b)"
    assert str(LabelSelector.equals("zone", "a")) == "zone=a"
    assert str(LabelSelector.not_in("zone", "a")) == "zone notin (a)"
    assert str(LabelSelector.exists("gpu")) == "gpu"
    assert str(LabelSelector.does_not_exist("gpu")) == "!gpu"


def test_frozen_labels_are_a_read_only_copy() -> None:
    source = {"zone": "a"}
    frozen = freeze_labels(source)
    source["zone"] = "b"
    assert frozen["zone"] == "a"
    with pytest.raises(TypeError):
        frozen["zone"] = "c"  # type: ignore[index]
    with pytest.raises(TypeError, match="str value"):
        freeze_labels({"zone": 1})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="key"):
        freeze_labels({"": "x"})


# ---------------------------------------------------------------------- states

EXPECTED_TRANSITIONS = {
    (TaskState.CREATED, TaskState.RUNNABLE),
    (TaskState.CREATED, TaskState.FAILED),
    (TaskState.RUNNABLE, TaskState.RUNNING),
    (TaskState.RUNNABLE, TaskState.FAILED),
    (TaskState.RUNNING, TaskState.COMPLETED),
    (TaskState.RUNNING, TaskState.FAILED),
    (TaskState.RUNNING, TaskState.EVICTED),
    (TaskState.EVICTED, TaskState.RUNNABLE),
    (TaskState.EVICTED, TaskState.FAILED),
}


def test_transition_table_is_the_documented_one() -> None:
    table = {(a, b) for a, nexts in ALLOWED_TRANSITIONS.items() for b in nexts}
    assert table == EXPECTED_TRANSITIONS
    assert set(ALLOWED_TRANSITIONS) == set(TaskState)
    assert {TaskState.COMPLETED, TaskState.FAILED} == FINAL_STATES


@pytest.mark.parametrize(("from_state", "to_state"), list(itertools.product(TaskState, TaskState)))
def test_every_transition_is_allowed_or_refused_by_name(
    from_state: TaskState, to_state: TaskState
) -> None:
    if (from_state, to_state) in EXPECTED_TRANSITIONS:
        check_transition(7, from_state, to_state)
        return
    with pytest.raises(IllegalTransition) as refused:
        check_transition(7, from_state, to_state)
    message = str(refused.value)
    assert message == f"task 7 cannot go from {from_state.value} to {to_state.value}"
    assert (refused.value.task_id, refused.value.from_state, refused.value.to_state) == (
        7,
        from_state,
        to_state,
    )
    assert isinstance(refused.value, ValueError)


# ---------------------------------------------------------------------- events


def test_events_are_frozen_and_copy_their_labels() -> None:
    labels = {"zone": "a"}
    event = TaskSubmitted(time=5, task_id=1, job_id="j", labels=labels)
    labels["zone"] = "b"
    assert event.labels == {"zone": "a"}
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.time = 6  # type: ignore[misc]


@pytest.mark.parametrize(
    ("make", "error", "pattern"),
    [
        (lambda: TaskSubmitted(time=-1, task_id=1, job_id="j"), ValueError, "time"),
        (lambda: TaskSubmitted(time=1.0, task_id=1, job_id="j"), TypeError, "time"),  # type: ignore[arg-type]
        (lambda: TaskSubmitted(time=0, task_id=-1, job_id="j"), ValueError, "task id"),
        (lambda: TaskSubmitted(time=0, task_id="1", job_id="j"), TypeError, "task id"),  # type: ignore[arg-type]
        (lambda: TaskSubmitted(time=0, task_id=1, job_id=""), ValueError, "job id"),
        (
            lambda: TaskSubmitted(
                time=0, task_id=1, job_id="j", request=Resources(cpu_millicores=-1)
            ),
            ValueError,
            "request must not be negative",
        ),
        (
            lambda: TaskSubmitted(time=0, task_id=1, job_id="j", selectors=("zone=a",)),  # type: ignore[arg-type]
            TypeError,
            "LabelSelector",
        ),
        (
            lambda: TaskUpdated(time=0, task_id=1, priority=INT64_MAX + 1),
            ValueError,
            "priority",
        ),
        (
            lambda: MachineAdded(time=0, machine_id="m", capacity=Resources(), slots=-1),
            ValueError,
            "slots",
        ),
        (
            lambda: MachineAdded(time=0, machine_id="m", capacity=Resources(), slots=1, rack_id=""),
            ValueError,
            "rack id",
        ),
        (
            lambda: MachineUpdated(time=0, machine_id="m", capacity=Resources(ram_bytes=-1)),
            ValueError,
            "capacity",
        ),
        (lambda: TaskStats(time=0, task_id=1, usage=(1, 2)), TypeError, "Resources"),  # type: ignore[arg-type]
    ],
)
def test_malformed_events_fail_where_they_are_made(
    make: object, error: type[Exception], pattern: str
) -> None:
    assert callable(make)
    with pytest.raises(error, match=pattern):
        make()
