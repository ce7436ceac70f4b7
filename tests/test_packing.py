"""The SDK's packing helper: request classes and the dealing of each machine's free room, which
must never overfill a machine and leave nothing that still fits."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from firmament_py.model import ClusterState, LabelSelector, TaskSubmitted
from firmament_py.model.resources import Resources
from firmament_py.sdk import TaskView
from firmament_py.sdk.answers import ArcColumns, TaskArcs
from firmament_py.sdk.packing import deal_room, request_classes


def dealt_one_by_one(
    requests: list[tuple[int, ...]], demands: list[int], room: list[int], slots: int
) -> list[int]:
    """The dealing as its definition says it, one task at a time: each class still in the turn
    takes one task if it fits, else leaves, until nobody is left or no slot."""
    shares = [0] * len(demands)
    room = list(room)
    turn = [k for k, demand in enumerate(demands) if demand > 0]
    while turn and slots > 0:
        still: list[int] = []
        for k in turn:
            fits = all(q <= r for q, r in zip(requests[k], room, strict=True))
            if slots > 0 and shares[k] < demands[k] and fits:
                shares[k] += 1
                room = [r - q for r, q in zip(room, requests[k], strict=True)]
                slots -= 1
                if shares[k] < demands[k]:
                    still.append(k)
        turn = still
    return shares


machines_and_classes = st.integers(1, 4).flatmap(
    lambda dims: st.tuples(
        st.lists(st.tuples(*[st.integers(0, 6)] * dims), min_size=0, max_size=5),
        st.lists(
            st.tuples(
                st.lists(st.integers(0, 30), min_size=dims, max_size=dims), st.integers(0, 15)
            ),
            min_size=1,
            max_size=4,
        ),
        st.data(),
    )
)


def dealt(case: tuple) -> tuple:  # type: ignore[type-arg]
    """The case's classes, machines and allowed matrix, and `deal_room`'s shares for them."""
    requests, machines, data = case
    demands = [data.draw(st.integers(0, 8)) for _ in requests]
    allowed = np.array(
        [[data.draw(st.booleans()) for _ in requests] for _ in machines], dtype=np.bool_
    ).reshape(len(machines), len(requests))
    dims = len(machines[0][0])
    shares = deal_room(
        np.array(requests, dtype=np.int64).reshape(len(requests), dims),
        np.array(demands, dtype=np.int64),
        np.array([room for room, _ in machines], dtype=np.int64),
        np.array([slots for _, slots in machines], dtype=np.int64),
        allowed,
    )
    return requests, demands, machines, allowed, shares


@settings(max_examples=300, deadline=None)
@given(case=machines_and_classes)
def test_the_dealing_never_overfills_and_leaves_nothing_that_fits(case: tuple) -> None:  # type: ignore[type-arg]
    requests, demands, machines, allowed, shares = dealt(case)
    dims = len(machines[0][0])
    matrix = np.array(requests, dtype=np.int64).reshape(-1, dims)
    for m, (room, slots) in enumerate(machines):
        assert all(shares[m, k] == 0 for k in range(len(requests)) if not allowed[m, k])
        # Never more than the machine has, never more than a class waits for.
        used = matrix.T @ shares[m] if requests else np.zeros(dims, dtype=np.int64)
        assert np.all(used <= np.array(room)) and shares[m].sum() <= slots
        assert np.all(shares[m] <= np.array(demands, dtype=np.int64))
        # Nothing left that a class with demand left on this machine could take.
        left = np.array(room) - used
        for k in range(len(requests)):
            if allowed[m, k] and shares[m, k] < demands[k] and shares[m].sum() < slots:
                assert not np.all(matrix[k] <= left), (m, k)


@settings(max_examples=300, deadline=None)
@given(case=machines_and_classes.filter(lambda case: len(case[1]) == 1))
def test_one_machine_is_dealt_one_task_at_a_time(case: tuple) -> None:  # type: ignore[type-arg]
    requests, demands, machines, allowed, shares = dealt(case)
    (room, slots) = machines[0]
    mine = [k for k in range(len(requests)) if allowed[0, k]]
    expected = dealt_one_by_one(
        [requests[k] for k in mine], [demands[k] for k in mine], room, slots
    )
    assert [int(shares[0, k]) for k in mine] == expected


@settings(max_examples=200, deadline=None)
@given(
    slots=st.lists(st.integers(0, 12), min_size=1, max_size=8),
    demands=st.lists(st.integers(0, 10), min_size=1, max_size=12),
)
def test_every_class_gets_its_demand_where_the_cluster_has_the_slots(
    slots: list[int], demands: list[int]
) -> None:
    """The first classes in the order do not take every machine's room while others wait: with
    slots for every waiting task somewhere, every class is dealt all it waits for."""
    if sum(slots) < sum(demands):
        demands = demands[
            : max(i for i in range(len(demands) + 1) if sum(demands[:i]) <= sum(slots))
        ]
    shares = deal_room(
        np.zeros((len(demands), 1), dtype=np.int64),
        np.array(demands, dtype=np.int64),
        np.zeros((len(slots), 1), dtype=np.int64),
        np.array(slots, dtype=np.int64),
        np.ones((len(slots), len(demands)), dtype=np.bool_),
    )
    assert np.all(shares.sum(axis=0) >= np.array(demands, dtype=np.int64))


def test_many_classes_on_many_machines_are_all_dealt_their_demand() -> None:
    """The case that starved: 500 request classes of 24 tasks on 1,000 machines of 12 slots
    (each pass of the old dealing gave the first 12 classes every machine's slots)."""
    rng = np.random.default_rng(0)
    shares = deal_room(
        rng.integers(1, 50, (500, 2)) * 10,
        np.full(500, 24, dtype=np.int64),
        np.full((1000, 2), 4000, dtype=np.int64),
        np.full(1000, 12, dtype=np.int64),
        np.ones((1000, 500), dtype=np.bool_),
    )
    assert shares.sum(axis=0).min() == 24


def test_request_classes_count_the_waiting_tasks_of_each_name() -> None:
    state = ClusterState()
    small, big = Resources(cpu_millicores=100), Resources(cpu_millicores=900)
    zone = (LabelSelector.equals("zone", "a"),)
    for task_id, request, selectors in (
        (1, small, ()),
        (2, big, ()),
        (3, small, ()),
        (4, small, zone),
    ):
        state.apply(
            TaskSubmitted(time=0, task_id=task_id, job_id="j", request=request, selectors=selectors)
        )
    tasks = [TaskView(task) for task in state.tasks.values()]
    found = request_classes(tasks, lambda t: f"{t.request.cpu_millicores}|{len(t.selectors)}")
    assert [(c.name, c.waiting, c.selectors) for c in found.values()] == [
        ("100|0", 2, ()),
        ("900|0", 1, ()),
        ("100|1", 1, zone),
    ]
    with pytest.raises(ValueError, match="class 'all' holds tasks with different requests"):
        request_classes(tasks, lambda t: "all")


def test_answers_refuse_columns_that_are_not_integers() -> None:
    with pytest.raises(TypeError, match="cost must be integers, got an array of float64"):
        ArcColumns(np.array([1.5]))
    with pytest.raises(TypeError, match="capacity must be integers, not a bool"):
        ArcColumns(0, capacity=True)
    with pytest.raises(TypeError, match="min_flow must be integers, got an array of bool"):
        TaskArcs.one_each(["a"], min_flow=np.array([True]))
    with pytest.raises(TypeError, match="one-dimensional"):
        ArcColumns(np.zeros((2, 2), dtype=np.int64))
