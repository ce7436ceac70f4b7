"""What the paper setting of `nomora-google` adds, at test scale: the paper's random baseline
draws each arc's cost once (fixed per arc, the same for a seed, run after run); a job's
slowest-task performance is its worst task's; the papers' root arc (`paper_arcs`) is the single
cost-0 arc to the cluster aggregator; the swept omega/beta unit reaches the policy's costs."""

from __future__ import annotations

import pytest

from firmament_py.model import ClusterState, MachineAdded, Resources, TaskSubmitted
from firmament_py.model.events import LatencySample
from firmament_py.nomora.baselines import RandomFixedArcCosts
from firmament_py.nomora.policy import CLUSTER_AGGREGATOR, NomoraPolicy
from firmament_py.nomora.settings import BetaMode, NomoraSettings
from firmament_py.nomora.simulation import (
    POLICIES,
    NomoraSetup,
    PerformanceMeter,
    run_nomora,
    with_paper_arcs,
)
from firmament_py.sdk.testing import PolicyHarness

SECOND = 1_000_000
TINY = NomoraSetup(machines=96, duration_s=4, racks_per_pod=1, series_per_tier=2)


def _state() -> ClusterState:
    state = ClusterState()
    for index in range(4):
        state.apply(
            MachineAdded(
                time=0,
                machine_id=f"m{index}",
                capacity=Resources(),
                slots=4,
                rack_id=f"r{index // 2}",
                pod_id="p0",
            )
        )
    for task_id in range(3):
        state.apply(
            TaskSubmitted(time=0, task_id=task_id, job_id="j", labels={"nomora.app": "memcached"})
        )
    return state


def _random_arc_costs(seed: int, rounds: int = 2) -> list[dict[str, int]]:
    """Every arc cost of the random-arc policy's tasks, as the manager asks them, round by
    round."""
    state = _state()
    harness = PolicyHarness(RandomFixedArcCosts(seed), state)
    manager, cluster = harness.manager, harness.cluster
    out = []
    for _ in range(rounds):
        costs: dict[str, int] = {}
        for task_id in range(3):
            task = cluster.task(task_id)
            for ref in manager.task_preference_arcs(task=task, cluster=cluster):
                arc = manager.task_to_resource(
                    task=task, resource=cluster.resource(ref), cluster=cluster
                )
                costs[f"{task_id}->{ref.id}"] = arc.cost
            arc = manager.task_to_equiv_class(
                task=task, equiv_class=CLUSTER_AGGREGATOR, cluster=cluster
            )
            costs[f"{task_id}->X"] = arc.cost
            costs[f"{task_id}->U"] = manager.task_to_unscheduled(task=task, cluster=cluster).cost
        for machine in ("m0", "m1", "m2", "m3"):
            arc = manager.equiv_class_to_resource(
                equiv_class=CLUSTER_AGGREGATOR,
                resource=cluster.resource(cluster.machine(machine).ref),
                cluster=cluster,
            )
            costs[f"X->{machine}"] = arc.cost
        out.append(costs)
        state.advance_to(state.now + 5 * SECOND)
        harness.new_round()
    return out


def test_the_papers_random_policy_fixes_each_arcs_cost_per_seed() -> None:
    first, later = _random_arc_costs(seed=3)
    assert first == later  # drawn once: the same after time passes and a new round
    assert _random_arc_costs(seed=3)[0] == first  # the same seed, the same costs
    assert _random_arc_costs(seed=4)[0] != first
    assert len({cost for arc, cost in first.items() if arc.startswith("X->")}) > 1
    # Every path to a machine is cheaper than leaving the task unscheduled.
    for task_id in range(3):
        paths = [c for a, c in first.items() if a.startswith(f"{task_id}->m")]
        via_x = first[f"{task_id}->X"] + max(c for a, c in first.items() if a.startswith("X->"))
        assert max([*paths, via_x]) < first[f"{task_id}->U"]


def test_the_random_arc_baseline_is_deterministic_per_seed() -> None:
    def placements() -> dict[int, str | None]:
        run = run_nomora(TINY, POLICIES["random-arc"])
        return {t.task_id: t.machine_id for t in run.result.tasks.values()}

    assert placements() == placements()
    with pytest.raises(ValueError, match="preference_arcs"):
        RandomFixedArcCosts(0, preference_arcs=-1)


def test_a_jobs_slowest_task_is_its_worst_running_task() -> None:
    run = run_nomora(TINY, POLICIES["random-task"])
    assert run.job_slowest.keys() == run.job_performance.keys()
    assert all(run.job_slowest[j] <= run.job_performance[j] + 1e-12 for j in run.job_slowest)
    assert any(run.job_slowest[j] < run.job_performance[j] - 1e-6 for j in run.job_slowest)
    assert run.slowest_performance() < run.mean_performance()


def test_the_meter_takes_the_minimum_over_a_jobs_tasks() -> None:
    class Fixed(PerformanceMeter):
        def __init__(self) -> None:  # no scheduler: snapshots are given
            self._last_time = None
            self._last = {}
            self.weighted, self.weighted_slowest, self.weights = {}, {}, {}
            self._last_tasks = (0.0, 0)
            self.task_weighted = self.task_weights = 0.0

    meter = Fixed()
    meter._last_time, meter._last = 0, {"j": (0.8, 0.5)}
    meter.snapshot = lambda time: {"j": (1.0, 1.0)}  # type: ignore[method-assign]
    meter.after_round(SECOND)  # one second at (0.8, 0.5)
    meter.after_round(3 * SECOND)  # two seconds at (1.0, 1.0)
    assert meter.job_performance() == pytest.approx({"j": (0.8 + 2.0) / 3})
    assert meter.job_slowest() == pytest.approx({"j": (0.5 + 2.0) / 3})


def test_the_papers_root_arc_is_one_cost_zero_arc_to_the_cluster_aggregator() -> None:
    state = _state()
    for paper, expected in ((False, (1, 1)), (True, (0, 0))):
        policy = NomoraPolicy(NomoraSettings(paper_arcs=paper))
        harness = PolicyHarness(policy, state)
        manager, cluster = harness.manager, harness.cluster
        root = cluster.task(0)
        assert manager.task_equiv_classes(task=root, cluster=cluster) == (CLUSTER_AGGREGATOR,)
        to_x = manager.task_to_equiv_class(
            task=root, equiv_class=CLUSTER_AGGREGATOR, cluster=cluster
        )
        preferred = manager.task_preference_arcs(task=root, cluster=cluster)
        assert (to_x.cost, len(preferred)) == expected
    # The experiment's paper setting gives NoMora the papers' arcs, and leaves the contrast be.
    assert with_paper_arcs(POLICIES["nomora"]).settings.paper_arcs  # type: ignore[union-attr]
    assert not with_paper_arcs(POLICIES["nomora-our-arcs"]).settings.paper_arcs  # type: ignore[union-attr]
    assert with_paper_arcs(POLICIES["random-arc"]) == POLICIES["random-arc"]


@pytest.mark.parametrize("unit", [1, 10, 100])
def test_the_swept_unit_reaches_the_waiting_and_staying_costs(unit: int) -> None:
    state = _state()
    state.place(0, "m0", time=0)
    state.place(1, "m1", time=0)
    state.apply(LatencySample(time=0, machine_id="m0", peer_id="m1", latency_us=30.0))
    settings = POLICIES[f"nomora-preempt-unit{unit}" if unit > 1 else "nomora-preempt"].settings
    assert settings is not None
    assert (settings.wait_cost_per_second, settings.run_credit_per_second) == (unit, unit)
    for paper in (False, True):
        policy = NomoraPolicy(NomoraSettings(**{**settings.__dict__, "paper_arcs": paper}))
        harness = PolicyHarness(policy, state)
        state.advance_to(max(state.now, 3 * SECOND))
        manager, cluster = harness.manager, harness.cluster
        manager.task_equiv_classes(task=cluster.task(1), cluster=cluster)
        stay = manager.task_continuation(
            task=cluster.task(1), machine=cluster.machine("m1"), cluster=cluster
        )
        # d = 100 (30 µs: Memcached at full speed), beta = unit x 3 s, minus 1 but in the
        # papers' form.
        assert stay.cost == 100 - 3 * unit - (0 if paper else 1)
        waiting = manager.task_to_unscheduled(task=cluster.task(2), cluster=cluster)
        assert waiting.cost == 1001 + 3 * unit  # gamma + omega x 3 s
    # The papers' root arc with this port's tie-break keeps the 1.
    tie = NomoraSettings(**{**settings.__dict__, "paper_arcs": True, "stay_tie_break": True})
    harness = PolicyHarness(NomoraPolicy(tie), state)
    harness.manager.task_equiv_classes(task=harness.cluster.task(1), cluster=harness.cluster)
    stay = harness.manager.task_continuation(
        task=harness.cluster.task(1), machine=harness.cluster.machine("m1"), cluster=harness.cluster
    )
    assert stay.cost == 100 - 3 * unit - 1
    zero = NomoraSettings(preemption=True, beta=BetaMode.ZERO, run_credit_per_second=unit)
    harness = PolicyHarness(NomoraPolicy(zero), state)
    harness.manager.task_equiv_classes(task=harness.cluster.task(1), cluster=harness.cluster)
    stay = harness.manager.task_continuation(
        task=harness.cluster.task(1), machine=harness.cluster.machine("m1"), cluster=harness.cluster
    )
    assert stay.cost == 100 - 1  # beta = 0 ignores the unit


@pytest.mark.parametrize("beta", [BetaMode.RUN_TIME, BetaMode.ZERO])
def test_a_running_root_under_the_papers_arcs_has_only_its_stay_arc(beta: BetaMode) -> None:
    """The tech report (5.2): once scheduled, the root has an arc to its machine; no free arc to
    X, which would let roots (and their jobs' prices) move for nothing with beta = 0. Asked
    through the batch hooks the scheduler uses."""
    state = _state()
    state.place(0, "m0", time=0)
    state.place(1, "m1", time=0)
    state.advance_to(3 * SECOND)
    for paper in (False, True):
        policy = NomoraPolicy(NomoraSettings(preemption=True, beta=beta, paper_arcs=paper))
        harness = PolicyHarness(policy, state)
        batch = harness.tasks([0, 1, 2])
        arcs = policy.task_to_equiv_classes_batch(batch, harness.cluster)
        arcs_out = zip(arcs.rows, arcs.targets, arcs.cost, strict=True)
        root_arcs = [(t, int(c)) for r, t, c in arcs_out if r == 0]
        assert root_arcs == ([] if paper else [(CLUSTER_AGGREGATOR, 1)])
        assert sorted(int(r) for r in arcs.rows) == ([1, 2] if paper else [0, 1, 2])
        stays = policy.task_continuation_batch(harness.tasks([0]), harness.cluster)
        assert stays is not None
        credit = 1 if beta is BetaMode.RUN_TIME else 0
        # The root's stay: -beta in the papers' form (-beta - 1 in ours), beta = 1 unit/s run.
        assert (int(stays.cost[0]), int(stays.per_second[0])) == (0 if paper else -1, -credit)
    # A root still waiting keeps its single cost-0 arc to X.
    policy = NomoraPolicy(NomoraSettings(preemption=True, beta=beta, paper_arcs=True))
    harness = PolicyHarness(policy, _state())
    arcs = policy.task_to_equiv_classes_batch(harness.tasks([0]), harness.cluster)
    assert (list(arcs.targets), [int(c) for c in arcs.cost]) == ([CLUSTER_AGGREGATOR], [0])


def test_the_stay_tie_break_needs_the_papers_arcs() -> None:
    with pytest.raises(ValueError, match="stay_tie_break needs paper_arcs"):
        NomoraSettings(stay_tie_break=True)
    for name in ("nomora-preempt-tie", "nomora-preempt-beta0-tie"):
        settings = POLICIES[name].settings
        assert settings is not None and settings.paper_arcs and settings.stay_tie_break
