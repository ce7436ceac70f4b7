"""The baselines Zoe is compared with: a rigid scheduler and a malleable one.

`RigidScheduler` (sections 2.2 and 4.2, "representative of current cluster management
systems") ignores component classes: an application gets all of its components or waits. The
head of the waiting line is served as soon as everything it asks for fits in what nobody holds;
a head that does not fit blocks the line (no backfilling, as in the paper's Figure 1).

`MalleableScheduler` (section 4.3) is first-fit: at every event it first gives the applications
in service, in order of admission, as many more elastic components as fit, then serves the
head of the line if its core components fit in what is left, with as many elastic components
as fit too, and so on; a head whose core components do not fit waits (and blocks the line)
until resources free up. It never takes resources back.

Neither preempts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from firmament_py.zoe.application import Application
from firmament_py.zoe.scheduler import ApplicationScheduler

__all__ = ["MalleableScheduler", "RigidScheduler"]


class RigidScheduler(ApplicationScheduler):
    """All components or nothing, head of line first (see the module docstring)."""

    name: ClassVar[str] = "rigid"

    def _refusal(self, application: Application) -> str | None:
        """As every scheduler's, and an application whose components together exceed the
        whole cluster: all or nothing would never serve it."""
        if not application.full_demand.fits_in(self.total):
            return (
                f"application {application.app_id!r}: all of its components need "
                f"{application.full_demand} but the whole cluster has {self.total}, and the "
                "rigid scheduler serves all components or none"
            )
        return super()._refusal(application)

    def _enqueue(self, application: Application) -> bool:
        self._insert(self.waiting, application)
        return False

    def _react_to_arrivals(self, arrived: Sequence[Application], react: bool) -> None:
        self._admit()

    def _depart(self) -> None:
        self._admit()

    def _after_withdraw(self) -> None:
        """Nothing to redistribute: grants are all or nothing."""

    def _admit(self) -> None:
        unused = self.unused()
        while self.waiting and self.waiting[0].full_demand.fits_in(unused):
            application = self.waiting.pop(0)
            self.serving.append(application)
            self.grants[application.app_id] = len(application.elastic)
            unused = unused - application.full_demand


class MalleableScheduler(ApplicationScheduler):
    """First fit, as many elastic components as fit, never taking any back (see the module
    docstring). S stays in order of admission."""

    name: ClassVar[str] = "malleable"

    def _sorted_serving(self) -> list[Application]:
        return []

    def _enqueue(self, application: Application) -> bool:
        self._insert(self.waiting, application)
        return False

    def _react_to_arrivals(self, arrived: Sequence[Application], react: bool) -> None:
        self._schedule()

    def _depart(self) -> None:
        self._schedule()

    def _after_withdraw(self) -> None:
        self._schedule(admit=False)

    def _schedule(self, *, admit: bool = True) -> None:
        unused = self.unused()
        for application in self.serving:
            granted = self.grants[application.app_id]
            more = application.elastic_fitting(unused, granted=granted)
            if more:
                self.grants[application.app_id] = granted + more
                unused = unused - (
                    application.elastic_demand(granted + more) - application.elastic_demand(granted)
                )
        while admit and self.waiting and self.waiting[0].core_demand.fits_in(unused):
            application = self.waiting.pop(0)
            unused = unused - application.core_demand
            granted = application.elastic_fitting(unused)
            self.serving.append(application)
            self.grants[application.app_id] = granted
            unused = unused - application.elastic_demand(granted)
