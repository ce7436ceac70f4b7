"""`PolicyHarness`: a policy set up over a cluster state as the scheduler sets it up, for tests
that ask its hooks directly.

The scheduler opens every round by notifying `round_started` and running the statistics pass
before it asks for any arc; hook-level tests need the same, or a policy's per-round caches and
`ResourceView.stats` are not what they would be in a round. The harness does exactly that, and
nothing else: ask the hooks through `harness.manager` with `cluster=harness.cluster`.
"""

from __future__ import annotations

from firmament_py.model.cluster import ClusterState
from firmament_py.sdk.manager import PolicyManager
from firmament_py.sdk.types import ClusterView, ResourceRef, ResourceStats

__all__ = ["PolicyHarness"]


class PolicyHarness:
    """`policy` (an object to register, or a `PolicyManager`) over `state`, in a round."""

    def __init__(
        self, policy: object, state: ClusterState, *, name: str = "policy-under-test"
    ) -> None:
        self.manager = (
            policy if isinstance(policy, PolicyManager) else PolicyManager(policy, name=name)
        )
        self.state = state
        self.stats: dict[ResourceRef, ResourceStats] = {}
        self.cluster: ClusterView = self.manager.cluster_view(state, self.stats)
        self.new_round()

    def new_round(self) -> None:
        """Start a round as the scheduler does: `round_started`, then the statistics pass
        (which still sees the previous pass's statistics), whose results the view then serves."""
        self.manager.round_started(cluster=self.cluster)
        statistics = self.manager.statistics_pass(self.cluster)
        self.stats.clear()
        self.stats.update(statistics)
