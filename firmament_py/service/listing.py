"""The daemon's read-only requests: listing tasks and machines a page at a time in id order
(`tasks`, `machines`), and a past round's answer (`round`), so that a cluster manager can
reconcile its view with the daemon's after either restarts without diffing every task.

Pages are read one after another, not as one snapshot; each says the sequence number it was
read at (`seq`). A manager that lists every page and then follows the changes after the first
page's `seq` (`changes`, `firmament_py.service.changes`) sees every change made while it listed,
so its view is the daemon's as of the last change it followed.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping
from typing import Any

from firmament_py.model.states import TaskState
from firmament_py.service.protocol import Status
from firmament_py.service.state import DEFAULT_LIST, Reply, ServiceState

__all__ = ["list_machines", "list_tasks", "round_answer"]


def list_tasks(service: ServiceState, body: Mapping[str, Any]) -> Reply:
    """A `tasks` reply: `[task_id, job_id, state, machine_id]` of the tasks (in `state`, on
    `machine_id`, if given) whose ids follow `after`, in id order, at most `limit`; `more`
    says whether others follow. One pass over the candidates per page."""
    cluster = service.cluster
    tasks = cluster.tasks
    state = TaskState(body["state"]) if "state" in body else None
    candidates: Iterable[int]
    if "machine_id" in body:
        machine = cluster.machines.get(body["machine_id"])
        if machine is None:
            return Reply(Status.NOT_FOUND, f"no machine {body['machine_id']!r}")
        candidates = machine.running_task_ids
    elif state is TaskState.RUNNABLE:
        candidates = cluster.waiting_task_ids
    else:
        candidates = tasks
    after = body.get("after", -1)
    limit = body.get("limit", DEFAULT_LIST)
    ids = heapq.nsmallest(
        limit + 1,
        (i for i in candidates if i > after and (state is None or tasks[i].state is state)),
    )
    rows = [[i, tasks[i].job_id, tasks[i].state.value, tasks[i].machine_id] for i in ids[:limit]]
    return Reply(Status.OK, "", {"tasks": rows, "more": len(ids) > limit, "seq": service.seq})


def list_machines(service: ServiceState, body: Mapping[str, Any]) -> Reply:
    """A `machines` reply: `[machine_id, rack_id, pod_id, slots, running]` of the machines
    whose ids follow `after` (in string order), at most `limit`, and `more`."""
    cluster = service.cluster
    after = body.get("after", "")
    limit = body.get("limit", DEFAULT_LIST)
    ids = heapq.nsmallest(limit + 1, (m for m in cluster.machines if m > after))
    rows = []
    for machine_id in ids[:limit]:
        machine = cluster.machines[machine_id]
        pod = cluster.racks[machine.rack_id].pod_id
        rows.append(
            [machine_id, machine.rack_id, pod, machine.slots, len(machine.running_task_ids)]
        )
    return Reply(Status.OK, "", {"machines": rows, "more": len(ids) > limit, "seq": service.seq})


def round_answer(service: ServiceState, body: Mapping[str, Any]) -> Reply:
    """A `round` reply: the answer round `round` gave its `schedule` requests, as they got it
    (its decisions, refusals and `seq`), while it is kept (the last 1,000 rounds'); NOT_FOUND
    for one in progress, never journaled, or no longer kept."""
    round_id = body["round"]
    rounds = service.rounds
    answer = rounds.answer_of(round_id)
    if answer is not None:
        return Reply(Status(answer.status), answer.reason, dict(answer.body))
    if rounds.current is not None and rounds.current.round_id == round_id:
        why = "is in progress: ask again when it is answered"
    elif round_id > rounds.last:
        why = f"has not been journaled (the last round journaled is {rounds.last:,})"
    elif rounds.oldest_kept is not None and round_id < rounds.oldest_kept:
        why = (
            f"is no longer kept (the last {rounds.kept_answers:,} rounds' answers are, from "
            f"round {rounds.oldest_kept:,}): list the tasks to see where it put them"
        )
    else:
        why = (
            "was never journaled: it decided nothing that anybody waited for, or it failed "
            "(round numbers may skip)"
        )
    return Reply(Status.NOT_FOUND, f"round {round_id:,} {why}")
