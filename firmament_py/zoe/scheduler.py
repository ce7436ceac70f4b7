"""What every application scheduler shares: the waiting line, the serving set, the grants.

A scheduler here is the paper's allocation phase: it decides which applications are served
(the set S) and how many elastic components each is granted, a virtual assignment that the
simulator (or the flow scheduler, through `firmament_py.zoe.placement`) then carries out. It is
driven by three calls: `submit` (an arrival), `complete` (a departure) and `withdraw` (the
placement could not start an admitted application's core components; it goes back in line).
The flexible scheduler (`firmament_py.zoe.flexible`) and the rigid and malleable baselines
(`firmament_py.zoe.baselines`) differ only in how they react.

Order: lines are kept sorted by the application's priority (higher first), then the sorting
policy's key (smaller first), then order of submission. With a dynamic sorting policy (SRPT,
HRRN) every line is sorted again at each call.

Refusal: `submit` raises `ApplicationRefused` for an application that can never run here: its
core components together exceed the whole cluster in cpu or ram, or one of its components
(core or elastic) fits no single machine. Such an application is never queued.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from typing import ClassVar

from firmament_py.zoe.application import Application, ApplicationError, ApplicationRefused
from firmament_py.zoe.capacity import ClusterCapacity, Demand
from firmament_py.zoe.sorting import SortingPolicy

__all__ = ["ApplicationScheduler", "refusal_reason"]


def refusal_reason(application: Application, capacity: ClusterCapacity) -> str | None:
    """Why `application` can never run on `capacity`, or None if it can."""
    total = capacity.total
    if not application.core_demand.fits_in(total):
        return (
            f"application {application.app_id!r}: its core components need "
            f"{application.core_demand} but the whole cluster has {total}"
        )
    for index, component in enumerate(application.components):
        if not capacity.fits_some_machine(component.request):
            return (
                f"application {application.app_id!r}: components[{index}] "
                f"({component.kind.value}) requests {component.request}, more than any machine "
                "offers"
            )
    return None


class ApplicationScheduler(abc.ABC):
    """A virtual assignment of a cluster's pooled cpu and ram to applications (see the module
    docstring). `remaining_work(app)` tells dynamic sorting policies how much work an
    application has left (default: all of it)."""

    name: ClassVar[str]
    preemptive: bool = False

    def __init__(
        self,
        capacity: ClusterCapacity,
        sorting: SortingPolicy,
        *,
        remaining_work: Callable[[Application], float] | None = None,
    ) -> None:
        self.capacity = capacity
        self.total = capacity.total
        self.sorting = sorting
        self.waiting: list[Application] = []
        """The waiting line L, head first."""
        self.auxiliary: list[Application] = []
        """The preemptive flexible scheduler's auxiliary line W (empty otherwise)."""
        self.serving: list[Application] = []
        """The serving set S, in the order elastic components are granted."""
        self.grants: dict[str, int] = {}
        """Elastic components granted to each application in S."""
        self.now = 0.0
        self._remaining = remaining_work or (lambda application: application.work)
        self._order: dict[str, int] = {}
        self._static_keys: dict[str, tuple[int, float, int]] = {}

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(sorting={self.sorting.name!r}, waiting={len(self.waiting)}, "
            f"auxiliary={len(self.auxiliary)}, serving={len(self.serving)})"
        )

    # ------------------------------------------------------------------ the calls

    def submit(self, application: Application, now: float) -> None:
        """An arrival. Raises ApplicationRefused (nothing changes) if the application can never
        run on this cluster, ApplicationError if its id was submitted before."""
        refused = self.submit_together([application], now)
        if refused:
            raise refused[0][1]

    def submit_together(
        self, applications: Sequence[Application], now: float
    ) -> list[tuple[Application, ApplicationRefused]]:
        """Arrivals at one instant: all join their lines before the scheduler reacts (as the
        paper's examples, where requests "arrive at the same moment", assume). Returns those
        that can never run (they are not queued), each with its refusal; ApplicationError if an id
        was submitted before."""
        refused: list[tuple[Application, ApplicationRefused]] = []
        accepted: list[Application] = []
        for application in applications:
            if application.app_id in self._order:
                raise ApplicationError(f"application {application.app_id!r}: submitted twice")
            reason = self._refusal(application)
            if reason is not None:
                refused.append((application, ApplicationRefused(reason)))
                continue
            self._order[application.app_id] = len(self._order)
            accepted.append(application)
        if accepted:
            self._advance(now)
            react = False
            for application in accepted:
                react = self._enqueue(application) or react
            self._react_to_arrivals(accepted, react)
        return refused

    def _refusal(self, application: Application) -> str | None:
        """Why `application` can never be served here (see `refusal_reason`)."""
        return refusal_reason(application, self.capacity)

    def complete(self, app_id: str, now: float) -> None:
        """A departure of an application in service."""
        self._advance(now)
        application = self._take_serving(app_id)
        self._static_keys.pop(application.app_id, None)
        self._depart()

    def withdraw(self, app_id: str, now: float) -> None:
        """The placement could not start `app_id`'s core components: take it out of service,
        back into the waiting line; the others' grants are recomputed, nobody is admitted."""
        self._advance(now)
        application = self._take_serving(app_id)
        self._insert(self.waiting, application)
        self._after_withdraw()

    def retry(self, now: float) -> None:
        """React as to a departure, without one: withdrawals left resources free that no
        event would otherwise offer to the waiting lines."""
        self._advance(now)
        self._depart()

    # ------------------------------------------------------------------ reading

    @property
    def pending(self) -> int:
        """Applications waiting (L and W)."""
        return len(self.waiting) + len(self.auxiliary)

    def allocated(self) -> Demand:
        """What S holds: every core component, and the granted elastic ones."""
        total = Demand()
        for application in self.serving:
            total = total + application.allocated(self.grants[application.app_id])
        return total

    def unused(self) -> Demand:
        """What nobody holds."""
        return self.total - self.allocated()

    def core_total(self, applications: Sequence[Application] | None = None) -> Demand:
        """What the core components of `applications` (default: S) need together."""
        total = Demand()
        for application in self.serving if applications is None else applications:
            total = total + application.core_demand
        return total

    # ------------------------------------------------------------------ order

    def key(self, application: Application) -> tuple[int, float, int]:
        """Where `application` goes in a line: priority (higher first), the sorting policy's
        key, order of submission."""
        cached = self._static_keys.get(application.app_id)
        if cached is not None:
            return cached
        key = (
            -application.priority,
            self.sorting.key(application, self.now, self._remaining(application)),
            self._order[application.app_id],
        )
        if not self.sorting.dynamic:
            self._static_keys[application.app_id] = key
        return key

    def _insert(self, line: list[Application], application: Application) -> None:
        line.append(application)
        line.sort(key=self.key)

    def _advance(self, now: float) -> None:
        self.now = max(self.now, now)
        if self.sorting.dynamic:
            for line in (self.waiting, self.auxiliary, self._sorted_serving()):
                line.sort(key=self.key)

    def _sorted_serving(self) -> list[Application]:
        """S if this scheduler keeps it in the policy's order, else an empty list (S in order
        of admission is never re-sorted)."""
        return self.serving

    def _take_serving(self, app_id: str) -> Application:
        for index, application in enumerate(self.serving):
            if application.app_id == app_id:
                del self.serving[index]
                del self.grants[app_id]
                return application
        raise KeyError(f"application {app_id!r} is not in service")

    # ------------------------------------------------------------------ the policy

    @abc.abstractmethod
    def _enqueue(self, application: Application) -> bool:
        """Put an arriving application in its line; True if that calls for a reaction
        whatever the lines' heads (a preemptive insertion into S)."""

    @abc.abstractmethod
    def _react_to_arrivals(self, arrived: Sequence[Application], react: bool) -> None:
        """React once to the arrivals of one instant (all already in their lines)."""

    @abc.abstractmethod
    def _depart(self) -> None:
        """React to a departure (the application has left S)."""

    @abc.abstractmethod
    def _after_withdraw(self) -> None:
        """React to a withdrawal (the application is back in L)."""
