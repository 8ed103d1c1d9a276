"""The Pareto front (issue 40, item 16): the array form gives exactly what comparing every pair gives (the rule
of orchestrator/analysis/compare.py's docstring, written out here as the reference), on random frames with and
without intervals, ties and missing intervals included."""

from __future__ import annotations

import random

import pandas as pd
import pytest

from orchestrator.analysis.compare import THROUGHPUT, pareto_front
from orchestrator.analysis.intervals import difference


def _better(a: pd.Series, b: pd.Series, figure: str, level: float) -> bool:
    diff = difference(a.get(figure), a.get(f"{figure}_se"), b.get(figure), b.get(f"{figure}_se"), level=level)
    if diff is None:
        return False
    if diff.significant is None:
        return diff.relative > 0
    return diff.lo is not None and diff.lo > 0


def _reference(frame: pd.DataFrame, x: str, y: str, level: float | None) -> set[str]:
    """Every pair compared (the former implementation): the labels no other point beats."""
    kept = set()
    for host, group in frame.groupby("host"):
        rows = list(group.iterrows())
        for i, b in rows:
            beaten = False
            for j, a in rows:
                if i == j or not (a[x] >= b[x] and a[y] >= b[y]):
                    continue
                if level is None:
                    beaten = a[x] > b[x] or a[y] > b[y]
                else:
                    beaten = _better(a, b, x, level) or _better(a, b, y, level)
                if beaten:
                    break
            if not beaten:
                kept.add(f"{host}:{b['label']}")
    return kept


def _frame(seed: int, n: int) -> pd.DataFrame:
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        x = float(rng.choice([rng.uniform(10, 100), rng.randint(1, 8) * 10.0]))  # ties too
        y = float(rng.choice([rng.uniform(100, 1000), rng.randint(1, 8) * 100.0]))
        rows.append(
            {
                "label": f"p{i}",
                "host": rng.choice(["a", "b"]),
                "status": "ok",
                "alias_of": None,
                "per_user_tok_s": x,
                THROUGHPUT: y,
                "per_user_tok_s_se": rng.choice([None, rng.uniform(0, 5)]),
                f"{THROUGHPUT}_se": rng.choice([None, rng.uniform(0, 50)]),
            }
        )
    return pd.DataFrame(rows)


@pytest.mark.parametrize("level", [None, 0.95])
@pytest.mark.parametrize("seed", range(8))
def test_the_front_is_what_comparing_every_pair_gives(seed: int, level: float | None) -> None:
    frame = _frame(seed, 60)
    got = pareto_front(frame, level=level)
    assert {f"{h}:{label}" for h, label in zip(got["host"], got["label"], strict=True)} == _reference(
        frame, "per_user_tok_s", THROUGHPUT, level
    )
