"""The simulated file system (firmament_py.sim.input_data): input sizes follow Firmament's model
of runtime against input, blocks go to distinct machines in the cluster, the labels read back
through the Quincy policy's own parsers, and a simulation with input data makes Quincy place
tasks near it."""

from __future__ import annotations

import json

import pytest

from firmament_policies.quincy import (
    INPUT_LABEL,
    REPLICAS_LABEL,
    parse_input_label,
    parse_replicas_label,
)
from firmament_py.model.events import MachineAdded, MachineFailed, TaskSubmitted
from firmament_py.model.resources import NO_RESOURCES
from firmament_py.sim import input_data
from firmament_py.sim.input_data import SimulatedFileSystem, input_bytes
from firmament_py.sim.runner import SimulationJob, run_job
from firmament_py.sim.workload import TaskArrival, WorkloadItem

MIB = 1 << 20
HOUR = 3_600_000_000


def test_the_labels_are_quincys() -> None:
    assert (input_data.INPUT_LABEL, input_data.REPLICAS_LABEL) == (INPUT_LABEL, REPLICAS_LABEL)


def test_input_size_grows_with_runtime_as_firmaments_model() -> None:
    # Below the median quantile (1 - 0.298 h^-0.2627 <= 0.5: under ~8.5 minutes) one 64 MiB
    # unit; an hour is quantile 0.702, 2^(0.202 x log2(320) / 0.5) = 10 units; the longest
    # tasks approach 320 units (20 GiB).
    assert input_bytes(1) == input_bytes(8 * 60_000_000) == 64 * MIB
    assert input_bytes(HOUR) == 10 * 64 * MIB
    sizes = [input_bytes(h * HOUR) for h in (1, 2, 8, 24, 24 * 30)]
    assert sizes == sorted(sizes) and sizes[-1] <= 320 * 64 * MIB
    fs = SimulatedFileSystem()
    assert fs.blocks(1) == 1 and fs.blocks(HOUR) == 2  # 640 MiB in blocks of 512 MiB


def _machines(count: int, time: int = 0) -> list[WorkloadItem]:
    return [
        MachineAdded(
            time=time,
            machine_id=f"m{i}",
            capacity=NO_RESOURCES,
            slots=4,
            rack_id=f"r{i % 3}",
        )
        for i in range(count)
    ]


def _task(task_id: int, runtime: int | None, time: int = 0) -> TaskArrival:
    return TaskArrival(TaskSubmitted(time=time, task_id=task_id, job_id="j"), runtime)


def test_batch_tasks_get_blocks_on_distinct_machines_in_the_cluster() -> None:
    items = [
        *_machines(10),
        _task(1, 24 * HOUR),
        MachineFailed(time=1, machine_id="m0"),
        _task(2, 24 * HOUR, time=1),
        _task(3, None, time=1),  # a service: no input
    ]
    out = list(SimulatedFileSystem(seed=3).attach(items))
    tasks = {i.submitted.task_id: i.submitted.labels for i in out if isinstance(i, TaskArrival)}
    assert INPUT_LABEL not in tasks[3] and REPLICAS_LABEL not in tasks[3]
    for task_id in (1, 2):
        blocks = parse_input_label(tasks[task_id][INPUT_LABEL])
        replicas = parse_replicas_label(tasks[task_id][REPLICAS_LABEL])
        assert set(blocks) == set(replicas)
        assert len(blocks) == SimulatedFileSystem().blocks(24 * HOUR) > 1
        assert all(size == 512 * MIB for size in blocks.values())
        for machines in replicas.values():
            assert len(set(machines)) == len(machines) == 3
            assert set(machines) <= {f"m{i}" for i in range(10)}
    # After m0 failed, no new replica goes there.
    assert all("m0" not in m for m in parse_replicas_label(tasks[2][REPLICAS_LABEL]).values())


def test_the_same_seed_places_the_same_blocks() -> None:
    def labels(seed: int) -> str:
        items = [*_machines(50), _task(1, 24 * HOUR)]
        (task,) = [i for i in SimulatedFileSystem(seed).attach(items) if isinstance(i, TaskArrival)]
        return task.submitted.labels[REPLICAS_LABEL]

    assert labels(1) == labels(1)
    assert labels(1) != labels(2)


def test_fewer_machines_than_replicas_uses_every_machine() -> None:
    out = list(SimulatedFileSystem().attach([*_machines(2), _task(1, 60_000_000)]))
    (replicas,) = json.loads(out[-1].submitted.labels[REPLICAS_LABEL]).values()  # type: ignore[union-attr]
    assert sorted(replicas) == ["m0", "m1"]


def test_a_bad_block_size_is_refused() -> None:
    with pytest.raises(ValueError, match="positive size"):
        SimulatedFileSystem(block_bytes=0)


def test_quincy_places_tasks_near_their_input_in_a_simulation() -> None:
    """End to end: the simulator replays a synthetic workload with input data under Quincy; most
    batch tasks run on a machine holding their block (one of three replicas among 100)."""
    job = SimulationJob(
        policy="quincy",
        synthetic="google-100",
        duration_s=5.0,
        input_data=True,
    )
    assert "with input data" in job.describe()
    result = run_job(job)
    local = placed = 0
    for item in job.workload():
        if isinstance(item, TaskArrival) and INPUT_LABEL in item.submitted.labels:
            record = result.tasks[item.submitted.task_id]
            if record.machine_id is None:
                continue
            holders = {
                m
                for ms in parse_replicas_label(item.submitted.labels[REPLICAS_LABEL]).values()
                for m in ms
            }
            placed += 1
            local += record.machine_id in holders
    assert placed > 100
    assert local / placed > 0.75, (local, placed)  # by chance alone: about 3 in 100


def test_a_sped_up_workload_keeps_its_input_sizes() -> None:
    runtime = 24 * HOUR

    def blocks(speedup: float) -> int:
        items = [*_machines(10), _task(1, round(runtime / speedup))]
        fs = SimulatedFileSystem(speedup=speedup)
        (task,) = [i for i in fs.attach(items) if isinstance(i, TaskArrival)]
        return len(parse_input_label(task.submitted.labels[INPUT_LABEL]))

    assert blocks(1.0) == blocks(50.0) == SimulatedFileSystem().blocks(runtime)
    with pytest.raises(ValueError, match="speed-up"):
        SimulatedFileSystem(speedup=0)
