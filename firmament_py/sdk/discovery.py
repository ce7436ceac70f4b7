"""Finding installed policies: the entry-point group `firmament_py.policies`.

The entry point's name is the policy's name, and its object is a module, an instance, or a class
(instantiated with no arguments). Built-in policies register through the same group; only the
selected one is loaded, so a broken policy cannot stop another from loading.
"""

from __future__ import annotations

import importlib.metadata

from firmament_py.sdk.errors import POLICY_ENTRY_POINT_GROUP, PolicyError, UnknownPolicyError
from firmament_py.sdk.manager import PolicyManager

__all__ = ["available_policies", "load_policy", "unknown_policy"]


def _policy_entry_points() -> dict[str, list[importlib.metadata.EntryPoint]]:
    """The installed policies' entry points by name; a name may have several (a conflict)."""
    found: dict[str, list[importlib.metadata.EntryPoint]] = {}
    for entry_point in importlib.metadata.entry_points(group=POLICY_ENTRY_POINT_GROUP):
        same_name = found.setdefault(entry_point.name, [])
        # One distribution can be seen twice (say, an editable install on two path entries).
        if all(other.value != entry_point.value for other in same_name):
            same_name.append(entry_point)
    return found


def available_policies() -> list[str]:
    """The names of the installed policies, sorted."""
    return sorted(_policy_entry_points())


def unknown_policy(name: str) -> str | None:
    """Why `name` is no installed policy ("unknown policy ...; installed: ..."), None if it is
    one: what a command or the daemon says of a name it checks before anything loads it."""
    installed = available_policies()
    if name in installed:
        return None
    return f"unknown policy {name!r}; installed: {', '.join(installed) or 'none'}"


def load_policy(name: str) -> PolicyManager:
    """Load the installed policy `name` (and no other) and return its manager.

    Raises UnknownPolicyError (listing the known names) if no policy has that name, and
    PolicyError if two distributions claim the name, the policy fails to load, or its hook
    implementations do not match the hooks (`PolicyManager` says how).
    """
    entry_points = _policy_entry_points()
    candidates = entry_points.get(name)
    if not candidates:
        raise UnknownPolicyError(name, sorted(entry_points))
    if len(candidates) > 1:
        claims = ", ".join(repr(entry_point.value) for entry_point in candidates)
        raise PolicyError(name, f"several entry points claim this name: {claims}")
    entry_point = candidates[0]
    try:
        plugin = entry_point.load()
        if isinstance(plugin, type):
            plugin = plugin()
    except Exception as exc:
        raise PolicyError(
            name, f"cannot load {entry_point.value!r}: {type(exc).__name__}: {exc}"
        ) from exc
    return PolicyManager(plugin, name=name)
