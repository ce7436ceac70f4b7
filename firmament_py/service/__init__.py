"""The scheduling daemon external cluster managers embed, and its client.

`SchedulingDaemon` serves the msgpack protocol (`protocol`, reference in docs/protocol.md) on
a ZeroMQ ROUTER socket, journals every accepted change before acknowledging it (`journal`,
`state`), and runs scheduling rounds in a process of its own (`round_worker`); its change feed
(`changes`) and listings (`listing`) let a manager follow it. `Client` is the typed Python
client, `ClusterView` a manager's mirror of the daemon's tasks and machines (`view`); `keys`
makes and loads CURVE keys.
"""

from firmament_py.service.client import (
    ChangePage,
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
from firmament_py.service.view import ClusterView, ViewMachine, ViewTask

__all__ = [
    "PROTOCOL_VERSION",
    "ChangePage",
    "Client",
    "ClusterView",
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
    "ViewMachine",
    "ViewTask",
]
