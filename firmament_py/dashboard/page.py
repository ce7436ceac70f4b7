"""The dashboard's page: Bokeh models that draw a `Frame` (`DashboardPage`), live in a Bokeh
server's document or once, for a finished run, as a self-contained HTML file (`report_html`).

Views, each named so that a browser test (or a curious user's console) finds its data by name
(`Bokeh.documents[0].get_model_by_name(...)`):

- `summary`: the source, its journal record (or events), machines and slots, waiting and
  running tasks, the rounds the page has seen end, event and decision rates, placement latency
  p50/p99, wins per solver;
- `heatmap` over source `machines`: one cell per machine, a row per rack, racks grouped by pod,
  coloured by the share of its slots in use; hover names the machine and its task count;
- `queue_plot` over source `queue`: waiting and running tasks after each round;
- `latency_cdf_plot` over source `latency_cdf`: the CDF of the last placements' latencies;
- `latency_percentiles_plot` over source `latency_percentiles`: p50/p90/p99 of each round's
  placements over time;
- `rounds_plot` over source `rounds`: the last rounds' phases (graph update, solve, extraction,
  apply) stacked, the winning solver and its time beside the solver's answer in the hover.

The heat map is sent whole when the machines change and patched (only the machines whose
counts changed) otherwise, so a page at 12,500 machines costs a few kilobytes a second.
"""

from __future__ import annotations

import html

import numpy as np
from bokeh.embed import file_html
from bokeh.layouts import column, row
from bokeh.models import (
    CategoricalAxis,
    ColumnDataSource,
    FactorRange,
    HoverTool,
    LinearColorMapper,
)
from bokeh.models.annotations import ColorBar
from bokeh.models.widgets.markups import Div
from bokeh.palettes import Category10, Viridis256
from bokeh.plotting import figure
from bokeh.resources import INLINE

from firmament_py.dashboard.board import PHASES, Frame

__all__ = ["DashboardPage", "report_html"]

_PHASE_COLOURS = dict(zip(PHASES, Category10[4], strict=True))
_LABELLED_RACKS = 60  # more racks than this: the heat map's rows go unlabelled


class DashboardPage:
    """One view of a board: build it, then `update` it with frames."""

    def __init__(self, *, width: int = 640) -> None:
        self._layout_seen = -1
        self._slots = np.zeros(0, np.int64)
        self._running = np.zeros(0, np.int64)
        self.summary = Div(name="summary", width=2 * width)
        self.machines = ColumnDataSource(
            name="machines",
            data={k: [] for k in ("machine", "rack", "column", "slots", "running", "used")},
        )
        self.queue = ColumnDataSource(name="queue", data={"t": [], "waiting": [], "running": []})
        self.cdf = ColumnDataSource(name="latency_cdf", data={"latency_ms": [], "fraction": []})
        self.percentiles = ColumnDataSource(
            name="latency_percentiles", data={"t": [], "p50": [], "p90": [], "p99": []}
        )
        self.rounds = ColumnDataSource(
            name="rounds",
            data={
                k: []
                for k in ("round", *PHASES, "algorithm", "winner_ms", "answer_ms", "decisions")
            },
        )
        self.layout = column(
            self.summary,
            row(self._heatmap(width), self._queue_plot(width)),
            row(self._cdf_plot(width), self._percentile_plot(width)),
            self._rounds_plot(2 * width),
        )

    # ------------------------------------------------------------------ views

    def _heatmap(self, width: int) -> figure:
        self.rack_range = FactorRange(factors=[])
        plot = figure(
            name="heatmap",
            title="machines by rack and pod: share of slots in use",
            y_range=self.rack_range,
            width=width,
            height=420,
            tools="pan,wheel_zoom,reset",
            x_axis_label="machine in its rack",
        )
        colours = LinearColorMapper(palette=Viridis256, low=0.0, high=1.0)
        cells = plot.rect(
            x="column",
            y="rack",
            width=0.9,
            height=0.9,
            source=self.machines,
            fill_color={"field": "used", "transform": colours},
            line_color=None,
        )
        plot.add_tools(
            HoverTool(
                renderers=[cells],
                tooltips=[("machine", "@machine"), ("tasks", "@running of @slots slots")],
            )
        )
        plot.add_layout(ColorBar(color_mapper=colours, width=10), "right")
        plot.grid.visible = False
        self.heatmap = plot
        return plot

    def _queue_plot(self, width: int) -> figure:
        plot = figure(
            name="queue_plot",
            title="tasks after each round",
            width=width,
            height=420,
            x_axis_label="s since start",
            tools="pan,wheel_zoom,reset",
        )
        plot.line("t", "waiting", source=self.queue, color="firebrick", legend_label="waiting")
        plot.line("t", "running", source=self.queue, color="navy", legend_label="running")
        plot.legend.location = "top_left"
        return plot

    def _cdf_plot(self, width: int) -> figure:
        plot = figure(
            name="latency_cdf_plot",
            title="placement latency: CDF of the last placements",
            width=width,
            height=320,
            x_axis_label="ms from the wait's start to the placement",
            y_axis_label="fraction of placements",
            tools="pan,wheel_zoom,reset,hover",
            tooltips=[("latency", "@latency_ms ms"), ("fraction", "@fraction")],
        )
        plot.step("latency_ms", "fraction", source=self.cdf, mode="after", line_width=2)
        return plot

    def _percentile_plot(self, width: int) -> figure:
        plot = figure(
            name="latency_percentiles_plot",
            title="placement latency of each round's placements",
            width=width,
            height=320,
            x_axis_label="s since start",
            y_axis_label="ms",
            tools="pan,wheel_zoom,reset",
        )
        for name, colour in (("p50", "navy"), ("p90", "darkorange"), ("p99", "firebrick")):
            plot.line("t", name, source=self.percentiles, color=colour, legend_label=name)
            plot.scatter("t", name, source=self.percentiles, color=colour, size=3)
        plot.legend.location = "top_left"
        return plot

    def _rounds_plot(self, width: int) -> figure:
        plot = figure(
            name="rounds_plot",
            title="the last rounds: where their time went",
            width=width,
            height=300,
            x_axis_label="round",
            y_axis_label="ms",
            tools="pan,wheel_zoom,reset",
        )
        bars = plot.vbar_stack(
            list(PHASES),
            x="round",
            width=0.8,
            source=self.rounds,
            color=[_PHASE_COLOURS[p] for p in PHASES],
            legend_label=list(PHASES),
        )
        plot.add_tools(
            HoverTool(
                renderers=list(bars),
                tooltips=[
                    ("round", "@round (@decisions decisions)"),
                    ("answered by", "@algorithm in @winner_ms{0.0} ms"),
                    ("solver answered after", "@answer_ms{0.0} ms"),
                    (
                        "update / solve / extract / apply",
                        "@update{0.0} / @solve{0.0} / @extract{0.0} / @apply{0.0} ms",
                    ),
                ],
            )
        )
        plot.legend.location = "top_left"
        plot.legend.orientation = "horizontal"
        return plot

    # ------------------------------------------------------------------ updates

    def update(self, frame: Frame) -> None:
        """Show `frame` (see the module for what is sent whole and what is patched)."""
        self.summary.text = summary_html(frame)
        self._update_machines(frame)
        self.queue.data = {
            "t": frame.queue_time_s,
            "waiting": frame.queue_waiting,
            "running": frame.queue_running,
        }
        self.cdf.data = {"latency_ms": frame.latency_ms, "fraction": frame.latency_fraction}
        self.percentiles.data = {"t": frame.percentile_time_s, **frame.percentiles_ms}
        rounds = frame.recent_rounds
        self.rounds.data = {
            "round": [r.number for r in rounds],
            **{p: [r.phases.get(p, 0.0) for r in rounds] for p in PHASES},
            "algorithm": [r.algorithm for r in rounds],
            "winner_ms": [r.algorithm_ms for r in rounds],
            "answer_ms": [r.answer_ms for r in rounds],
            "decisions": [r.decisions for r in rounds],
        }

    def _update_machines(self, frame: Frame) -> None:
        slots, running = frame.machine_slots, frame.machine_running
        used = running / np.maximum(slots, 1)
        if frame.layout != self._layout_seen:
            self._layout_seen = frame.layout
            racks = list(dict.fromkeys(frame.racks))
            self.rack_range.factors = racks
            labelled = len(racks) <= _LABELLED_RACKS
            for axis in self.heatmap.yaxis:
                if isinstance(axis, CategoricalAxis):
                    axis.major_label_text_font_size = "8pt" if labelled else "0pt"
                    axis.group_text_font_size = "9pt" if labelled else "0pt"
                    axis.major_tick_line_color = "black" if labelled else None
                    axis.separator_line_color = "lightgrey" if labelled else None
            self.machines.data = {
                "machine": frame.machine_ids,
                "rack": frame.racks,
                "column": frame.columns,
                "slots": slots,
                "running": running,
                "used": used,
            }
        else:
            changed = np.flatnonzero((slots != self._slots) | (running != self._running))
            if len(changed):
                at = changed.tolist()
                self.machines.patch(
                    {
                        "slots": list(zip(at, slots[changed].tolist(), strict=True)),
                        "running": list(zip(at, running[changed].tolist(), strict=True)),
                        "used": list(zip(at, used[changed].tolist(), strict=True)),
                    }
                )
        self._slots, self._running = slots, running


def summary_html(frame: Frame) -> str:
    """The page's header: the numbers a user reads first (see the module)."""

    def ms(value: float | None) -> str:
        return "-" if value is None else f"{value:,.1f} ms"

    wins = ", ".join(f"{name} {count:,}" for name, count in sorted(frame.wins.items())) or "-"
    cells = [
        (frame.seq_label, f"{frame.seq:,}"),
        ("machines", f"{frame.machines:,} ({frame.slots:,} slots)"),
        ("waiting", f"{frame.waiting:,}"),
        ("running", f"{frame.running:,}"),
        ("rounds seen", f"{frame.rounds:,}"),
        ("events/s", f"{frame.events_per_s:,.1f}"),
        ("decisions/s", f"{frame.decisions_per_s:,.1f}"),
        ("latency p50 / p99", f"{ms(frame.latency_p50_ms)} / {ms(frame.latency_p99_ms)}"),
        ("rounds answered by", wins),
    ]
    body = "".join(
        f'<td style="padding:0 14px 0 0"><div style="color:#666;font-size:11px">'
        f'{html.escape(label)}</div><div style="font-size:17px" data-field="{html.escape(label)}">'
        f"{html.escape(value)}</div></td>"
        for label, value in cells
    )
    return (
        f'<div style="font-size:15px;font-weight:bold">firmament-py: {html.escape(frame.title)}'
        f"</div><table><tr>{body}</tr></table>"
    )


def report_html(frame: Frame, *, title: str = "firmament-py report") -> str:
    """A self-contained page of `frame` (Bokeh's JavaScript inline: it opens offline)."""
    page = DashboardPage()
    page.update(frame)
    return file_html(page.layout, INLINE, title)
