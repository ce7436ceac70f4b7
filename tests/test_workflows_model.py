"""Tests of the workflow model, workflow files, the timelines and the schedule validator:
bad input is refused with a message naming the offending element, files round-trip, and the
validator catches every kind of broken schedule (each test breaks one rule of a valid one)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from firmament_py.workflows import (
    ALGORITHMS,
    Platform,
    Schedule,
    ScheduleError,
    TaskRun,
    Transfer,
    Workflow,
    WorkflowError,
    schedule_problems,
    schedule_workflow,
    validate_schedule,
)
from firmament_py.workflows.files import read_workflow, write_workflow
from firmament_py.workflows.generators import simple_mapreduce
from firmament_py.workflows.model import check_instance
from firmament_py.workflows.timeline import Timeline, earliest_common_fit


def diamond() -> Workflow:
    return Workflow.build(
        {"s": 1, "a": 2, "b": 2, "d": 1},
        [("s", "a", 1), ("s", "b", 1), ("a", "d", 1), ("b", "d", 1)],
    )


# ---------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("sizes", "edges", "message"),
    [
        ({"a": 1, "b": 1, "c": 1}, [("a", "b", 1), ("b", "c", 1), ("c", "a", 1)], "cycle: a -> b"),
        ({"a": 1}, [("a", "a", 0)], "task 'a' depends on itself"),
        ({"a": 1}, [("a", "zz", 1)], "unknown task 'zz'"),
        ({"a": -1}, [], "task 'a': size -1 is negative"),
        ({"a": 1, "b": 1}, [("a", "b", -2)], "arc a -> b: data -2 is negative"),
        ({"a": float("nan")}, [], "task 'a': size must be finite"),
        ({"a": 1, "b": 1}, [("a", "b", 1), ("a", "b", 2)], "arc a -> b is given twice"),
    ],
)
def test_bad_workflows_are_refused_naming_the_element(
    sizes: dict[str, float], edges: list[tuple[str, str, float]], message: str
) -> None:
    with pytest.raises(WorkflowError, match=message.replace("(", r"\(")):
        Workflow.build(sizes, edges)


def test_duplicate_tasks_and_cross_job_arcs_are_refused() -> None:
    with pytest.raises(WorkflowError, match="task 'a' is defined twice"):
        Workflow.build([("a", 1.0), ("a", 2.0)])
    with pytest.raises(WorkflowError, match=r"arc a -> b joins two jobs \('x' and 'y'\)"):
        Workflow.build({"a": 1, "b": 1}, [("a", "b", 1)], {"a": "x", "b": "y"})


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Platform((1.0, -2.0)), "machine 1: speed -2.0 is negative"),
        (lambda: Platform((1.0, 0.0)), "machine 1: speed must be positive"),
        (lambda: Platform.links(2, capacity=-1), "machine 0: upload capacity -1 is negative"),
        (lambda: Platform.links(0), "at least one CPU machine"),
        (lambda: Platform((1.0,), "ether"), "unknown network 'ether'"),  # type: ignore[arg-type]
    ],
)
def test_bad_platforms_are_refused_naming_the_machine(make: object, message: str) -> None:
    with pytest.raises(WorkflowError, match=message):
        make()  # type: ignore[operator]


def test_no_network_machine_while_data_must_move_is_refused() -> None:
    workflow = diamond()
    platform = Platform.shared(3, channels=0)
    with pytest.raises(WorkflowError, match="no network machine, and arc s -> a carries data 1"):
        check_instance(workflow, platform)
    for name in ALGORITHMS:
        with pytest.raises(WorkflowError, match="no network machine"):
            schedule_workflow(workflow, platform, name)
    # One machine, or no data to move: nothing to send, so it is accepted.
    schedule_workflow(workflow, Platform.shared(1, channels=0), "glist")
    dry = Workflow.build({"a": 1, "b": 1}, [("a", "b", 0)])
    for name in ALGORITHMS:
        assert not schedule_workflow(dry, platform, name).transfers


def test_unknown_algorithm_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown algorithm 'heft'; known: list, glist"):
        schedule_workflow(diamond(), Platform.links(2), "heft")


# ---------------------------------------------------------------------- the model


def test_workflow_views() -> None:
    workflow = diamond()
    assert workflow.tasks == ("s", "a", "b", "d")
    assert workflow.layers == (0, 1, 1, 2)
    assert workflow.parents[3] == ((1, 1.0), (2, 1.0))
    assert workflow.jobs == ("s",)
    reverse = workflow.reversed()
    assert reverse.parents[0] == ((1, 1.0), (2, 1.0))
    assert reverse.layers == (2, 1, 1, 0)


def test_two_components_are_two_jobs() -> None:
    workflow = Workflow.build({"a": 1, "b": 1, "c": 1}, [("a", "b", 1)])
    assert workflow.jobs == ("a", "c")
    assert workflow.job_of == (0, 0, 1)


# ---------------------------------------------------------------------- files


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_files_round_trip(tmp_path: Path, suffix: str) -> None:
    workflow = simple_mapreduce(3, map_size=2, scatter=0.5, gather=1.5)
    platform = Platform.shared(3, channels=2, capacity=2)
    path = write_workflow(tmp_path / f"mr{suffix}", workflow, platform, name="mr")
    again, platform_again = read_workflow(path)
    assert again.tasks == workflow.tasks
    assert again.sizes == workflow.sizes
    assert again.edges == workflow.edges
    assert platform_again == platform


def test_file_errors_name_the_file_and_the_element(tmp_path: Path) -> None:
    cases = {
        "cycle.json": (
            {
                "tasks": [{"id": "a", "size": 1}, {"id": "b", "size": 1}],
                "arcs": [{"from": "a", "to": "b"}, {"from": "b", "to": "a"}],
            },
            "cycle: a -> b -> a",
        ),
        "unknown.json": (
            {"tasks": [{"id": "a", "size": 1}], "arcs": [{"from": "a", "to": "ghost", "data": 1}]},
            "unknown task 'ghost'",
        ),
        "size.json": ({"tasks": [{"id": "a", "size": "big"}]}, r"tasks\[0\] \('a'\): 'size'"),
        "field.json": ({"tasks": [{"id": "a", "size": 1, "cpu": 2}]}, "unknown field 'cpu'"),
        "speed.json": (
            {"tasks": [{"id": "a", "size": 1}], "platform": {"speeds": [1, -3]}},
            "machine 1: speed -3.0 is negative",
        ),
    }
    for name, (document, message) in cases.items():
        path = tmp_path / name
        path.write_text(json.dumps(document))
        with pytest.raises(WorkflowError, match=f"{name}: .*{message}"):
            read_workflow(path)
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    with pytest.raises(WorkflowError, match=r"broken\.json: not JSON"):
        read_workflow(broken)


# ---------------------------------------------------------------------- timelines


def test_timeline_fits_into_gaps_and_refuses_overlaps() -> None:
    timeline = Timeline()
    timeline.book(0, 2)
    timeline.book(3, 5)
    timeline.book(2, 3)  # merges into one interval
    assert len(timeline) == 1
    timeline.book(7, 8)
    assert timeline.earliest_fit(0, 2) == 5
    assert timeline.earliest_fit(0, 3) == 8
    with pytest.raises(ValueError, match="overlaps"):
        timeline.book(4, 6)
    other = Timeline()
    other.book(5, 6)
    assert earliest_common_fit([timeline, other], 0, 1) == 6
    assert earliest_common_fit([timeline, other], 0, 1, extra=[(9, 6, 7)], members=(9,)) == 8


# ---------------------------------------------------------------------- the validator


def hand_schedule() -> Schedule:
    """The diamond on two machines: s, a, d on machine 0, b on machine 1; s -> b and b -> d
    cross, on (up0, down1) and (up1, down0)."""
    runs = {
        "s": TaskRun("s", 0, 0.0, 1.0),
        "a": TaskRun("a", 0, 1.0, 3.0),
        "b": TaskRun("b", 1, 2.0, 4.0),
        "d": TaskRun("d", 0, 5.0, 6.0),
    }
    transfers = [
        Transfer("s", "b", 0, 1, (0, 3), 1.0, 2.0),
        Transfer("b", "d", 1, 0, (2, 1), 4.0, 5.0),
    ]
    return Schedule("by hand", diamond(), Platform.links(2), runs, transfers)


def test_the_validator_accepts_every_algorithms_schedule() -> None:
    for name in ALGORITHMS:
        schedule = schedule_workflow(diamond(), Platform.links(2), name)
        assert schedule_problems(schedule) == []


@pytest.mark.parametrize(
    "breakage",
    [
        "missing task",
        "overlap on a machine",
        "wrong duration",
        "missing transfer",
        "transfer too late",
        "transfer on the wrong links",
        "transfer to the wrong machine",
        "precedence",
        "useless transfer",
    ],
)
def test_the_validator_catches(breakage: str) -> None:
    schedule = validate_schedule(hand_schedule())
    runs, transfers = dict(schedule.runs), list(schedule.transfers)
    first = transfers[0]
    if breakage == "missing task":
        del runs["d"]
        message = "task 'd' never runs"
    elif breakage == "overlap on a machine":
        runs["b"] = dataclasses.replace(runs["b"], machine=0, start=1.0, end=3.0)
        message = "machine 0 runs tasks 'a' and 'b' at the same time"
    elif breakage == "wrong duration":
        runs["a"] = dataclasses.replace(runs["a"], end=2.5)
        message = "task 'a' runs for 1.5, not size / speed = 2"
    elif breakage == "missing transfer":
        transfers = transfers[1:]
        message = f"arc {first.source} -> {first.target} crosses machines"
    elif breakage == "transfer too late":
        transfers[0] = dataclasses.replace(first, start=1.5, end=2.5)
        message = "the data of s->b arrives after 'b' starts"
    elif breakage == "transfer on the wrong links":
        transfers[0] = dataclasses.replace(first, network=(0, 1))
        message = "s->b runs on network machines \\[0, 1\\], which do not join"
    elif breakage == "network overlap":
        transfers[1] = dataclasses.replace(transfers[1], network=(2, 3), to_machine=1)
        message = "b->d goes 1 -> 1, not 1 -> 0"
    elif breakage == "precedence":
        runs["a"] = dataclasses.replace(runs["a"], start=0.5, end=2.5)
        message = "task 'a' starts before its parent 's' ends"
    else:
        transfers.append(Transfer("s", "a", 0, 0, (0, 1), 1.0, 2.0))
        message = "network task s->a runs though both tasks share a machine"
    broken = dataclasses.replace(schedule, runs=runs, transfers=transfers)
    with pytest.raises(ScheduleError, match=message):
        validate_schedule(broken)


def test_the_validator_catches_two_transfers_on_one_link_at_once() -> None:
    workflow = Workflow.build({"a": 1, "b": 1, "c": 1}, [("a", "c", 1), ("b", "c", 1)])
    runs = {
        "a": TaskRun("a", 0, 0.0, 1.0),
        "b": TaskRun("b", 1, 0.0, 1.0),
        "c": TaskRun("c", 2, 2.0, 3.0),
    }
    transfers = [
        Transfer("a", "c", 0, 2, (0, 5), 1.0, 2.0),
        Transfer("b", "c", 1, 2, (2, 5), 1.0, 2.0),
    ]
    broken = Schedule("by hand", workflow, Platform.links(3), runs, transfers)
    with pytest.raises(ScheduleError, match="network machine down2 carries a->c and b->c"):
        validate_schedule(broken)
    transfers[1] = dataclasses.replace(transfers[1], start=2.0, end=3.0)
    runs["c"] = TaskRun("c", 2, 3.0, 4.0)
    validate_schedule(broken)  # the same lists, now valid
