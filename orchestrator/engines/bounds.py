"""Bounds of a weighted mean whose weights the log does not print.

An engine's window figure is often a weighted mean of its interval figures: SGLang's window accept length is
``sum(tokens) / sum(batch sizes)`` = the intervals' accept lengths weighted by each interval's batch-size sum
(``spec_num_forward_ct``), its throughput the intervals' throughputs weighted by their seconds. Where the log
prints the interval figures but not their weights, the window figure is not known, but it lies between the
smallest and the largest value any weights the log allows would give. :func:`weighted_mean_bounds` computes
those two values exactly: each value is known to within ``[low, high]`` (its printed rounding), each weight to
within ``[low, high]`` (``math.inf`` for a weight the log says nothing about).

The extremes of ``sum(w * v) / sum(w)`` over a box of weights lie at its corners, and at the maximising corner
every value above the optimum has its largest weight and every value below it its smallest (a linear-fractional
program), so trying each split of the values sorted by size finds it: O(n log n) after sorting.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["weighted_mean", "weighted_mean_bounds"]


def weighted_mean(values: Sequence[float], weights: Sequence[float]) -> float | None:
    """``sum(w * v) / sum(w)``; None without a positive total weight."""
    total = sum(weights)
    if total <= 0:
        return None
    return sum(w * v for v, w in zip(values, weights, strict=True)) / total


def _highest(values: Sequence[float], low: Sequence[float], high: Sequence[float]) -> float:
    """The largest weighted mean of ``values`` with each weight in ``[low[i], high[i]]`` (a supremum where
    a weight may grow without end)."""
    unbounded = [v for v, h in zip(values, high, strict=True) if math.isinf(h)]
    best = max(unbounded) if unbounded else -math.inf
    order = sorted(range(len(values)), key=lambda i: -values[i])
    finite = [i for i in order if not math.isinf(high[i])]
    # Start with every weight at its smallest; raise the finite ones one by one, the largest values first (a
    # weight without an upper bound, raised, gives its own value: ``unbounded`` above).
    num = sum(low[i] * values[i] for i in range(len(values)))
    den = sum(low)
    if den > 0:
        best = max(best, num / den)
    for i in finite:
        num += (high[i] - low[i]) * values[i]
        den += high[i] - low[i]
        if den > 0:
            best = max(best, num / den)
    return best


def weighted_mean_bounds(
    value_low: Sequence[float],
    value_high: Sequence[float],
    weight_low: Sequence[float],
    weight_high: Sequence[float],
) -> tuple[float, float] | None:
    """``(lowest, highest)`` weighted mean when value i lies in ``[value_low[i], value_high[i]]`` and its
    weight in ``[weight_low[i], weight_high[i]]`` (``weight_high`` may be ``math.inf``; every weight is
    positive, so a weight of ``0 .. inf`` says nothing about it). None without values."""
    n = len(value_low)
    if n == 0 or not (len(value_high) == len(weight_low) == len(weight_high) == n):
        return None
    low_w = [max(0.0, w) for w in weight_low]
    high_w = [max(lo, hi) for lo, hi in zip(low_w, weight_high, strict=True)]
    if all(h <= 0 for h in high_w):
        return None
    highest = _highest(value_high, low_w, high_w)
    lowest = -_highest([-v for v in value_low], low_w, high_w)
    return lowest, highest
