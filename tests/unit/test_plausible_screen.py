"""The quick screen of orchestrator/runs/plausible.py (``_suspect``) never lets through a figure the full walk
refuses: ``impossible_figure`` with the screen says what the walk alone says, on hostile and random figures."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest

from orchestrator.runs import plausible
from orchestrator.runs.plausible import MAX_FIGURE, impossible_figure


def walked(sections: dict[str, Any]) -> str | None:
    """``impossible_figure`` with the screen taken out (every section walked)."""
    original = plausible._suspect
    plausible._suspect = lambda value, depth=0: True
    try:
        return impossible_figure(sections)
    finally:
        plausible._suspect = original


def nested(value: Any, depth: int) -> Any:
    for _ in range(depth):
        value = {"x": [value]}
    return value


HOSTILE: list[Any] = [
    math.nan,
    math.inf,
    -math.inf,
    1e19,
    -1e19,
    10**19,
    -(10**19),
    MAX_FIGURE,
    1.0,
    True,
    None,
    "1e400",
    (1, 2e30),
]


@pytest.mark.parametrize("value", HOSTILE, ids=repr)
@pytest.mark.parametrize("depth", [0, 1, 2, 31, 32, 33, 40])
def test_the_screen_lets_through_nothing_the_walk_refuses(value: Any, depth: int) -> None:
    sections = {"client": {"requests": 4, "deep": nested(value, depth)}, "server": None}
    assert impossible_figure(sections) == walked(sections)


def test_random_records_judged_alike() -> None:
    rng = random.Random(49)
    pool = [*HOSTILE, 0, -1, 3.5, "x", [], {}]

    def figure(depth: int) -> Any:
        roll = rng.random()
        if depth < 6 and roll < 0.2:
            return {f"k{i}": figure(depth + 1) for i in range(rng.randint(0, 3))}
        if depth < 6 and roll < 0.35:
            return [figure(depth + 1) for _ in range(rng.randint(0, 3))]
        return rng.choice(pool)

    refused = 0
    for _ in range(2000):
        sections = {"client": figure(0), "server": figure(0), "intervals": figure(0)}
        expected = walked(sections)
        assert impossible_figure(sections) == expected, sections
        refused += expected is not None
    assert 200 < refused < 1900  # both kinds were judged
