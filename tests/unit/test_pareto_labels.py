"""The Pareto figure's labels never overlap: on a crowded front, every label's bounding box (matplotlib's renderer,
after the figure is saved as the report saves it) meets no other label and stays inside the axes."""

from __future__ import annotations

import io
import itertools
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.text import Annotation
from matplotlib.transforms import Bbox

from orchestrator.analysis import analyse
from orchestrator.report import figures
from orchestrator.report.labels import place_labels, text_extent

RUNS = Path(__file__).resolve().parents[1] / "data" / "runs"


def _saved(figure: Figure) -> None:
    figure.savefig(io.BytesIO(), format="png")  # the final draw, as build_report's savefig does


def _overlapping(boxes: list[Bbox]) -> list[tuple[int, int]]:
    return [(i, j) for (i, a), (j, b) in itertools.combinations(enumerate(boxes), 2) if a.overlaps(b)]


def _inside(box: Bbox, frame: Bbox) -> bool:
    return frame.x0 - 1 <= box.x0 and box.x1 <= frame.x1 + 1 and frame.y0 - 1 <= box.y0 and box.y1 <= frame.y1 + 1


def _crowd() -> tuple[list[tuple[float, float]], list[str]]:
    anchors = [(50 + 1.5 * i, 1000.0 + 40 * (i % 3)) for i in range(12)]
    texts = [f"ddtree(budget={7 * (i + 1)}, topk={i % 4 + 1}) @ C={2**i}" for i in range(12)]
    return anchors, texts


def _axes() -> tuple[Figure, Axes]:
    figure = Figure(figsize=(10.5, 6.0), dpi=110, layout="constrained")
    FigureCanvasAgg(figure)
    ax = figure.add_subplot()
    ax.set_xlim(0, 120)
    ax.set_ylim(0, 2000)
    return figure, ax


def test_labels_of_a_crowded_cluster_do_not_overlap_and_stay_inside_the_axes() -> None:
    anchors, texts = _crowd()
    # The case is crowded: each label at the same offset from its point (the old layout) overlaps others.
    naive_figure, naive = _axes()
    naive.scatter(*zip(*anchors, strict=True))
    for (x, y), text in zip(anchors, texts, strict=True):
        naive.annotate(text, (x, y), textcoords="offset points", xytext=(6, 4), fontsize=7.5)
    _saved(naive_figure)
    renderer = naive_figure.canvas.get_renderer()  # type: ignore[attr-defined]
    assert _overlapping([t.get_window_extent(renderer) for t in naive.texts])

    figure, ax = _axes()
    ax.scatter(*zip(*anchors, strict=True))
    notes = place_labels(ax, anchors, texts, fontsize=7.5)
    _saved(figure)
    renderer = figure.canvas.get_renderer()  # type: ignore[attr-defined]
    boxes = [text_extent(note, renderer) for note in notes]
    assert len(boxes) == 12 and not _overlapping(boxes)
    frame = ax.get_window_extent(renderer)
    assert all(_inside(box, frame) for box in boxes)
    assert [note.get_text() for note in notes] == texts


def test_the_pareto_figure_of_a_crowded_front_has_no_overlapping_labels() -> None:
    analysis = analyse(RUNS / "field-report")
    frame = analysis.frame
    ok = frame[(frame["status"] == "ok") & frame["alias_of"].isna()]
    # Fifteen points of the field report's crowded corner (low total, high per-user throughput) as the front.
    analysis.pareto = ok[(ok["output_tok_s"] < 800) & (ok["per_user_tok_s"] > 60)]
    assert len(analysis.pareto) >= 12
    figure = figures.pareto_plot(analysis)
    assert figure is not None
    _saved(figure)
    renderer = figure.canvas.get_renderer()  # type: ignore[attr-defined]
    ax = figure.axes[0]
    labels = [t for t in ax.texts if isinstance(t, Annotation) and " @ C=" in t.get_text()]
    assert len(labels) == len(analysis.pareto)
    boxes = [text_extent(t, renderer) for t in labels]
    assert not _overlapping(boxes), _overlapping(boxes)
    assert all(_inside(box, ax.get_window_extent(renderer)) for box in boxes)
