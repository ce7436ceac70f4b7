"""`PolicyHarness`: a policy set up over a cluster state as the scheduler sets it up, for tests
that ask its hooks directly, per item or in batch.

The scheduler opens every round by notifying `round_started` and working out the statistics
before it asks for any arc; hook-level tests need the same, or a policy's per-round caches and
`ResourceView.stats` are not what they would be in a round. The harness does exactly that, and
nothing else: ask the hooks through `harness.manager` with `cluster=harness.cluster`, and the
batch hooks with `harness.topology` and `harness.tasks(...)`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from firmament_py.model.cluster import ClusterState
from firmament_py.model.ids import TaskId
from firmament_py.sdk.columns import TaskBatch, Topology, topology_of
from firmament_py.sdk.manager import PolicyManager
from firmament_py.sdk.types import ClusterView, ResourceRef, ResourceStats

__all__ = ["PolicyHarness"]


class _Latest(Mapping[ResourceRef, ResourceStats]):
    """The latest round's statistics, as the view serves them."""

    def __init__(self) -> None:
        self.current: Mapping[ResourceRef, ResourceStats] = {}

    def __getitem__(self, ref: ResourceRef) -> ResourceStats:
        return self.current[ref]

    def __iter__(self) -> Iterator[ResourceRef]:
        return iter(self.current)

    def __len__(self) -> int:
        return len(self.current)


class PolicyHarness:
    """`policy` (an object to register, or a `PolicyManager`) over `state`, in a round."""

    def __init__(
        self, policy: object, state: ClusterState, *, name: str = "policy-under-test"
    ) -> None:
        self.manager = (
            policy if isinstance(policy, PolicyManager) else PolicyManager(policy, name=name)
        )
        self.state = state
        self._stats = _Latest()
        self.cluster: ClusterView = self.manager.cluster_view(state, self._stats)
        self.topology: Topology = topology_of(state)
        self.new_round()

    @property
    def stats(self) -> Mapping[ResourceRef, ResourceStats]:
        """Every live resource's statistics in the current round."""
        return self._stats.current

    def new_round(self) -> None:
        """Start a round as the scheduler does: `round_started`, then the statistics (which
        still see the previous round's statistics while they are worked out), which the view
        then serves; `topology` is the cluster's as it is now."""
        self.manager.round_started(cluster=self.cluster)
        self.topology = topology_of(self.state)
        self._stats.current = self.manager.round_statistics(
            topology=self.topology, cluster=self.cluster
        )

    def tasks(self, task_ids: Iterable[TaskId]) -> TaskBatch:
        """These tasks as a batch, as the batch hooks receive them."""
        return TaskBatch([self.state.task(task_id) for task_id in task_ids])
