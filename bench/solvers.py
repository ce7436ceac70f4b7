"""Solver benchmarks on Firmament-shaped graphs, beside OR-Tools (and networkx where it can).

Run by hand, never from the tests; results go to docs/benchmarks.md. Every scenario builds one
graph and times every algorithm on that same graph in the same run, repeating and reporting
medians. Costs are cross-checked: a benchmark that times a wrong answer is worthless.

    python bench/solvers.py                       # every scenario, 12,500 machines
    python bench/solvers.py --scenarios s50,s90 --repeats 5
    python bench/solvers.py --machines 1000 --scenarios s50 --networkx

Scenarios (issue 2; Firmament OSDI'16 figures 7, 8, 9, 14, 16):

    s50        50% of slots running, 3,000 waiting tasks (Quincy shape)
    s90        90% running, 3,000 waiting
    s105       75% running, waiting demand to 105% of the slots
    ls50       s50 as a load-spreading graph
    job1k..    load-spreading at 50%, solved; then one job of 1,000 / 5,000 / 10,000 tasks
               arrives as a round of changes (apply + solve timed); with the algorithm
               "cost-scaling<-relaxation", cost scaling starts from relaxation's answer;
               with --job-after N, N untimed rounds of --churn come before the job (a
               daemon's small rounds, whose winner a race makes its favourite)
    qjob1k..   the same on s90's Quincy-shaped cluster (90% running, 3,000 waiting)
    inc90      incremental rounds on s90, each finishing 1% of tasks and submitting as many

With --gap SECONDS, every solver waits that long (untimed) before each round of the job and
incremental scenarios: a scheduler's time between rounds, which a race uses to catch its
workers up (`racing.DEFAULT_IDLE`). Without it, rounds follow back to back.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from firmament_py.flow.changes import ChangeBatch
from firmament_py.flow.graph import FlowGraph
from firmament_py.flow.graphgen import ClusterGraph, ClusterSpec
from firmament_py.solvers import FlowSolver, make_solver

SCRATCH_ALGORITHMS = ["relaxation", "cost-scaling", "race"]
# Job scenarios only: cost scaling that took relaxation's answer to the cluster (`sync`), as a
# race's cost-scaling worker does after relaxation wins, instead of solving it itself.
ADOPTING = "cost-scaling<-relaxation"
INCREMENTAL_ALGORITHMS: dict[str, tuple[str, dict[str, object]]] = {
    "race": ("race", {}),
    "relaxation (scratch)": ("relaxation", {}),
    "relaxation (incremental)": ("relaxation", {"incremental": True}),
    "cost-scaling (incremental)": ("cost-scaling", {}),
    "cost-scaling (scratch)": ("cost-scaling", {"incremental": False}),
}


# ---------------------------------------------------------------------- reference solvers


def ortools_solve(graph: FlowGraph) -> tuple[int, float]:
    """Cost and seconds for OR-Tools' SimpleMinCostFlow, building included (as ours loads)."""
    from ortools.graph.python import min_cost_flow

    start = time.perf_counter()
    a = graph.arrays()
    arcs = graph.arc_ids()
    if np.any(a.low[arcs] != 0):
        raise ValueError("benchmark graphs have no lower bounds")
    mcf = min_cost_flow.SimpleMinCostFlow()
    mcf.add_arcs_with_capacity_and_unit_cost(a.src[arcs], a.dst[arcs], a.cap[arcs], a.cost[arcs])
    nodes = graph.node_ids()
    mcf.set_nodes_supplies(nodes, a.supply[nodes])
    status = mcf.solve()
    elapsed = time.perf_counter() - start
    if status != mcf.OPTIMAL:
        raise RuntimeError(f"OR-Tools status {status}")
    return int(mcf.optimal_cost()), elapsed


def networkx_solve(graph: FlowGraph) -> tuple[int, float]:
    import networkx as nx

    start = time.perf_counter()
    g = nx.DiGraph()
    for v in graph.node_ids().tolist():
        g.add_node(v, demand=-graph.supply(v))
    a = graph.arrays()
    arcs = graph.arc_ids()
    extra = graph.node_id_bound
    for s, d, c, w in zip(
        a.src[arcs].tolist(),
        a.dst[arcs].tolist(),
        a.cap[arcs].tolist(),
        a.cost[arcs].tolist(),
        strict=True,
    ):
        if g.has_edge(s, d):  # a DiGraph holds no parallel arcs: split this one in two
            g.add_node(extra, demand=0)
            g.add_edge(s, extra, capacity=c, weight=w)
            s, extra = extra, extra + 1
            w = 0
        g.add_edge(s, d, capacity=c, weight=w)
    cost, _flow = nx.network_simplex(g)
    return int(cost), time.perf_counter() - start


# ---------------------------------------------------------------------- scenarios


def spec_for(name: str, machines: int, seed: int) -> tuple[ClusterSpec, int]:
    """The cluster spec of a scenario and the size of the one arriving job (0 for none)."""
    slots = machines * 12
    waiting = max(30, round(3000 * machines / 12_500))
    if name in ("s50", "inc50"):
        return ClusterSpec(machines=machines, running=0.5, waiting=waiting, seed=seed), 0
    if name in ("s90", "inc90"):
        return ClusterSpec(machines=machines, running=0.9, waiting=waiting, seed=seed), 0
    if name == "s105":
        return ClusterSpec(
            machines=machines, running=0.75, waiting=round(0.30 * slots), seed=seed
        ), 0
    if name == "ls50":
        return ClusterSpec(
            machines=machines, running=0.5, waiting=waiting, shape="load-spreading", seed=seed
        ), 0
    if name.startswith("job"):
        size = int(name[3:].replace("k", "000"))
        return ClusterSpec(
            machines=machines, running=0.5, waiting=0, shape="load-spreading", seed=seed
        ), size
    if name.startswith("qjob"):
        size = int(name[4:].replace("k", "000"))
        return ClusterSpec(machines=machines, running=0.9, waiting=waiting, seed=seed), size
    raise SystemExit(f"unknown scenario {name!r}")


@dataclass
class Row:
    scenario: str
    algorithm: str
    times: list[float] = field(default_factory=list)
    solve_times: list[float] = field(default_factory=list)
    cost: int | None = None
    note: str = ""

    @property
    def median(self) -> float:
        return statistics.median(self.times) if self.times else float("nan")


def fresh_solve(algorithm: str, graph: FlowGraph) -> tuple[int, float, float, str]:
    solver = make_solver(algorithm)
    try:
        if algorithm == "race":
            _warm(solver)
        start = time.perf_counter()
        result = solver.solve_graph(graph)
        elapsed = time.perf_counter() - start
        return result.cost, elapsed, result.wall_time, result.algorithm
    finally:
        solver.close()


def _warm(solver: FlowSolver) -> None:
    """Let a race's workers finish warming up before the clock starts (reported separately).

    `wait_ready` waits for every worker, as the daemon does before it serves: a solve alone
    returns with the first worker's answer, and the other, still loading its kernels, then
    took the next snapshot up to 200 ms late and lost the first race of the graph, which made
    the wrong solver the hedge's favourite for the timed round."""
    solver.wait_ready()
    g = FlowGraph()
    a, b = g.add_node(supply=1), g.add_node(supply=-1)
    g.add_arc(a, b, capacity=1, cost=1)
    solver.solve_graph(g)


def run_scratch(name: str, args: argparse.Namespace) -> list[Row]:
    spec, job = spec_for(name, args.machines, args.seed)
    t0 = time.perf_counter()
    cluster = ClusterGraph(spec)
    if job:
        cluster.submit_job(job)
    graph = cluster.graph
    graph.discard_changes()
    print(
        f"# {name}: {graph.num_nodes:,} nodes, {graph.num_arcs:,} arcs "
        f"(generated in {time.perf_counter() - t0:.1f} s)",
        flush=True,
    )
    rows: list[Row] = []
    solvers: list[tuple[str, Callable[[], tuple[int, float, float, str]]]] = [
        (alg, functools.partial(fresh_solve, alg, graph)) for alg in args.algorithms
    ]
    solvers.append(("OR-Tools", lambda: (*ortools_solve(graph), 0.0, "ortools")))
    if args.networkx:
        solvers.append(("networkx", lambda: (*networkx_solve(graph), 0.0, "networkx")))
    for label, solve in solvers:
        row = Row(name, label)
        repeats = 1 if label == "networkx" else args.repeats
        winners: list[str] = []
        for _ in range(repeats):
            cost, elapsed, solve_only, who = solve()
            row.times.append(elapsed)
            row.solve_times.append(solve_only)
            winners.append(who)
            if row.cost is None:
                row.cost = cost
            elif row.cost != cost:
                raise SystemExit(f"{label} gave costs {row.cost} and {cost} on {name}")
            if elapsed > args.slow:  # one run this long says enough
                row.note = f"{len(row.times)} run(s)"
                break
        if label == "race":
            row.note = ", ".join(
                f"{w.split(':')[-1]} x{winners.count(w)}" for w in sorted(set(winners))
            )
        rows.append(row)
        print(
            f"  {label:28s} median {row.median * 1000:9.1f} ms  cost {row.cost}  {row.note}",
            flush=True,
        )
        if time.perf_counter() - t0 > args.budget:
            print("  (scenario time budget spent; skipping the rest)")
            break
    costs = {r.cost for r in rows}
    if len(costs) != 1:
        raise SystemExit(f"algorithms disagree on {name}: {[(r.algorithm, r.cost) for r in rows]}")
    return rows


def run_job(name: str, args: argparse.Namespace) -> list[Row]:
    """Figure 9's contention case: one big job arrives at a solved load-spreading cluster.

    Each solver first solves the cluster without the job (untimed); the job then arrives as
    one round of changes, and the time to apply it and solve is what counts, for every
    solver the same way (the race gets the batch like any incremental round).
    """
    spec, job = spec_for(name, args.machines, args.seed)
    cluster = ClusterGraph(spec)
    graph = cluster.graph
    snapshot = graph.snapshot()
    graph.discard_changes()
    rounds = _rounds_before_the_job(cluster, snapshot, args)
    cluster.submit_job(job)
    batch = graph.take_changes()
    before = ""
    if rounds:
        each = statistics.median(len(b) for b in rounds)
        before = f" after {len(rounds)} rounds of {args.churn:.2%} churn ({each:,.0f} rows each)"
    if args.gap:
        before += f", {args.gap} s before each round"
    print(
        f"# {name}: {graph.num_nodes:,} nodes, {graph.num_arcs:,} arcs after a job of "
        f"{job:,} tasks ({len(batch):,} rows) arrives at a {spec.running:.0%} full {spec.shape} "
        "cluster" + before,
        flush=True,
    )
    # Repetitions outermost, so that every algorithm sees the same stretch of the VM's drift:
    # the race's target is a ratio to cost scaling alone.
    rows = {label: Row(name, label) for label in args.algorithms}
    winners: dict[str, list[str]] = {label: [] for label in args.algorithms}
    round_winners: list[str] = []  # the race's, of the rounds before the job
    if ADOPTING in rows:  # the answer cost scaling adopts, once for every repetition
        donor = make_solver("relaxation", incremental=True)
        donor.load(snapshot)
        answer = donor.solve()
    for _ in range(args.repeats):
        for label, row in rows.items():
            solver = make_solver("cost-scaling" if label == ADOPTING else label)
            try:
                if label == "race":
                    _warm(solver)
                solver.load(snapshot)
                if label == ADOPTING:
                    solver.sync(answer.flow, answer.potentials)
                else:
                    solver.solve()
                for changes in rounds:
                    time.sleep(args.gap)
                    solver.apply(changes)
                    won = solver.solve().algorithm
                    if label == "race":
                        round_winners.append(won)
                time.sleep(args.gap)
                start = time.perf_counter()
                solver.apply(batch)
                result = solver.solve()
                row.times.append(time.perf_counter() - start)
                row.solve_times.append(result.wall_time)
                winners[label].append(result.algorithm)
            finally:
                solver.close()
            if row.cost is None:
                row.cost = result.cost
            elif row.cost != result.cost:
                raise SystemExit(f"{label} gave costs {row.cost} and {result.cost} on {name}")
    for label, row in rows.items():
        if label == "race":
            row.note = ", ".join(
                f"{w.split(':')[-1]} x{winners[label].count(w)}"
                for w in sorted(set(winners[label]))
            )
            if round_winners:
                row.note += "; rounds before: " + ", ".join(
                    f"{w.split(':')[-1]} x{round_winners.count(w)}"
                    for w in sorted(set(round_winners))
                )
        print(
            f"  {label:28s} median {row.median * 1000:9.1f} ms  cost {row.cost}  {row.note}",
            flush=True,
        )
    if "race" in rows and "cost-scaling" in rows:
        race, alone = rows["race"].times, rows["cost-scaling"].times
        paired = [r / c for r, c in zip(race, alone, strict=True)]
        print(
            "  race / cost-scaling, repetition by repetition: "
            f"median {statistics.median(paired):.2f} ({', '.join(f'{x:.2f}' for x in paired)})",
            flush=True,
        )
    row = Row(name, "OR-Tools (scratch)")
    for _ in range(args.repeats):
        cost, elapsed = ortools_solve(graph)
        row.times.append(elapsed)
        row.cost = cost
    print(f"  {row.algorithm:28s} median {row.median * 1000:9.1f} ms  cost {row.cost}", flush=True)
    every = [*rows.values(), row]
    if len({r.cost for r in every}) != 1:
        raise SystemExit(f"algorithms disagree on {name}: {[(r.algorithm, r.cost) for r in every]}")
    return every


def _rounds_before_the_job(
    cluster: ClusterGraph, snapshot: ChangeBatch, args: argparse.Namespace
) -> list[ChangeBatch]:
    """The --job-after rounds of churn, recorded once (placements observed with cost scaling)
    for every algorithm to replay."""
    if not args.job_after:
        return []
    if ADOPTING in args.algorithms:
        raise SystemExit(f"{ADOPTING} adopts an answer to the cluster alone: drop --job-after")
    recorder = make_solver("cost-scaling")
    try:
        recorder.load(snapshot)
        cluster.observe(recorder.solve().flow)
        rounds = []
        for _ in range(args.job_after):
            cluster.next_round(args.churn)
            rounds.append(cluster.graph.take_changes())
            recorder.apply(rounds[-1])
            cluster.observe(recorder.solve().flow)
        return rounds
    finally:
        recorder.close()


def run_incremental(name: str, args: argparse.Namespace) -> list[Row]:
    spec, _ = spec_for(name, args.machines, args.seed)
    cluster = ClusterGraph(spec)
    graph = cluster.graph
    snapshot = graph.snapshot()
    graph.discard_changes()
    # Record one sequence of rounds (placements observed with relaxation), then replay it.
    recorder = make_solver("relaxation")
    recorder.load(snapshot)
    cluster.observe(recorder.solve().flow)
    batches: list[ChangeBatch] = []
    replica_costs: list[int] = []
    for _ in range(args.rounds):
        cluster.next_round(args.churn)
        batch = graph.take_changes()
        batches.append(batch)
        recorder.apply(batch)
        result = recorder.solve()
        replica_costs.append(result.cost)
        cluster.observe(result.flow)
    rows_per_round = statistics.median(len(b) for b in batches)
    print(
        f"# {name}: {graph.num_nodes:,} nodes, {graph.num_arcs:,} arcs; {args.rounds} rounds of "
        f"{args.churn:.0%} churn, median {rows_per_round:,.0f} change rows per round"
        + (f", {args.gap} s before each" if args.gap else ""),
        flush=True,
    )
    rows: list[Row] = []
    for label, (algorithm, options) in INCREMENTAL_ALGORITHMS.items():
        if args.only and not any(word in label for word in args.only.split(",")):
            continue
        solver = make_solver(algorithm, **options)
        try:
            if algorithm == "race":
                _warm(solver)
            solver.load(snapshot)
            solver.solve()
            row = Row(name, label)
            winners: list[str] = []
            for i, batch in enumerate(batches):
                time.sleep(args.gap)
                start = time.perf_counter()
                solver.apply(batch)
                result = solver.solve()
                row.times.append(time.perf_counter() - start)
                row.solve_times.append(result.wall_time)
                winners.append(result.algorithm)
                if result.cost != replica_costs[i]:
                    raise SystemExit(f"{label}: round {i} cost {result.cost} != {replica_costs[i]}")
            row.cost = replica_costs[-1]
            if algorithm == "race":
                row.note = ", ".join(
                    f"{w.split(':')[-1]} x{winners.count(w)}" for w in sorted(set(winners))
                )
            rows.append(row)
            print(
                f"  {label:28s} median {row.median * 1000:9.1f} ms  max "
                f"{max(row.times) * 1000:9.1f} ms  {row.note}",
                flush=True,
            )
        finally:
            solver.close()
    # OR-Tools from scratch on the final round's graph (it has no incremental mode).
    row = Row(name, "OR-Tools (scratch, last round)")
    for _ in range(args.repeats):
        cost, elapsed = ortools_solve(graph)
        row.times.append(elapsed)
        row.cost = cost
    if row.cost != replica_costs[-1]:
        raise SystemExit(f"OR-Tools cost {row.cost} != {replica_costs[-1]}")
    rows.append(row)
    print(f"  {row.algorithm:28s} median {row.median * 1000:9.1f} ms", flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--scenarios", default="s50,s90,s105,ls50,job1k,job5k,job10k,inc90")
    parser.add_argument("--machines", type=int, default=12_500)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--churn", type=float, default=0.01)
    parser.add_argument(
        "--job-after", type=int, default=0, help="job scenarios: untimed rounds before the job"
    )
    parser.add_argument(
        "--gap", type=float, default=0.0, help="job, incremental: idle seconds before each round"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--algorithms", default=",".join(SCRATCH_ALGORITHMS))
    parser.add_argument("--networkx", action="store_true", help="also time networkx (slow)")
    parser.add_argument(
        "--slow", type=float, default=20.0, help="stop repeating after a run this long (s)"
    )
    parser.add_argument("--budget", type=float, default=600.0, help="seconds per scenario")
    parser.add_argument(
        "--only", default="", help="incremental: run only labels containing one of these words"
    )
    parser.add_argument("--json", type=Path, help="write all rows here")
    args = parser.parse_args()
    args.algorithms = args.algorithms.split(",")
    print(
        f"# python {sys.version.split()[0]}, {os.cpu_count()} cpus, machines={args.machines}, "
        f"repeats={args.repeats}",
        flush=True,
    )
    all_rows: list[Row] = []
    for name in args.scenarios.split(","):
        if name.startswith("inc"):
            runner = run_incremental
        elif name.startswith(("job", "qjob")):
            runner = run_job
        else:
            runner = run_scratch
        all_rows += runner(name, args)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps([r.__dict__ for r in all_rows], indent=1))


if __name__ == "__main__":
    main()
