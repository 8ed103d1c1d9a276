"""What a figure's axes say, carried in its PNG (orchestrator/report/axes.py): labels and the tick labels within
view, a shared axis's labels taken from the neighbour that shows them, a colour bar marked, and the PNG still
an image that reads back its text."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib
from matplotlib.figure import Figure

from orchestrator.report.axes import axes_summary, png_axes, tag_png

matplotlib.use("Agg")


def test_labels_ticks_within_view_and_a_shared_axis_hidden_by_label_outer() -> None:
    figure = Figure(figsize=(6, 3))
    left, right = figure.subplots(1, 2, sharey=True)
    for ax in (left, right):
        ax.plot([0, 10], [0, 100])
        ax.set_xlim(0, 10)
        ax.set_xlabel("time (ms)")
    left.set_ylabel("tokens/s")
    right.label_outer()  # its y tick labels hidden: the left one shows them for both
    first, second = axes_summary(figure)
    assert first["x"] == {"label": "time (ms)", "ticks": ["0", "2", "4", "6", "8", "10"]}
    assert first["y"]["label"] == "tokens/s" and first["y"]["ticks"][0] == "0"
    assert second["y"] == first["y"] and not second["colorbar"]


def test_a_row_labels_its_y_axis_once_and_an_unlabelled_axis_says_so() -> None:
    figure = Figure(figsize=(6, 3))
    left, right = figure.subplots(1, 2)
    for ax in (left, right):
        ax.imshow([[1, 2], [3, 4]])
        ax.set_yticks([0, 1], ["7", "16"])
        ax.set_xticks([0, 1], ["1", "4"])
    left.set_ylabel("budget")
    image = left.images[0]
    figure.colorbar(image, ax=[left, right], label="×AR")
    first, second, bar = axes_summary(figure)
    assert second["y"] == {"label": "budget", "ticks": ["7", "16"]}  # the row's label, same ticks
    assert first["x"] == {"label": "", "ticks": ["1", "4"]} == second["x"]  # nobody labels x
    assert bar["colorbar"] and bar["y"]["label"] == "×AR" and bar["y"]["ticks"]


def test_the_summary_rides_in_the_png_which_stays_a_png(tmp_path: Path) -> None:
    figure = Figure(figsize=(3, 2))
    ax = figure.subplots()
    ax.plot([1, 2], [3, 4])
    ax.set_xlabel("concurrency ÷ 2")
    path = tmp_path / "f.png"
    figure.savefig(path, format="png")
    assert png_axes(path.read_bytes()) is None
    tag_png(path, figure)
    data = path.read_bytes()
    assert data.startswith(b"\x89PNG") and data.endswith(b"IEND\xaeB`\x82")
    (summary,) = json.loads(png_axes(data) or "null")
    assert summary["x"]["label"] == "concurrency ÷ 2"

    from PIL import Image

    with Image.open(path) as img:  # a reader that checks every chunk's CRC
        img.load()
        assert json.loads(img.info["specsweep-axes"])[0]["x"]["label"] == "concurrency ÷ 2"
