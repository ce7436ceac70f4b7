"""GENERALIZED LIST SCHEDULING (G-LIST, Algorithm 2 and section V.A of
Giroire et al., INFOCOM'19) and its master-branch variant G-LIST-MASTER.

Time advances from event to event (a task ends, a machine frees, a pending task's data could
have arrived): for unit tasks this is Algorithm 2's slot-by-slot clock, without visiting slots
where nothing can change. At each time t:

1. A = the available task/machine assignments: (T, M) with M idle, every parent of T ended by t,
   and every communication T needs on M (each parent on another machine whose arc carries data)
   schedulable on the network machines so that it ends by t. Communications are planned at the
   earliest, into gaps of the network machines' timelines ("in previous time slots"), oldest
   parent first.
2. A is sorted by the number of communications needed; ties go to the task whose out-tree has
   the longest branch (CPU plus network time, feature 1), then to the faster machine, then to
   the task and machine order.
3. The minimum is placed at t with its communications booked; pairs with the same task or
   machine leave A, and pairs whose communications no longer fit by t wait for a later time.

Feature 2: the algorithm runs twice, on the workflow and on the reverse workflow (every arc
turned around, upload and download links exchanged); the reverse schedule read backwards in
time is a schedule of the workflow, and the shorter of the two is kept (the forward one on a
tie). `Schedule.notes` records both makespans and which pass won.

Feature 3 (G-LIST-MASTER): each job's heaviest branch (CPU plus network time, from a source to a
sink) is its master branch, run entirely by the job's master machine (the fastest machines go to
the jobs with the longest branches, round robin). Another task goes to a slave machine only if
it would finish there, plus the time to send its result back to the master, before the master
would have finished the job's ready work (itself included) from when it is next free.
"""

from __future__ import annotations

import heapq
import math

from firmament_py.workflows.bounds import downward_branches, longest_path
from firmament_py.workflows.model import Platform, Workflow, check_instance
from firmament_py.workflows.schedule import Schedule, TaskRun, Transfer
from firmament_py.workflows.timeline import EPSILON, Timeline, earliest_common_fit

__all__ = ["glist_pass", "glist_schedule", "time_reversed"]

Plan = list[tuple[int, tuple[int, ...], float, float]]
"""Planned communications: (parent, network machines, start, end)."""


def glist_schedule(workflow: Workflow, platform: Platform, *, master: bool = False) -> Schedule:
    """G-LIST (or G-LIST-MASTER with `master`): the better of the forward and reverse passes."""
    check_instance(workflow, platform)
    name = "glist-master" if master else "glist"
    forward = glist_pass(workflow, platform, master=master)
    reverse = time_reversed(
        glist_pass(workflow.reversed(), platform.swapped(), master=master), workflow, platform
    )
    best = forward if forward.makespan <= reverse.makespan + EPSILON else reverse
    best.algorithm = name
    best.notes = {
        "pass": "forward" if best is forward else "reverse",
        "forward_makespan": forward.makespan,
        "reverse_makespan": reverse.makespan,
    }
    return best


def glist_pass(workflow: Workflow, platform: Platform, *, master: bool = False) -> Schedule:
    """One pass of G-LIST over `workflow` as given."""
    return _GList(workflow, platform, master).run()


class _GList:
    def __init__(self, workflow: Workflow, platform: Platform, master: bool) -> None:
        self.workflow = workflow
        self.platform = platform
        n, m = workflow.n, platform.m
        rate = platform.reference_rate
        self.branch = downward_branches(workflow, max(platform.speeds), rate)
        self.position = {v: i for i, v in enumerate(workflow.topological)}
        self.machine = [-1] * n
        self.start = [0.0] * n
        self.end = [0.0] * n
        self.cpu_free = [0.0] * m
        self.network = [Timeline() for _ in platform.network_machines]
        self.transfers: list[Transfer] = []
        self.master = master
        self.master_of_job: list[int] = []
        self.on_branch = [False] * n
        if master:
            self._choose_masters(rate)

    def _choose_masters(self, rate: float) -> None:
        workflow, platform = self.workflow, self.platform
        fastest = max(platform.speeds)
        by_job: dict[int, set[int]] = {}
        for v, job in enumerate(workflow.job_of):
            by_job.setdefault(job, set()).add(v)
        branches = {
            job: longest_path(workflow, tasks, fastest, rate) for job, tasks in by_job.items()
        }
        length = {job: sum(workflow.sizes[v] for v in path) for job, path in branches.items()}
        machines = sorted(range(platform.m), key=lambda p: (-platform.speeds[p], p))
        self.master_of_job = [0] * len(workflow.jobs)
        for rank, job in enumerate(sorted(branches, key=lambda j: (-length[j], j))):
            self.master_of_job[job] = machines[rank % len(machines)]
            for v in branches[job]:
                self.on_branch[v] = True

    # ------------------------------------------------------------------ communications

    def plan(self, v: int, p: int) -> tuple[Plan, float]:
        """The communications task `v` needs on machine `p`, planned at the earliest (oldest
        parent first), and when the last one ends (-inf if none is needed)."""
        needed = [
            (self.end[u], self.position[u], u, data)
            for u, data in self.workflow.parents[v]
            if self.machine[u] != p and data > 0
        ]
        plan: Plan = []
        finish = -math.inf
        extra: list[tuple[int, float, float]] = []
        for ready, _, u, data in sorted(needed):
            best: tuple[float, tuple[int, ...], float] | None = None
            for links, rate in self.platform.routes(self.machine[u], p):
                duration = data / rate
                at = earliest_common_fit(
                    [self.network[link] for link in links], ready, duration, extra, links
                )
                if best is None or at + duration < best[0] + best[2] - EPSILON:
                    best = (at, links, duration)
            assert best is not None  # check_instance: a network machine exists
            at, links, duration = best
            plan.append((u, links, at, at + duration))
            extra.extend((link, at, at + duration) for link in links)
            finish = max(finish, at + duration)
        return plan, finish

    # ------------------------------------------------------------------ the master rule

    def allowed(self, v: int, p: int) -> bool:
        """Without a master: always. With one: branch tasks only on their job's master."""
        if not self.master:
            return True
        home = self.master_of_job[self.workflow.job_of[v]]
        return p == home or not self.on_branch[v]

    def worth_a_slave(self, v: int, p: int, t: float, queued: list[float]) -> bool:
        """G-LIST-MASTER: may `v` run on `p`, a machine other than its job's master, at `t`?
        `queued` is the ready, unplaced work of each job."""
        if not self.master:
            return True
        workflow, platform = self.workflow, self.platform
        job = workflow.job_of[v]
        home = self.master_of_job[job]
        if p == home:
            return True
        done_here = t + workflow.sizes[v] / platform.speeds[p]
        data_back = sum(data for _, data in workflow.children[v])
        if data_back > 0:
            rate = max(rate for _, rate in platform.routes(p, home))
            done_here += data_back / rate
        on_master = max(t, self.cpu_free[home]) + queued[job] / platform.speeds[home]
        return done_here < on_master - EPSILON

    # ------------------------------------------------------------------ the main loop

    def run(self) -> Schedule:
        workflow, platform = self.workflow, self.platform
        n, m = workflow.n, platform.m
        missing = [len(workflow.parents[v]) for v in range(n)]
        ready_at = [0.0] * n
        waiting = {v for v in range(n) if missing[v] == 0}
        events = [0.0]
        placed = 0
        # Communications only get harder to fit as network machines fill up, so a pair whose
        # communications could not end before time e cannot be available before e.
        not_before: dict[tuple[int, int], float] = {}
        while placed < n:
            t = heapq.heappop(events)
            while events and events[0] <= t + EPSILON:
                heapq.heappop(events)
            idle = [p for p in range(m) if self.cpu_free[p] <= t + EPSILON]
            ready = [v for v in waiting if ready_at[v] <= t + EPSILON]
            if not idle or not ready:
                continue
            queued = [0.0] * len(workflow.jobs)
            for v in ready:
                queued[workflow.job_of[v]] += workflow.sizes[v]
            pairs = []
            for v in ready:
                for p in idle:
                    if not self.allowed(v, p) or not_before.get((v, p), 0.0) > t + EPSILON:
                        continue
                    communications = sum(
                        1 for u, data in workflow.parents[v] if data > 0 and self.machine[u] != p
                    )
                    key = (
                        communications,
                        -self.branch[v],
                        -platform.speeds[p],
                        self.position[v],
                        p,
                    )
                    pairs.append((key, v, p))
            pairs.sort()
            taken_tasks: set[int] = set()
            taken_machines: set[int] = set()
            for _, v, p in pairs:
                if v in taken_tasks or p in taken_machines:
                    continue
                plan, finish = self.plan(v, p)
                if finish > t + EPSILON:
                    heapq.heappush(events, finish)
                    not_before[v, p] = finish
                    continue
                if not self.worth_a_slave(v, p, t, queued):
                    continue
                self.place(v, p, t, plan)
                taken_tasks.add(v)
                taken_machines.add(p)
                waiting.discard(v)
                queued[workflow.job_of[v]] -= workflow.sizes[v]
                placed += 1
                heapq.heappush(events, self.end[v])
                for child, _ in workflow.children[v]:
                    missing[child] -= 1
                    ready_at[child] = max(ready_at[child], self.end[v])
                    if missing[child] == 0:
                        waiting.add(child)
                if len(taken_machines) == len(idle):
                    break
            if placed < n and not events:
                raise AssertionError("G-LIST stalled")  # pragma: no cover
        names = workflow.tasks
        runs = {
            names[v]: TaskRun(names[v], self.machine[v], self.start[v], self.end[v])
            for v in range(n)
        }
        return Schedule(
            "glist-master" if self.master else "glist", workflow, platform, runs, self.transfers
        )

    def place(self, v: int, p: int, t: float, plan: Plan) -> None:
        names = self.workflow.tasks
        for u, links, start, end in plan:
            for link in links:
                self.network[link].book(start, end)
            self.transfers.append(
                Transfer(names[u], names[v], self.machine[u], p, links, start, end)
            )
        self.machine[v] = p
        self.start[v] = t
        self.end[v] = t + self.workflow.sizes[v] / self.platform.speeds[p]
        self.cpu_free[p] = self.end[v]


def time_reversed(schedule: Schedule, workflow: Workflow, platform: Platform) -> Schedule:
    """A schedule of `workflow` on `platform` read backwards from `schedule`, a schedule of the
    reverse workflow on the swapped platform: every interval [s, e) becomes [T - e, T - s) for
    the makespan T, and a transfer b -> a from q to p becomes a -> b from p to q."""
    horizon = schedule.makespan
    runs = {
        name: TaskRun(name, run.machine, horizon - run.end, horizon - run.start)
        for name, run in schedule.runs.items()
    }
    transfers = []
    for transfer in schedule.transfers:
        source, target = transfer.to_machine, transfer.from_machine
        links: tuple[int, ...]
        if len(transfer.network) == 1:  # a shared channel is the same either way
            links = transfer.network
        else:
            ((links, _),) = platform.routes(source, target)
        transfers.append(
            Transfer(
                transfer.target,
                transfer.source,
                source,
                target,
                links,
                horizon - transfer.end,
                horizon - transfer.start,
            )
        )
    transfers.sort(key=lambda x: (x.start, x.source, x.target))
    return Schedule(schedule.algorithm, workflow, platform, runs, transfers)
