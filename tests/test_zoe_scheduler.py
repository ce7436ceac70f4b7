"""Tests of Zoe's schedulers: the paper's Figure 1 with its exact turnaround times, Algorithms 1
and 2 step by step on small hand-checked cases, the baselines, refusal at submission, and, on
random workloads, that no scheduler over-allocates, core components are never taken back and
every application finishes."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from firmament_py.zoe.application import (
    Application,
    ApplicationRefused,
    Component,
    ComponentClass,
)
from firmament_py.zoe.capacity import GIB, ClusterCapacity, Demand
from firmament_py.zoe.flexible import FlexibleScheduler
from firmament_py.zoe.simulator import ZoeSimulator, make_scheduler
from firmament_py.zoe.sorting import load_sorting

UNIT = Demand(1000, GIB)
TEN_UNITS = ClusterCapacity.uniform(1, 10, 10)


def make(
    name: str, cores: int, elastic: int, work: float, *, arrival: float = 0.0, priority: int = 0
) -> Application:
    components = (Component(ComponentClass.CORE, UNIT),) * cores + (
        Component(ComponentClass.ELASTIC, UNIT),
    ) * elastic
    return Application(name, arrival, work, components, priority=priority)


def figure_1() -> list[Application]:
    """The paper's Figure 1: four requests of 3 core units each, 10 s each alone. The figure's
    elastic units and work are not in the text; these match every statement it makes (any two
    requests need more than 10 units together, B starts beside A, C runs 8 units when D waits)
    and give both numbers it states."""
    return [make("A", 3, 4, 50), make("B", 3, 3, 40), make("C", 3, 5, 60), make("D", 3, 2, 30)]


@pytest.mark.parametrize(
    ("scheduler", "finishes", "mean"),
    [
        ("rigid", {"A": 10, "B": 20, "C": 30, "D": 40}, 25.0),
        ("malleable", {"A": 10, "B": 17.5, "C": 25, "D": 35}, 21.875),
        ("flexible", {"A": 10, "B": 17.5, "C": 26.5, "D": 33.5}, 21.875),
    ],
)
def test_figure_1(scheduler: str, finishes: dict[str, float], mean: float) -> None:
    result = ZoeSimulator(figure_1(), TEN_UNITS, scheduler=scheduler).run()
    assert {k: r.finished for k, r in result.records.items()} == pytest.approx(finishes)
    assert result.summary()["turnaround_mean"] == pytest.approx(mean)


def test_figure_1_flexible_takes_one_unit_from_c_for_d() -> None:
    """At B's departure (17.5 s) the flexible scheduler admits D with its 3 core units and
    leaves C 4 elastic units (7 in all), where the malleable one gives C all 8 and D waits."""
    apps = {a.app_id: a for a in figure_1()}
    flexible = FlexibleScheduler(TEN_UNITS, load_sorting("fifo"))
    flexible.submit_together(list(apps.values()), 0)
    assert [a.app_id for a in flexible.serving] == ["A", "B"]
    assert flexible.grants == {"A": 4, "B": 0}
    flexible.complete("A", 10)
    assert [a.app_id for a in flexible.serving] == ["B", "C"]
    assert flexible.grants == {"B": 3, "C": 1}
    flexible.complete("B", 17.5)
    assert flexible.grants == {"C": 4, "D": 0}
    malleable = make_scheduler("malleable", TEN_UNITS)
    malleable.submit_together(list(apps.values()), 0)
    malleable.complete("A", 10)
    malleable.complete("B", 17.5)
    assert malleable.grants == {"C": 5} and [a.app_id for a in malleable.waiting] == ["D"]


# ---------------------------------------------------------------------- Algorithm 1


def test_algorithm_1_admits_until_s_can_saturate_the_cluster() -> None:
    scheduler = FlexibleScheduler(TEN_UNITS, load_sorting("fifo"))
    # X alone (3 + 2 = 5 units) cannot saturate 10: Y joins (3 + 1); now 9 < 10: Z joins.
    scheduler.submit_together([make("X", 3, 2, 9), make("Y", 3, 1, 9), make("Z", 3, 9, 9)], 0)
    assert [a.app_id for a in scheduler.serving] == ["X", "Y", "Z"]
    # Cascade in S's order: the one unit that 9 core units leave goes to X.
    assert scheduler.grants == {"X": 1, "Y": 0, "Z": 0}
    scheduler.submit(make("W", 3, 0, 9, arrival=1), 1)  # S saturates: W waits
    assert [a.app_id for a in scheduler.waiting] == ["W"]


def test_algorithm_1_head_of_line_blocks_and_arrivals_behind_it_wait() -> None:
    scheduler = FlexibleScheduler(TEN_UNITS, load_sorting("fifo"))
    scheduler.submit(make("big", 8, 0, 80), 0)
    scheduler.submit(make("mid", 3, 0, 9, arrival=1), 1)  # 8 + 3 > 10: waits at the head
    small = Application("small", 2, 1, (Component(ComponentClass.CORE, UNIT),), coordinators=0)
    scheduler.submit(small, 2)  # 1 unit would fit, but it is not the head: no backfilling
    assert [a.app_id for a in scheduler.serving] == ["big"]
    assert [a.app_id for a in scheduler.waiting] == ["mid", "small"]
    scheduler.complete("big", 10)
    assert [a.app_id for a in scheduler.serving] == ["mid", "small"]


def test_algorithm_1_an_arrival_takes_only_unused_resources() -> None:
    scheduler = FlexibleScheduler(TEN_UNITS, load_sorting("fifo"))
    scheduler.submit(make("greedy", 3, 7, 10), 0)  # all 10 units
    assert scheduler.grants == {"greedy": 7}
    scheduler.submit(make("late", 3, 0, 3, arrival=1), 1)
    # Nothing is unused, so the arrival waits; the greedy one keeps its elastic components.
    assert scheduler.grants == {"greedy": 7} and scheduler.waiting[0].app_id == "late"
    scheduler.complete("greedy", 5)
    assert scheduler.grants == {"late": 0}


# ---------------------------------------------------------------------- Algorithm 2


def test_algorithm_2_a_higher_priority_arrival_takes_elastic_components() -> None:
    scheduler = FlexibleScheduler(TEN_UNITS, load_sorting("fifo"), preemptive=True)
    scheduler.submit(make("batch", 3, 7, 100), 0)
    assert scheduler.grants == {"batch": 7}
    scheduler.submit(make("urgent", 3, 2, 10, arrival=1, priority=1), 1)
    # Straight into S, ahead of batch: 3 cores and its 2 elastic from batch's 7.
    assert [a.app_id for a in scheduler.serving] == ["urgent", "batch"]
    assert scheduler.grants == {"urgent": 2, "batch": 2}
    # Batch keeps its core components: S's cores fit, whatever happens to grants.
    assert scheduler.core_total().fits_in(scheduler.total)


def test_algorithm_2_waits_in_w_when_cores_do_not_fit_and_w_goes_first() -> None:
    scheduler = FlexibleScheduler(TEN_UNITS, load_sorting("fifo"), preemptive=True)
    scheduler.submit(make("rigid", 8, 0, 80), 0)
    scheduler.submit(make("normal", 3, 0, 3, arrival=1), 1)  # lower priority: L
    scheduler.submit(make("urgent", 3, 0, 3, arrival=2, priority=1), 2)  # 8 + 3 > 10: W
    assert [a.app_id for a in scheduler.auxiliary] == ["urgent"]
    assert [a.app_id for a in scheduler.waiting] == ["normal"]
    assert scheduler.pending == 2
    scheduler.complete("rigid", 10)
    # W first, then L while S cannot saturate: both fit (6 of 10 units).
    assert [a.app_id for a in scheduler.serving] == ["urgent", "normal"]
    assert not scheduler.auxiliary and not scheduler.waiting


def test_algorithm_2_equal_priority_goes_to_the_line() -> None:
    scheduler = FlexibleScheduler(TEN_UNITS, load_sorting("fifo"), preemptive=True)
    scheduler.submit(make("first", 3, 7, 100), 0)
    scheduler.submit(make("second", 3, 7, 100, arrival=1), 1)
    assert [a.app_id for a in scheduler.waiting] == ["second"]
    assert scheduler.grants == {"first": 7}


# ---------------------------------------------------------------------- refusal


def test_applications_that_can_never_run_are_refused_at_submission() -> None:
    scheduler = FlexibleScheduler(TEN_UNITS, load_sorting("fifo"))
    with pytest.raises(ApplicationRefused, match="'huge': its core components need 11 cores"):
        scheduler.submit(make("huge", 11, 0, 10), 0)
    wide = Application(
        "wide",
        0,
        10,
        (Component(ComponentClass.CORE, UNIT),) * 3
        + (Component(ComponentClass.ELASTIC, Demand(12_000, GIB)),),
    )
    with pytest.raises(ApplicationRefused, match=r"'wide': components\[3\] \(elastic\).*any"):
        scheduler.submit(wide, 0)
    assert not scheduler.waiting and not scheduler.serving
    rigid = make_scheduler("rigid", TEN_UNITS)
    with pytest.raises(ApplicationRefused, match="all components or none"):
        rigid.submit(make("elastic", 3, 8, 10), 0)  # fine for the flexible scheduler
    result = ZoeSimulator([make("huge", 11, 0, 10), make("ok", 3, 0, 1)], TEN_UNITS).run()
    assert result.records["huge"].refused is not None and result.records["ok"].finished == 1


def test_preemption_only_for_the_flexible_scheduler() -> None:
    with pytest.raises(ValueError, match="only the flexible scheduler preempts"):
        make_scheduler("malleable", TEN_UNITS, preemptive=True)


# ---------------------------------------------------------------------- random workloads


@st.composite
def workloads(draw: st.DrawFn) -> list[Application]:
    count = draw(st.integers(1, 12))
    apps = []
    for index in range(count):
        cores = draw(st.integers(3, 6))
        elastic = draw(st.integers(0, 8))
        cpu = draw(st.sampled_from([500, 1000, 2000]))
        ram = draw(st.sampled_from([1, 2, 4])) * GIB
        request = Demand(cpu, ram)
        components = (Component(ComponentClass.CORE, request),) * cores + (
            Component(ComponentClass.ELASTIC, request),
        ) * elastic
        apps.append(
            Application(
                f"app{index}",
                draw(st.integers(0, 50)) / 2,
                draw(st.integers(1, 200)),
                components,
                priority=draw(st.integers(0, 1)),
            )
        )
    return apps


SCHEDULERS = [
    ("flexible", False),
    ("flexible", True),
    ("rigid", False),
    ("malleable", False),
]


class Watching(ZoeSimulator):
    """Checks the invariants after every event."""

    def _realize(self) -> None:
        before = {a.app_id for a in self.scheduler.serving}
        started = {a for a, r in self.result.records.items() if r.started is not None}
        super()._realize()
        scheduler = self.scheduler
        assert scheduler.allocated().fits_in(scheduler.total)
        serving = {a.app_id for a in scheduler.serving}
        finished = {a for a, r in self.result.records.items() if r.finished is not None}
        # An application that started leaves service only by finishing: its core components
        # are never taken back.
        assert started - finished <= serving
        assert before - finished <= serving
        for application in scheduler.serving:
            assert 0 <= scheduler.grants[application.app_id] <= len(application.elastic)


@settings(max_examples=150, deadline=None)
@given(workloads(), st.sampled_from(SCHEDULERS), st.sampled_from(["fifo", "sjf", "srpt", "hrrn"]))
def test_random_workloads(
    apps: list[Application], scheduler: tuple[str, bool], sorting: str
) -> None:
    capacity = ClusterCapacity.uniform(2, 8, 16)
    name, preemptive = scheduler
    result = Watching(apps, capacity, scheduler=name, sorting=sorting, preemptive=preemptive).run()
    for record in result.records.values():
        if record.refused is None:
            assert record.finished is not None, record
            assert record.queuing is not None and record.queuing >= 0
            assert record.slowdown is not None and record.slowdown >= 1 - 1e-9
