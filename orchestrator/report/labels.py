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


def _overlap(a: Box, b: Box) -> float:
    width = min(a[2], b[2]) - max(a[0], b[0])
    height = min(a[3], b[3]) - max(a[1], b[1])
    return width * height if width > 0 and height > 0 else 0.0


def _outside(box: Box, frame: Box) -> float:
    return (box[2] - box[0]) * (box[3] - box[1]) - _overlap(box, frame)


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
        for x, y in points:
            px, py = ax.transData.transform((x, y))
            obstacles.append((px - r, py - r, px + r, py + r))
    placed: list[Box] = []
    out: list[Annotation] = []
    for (x, y), text in zip(anchors, texts, strict=True):
        # A text's box is the same wherever it goes: measure it once, then try positions by arithmetic.
        probe = ax.annotate(text, (x, y), xytext=(0, 0), textcoords="offset points", **text_style)
        size = text_extent(probe, renderer)
        probe.remove()
        px, py = ax.transData.transform((x, y))
        best: tuple[float, float, float, str, str, Box] | None = None
        for distance in _RINGS:
            for dx, dy, ha, va in _DIRECTIONS:
                left = px + dx * distance * scale - {"left": 0.0, "center": 0.5, "right": 1.0}[ha] * size.width
                bottom = py + dy * distance * scale - {"bottom": 0.0, "center": 0.5, "top": 1.0}[va] * size.height
                box = (left - _PAD, bottom - _PAD, left + size.width + _PAD, bottom + size.height + _PAD)
                cost = sum(_overlap(box, other) for other in placed) + sum(_overlap(box, o) for o in obstacles)
                cost += 4 * _outside(box, frame)
                if best is None or cost < best[0]:
                    best = (cost, dx * distance, dy * distance, ha, va, box)
                if cost == 0:
                    break
            if best is not None and best[0] == 0:
                break
        assert best is not None
        _cost, ox, oy, ha, va, box = best
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
        placed.append(box)
        out.append(note)
    return out
