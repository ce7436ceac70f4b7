"""What the daemon remembers an applied request id with: a digest of the request, so that a
retry (the same request under the same id) is told apart from a different request under a used
id (`ServiceState`'s request-id memory, which snapshots keep and replay rebuilds). Every process
computes a digest alike, from the request's type and body as the protocol checked them or a
record holds them."""

from __future__ import annotations

import json
import zlib
from collections.abc import Mapping
from typing import Any

__all__ = ["SCHEDULE_DIGEST", "digest_of", "register_digest"]


def digest_of(kind: str, body: Mapping[str, Any]) -> int:
    """A digest of a request that every process computes alike (snapshots keep it), from its
    type and body as the protocol checked them or a record holds them. For a task submitted
    with nothing but its job, or a task removed (`protocol.is_plain`: most of the traffic), it
    is the task id, negated for a removal: cheap (`ServiceState._apply` inlines it), and enough
    to tell another task's request apart, though not the same task under another job. Any
    other request's is a CRC of its canonical JSON, plus 2^64 to keep it apart from those."""
    task_id = body.get("task_id")
    if type(task_id) is int and len(body) <= 2:
        if kind == "task_submitted" and len(body) == 2 and "job_id" in body:
            return task_id
        if kind == "task_removed" and len(body) == 1:
            return -1 - task_id
    text = json.dumps([kind, body], sort_keys=True, separators=(",", ":"), default=_json_value)
    return (1 << 64) + zlib.crc32(text.encode())


def _json_value(value: object) -> object:
    """What JSON has no type for, as what a journal round trip makes of it (msgpack writes
    every mapping as a map, and bytes stay bytes): the same digest before and after."""
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, bytes | bytearray):
        return {"bytes": bytes(value).hex()}
    raise TypeError(f"a request body cannot hold {type(value).__name__} values")


SCHEDULE_DIGEST = digest_of("schedule", {})
"""The digest a `schedule` request's id is remembered with."""


def register_digest(manager: str) -> int:
    """The digest a `register` request's id is remembered with."""
    return digest_of("register", {"manager": manager})
