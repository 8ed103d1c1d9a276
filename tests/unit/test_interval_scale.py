"""The hierarchical bootstrap of ``aggregate_windows`` resamples every point of one shape at once (numpy, bounded
batches): each point still gets its own figure and interval, of the width its repeats and requests give."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest

from orchestrator.analysis import intervals
from orchestrator.analysis.intervals import aggregate_windows


def _window(label: str, value: float, se: float, restart: int, repeat: int) -> dict[str, Any]:
    return {
        "host": "h",
        "label": label,
        "variant": label,
        "mode": "concurrency",
        "load": 1.0,
        "load_label": "C=1",
        "status": "ok",
        "alias_of": None,
        "point_id": f"p-{label}-{restart}-{repeat}",
        "restart": restart,
        "requests": 16,
        "output_tok_s": value,
        "output_tok_s_lo": value - 1.96 * se,
        "output_tok_s_hi": value + 1.96 * se,
        "output_tok_s_se": se,
    }


def test_points_of_mixed_shapes_each_get_their_own_figure_and_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(intervals, "_BATCH_ELEMENTS", 50_000)  # several batches per shape
    rng = np.random.default_rng(3)
    windows = []
    expected: dict[str, tuple[float, float]] = {}
    for index in range(120):
        label = f"c{index}"
        centre = 100.0 + 10 * index  # far apart: a figure given to the wrong point would show
        if index % 3 == 0:  # two restarts of two repeats
            values = [centre - 2, centre + 2, centre + 6, centre + 10]
            shape = [(1, 1), (1, 2), (2, 1), (2, 2)]
            mean = (centre + (centre + 8)) / 2
        else:  # one restart, three repeats (or four)
            k = 3 if index % 3 == 1 else 4
            values = list(centre + rng.normal(0, 3, size=k))
            shape = [(1, r) for r in range(1, k + 1)]
            mean = float(np.mean(values))
        for (restart, repeat), value in zip(shape, values, strict=True):
            windows.append(_window(label, value, 1.5, restart, repeat))
        single = index % 3 != 0
        spread = math.sqrt(np.var(values, ddof=1) / len(values) + 1.5**2 / len(values)) if single else float("nan")
        expected[label] = (mean, spread)
    points = aggregate_windows(pd.DataFrame(windows)).set_index("label")
    singles = []
    for label, (mean, spread) in expected.items():
        row = points.loc[label]
        assert row["output_tok_s"] == pytest.approx(mean)
        assert row["output_tok_s_lo"] < mean < row["output_tok_s_hi"]
        assert row["output_tok_s_hi"] - row["output_tok_s_lo"] < 40  # its own spread, not a neighbour's
        if not math.isnan(spread):
            singles.append(row["output_tok_s_se"] / spread)
        else:
            assert row["ci_method"] == "bootstrap over 2 restarts (2 repeats each) and their requests"
    # The bootstrap's se over one restart's repeats is the unbiased one (repeats' variance and requests' se).
    assert np.mean(singles) == pytest.approx(1.0, abs=0.03)


@pytest.mark.parametrize("repeats", [1, 2, 3, 5, 7, 8, 11])
@pytest.mark.parametrize("restarts", [1, 3])
def test_the_drawn_sums_are_numpys_bit_for_bit(repeats: int, restarts: int) -> None:
    """``_drawn_sum`` (the k drawn windows added a column at a time, bench/RESULTS-scale.md) gives the very bits
    of ``np.take(values, drawn).sum(axis=-1)``, so every interval is what it was, over values of any scale."""
    rng = np.random.default_rng(repeats * 10 + restarts)
    values = rng.standard_normal(40 * repeats) * 10 ** rng.uniform(-6, 6, 40 * repeats)
    drawn = rng.integers(0, values.size, size=(40, 500, restarts, repeats), dtype=np.int32)
    assert np.array_equal(intervals._drawn_sum(values, drawn), np.take(values, drawn).sum(axis=-1))
