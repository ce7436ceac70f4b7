"""Sorting policies for Zoe's lines, as pluggy plugins: FIFO, SJF (three sizes), SRPT, HRRN.

The paper's sorting component (sections 3.1 and 4): the flexible scheduler keeps the order it
is given. Built-in policies, by name:

=========  ==================================================================================
fifo       arrival time
sjf        size = runtime (the nominal runtime W / (C - 2 + E)), Table 2's "SJF"
sjf-2d     size = runtime x number of components, Table 2's "SJF-2D"
sjf-3d     size = runtime x sum over components of cpu (cores) x ram (GiB), "SJF-3D"
srpt       remaining runtime in isolation: work left / (C - 2 + E); changes as work is done
hrrn       highest response ratio next: (time since arrival + runtime) / runtime, highest
           first; changes with time, so long applications are not starved
=========  ==================================================================================

`SortingPolicy` is the typed, checked facade the schedulers ask (like
`firmament_py.sdk.PolicyManager` for scheduling policies); `load_sorting(name)` selects a
built-in policy or one installed under the entry-point group `firmament_py.zoe.sorting`.
"""

from __future__ import annotations

import importlib.metadata
import math
from typing import Any

import pluggy

from firmament_py.zoe import hookspecs
from firmament_py.zoe.application import Application
from firmament_py.zoe.capacity import GIB
from firmament_py.zoe.hookspecs import hookimpl

__all__ = [
    "BUILTIN_SORTING",
    "SORTING_ENTRY_POINT_GROUP",
    "FifoSorting",
    "HrrnSorting",
    "SizeDefinition",
    "SjfSorting",
    "SortingError",
    "SortingPolicy",
    "SrptSorting",
    "application_size",
    "load_sorting",
    "sorting_names",
]

SORTING_ENTRY_POINT_GROUP = "firmament_py.zoe.sorting"


class SortingError(ValueError):
    """A sorting policy could not be loaded, or answered wrongly; names the policy and hook."""


# ---------------------------------------------------------------------- sizes (Table 2)


class SizeDefinition:
    """The definitions of an application's size of the paper's Table 2."""

    RUNTIME = "runtime"
    RUNTIME_X_COMPONENTS = "runtime*components"
    RUNTIME_X_CPU_RAM = "runtime*sum(cpu*ram)"
    ALL = (RUNTIME, RUNTIME_X_COMPONENTS, RUNTIME_X_CPU_RAM)


def application_size(application: Application, definition: str) -> float:
    """The application's size by one of `SizeDefinition.ALL`: its nominal runtime, times its
    number of components, or times the sum over its components of cpu (cores) x ram (GiB)."""
    runtime = application.nominal_runtime
    if definition == SizeDefinition.RUNTIME:
        return runtime
    if definition == SizeDefinition.RUNTIME_X_COMPONENTS:
        return runtime * len(application.components)
    if definition == SizeDefinition.RUNTIME_X_CPU_RAM:
        return runtime * sum(
            (c.request.cpu_millicores / 1000) * (c.request.ram_bytes / GIB)
            for c in application.components
        )
    raise ValueError(
        f"unknown size definition {definition!r}; known: {', '.join(SizeDefinition.ALL)}"
    )


# ---------------------------------------------------------------------- built-in policies


class FifoSorting:
    """First in, first out: by arrival time."""

    @hookimpl
    def sort_key(self, application: Application) -> float:
        return application.arrival


class SjfSorting:
    """Shortest job first, by one of Table 2's size definitions."""

    def __init__(self, size: str = SizeDefinition.RUNTIME) -> None:
        if size not in SizeDefinition.ALL:
            raise ValueError(f"unknown size definition {size!r}; known: {SizeDefinition.ALL}")
        self.size = size

    @hookimpl
    def sort_key(self, application: Application) -> float:
        return application_size(application, self.size)


class SrptSorting:
    """Shortest remaining processing time: the work left over the rate with every component."""

    @hookimpl
    def sort_key(self, application: Application, remaining_work: float) -> float:
        return remaining_work / application.rate(len(application.elastic))

    @hookimpl
    def dynamic_order(self) -> bool:
        return True


class HrrnSorting:
    """Highest response ratio next: (time since arrival + runtime) / runtime, highest first."""

    @hookimpl
    def sort_key(self, application: Application, now: float) -> float:
        runtime = application.nominal_runtime
        return -(max(0.0, now - application.arrival) + runtime) / runtime

    @hookimpl
    def dynamic_order(self) -> bool:
        return True


BUILTIN_SORTING: dict[str, type[Any] | tuple[type[Any], str]] = {
    "fifo": FifoSorting,
    "sjf": (SjfSorting, SizeDefinition.RUNTIME),
    "sjf-2d": (SjfSorting, SizeDefinition.RUNTIME_X_COMPONENTS),
    "sjf-3d": (SjfSorting, SizeDefinition.RUNTIME_X_CPU_RAM),
    "srpt": SrptSorting,
    "hrrn": HrrnSorting,
}
"""The built-in sorting policies by name (a class, or a class and its size definition)."""


class _Defaults:
    @hookimpl(trylast=True)
    def dynamic_order(self) -> bool:
        return False


# ---------------------------------------------------------------------- the facade


class SortingPolicy:
    """One sorting policy, asked through checked methods.

    Raises SortingError at construction if the plugin implements an unknown hook, does not
    implement `sort_key`, or answers `dynamic_order` with something other than a bool.
    """

    def __init__(self, plugin: object, *, name: str) -> None:
        self.name = name
        if isinstance(plugin, type):
            raise SortingError(
                f"sorting policy {name!r}: {plugin.__name__} is a class; register an instance"
            )
        manager = pluggy.PluginManager(hookspecs.PROJECT_NAME)
        manager.add_hookspecs(hookspecs)
        try:
            manager.register(plugin, name=name)
            manager.check_pending()
        except (pluggy.PluginValidationError, ValueError) as exc:
            raise SortingError(f"sorting policy {name!r} is not a valid plugin: {exc}") from exc
        manager.register(_Defaults(), name="zoe-sorting-defaults")
        implemented = {caller.name for caller in manager.get_hookcallers(plugin) or ()}
        if "sort_key" not in implemented:
            raise SortingError(f"sorting policy {name!r} does not implement sort_key")
        self._hook = manager.hook
        dynamic = self._call("dynamic_order", {})
        if type(dynamic) is not bool:
            raise SortingError(
                f"sorting policy {name!r}: dynamic_order() returned {dynamic!r}, expected a bool"
            )
        self.dynamic: bool = dynamic

    def __repr__(self) -> str:
        return f"SortingPolicy({self.name!r})"

    def _call(self, hook: str, arguments: dict[str, Any]) -> object:
        try:
            return getattr(self._hook, hook)(**arguments)
        except Exception as exc:
            shown = ", ".join(f"{k}={v!r}" for k, v in arguments.items())
            raise SortingError(
                f"sorting policy {self.name!r}: {hook}({shown}) raised {type(exc).__name__}: {exc}"
            ) from exc

    def key(self, application: Application, now: float, remaining_work: float) -> float:
        """The checked sort key of `application` (smaller first)."""
        arguments = {"application": application, "now": now, "remaining_work": remaining_work}
        value = self._call("sort_key", arguments)
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
        ):
            raise SortingError(
                f"sorting policy {self.name!r}: sort_key(application={application.app_id!r}) "
                f"returned {value!r}, expected a finite number"
            )
        return float(value)


def _installed() -> dict[str, importlib.metadata.EntryPoint]:
    return {
        entry_point.name: entry_point
        for entry_point in importlib.metadata.entry_points(group=SORTING_ENTRY_POINT_GROUP)
    }


def sorting_names() -> list[str]:
    """The built-in sorting policies' names, then the installed ones'."""
    return list(BUILTIN_SORTING) + sorted(set(_installed()) - set(BUILTIN_SORTING))


def load_sorting(name: str) -> SortingPolicy:
    """The sorting policy `name`: a built-in one, or one installed under the entry-point group
    `firmament_py.zoe.sorting` (a module, an instance, or a class made with no arguments).
    SortingError lists the known names for an unknown one."""
    builtin = BUILTIN_SORTING.get(name)
    if builtin is not None:
        plugin = builtin[0](builtin[1]) if isinstance(builtin, tuple) else builtin()
        return SortingPolicy(plugin, name=name)
    entry_point = _installed().get(name)
    if entry_point is None:
        raise SortingError(f"unknown sorting policy {name!r}; known: {', '.join(sorting_names())}")
    try:
        loaded = entry_point.load()
        plugin = loaded() if isinstance(loaded, type) else loaded
    except Exception as exc:
        raise SortingError(
            f"sorting policy {name!r}: cannot load {entry_point.value!r}: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    return SortingPolicy(plugin, name=name)
