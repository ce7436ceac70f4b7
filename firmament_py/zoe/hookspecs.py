"""The sorting policy API: the hooks a Zoe sorting policy implements, in one place.

Zoe decouples sorting from allocation (section 3.1): an external component orders the waiting
line L and the serving set S, and the flexible scheduler allocates in that order. A sorting
policy is a pluggy plugin (project name `firmament_py.zoe`): an object whose methods are marked
with `hookimpl` and named after the hooks below. Built-in ones (FIFO, SJF with the three size
definitions of the paper's Table 2, SRPT, HRRN) are in `firmament_py.zoe.sorting`; others are
found through the entry-point group `firmament_py.zoe.sorting`.

Rules (as for the scheduling policies of `firmament_py.sdk.hookspecs`):

* Both hooks are `firstresult`; an implementation may take any subset of a hook's arguments.
* Answers are checked (`SortingPolicy`): a key must be a finite real number, `dynamic_order`
  a bool; a wrong answer or an exception raises `SortingError` naming the policy, the hook
  and the application.
* The application's own priority comes first: applications are served by descending
  `Application.priority`, then by ascending key, then in order of submission.
"""

from __future__ import annotations

import pluggy

from firmament_py.zoe.application import Application

__all__ = ["HOOKS", "PROJECT_NAME", "hookimpl", "hookspec"]

PROJECT_NAME = "firmament_py.zoe"
"""pluggy's project name for sorting policies (distinct from the scheduling policies')."""

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)
"""Marks a sorting policy's method as the implementation of the hook of the same name."""


@hookspec(firstresult=True)
def sort_key(application: Application, now: float, remaining_work: float) -> float | None:
    """The application's place in line: smaller is served first (among applications of equal
    priority; ties keep the order of submission).

    `now` is the simulated time in seconds; `remaining_work` the work the application has left
    (its `work` until it starts). Must be a finite real number.
    """


@hookspec(firstresult=True)
def dynamic_order() -> bool | None:
    """Whether keys change with time or progress (SRPT, HRRN): then the lines are sorted again
    at every scheduling event. Static keys (FIFO, SJF) are computed once per application.
    Default: False."""


HOOKS = ("sort_key", "dynamic_order")
