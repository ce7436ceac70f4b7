"""`ClusterState`: the one owner of the cluster's jobs, tasks, machines and topology.

It applies events and the scheduler's placement decisions (place, preempt, migrate) and does
nothing else: no I/O, no clock, no solver, no policy. What it guarantees:

* Every request is checked in full before anything changes. A refused one raises
  `ClusterError` (unknown or duplicate id, illegal state change, a machine without room, time
  running backwards) and leaves the state exactly as it was.
* The invariants listed in `validate()` hold after every call: a task is RUNNING exactly when
  it has a machine; a machine's `reserved` is the sum of its running tasks' requests and fits
  in its capacity; it runs no more tasks than it has slots; racks and pods hold exactly the
  live machines; every task belongs to a live job.
* A machine that fails or is removed gives its running tasks back: each is evicted and
  re-queued as RUNNABLE, and the `TaskTransition` records say so.
* Iteration follows insertion order everywhere, so the same events give the same state and the
  same records in the same order.
* Network latency between machines (`LatencySample` events) is kept per pair of live machines:
  the latest sample of each direction and path, served as the largest of them (the worst case
  over the paths a flow may take). A machine that fails or is removed takes its samples along.

Every change returns the `TaskTransition` records it caused, which later rooms (the graph
manager, the service's replies, the simulator's metrics) consume.
"""

from __future__ import annotations

from collections.abc import KeysView, Mapping
from types import MappingProxyType

from firmament_py.model.entities import Job, Machine, Pod, Rack, Task
from firmament_py.model.errors import ClusterError, InvariantViolation
from firmament_py.model.events import (
    ClusterEvent,
    Event,
    LatencySample,
    MachineAdded,
    MachineFailed,
    MachineRemoved,
    MachineStats,
    MachineUpdated,
    TaskCompleted,
    TaskFailed,
    TaskRemoved,
    TaskStats,
    TaskSubmitted,
    TaskUpdated,
)
from firmament_py.model.ids import JobId, MachineId, PodId, RackId, TaskId, Time, check_time
from firmament_py.model.labels import NO_LABELS, Labels, LabelSelector, matches
from firmament_py.model.resources import NO_RESOURCES, Resources, total_of
from firmament_py.model.states import (
    FINAL_STATES,
    TaskState,
    TaskTransition,
    TransitionCause,
    check_transition,
)

__all__ = ["CLUSTER_SLOTS_LIMIT", "ClusterError", "ClusterState"]

CLUSTER_SLOTS_LIMIT = 2**40
"""All machines' slots together: the flow graph's arcs from the cluster's aggregators carry up
to that many tasks, and no arc's capacity may pass the flow graph's `MAX_CAPACITY`, which this
equals (a test holds them equal: the model imports nothing from the rest of the package)."""


class ClusterState:
    """Jobs, tasks and machines, changed only by events and placement decisions."""

    def __init__(self) -> None:
        self._now: Time = 0
        self._jobs: dict[JobId, Job] = {}
        self._tasks: dict[TaskId, Task] = {}
        # The RUNNABLE tasks, in the order they became runnable: rounds and policies ask for
        # them every round, and scanning every task for them would cost O(all tasks).
        self._runnable: dict[TaskId, None] = {}
        self._machines: dict[MachineId, Machine] = {}
        self._racks: dict[RackId, Rack] = {}
        self._pods: dict[PodId, Pod] = {}
        # Latency: per pair (both orders share one dict), the latest sample of each (source
        # machine, path); per machine, the pair's worst latency by peer; and a count of changes.
        self._samples: dict[tuple[MachineId, MachineId], dict[tuple[MachineId, int], float]] = {}
        self._peer_latency: dict[MachineId, dict[MachineId, float]] = {}
        self._latency_version = 0
        self._slots = 0  # all machines' slots together (see CLUSTER_SLOTS_LIMIT)
        self._running = 0  # tasks running, on all machines together
        # When each machine's slots, running tasks, resources, labels or membership last
        # changed, on a count of such changes, least recent first (`machines_touched_since`).
        self._machine_clock = 0
        self._machine_touches: dict[MachineId, int] = {}
        self._machines_joined_or_left = 0

    def __setstate__(self, state: dict[str, object]) -> None:
        # Unpickled (a snapshot, the daemon's scheduling process), a slot-only request is the
        # shared `NO_RESOURCES`, which placements skip the arithmetic for (`Resources.__reduce__`);
        # in a snapshot pickled before that, a zero vector of its own, made the shared one here.
        self.__dict__.update(state)
        if "_slots" not in state:  # pickled before the total was kept
            self._slots = sum(machine.slots for machine in self._machines.values())
        if "_running" not in state:  # likewise
            self._running = sum(len(m.running_task_ids) for m in self._machines.values())
        if "_machine_touches" not in state:  # likewise (a new reader reads every machine)
            self._machine_clock = 0
            self._machine_touches = {}
            self._machines_joined_or_left = 0
        for task in self._tasks.values():  # pickled before zero vectors pickled as the shared one
            request = task.request
            if (
                request is not NO_RESOURCES
                and not request.cpu_millicores
                and request == NO_RESOURCES
            ):
                task.request = NO_RESOURCES

    # ------------------------------------------------------------------ reading

    @property
    def now(self) -> Time:
        """The time of the latest accepted change (0 before any); no change may be earlier."""
        return self._now

    @property
    def jobs(self) -> Mapping[JobId, Job]:
        """Live jobs, in submission order (a read-only view)."""
        return MappingProxyType(self._jobs)

    @property
    def tasks(self) -> Mapping[TaskId, Task]:
        """Tasks in any state until removed, in submission order (a read-only view)."""
        return MappingProxyType(self._tasks)

    @property
    def machines(self) -> Mapping[MachineId, Machine]:
        """Live machines, in the order they were added (a read-only view)."""
        return MappingProxyType(self._machines)

    @property
    def racks(self) -> Mapping[RackId, Rack]:
        """Racks holding at least one live machine (a read-only view)."""
        return MappingProxyType(self._racks)

    @property
    def pods(self) -> Mapping[PodId, Pod]:
        """Pods holding at least one rack (a read-only view)."""
        return MappingProxyType(self._pods)

    def job(self, job_id: JobId) -> Job:
        """The job `job_id`; ClusterError if there is none."""
        try:
            return self._jobs[job_id]
        except KeyError:
            raise ClusterError(f"unknown job {job_id!r}") from None

    def task(self, task_id: TaskId) -> Task:
        """The task `task_id`; ClusterError if there is none."""
        try:
            return self._tasks[task_id]
        except KeyError:
            raise ClusterError(f"unknown task {task_id}") from None

    def machine(self, machine_id: MachineId) -> Machine:
        """The machine `machine_id`; ClusterError if there is none."""
        try:
            return self._machines[machine_id]
        except KeyError:
            raise ClusterError(f"unknown machine {machine_id!r}") from None

    def latency_us(self, machine_id: MachineId, peer_id: MachineId) -> float | None:
        """The latency between two machines in microseconds: the largest of the latest samples
        of every direction and path between them; None if none was reported."""
        return self._peer_latency.get(machine_id, {}).get(peer_id)

    def latencies_from(self, machine_id: MachineId) -> Mapping[MachineId, float]:
        """Every machine with a latency sample to or from `machine_id`, and that latency (as
        `latency_us`), in the order they were first reported (a read-only view)."""
        return MappingProxyType(self._peer_latency.get(machine_id, {}))

    @property
    def latency_version(self) -> int:
        """A count that grows whenever some pair's latency changes (a new sample that changes
        its worst case, or a machine leaving with its samples): equal counts, equal latencies."""
        return self._latency_version

    @property
    def running_task_count(self) -> int:
        """How many tasks run, on all machines together."""
        return self._running

    @property
    def machine_clock(self) -> int:
        """A count of changes to machines: it grows whenever a machine's slots, running tasks,
        reservations, capacity, measured usage or labels change, or a machine joins or leaves."""
        return self._machine_clock

    @property
    def machines_joined_or_left(self) -> int:
        """A count of machines that joined or left, in all: equal counts, the same machines."""
        return self._machines_joined_or_left

    def machines_touched_since(self, clock: int) -> list[MachineId]:
        """The machines (live or gone) changed after `machine_clock` read `clock`, most recent
        first. A reader that keeps per-machine columns in step with the state (a scheduler's
        graph manager) reads only these each round, not every machine; the cost follows the
        changes since `clock`."""
        touches = self._machine_touches
        touched: list[MachineId] = []
        for machine_id in reversed(touches):
            if touches[machine_id] <= clock:
                break
            touched.append(machine_id)
        return touched

    def _touch_machine(self, machine_id: MachineId) -> None:
        self._machine_clock += 1
        touches = self._machine_touches
        touches.pop(machine_id, None)  # to the end: the order is by latest change
        touches[machine_id] = self._machine_clock

    def runnable_tasks(self) -> list[Task]:
        """The tasks waiting for a machine, in submission order."""
        return [task for task in self._tasks.values() if task.state is TaskState.RUNNABLE]

    @property
    def waiting_task_ids(self) -> KeysView[TaskId]:
        """The ids of the RUNNABLE tasks, in the order they became runnable (a live view,
        kept as tasks change state, so reading it costs nothing per task that is not waiting)."""
        return self._runnable.keys()

    def placement_problem(self, task_id: TaskId, machine_id: MachineId) -> str | None:
        """Why `place` (for a runnable task) or `migrate` (for a running one) would refuse to
        put the task on the machine now, or None if it would not."""
        task, machine = self.task(task_id), self.machine(machine_id)
        if task.state not in (TaskState.RUNNABLE, TaskState.RUNNING):
            return f"task {task_id} is {task.state.value}, neither runnable nor running"
        return self._fit_problem(task, machine)

    # ------------------------------------------------------------------ events

    def apply(self, event: ClusterEvent) -> tuple[TaskTransition, ...]:
        """Apply one event; return the task transitions it caused, in order.

        Raises ClusterError, with nothing changed, if the event names an unknown task or
        machine, adds one that exists, asks for an illegal task state change, would overcommit
        a machine, or is older than `now`.
        """
        if not isinstance(event, Event):
            raise TypeError(f"not a cluster event: {event!r}")
        self._check_time(event.time)
        transitions: tuple[TaskTransition, ...]
        match event:
            case TaskSubmitted():
                task = self._new_task(
                    event.time,
                    event.task_id,
                    event.job_id,
                    event.request,
                    event.priority,
                    event.labels,
                    event.selectors,
                )
                transitions = (
                    self._transition(
                        task, TaskState.RUNNABLE, event.time, TransitionCause.SUBMITTED
                    ),
                )
            case TaskCompleted():
                task = self.task(event.task_id)
                transitions = (
                    self._finish(task, TaskState.COMPLETED, event.time, TransitionCause.COMPLETED),
                )
            case TaskFailed():
                task = self.task(event.task_id)
                transitions = (
                    self._finish(task, TaskState.FAILED, event.time, TransitionCause.FAILED),
                )
                task.failure_reason = event.reason
            case TaskRemoved():
                transitions = (self._remove_task(event.time, event.task_id),)
            case TaskUpdated():
                self._update_task(event)
                transitions = ()
            case MachineAdded():
                self._add_machine(event)
                transitions = ()
            case MachineFailed():
                transitions = self._lose_machine(event, TransitionCause.MACHINE_FAILED)
            case MachineRemoved():
                transitions = self._lose_machine(event, TransitionCause.MACHINE_REMOVED)
            case MachineUpdated():
                self._update_machine(event)
                transitions = ()
            case TaskStats():
                self.task(event.task_id).measured_usage = event.usage
                transitions = ()
            case MachineStats():
                self.machine(event.machine_id).measured_usage = event.usage
                self._touch_machine(event.machine_id)
                transitions = ()
            case LatencySample():
                self._record_latency(event)
                transitions = ()
            case _:
                raise TypeError(f"not a cluster event: {event!r}")
        self._now = event.time
        return transitions

    def _new_task(
        self,
        time: Time,
        task_id: TaskId,
        job_id: JobId,
        request: Resources,
        priority: int,
        labels: Labels,
        selectors: tuple[LabelSelector, ...],
    ) -> Task:
        """Add a task in state CREATED (and its job if new); the caller makes it RUNNABLE."""
        if task_id in self._tasks:
            existing = self._tasks[task_id]
            raise ClusterError(
                f"task {task_id} already exists (job {existing.job_id!r}, {existing.state.value})"
            )
        job = self._jobs.get(job_id)
        if job is None:
            job = Job(job_id, task_id, priority, time)
            self._jobs[job_id] = job
        task = Task(
            task_id=task_id,
            job_id=job_id,
            request=request,
            priority=priority,
            labels=labels,
            selectors=selectors,
            submit_time=time,
        )
        self._tasks[task_id] = task
        job.task_ids[task_id] = None
        return task

    def _remove_task(self, time: Time, task_id: TaskId) -> TaskTransition:
        task = self.task(task_id)
        from_machine = self._drop_task(task)
        return TaskTransition(
            time, task.task_id, task.state, None, TransitionCause.REMOVED, from_machine
        )

    def _drop_task(self, task: Task) -> MachineId | None:
        """Take `task` out of the state (off its machine, out of its job); returns the
        machine it ran on, if any."""
        from_machine = self._detach(task) if task.state is TaskState.RUNNING else None
        del self._tasks[task.task_id]
        self._runnable.pop(task.task_id, None)
        job = self._jobs[task.job_id]
        del job.task_ids[task.task_id]
        if not job.task_ids:
            del self._jobs[job.job_id]
        return from_machine

    # ------------------------------------------------------------------ trusted calls

    # What `apply` does for the commonest events, for a caller that has checked the values
    # (the daemon's protocol checks every field's type and range) and so needs no event
    # object: a time (an int64), a task id (a non-negative int64), a non-empty job id. The
    # state is still checked (time order; a task is not submitted twice, nor a missing one
    # removed), and nothing changes on ClusterError.

    def trusted_submit(self, time: Time, task_id: TaskId, job_id: JobId) -> None:
        """`apply(TaskSubmitted(time=time, task_id=task_id, job_id=job_id))`."""
        self._check_order(time)
        task = self._new_task(time, task_id, job_id, NO_RESOURCES, 0, NO_LABELS, ())
        self._set_state(task, TaskState.RUNNABLE, time)  # no transition to report
        self._now = time

    def trusted_remove(self, time: Time, task_id: TaskId) -> None:
        """`apply(TaskRemoved(time=time, task_id=task_id))`."""
        self._check_order(time)
        self._drop_task(self.task(task_id))  # no transition to report
        self._now = time

    def _update_task(self, event: TaskUpdated) -> None:
        task = self.task(event.task_id)
        if event.request is not None and task.machine_id is not None:
            machine = self._machines[task.machine_id]
            reserved = machine.reserved - task.request + event.request
            if not reserved.fits_within(machine.capacity):
                raise ClusterError(
                    f"task {task.task_id}'s new request does not fit on machine "
                    f"{machine.machine_id!r}, where it runs "
                    f"({reserved.describe_excess(machine.capacity)}); preempt it first"
                )
            machine.reserved = reserved
            self._touch_machine(machine.machine_id)
        if event.request is not None:
            task.request = event.request
        if event.priority is not None:
            task.priority = event.priority
        if event.labels is not None:
            task.labels = event.labels
        if event.selectors is not None:
            task.selectors = event.selectors

    def _add_machine(self, event: MachineAdded) -> None:
        if event.machine_id in self._machines:
            raise ClusterError(f"machine {event.machine_id!r} already exists")
        self._check_slots(event.machine_id, event.slots, 0)
        rack = self._racks.get(event.rack_id)
        if rack is not None and rack.pod_id != event.pod_id:
            raise ClusterError(
                f"machine {event.machine_id!r} names rack {event.rack_id!r} in pod "
                f"{event.pod_id!r}, but that rack is in pod {rack.pod_id!r}"
            )
        if rack is None:
            pod = self._pods.setdefault(event.pod_id, Pod(event.pod_id))
            rack = Rack(event.rack_id, event.pod_id)
            self._racks[rack.rack_id] = rack
            pod.rack_ids[rack.rack_id] = None
        self._machines[event.machine_id] = Machine(
            machine_id=event.machine_id,
            rack_id=event.rack_id,
            capacity=event.capacity,
            slots=event.slots,
            labels=event.labels,
            added_time=event.time,
        )
        rack.machine_ids[event.machine_id] = None
        self._slots += event.slots
        self._touch_machine(event.machine_id)
        self._machines_joined_or_left += 1

    def _check_slots(self, machine_id: MachineId, slots: int, before: int) -> None:
        """Refuse a machine whose slots (`before` it had) would take the cluster past
        CLUSTER_SLOTS_LIMIT: accepted, it would make every later round fail."""
        if self._slots - before + slots > CLUSTER_SLOTS_LIMIT:
            raise ClusterError(
                f"machine {machine_id!r} with {slots} slots would give the cluster "
                f"{self._slots - before + slots} slots in all, over the limit of "
                f"{CLUSTER_SLOTS_LIMIT} (a flow arc's capacity)"
            )

    def _lose_machine(
        self, event: MachineFailed | MachineRemoved, cause: TransitionCause
    ) -> tuple[TaskTransition, ...]:
        machine = self.machine(event.machine_id)
        transitions: list[TaskTransition] = []
        for task_id in list(machine.running_task_ids):
            transitions.extend(self._evict(self._tasks[task_id], event.time, cause))
        del self._machines[machine.machine_id]
        self._touch_machine(machine.machine_id)
        self._machines_joined_or_left += 1
        self._slots -= machine.slots
        self._forget_latencies(machine.machine_id)
        rack = self._racks[machine.rack_id]
        del rack.machine_ids[machine.machine_id]
        if not rack.machine_ids:
            del self._racks[rack.rack_id]
            pod = self._pods[rack.pod_id]
            del pod.rack_ids[rack.rack_id]
            if not pod.rack_ids:
                del self._pods[pod.pod_id]
        return tuple(transitions)

    def _record_latency(self, event: LatencySample) -> None:
        source, peer = self.machine(event.machine_id), self.machine(event.peer_id)
        a, b = sorted((source.machine_id, peer.machine_id))
        samples = self._samples.setdefault((a, b), {})
        samples[(source.machine_id, event.path)] = event.latency_us
        worst = max(samples.values())
        if self._peer_latency.get(a, {}).get(b) != worst:
            self._peer_latency.setdefault(a, {})[b] = worst
            self._peer_latency.setdefault(b, {})[a] = worst
            self._latency_version += 1

    def _forget_latencies(self, machine_id: MachineId) -> None:
        peers = self._peer_latency.pop(machine_id, {})
        for peer in peers:
            del self._peer_latency[peer][machine_id]
            if not self._peer_latency[peer]:
                del self._peer_latency[peer]
            del self._samples[(min(machine_id, peer), max(machine_id, peer))]
        if peers:
            self._latency_version += 1

    def _update_machine(self, event: MachineUpdated) -> None:
        machine = self.machine(event.machine_id)
        if event.capacity is not None and not machine.reserved.fits_within(event.capacity):
            raise ClusterError(
                f"machine {machine.machine_id!r}'s new capacity is below what its running tasks "
                f"reserve ({machine.reserved.describe_excess(event.capacity)}); "
                "preempt tasks first"
            )
        if event.slots is not None and event.slots < len(machine.running_task_ids):
            raise ClusterError(
                f"machine {machine.machine_id!r} cannot have {event.slots} slots: "
                f"{len(machine.running_task_ids)} tasks run on it; preempt tasks first"
            )
        if event.slots is not None:
            self._check_slots(machine.machine_id, event.slots, machine.slots)
        if event.capacity is not None:
            machine.capacity = event.capacity
        if event.slots is not None:
            self._slots += event.slots - machine.slots
            machine.slots = event.slots
        if event.labels is not None:
            machine.labels = event.labels
        self._touch_machine(machine.machine_id)

    def advance_to(self, time: Time) -> None:
        """Move the cluster's clock to `time` without any other change (a scheduling round
        at `time` prices waiting up to then). ClusterError if `time` is before `now`."""
        self._check_time(time)
        self._now = time

    # ------------------------------------------------------------------ decisions

    def place(self, task_id: TaskId, machine_id: MachineId, *, time: Time) -> TaskTransition:
        """Start the runnable task `task_id` on `machine_id` at `time`.

        Refused (ClusterError, nothing changed) for an unknown task or machine, a task that is
        not RUNNABLE (`IllegalTransition`), or a machine without a free slot, without room for
        the task's request, or whose labels fail the task's selectors.
        """
        task, machine = self.task(task_id), self.machine(machine_id)
        self._check_time(time)
        check_transition(task_id, task.state, TaskState.RUNNING)
        problem = self._fit_problem(task, machine)
        if problem is not None:
            raise ClusterError(f"cannot place task {task_id} on machine {machine_id!r}: {problem}")
        self._attach(task, machine)
        self._now = time
        return self._transition(
            task, TaskState.RUNNING, time, TransitionCause.PLACED, to_machine_id=machine_id
        )

    def place_many(
        self, placements: Mapping[TaskId, MachineId], *, time: Time
    ) -> tuple[list[TaskTransition], dict[TaskId, str]]:
        """`place` for many runnable tasks at `time`: the outcome of placing them one at a time
        in the mapping's order, returned as the transitions of those placed (in that order) and
        the reason each refused one was refused (the message `place` would raise).

        A first round places 10^5 tasks: where all of a machine's placements fit together, the
        machine is checked and updated once (one reservation sum) instead of once per task.
        Where they do not, that machine's tasks are placed one at a time, as `place` would.
        Two differences from a loop of `place`: a `time` before the model's clock raises
        `ClusterError` before any task is looked at, and a machine that fits all its tasks is
        touched once (the machines' change clock moves once for it, not once per task).
        """
        self._check_time(time)
        by_machine: dict[MachineId, list[Task]] = {}
        placed: dict[TaskId, TaskTransition] = {}
        refused: dict[TaskId, str] = {}
        for task_id, machine_id in placements.items():
            task = self._tasks.get(task_id)
            if (
                task is not None
                and task.state is TaskState.RUNNABLE
                and machine_id in self._machines
            ):
                by_machine.setdefault(machine_id, []).append(task)
            else:  # `place` says what is wrong
                self._place_one(task_id, machine_id, time, placed, refused)
        for machine_id, tasks in by_machine.items():
            machine = self._machines[machine_id]
            request = self._request_of_all(tasks, machine)
            if request is None:
                for task in tasks:
                    self._place_one(task.task_id, machine_id, time, placed, refused)
                continue
            self._attach_all(tasks, machine, request)
            for task in tasks:
                self._set_state(task, TaskState.RUNNING, time)
                placed[task.task_id] = TaskTransition(
                    time,
                    task.task_id,
                    TaskState.RUNNABLE,
                    TaskState.RUNNING,
                    TransitionCause.PLACED,
                    None,
                    machine_id,
                )
        if placed:
            self._now = time
        return [placed[task_id] for task_id in placements if task_id in placed], refused

    def _request_of_all(self, tasks: list[Task], machine: Machine) -> Resources | None:
        """What the runnable `tasks` request together, if they all fit on `machine` together
        (slots, room and labels); None if they do not."""
        if len(machine.running_task_ids) + len(tasks) > machine.slots:
            return None
        labels = machine.labels
        requests: list[Resources] = []
        for task in tasks:
            if task.selectors and not matches(task.selectors, labels):
                return None
            if task.request is not NO_RESOURCES:
                requests.append(task.request)
        if not requests:
            return NO_RESOURCES
        try:
            request = total_of(requests)
        except ValueError:  # beyond int64: no machine has that room
            return None
        return request if request.fits_beside(machine.reserved, machine.capacity) else None

    def _place_one(
        self,
        task_id: TaskId,
        machine_id: MachineId,
        time: Time,
        placed: dict[TaskId, TaskTransition],
        refused: dict[TaskId, str],
    ) -> None:
        try:
            placed[task_id] = self.place(task_id, machine_id, time=time)
        except ClusterError as error:
            refused[task_id] = str(error)

    def preempt(self, task_id: TaskId, *, time: Time) -> tuple[TaskTransition, ...]:
        """Take the running task `task_id` off its machine and re-queue it as RUNNABLE.

        Refused (`IllegalTransition`, nothing changed) unless the task is RUNNING.
        """
        task = self.task(task_id)
        self._check_time(time)
        check_transition(task_id, task.state, TaskState.EVICTED)
        transitions = self._evict(task, time, TransitionCause.PREEMPTED)
        self._now = time
        return transitions

    def migrate(self, task_id: TaskId, machine_id: MachineId, *, time: Time) -> TaskTransition:
        """Move the running task `task_id` to another machine; it stays RUNNING.

        Refused (ClusterError, nothing changed) for an unknown task or machine, a task that is
        not RUNNING, its own machine, or a machine where `place` would refuse it.
        """
        task, machine = self.task(task_id), self.machine(machine_id)
        self._check_time(time)
        if task.state is not TaskState.RUNNING:
            raise ClusterError(f"cannot migrate task {task_id}: it is {task.state.value}")
        problem = self._fit_problem(task, machine)
        if problem is not None:
            raise ClusterError(
                f"cannot migrate task {task_id} to machine {machine_id!r}: {problem}"
            )
        from_machine = self._detach(task)
        self._attach(task, machine)
        self._now = time
        return TaskTransition(
            time,
            task_id,
            TaskState.RUNNING,
            TaskState.RUNNING,
            TransitionCause.MIGRATED,
            from_machine,
            machine_id,
        )

    def migrate_many(
        self, moves: Mapping[TaskId, MachineId], *, time: Time
    ) -> tuple[TaskTransition, ...]:
        """Move several running tasks at once, as one decision: tasks may trade places between
        full machines, which no order of single `migrate` calls allows.

        The state after all the moves is checked as a whole (every task running and moving to
        another live machine whose labels it accepts; every machine within its slots and
        capacity); if any check fails, ClusterError names the first problem and nothing moves.
        Records come in the order of `moves`.
        """
        self._check_time(time)
        slots_used: dict[MachineId, int] = {}
        reserved: dict[MachineId, Resources] = {}
        for task_id, machine_id in moves.items():
            task, machine = self.task(task_id), self.machine(machine_id)
            if task.state is not TaskState.RUNNING or task.machine_id is None:
                raise ClusterError(f"cannot migrate task {task_id}: it is {task.state.value}")
            if task.machine_id == machine_id:
                raise ClusterError(f"cannot migrate task {task_id}: it already runs there")
            if task.selectors and not matches(task.selectors, machine.labels):
                raise ClusterError(
                    f"cannot migrate task {task_id} to machine {machine_id!r}: its labels fail "
                    "the task's selectors"
                )
            for mid, sign in ((task.machine_id, -1), (machine_id, 1)):
                current = self._machines[mid]
                slots_used[mid] = slots_used.get(mid, len(current.running_task_ids)) + sign
                before = reserved.get(mid, current.reserved)
                reserved[mid] = before + task.request if sign > 0 else before - task.request
        for mid, used in slots_used.items():
            machine = self._machines[mid]
            if used > machine.slots:
                raise ClusterError(
                    f"the moves leave machine {mid!r} running {used} tasks in {machine.slots} slots"
                )
            if not reserved[mid].fits_within(machine.capacity):
                raise ClusterError(
                    f"the moves overcommit machine {mid!r} "
                    f"({reserved[mid].describe_excess(machine.capacity)})"
                )
        origins = {task_id: self._detach(self._tasks[task_id]) for task_id in moves}
        for task_id, machine_id in moves.items():
            self._attach(self._tasks[task_id], self._machines[machine_id])
        self._now = time
        return tuple(
            TaskTransition(
                time,
                task_id,
                TaskState.RUNNING,
                TaskState.RUNNING,
                TransitionCause.MIGRATED,
                origins[task_id],
                machine_id,
            )
            for task_id, machine_id in moves.items()
        )

    # ------------------------------------------------------------------ bookkeeping

    def _check_time(self, time: Time) -> None:
        check_time(time)
        self._check_order(time)

    def _check_order(self, time: Time) -> None:
        if time < self._now:
            raise ClusterError(
                f"time {time} is before the cluster's current time {self._now}; "
                "changes must arrive in time order"
            )

    def _fit_problem(self, task: Task, machine: Machine) -> str | None:
        if task.machine_id == machine.machine_id:
            return f"task {task.task_id} already runs there"
        if len(machine.running_task_ids) >= machine.slots:
            return f"machine {machine.machine_id!r} has no free slot (all {machine.slots} taken)"
        # A slot-only request fits anywhere (`reserved` fits `capacity`), and most tasks
        # have one: skip the vector arithmetic for it, here and in `_attach` / `_detach`.
        request = task.request
        if request is not NO_RESOURCES and not request.fits_beside(
            machine.reserved, machine.capacity
        ):
            return (
                f"task {task.task_id} requests more than machine {machine.machine_id!r} has "
                f"free ({task.request.describe_excess(machine.free)})"
            )
        if task.selectors and not matches(task.selectors, machine.labels):
            failing = [str(s) for s in task.selectors if not s.matches(machine.labels)]
            return (
                f"the labels of machine {machine.machine_id!r} ({dict(machine.labels)}) fail "
                f"task {task.task_id}'s selectors {failing}"
            )
        return None

    def _attach(self, task: Task, machine: Machine) -> None:
        self._attach_all([task], machine, task.request)

    def _attach_all(self, tasks: list[Task], machine: Machine, request: Resources) -> None:
        """Give `tasks` slots on `machine` and reserve `request`, what they ask for together."""
        self._touch_machine(machine.machine_id)
        running = machine.running_task_ids
        for task in tasks:
            task.machine_id = machine.machine_id
            running[task.task_id] = None
        self._running += len(tasks)
        if request is not NO_RESOURCES:
            machine.reserved = machine.reserved + request

    def _detach(self, task: Task) -> MachineId:
        """Free the task's slot and reservation; return the machine it left."""
        assert task.machine_id is not None
        machine = self._machines[task.machine_id]
        self._touch_machine(machine.machine_id)
        del machine.running_task_ids[task.task_id]
        self._running -= 1
        if task.request is not NO_RESOURCES:
            machine.reserved = machine.reserved - task.request
        task.machine_id = None
        return machine.machine_id

    def _evict(
        self, task: Task, time: Time, cause: TransitionCause
    ) -> tuple[TaskTransition, TaskTransition]:
        from_machine = self._detach(task)
        evicted = self._transition(
            task, TaskState.EVICTED, time, cause, from_machine_id=from_machine
        )
        requeued = self._transition(task, TaskState.RUNNABLE, time, TransitionCause.REQUEUED)
        return evicted, requeued

    def _finish(
        self, task: Task, to_state: TaskState, time: Time, cause: TransitionCause
    ) -> TaskTransition:
        check_transition(task.task_id, task.state, to_state)
        from_machine = self._detach(task) if task.state is TaskState.RUNNING else None
        return self._transition(task, to_state, time, cause, from_machine_id=from_machine)

    def _transition(
        self,
        task: Task,
        to_state: TaskState,
        time: Time,
        cause: TransitionCause,
        *,
        from_machine_id: MachineId | None = None,
        to_machine_id: MachineId | None = None,
    ) -> TaskTransition:
        """Change the task's state and its time accounting (`_set_state`) and report it; the
        machine is the caller's."""
        from_state = task.state
        self._set_state(task, to_state, time)
        return TaskTransition(
            time, task.task_id, from_state, to_state, cause, from_machine_id, to_machine_id
        )

    def _set_state(self, task: Task, to_state: TaskState, time: Time) -> None:
        """Change the task's state and its time accounting, if the move is allowed."""
        from_state = task.state
        check_transition(task.task_id, from_state, to_state)
        if task.runnable_since is not None:
            task.total_unscheduled_time += time - task.runnable_since
            task.runnable_since = None
        if from_state is TaskState.RUNNING and task.start_time is not None:
            task.total_run_time += time - task.start_time
        task.state = to_state
        if to_state is TaskState.RUNNABLE:
            self._runnable[task.task_id] = None
        elif from_state is TaskState.RUNNABLE:
            del self._runnable[task.task_id]
        if to_state is TaskState.RUNNABLE:
            task.runnable_since = time
        elif to_state is TaskState.RUNNING:
            task.start_time = time
        elif to_state is TaskState.EVICTED:
            task.eviction_count += 1
        elif to_state in FINAL_STATES:
            task.finish_time = time

    # ------------------------------------------------------------------ invariants

    def invariant_violations(self) -> list[str]:
        """Every way in which the state contradicts itself (empty when it is consistent)."""
        problems: list[str] = []
        for job in self._jobs.values():
            if not job.task_ids:
                problems.append(f"job {job.job_id!r} has no tasks")
            for task_id in job.task_ids:
                member_task = self._tasks.get(task_id)
                if member_task is None or member_task.job_id != job.job_id:
                    problems.append(f"job {job.job_id!r} lists task {task_id}, not its own")
        for task in self._tasks.values():
            problems.extend(self._task_violations(task))
        runnable = {t.task_id for t in self._tasks.values() if t.state is TaskState.RUNNABLE}
        if set(self._runnable) != runnable:
            problems.append(
                f"the index of waiting tasks lists {sorted(set(self._runnable) ^ runnable)} wrongly"
            )
        for machine in self._machines.values():
            problems.extend(self._machine_violations(machine))
        slots = sum(machine.slots for machine in self._machines.values())
        if self._slots != slots:
            problems.append(f"the cluster's slots are counted as {self._slots}, not {slots}")
        running = sum(len(machine.running_task_ids) for machine in self._machines.values())
        if self._running != running:
            problems.append(f"the running tasks are counted as {self._running}, not {running}")
        for rack in self._racks.values():
            pod = self._pods.get(rack.pod_id)
            if pod is None or rack.rack_id not in pod.rack_ids:
                problems.append(f"rack {rack.rack_id!r} is not in its pod {rack.pod_id!r}")
            if not rack.machine_ids:
                problems.append(f"rack {rack.rack_id!r} has no machines")
            for machine_id in rack.machine_ids:
                member = self._machines.get(machine_id)
                if member is None or member.rack_id != rack.rack_id:
                    problems.append(f"rack {rack.rack_id!r} lists machine {machine_id!r}")
        problems.extend(self._latency_violations())
        for pod in self._pods.values():
            if not pod.rack_ids:
                problems.append(f"pod {pod.pod_id!r} has no racks")
            for rack_id in pod.rack_ids:
                listed = self._racks.get(rack_id)
                if listed is None or listed.pod_id != pod.pod_id:
                    problems.append(f"pod {pod.pod_id!r} lists rack {rack_id!r}")
        return problems

    def _latency_violations(self) -> list[str]:
        problems: list[str] = []
        for (a, b), samples in self._samples.items():
            if a not in self._machines or b not in self._machines:
                problems.append(f"latency samples of {a!r} and {b!r}: not both live machines")
            worst = max(samples.values(), default=None)
            if worst is None or self._peer_latency.get(a, {}).get(b) != worst:
                problems.append(f"the latency of {a!r} and {b!r} is not its worst sample")
            if self._peer_latency.get(b, {}).get(a) != worst:
                problems.append(f"the latency of {b!r} and {a!r} differs from its reverse")
        pairs = sum(len(peers) for peers in self._peer_latency.values())
        if pairs != 2 * len(self._samples):
            problems.append(f"{pairs} latencies by peer for {len(self._samples)} sampled pairs")
        return problems

    def _task_violations(self, task: Task) -> list[str]:
        name = f"task {task.task_id} ({task.state.value})"
        problems: list[str] = []
        job = self._jobs.get(task.job_id)
        if job is None or task.task_id not in job.task_ids:
            problems.append(f"{name} is not listed by its job {task.job_id!r}")
        if task.state in (TaskState.CREATED, TaskState.EVICTED):
            problems.append(f"{name} rests in a passing state")
        if (task.state is TaskState.RUNNING) != (task.machine_id is not None):
            problems.append(f"{name} has machine {task.machine_id!r}")
        if task.machine_id is not None:
            machine = self._machines.get(task.machine_id)
            if machine is None or task.task_id not in machine.running_task_ids:
                problems.append(f"{name} is not listed by its machine {task.machine_id!r}")
        if (task.state is TaskState.RUNNABLE) != (task.runnable_since is not None):
            problems.append(f"{name} has runnable_since {task.runnable_since}")
        if (task.state in FINAL_STATES) != (task.finish_time is not None):
            problems.append(f"{name} has finish_time {task.finish_time}")
        if task.state is TaskState.RUNNING and task.start_time is None:
            problems.append(f"{name} has no start_time")
        for label, value in (
            ("runnable_since", task.runnable_since),
            ("start_time", task.start_time),
            ("finish_time", task.finish_time),
        ):
            if value is not None and not task.submit_time <= value <= self._now:
                problems.append(f"{name} has {label} {value} outside [submit time, now]")
        if task.total_unscheduled_time < 0 or task.total_run_time < 0:
            problems.append(f"{name} has a negative total time")
        return problems

    def _machine_violations(self, machine: Machine) -> list[str]:
        name = f"machine {machine.machine_id!r}"
        problems: list[str] = []
        reserved = NO_RESOURCES
        for task_id in machine.running_task_ids:
            task = self._tasks.get(task_id)
            if task is None or task.machine_id != machine.machine_id:
                problems.append(f"{name} lists task {task_id}, which does not run there")
            else:
                reserved = reserved + task.request
        if reserved != machine.reserved:
            problems.append(f"{name} reserves {machine.reserved}, its tasks request {reserved}")
        if len(machine.running_task_ids) > machine.slots:
            problems.append(f"{name} runs {len(machine.running_task_ids)} > {machine.slots} tasks")
        if not machine.reserved.fits_within(machine.capacity):
            problems.append(f"{name} reserves more than its capacity")
        rack = self._racks.get(machine.rack_id)
        if rack is None or machine.machine_id not in rack.machine_ids:
            problems.append(f"{name} is not listed by its rack {machine.rack_id!r}")
        return problems

    def validate(self) -> None:
        """Raise InvariantViolation listing every inconsistency; a bug if it ever raises."""
        problems = self.invariant_violations()
        if problems:
            raise InvariantViolation("cluster state is inconsistent:\n  " + "\n  ".join(problems))
