"""Labels beside points that never overlap one another, the labelled points, or the edge of the axes.

A greedy layout in display space: the figure is laid out first (constrained layout runs at draw time, so the
axes are where they will be saved), then each label, in the order given, takes the first position around its
point, nearest first, whose bounding box (matplotlib's own ``get_window_extent`` with the renderer that will draw
it) meets no label placed before it, no labelled point, and stays inside the axes; a label pushed away from its
point gets a thin leader line. Where no position is free (more labels than room), the one with the least overlap
wins. Labels are left out of the layout engine, so placing them does not move the axes they were placed in.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.text import Annotation, Text
from matplotlib.transforms import Bbox

__all__ = ["place_labels", "text_extent"]

# Rings of offsets (points) around the anchor, nearest first; directions in the order a reader expects a label.
_RINGS = (5.0, 12.0, 20.0, 30.0, 42.0, 56.0, 72.0, 90.0, 110.0, 135.0, 160.0)
_DIRECTIONS: tuple[tuple[float, float, str, str], ...] = (
    (1.0, 0.6, "left", "bottom"),
    (1.0, -0.6, "left", "top"),
    (-1.0, 0.6, "right", "bottom"),
    (-1.0, -0.6, "right", "top"),
    (0.0, 1.0, "center", "bottom"),
    (0.0, -1.0, "center", "top"),
    (1.0, 0.0, "left", "center"),
    (-1.0, 0.0, "right", "center"),
    (0.5, 1.0, "left", "bottom"),
    (-0.5, 1.0, "right", "bottom"),
    (0.5, -1.0, "left", "top"),
    (-0.5, -1.0, "right", "top"),
)
_PAD = 2.0  # pixels of clear space kept around every label


Box = tuple[float, float, float, float]  # x0, y0, x1, y1 in display pixels (plain floats: Bbox's are slow here)


_H = {"left": 0.0, "center": 0.5, "right": 1.0}
_V = {"bottom": 0.0, "center": 0.5, "top": 1.0}


def _overlaps(boxes: np.ndarray, others: np.ndarray) -> np.ndarray:
    """For each of ``boxes`` (n x 4), the summed area it shares with ``others`` (m x 4)."""
    if not len(others):
        return np.zeros(len(boxes))
    width = np.minimum(boxes[:, None, 2], others[None, :, 2]) - np.maximum(boxes[:, None, 0], others[None, :, 0])
    height = np.minimum(boxes[:, None, 3], others[None, :, 3]) - np.maximum(boxes[:, None, 1], others[None, :, 1])
    return np.where((width > 0) & (height > 0), width * height, 0.0).sum(axis=1)


def text_extent(note: Annotation, renderer: Any) -> Bbox:
    """The bounding box of an annotation's text alone, in display pixels (``Annotation.get_window_extent`` adds
    its leader line, which starts at the point it labels)."""
    note.update_positions(renderer)
    return Text.get_window_extent(note, renderer)


def place_labels(
    ax: Axes,
    anchors: Sequence[tuple[float, float]],
    texts: Sequence[str],
    *,
    avoid: Sequence[tuple[float, float]] = (),
    marker_radius: float = 6.0,
    **text_style: Any,
) -> list[Annotation]:
    """Annotate ``ax`` with ``texts[i]`` beside the data point ``anchors[i]``; returns the annotations.

    ``marker_radius`` (points) is the room each labelled point's marker takes, ``avoid`` more data points a
    label should not cover (a smaller marker each); ``text_style`` goes to ``Axes.annotate`` (``fontsize``,
    ``color``)."""
    figure = ax.get_figure()
    if not isinstance(figure, Figure):  # a subfigure lays out with its parent: label the parent's axes
        raise TypeError("place_labels needs axes of a top-level Figure")
    figure.draw_without_rendering()  # the layout as it will be saved: axes placed, limits final
    renderer = figure.canvas.get_renderer()  # type: ignore[attr-defined]
    scale = figure.dpi / 72.0
    frame: Box = tuple(ax.get_window_extent(renderer).extents)  # type: ignore[assignment]
    radius = marker_radius * scale
    obstacles: list[Box] = []
    for points, r in ((anchors, radius), (avoid, radius * 0.6)):
        if not len(points):
            continue
        pixels = ax.transData.transform(np.asarray(points, dtype=float).reshape(-1, 2))
        obstacles += [(px - r, py - r, px + r, py + r) for px, py in pixels]
    # Every box as an array row: the positions of one label are scored against every obstacle and every label
    # placed before it at once (numpy), so a label costs the same whether a front has ten points or thousands.
    blocked = np.asarray(obstacles, dtype=float).reshape(-1, 4)
    placed = np.empty((0, 4))
    offsets = np.array([(dx * d, dy * d) for d in _RINGS for dx, dy, _ha, _va in _DIRECTIONS])
    shifts = np.array([(_H[ha], _V[va]) for _d in _RINGS for _dx, _dy, ha, va in _DIRECTIONS])
    aligns = [(ha, va) for _d in _RINGS for _dx, _dy, ha, va in _DIRECTIONS]
    out: list[Annotation] = []
    for (x, y), text in zip(anchors, texts, strict=True):
        # A text's box is the same wherever it goes: measure it once, then try positions by arithmetic.
        probe = ax.annotate(text, (x, y), xytext=(0, 0), textcoords="offset points", **text_style)
        size = text_extent(probe, renderer)
        probe.remove()
        px, py = ax.transData.transform((x, y))
        left = px + offsets[:, 0] * scale - shifts[:, 0] * size.width
        bottom = py + offsets[:, 1] * scale - shifts[:, 1] * size.height
        boxes = np.column_stack((left - _PAD, bottom - _PAD, left + size.width + _PAD, bottom + size.height + _PAD))
        cost = _overlaps(boxes, placed) + _overlaps(boxes, blocked)
        cost += 4 * ((boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1]) - _overlaps(boxes, np.array([frame])))
        # The nearest position with no overlap at all, else the first with the least (rings in order, nearest first).
        free = np.flatnonzero(cost == 0)
        chosen = int(free[0]) if free.size else int(np.argmin(cost))
        ox, oy = (float(v) for v in offsets[chosen])
        ha, va = aligns[chosen]
        box = boxes[chosen]
        note = ax.annotate(
            text,
            (x, y),
            xytext=(ox, oy),
            textcoords="offset points",
            ha=ha,
            va=va,
            annotation_clip=False,
            arrowprops={"arrowstyle": "-", "color": "#999999", "linewidth": 0.6}
            if max(abs(ox), abs(oy)) > 12
            else None,
            **text_style,
        )
        note.set_in_layout(False)
        placed = np.vstack((placed, box))
        out.append(note)
    return out
