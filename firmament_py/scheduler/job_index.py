"""`JobIndex`: the unscheduled aggregators U(job) of the flow graph and their arcs to the sink.

One node per job with a task that may wait (or, with preemption, that may be preempted), made
when the first such task is built and dropped in the first round no task's arc enters it. The
arcs to the sink are kept by role, one arc id per job, so a round asks once (the batch form, or
the per-item hook for every job) and writes only the values that changed.
"""

from __future__ import annotations

import numpy as np

from firmament_py.flow.graph import FlowGraph, NodeKind
from firmament_py.model.cluster import ClusterState
from firmament_py.model.ids import JobId
from firmament_py.scheduler.arc_edits import IntArray
from firmament_py.sdk.checks import CheckedArcs
from firmament_py.sdk.columns import JobBatch
from firmament_py.sdk.manager import PolicyManager
from firmament_py.sdk.types import ClusterView, JobView

__all__ = ["JobIndex"]

_TO_SINK = 8  # ArcType.TO_SINK


class JobIndex:
    """The U(job) nodes of one flow graph (see the module docstring)."""

    def __init__(self, graph: FlowGraph, sink: int) -> None:
        self.graph = graph
        self.sink = sink
        self.node_of: dict[JobId, int] = {}
        # By row, in the order the jobs' nodes were made: the job, its node, its arc to the
        # sink (-1 until the next refresh makes it). Rows made since then wait in `_new`.
        self._ids: list[JobId] = []
        self._nodes = np.zeros(0, dtype=np.int64)
        self._arcs = np.zeros(0, dtype=np.int64)
        self._new: list[JobId] = []

    def node(self, job_id: JobId) -> int:
        """The node of U(job), made if the job has none."""
        node = self.node_of.get(job_id)
        if node is None:
            node = self.graph.trusted_add_node(0, NodeKind.OTHER)
            self.node_of[job_id] = node
            self._new.append(job_id)
        return node

    def refresh(self, policy: PolicyManager, cluster: ClusterView, state: ClusterState) -> None:
        """Drop the aggregators no task points to; give the others' arcs to the sink the
        round's answers."""
        if self._new:
            self._ids += self._new
            made = np.array([self.node_of[job_id] for job_id in self._new], dtype=np.int64)
            self._nodes = np.concatenate([self._nodes, made])
            self._arcs = np.concatenate([self._arcs, np.full(len(made), -1, dtype=np.int64)])
            self._new = []
        incoming = self.graph.trusted_in_degrees(self._nodes)
        empty = incoming == 0
        if empty.any():
            self.graph.trusted_remove_nodes(self._nodes[empty])  # their arcs go with them
            for row in np.flatnonzero(empty).tolist():
                del self.node_of[self._ids[row]]
            kept = ~empty
            self._ids = [
                job_id for job_id, keep in zip(self._ids, kept.tolist(), strict=True) if keep
            ]
            self._nodes, self._arcs, incoming = self._nodes[kept], self._arcs[kept], incoming[kept]
        if not self._ids:
            return
        jobs = state.jobs
        if policy.per_item("unscheduled_to_sink_batch"):
            answers = [
                policy.unscheduled_to_sink(
                    job=JobView(jobs[job_id]), incoming_tasks=count, cluster=cluster
                )
                for job_id, count in zip(self._ids, incoming.tolist(), strict=True)
            ]
            arcs = CheckedArcs(
                np.array([a.cost for a in answers], dtype=np.int64),
                np.array([a.capacity for a in answers], dtype=np.int64),
                np.array([a.min_flow for a in answers], dtype=np.int64),
            )
        else:
            batch = JobBatch(self._ids, incoming, jobs)
            arcs = policy.unscheduled_to_sink_batch(jobs=batch, cluster=cluster)
        present = self._arcs >= 0
        if present.any():
            self.graph.trusted_change_arcs(
                self._arcs[present],
                arcs.min_flow[present],
                arcs.capacity[present],
                arcs.cost[present],
            )
        missing = ~present
        if missing.any():
            count = int(missing.sum())
            self._arcs[missing] = self.graph.trusted_add_arcs(
                self._nodes[missing],
                np.full(count, self.sink, dtype=np.int64),
                arcs.min_flow[missing],
                arcs.capacity[missing],
                arcs.cost[missing],
                np.full(count, _TO_SINK, dtype=np.int64),
            )

    def nodes(self) -> IntArray:
        """Every U(job) node."""
        return np.array(list(self.node_of.values()), dtype=np.int64)
