"""Two-dimensional amounts of resources (cpu and ram) and the cluster they are drawn from.

Zoe's scheduler reasons about reservations, not usage, in two dimensions: CPU (millicores) and
RAM (bytes), both integers so that sums and comparisons are exact. `Demand` is one such amount
(a component's request, an application's total, what is free); `ClusterCapacity` is the set of
machines, whose sum is the pool the virtual assignment (Algorithms 1 and 2) divides, and whose
individual sizes decide whether a component can be placed at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = ["GIB", "MAX_MACHINES", "ClusterCapacity", "Demand"]

GIB = 1 << 30
"""Bytes in a GiB."""
MAX_MACHINES = 1_000_000
"""The most machines `ClusterCapacity.uniform` makes: past it a typo runs until memory runs out."""


@dataclass(frozen=True, slots=True)
class Demand:
    """An amount of CPU (millicores) and RAM (bytes). May be negative as a difference."""

    cpu_millicores: int = 0
    ram_bytes: int = 0

    def __add__(self, other: Demand) -> Demand:
        return Demand(self.cpu_millicores + other.cpu_millicores, self.ram_bytes + other.ram_bytes)

    def __sub__(self, other: Demand) -> Demand:
        return Demand(self.cpu_millicores - other.cpu_millicores, self.ram_bytes - other.ram_bytes)

    def __mul__(self, times: int) -> Demand:
        return Demand(self.cpu_millicores * times, self.ram_bytes * times)

    def fits_in(self, room: Demand) -> bool:
        """Whether this amount fits in `room`, dimension by dimension."""
        return self.cpu_millicores <= room.cpu_millicores and self.ram_bytes <= room.ram_bytes

    def reaches(self, limit: Demand) -> bool:
        """Whether this amount uses up `limit` in at least one dimension (saturates it)."""
        return self.cpu_millicores >= limit.cpu_millicores or self.ram_bytes >= limit.ram_bytes

    def fractions_of(self, total: Demand) -> tuple[float, float]:
        """The cpu and ram fractions of `total` this amount is."""
        return (
            self.cpu_millicores / total.cpu_millicores if total.cpu_millicores else 0.0,
            self.ram_bytes / total.ram_bytes if total.ram_bytes else 0.0,
        )

    def __str__(self) -> str:
        return f"{self.cpu_millicores / 1000:g} cores, {self.ram_bytes / GIB:g} GiB"


@dataclass(frozen=True)
class ClusterCapacity:
    """The machines of a cluster, each with its cpu and ram capacity."""

    machines: tuple[Demand, ...]
    total: Demand = field(init=False, repr=False, compare=False)
    """The sum of every machine's capacity: the pool the virtual assignment divides."""

    def __post_init__(self) -> None:
        if not self.machines:
            raise ValueError("a cluster needs at least one machine")
        for index, machine in enumerate(self.machines):
            if machine.cpu_millicores <= 0 or machine.ram_bytes <= 0:
                raise ValueError(f"machine {index} has no capacity: {machine}")
        total = Demand()
        for machine in self.machines:
            total = total + machine
        object.__setattr__(self, "total", total)

    @classmethod
    def uniform(cls, machines: int, cores: float, ram_gib: float) -> ClusterCapacity:
        """`machines` identical machines of `cores` cores and `ram_gib` GiB each."""
        if machines <= 0:
            raise ValueError(f"a cluster needs at least one machine, got {machines}")
        if machines > MAX_MACHINES:
            raise ValueError(f"at most {MAX_MACHINES:,} machines, got {machines:,}")
        one = Demand(round(cores * 1000), round(ram_gib * GIB))
        return cls(tuple(one for _ in range(machines)))

    def fits_some_machine(self, request: Demand) -> bool:
        """Whether one component with this request fits on at least one (empty) machine."""
        return any(request.fits_in(machine) for machine in self.machines)

    def describe(self) -> str:
        sizes: Sequence[Demand] = sorted(set(self.machines), key=str)
        shapes = ", ".join(str(size) for size in sizes[:3])
        return f"{len(self.machines)} machines ({shapes}{', ...' if len(sizes) > 3 else ''})"
