"""Tests of `FlexibleRules`: Algorithms 1 and 2 as printed (`PAPER`) against our reading
(`OURS`, the default). For each departure, (a) who may preempt, (b) what room a preempting
arrival's cores may take, (c) `<` or `<=` at admission, a hand-made case where the two decide
differently, each asserting the decision the paper's text implies; then that `OURS` is the
default everywhere, that `PAPER` never over-allocates nor strands an application, and the
command line's `--rules paper`."""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from firmament_py.sim.experiment import Tracker
from firmament_py.sim.experiments import EXPERIMENTS
from firmament_py.zoe import experiment as turnaround_module
from firmament_py.zoe import preemption_experiment as preemption_module
from firmament_py.zoe.application import Application, ApplicationRefused
from firmament_py.zoe.capacity import GIB, ClusterCapacity
from firmament_py.zoe.cli import simulate, zoe
from firmament_py.zoe.experiment import (
    ZOE_PREEMPTION,
    ZOE_PREEMPTION_PAPER,
    ZOE_TURNAROUND,
    ZOE_TURNAROUND_PAPER,
    PreemptionParams,
    TurnaroundParams,
    with_rules,
)
from firmament_py.zoe.flexible import FlexibleRules, FlexibleScheduler
from firmament_py.zoe.simulator import ZoeSimulator, make_scheduler
from firmament_py.zoe.sorting import load_sorting
from tests.test_zoe_scheduler import TEN_UNITS, Watching, make, workloads

OURS, PAPER = FlexibleRules.OURS, FlexibleRules.PAPER


def flexible(rules: FlexibleRules, sorting: str = "fifo") -> FlexibleScheduler:
    return FlexibleScheduler(TEN_UNITS, load_sorting(sorting), preemptive=True, rules=rules)


def ids(line: list[Application]) -> list[str]:
    return [application.app_id for application in line]


# ---------------------------------------------------------------------- (a) req.P > S.tail.P


def test_a_paper_preempts_for_a_higher_priority_not_for_a_shorter_application() -> None:
    """SRPT, all priorities 0: `long` holds the whole cluster (3 cores, 7 elastic units) when
    `short` (3 cores, 3 s against 125 s) arrives. Line 2 compares P, and 0 > 0 is false: under
    the paper's rules `short` joins L, and as nothing is unused (line 10) nobody reacts. Ours
    compares the whole order, so `short` enters S and takes elastic units from `long`."""
    decisions: dict[FlexibleRules, tuple[list[str], list[str], dict[str, int]]] = {}
    for rules in (OURS, PAPER):
        scheduler = flexible(rules, "srpt")
        scheduler.submit(make("long", 3, 7, 1000), 0)
        scheduler.submit(make("short", 3, 0, 3, arrival=1), 1)
        decisions[rules] = (ids(scheduler.serving), ids(scheduler.waiting), dict(scheduler.grants))
    assert decisions[OURS] == (["short", "long"], [], {"short": 0, "long": 4})
    assert decisions[PAPER] == (["long"], ["short"], {"long": 7})
    # A higher P does preempt under the paper's rules: 3 core units <= long's 7 elastic ones.
    scheduler = flexible(PAPER, "srpt")
    scheduler.submit(make("long", 3, 7, 1000), 0)
    scheduler.submit(make("short", 3, 0, 3, arrival=1), 1)
    scheduler.submit(make("urgent", 3, 0, 30, arrival=2, priority=1), 2)
    assert ids(scheduler.serving) == ["urgent", "long"] and ids(scheduler.waiting) == ["short"]
    assert scheduler.grants == {"urgent": 0, "long": 4}


# ---------------------------------------------------------------------- (b) sum of E


def test_b_paper_counts_what_s_elastic_components_request_not_free_room() -> None:
    """`batch` (3 cores, 2 elastic units) leaves 5 of 10 units free when `urgent` (priority 1,
    3 cores) arrives. Line 3 asks 3 <= sum of S's E = 2: false, so under the paper's rules
    `urgent` waits in W (line 7) for the next departure, free room notwithstanding. Ours asks
    whether its cores fit beside S's (3 + 3 <= 10) and lets it in."""
    ours = flexible(OURS)
    ours.submit(make("batch", 3, 2, 100), 0)
    ours.submit(make("urgent", 3, 0, 3, arrival=1, priority=1), 1)
    assert ids(ours.serving) == ["urgent", "batch"] and not ours.auxiliary
    assert ours.grants == {"urgent": 0, "batch": 2}
    paper = flexible(PAPER)
    paper.submit(make("batch", 3, 2, 100), 0)
    paper.submit(make("urgent", 3, 0, 3, arrival=1, priority=1), 1)
    assert ids(paper.serving) == ["batch"] and ids(paper.auxiliary) == ["urgent"]
    assert paper.grants == {"batch": 2}
    paper.complete("batch", 10)  # lines 13-14: W's head joins S (0 + 3 < 10)
    assert ids(paper.serving) == ["urgent"] and not paper.auxiliary


def test_b_paper_clamps_where_the_sum_of_e_would_over_commit() -> None:
    """`batch` asks for 20 elastic units and is granted 7; `urgent` (priority 1) needs 8 core
    units. Taken alone, line 3 (8 <= 20) would put it in S beside batch's 3 core units: 11 of
    10. The paper's rules clamp (documented in `FlexibleRules`): it waits in W instead."""
    scheduler = flexible(PAPER)
    scheduler.submit(make("batch", 3, 20, 100), 0)
    urgent = make("urgent", 8, 0, 60, arrival=1, priority=1)
    batch = scheduler.serving[0]
    assert urgent.core_demand.fits_in(batch.full_demand - batch.core_demand)  # line 3 holds
    scheduler.submit(urgent, 1)
    assert ids(scheduler.auxiliary) == ["urgent"] and ids(scheduler.serving) == ["batch"]
    assert scheduler.allocated().fits_in(scheduler.total)


# ---------------------------------------------------------------------- (c) < against <=


def test_c_paper_admits_from_l_only_cores_that_leave_room() -> None:
    """Algorithm 1, line 10: X and Y have 5 core units each, 10 s of work alone. 5 + 5 < 10 is
    false, so under the paper's rules Y waits for X; ours admits both (5 + 5 <= 10)."""
    apps = [make("X", 5, 0, 30), make("Y", 5, 0, 30)]
    ours = ZoeSimulator(apps, TEN_UNITS, rules=OURS).run()
    paper = ZoeSimulator(apps, TEN_UNITS, rules=PAPER).run()
    assert {k: (r.started, r.finished) for k, r in ours.records.items()} == {
        "X": (0, 10),
        "Y": (0, 10),
    }
    assert {k: (r.started, r.finished) for k, r in paper.records.items()} == {
        "X": (0, 10),
        "Y": (10, 20),
    }


def test_c_paper_serves_w_only_with_cores_that_leave_room() -> None:
    """Algorithm 2, line 13: `big` (5 core units) and `mid` (4) serve; `urgent` (priority 1, 5
    core units) waits in W under both rules (9 + 5 > 10; S has no elastic components). When
    `mid` leaves, 5 + 5 < 10 is false: under the paper's rules `urgent` stays in W until `big`
    leaves too; ours serves it at once (5 + 5 <= 10)."""
    decisions: dict[FlexibleRules, tuple[list[str], list[str]]] = {}
    for rules in (OURS, PAPER):
        scheduler = flexible(rules)
        scheduler.submit_together([make("big", 5, 0, 300), make("mid", 4, 0, 20)], 0)
        scheduler.submit(make("urgent", 5, 0, 30, arrival=1, priority=1), 1)
        assert ids(scheduler.auxiliary) == ["urgent"]
        scheduler.complete("mid", 10)
        decisions[rules] = (ids(scheduler.serving), ids(scheduler.auxiliary))
    assert decisions[OURS] == (["urgent", "big"], [])
    assert decisions[PAPER] == (["big"], ["urgent"])


def test_c_paper_refuses_cores_that_would_fill_the_cluster() -> None:
    """Under the strict test an application whose cores equal the cluster could never enter S;
    the paper's rules refuse it at submission rather than let it block L for ever."""
    ours = FlexibleScheduler(TEN_UNITS, load_sorting("fifo"))
    ours.submit(make("whole", 10, 0, 80), 0)
    assert ids(ours.serving) == ["whole"]
    paper = FlexibleScheduler(TEN_UNITS, load_sorting("fifo"), rules=PAPER)
    with pytest.raises(ApplicationRefused, match=r"'whole'.*Algorithm 1, line 10"):
        paper.submit(make("whole", 10, 0, 80), 0)
    result = ZoeSimulator([make("whole", 10, 0, 80), make("ok", 3, 0, 1)], TEN_UNITS, rules=PAPER)
    records = result.run().records
    assert records["whole"].refused is not None and records["ok"].finished == 1


# ---------------------------------------------------------------------- safety


@settings(max_examples=100, deadline=None)
@given(workloads(), st.booleans(), st.sampled_from(["fifo", "sjf", "srpt", "hrrn"]))
def test_paper_rules_on_random_workloads(
    apps: list[Application], preemptive: bool, sorting: str
) -> None:
    """No over-allocation, cores never taken back (`Watching`), every application not refused
    finishes: the clamp and the refusal leave nobody stranded."""
    capacity = ClusterCapacity.uniform(2, 8, 16)
    result = Watching(apps, capacity, sorting=sorting, preemptive=preemptive, rules=PAPER).run()
    assert result.rules is PAPER
    for record in result.records.values():
        assert record.refused is not None or record.finished is not None, record


# ---------------------------------------------------------------------- defaults and wiring


def test_ours_is_the_default_everywhere() -> None:
    fifo = load_sorting("fifo")
    assert FlexibleScheduler(TEN_UNITS, fifo).rules is OURS
    made = make_scheduler("flexible", TEN_UNITS)
    assert isinstance(made, FlexibleScheduler) and made.rules is OURS
    simulator = ZoeSimulator([make("A", 3, 0, 3)], TEN_UNITS)
    assert isinstance(simulator.scheduler, FlexibleScheduler)
    assert simulator.scheduler.rules is OURS and simulator.result.rules is OURS
    for callable_ in (FlexibleScheduler, make_scheduler, ZoeSimulator):
        assert inspect.signature(callable_).parameters["rules"].default is OURS
    assert TurnaroundParams(1, (1.0,), (0,)).rules is OURS
    assert PreemptionParams(1, 1.0, (0,)).rules is OURS
    for experiment in (ZOE_TURNAROUND, ZOE_PREEMPTION):
        for params in experiment.scales.values():
            assert params.rules is OURS
            assert "rules" not in experiment.describe(params)  # committed runs' text unchanged
        assert with_rules(experiment, OURS) == experiment
    option = next(p for p in simulate.params if p.name == "rules")
    assert option.default == "ours"


def test_the_rules_are_the_flexible_schedulers() -> None:
    with pytest.raises(ValueError, match="the rules are the flexible scheduler's"):
        make_scheduler("rigid", TEN_UNITS, rules=PAPER)
    assert make_scheduler("malleable", TEN_UNITS, rules=OURS).name == "malleable"
    result = CliRunner().invoke(zoe, ["simulate", "--scheduler", "rigid", "--rules", "paper"])
    assert result.exit_code != 0 and "the rules are the flexible scheduler's" in result.output


def test_both_experiments_pass_the_rules_to_the_flexible_scheduler(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[tuple[str, FlexibleRules]] = []

    class Recording(ZoeSimulator):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            seen.append((self.result.scheduler, self.result.rules))

    monkeypatch.setattr(turnaround_module, "ZoeSimulator", Recording)
    monkeypatch.setattr(preemption_module, "ZoeSimulator", Recording)
    paper_turnaround = with_rules(ZOE_TURNAROUND, PAPER)
    paper_preemption = with_rules(ZOE_PREEMPTION, PAPER)
    assert paper_preemption.name == "zoe-preemption-paper"
    assert all(p.rules is PAPER for p in paper_preemption.scales.values())
    assert "rules paper" in paper_preemption.describe(paper_preemption.scales["test"])
    tracker = Tracker(1, None)
    paper_turnaround.measure(TurnaroundParams(12, (1.3,), (0,), ("fifo",), PAPER), tracker)
    assert sorted(set(seen)) == [("flexible", PAPER), ("malleable", OURS), ("rigid", OURS)]
    seen.clear()
    paper_preemption.measure(PreemptionParams(12, 1.3, (0,), rules=PAPER), tracker)
    assert seen == [("flexible", PAPER), ("flexible", PAPER)]


def test_the_paper_variants_are_registered() -> None:
    """`firmament-py experiment zoe-turnaround-paper` and `zoe-preemption-paper`: the default
    experiments under `PAPER` at every scale, with the same claims' code."""
    for default, paper in (
        (ZOE_TURNAROUND, ZOE_TURNAROUND_PAPER),
        (ZOE_PREEMPTION, ZOE_PREEMPTION_PAPER),
    ):
        assert EXPERIMENTS[f"{default.name}-paper"] is paper
        assert paper == with_rules(default, PAPER)
        assert paper.claims is default.claims and paper.scales.keys() == default.scales.keys()
        assert all(p.rules is PAPER for p in paper.scales.values())
        assert paper.title.endswith("Algorithms 1 and 2 as printed")


def test_the_batch_claim_names_departure_a_under_ours_only() -> None:
    """Preemption by the whole order (a) is what moves batch queuing: the default run's batch
    claim says so beside its verdict; the printed rules' run has no such departure."""
    for experiment, departs in ((ZOE_PREEMPTION, True), (ZOE_PREEMPTION_PAPER, False)):
        claims = experiment.claims(experiment.scales["test"], [])
        batch = next(c for c in claims if c.claim.startswith("Batch elastic"))
        assert ("departure (a)" in batch.why) is departs
        assert all("departure (a)" not in c.why for c in claims if c is not batch)


# ---------------------------------------------------------------------- the command line


def test_cli_rules_paper(tmp_path: Path) -> None:
    """X and Y (5 core units each, 10 s alone) on one machine of 10 cores and 10 GiB: with
    `--rules paper` Y queues 10 s behind X (queuing p95 9.5 s), by default neither queues."""
    core = {"class": "core", "cpu_millicores": 1000, "ram_bytes": GIB, "count": 5}
    workload = tmp_path / "apps.json"
    workload.write_text(
        json.dumps([{"id": n, "arrival": 0, "work": 30, "components": [core]} for n in "XY"])
    )
    arguments = ["simulate", "--workload", str(workload), "--machines", "1", "--cores", "10"]
    arguments += ["--ram-gib", "10"]
    runs: dict[str | None, tuple[str, str]] = {}
    for rules in ("paper", None):
        given_rules = ["--rules", rules] if rules else []
        result = CliRunner().invoke(zoe, arguments + given_rules, env={"COLUMNS": "160"})
        assert result.exit_code == 0, result.output
        queuing = next(line for line in result.output.splitlines() if "queuing (all)" in line)
        runs[rules] = (result.output, queuing)
    paper_output, paper_queuing = runs["paper"]
    ours_output, ours_queuing = runs[None]
    assert "placement pooled, rules paper" in paper_output and "2 finished" in paper_output
    assert "9.5 s" in paper_queuing and "5.0 s" in paper_queuing
    assert "rules" not in ours_output and "9.5 s" not in ours_queuing
