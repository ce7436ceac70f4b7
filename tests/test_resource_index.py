"""Tests of `ResourceIndex`: the tables a round carries over and reads incrementally are the
tables a fresh index reads from the same state, whatever joined, left, came back or changed."""

from __future__ import annotations

from typing import TypeVar

from hypothesis import example, given, settings
from hypothesis import strategies as st

from firmament_py.flow.graph import FlowGraph, NodeKind
from firmament_py.model import (
    ClusterState,
    MachineAdded,
    MachineFailed,
    MachineRemoved,
    MachineStats,
    MachineUpdated,
    Resources,
    TaskSubmitted,
)
from firmament_py.scheduler import Scheduler
from firmament_py.scheduler.resource_index import ResourceIndex

T = TypeVar("T")
MACHINES = ["m0", "m1", "m2"]
CHANGES = st.tuples(
    st.sampled_from(["add", "remove", "fail", "labels", "stats", "place"]),
    st.sampled_from(MACHINES),
    st.integers(0, 3),
)
ROUNDS = st.lists(st.lists(CHANGES, min_size=1, max_size=6), min_size=1, max_size=6)
"""Changes to the cluster between the index's reads (a round reads once)."""


def tables(index: ResourceIndex) -> dict[str, object]:
    """What the index holds, without node ids (a fresh index numbers nodes its own way)."""
    model = index._model
    return {
        "machines": list(index.machine_ids),
        "racks": list(index.rack_ids),
        "pods": list(index.pod_ids),
        "rack of machine": [index.rack_ids[r] for r in index._machine_rack.tolist()],
        "pod of rack": [index.pod_ids[p] for p in index._rack_pod.tolist()],
        "columns": {
            name: getattr(model, name).tolist()
            for name in ("machines", "slots", "running_tasks", "capacity", "reserved")
        },
        "usage": model.measured_usage.tolist(),
        "labels": [dict(labels) for labels in index._labels],
    }


def check_nodes(index: ResourceIndex, graph: FlowGraph) -> None:
    """Every resource has a live node of its own, and the maps agree with the rows."""
    nodes = [*index.pod_nodes.tolist(), *index.rack_nodes.tolist(), *index.machine_nodes.tolist()]
    assert len(set(nodes)) == len(nodes)
    for node in nodes:
        assert graph.has_node(node)
    for row, machine_id in enumerate(index.machine_ids):
        node = int(index.machine_nodes[row])
        assert index.node_machine[node] == machine_id
        assert index.node_of_machine[machine_id] == node
        assert graph.node_kind(node) == NodeKind.LEAF
        assert index.machine_row[machine_id] == row


@settings(max_examples=300, deadline=None)
@given(rounds=ROUNDS)
@example([[("add", "m0", 0)], [("place", "m0", 0), ("add", "m1", 0)]])  # touched, then a join
@example([[("add", "m0", 0), ("add", "m1", 1)], [("remove", "m0", 0), ("add", "m0", 2)]])
def test_the_tables_kept_in_step_are_the_tables_read_afresh(
    rounds: list[list[tuple[str, str, int]]],
) -> None:
    state = ClusterState()
    graph = FlowGraph()
    index = ResourceIndex(graph, graph.add_node(0, NodeKind.SINK), state)
    index.sync()
    task_id = 0
    changes = [(*change, last) for r in rounds for last, change in _marked_last(r)]
    for time, (action, machine_id, pick, read) in enumerate(changes, start=1):
        machine = state.machines.get(machine_id)
        if action == "add" and machine is None:
            state.apply(
                MachineAdded(
                    time=time,
                    machine_id=machine_id,
                    capacity=Resources(cpu_millicores=4000),
                    slots=2 + pick,
                    rack_id=f"r{pick % 3}",
                    pod_id=f"p{pick % 3 % 2}",  # racks r0 and r2 in p0, r1 in p1
                )
            )
        elif action in ("remove", "fail") and machine is not None:
            kind = MachineRemoved if action == "remove" else MachineFailed
            state.apply(kind(time=time, machine_id=machine_id))
        elif action == "labels" and machine is not None:
            state.apply(MachineUpdated(time=time, machine_id=machine_id, labels={"l": str(pick)}))
        elif action == "stats" and machine is not None:
            usage = Resources(cpu_millicores=100 * pick)
            state.apply(MachineStats(time=time, machine_id=machine_id, usage=usage))
        elif action == "place" and machine is not None:
            state.apply(TaskSubmitted(time=time, task_id=task_id, job_id="j"))
            if len(machine.running_task_ids) < machine.slots:
                state.place(task_id, machine_id, time=time)
            task_id += 1
        if read:
            index.sync()
            check_nodes(index, graph)
    fresh_graph = FlowGraph()
    fresh = ResourceIndex(fresh_graph, fresh_graph.add_node(0, NodeKind.SINK), state)
    fresh.sync()
    assert tables(index) == tables(fresh)
    # Nothing but the live resources' nodes (and the sink) is left in the graph.
    resources = len(state.machines) + len(state.racks) + len(state.pods)
    assert graph.num_nodes == 1 + resources


def _marked_last(changes: list[T]) -> list[tuple[bool, T]]:
    return [(position == len(changes) - 1, change) for position, change in enumerate(changes)]


@settings(max_examples=60, deadline=None)
@given(rounds=ROUNDS, pods=st.lists(st.integers(0, 1), min_size=3, max_size=3))
@example(  # r0 empties with its pod p0 gone, and comes back in p1 (its arc from p0 went too)
    [[("add", "m0", 0), ("add", "m1", 1)], [("remove", "m0", 0), ("add", "m2", 0)]], [0, 1, 1]
)
def test_the_role_arcs_join_the_right_live_nodes_round_after_round(
    rounds: list[list[tuple[str, str, int]]], pods: list[int]
) -> None:
    """Through real rounds, racks that empty and come back in another pod among them: every
    topology and leaf arc the index keeps by role is alive and joins its resource's nodes."""
    with Scheduler("trivial") as scheduler:
        task_id = appeared = 0
        for time, changes in enumerate(rounds, start=1):
            for action, machine_id, pick in changes:
                machine = scheduler.state.machines.get(machine_id)
                if action == "add" and machine is None:
                    rack = pick % 3
                    existing = scheduler.state.racks.get(f"r{rack}")
                    if existing is not None:
                        pod = existing.pod_id
                    else:  # the racks that appear take the pods in turn
                        pod, appeared = f"p{pods[appeared % len(pods)]}", appeared + 1
                    scheduler.handle(
                        MachineAdded(
                            time=time,
                            machine_id=machine_id,
                            capacity=Resources(cpu_millicores=4000),
                            slots=1 + pick,
                            rack_id=f"r{rack}",
                            pod_id=pod,
                        )
                    )
                elif action in ("remove", "fail") and machine is not None:
                    kind = MachineRemoved if action == "remove" else MachineFailed
                    scheduler.handle(kind(time=time, machine_id=machine_id))
                elif action == "place":
                    scheduler.handle(TaskSubmitted(time=time, task_id=task_id, job_id="j"))
                    task_id += 1
            scheduler.run_round(time)
            check_role_arcs(scheduler.graph_manager.resources, scheduler.graph_manager.graph)


def check_role_arcs(index: ResourceIndex, graph: FlowGraph) -> None:
    """The arcs the index keeps by role are alive and join the right nodes, and no arc was
    removed twice (unlinking an arc that is already gone corrupts the graph's counts)."""
    assert graph.num_arcs == len(graph.arc_ids()), "an arc was removed twice"
    rack_node = dict(zip(index.rack_ids, index.rack_nodes.tolist(), strict=True))
    pod_node = dict(zip(index.pod_ids, index.pod_nodes.tolist(), strict=True))
    for row, machine_id in enumerate(index.machine_ids):
        node = int(index.machine_nodes[row])
        rack_id = index.rack_ids[int(index._machine_rack[row])]
        for arc, src, dst in (
            (int(index._machine_in[row]), rack_node[rack_id], node),
            (int(index._leaf[row]), node, index.sink),
        ):
            assert graph.has_arc(arc), f"{machine_id}: role arc {arc} is gone"
            assert (graph.arc_src(arc), graph.arc_dst(arc)) == (src, dst)
    for row, rack_id in enumerate(index.rack_ids):
        arc = int(index._rack_in[row])
        pod_id = index.pod_ids[int(index._rack_pod[row])]
        assert graph.has_arc(arc), f"rack {rack_id}: role arc {arc} is gone"
        assert (graph.arc_src(arc), graph.arc_dst(arc)) == (pod_node[pod_id], rack_node[rack_id])
