"""Zoe's flexible scheduler: Algorithm 1 (no preemption) and Algorithm 2 (preemption).

The scheduler focuses the cluster on as few applications as can use all of it (section 3.1).
It keeps the waiting line L and the serving set S (and, preemptive, the auxiliary line W), all
in the sorting policy's order. REBALANCE (Algorithm 1, lines 7-21):

1. admission (lines 8-13): while S cannot saturate the cluster (the full demand of S, cores
   and every elastic component, stays below the total in both cpu and ram) and L is not
   empty, move L's head into S if its core components fit beside those of S; otherwise stop
   (the head blocks the line; nothing is backfilled);
2. cascade (lines 14-21): every application in S holds its core components; what is left,
   total - cores of S, goes to elastic components in S's order, as many as fit to the first
   application, then to the second, and so on. Grants are recomputed from zero each time, so
   a new admission may take elastic components back from the applications behind it (the
   paper's Figure 1: one unit of C goes to D).

Two dimensions, as the paper amends the algorithm: a core component or an elastic one "fits"
when both its cpu and its ram do; cores of all of S are placed before any elastic component.
Checking the two dimensions jointly or cpu first then ram gives the same answer for a fit, so
the code checks both at once.

Arrivals (ONREQUESTARRIVAL): the application joins L; REBALANCE runs only if it is L's head and
its core components fit in the resources nobody holds (without preemption, an arrival takes
nothing from anybody). Departures (ONREQUESTDEPARTURE) always run REBALANCE.

Preemption (Algorithm 2): an arrival with higher priority than S's tail (it sorts before the
last application in S) goes straight into S if its core components fit beside those of S, that
is, in what elastic components (and nobody) hold; REBALANCE then recomputes the grants, taking
elastic components from the applications it passed. Otherwise it waits in W, which departures
serve first, moving W's head into S while its cores fit, before REBALANCE. Core components are
never taken back: an application stays in S, with all of its cores, until it completes.

Comparisons: the paper writes `req.C + sum(C) < total` (line 10) and `req.C <= avail`
(line 3); we use "fits" (<=) for both, which is what "there is room to allocate all of its
core components" says.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ClassVar

from firmament_py.zoe.application import Application
from firmament_py.zoe.capacity import ClusterCapacity, Demand
from firmament_py.zoe.scheduler import ApplicationScheduler
from firmament_py.zoe.sorting import SortingPolicy

__all__ = ["FlexibleScheduler"]


class FlexibleScheduler(ApplicationScheduler):
    """Algorithm 1, or with `preemptive=True` Algorithm 2 (see the module docstring)."""

    name: ClassVar[str] = "flexible"

    def __init__(
        self,
        capacity: ClusterCapacity,
        sorting: SortingPolicy,
        *,
        preemptive: bool = False,
        remaining_work: Callable[[Application], float] | None = None,
    ) -> None:
        super().__init__(capacity, sorting, remaining_work=remaining_work)
        self.preemptive = preemptive

    # ------------------------------------------------------------------ events

    def _enqueue(self, application: Application) -> bool:
        if self.preemptive and self.serving and self.key(application) < self.key(self.serving[-1]):
            # Algorithm 2, lines 2-7: a higher priority than S's tail.
            if self._cores_fit(application):
                self._insert(self.serving, application)
                self.grants[application.app_id] = 0
                return True
            self._insert(self.auxiliary, application)
            return False
        self._insert(self.waiting, application)
        return False

    def _react_to_arrivals(self, arrived: Sequence[Application], react: bool) -> None:
        head = self.waiting[0] if self.waiting else None
        if react or (
            head is not None
            and any(head is application for application in arrived)
            and head.core_demand.fits_in(self.unused())
        ):
            self.rebalance()

    def _depart(self) -> None:
        if self.preemptive:
            # Algorithm 2, lines 13-14: W first, cores only.
            while self.auxiliary and self._cores_fit(self.auxiliary[0]):
                application = self.auxiliary.pop(0)
                self._insert(self.serving, application)
                self.grants[application.app_id] = 0
        self.rebalance()

    def _after_withdraw(self) -> None:
        self.cascade()

    # ------------------------------------------------------------------ REBALANCE

    def rebalance(self) -> None:
        """Algorithm 1's REBALANCE: admit from L while S cannot saturate the cluster and the
        head's cores fit, then grant elastic components in cascade."""
        while self.waiting and not self._full_demand().reaches(self.total):
            head = self.waiting[0]
            if not self._cores_fit(head):
                break
            self.waiting.pop(0)
            self._insert(self.serving, head)
            self.grants[head.app_id] = 0
        self.cascade()

    def cascade(self) -> None:
        """Lines 14-21: what the cores of S leave, to elastic components in S's order."""
        available = self.total - self.core_total()
        for application in self.serving:
            granted = application.elastic_fitting(available)
            self.grants[application.app_id] = granted
            available = available - application.elastic_demand(granted)

    def _full_demand(self) -> Demand:
        total = Demand()
        for application in self.serving:
            total = total + application.full_demand
        return total

    def _cores_fit(self, application: Application) -> bool:
        return (self.core_total() + application.core_demand).fits_in(self.total)
