"""Draw the flow network the scheduler solves, for the README: docs/images/flow-network.png.

A tiny cluster, two racks of two machines with two slots each, runs one job under the `quincy`
policy. Each machine holds a data block (label `quincy.blocks`) and most tasks read one (label
`quincy.input`): that gives Quincy its preference arcs. Round one places tasks 1 and 2, four
more arrive; the picture is round two's graph, read from the real `Scheduler`'s graph manager,
with the flow that round's solve found.

Run:  python examples/draw_flow_network.py [OUT.png]   (default docs/images/flow-network.png)
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # draw to a file, with no display
import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

from firmament_policies.quincy import BLOCKS_LABEL, CLUSTER_AGGREGATOR, INPUT_LABEL
from firmament_py.model.events import MachineAdded, TaskSubmitted
from firmament_py.model.resources import Resources
from firmament_py.scheduler import ArcType, RoundResult, Scheduler

SECOND = 1_000_000  # the model's time unit is the microsecond
GIB = 1 << 30
JOB = "job"
RACKS = {"rack-1": ("m1", "m2"), "rack-2": ("m3", "m4")}  # each machine has two slots
BLOCKS = {"m1": "a", "m2": "b", "m3": "c", "m4": "d"}  # the data block each machine holds
RUNNING = {1: ("a", 1), 2: ("a", 1)}
"""Tasks submitted for round one, at 0 s: task -> (the block it reads, GiB read)."""
WAITING: dict[int, tuple[str, int] | None] = {3: ("a", 4), 4: ("a", 2), 5: ("c", 1), 6: None}
"""Tasks submitted at 5 s for round two, at 10 s (task 6 reads nothing). Tasks 3 and 4 want
m1, which tasks 1 and 2 fill: moving 2 GiB within the rack is cheaper than waiting, 4 GiB not."""


@dataclass(frozen=True)
class Arc:
    """One arc of the graph, with the flow the round's solve put on it."""

    src: int
    dst: int
    cost: int
    capacity: int
    flow: int
    kind: ArcType


@dataclass(frozen=True)
class FlowNetwork:
    """The graph as the picture shows it: the nodes of each role (its columns, left to right:
    task, unscheduled, cluster, pod, rack, machine, sink), their labels, the arcs, the round."""

    roles: dict[str, list[int]]
    labels: dict[int, str]
    tasks: dict[int, int]  # task id -> node
    arcs: list[Arc]
    result: RoundResult


def build() -> FlowNetwork:
    """Run the scenario above, two rounds, and read round two's graph."""
    scheduler = Scheduler(policy="quincy")
    for rack_id, machine_ids in RACKS.items():
        for machine_id in machine_ids:
            cpu, labels = Resources(cpu_millicores=4000), {BLOCKS_LABEL: BLOCKS[machine_id]}
            added = MachineAdded(
                time=0, machine_id=machine_id, capacity=cpu, slots=2, rack_id=rack_id, labels=labels
            )
            scheduler.handle(added)
    for time, tasks in ((0, RUNNING), (5 * SECOND, WAITING)):
        for task_id, reads in tasks.items():
            labels = {INPUT_LABEL: f"{reads[0]}:{reads[1] * GIB}"} if reads else {}
            scheduler.handle(TaskSubmitted(time=time, task_id=task_id, job_id=JOB, labels=labels))
        result = scheduler.run_round(2 * time)
    return flow_network(scheduler, result)


def flow_network(scheduler: Scheduler, result: RoundResult) -> FlowNetwork:
    """Read the graph the last round solved, with its flow: each node's role through the graph
    manager's accessors (failing if a node has none), and the flow the solver holds."""
    manager, resources = scheduler.graph_manager, scheduler.graph_manager.resources
    tasks = dict(sorted(manager.tasks.node_of.items()))  # task id -> node, as task_node() gives
    unscheduled, cluster = manager.job_node(JOB), manager.class_node(CLUSTER_AGGREGATOR)
    assert unscheduled is not None and cluster is not None
    machines = {manager.machine_node_of(m): m for m in BLOCKS}
    roles = {"task": list(tasks.values()), "unscheduled": [unscheduled], "cluster": [cluster]}
    roles |= {"pod": resources.pod_nodes.tolist(), "rack": resources.rack_nodes.tolist()}
    roles |= {"machine": list(machines), "sink": [manager.sink]}
    # The round has placed its tasks in the cluster state, but the graph changes only at the
    # next round's update, and the solver keeps the flow it found: the round's own solution.
    flow, cost = scheduler.solver.network.flows_and_cost()
    assert cost == result.cost
    graph, a, ids = manager.graph, manager.graph.arrays(), manager.graph.arc_ids()
    columns = (a.src[ids], a.dst[ids], a.cost[ids], a.cap[ids], flow[ids], a.arc_kind[ids])
    rows = zip(*(column.tolist() for column in columns), strict=True)
    arcs = [Arc(src, dst, c, cap, f, ArcType(kind)) for src, dst, c, cap, f, kind in rows]
    labels = {unscheduled: f"U {JOB}", cluster: "X", manager.sink: "sink"}
    labels |= dict(zip(roles["pod"], resources.pod_ids, strict=True))
    labels |= dict(zip(roles["rack"], resources.rack_ids, strict=True))
    labels |= {node: f"{m}\nholds {BLOCKS[m]}" for node, m in machines.items()}
    runs_on = {arc.src: machines[arc.dst] for arc in arcs if arc.kind is ArcType.RUNNING}
    for task_id, node in tasks.items():
        reads = (RUNNING | WAITING)[task_id]
        what = f"{reads[1]} GiB of {reads[0]}" if reads else "no input"
        where = f"\nruns on {runs_on[node]}" if node in runs_on else ""
        labels[node] = f"task {task_id}\n{what}{where}"
    assert set(graph.node_ids().tolist()) == set(labels), "a node with no role in the picture"
    return FlowNetwork(roles, labels, tasks, arcs, result)


def layout(network: FlowNetwork) -> dict[int, tuple[float, float]]:
    """Columns left to right; tasks one unit apart, X and its pods above them, U below, each
    rack level with the middle of its machines (found from its arcs), the sink low right."""
    roles, bottom = network.roles, 1.0 - len(network.roles["task"])
    pos = {node: (0.0, -float(row)) for row, node in enumerate(roles["task"])}
    pos |= {roles["cluster"][0]: (2.0, 1.3), roles["unscheduled"][0]: (2.0, bottom - 1.3)}
    pos |= {node: (3.3 + row, 1.3) for row, node in enumerate(roles["pod"])}
    gap = (bottom + 1.0) / max(1, len(roles["machine"]) - 1)
    pos |= {node: (6.1, -0.2 + row * gap) for row, node in enumerate(roles["machine"])}
    for rack in roles["rack"]:
        ys = [pos[arc.dst][1] for arc in network.arcs if arc.src == rack]
        pos[rack] = (4.5, sum(ys) / len(ys))
    pos[roles["sink"][0]] = (7.9, bottom - 0.3)
    return pos


# Where, left to right, the cost of a task's arc is written, by the arc's destination: there
# the labels of one task's arcs, and of its neighbours', stand apart.
TASK_LABEL_X = {"cluster": 1.0, "unscheduled": 1.25, "rack": 2.4, "machine": 3.0}
ARROW: dict[str, Any] = {"arrowstyle": "-|>", "mutation_scale": 12, "shrinkA": 0, "shrinkB": 0}
BOX: dict[str, Any] = {"boxstyle": "round,pad=0,rounding_size=0.08", "fc": "white", "ec": "0.2"}
COST: dict[str, Any] = {"fontsize": 8, "ha": "center", "va": "center"}
COST["bbox"] = {"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none"}


def draw(network: FlowNetwork, path: Path) -> None:
    """Nodes as boxes, arcs as arrows from box to box: grey, or thick where flow runs (green
    towards a machine, orange through U: waiting); each labelled with its cost, and with its
    capacity where that is above one."""
    pos, labels, roles = layout(network), network.labels, network.roles
    role = {node: name for name, nodes in roles.items() for node in nodes}
    size = {  # box width and height in data units, from the label's lines
        node: (0.2 + 0.085 * max(map(len, text.split("\n"))), 0.3 + 0.2 * text.count("\n"))
        for node, text in labels.items()
    }
    fig = plt.figure(figsize=(12, 8.4), dpi=110)  # 1320 x 924 pixels
    ax = fig.add_axes((0.0, 0.12, 1.0, 0.82))
    waits = roles["unscheduled"][0]
    for arc in network.arcs:
        through_u = waits in (arc.src, arc.dst)
        color = ("tab:orange" if through_u else "tab:green") if arc.flow else "0.72"
        # Flow runs left to right: out of a box's right side, into the next one's left side.
        (x0, y0), (x1, y1) = pos[arc.src], pos[arc.dst]
        x0, x1 = x0 + size[arc.src][0] / 2, x1 - size[arc.dst][0] / 2
        arrow = FancyArrowPatch((x0, y0), (x1, y1), lw=3 if arc.flow else 1, color=color, **ARROW)
        ax.add_patch(arrow)
        # A steep arc's label goes near its tail, where it is still apart from its siblings.
        along = 0.25 if abs(y1 - y0) > abs(x1 - x0) else 0.5
        lx = TASK_LABEL_X[role[arc.dst]] if role[arc.src] == "task" else x0 + along * (x1 - x0)
        ly = y0 + (y1 - y0) * (lx - x0) / (x1 - x0)
        text = str(arc.cost) if arc.capacity == 1 else f"{arc.cost}, cap {arc.capacity}"
        ax.text(lx, ly, text, color="black" if arc.flow else "0.35", **COST)
    for node, (x, y) in pos.items():
        w, h = size[node]
        ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, **BOX))
        ax.text(x, y, labels[node], fontsize=9, ha="center", va="center")
    ax.set_xlim(-0.7, 8.3)
    ax.set_ylim(min(y for _, y in pos.values()) - 0.5, 1.7)
    ax.axis("off")
    result, flows = network.result, {(arc.src, arc.dst): arc.flow for arc in network.arcs}
    waiting = ", ".join(str(t) for t, node in network.tasks.items() if flows.get((node, waits)))
    title = f"The flow network of a Quincy scheduling round, at {result.time // SECOND} s"
    fig.suptitle(title, fontsize=14)
    caption = (
        "Each task sends one unit of flow to the sink: through U job, the job's unscheduled "
        "aggregator (it waits), X, the cluster aggregator (any machine),\na rack or machine "
        "near its data, or, if it runs, its own machine. Numbers: arc costs (cap: capacity, "
        f"where above 1).\nThick: the scheduler's optimal flow (cost {result.cost}); green "
        f"reaches a machine, orange waits (task {waiting})."
    )
    fig.text(0.5, 0.012, caption, ha="center", va="bottom", fontsize=10)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/images/flow-network.png")
    draw(build(), out)
    print(f"wrote {out}")
