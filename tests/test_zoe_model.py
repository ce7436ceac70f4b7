"""Tests of Zoe's application model: the service model, elastic grants in two dimensions, the
size definitions of the paper's Table 2 (with its A1/A2 example), the sorting plugins, and bad
input refused with the application and field named."""

from __future__ import annotations

import pytest

from firmament_py.zoe.application import (
    Application,
    ApplicationError,
    Component,
    ComponentClass,
    application_from_mapping,
    applications_from_json,
)
from firmament_py.zoe.capacity import GIB, MAX_MACHINES, ClusterCapacity, Demand
from firmament_py.zoe.hookspecs import hookimpl
from firmament_py.zoe.simulator import ZoeSimulator
from firmament_py.zoe.sorting import (
    SizeDefinition,
    SortingError,
    SortingPolicy,
    application_size,
    load_sorting,
)
from firmament_py.zoe.workload import MAX_APPLICATIONS, WorkloadSpec

UNIT = Demand(1000, GIB)
CORE = ComponentClass.CORE
ELASTIC = ComponentClass.ELASTIC


def make(
    name: str, cores: int, elastic: int, work: float, *, arrival: float = 0.0, **kwargs: object
) -> Application:
    components = (Component(CORE, UNIT),) * cores + (Component(ELASTIC, UNIT),) * elastic
    return Application(name, arrival, work, components, **kwargs)  # type: ignore[arg-type]


def test_the_service_model_counts_all_but_two_core_components() -> None:
    app = make("a", 3, 4, 50)
    assert app.productive_cores == 1
    assert app.rate(0) == 1 and app.rate(4) == 5
    assert app.nominal_runtime == 10
    assert app.full_demand == UNIT * 7 and app.core_demand == UNIT * 3


def test_elastic_grants_respect_both_dimensions_and_what_is_granted() -> None:
    components = (Component(CORE, UNIT),) * 3 + (
        Component(ELASTIC, Demand(1000, 4 * GIB)),
        Component(ELASTIC, Demand(2000, GIB)),
        Component(ELASTIC, Demand(1000, GIB)),
    )
    app = Application("a", 0, 10, components)
    assert app.elastic_fitting(Demand(10_000, 4 * GIB)) == 1
    assert app.elastic_fitting(Demand(3000, 100 * GIB)) == 2
    assert app.elastic_fitting(Demand(999, 100 * GIB)) == 0
    assert app.elastic_fitting(Demand(3000, 2 * GIB), granted=1) == 2
    assert app.elastic_demand(3) == Demand(4000, 6 * GIB)


def test_table_2_size_definitions() -> None:
    components = (Component(CORE, Demand(2000, 4 * GIB)),) * 3 + (
        Component(ELASTIC, Demand(1000, 2 * GIB)),
    ) * 2
    app = Application("a", 0, 30, components)  # runtime 30 / (1 + 2) = 10
    assert application_size(app, SizeDefinition.RUNTIME) == 10
    assert application_size(app, SizeDefinition.RUNTIME_X_COMPONENTS) == 50
    assert application_size(app, SizeDefinition.RUNTIME_X_CPU_RAM) == 10 * (3 * 8 + 2 * 2)
    with pytest.raises(ValueError, match="unknown size definition"):
        application_size(app, "volume")


@pytest.mark.parametrize(("sorting", "mean"), [("sjf", 3.5), ("sjf-2d", 4.0)])
def test_the_papers_size_example(sorting: str, mean: float) -> None:
    """Section 4.4: A1 needs 10 units for 2 s, A2 6 units for 3 s, on 10 units. By runtime A1
    goes first (mean turnaround 3.5 s); by runtime x components A2 does (4 s)."""
    apps = [make("A1", 10, 0, 20, coordinators=0), make("A2", 6, 0, 18, coordinators=0)]
    capacity = ClusterCapacity.uniform(1, 10, 10)
    for scheduler in ("rigid", "flexible"):
        result = ZoeSimulator(apps, capacity, scheduler=scheduler, sorting=sorting).run()
        assert result.summary()["turnaround_mean"] == pytest.approx(mean)


def test_builtin_sorting_keys() -> None:
    early = make("early", 3, 2, 300, arrival=0)
    late = make("late", 3, 2, 30, arrival=5)
    fifo, sjf, srpt, hrrn = (load_sorting(n) for n in ("fifo", "sjf", "srpt", "hrrn"))
    assert fifo.key(early, 10, 300) < fifo.key(late, 10, 30)
    assert sjf.key(late, 10, 30) < sjf.key(early, 10, 300)
    assert srpt.key(early, 10, 3) < srpt.key(late, 10, 30)  # early has little work left
    assert srpt.dynamic and hrrn.dynamic and not fifo.dynamic and not sjf.dynamic
    # HRRN at 100 s: early waited 100 s for a 100 s job (ratio 2); one arriving now, 1.
    just_arrived = make("now", 3, 2, 30, arrival=100)
    assert hrrn.key(early, 100, 300) < hrrn.key(just_arrived, 100, 30)
    assert hrrn.key(late, 10, 30) < hrrn.key(early, 10, 300)  # 1.5 against 1.1
    with pytest.raises(SortingError, match=r"unknown sorting policy 'lifo'.*fifo"):
        load_sorting("lifo")


def test_a_third_party_sorting_plugin_and_its_errors() -> None:
    class ByWork:
        @hookimpl
        def sort_key(self, application: Application) -> float:
            return application.work

    assert SortingPolicy(ByWork(), name="by-work").key(make("a", 3, 0, 7), 0, 7) == 7

    class Broken:
        @hookimpl
        def sort_key(self) -> float:
            return float("nan")

    with pytest.raises(SortingError, match=r"'broken'.*sort_key.*'a'.*finite"):
        SortingPolicy(Broken(), name="broken").key(make("a", 3, 0, 7), 0, 7)

    class Misspelt:
        @hookimpl
        def sort_kee(self) -> float:
            return 1.0

    with pytest.raises(SortingError, match="not a valid plugin"):
        SortingPolicy(Misspelt(), name="misspelt")


# ---------------------------------------------------------------------- bad input


def test_components_with_bad_requests_are_refused_naming_the_field() -> None:
    with pytest.raises(ApplicationError, match=r"'a': components\[3\].cpu_millicores .*got 0"):
        Application("a", 0, 1, (Component(CORE, UNIT),) * 3 + (Component(ELASTIC, Demand(0, 1)),))
    with pytest.raises(ApplicationError, match=r"components\[0\].ram_bytes .*got -5"):
        Application("a", 0, 1, (Component(CORE, Demand(1, -5)),) * 3)
    with pytest.raises(ApplicationError, match="'a': work must be finite and above 0"):
        make("a", 3, 0, 0)
    with pytest.raises(ApplicationError, match=r"2 core component.*2 of them coordinate"):
        make("a", 2, 5, 10)


def description(**overrides: object) -> dict[str, object]:
    data: dict[str, object] = {
        "id": "spark",
        "arrival": 0,
        "work": 100,
        "components": [
            {"class": "core", "cpu_millicores": 1000, "ram_bytes": GIB, "count": 3},
            {"class": "elastic", "cpu_millicores": 2000, "ram_bytes": GIB, "count": 4},
        ],
    }
    data.update(overrides)
    return data


def test_descriptions_build_applications() -> None:
    app = application_from_mapping(description(priority=2, category="B-E"))
    assert (len(app.core), len(app.elastic), app.priority, app.category) == (3, 4, 2, "B-E")
    assert [a.app_id for a in applications_from_json({"applications": [description()]})] == [
        "spark"
    ]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (description(work=None) | {"work": "lots"}, "'spark': work must be a number"),
        ({k: v for k, v in description().items() if k != "work"}, "'spark': work is missing"),
        (
            description(components=[{"class": "gpu", "cpu_millicores": 1, "ram_bytes": 1}]),
            r"components\[0\].class: unknown class 'gpu'",
        ),
        (
            description(components=[{"class": "core", "cpu_millicores": 0, "ram_bytes": 1}]),
            r"components\[0\].cpu_millicores must be a positive int, got 0",
        ),
        (
            description(components=[{"class": "core", "cpu_millicores": 5}]),
            r"components\[0\].ram_bytes is missing",
        ),
        (description(colour="red"), "unknown field.*colour"),
    ],
)
def test_bad_descriptions_name_the_field(data: dict[str, object], message: str) -> None:
    with pytest.raises(ApplicationError, match=message):
        application_from_mapping(data)


def test_duplicate_ids_are_refused() -> None:
    with pytest.raises(ApplicationError, match="'spark': id is a duplicate"):
        applications_from_json([description(), description()])


def test_sizes_that_would_exhaust_memory_are_refused_by_the_library_too() -> None:
    """The CLI's limits hold for callers of the library: a typo is an error, not a run until
    memory runs out."""
    with pytest.raises(ValueError, match=r"at most 1,000,000 machines, got 100,000,000,000"):
        ClusterCapacity.uniform(10**11, 32, 128)
    with pytest.raises(ValueError, match=r"applications must be at most 1,000,000"):
        WorkloadSpec(applications=10**11)
    assert len(ClusterCapacity.uniform(MAX_MACHINES, 1, 1).machines) == MAX_MACHINES
    assert WorkloadSpec(applications=MAX_APPLICATIONS).applications == MAX_APPLICATIONS
