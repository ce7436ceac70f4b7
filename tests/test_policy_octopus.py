"""Tests of the octopus policy: Firmament's Octopus prices (a machine costs its running tasks
times 100, waiting a flat 1,000,000) and its hallmark, the one the load-spreading policy was
made to remove: the tasks of one round all see the round's starting prices, so a burst fills
the emptiest machines first and leaves the others as they were."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from firmament_policies.octopus import BUSY_PU_OFFSET, OCTOPUS_UNSCHEDULED_COST, OctopusPolicy
from firmament_py.model import TaskSubmitted
from firmament_py.scheduler import Scheduler
from firmament_py.sdk import (
    CLUSTER_AGGREGATOR,
    ArcDescriptor,
    ResourceRef,
    load_policy,
    selector_class,
)
from firmament_py.sdk.testing import PolicyHarness
from tests.test_policy_load_spreading import ZONE_B, cluster, submit


def running(scheduler: Scheduler) -> list[int]:
    machines = scheduler.state.machines
    return [len(machines[f"m{index}"].running_task_ids) for index in range(len(machines))]


@pytest.fixture
def schedulers() -> Iterator[list[Scheduler]]:
    made: list[Scheduler] = []
    yield made
    for scheduler in made:
        scheduler.close()


def test_a_machine_costs_its_running_tasks_and_carries_its_free_slots() -> None:
    state = cluster([4, 4])
    submit(state, 10, 1)
    state.place(10, "m0", time=0)
    submit(state, 1, 3)
    hooks = PolicyHarness(OctopusPolicy(), state, name="octopus")
    task = hooks.cluster.task(1)
    assert hooks.manager.task_equiv_classes(task=task, cluster=hooks.cluster) == (
        CLUSTER_AGGREGATOR,
    )
    assert hooks.manager.task_to_equiv_class(
        task=task, equiv_class=CLUSTER_AGGREGATOR, cluster=hooks.cluster
    ) == ArcDescriptor(0)
    for machine, cost, free in (("m0", BUSY_PU_OFFSET, 3), ("m1", 0, 4)):
        arc = hooks.manager.equiv_class_to_resource(
            equiv_class=CLUSTER_AGGREGATOR,
            resource=hooks.cluster.resource(ResourceRef.machine(machine)),
            cluster=hooks.cluster,
        )
        assert arc == ArcDescriptor(cost, capacity=free)


def test_waiting_costs_a_flat_million() -> None:
    waiting = OctopusPolicy().task_to_unscheduled_batch()
    cost, per_second = np.asarray(waiting.cost), np.asarray(waiting.per_second)
    assert cost.tolist() == [OCTOPUS_UNSCHEDULED_COST] and per_second.tolist() == [0]
    assert OctopusPolicy().task_to_unscheduled() == ArcDescriptor(OCTOPUS_UNSCHEDULED_COST)


def test_hallmark_a_burst_fills_the_emptiest_machines_and_leaves_the_busy_one(
    schedulers: list[Scheduler],
) -> None:
    """m0 runs 2 of its 4 slots, m1 and m2 none. Eight tasks arrive in one round: at the
    round's prices the eight free slots of m1 and m2 cost 0 and m0's cost 200, so m0 gets none
    and the cluster ends at 2, 4, 4 (the load-spreading policy ends at 4, 3, 3)."""
    state = cluster([4, 4, 4])
    submit(state, 100, 2)
    for task_id in (100, 101):
        state.place(task_id, "m0", time=0)
    submit(state, 1, 8)
    octopus = Scheduler(policy="octopus", state=state)
    schedulers.append(octopus)
    result = octopus.run_round()
    assert len(result.deltas) == 8 and not result.refused
    assert running(octopus) == [2, 4, 4]

    spread_state = cluster([4, 4, 4])
    submit(spread_state, 100, 2)
    for task_id in (100, 101):
        spread_state.place(task_id, "m0", time=0)
    submit(spread_state, 1, 8)
    spreading = Scheduler(policy="load-spreading", state=spread_state)
    schedulers.append(spreading)
    spreading.run_round()
    assert max(running(spreading)) - min(running(spreading)) <= 1


def test_prices_follow_the_running_tasks_from_round_to_round(schedulers: list[Scheduler]) -> None:
    """Three tasks on two machines leave one busier (any split costs 0 in the first round); the
    next round's task goes to the other one, priced lower by what it runs."""
    state = cluster([4, 4])
    submit(state, 1, 3)
    scheduler = Scheduler(policy="octopus", state=state)
    schedulers.append(scheduler)
    scheduler.run_round()
    before = running(scheduler)
    scheduler.handle(TaskSubmitted(time=1, task_id=4, job_id="j"))
    result = scheduler.run_round(time=1)
    assert len(result.deltas) == 1
    quieter = before.index(min(before))
    assert running(scheduler)[quieter] == before[quieter] + 1, (before, running(scheduler))


def test_selector_tasks_reach_only_matching_machines(schedulers: list[Scheduler]) -> None:
    state = cluster([2, 2, 2], zones=["a", "b", "b"])
    submit(state, 1, 4, selectors=(ZONE_B,))
    scheduler = Scheduler(policy="octopus", state=state)
    schedulers.append(scheduler)
    result = scheduler.run_round()
    assert len(result.deltas) == 4
    assert running(scheduler) == [0, 2, 2]
    hooks = PolicyHarness(OctopusPolicy(), scheduler.state, name="octopus")
    arc = hooks.manager.equiv_class_to_resource(
        equiv_class=selector_class((ZONE_B,)),
        resource=hooks.cluster.resource(ResourceRef.machine("m1")),
        cluster=hooks.cluster,
    )
    assert arc == ArcDescriptor(2 * BUSY_PU_OFFSET, capacity=0)


def test_the_entry_point_loads() -> None:
    manager = load_policy("octopus")
    assert not manager.preemption_enabled
    assert "equiv_class_to_resources_batch" in manager.implemented_hooks
