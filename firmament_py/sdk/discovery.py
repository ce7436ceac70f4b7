"""Finding installed policies: the entry-point group `firmament_py.policies`.

The entry point's name is the policy's name, and its object is a module, an instance, or a class
(instantiated with no arguments). Built-in policies register through the same group; only the
selected one is loaded, so a broken policy cannot stop another from loading.
"""

from __future__ import annotations

from firmament_py.catalog import available_policies, policy_entry_points, unknown_policy
from firmament_py.sdk.errors import PolicyError, UnknownPolicyError
from firmament_py.sdk.manager import PolicyManager

__all__ = ["available_policies", "load_policy", "unknown_policy"]


def load_policy(name: str) -> PolicyManager:
    """Load the installed policy `name` (and no other) and return its manager.

    Raises UnknownPolicyError (listing the known names) if no policy has that name, and
    PolicyError if two distributions claim the name, the policy fails to load, or its hook
    implementations do not match the hooks (`PolicyManager` says how).
    """
    entry_points = policy_entry_points()
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
