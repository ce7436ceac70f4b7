"""One simulation described by plain values, and running it: what the command line, the
experiments and the parallel sweeps share.

A `SimulationJob` names a policy, a solver and a workload (a synthetic preset or a Google trace
directory) with the knobs of each, as strings and numbers only, so that a sweep can ship it to
another process and a results table can show it. `run_job` builds the scheduler and the
workload, warms the solver's kernels up, runs the simulator and returns its `SimulationResult`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from firmament_py.model.ids import Time
from firmament_py.scheduler import Scheduler
from firmament_py.sim.google_trace import WINDOW_OPENS, BadRow, TraceScale, read_google_trace
from firmament_py.sim.input_data import SimulatedFileSystem
from firmament_py.sim.simulator import (
    MICROSECONDS,
    Accounting,
    SimulationConfig,
    SimulationObserver,
    SimulationResult,
    Simulator,
)
from firmament_py.sim.synthetic import SyntheticWorkload, preset
from firmament_py.sim.workload import WorkloadItem
from firmament_py.solvers.warmup import warm_up

__all__ = ["SimulationJob", "run_job"]

_SLOTS_ONLY = TraceScale(cpu_millicores=0, ram_bytes=0, disk_bytes=0)
"""A trace scale under which every request and capacity is zero: only slots matter."""


# Speed-ups this far from 1 turn a second into more than int64 microseconds, or an arrival
# rate numpy cannot draw from.
_SPEEDUPS = (1e-6, 1e6)
TRACE_WINDOW_OPENS_S = WINDOW_OPENS / MICROSECONDS
"""The default `trace_start_s`: where the 2011 trace's window opens."""


@dataclass(frozen=True)
class SimulationJob:
    """Everything one simulation needs. Exactly one of `synthetic` (a preset name from
    `firmament_py.sim.synthetic.PRESETS`) and `trace` (a directory in the Google 2011 layout)
    names the workload; `solver_options` go to the solver's constructor (say,
    `{"arc_prioritisation": False}`); `machines` rescales a synthetic preset, `load` and
    `speedup` change its intensity (for a trace, `speedup` divides its times and
    `machine_fraction` / `job_fraction` subsample it). Times are seconds of simulated time;
    a trace is replayed from `trace_start_s` seconds of trace time (default: where the 2011
    trace's window opens, 600 s, before which it records only the cluster as it was), its
    simulated time 0.

    `resource_requests` False (the default) drops the workload's CPU and RAM requests and
    capacities so that only slots matter, as in Firmament's simulator (section 7.1): a policy
    that prices slots only (trivial, load-spreading, quincy) would otherwise route tasks where
    the cluster refuses them. Turn it on for the policies that respect requests (cpu-mem,
    network-aware). `input_data` gives batch tasks input blocks on the machines, for Quincy's
    locality (neither workload records any)."""

    policy: str = "trivial"
    solver: str = "cost-scaling"
    solver_options: Mapping[str, Any] = field(default_factory=dict)
    synthetic: str | None = "google-1k"
    trace: str | None = None
    machines: int | None = None
    load: float | None = None
    speedup: float = 1.0
    duration_s: float = 600.0
    seed: int = 0
    accounting: str = Accounting.ALGORITHM.value
    round_interval_s: float = 1.0
    machine_fraction: float = 1.0
    job_fraction: float = 1.0
    trace_start_s: float = TRACE_WINDOW_OPENS_S
    strict: bool = False
    resource_requests: bool = False
    input_data: bool = False
    label: str = ""

    def __post_init__(self) -> None:
        if (self.synthetic is None) == (self.trace is None):
            raise ValueError("name exactly one workload: a synthetic preset or a trace directory")
        if self.duration_s <= 0:
            raise ValueError(f"the duration must be positive, got {self.duration_s} s")
        if self.round_interval_s < 0:
            raise ValueError(
                f"the round interval must not be negative, got {self.round_interval_s}"
            )
        if self.duration_s * MICROSECONDS >= 2**62:  # a time past int64 microseconds
            raise ValueError(f"the duration must be under 2^62 us, got {self.duration_s} s")
        if not _SPEEDUPS[0] <= self.speedup <= _SPEEDUPS[1]:
            raise ValueError(
                f"the speed-up must be within [{_SPEEDUPS[0]:g}, {_SPEEDUPS[1]:g}], "
                f"got {self.speedup:g}"
            )
        # Options of the other kind of workload would be ignored: refused, as a user who gives
        # one expects it to do something.
        if self.trace is None and (self.machine_fraction != 1 or self.job_fraction != 1):
            raise ValueError("a machine or job fraction samples a trace: give --trace too")
        if self.trace is None and self.trace_start_s != TRACE_WINDOW_OPENS_S:
            raise ValueError("a trace start says where to replay a trace from: give --trace too")
        if not 0 <= self.trace_start_s * MICROSECONDS < 2**62:
            raise ValueError(
                f"the trace start must lie in [0, 2^62 us), got {self.trace_start_s} s"
            )
        if self.trace is not None and (self.machines is not None or self.load is not None):
            raise ValueError("machines and load rescale a synthetic workload, not a trace")
        Accounting(self.accounting)  # ValueError names an unknown mode

    @property
    def duration_us(self) -> Time:
        return round(self.duration_s * MICROSECONDS)

    def describe(self) -> str:
        """The workload in a few words, for reports."""
        if self.trace is not None:
            return (
                f"trace {self.trace} from {self.trace_start_s:g} s (machines "
                f"{self.machine_fraction:g}, jobs {self.job_fraction:g}, speed-up {self.speedup:g})"
                + (", with input data" if self.input_data else "")
            )
        parts = [f"synthetic {self.synthetic}", f"seed {self.seed}"]
        if self.resource_requests:
            parts.append("with requests")
        if self.input_data:
            parts.append("with input data")
        if self.machines is not None:
            parts.append(f"{self.machines} machines")
        if self.load is not None:
            parts.append(f"load {self.load:g}")
        if self.speedup != 1:
            parts.append(f"speed-up {self.speedup:g}")
        return ", ".join(parts)

    def _items(self, on_bad_row: Callable[[BadRow], None] | None) -> Iterable[WorkloadItem]:
        if self.trace is not None:
            start = round(self.trace_start_s * MICROSECONDS)
            return read_google_trace(
                self.trace,
                scale=None if self.resource_requests else _SLOTS_ONLY,
                machine_fraction=self.machine_fraction,
                job_fraction=self.job_fraction,
                speedup=self.speedup,
                strict=self.strict,
                on_bad_row=on_bad_row,
                start=start,
                end=start + round(self.duration_us * self.speedup),
            )
        assert self.synthetic is not None
        changes: dict[str, float | bool] = {"resource_requests": self.resource_requests}
        if self.load is not None:
            changes["load"] = self.load
        if self.speedup != 1:
            changes["speedup"] = self.speedup
        spec = preset(self.synthetic, machines=self.machines, **changes)
        return SyntheticWorkload(spec, self.seed).items(self.duration_us)

    def workload(
        self, on_bad_row: Callable[[BadRow], None] | None = None
    ) -> Iterable[WorkloadItem]:
        """The items to replay, made lazily; with `input_data`, batch tasks carry input blocks
        placed by a simulated file system (`firmament_py.sim.input_data`)."""
        items = self._items(on_bad_row)
        if not self.input_data:
            return items
        return SimulatedFileSystem(self.seed, speedup=self.speedup).attach(items)

    def config(self) -> SimulationConfig:
        return SimulationConfig(
            end_time=self.duration_us,
            accounting=Accounting(self.accounting),
            round_interval=round(self.round_interval_s * MICROSECONDS),
        )


def run_job(
    job: SimulationJob,
    *,
    progress: Callable[[Time], None] | None = None,
    on_bad_row: Callable[[BadRow], None] | None = None,
    warmed_up: bool = False,
    workload: Iterable[WorkloadItem] | None = None,
    observer: SimulationObserver | None = None,
) -> SimulationResult:
    """Run `job` to its end and return the result (`warmed_up`: the caller has already run
    `warm_up` for the job's solver, as `simulate` does to announce it; `workload`: the job's
    items, made already by a caller that reads them again afterwards; `observer`: told every
    event and round as it happens, as `Simulator` says). Raises what the parts
    raise: ValueError for a bad preset or option, UnknownPolicyError / PolicyError,
    SolverError, TraceError (strict)."""
    if workload is None:
        workload = job.workload(on_bad_row)
    # Load the solver's kernels now, so that the first rounds' runtimes are the algorithm's and
    # not numba loading machine code (about 8 ms of a 0.4 ms round at 1,000 machines).
    if not warmed_up:
        warm_up(job.solver, job.solver_options)
    with Scheduler(job.policy, solver=job.solver, solver_options=job.solver_options) as scheduler:
        # A race's workers warm up in their own processes; past a minute (a cold cache), go on.
        scheduler.solver.wait_ready(timeout=60.0)
        simulator = Simulator(
            scheduler, workload, job.config(), workload_name=job.describe(), observer=observer
        )
        return simulator.run(progress)
