"""What every min-cost flow solver promises: the result, the errors, and the life cycle.

A solver holds a `ResidualNetwork` between solves. It is fed either directly (`load` a snapshot,
`apply` change batches, then `solve`) or through a `FlowGraph` whose changes it consumes
(`solve_graph`). Every result is optimal and carries its own certificate: potentials under which
no residual arc has negative reduced cost.
"""

from __future__ import annotations

import time
import weakref
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from firmament_py.flow.changes import ChangeBatch
from firmament_py.flow.graph import FlowGraph
from firmament_py.solvers import kernels
from firmament_py.solvers.batch_check import check_batch, check_snapshot
from firmament_py.solvers.network import ResidualNetwork, excess_summary

Int64Array = npt.NDArray[np.int64]


class SolverError(RuntimeError):
    """Base class of solver failures."""


class InfeasibleError(SolverError):
    """The supplies cannot be routed within the capacities (or do not sum to zero)."""


class UnboundedError(SolverError):
    """A negative-cost cycle of uncapacitated arcs makes the cost unbounded below."""


class SolverCancelled(SolverError):
    """A cooperative cancellation request stopped the solve (racing)."""


@dataclass(frozen=True)
class SolveResult:
    """An optimal flow with its certificate.

    `flow` is indexed by arc id and `potentials` by node id; under the potentials every residual
    arc has non-negative reduced cost `cost - pi(src) + pi(dst)`.
    """

    cost: int
    flow: Int64Array
    potentials: Int64Array
    algorithm: str
    wall_time: float
    stats: dict[str, float] = field(default_factory=dict)


class FlowSolver(ABC):
    """A min-cost flow algorithm with state kept between solves."""

    algorithm: ClassVar[str]

    def __init__(self) -> None:
        self.network = ResidualNetwork()
        self._graph_ref: weakref.ref[FlowGraph] | None = None
        self._loaded = False
        # True while the network holds exactly the bound graph: loaded from it, and changed only
        # by its own changes since (a `load` or `apply` from elsewhere ends that).
        self._mirrors_graph = False
        self._cancel = np.zeros(2, dtype=np.int64)

    # ------------------------------------------------------------------ life cycle

    def load(self, snapshot: ChangeBatch) -> None:
        """Forget everything and take the graph a reset batch describes.

        A bad snapshot raises `BatchError` (a `ValueError`) and leaves the solver as it was.
        """
        check_snapshot(snapshot)
        self.network.load(snapshot)
        self._loaded = True
        self._mirrors_graph = False
        self._after_load()

    def apply(self, changes: ChangeBatch) -> None:
        """Take one round of graph changes; the next solve starts from the previous solution.

        The batch is checked against the network first (the compiled code that applies it
        trusts it): one that does not fit raises `BatchError` naming its first bad row, and
        nothing is applied.
        """
        if changes.reset:
            self.load(changes)
            return
        if not self._loaded:
            raise SolverError("apply() before load(): give the solver a snapshot first")
        check_batch(self.network, changes)
        self._mirrors_graph = False
        self._before_changes(changes)
        self.network.apply(changes)

    def solve(self) -> SolveResult:
        """Solve the current network to optimality."""
        if not self._loaded:
            raise SolverError("solve() before load(): give the solver a snapshot first")
        start = time.perf_counter()
        check_balanced(self.network)
        check_bounded(self.network)
        stats = self._run()
        self.network.clear_work()
        elapsed = time.perf_counter() - start
        try:
            flow, cost = self.network.flows_and_cost()
        except OverflowError:
            raise SolverError(
                "the optimal flow's cost does not fit in 64 bits (costs times flows are too large)"
            ) from None
        return SolveResult(
            cost=cost,
            flow=flow,
            potentials=self.potentials(),
            algorithm=self.algorithm,
            wall_time=elapsed,
            stats=stats,
        )

    def solve_graph(self, graph: FlowGraph) -> SolveResult:
        """Solve `graph`, consuming its pending changes (a new graph is loaded whole)."""
        bound = self._graph_ref() if self._graph_ref is not None else None
        if bound is not graph or not self._loaded:
            self._load_graph(graph)
            graph.discard_changes()
            self._graph_ref = weakref.ref(graph)
        else:
            self._apply_graph_changes(graph.take_changes())
        result = self.solve()
        return _sized(result, graph.arc_id_bound, graph.node_id_bound)

    def sync(self, flow: Int64Array, potentials: Int64Array) -> None:
        """Adopt a known optimal flow and its potentials (from another solver of the same graph)."""
        self.network.set_flows(flow)
        self._adopt_potentials(potentials)
        self.network.clear_work()

    def prepare(self) -> None:
        """Do now, in idle time, work the next solve would otherwise begin with (cost scaling
        lifts adopted prices); nothing else changes. A race asks its workers to when the caller
        has been away for a while."""

    def potentials(self) -> Int64Array:
        """Potentials certifying the current flow (unscaled costs)."""
        return self.network.potentials()

    def cancel_flag(self) -> Int64Array:
        """The cancel flag: two int64s, `[cancel up to, current solve]`.

        A running solve stops at its next poll once `flag[0] != 0 and flag[0] >= flag[1]`.
        Alone, set `flag[0] = 1` to stop it (and back to 0 before the next solve); a race
        numbers its solves in `flag[1]` so that a late cancel cannot stop a later solve.
        """
        return self._cancel

    def use_cancel_flag(self, flag: Int64Array) -> None:
        """Poll `flag` (for example a view of shared memory) instead of the private one."""
        if flag.shape != (2,) or flag.dtype != np.int64:
            raise ValueError("a cancel flag is an int64 array of two elements")
        self._cancel = flag

    def cancel_requested(self) -> bool:
        """True if the cancel flag asks the current solve to stop (the kernels' own test)."""
        return bool(kernels.is_cancelled(self._cancel))

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Wait until the solver can start a solve at once; True if it can. An in-process
        solver can when it is built (`solvers.warmup.warm_up` loads its kernels first); a race
        waits for its workers' warm-up."""
        return True

    def close(self) -> None:
        """Release resources (worker processes, shared memory); the solver is unusable after."""

    # ------------------------------------------------------------------ algorithm hooks

    @abstractmethod
    def _run(self) -> dict[str, float]:
        """Make the network's flow optimal; return statistics. Raise InfeasibleError."""

    def _load_graph(self, graph: FlowGraph) -> None:
        """`load(graph.snapshot())`, built from the graph's arrays instead (no snapshot to write
        and check)."""
        self.network.load_graph(graph)
        self._loaded = True
        self._mirrors_graph = True
        self._after_load()

    def _apply_graph_changes(self, changes: ChangeBatch) -> None:
        """`apply` for the bound graph's own changes. While the network mirrors the graph they
        need no check, for the reason a graph's load needs none: a `FlowGraph` holds only valid
        graphs, so its net changes take one valid graph to another (at 135,000 changed arcs,
        the check was 25 ms of a round)."""
        if not self._mirrors_graph:
            self.apply(changes)
            return
        self._before_changes(changes)
        self.network.apply(changes)

    def _after_load(self) -> None:
        """Called after a snapshot is loaded (flows are zero, potentials zero)."""

    def _before_changes(self, changes: ChangeBatch) -> None:
        """Called before a batch is applied, while the previous solution is still intact."""

    def _adopt_potentials(self, potentials: Int64Array) -> None:
        a = self.network.arrays
        n = min(len(potentials), len(a.price))
        a.price[:n] = potentials[:n]


def check_balanced(network: ResidualNetwork) -> None:
    total, _positive, _unbalanced = excess_summary(network.arrays)
    if total != 0:
        raise InfeasibleError(f"supplies sum to {int(total)}, not 0: the problem is unbalanced")


def check_bounded(network: ResidualNetwork) -> None:
    cycle = kernels.negative_infinite_cycle(network.arrays)
    if cycle >= 0:
        raise UnboundedError(
            f"node {cycle} lies on a negative-cost cycle of uncapacitated arcs: "
            "the cost is unbounded below"
        )


def _sized(result: SolveResult, arcs: int, nodes: int) -> SolveResult:
    """Resize flow and potentials to a graph's id bounds (solvers may hold larger arrays)."""

    def fit(a: Int64Array, n: int) -> Int64Array:
        if len(a) >= n:
            return a[:n]  # the result's arrays are the caller's own: no copy needed
        out = np.zeros(n, dtype=np.int64)
        out[: len(a)] = a
        return out

    return SolveResult(
        cost=result.cost,
        flow=fit(result.flow, arcs),
        potentials=fit(result.potentials, nodes),
        algorithm=result.algorithm,
        wall_time=result.wall_time,
        stats=result.stats,
    )
