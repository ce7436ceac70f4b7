"""Input data for workloads that record none: a simulated distributed file system gives every
batch task input blocks stored on the cluster's machines, and tells Quincy where they are
through its task labels. The Google trace has no input sizes either; Firmament's simulator
estimates them the same way (OSDI '16, section 7.1: "estimate batch task input sizes as a
function of the known runtime using typical industry distributions").

The model is Firmament's simulated data layer (its `sim/dfs` sources), with its uniform file
system:

* A task's input size follows from its runtime. Its runtime's quantile among Google jobs,
  p = 1 - 0.298 h^-0.2627 (h: the runtime in hours; a straight line through Reiss et al.'s
  log-log CDF of job durations), is read through the inverse of Chen et al.'s input-size CDF
  F(x) = 0.5 + b log2(x) over 1 to 320 units of 64 MiB (half the inputs are one unit; b makes
  F(320) = 1). So the shortest half of tasks read 64 MiB and the longest up to 20 GiB.
* The input is stored as whole blocks of 512 MiB (a 64 MiB input takes one block, counted at
  the block's full size, as Firmament counts it), each with 3 replicas.
* Each replica goes to a machine drawn uniformly from those in the cluster when the task is
  submitted; a block's replicas are on distinct machines (HDFS's rule; Firmament's uniform
  file system may draw one machine twice).
* Tasks without a runtime (services, running until the end) read nothing.
* A workload sped up by a factor has its runtimes divided by it: the input is sized from the
  runtime the task had before (`speedup`), so speeding a workload up does not shrink its data.

Where this differs from Firmament's simulator: its default file system is the "bounded" one,
which places a job's blocks on a pool of machines picked for the job (so a job's tasks contend
for the same machines), where ours spreads every block over the whole cluster; and its uniform
file system moves a removed machine's replicas to another machine, where ours leaves them lost
(the policy ignores replicas on machines not in the cluster).

The labels are the Quincy policy's (docs/policy-guide.md, `policies/quincy.py`): `quincy.input`
lists the blocks and their bytes, `quincy.replicas` the machines holding each block, so the
machines' own labels never change as tasks come and go.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace

import numpy as np

from firmament_py.model.events import MachineAdded, MachineFailed, MachineRemoved
from firmament_py.model.ids import MachineId, TaskId
from firmament_py.sim.workload import TaskArrival, WorkloadItem

__all__ = ["INPUT_LABEL", "REPLICAS_LABEL", "SimulatedFileSystem", "input_bytes"]

INPUT_LABEL = "quincy.input"
"""Quincy's task label naming the blocks a task reads and their bytes ("block:bytes,...")."""
REPLICAS_LABEL = "quincy.replicas"
"""Quincy's task label naming the machines that hold each block it reads (a JSON object)."""

MIB = 1 << 20
_UNIT_BYTES = 64 * MIB
"""The unit of Chen et al.'s input-size distribution."""
_MAX_UNITS = 320
_SHARE_OF_ONE_UNIT = 0.5
_RUNTIME_FACTOR = 0.298
_RUNTIME_POWER = -0.2627
_MICROSECONDS_PER_HOUR = 3_600_000_000
_STREAM = 0x1F5
"""Tags the file system's random stream apart from the workload generator's of the same seed."""


def input_bytes(runtime_us: int) -> int:
    """The input a batch task of `runtime_us` microseconds reads, before rounding to blocks:
    its runtime's quantile among Google jobs read through the inverse of the input-size CDF."""
    hours = max(runtime_us, 1) / _MICROSECONDS_PER_HOUR
    quantile = min(1.0, 1.0 - _RUNTIME_FACTOR * float(hours**_RUNTIME_POWER))
    if quantile <= _SHARE_OF_ONE_UNIT:
        return _UNIT_BYTES
    slope = (1.0 - _SHARE_OF_ONE_UNIT) / math.log2(_MAX_UNITS)
    units = round(float(2.0 ** ((quantile - _SHARE_OF_ONE_UNIT) / slope)))
    return max(1, units) * _UNIT_BYTES


@dataclass(frozen=True)
class SimulatedFileSystem:
    """Stores each batch task's input as `block_bytes` blocks of `replication` replicas on
    machines drawn with `seed`, and labels the task with them (see the module docstring)."""

    seed: int = 0
    block_bytes: int = 512 * MIB
    replication: int = 3
    speedup: float = 1.0

    def __post_init__(self) -> None:
        if not self.speedup > 0:
            raise ValueError(f"the speed-up must be positive, got {self.speedup}")
        if self.block_bytes < 1 or self.replication < 1:
            raise ValueError(
                f"blocks need a positive size and replica count, got {self.block_bytes} bytes "
                f"and {self.replication} replicas"
            )

    def blocks(self, runtime_us: int) -> int:
        """How many blocks a batch task of `runtime_us` reads."""
        return -(-input_bytes(runtime_us) // self.block_bytes)

    def attach(self, items: Iterable[WorkloadItem]) -> Iterator[WorkloadItem]:
        """`items` with every batch task's input labels added; machines are followed as they
        join, fail and leave, so that replicas go only to machines in the cluster."""
        rng = np.random.default_rng([self.seed, _STREAM])
        machines = _Machines()
        for item in items:
            if isinstance(item, MachineAdded):
                machines.add(item.machine_id)
            elif isinstance(item, MachineFailed | MachineRemoved):
                machines.remove(item.machine_id)
            elif isinstance(item, TaskArrival) and item.runtime is not None and machines.ids:
                item = self._with_input(item, round(item.runtime * self.speedup), machines, rng)
            yield item

    def _with_input(
        self, arrival: TaskArrival, runtime_us: int, machines: _Machines, rng: np.random.Generator
    ) -> TaskArrival:
        task_id = arrival.submitted.task_id
        names = [_block_name(task_id, index) for index in range(self.blocks(runtime_us))]
        replicas = {name: machines.draw(self.replication, rng) for name in names}
        labels = {
            **arrival.submitted.labels,
            INPUT_LABEL: ",".join(f"{name}:{self.block_bytes}" for name in names),
            REPLICAS_LABEL: json.dumps(replicas, separators=(",", ":")),
        }
        return replace(arrival, submitted=replace(arrival.submitted, labels=labels))


def _block_name(task_id: TaskId, index: int) -> str:
    """A block's name: unique to its task, and free of the ':' and ',' of Quincy's labels."""
    return f"t{task_id}b{index}"


class _Machines:
    """The machines in the cluster, as a list that supports drawing distinct ones at random and
    removal in constant time (the last one takes the removed one's place)."""

    def __init__(self) -> None:
        self.ids: list[MachineId] = []
        self._index: dict[MachineId, int] = {}

    def add(self, machine_id: MachineId) -> None:
        """A machine joins (again): it can hold new replicas."""
        if machine_id not in self._index:
            self._index[machine_id] = len(self.ids)
            self.ids.append(machine_id)

    def remove(self, machine_id: MachineId) -> None:
        """A machine fails or leaves: no new replica goes there."""
        index = self._index.pop(machine_id, None)
        if index is None:
            return
        last = self.ids.pop()
        if last != machine_id:
            self.ids[index] = last
            self._index[last] = index

    def draw(self, count: int, rng: np.random.Generator) -> list[MachineId]:
        """`count` distinct machines (all of them if there are fewer), uniformly at random."""
        if count >= len(self.ids):
            return list(self.ids)
        chosen: dict[int, None] = {}
        while len(chosen) < count:  # a repeat is rare with thousands of machines: draw again
            for index in rng.integers(len(self.ids), size=count - len(chosen)).tolist():
                chosen.setdefault(index, None)
        return [self.ids[index] for index in chosen]
