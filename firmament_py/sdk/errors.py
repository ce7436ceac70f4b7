"""The errors a policy can cause: `PolicyError` (a hook failed, answered wrongly, or the policy
could not be loaded) and `UnknownPolicyError` (no installed policy has the name)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from firmament_py.catalog import POLICY_ENTRY_POINT_GROUP

__all__ = ["POLICY_ENTRY_POINT_GROUP", "PolicyError", "UnknownPolicyError"]


class PolicyError(Exception):
    """A policy could not be loaded, or one of its hooks failed or answered wrongly.

    `policy` is the selected policy's name, `hook` the hook concerned (None for loading
    errors), and the message names the call and the offending value.
    """

    def __init__(self, policy: str, problem: str, *, hook: str | None = None) -> None:
        super().__init__(f"policy {policy!r}: {problem}")
        self.policy = policy
        self.problem = problem
        self.hook = hook

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickle by constructor arguments (the default would pass only the message), so the
        # error survives a trip from a sweep's worker process.
        return (type(self), (self.policy, self.problem), {"hook": self.hook})


class UnknownPolicyError(PolicyError):
    """No installed policy has the requested name; `known` lists those that exist."""

    def __init__(self, policy: str, known: Sequence[str]) -> None:
        self.known = tuple(known)
        listing = ", ".join(self.known) if self.known else "none are installed"
        super().__init__(
            policy,
            f"no such policy in entry-point group {POLICY_ENTRY_POINT_GROUP!r} "
            f"(known policies: {listing})",
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.policy, self.known))
