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

Two readings (`FlexibleRules`): `OURS`, the default and what the above describes, and `PAPER`,
Algorithms 1 and 2 as printed. They differ in three places (the `FlexibleRules` docstring says
how and why): who may preempt (Algorithm 2, line 2), what room a preempting arrival's cores
may take (line 3), and whether admission is `<` or `<=` (Algorithm 1 line 10, Algorithm 2 line
13). Both read a one-dimensional test per dimension (cpu and ram), as above.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from typing import ClassVar

from firmament_py.zoe.application import Application
from firmament_py.zoe.capacity import ClusterCapacity, Demand
from firmament_py.zoe.scheduler import ApplicationScheduler
from firmament_py.zoe.sorting import SortingPolicy

__all__ = ["FlexibleRules", "FlexibleScheduler"]


class FlexibleRules(enum.Enum):
    """Which reading of Algorithms 1 and 2 the flexible scheduler follows.

    `PAPER` is the pseudo-code as printed, each one-dimensional test read per dimension (cpu
    and ram), as the paper amends it for two resources:

    * (a) Algorithm 2, line 2, `req.P > S.tail.P`: an arrival preempts only if its priority
      (`Application.priority`, the request's stored P) is higher than that of the last
      application in S; an arrival of equal priority goes to L whatever the sorting policy
      says of it. With S empty there is no tail, so the arrival goes to L (as in `OURS`).
    * (b) Algorithm 2, line 3, `req.C <= sum over S of req_j.E`: the preempting arrival's core
      components must fit in what S's elastic components *request* (all of them, granted or
      not), so an arrival goes to W even when the cluster has free room for it, if S asks for
      few elastic components. Taken alone this test can over-commit: S's elastic requests may
      exceed what the cores of S leave (an application granted 7 of its 20 elastic units
      still counts 20), and the arrival's cores would not fit beside those of S. `PAPER`
      therefore clamps: the arrival also needs its cores to fit beside those of S, else it
      goes to W as if line 3 had failed. So no allocation ever exceeds the cluster, and the
      simulator never has to undo a core component.
    * (c) Algorithm 1, line 10, and Algorithm 2, line 13, `req.C + sum over S of C < total`:
      strict, in every dimension, so cores that would exactly fill the cluster in cpu or ram
      are not admitted. An application whose core components alone equal the whole cluster
      in a dimension could then never be admitted and would block L for ever; it is refused
      at submission instead (with the reason), like one whose cores exceed the cluster.

    Algorithm 1's line 3 (`req.C <= avail`, `avail` what nobody holds after the last
    REBALANCE) and line 8 (`sum over S of (C + E) < total`, no dimension saturated) are read
    the same way by both.

    `OURS`, the default, departs from the text in those three places:

    * (a) preemption compares the whole order (priority, then the sorting policy's key, then
      submission), because section 4.5 applies preemption "to size-based priorities" too;
      under SRPT any arrival shorter than S's tail enters S at once if its cores fit.
    * (b) the preempting arrival's cores must fit beside those of S (total minus the cores of
      S: what elastic components and nobody hold), because the literal sum of requested
      elastic resources can over-commit and ignores free room.
    * (c) admission is "fits" (`<=`), because the text says a request joins S when "there is
      room to allocate all of its core components", and exactly enough room is room.
    """

    OURS = "ours"
    PAPER = "paper"


class FlexibleScheduler(ApplicationScheduler):
    """Algorithm 1, or with `preemptive=True` Algorithm 2 (see the module docstring), under
    `rules` (`FlexibleRules.OURS` by default; `PAPER` for the pseudo-code as printed)."""

    name: ClassVar[str] = "flexible"

    def __init__(
        self,
        capacity: ClusterCapacity,
        sorting: SortingPolicy,
        *,
        preemptive: bool = False,
        remaining_work: Callable[[Application], float] | None = None,
        rules: FlexibleRules = FlexibleRules.OURS,
    ) -> None:
        super().__init__(capacity, sorting, remaining_work=remaining_work)
        self.preemptive = preemptive
        self.rules = FlexibleRules(rules)

    # ------------------------------------------------------------------ events

    def _enqueue(self, application: Application) -> bool:
        if self.preemptive and self.serving and self._outranks_tail(application):
            # Algorithm 2, lines 2-7: a higher priority than S's tail.
            if self._preemption_room(application):
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
            while self.auxiliary and self._cores_admitted(self.auxiliary[0]):
                application = self.auxiliary.pop(0)
                self._insert(self.serving, application)
                self.grants[application.app_id] = 0
        self.rebalance()

    def _after_withdraw(self) -> None:
        self.cascade()

    def _refusal(self, application: Application) -> str | None:
        """As every scheduler's; under `PAPER` also an application whose cores reach the whole
        cluster in cpu or ram: the strict admission test (c) could never let it in."""
        reason = super()._refusal(application)
        if reason is None and self.rules is FlexibleRules.PAPER:
            if application.core_demand.reaches(self.total):
                return (
                    f"application {application.app_id!r}: its core components need "
                    f"{application.core_demand}, all of the cluster's {self.total} in cpu or "
                    "ram, and the paper's rules admit only cores that leave some room "
                    "(Algorithm 1, line 10: req.C + sum(C) < total)"
                )
        return reason

    # ------------------------------------------------------------------ REBALANCE

    def rebalance(self) -> None:
        """Algorithm 1's REBALANCE: admit from L while S cannot saturate the cluster and the
        head's cores fit, then grant elastic components in cascade."""
        while self.waiting and not self._full_demand().reaches(self.total):
            head = self.waiting[0]
            if not self._cores_admitted(head):
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

    # ------------------------------------------------------------------ the three departures

    def _outranks_tail(self, application: Application) -> bool:
        """Algorithm 2, line 2 (`req.P > S.tail.P`), S not empty."""
        tail = self.serving[-1]
        if self.rules is FlexibleRules.PAPER:
            return application.priority > tail.priority
        # OURS (a): the whole order, so that size-based policies preempt too (section 4.5).
        return self.key(application) < self.key(tail)

    def _preemption_room(self, application: Application) -> bool:
        """Algorithm 2, line 3 (`req.C <= sum over S of req_j.E`)."""
        if self.rules is FlexibleRules.PAPER:
            elastic = Demand()
            for member in self.serving:
                elastic = elastic + (member.full_demand - member.core_demand)
            # The clamp (see FlexibleRules): the literal test alone can over-commit.
            return application.core_demand.fits_in(elastic) and self._cores_fit(application)
        # OURS (b): total minus the cores of S, which never over-commits and counts free room.
        return self._cores_fit(application)

    def _cores_admitted(self, application: Application) -> bool:
        """Algorithm 1, line 10, and Algorithm 2, line 13 (`req.C + sum over S of C < total`)."""
        if self.rules is FlexibleRules.PAPER:
            return not (self.core_total() + application.core_demand).reaches(self.total)
        # OURS (c): "fits" (<=): exactly enough room for the cores is room.
        return self._cores_fit(application)

    def _cores_fit(self, application: Application) -> bool:
        return (self.core_total() + application.core_demand).fits_in(self.total)
