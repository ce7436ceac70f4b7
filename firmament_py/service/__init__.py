"""The scheduling daemon external cluster managers embed, and its client.

`SchedulingDaemon` serves the msgpack protocol (`protocol`, reference in docs/protocol.md) on
a ZeroMQ ROUTER socket, journals every accepted change before acknowledging it (`journal`,
`state`), and runs scheduling rounds in a process of its own (`round_worker`). `Client` is the
typed Python client; `keys` makes and loads CURVE keys.
"""

from firmament_py.service.client import (
    Client,
    DaemonTimeout,
    ListedMachine,
    ListedTask,
    MachineSpec,
    RequestFailed,
    RoundReply,
)
from firmament_py.service.daemon import DaemonConfig, DaemonError, SchedulingDaemon
from firmament_py.service.keys import CurveClientKeys, CurveServerKeys, KeyFileError
from firmament_py.service.protocol import PROTOCOL_VERSION, ProtocolError, Status

__all__ = [
    "PROTOCOL_VERSION",
    "Client",
    "CurveClientKeys",
    "CurveServerKeys",
    "DaemonConfig",
    "DaemonError",
    "DaemonTimeout",
    "KeyFileError",
    "ListedMachine",
    "ListedTask",
    "MachineSpec",
    "ProtocolError",
    "RequestFailed",
    "RoundReply",
    "SchedulingDaemon",
    "Status",
]
