"""firmament-binpack: a bin-packing scheduling policy for firmament-py.

Installed, it registers as the policy `binpack` (entry-point group `firmament_py.policies`), so
`firmament_py.sdk.load_policy("binpack")` and `Scheduler(policy="binpack")` select it. Without
installing it, pass an instance: `Scheduler(policy=BinPackPolicy())`. See `policy` for what it
does and guarantees.
"""

from __future__ import annotations

from firmament_binpack.policy import PACK_CLASS, BinPackPolicy, pack_class, packing_order

__all__ = ["PACK_CLASS", "BinPackPolicy", "pack_class", "packing_order"]
