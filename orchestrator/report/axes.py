"""What each figure's axes say (their labels and tick labels), carried inside its PNG so the report's reader, a
person or a browser test, can check that no plot is missing a label or its numbers.

    tag_png(path, figure)   after ``figure.savefig(path)``: a ``tEXt`` chunk ``specsweep-axes`` holding
                            :func:`axes_summary` as JSON (the PNG stays a valid image; viewers ignore the chunk)
    png_axes(data)          that JSON back from the PNG's bytes (None when it has none)

report.html puts it on each ``<img>`` as ``data-axes``. Per axes: its title, ``x`` and ``y`` (the label and the
tick labels shown within the view), and ``colorbar`` for a colour bar (one axis only). An axes whose own
tick labels are hidden because it shares that axis with a neighbour that shows them (``sharex``, ``label_outer``)
takes the neighbour's, so does an unlabelled axis whose row (y) or column (x) has a labelled one with the same
ticks (a row of heatmaps labels its y axis once), and a label the figure gives all its axes (``supxlabel``,
``supylabel``) counts for each: what a reader sees, not how it was drawn.
"""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator.files import write_atomic

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.axis import Axis
    from matplotlib.figure import Figure

__all__ = ["KEYWORD", "axes_summary", "png_axes", "tag_png", "tagged_png"]

KEYWORD = b"specsweep-axes"
_IEND = b"IEND"


def _ticks(axis: Axis) -> list[str]:
    """The tick labels ``axis`` shows within its view (empty when they are hidden)."""
    if not axis.get_visible():
        return []
    axis.get_majorticklabels()  # sets each tick's text from the formatter, as drawing does
    low, high = sorted(axis.get_view_interval())
    span = (high - low) or 1.0
    shown = []
    for tick in axis.get_major_ticks():
        loc = tick.get_loc()
        if loc is None or not (low - 1e-9 * span <= loc <= high + 1e-9 * span):
            continue
        for label in (tick.label1, tick.label2):
            if label.get_visible() and label.get_text().strip():
                shown.append(label.get_text().strip())
                break
    return shown


def _side(ax: Axes, name: str, figure_label: str) -> dict[str, Any]:
    axis = ax.xaxis if name == "x" else ax.yaxis
    label = axis.label.get_text().strip() if axis.label.get_visible() else ""
    ticks = _ticks(axis)
    if not ticks or not label:  # a neighbour sharing this axis may show them for it
        shared = (ax.get_shared_x_axes() if name == "x" else ax.get_shared_y_axes()).get_siblings(ax)
        for other in shared:
            if other is ax:
                continue
            other_axis = other.xaxis if name == "x" else other.yaxis
            ticks = ticks or _ticks(other_axis)
            if not label and other_axis.label.get_visible():
                label = other_axis.label.get_text().strip()
    if ticks and not label:  # the row's (y) or column's (x) labelled axes with the same ticks labels it
        label = _aligned_label(ax, name, ticks)
    return {"label": label or figure_label, "ticks": ticks}


def _aligned_label(ax: Axes, name: str, ticks: list[str]) -> str:
    """The label of another axes of the figure in the same row (for y) or column (for x) whose axis shows the
    same ticks: a row of heatmaps labels its shared y axis once, at its left."""
    here = ax.get_position()
    span = (here.y0, here.y1) if name == "y" else (here.x0, here.x1)
    for other in ax.figure.axes if ax.figure is not None else []:
        if other is ax or hasattr(other, "_colorbar"):
            continue
        there = other.get_position()
        other_span = (there.y0, there.y1) if name == "y" else (there.x0, there.x1)
        if max(abs(a - b) for a, b in zip(span, other_span, strict=True)) > 1e-6:
            continue
        other_axis = other.yaxis if name == "y" else other.xaxis
        text = other_axis.label.get_text().strip() if other_axis.label.get_visible() else ""
        if text and _ticks(other_axis) == ticks:
            return text
    return ""


def axes_summary(figure: Figure) -> list[dict[str, Any]]:
    """Every visible axes of ``figure``: ``{title, colorbar, x: {label, ticks}, y: {label, ticks}}``."""
    suplabels = {
        name: (text.get_text().strip() if text is not None and text.get_visible() else "")
        for name, text in (("x", getattr(figure, "_supxlabel", None)), ("y", getattr(figure, "_supylabel", None)))
    }
    out = []
    for ax in figure.axes:
        if not ax.get_visible() or not ax.axison:
            continue
        out.append(
            {
                "title": ax.get_title().strip(),
                "colorbar": hasattr(ax, "_colorbar"),
                "x": _side(ax, "x", suplabels["x"]),
                "y": _side(ax, "y", suplabels["y"]),
            }
        )
    return out


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def tagged_png(data: bytes, figure: Figure) -> bytes:
    """The PNG ``data`` with :func:`axes_summary` of ``figure`` put in (just before its end chunk)."""
    end = data.rfind(struct.pack(">I", 0) + _IEND)
    if end < 0:
        return data
    text = json.dumps(axes_summary(figure), ensure_ascii=True, separators=(",", ":"))
    return data[:end] + _chunk(b"tEXt", KEYWORD + b"\0" + text.encode("latin-1")) + data[end:]


def tag_png(path: Path, figure: Figure) -> None:
    """Put :func:`axes_summary` of ``figure`` into the PNG at ``path`` (a new file renamed over it)."""
    write_atomic(path, tagged_png(path.read_bytes(), figure))


def png_axes(data: bytes) -> str | None:
    """The ``specsweep-axes`` text of a PNG's bytes, or None."""
    position = 8  # past the signature
    while position + 8 <= len(data):
        (length,) = struct.unpack(">I", data[position : position + 4])
        kind = data[position + 4 : position + 8]
        body = data[position + 8 : position + 8 + length]
        if kind == b"tEXt" and body.startswith(KEYWORD + b"\0"):
            return body[len(KEYWORD) + 1 :].decode("latin-1")
        if kind == _IEND:
            return None
        position += 12 + length
    return None
