"""Reading a request frame's msgpack without trusting it: a map that repeats a key is refused
(msgpack would keep the last value, so one frame could read as two different requests), and
why a frame could not be read is always put in words (`why_undecodable`).

`protocol.decode_request` reads every request through `unpack_frame`, then checks the fields.
"""

from __future__ import annotations

from typing import Any

import msgpack

__all__ = ["unpack_frame", "why_undecodable"]


class _RepeatedKey(ValueError):
    """A map in a frame holds a key twice (raised while the frame is unpacked)."""


def _unique_keys(pairs: list[tuple[Any, Any]]) -> dict[Any, Any]:
    """msgpack's `object_pairs_hook`: the map as a dict, or `_RepeatedKey` if a key repeats.

    msgpack would keep the last of a repeated key, so a frame could show one request to a
    reader that keeps the first and act as another (a `status` whose second `type` made it a
    `task_removed`). A Python call per map: `unpack_frame` calls it only for frames it cannot
    clear faster."""
    mapping = dict(pairs)
    if len(mapping) != len(pairs):
        seen = set()
        for key, _ in pairs:
            if key in seen:
                raise _RepeatedKey(key)
            seen.add(key)
    return mapping


_MSGPACK_DEPTH = 1_024
"""How deep msgpack nests arrays and maps before it gives up (its StackError has no text)."""


def why_undecodable(error: Exception) -> str:
    """Why a frame could not be unpacked, for the reply: never an empty text."""
    if isinstance(error, _RepeatedKey):
        return f"a map in the message repeats the key {error.args[0]!r} (a key may appear once)"
    if isinstance(error, msgpack.StackError):
        return f"not a msgpack message: nested more than {_MSGPACK_DEPTH:,} levels deep"
    return f"not a msgpack message: {error or type(error).__name__}"


def unpack_frame(frame: bytes) -> Any:
    """The value in `frame`, refusing a map that repeats a key (`_RepeatedKey`).

    Checking every map in Python (`_unique_keys`) doubled the time a batch of plain
    submissions took to decode. Most frames are the canonical encoding of what they hold,
    which msgpack writes back byte for byte; a frame with a repeated key never is (its value
    holds one pair fewer than the frame). So a frame that packs back to itself is cleared at
    the C speed of packing it, and only another (a client library that encodes differently)
    is decoded again with the check."""
    message = msgpack.unpackb(frame, raw=False, strict_map_key=True)
    try:
        canonical = msgpack.packb(message, use_bin_type=True) == frame
    except (TypeError, ValueError, OverflowError):  # a value that does not pack back
        canonical = False
    if not canonical:
        message = msgpack.unpackb(
            frame, raw=False, strict_map_key=True, object_pairs_hook=_unique_keys
        )
    return message
