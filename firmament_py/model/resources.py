"""Resource vectors: what a task requests, what a machine offers, and what is measured.

One immutable type serves requests, capacities, reservations, measured usage and the
differences between them. Every dimension is an integer in a fixed unit, so vectors add and
compare exactly and fit the int64 arrays and costs of the flow network:

=====================  =====================================================================
cpu_millicores         thousandths of a CPU core (Kubernetes' "m"; 1500 = one and a half cores)
ram_bytes              bytes of memory
disk_bytes             bytes of local disk
net_rx_bytes_per_s     network receive bandwidth, bytes per second
net_tx_bytes_per_s     network transmit bandwidth, bytes per second
=====================  =====================================================================

These are the dimensions the planned policies need (cpu and ram fit, network bandwidth). A
vector may hold negative values, as a difference (a machine's free resources minus a request);
requests and capacities are checked to be non-negative where they enter the model. Every value,
and every sum or difference, must fit in int64: arithmetic that would leave that range raises.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import ClassVar

from firmament_py.model.ids import INT64_MAX, INT64_MIN, check_int64


@dataclass(frozen=True, slots=True)
class Resources:
    """An amount of each resource dimension (units in the module docstring)."""

    cpu_millicores: int = 0
    ram_bytes: int = 0
    disk_bytes: int = 0
    net_rx_bytes_per_s: int = 0
    net_tx_bytes_per_s: int = 0

    DIMENSIONS: ClassVar[tuple[str, ...]] = (
        "cpu_millicores",
        "ram_bytes",
        "disk_bytes",
        "net_rx_bytes_per_s",
        "net_tx_bytes_per_s",
    )

    def __post_init__(self) -> None:
        for name in self.DIMENSIONS:
            check_int64(name, getattr(self, name))

    def __reduce__(self) -> tuple[Callable[..., Resources], tuple[int, ...]]:
        """A zero vector unpickles as `NO_RESOURCES` (a slot-only request is the shared zero
        again, which placements skip the arithmetic for, and a snapshot holding a hundred
        thousand of them builds none); any other as its values."""
        values = self.as_tuple()
        if not any(values):
            return (_no_resources, ())
        return (Resources, values)

    def as_tuple(self) -> tuple[int, int, int, int, int]:
        """The values in the order of `DIMENSIONS`."""
        return (
            self.cpu_millicores,
            self.ram_bytes,
            self.disk_bytes,
            self.net_rx_bytes_per_s,
            self.net_tx_bytes_per_s,
        )

    def __add__(self, other: Resources) -> Resources:
        if not isinstance(other, Resources):
            return NotImplemented
        return _from_checked_sum(
            self.cpu_millicores + other.cpu_millicores,
            self.ram_bytes + other.ram_bytes,
            self.disk_bytes + other.disk_bytes,
            self.net_rx_bytes_per_s + other.net_rx_bytes_per_s,
            self.net_tx_bytes_per_s + other.net_tx_bytes_per_s,
        )

    def __sub__(self, other: Resources) -> Resources:
        if not isinstance(other, Resources):
            return NotImplemented
        return _from_checked_sum(
            self.cpu_millicores - other.cpu_millicores,
            self.ram_bytes - other.ram_bytes,
            self.disk_bytes - other.disk_bytes,
            self.net_rx_bytes_per_s - other.net_rx_bytes_per_s,
            self.net_tx_bytes_per_s - other.net_tx_bytes_per_s,
        )

    def fits_within(self, available: Resources) -> bool:
        """True if no dimension of this vector exceeds the same dimension of `available`."""
        return (  # spelled out: every placement asks, and a generator costs ten times as much
            self.cpu_millicores <= available.cpu_millicores
            and self.ram_bytes <= available.ram_bytes
            and self.disk_bytes <= available.disk_bytes
            and self.net_rx_bytes_per_s <= available.net_rx_bytes_per_s
            and self.net_tx_bytes_per_s <= available.net_tx_bytes_per_s
        )

    def fits_beside(self, reserved: Resources, capacity: Resources) -> bool:
        """True if this vector fits in `capacity` next to `reserved`: `reserved + self` within
        `capacity` in every dimension (what placing a task asks, without making the sum)."""
        return (
            self.cpu_millicores + reserved.cpu_millicores <= capacity.cpu_millicores
            and self.ram_bytes + reserved.ram_bytes <= capacity.ram_bytes
            and self.disk_bytes + reserved.disk_bytes <= capacity.disk_bytes
            and self.net_rx_bytes_per_s + reserved.net_rx_bytes_per_s <= capacity.net_rx_bytes_per_s
            and self.net_tx_bytes_per_s + reserved.net_tx_bytes_per_s <= capacity.net_tx_bytes_per_s
        )

    def exceeded_dimensions(self, available: Resources) -> tuple[str, ...]:
        """The names of the dimensions in which this vector exceeds `available` (for errors)."""
        return tuple(
            name
            for name, a, b in zip(
                self.DIMENSIONS, self.as_tuple(), available.as_tuple(), strict=True
            )
            if a > b
        )

    def is_non_negative(self) -> bool:
        """True if every dimension is zero or more."""
        return all(value >= 0 for value in self.as_tuple())

    def require_non_negative(self, what: str) -> Resources:
        """Return self, or raise ValueError naming `what` and the negative dimensions."""
        if min(self.as_tuple()) >= 0:
            return self  # every event with a vector checks it: keep the usual case cheap
        negative = [
            f"{name}={value}"
            for name, value in zip(self.DIMENSIONS, self.as_tuple(), strict=True)
            if value < 0
        ]
        if negative:
            raise ValueError(f"{what} must not be negative: {', '.join(negative)}")
        return self

    def describe_excess(self, available: Resources) -> str:
        """`"cpu_millicores 500 > 200, ..."` for each dimension exceeding `available`."""
        return ", ".join(
            f"{name} {getattr(self, name)} > {getattr(available, name)}"
            for name in self.exceeded_dimensions(available)
        )


def total_of(vectors: Iterable[Resources]) -> Resources:
    """The sum of many vectors, made once (adding them one by one makes a vector per step).
    Raises ValueError if the sum leaves the int64 range."""
    cpu = ram = disk = rx = tx = 0
    for vector in vectors:
        cpu += vector.cpu_millicores
        ram += vector.ram_bytes
        disk += vector.disk_bytes
        rx += vector.net_rx_bytes_per_s
        tx += vector.net_tx_bytes_per_s
    return _from_checked_sum(cpu, ram, disk, rx, tx)


def _from_checked_sum(cpu: int, ram: int, disk: int, rx: int, tx: int) -> Resources:
    """The vector of a sum or difference of two valid vectors: every value is an int already,
    so only the int64 range needs checking. Statistics passes add up thousands of vectors per
    round, and the full constructor's checks cost four times as much."""
    for value in (cpu, ram, disk, rx, tx):
        if not INT64_MIN <= value <= INT64_MAX:
            raise ValueError(f"resource arithmetic left the int64 range: {value}")
    result = object.__new__(Resources)
    object.__setattr__(result, "cpu_millicores", cpu)
    object.__setattr__(result, "ram_bytes", ram)
    object.__setattr__(result, "disk_bytes", disk)
    object.__setattr__(result, "net_rx_bytes_per_s", rx)
    object.__setattr__(result, "net_tx_bytes_per_s", tx)
    return result


NO_RESOURCES = Resources()
"""The zero vector: the request of a task that only needs a slot."""


def _no_resources() -> Resources:
    """`NO_RESOURCES`, as an unpickled zero vector is made."""
    return NO_RESOURCES
