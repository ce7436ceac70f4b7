"""Every built-in policy's batch forms build the graph its per-item hooks build.

The same random cluster (machines joining, failing, leaving and changing labels; tasks with
requests, selectors and labels arriving, finishing and being removed; usage reports; time
passing) runs through two schedulers with the same policy: one asks the batch forms, as the
scheduler does, the other is made to ask every question per item (the hooks the batch forms
stand for, with the defaults' per-item answers). Both apply the same decisions, so their
clusters stay equal; after every update their flow graphs must be equal arc by arc (nodes
named by what they stand for, not by id), and they must leave out the same tasks.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest

from firmament_py.model import (
    LabelSelector,
    MachineAdded,
    MachineFailed,
    MachineRemoved,
    MachineStats,
    MachineUpdated,
    Resources,
    TaskCompleted,
    TaskRemoved,
    TaskState,
    TaskSubmitted,
)
from firmament_py.scheduler import Scheduler
from firmament_py.scheduler.graph_manager import FlowGraphManager
from firmament_py.sdk import available_policies, load_policy

SECOND = 1_000_000
BUILT_IN = (
    "trivial",
    "random",
    "load-spreading",
    "octopus",
    "cpu-mem",
    "quincy",
    "network-aware",
    "nomora",
    "nomora-preemption",
    "zoe",
)


def test_every_built_in_policy_is_covered() -> None:
    assert set(BUILT_IN) <= set(available_policies())


def described(manager: FlowGraphManager) -> tuple[Counter[tuple[Any, ...]], Counter[Any]]:
    """The graph with every node named by what it stands for: its arcs (ends, type, bounds,
    cost) and the nodes' supplies."""
    names: dict[int, tuple[Any, ...]] = {manager.sink: ("sink",)}
    names.update({node: ("task", task) for task, node in manager.tasks.node_of.items()})
    names.update({node: ("class", c) for c, node in manager._class_node.items()})
    names.update({node: ("job", j) for j, node in manager.jobs.node_of.items()})
    names.update(
        {node: (ref.kind.value, ref.id) for ref, node in manager.resources._node_of.items()}
    )
    arrays = manager.graph.arrays()
    arcs: Counter[tuple[Any, ...]] = Counter()
    for arc in manager.graph.arc_ids().tolist():
        arcs[
            (
                names[int(arrays.src[arc])],
                names[int(arrays.dst[arc])],
                int(arrays.arc_kind[arc]),
                int(arrays.low[arc]),
                int(arrays.cap[arc]),
                int(arrays.cost[arc]),
            )
        ] += 1
    supplies = Counter(
        (names[node], int(arrays.supply[node])) for node in manager.graph.node_ids().tolist()
    )
    return arcs, supplies


class RandomCluster:
    """Seeded random events for a small cluster, the same for every scheduler fed."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.next_machine = 0
        self.next_task = 0
        self.machines: list[str] = []

    def machine(self, time: int) -> MachineAdded:
        rng = self.rng
        name = f"m{self.next_machine}"
        self.next_machine += 1
        self.machines.append(name)
        blocks = ",".join(sorted(rng.sample(["b0", "b1", "b2", "b3"], rng.randint(0, 2))))
        return MachineAdded(
            time=time,
            machine_id=name,
            capacity=Resources(
                cpu_millicores=rng.choice((2000, 4000, 8000)),
                ram_bytes=rng.choice((4, 8, 16)) << 30,
                net_rx_bytes_per_s=rng.choice((0, 1000, 5000)),
            ),
            slots=rng.randint(1, 4),
            rack_id=f"r{(rack := rng.randrange(4))}",
            pod_id=f"p{rack % 2}",
            labels={"zone": rng.choice("ab"), "quincy.blocks": blocks},
        )

    def task(self, time: int) -> TaskSubmitted:
        rng = self.rng
        task_id = self.next_task
        self.next_task += 1
        labels = {"nomora.app": rng.choice(("memcached", "strads"))}
        if rng.random() < 0.5:
            labels["quincy.input"] = ",".join(
                f"{block}:{rng.choice((1, 64, 512)) << 20}"
                for block in rng.sample(["b0", "b1", "b2", "b3"], rng.randint(1, 2))
            )
        if rng.random() < 0.3:
            labels["zoe.class"] = "core"
        return TaskSubmitted(
            time=time,
            task_id=task_id,
            job_id=f"j{task_id // 4}",
            request=Resources(
                cpu_millicores=rng.choice((0, 500, 1000)),
                ram_bytes=rng.choice((0, 1, 2)) << 30,
                net_rx_bytes_per_s=rng.choice((0, 200, 800)),
            ),
            selectors=(LabelSelector.equals("zone", "a"),) if rng.random() < 0.2 else (),
            labels=labels,
        )

    def round_events(self, scheduler: Scheduler, time: int) -> list[Any]:
        """This round's events, decided from the cluster as it is."""
        rng, state = self.rng, scheduler.state
        events: list[Any] = [self.task(time) for _ in range(rng.randint(0, 6))]
        running = [t.task_id for t in state.tasks.values() if t.state is TaskState.RUNNING]
        for task_id in rng.sample(running, min(len(running), rng.randint(0, 3))):
            events.append(TaskCompleted(time=time, task_id=task_id))
        live = [t.task_id for t in state.tasks.values() if t.state is TaskState.RUNNABLE]
        if live and rng.random() < 0.2:
            events.append(TaskRemoved(time=time, task_id=rng.choice(live)))
        machines = list(state.machines)
        roll = rng.random()
        if roll < 0.1 or not machines:
            events.append(self.machine(time))
        elif roll < 0.15 and len(machines) > 2:
            events.append(MachineFailed(time=time, machine_id=rng.choice(machines)))
        elif roll < 0.2 and len(machines) > 2:
            events.append(MachineRemoved(time=time, machine_id=rng.choice(machines)))
        elif roll < 0.3:
            events.append(
                MachineUpdated(
                    time=time,
                    machine_id=rng.choice(machines),
                    labels={"zone": rng.choice("ab"), "quincy.blocks": "b1"},
                )
            )
        elif roll < 0.4:
            events.append(
                MachineStats(
                    time=time,
                    machine_id=rng.choice(machines),
                    usage=Resources(net_rx_bytes_per_s=rng.choice((0, 500, 4000))),
                )
            )
        return events


def per_item(scheduler: Scheduler) -> Scheduler:
    """Make `scheduler` ask every question through the per-item hooks."""
    scheduler.policy.per_item = lambda batch_hook: True  # type: ignore[method-assign]
    return scheduler


@pytest.mark.parametrize("policy", BUILT_IN)
@pytest.mark.parametrize("seed", [1, 2])
def test_batch_forms_build_the_graph_the_per_item_hooks_build(policy: str, seed: int) -> None:
    events = RandomCluster(seed)
    with (
        Scheduler(load_policy(policy), solver="cost-scaling") as batch,
        per_item(Scheduler(load_policy(policy), solver="cost-scaling")) as items,
    ):
        for _ in range(6):
            machine = events.machine(0)
            batch.handle(machine)
            items.handle(machine)
        decided_in_all = 0
        for round_number in range(1, 16):
            now = round_number * SECOND
            for event in events.round_events(batch, now):
                batch.handle(event)
                items.handle(event)
            decided = batch.decide(now)
            asked = items.decide(now)
            assert described(batch.graph_manager) == described(items.graph_manager), round_number
            assert sorted(map(str, decided.task_errors)) == sorted(map(str, asked.task_errors))
            decisions = list(decided.decisions)
            decided_in_all += len(decisions)
            batch.apply_decisions(decisions)
            items.apply_decisions(decisions)
        assert decided_in_all > 0  # the rounds placed tasks: the graphs were not all idle
