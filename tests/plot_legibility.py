"""What makes a plot hard to read, found on the drawn figure: shared by the tests of the
simulation report's plots (tests/test_report_plots.py) and of the experiments' plots
(tests/test_experiments.py).

`problems(figure)` draws the figure (as saving it does) and lists, in words:

* text outside the figure: a clipped title, label, tick label or legend;
* tick labels of one axis on top of each other;
* a tick label in scientific notation (8x10^0, 3x10^-4, 1e-05) rather than a plain number;
* a legend over plotted data (a line, a marker, a bar).

`recording()` collects every figure saved while it is active, so that a test can examine the
figures a function wrote as PNG files.
"""

from __future__ import annotations

import contextlib
import itertools
import re
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from matplotlib.axes import Axes
from matplotlib.axis import Axis
from matplotlib.collections import LineCollection, PathCollection
from matplotlib.figure import Figure
from matplotlib.legend import Legend
from matplotlib.lines import Line2D
from matplotlib.text import Text
from matplotlib.transforms import Bbox

_SLACK_PX = 1.0
"""Rounding allowed when comparing boxes, in pixels."""


@contextlib.contextmanager
def recording() -> Iterator[list[Figure]]:
    """`with recording() as figures:` every figure saved inside the block (`Figure.savefig`) is
    appended to `figures`, and still saved."""
    figures: list[Figure] = []
    original = Figure.savefig

    def savefig(figure: Figure, *args: Any, **kwargs: Any) -> None:
        figures.append(figure)
        original(figure, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Figure, "savefig", savefig)
        yield figures


def _shown_tick_labels(axis: Axis) -> list[Text]:
    """The tick labels `axis` draws: ticks in view with a label (an axis keeps tick objects
    for ticks out of view, and for ticks it no longer uses)."""
    low, high = sorted(axis.get_view_interval())
    slack = 1e-9 * (abs(low) + abs(high))
    labels = []
    for locations, ticks in (
        (axis.get_majorticklocs(), axis.get_major_ticks),
        (axis.get_minorticklocs(), axis.get_minor_ticks),
    ):
        for location, tick in zip(locations, ticks(len(locations)), strict=True):
            label = tick.label1
            if low - slack <= location <= high + slack and label.get_visible() and label.get_text():
                labels.append(label)
    return labels


def tick_labels(axis: Axis) -> list[str]:
    """The text of the tick labels `axis` draws, after drawing its figure."""
    figure = axis.axes.figure
    assert isinstance(figure, Figure)
    figure.draw_without_rendering()
    return [label.get_text() for label in _shown_tick_labels(axis)]


def _texts(figure: Figure) -> Iterator[Text]:
    """Every text the figure draws: titles, labels, legends, notes, and the tick labels in
    view."""
    every_tick_label = {
        id(label)
        for axes in figure.axes
        for axis in (axes.xaxis, axes.yaxis)
        for tick in itertools.chain(axis.get_major_ticks(), axis.get_minor_ticks())
        for label in (tick.label1, tick.label2)
    }
    for text in figure.findobj(Text):
        if id(text) not in every_tick_label and text.get_visible() and text.get_text():
            yield text
    for axes in figure.axes:
        for axis in (axes.xaxis, axes.yaxis):
            yield from _shown_tick_labels(axis)


def _covers(legend: Bbox, axes: Axes) -> list[str]:
    """The data of `axes` that `legend` (a legend's box, in pixels) lies over. Data are drawn
    clipped to the axes, so only the part of the legend inside them can cover any."""
    box = Bbox.intersection(legend, axes.bbox)
    if box is None:
        return []
    found = []
    for line in axes.lines:
        if not isinstance(line, Line2D) or not line.get_visible():
            continue
        path = line.get_transform().transform_path(line.get_path())
        points = np.asarray(path.vertices)
        if len(points) == 1 or line.get_linestyle() in ("None", "none", ""):
            if any(box.contains(x, y) for x, y in points):
                found.append(f"the points of {line.get_label()!r}")
        elif path.intersects_bbox(box, filled=False):
            found.append(f"the line {line.get_label()!r}")
    for collection in axes.collections:
        if not collection.get_visible():
            continue
        if isinstance(collection, PathCollection):  # scatter: a marker at each offset
            offsets = collection.get_offset_transform().transform(collection.get_offsets())
            if any(box.contains(x, y) for x, y in offsets):
                found.append("scattered points")
        elif isinstance(collection, LineCollection):  # vlines, hlines
            transform = collection.get_transform()
            if any(
                transform.transform_path(path).intersects_bbox(box, filled=False)
                for path in collection.get_paths()
            ):
                found.append("vertical or horizontal lines")
    for container in axes.containers:
        for patch in container.patches if hasattr(container, "patches") else ():
            if patch.get_window_extent().overlaps(box):
                found.append(f"a bar of {container.get_label()!r}")
                break
    return found


def problems(figure: Figure) -> list[str]:
    """What makes `figure` hard to read, one sentence each (an empty list when nothing does)."""
    figure.draw_without_rendering()
    found: list[str] = []
    page = figure.bbox.padded(_SLACK_PX)
    for text in _texts(figure):
        box = text.get_window_extent()
        if not (page.contains(box.x0, box.y0) and page.contains(box.x1, box.y1)):
            found.append(f"{text.get_text()!r} reaches outside the figure")
    for axes in figure.axes:
        for axis in (axes.xaxis, axes.yaxis):
            labels = _shown_tick_labels(axis)
            for label in labels:
                shown = label.get_text()
                if "$" in shown or "10^" in shown or re.search(r"\d[eE][+-]?\d", shown):
                    found.append(f"tick label {shown!r} is in scientific notation")
            boxes = [(label.get_text(), label.get_window_extent()) for label in labels]
            for (a, box_a), (b, box_b) in itertools.combinations(boxes, 2):
                if box_a.shrunk(0.98, 0.98).overlaps(box_b.shrunk(0.98, 0.98)):
                    found.append(f"tick labels {a!r} and {b!r} overlap")
    legends = [legend for legend in figure.findobj(Legend) if legend.get_visible()]
    for legend in legends:
        box = legend.get_window_extent()
        for axes in figure.axes:
            found += [f"the legend covers {what}" for what in _covers(box, axes)]
    return found
