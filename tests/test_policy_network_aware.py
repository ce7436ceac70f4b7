"""Tests of the network-aware policy (policies/network_aware.py): one request aggregator per
request, arcs only to machines with spare bandwidth (reservations and measured use), capacities
dealt so that aggregators together never overfill a machine, costs that favour idle links, and,
end to end through the scheduler, the hallmarks: no round overcommits a link or has a placement
refused, whatever mix of requests arrives at once, and arcs follow the measured bandwidth."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from firmament_policies.network_aware import (
    FULL_LINK_COST,
    WAITING_COST,
    NetworkAwarePolicy,
    deal_shares,
    request_class,
)
from firmament_py.model import (
    ClusterState,
    LabelSelector,
    MachineAdded,
    MachineStats,
    Resources,
    TaskSubmitted,
)
from firmament_py.scheduler import RoundResult, Scheduler
from firmament_py.sdk import (
    ArcDescriptor,
    EquivClassId,
    PolicyManager,
    load_policy,
)
from firmament_py.sdk.testing import PolicyHarness

MB = 10**6  # bytes per second in one MB/s
SECOND = 1_000_000


def rx(mb_per_s: int) -> Resources:
    return Resources(net_rx_bytes_per_s=mb_per_s * MB)


class Hooks(PolicyHarness):
    """The policy over a cluster state, in a round, with shortcuts to its answers."""

    def __init__(self, state: ClusterState, manager: PolicyManager | None = None) -> None:
        policy = manager or PolicyManager(NetworkAwarePolicy(), name="network-aware")
        super().__init__(policy, state)

    def arcs(self, equiv_class: EquivClassId) -> dict[str, ArcDescriptor]:
        """The class's arcs, by machine."""
        refs = self.manager.equiv_class_preference_arcs(
            equiv_class=equiv_class, cluster=self.cluster
        )
        return {
            ref.id: self.manager.equiv_class_to_resource(
                equiv_class=equiv_class, resource=self.cluster.resource(ref), cluster=self.cluster
            )
            for ref in refs
        }


def mixed_cluster() -> ClusterState:
    """m1: idle 1,000 MB/s link. m2: the same, 500 MB/s reserved by a running task. m3: the
    same, measured at 800 MB/s. m4: no known link. Waiting: three tasks asking 300 MB/s, one
    600 MB/s, one nothing."""
    state = ClusterState()
    for machine_id, link in [("m1", 1000), ("m2", 1000), ("m3", 1000), ("m4", 0)]:
        state.apply(MachineAdded(time=0, machine_id=machine_id, capacity=rx(link), slots=4))
    state.apply(TaskSubmitted(time=0, task_id=100, job_id="old", request=rx(500)))
    state.place(100, "m2", time=0)
    state.apply(MachineStats(time=0, machine_id="m3", usage=rx(800)))
    for task_id, mb in [(1, 300), (2, 300), (3, 300), (4, 600), (5, 0)]:
        state.apply(TaskSubmitted(time=1, task_id=task_id, job_id="j", request=rx(mb)))
    return state


# ---------------------------------------------------------------------- dealing


def test_deal_shares_takes_turns_largest_first() -> None:
    # 1,000 spare, 4 slots: the 600 and a 300 and the 0 each get one, then nothing else fits.
    assert deal_shares([(600,), (300,), (0,)], [1, 3, 1], [1000], 4) == [1, 1, 1]
    # Many small ones do not crowd out a big one: it is dealt first in every turn.
    assert deal_shares([(700,), (50,)], [5, 100], [1000], 100) == [1, 6]
    # Slots bound the total, demands each share.
    assert deal_shares([(0,), (0,)], [10, 1], [0], 5) == [4, 1]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 600), st.integers(0, 3), st.integers(0, 6)),
        min_size=1,
        max_size=6,
    ),
    st.tuples(st.integers(0, 2000), st.integers(0, 8)),
    st.integers(0, 20),
)
def test_deal_shares_never_exceeds_the_machine_and_leaves_nothing_that_fits(
    kinds: list[tuple[int, int, int]], spare: tuple[int, int], slots: int
) -> None:
    requests = [(bandwidth, cpu) for bandwidth, cpu, _ in kinds]
    demands = [demand for _, _, demand in kinds]
    shares = deal_shares(requests, demands, spare, slots)
    used = [
        sum(share * request[d] for share, request in zip(shares, requests, strict=True))
        for d in (0, 1)
    ]
    assert all(u <= s for u, s in zip(used, spare, strict=True))
    assert sum(shares) <= slots
    assert all(0 <= share <= demand for share, demand in zip(shares, demands, strict=True))
    if sum(shares) < slots:  # nothing with demand left fits in what remains
        room = [s - u for s, u in zip(spare, used, strict=True)]
        for share, demand, request in zip(shares, demands, requests, strict=True):
            assert share == demand or any(q > r for q, r in zip(request, room, strict=True))


# ---------------------------------------------------------------------- hooks


def test_entry_point_makes_the_policy_without_preemption() -> None:
    manager = load_policy("network-aware")
    assert not manager.preemption_enabled
    setup = Hooks(mixed_cluster(), manager)
    assert set(setup.arcs(request_class(rx(300)))) == {"m1", "m2"}


def test_one_aggregator_per_request() -> None:
    setup = Hooks(mixed_cluster())
    classes = {
        task_id: setup.manager.task_equiv_classes(
            task=setup.cluster.task(task_id), cluster=setup.cluster
        )
        for task_id in (1, 2, 3, 4, 5)
    }
    assert classes[1] == classes[2] == classes[3] == ("net-rx=300000000",)
    assert classes[4] == ("net-rx=600000000",)
    assert classes[5] == ("net-rx=0",)
    zone_b = LabelSelector.equals("zone", "b")
    assert request_class(Resources(cpu_millicores=500), (zone_b,)) == (
        "net-rx=0 cpu_millicores=500 selectors:zone=b"
    )


def test_arcs_go_where_the_request_fits_with_dealt_capacities_and_link_costs() -> None:
    setup = Hooks(mixed_cluster())
    # m1 (1,000 spare, 4 slots) is dealt one 600, one 300 and the 0 in the first turn; then
    # neither request fits in the 100 left. m2 (500 spare): one 300 and the 0. m3 (200 spare
    # by measurement): only the 0. m4 (no link): only the 0, at cost 0.
    assert setup.arcs(request_class(rx(600))) == {"m1": ArcDescriptor(600, capacity=1)}
    assert setup.arcs(request_class(rx(300))) == {
        "m1": ArcDescriptor(300, capacity=1),
        "m2": ArcDescriptor(800, capacity=1),
    }
    assert setup.arcs(request_class(rx(0))) == {
        "m1": ArcDescriptor(0, capacity=1),
        "m2": ArcDescriptor(500, capacity=1),
        "m3": ArcDescriptor(800, capacity=1),
        "m4": ArcDescriptor(0, capacity=1),
    }


def test_capacity_is_how_many_fit_bounded_by_slots_and_by_the_waiting_tasks() -> None:
    state = ClusterState()
    state.apply(MachineAdded(time=0, machine_id="wide", capacity=rx(1000), slots=3))
    state.apply(MachineAdded(time=0, machine_id="narrow", capacity=rx(250), slots=8))
    for task_id in range(1, 6):
        state.apply(TaskSubmitted(time=0, task_id=task_id, job_id="j", request=rx(100)))
    setup = Hooks(state)
    capacities = {m: arc.capacity for m, arc in setup.arcs(request_class(rx(100))).items()}
    assert capacities == {"wide": 3, "narrow": 2}
    state.apply(TaskSubmitted(time=0, task_id=9, job_id="j", request=rx(100)))
    state.place(9, "narrow", time=0)  # leaves 150 spare on narrow
    setup.new_round()
    capacities = {m: arc.capacity for m, arc in setup.arcs(request_class(rx(100))).items()}
    assert capacities == {"wide": 3, "narrow": 1}


def test_measured_use_counts_only_above_the_reservations() -> None:
    state = mixed_cluster()
    setup = Hooks(state)
    # m2 reserves 500 and reports less: the reservation counts.
    state.apply(MachineStats(time=2, machine_id="m2", usage=rx(100)))
    setup.new_round()
    assert setup.arcs(request_class(rx(300)))["m2"] == ArcDescriptor(800, capacity=1)
    # m3 reports less than before: its arcs come back.
    state.apply(MachineStats(time=2, machine_id="m3", usage=rx(100)))
    setup.new_round()
    assert setup.arcs(request_class(rx(600)))["m3"] == ArcDescriptor(700, capacity=1)


def test_other_dimensions_and_selectors_limit_the_machines() -> None:
    state = ClusterState()
    for machine_id, cpu, zone in [("m1", 1000, "a"), ("m2", 4000, "a"), ("m3", 4000, "b")]:
        state.apply(
            MachineAdded(
                time=0,
                machine_id=machine_id,
                capacity=Resources(cpu_millicores=cpu, net_rx_bytes_per_s=1000 * MB),
                slots=4,
                labels={"zone": zone},
            )
        )
    request = Resources(cpu_millicores=2000, net_rx_bytes_per_s=100 * MB)
    zone_a = LabelSelector.equals("zone", "a")
    state.apply(TaskSubmitted(time=0, task_id=1, job_id="j", request=request, selectors=(zone_a,)))
    setup = Hooks(state)
    # m1 lacks the cpu, m3 is in the wrong zone; m2 takes two (cpu bounds it, not bandwidth)
    # but only one is waiting.
    assert setup.arcs(request_class(request, (zone_a,))) == {"m2": ArcDescriptor(100, capacity=1)}


def test_waiting_costs_more_than_any_placement_and_grows() -> None:
    setup = Hooks(mixed_cluster())
    setup.state.advance_to(11 * SECOND + 1)
    waiting = setup.manager.task_to_unscheduled(task=setup.cluster.task(1), cluster=setup.cluster)
    assert waiting == ArcDescriptor(WAITING_COST + 11)
    assert WAITING_COST > FULL_LINK_COST


# ---------------------------------------------------------------------- end to end


def placed_this_round(result: RoundResult) -> dict[str, list[int]]:
    placed: dict[str, list[int]] = {}
    for delta in result.deltas:
        assert delta.to_machine is not None
        placed.setdefault(delta.to_machine, []).append(delta.task)
    return placed


def spare_rx(scheduler: Scheduler, machine_id: str) -> int:
    """A machine's receive capacity minus the larger of its reservations and its measured use
    (none when the use measured exceeds the capacity)."""
    machine = scheduler.state.machines[machine_id]
    measured = machine.measured_usage.net_rx_bytes_per_s if machine.measured_usage else 0
    used = max(machine.reserved.net_rx_bytes_per_s, measured)
    return max(0, machine.capacity.net_rx_bytes_per_s - used)


def run_checking_links(scheduler: Scheduler, *, max_rounds: int = 40) -> None:
    """Run rounds until one decides nothing, checking every round: no refusal, no policy error,
    and no machine given more receive bandwidth than it had spare when the round began."""
    for _ in range(max_rounds):
        spare = {m: spare_rx(scheduler, m) for m in scheduler.state.machines}
        result = scheduler.run_round()
        assert not result.refused
        assert not result.task_errors
        for machine_id, task_ids in placed_this_round(result).items():
            asked = sum(scheduler.state.tasks[t].request.net_rx_bytes_per_s for t in task_ids)
            assert asked <= spare[machine_id], (machine_id, task_ids, spare[machine_id])
        if not result.decided:
            return
    raise AssertionError(f"still deciding after {max_rounds} rounds")


def test_two_requests_that_each_fit_but_not_together_are_not_both_placed() -> None:
    # Firmament's NetCostModel would offer both aggregators the idle link in one round.
    with Scheduler(policy=NetworkAwarePolicy()) as scheduler:
        scheduler.handle(MachineAdded(time=0, machine_id="m1", capacity=rx(1000), slots=4))
        scheduler.handle(TaskSubmitted(time=1, task_id=1, job_id="j", request=rx(500)))
        scheduler.handle(TaskSubmitted(time=1, task_id=2, job_id="j", request=rx(600)))
        run_checking_links(scheduler)
        assert scheduler.state.machines["m1"].running_task_ids.keys() == {2}


@settings(max_examples=25, deadline=None)
@given(
    machines=st.lists(
        st.tuples(st.sampled_from([0, 500, 1000, 1250]), st.integers(1, 6), st.integers(0, 900)),
        min_size=1,
        max_size=5,
    ),
    requests=st.lists(st.sampled_from([0, 50, 100, 250, 300, 500, 700, 1000]), max_size=30),
)
def test_hallmark_a_burst_of_mixed_requests_never_overcommits_a_link(
    machines: list[tuple[int, int, int]], requests: list[int]
) -> None:
    with Scheduler(policy="network-aware") as scheduler:
        for index, (link, slots, background) in enumerate(machines):
            machine_id = f"m{index}"
            scheduler.handle(
                MachineAdded(time=0, machine_id=machine_id, capacity=rx(link), slots=slots)
            )
            if background:
                scheduler.handle(MachineStats(time=0, machine_id=machine_id, usage=rx(background)))
        for task_id, mb in enumerate(requests):
            scheduler.handle(TaskSubmitted(time=1, task_id=task_id, job_id="j", request=rx(mb)))
        run_checking_links(scheduler)
        # Quiet means stuck only for want of room: no waiting task fits anywhere.
        for task in scheduler.state.runnable_tasks():
            for machine in scheduler.state.machines.values():
                fits = task.request.net_rx_bytes_per_s <= spare_rx(scheduler, machine.machine_id)
                assert not (fits and machine.free_slots > 0), (task.task_id, machine.machine_id)


def test_hallmark_arcs_follow_the_measured_bandwidth() -> None:
    with Scheduler(policy="network-aware") as scheduler:
        for machine_id in ("m1", "m2"):
            scheduler.handle(
                MachineAdded(time=0, machine_id=machine_id, capacity=rx(1000), slots=8)
            )
        # Traffic the scheduler did not place fills most of m1's link.
        scheduler.handle(MachineStats(time=1, machine_id="m1", usage=rx(900)))
        for task_id in range(4):
            scheduler.handle(TaskSubmitted(time=1, task_id=task_id, job_id="j", request=rx(200)))
        run_checking_links(scheduler)
        assert scheduler.state.machines["m1"].running_task_ids.keys() == set()
        assert scheduler.state.machines["m2"].running_task_ids.keys() == {0, 1, 2, 3}
        # The traffic stops: m1 is the idle link now, and takes what comes next.
        scheduler.handle(MachineStats(time=2, machine_id="m1", usage=rx(0)))
        for task_id in range(4, 6):
            scheduler.handle(TaskSubmitted(time=2, task_id=task_id, job_id="j", request=rx(200)))
        run_checking_links(scheduler)
        assert scheduler.state.machines["m1"].running_task_ids.keys() == {4, 5}


def test_tasks_go_to_the_least_loaded_link() -> None:
    with Scheduler(policy="network-aware") as scheduler:
        for machine_id in ("m1", "m2", "m3"):
            scheduler.handle(
                MachineAdded(time=0, machine_id=machine_id, capacity=rx(1000), slots=8)
            )
        scheduler.handle(MachineStats(time=0, machine_id="m1", usage=rx(400)))
        scheduler.handle(MachineStats(time=0, machine_id="m3", usage=rx(200)))
        scheduler.handle(TaskSubmitted(time=1, task_id=1, job_id="j", request=rx(100)))
        run_checking_links(scheduler)
        assert scheduler.state.tasks[1].machine_id == "m2"


@pytest.mark.parametrize("waiting_first", [True, False])
def test_longest_waiting_task_goes_first_when_room_is_short(waiting_first: bool) -> None:
    with Scheduler(policy="network-aware") as scheduler:
        scheduler.handle(MachineAdded(time=0, machine_id="m1", capacity=rx(1000), slots=1))
        first, second = (1, 2) if waiting_first else (2, 1)
        scheduler.handle(TaskSubmitted(time=0, task_id=first, job_id="j", request=rx(100)))
        scheduler.handle(
            TaskSubmitted(time=5 * SECOND, task_id=second, job_id="j", request=rx(100))
        )
        scheduler.run_round(time=10 * SECOND)
        assert scheduler.state.machines["m1"].running_task_ids.keys() == {first}
