"""NoMora's policy settings: the typed parameters of `firmament_py.nomora.policy`, which the
simulation and the experiments also name."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from firmament_py.sdk import MAX_COST

__all__ = ["APPLICATION_LABEL", "BetaMode", "NomoraSettings"]

APPLICATION_LABEL = "nomora.app"
"""Task label naming the job's application (its performance function)."""


class BetaMode(enum.Enum):
    """What a running task's cost to stay is reduced by, with preemption."""

    RUN_TIME = "run-time"
    """beta = the time the task has already run (Quincy's and the paper's default)."""
    ZERO = "zero"
    """beta = 0: the paper's variant that migrates whenever a cheaper machine is free."""


def _non_negative_int(name: str, value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"{name} must be an int >= 0, got {value!r}")
    return value


@dataclass(frozen=True)
class NomoraSettings:
    """The policy's parameters, with the papers' defaults where they give one.

    `machine_threshold` (p_m) and `rack_threshold` (p_r): the highest cost of a machine or rack
    arc (100 is performance 1). `wait_cost_per_second` (omega) and `unscheduled_cost` (gamma):
    a = omega x whole seconds waited + gamma; the papers give gamma = 1001 but no omega.
    `preemption` and `beta`: see the policy's docstring; `run_credit_per_second` scales beta.
    `default_application`: the function of jobs without the `nomora.app` label (None:
    latency-insensitive). `paper_arcs`: the papers' form of two arcs this port changes by
    default (see the policy's docstring): the root's single arc to the cluster aggregator at
    cost 0 (default: a random rack at 0, X at 1), and staying costs d - beta (default
    d - beta - 1). `stay_tie_break`: with `paper_arcs`, staying still costs d - beta - 1 (the
    papers' root arc with this port's tie-break, which keeps a task on its machine when another
    costs the same); it is refused without `paper_arcs`, where staying wins ties already."""

    machine_threshold: int = 105
    rack_threshold: int = 110
    wait_cost_per_second: int = 1
    unscheduled_cost: int = 1001
    preemption: bool = False
    beta: BetaMode = BetaMode.RUN_TIME
    run_credit_per_second: int = 1
    default_application: str | None = None
    paper_arcs: bool = False
    stay_tie_break: bool = False

    def __post_init__(self) -> None:
        for name in (
            "machine_threshold",
            "rack_threshold",
            "wait_cost_per_second",
            "unscheduled_cost",
            "run_credit_per_second",
        ):
            _non_negative_int(name, getattr(self, name))
        if self.unscheduled_cost > MAX_COST:
            raise ValueError(f"unscheduled_cost must be at most {MAX_COST}")
        for flag in ("preemption", "paper_arcs", "stay_tie_break"):
            if not isinstance(getattr(self, flag), bool):
                raise ValueError(f"{flag} must be a bool, got {getattr(self, flag)!r}")
        if self.stay_tie_break and not self.paper_arcs:
            raise ValueError(
                "stay_tie_break needs paper_arcs=True (without it staying already wins ties)"
            )
        if not isinstance(self.beta, BetaMode):
            raise ValueError(f"beta must be a BetaMode, got {self.beta!r}")

    def describe(self) -> str:
        text = f"p_m {self.machine_threshold}, p_r {self.rack_threshold}"
        if self.preemption:
            text += ", preemption" + (", beta 0" if self.beta is BetaMode.ZERO else "")
        if self.wait_cost_per_second != 1 or self.run_credit_per_second != 1:
            text += f", omega {self.wait_cost_per_second}/s, beta {self.run_credit_per_second}/s"
        if self.paper_arcs:
            text += ", the papers' root arc" + (
                ", staying wins ties" if self.stay_tie_break else " and stay cost"
            )
        return text
