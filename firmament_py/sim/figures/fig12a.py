"""Firmament's Figure 12a as an experiment (OSDI '16, section 7; the framework is
`firmament_py.sim.experiment`).

fig12a (arc prioritisation): contended graphs from `graphgen`, half of the slots busy and then
a burst of new tasks, Quincy-shaped (the new tasks contend for the machines holding their
data) and load-spreading (they all want the least-loaded machines); solved from scratch by
relaxation with and without arc prioritisation, with our default tree limit and without it
(pure relaxation).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from firmament_py.flow.graphgen import ClusterGraph, ClusterSpec
from firmament_py.sim.experiment import (
    Claim,
    Experiment,
    Measurement,
    Tracker,
    medians_of,
    plot_medians,
    save_figure,
)
from firmament_py.sim.figures.series import (
    check_costs,
    count_seeds,
    format_span,
    format_times,
    ratio,
    warm_up_series,
)
from firmament_py.sim.plots import legend_below, log_time_axis, ticks_at
from firmament_py.sim.verdicts import share
from firmament_py.solvers.registry import make_solver

_FIG12_VARIANTS: tuple[tuple[str, Mapping[str, Any]], ...] = (
    ("AP", {"arc_prioritisation": True}),
    ("no AP", {"arc_prioritisation": False}),
    ("AP, no tree limit", {"arc_prioritisation": True, "tree_limit": 0}),
    ("no AP, no tree limit", {"arc_prioritisation": False, "tree_limit": 0}),
)
"""Relaxation with and without arc prioritisation, with our default tree limit (big trees go to
blocking-flow sweeps) and without it (pure relaxation, as Firmament's)."""

_FIG12_SHAPES: tuple[str, ...] = ("quincy", "load-spreading")


@dataclass(frozen=True)
class Fig12Params:
    """Graphs of `machines` with `running` of the slots busy and a burst of new tasks, that
    fraction of the slots' worth: Quincy-shaped for each of `quincy_fractions` (the new tasks
    contend for the machines and racks holding their data; above 1 - `running` the cluster is
    oversubscribed) and load-spreading for each of `spreading_fractions` (they all want the
    least-loaded machines). Each graph is solved from scratch by every relaxation variant."""

    machines: int
    quincy_fractions: tuple[float, ...]
    spreading_fractions: tuple[float, ...]
    seeds: tuple[int, ...]
    running: float = 0.5
    slots_per_machine: int = 24

    def levels(self) -> list[tuple[str, float]]:
        return [("quincy", f) for f in self.quincy_fractions] + [
            ("load-spreading", f) for f in self.spreading_fractions
        ]


def _fig12_describe(p: Fig12Params) -> str:
    return (
        f"{p.machines:,} machines x {p.slots_per_machine} slots, {p.running:.0%} running + "
        f"new tasks: Quincy {format_span([100 * f for f in p.quincy_fractions])}%, load-spreading "
        f"{format_span([100 * f for f in p.spreading_fractions])}% of slots, {count_seeds(p.seeds)}"
    )


def _fig12_steps(p: Fig12Params) -> int:
    return len(p.levels()) * len(p.seeds)


def _fig12_measure(p: Fig12Params, tracker: Tracker) -> list[Measurement]:
    warm_up_series(["relaxation"])
    out: list[Measurement] = []
    slots = p.machines * p.slots_per_machine
    for shape, fraction in p.levels():
        for seed in p.seeds:
            cluster = ClusterGraph(
                ClusterSpec(
                    machines=p.machines,
                    slots_per_machine=p.slots_per_machine,
                    machines_per_rack=40,
                    running=p.running,
                    waiting=max(1, round(fraction * slots)),
                    shape="quincy" if shape == "quincy" else "load-spreading",
                    seed=seed,
                )
            )
            snapshot = cluster.graph.snapshot()
            x = round(100 * fraction, 3)
            costs: dict[str, int] = {}
            shift = seed % len(_FIG12_VARIANTS)  # vary the order: the VM's speed drifts
            for variant, options in _FIG12_VARIANTS[shift:] + _FIG12_VARIANTS[:shift]:
                solver = make_solver("relaxation", **options)
                try:
                    solver.load(snapshot)
                    result = solver.solve()
                finally:
                    solver.close()
                series = f"{shape}: {variant}"
                costs[variant] = result.cost
                out.append(Measurement(series, x, seed, "algorithm_s", result.wall_time))
                for stat in ("price_rises", "deferred"):
                    if stat in result.stats:
                        out.append(Measurement(series, x, seed, stat, result.stats[stat]))
            check_costs(costs, f"{shape}, {x}% new tasks, seed {seed}")
            tracker.step(f"{shape}, {x:g}% new tasks, seed {seed}")
    return out


def _change(with_ap: float | None, without: float | None) -> str:
    if with_ap is None or without is None or without <= 0:
        return "-"
    change = 100 * (with_ap / without - 1)
    return "0%" if abs(change) < 0.5 else f"{change:+.0f}%"


_FIG12_CUT = 0.2
"""The runtime cut a verdict asks of arc prioritisation: under half the paper's 45%, so that a
cut in the paper's direction of that size counts as reproduced at this scale."""


def _fig12_claims(p: Fig12Params, measurements: list[Measurement]) -> list[Claim]:
    medians = medians_of(measurements, "algorithm_s")
    rises = medians_of(measurements, "price_rises")

    def changes(shape: str, fractions: Sequence[float], suffix: str = "") -> str:
        return ", ".join(
            f"{100 * f:g}%: "
            + _change(
                medians.get((f"{shape}: AP{suffix}", round(100 * f, 3))),
                medians.get((f"{shape}: no AP{suffix}", round(100 * f, 3))),
            )
            for f in fractions
        )

    def same_path(shape: str, fractions: Sequence[float]) -> bool:
        """Whether AP left the price rises unchanged at every one of `fractions` (measured)."""
        pairs = [
            (
                rises.get((f"{shape}: AP", round(100 * f, 3))),
                rises.get((f"{shape}: no AP", round(100 * f, 3))),
            )
            for f in fractions
        ]
        return bool(pairs) and all(a is not None and a == b for a, b in pairs)

    def limit(shape: str, fractions: Sequence[float]) -> str:
        return ", ".join(
            f"{100 * f:g}%: "
            + format_times(
                ratio(
                    medians.get((f"{shape}: AP", round(100 * f, 3))),
                    medians.get((f"{shape}: AP, no tree limit", round(100 * f, 3))),
                )
            )
            for f in fractions
        )

    def cut(shape: str, fractions: Sequence[float], suffix: str = "") -> tuple[int, int]:
        """At how many of `fractions` AP cut the runtime by `_FIG12_CUT` or more, of those
        measured."""
        return _cuts(medians, shape, fractions, f"AP{suffix}", f"no AP{suffix}", _FIG12_CUT)

    quincy, spreading = p.quincy_fractions, p.spreading_fractions
    free = 1 - p.running
    oversubscribed = [f for f in quincy if _oversubscribed(p, f)]
    feasible = [f for f in quincy if f not in oversubscribed]
    criterion = f"AP cuts pure relaxation's runtime by {_FIG12_CUT:.0%} or more at every point"
    return [
        Claim(
            "Arc prioritisation cuts relaxation's runtime on contended graphs (Quincy)",
            "-45% runtime",
            f"runtime change with AP, by new tasks (% of slots, {free:.0%} free): "
            f"{changes('quincy', quincy)}; without the tree limit: "
            f"{changes('quincy', quincy, ', no tree limit')}",
            "The paper's graph was contended but feasible; past the free slots ours are "
            "oversubscribed (some tasks cannot be placed), a case the paper does not describe, "
            "so only the points within them are judged",
            share(
                *cut("quincy", feasible, ", no tree limit"),
                f"{criterion} within the free slots",
                "feasible point",
            ),
        ),
        Claim(
            "Arc prioritisation on load-spreading graphs",
            "-45% runtime (contended graph)",
            f"runtime change with AP: {changes('load-spreading', spreading)}"
            + (
                "; identical price rises with and without"
                if same_path("load-spreading", spreading)
                else ""
            ),
            "Our prioritisation moves machine nodes to the front of the scan"
            + (
                "; every node the cluster aggregator reaches is a machine, so the order cannot "
                "change (the price rises are identical)"
                if same_path("load-spreading", spreading)
                else ""
            ),
            share(*cut("load-spreading", spreading, ", no tree limit"), criterion, "point"),
        ),
        Claim(
            "(ours) Relaxation's tree limit on contended graphs",
            "-",
            f"default / no tree limit: load-spreading {limit('load-spreading', spreading)}; "
            f"Quincy {limit('quincy', quincy)}",
            "The limit (trees over 2,000 nodes go to blocking-flow sweeps) is ours, tuned on "
            "oversubscribed Quincy graphs (docs/benchmarks.md); the paper's relaxation has none",
            share(
                *_cuts(
                    medians, "quincy", oversubscribed, "AP", "AP, no tree limit", _TREE_LIMIT_CUT
                ),
                f"the tree limit cuts relaxation's runtime (with AP) by {_TREE_LIMIT_CUT:.0%} or "
                "more at every oversubscribed Quincy point (new tasks beyond the free slots), "
                "the graphs it was tuned on",
                "oversubscribed Quincy point",
            ),
        ),
    ]


_TREE_LIMIT_CUT = _FIG12_CUT
"""The runtime cut our claim asks of the tree limit where it was tuned (oversubscribed Quincy
graphs): the bar arc prioritisation's verdicts set, a clear cut rather than two timings'
drift."""


def _oversubscribed(p: Fig12Params, fraction: float) -> bool:
    """Whether new tasks of `fraction` of the slots' worth are more than the free slots hold,
    counted in slots as the graphs are built: 10% with 90% running just fills them, though
    0.1 > 1 - 0.9 in floating point."""
    slots = p.machines * p.slots_per_machine
    return max(1, round(fraction * slots)) > slots - round(p.running * slots)


def _cuts(
    medians: Mapping[tuple[str, float], float],
    shape: str,
    fractions: Sequence[float],
    variant: str,
    baseline: str,
    by: float,
) -> tuple[int, int]:
    """At how many of `fractions` the `shape` graphs' `variant` cut `baseline`'s median runtime
    by the share `by` or more, and at how many both were measured."""
    pairs = [
        (
            medians.get((f"{shape}: {variant}", round(100 * f, 3))),
            medians.get((f"{shape}: {baseline}", round(100 * f, 3))),
        )
        for f in fractions
    ]
    measured = [(a, b) for a, b in pairs if a is not None and b is not None and b > 0]
    return sum(a <= (1 - by) * b for a, b in measured), len(measured)


def _fig12_plot(
    p: Fig12Params, measurements: list[Measurement], out: Path, name: str
) -> list[Path]:
    from matplotlib.figure import Figure

    figure = Figure(figsize=(9.6, 4.2), dpi=100, layout="constrained")
    panels = figure.subplots(1, 2)
    figure.suptitle(
        "Figure 12a: arc prioritisation (AP) in relaxation on contended graphs\n"
        f"{p.machines:,} machines, {p.running:.0%} of slots running + new tasks, solved from "
        f"scratch (median of {count_seeds(p.seeds)})",
        fontsize="medium",
    )
    colours = ("C0", "C9", "C3", "C1")
    for axes, shape in zip(panels, _FIG12_SHAPES, strict=True):
        series = [f"{shape}: {variant}" for variant, _ in _FIG12_VARIANTS]
        plot_medians(
            axes,
            measurements,
            "algorithm_s",
            series,
            labels={s: s.partition(": ")[2] for s in series},
            colours=dict(zip(series, colours, strict=True)),
        )
        axes.set_title(f"{shape} graphs", fontsize="medium")
        axes.set_xlabel("new tasks [% of slots]")
        fractions = p.quincy_fractions if shape == "quincy" else p.spreading_fractions
        ticks_at(axes.xaxis, [round(100 * f, 3) for f in fractions])
        runtimes = [
            m.value for m in measurements if m.metric == "algorithm_s" and m.series in series
        ]
        log_time_axis(axes, "y", runtimes, "relaxation runtime")
        axes.grid(True, alpha=0.3)
    legend_below(figure, panels[0])
    return [save_figure(figure, out / f"{name}.png")]


FIG12A = Experiment[Fig12Params](
    name="fig12a",
    title="Arc prioritisation in relaxation on contended graphs",
    x_label="new tasks %",
    summary_metrics=("algorithm_s",),
    scales={
        "test": Fig12Params(
            machines=20, quincy_fractions=(0.2, 0.5), spreading_fractions=(0.3,), seeds=(0,)
        ),
        "quick": Fig12Params(
            machines=800,
            quincy_fractions=(0.1, 0.25, 0.4, 0.5, 0.55),
            spreading_fractions=(0.1, 0.25, 0.5),
            seeds=(0, 1, 2),
        ),
        "full": Fig12Params(
            machines=2500,
            quincy_fractions=(0.1, 0.25, 0.4, 0.45, 0.5, 0.55),
            spreading_fractions=(0.1, 0.25, 0.5),
            seeds=(0, 1, 2),
        ),
    },
    describe=_fig12_describe,
    steps=_fig12_steps,
    measure=_fig12_measure,
    claims=_fig12_claims,
    plot=_fig12_plot,
)
