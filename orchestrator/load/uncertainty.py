"""Confidence intervals of one window's figures: a bootstrap over its requests.

Every figure of a load window is computed from requests; resampling the requests with replacement (Efron's
bootstrap, ``numpy`` only: the statistics below are ratios and pooled percentiles that
``scipy.stats.bootstrap`` cannot take as one vectorised call) and recomputing the figure on each resample
gives its sampling distribution, and its *expanded* percentile interval at the chosen level
(:func:`expanded_alpha`: the plain percentile interval of a few dozen requests is too narrow). The replicates:

- ``output_tok_s``, closed loop: the headline figure is output tokens over the window's duration; with C
  workers always busy that is C x sum(tokens) / sum(e2e), a ratio of two sums over requests, and the
  interval is the headline times the ratio's replicates over the ratio (its relative spread). Open loop: the
  arrivals themselves are random, so each request is drawn Poisson(1) times (the Poisson bootstrap), which
  varies their number as a Poisson process does: tokens of the resample over tokens of the window.
- ``accept_len``: sum of committed tokens over sum of verify steps of the per-response speculative figures
  (the pooled ratio of :func:`orchestrator.load.spec.summarize_spec`), resampled as pairs.
- ``per_user_tok_s``: the mean of each request's decode rate.
- ``ttft_ms_p50`` ... ``e2e_ms_p99``, ``tpot_ms_p50``: percentiles of one value per request.
- ``itl_ms_p50`` ... ``itl_ms_p99``: percentiles of the inter-token gaps pooled over the resampled requests
  (a request's gaps go with it). Each request's gaps are binned once on a fine logarithmic grid (0.5% wide);
  a resample's pooled distribution is a weighted sum of those histograms, its percentile read off it, and
  the replicates shifted by the grid's own error at the full window (the exact percentile minus the grid's).

Requests that share batches (C > 1) are not independent; the bootstrap over requests then understates the
spread somewhat. Repeats (``load.repeats``) and restarts measure the spread between whole windows, and the
analysis (``orchestrator/analysis/intervals.py``) combines them.

:func:`window_intervals` returns ``{figure: Interval}`` for the figures that have at least two requests.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np

from orchestrator.load.records import RequestRecord

__all__ = [
    "DEFAULT_RESAMPLES",
    "INTERVAL_FIGURES",
    "Interval",
    "headline_interval",
    "window_intervals",
]

DEFAULT_RESAMPLES = 1000
#: The figures a window gets an interval for, in the order reports show them.
INTERVAL_FIGURES = (
    "output_tok_s",
    "accept_len",
    "per_user_tok_s",
    "ttft_ms_p50",
    "ttft_ms_p90",
    "ttft_ms_p99",
    "itl_ms_p50",
    "itl_ms_p90",
    "itl_ms_p99",
    "tpot_ms_p50",
    "e2e_ms_p50",
    "e2e_ms_p99",
)
_PERCENTILES = {"p50": 50.0, "p90": 90.0, "p99": 99.0}
_GRID_STEP = math.log(1.005)


@dataclass(frozen=True)
class Interval:
    """A figure, its ``level`` confidence interval ``[lo, hi]``, the replicates' standard deviation ``se`` and
    the number of requests ``n`` it came from."""

    value: float
    lo: float
    hi: float
    se: float
    n: int

    @property
    def rel_halfwidth(self) -> float:
        """Half the interval's width over the figure (inf for a zero figure)."""
        return (self.hi - self.lo) / 2 / abs(self.value) if self.value else math.inf

    def to_dict(self) -> dict[str, Any]:
        return {"value": _r(self.value), "lo": _r(self.lo), "hi": _r(self.hi), "se": _r(self.se), "n": self.n}


def _r(value: float) -> float:
    return float(f"{value:.6g}")


class _Resampler:
    """Resamples of ``n`` requests: ``counts`` (B x n) says how often each request is in each resample."""

    def __init__(self, n: int, resamples: int, rng: np.random.Generator, poisson: bool = False) -> None:
        self.n = n
        if poisson:
            self.counts = rng.poisson(1.0, size=(resamples, n)).astype(float)
        else:
            picks = rng.integers(0, n, size=(resamples, n))
            counts = np.zeros((resamples, n))
            np.add.at(counts, (np.arange(resamples)[:, None], picks), 1.0)
            self.counts = counts


def _t_quantile(p: float, dof: int) -> float:
    """Student's t quantile, by the Cornish-Fisher expansion of the normal one (Abramowitz and Stegun 26.7.5;
    within 0.1% for 4 or more degrees of freedom)."""
    z = NormalDist().inv_cdf(p)
    v = float(dof)
    return (
        z
        + (z**3 + z) / (4 * v)
        + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * v**2)
        + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * v**3)
    )


def expanded_alpha(level: float, n: int) -> float:
    """The tail of the *expanded* percentile interval (Hesterberg, "What teachers should know about the
    bootstrap", The American Statistician 69(4), 2015): the plain percentile interval is too narrow for small
    samples (its spread is the sample's, not the population's, and it uses normal rather than t tails), so the
    percentiles are taken at alpha' with z(alpha'/2) = sqrt(n / (n - 1)) t(alpha/2, n - 1)."""
    if n < 3:
        return (1.0 - level) / 2
    t = _t_quantile(0.5 + level / 2, n - 1) * math.sqrt(n / (n - 1))
    return NormalDist().cdf(-t)


def _quantiles(replicates: np.ndarray, level: float, n: int = 0) -> tuple[float, float, float]:
    good = replicates[np.isfinite(replicates)]
    if good.size < 2:
        return math.nan, math.nan, math.nan
    alpha = expanded_alpha(level, n) if n else (1.0 - level) / 2
    lo, hi = np.quantile(good, [alpha, 1.0 - alpha])
    return float(lo), float(hi), float(good.std(ddof=1))


def _percentile_interval(
    values: np.ndarray, q: float, counts: np.ndarray, level: float, scale: float = 1000.0
) -> Interval | None:
    """The ``q`` percentile of one value per request: the replicates from each resample's weighted values."""
    if values.size < 2:
        return None
    order = np.argsort(values)
    sorted_values = values[order] * scale
    weights = counts[:, order]
    cumulative = np.cumsum(weights, axis=1)
    totals = cumulative[:, -1:]
    # numpy's default (linear) percentile of the resample, written for weighted integer counts: position
    # q/100 * (m - 1) among the resample's m values.
    position = q / 100.0 * (totals - 1)
    below = np.clip((cumulative <= np.floor(position)).sum(axis=1), 0, values.size - 1)
    above = np.clip((cumulative <= np.ceil(position)).sum(axis=1), 0, values.size - 1)
    frac = (position[:, 0] - np.floor(position[:, 0])).clip(0, 1)
    replicates = sorted_values[below] * (1 - frac) + sorted_values[above] * frac
    replicates[totals[:, 0] <= 0] = np.nan
    point = float(np.percentile(values * scale, q))
    lo, hi, se = _quantiles(replicates, level, int(values.size))
    return Interval(point, lo, hi, se, int(values.size))


def _pooled_percentiles(
    gaps: Sequence[np.ndarray], qs: dict[str, float], counts: np.ndarray, level: float
) -> dict[str, Interval]:
    """Percentiles of gaps pooled over resampled requests, through per-request histograms on a log grid."""
    nonempty = [g for g in gaps if g.size]
    if len(nonempty) < 2:
        return {}
    every = np.concatenate(nonempty)
    positive = every[every > 0]
    floor = float(positive.min()) if positive.size else 1e-6
    top = float(every.max())
    bins = max(1, math.ceil(math.log(max(top, floor) / floor) / _GRID_STEP) + 1)
    edges = floor * np.exp(_GRID_STEP * np.arange(bins + 1))
    centres = np.concatenate([[0.0], np.sqrt(edges[:-1] * edges[1:])])
    hist = np.zeros((len(gaps), bins + 1))
    for i, g in enumerate(gaps):
        if g.size:
            index = np.where(g > 0, np.searchsorted(edges, g, side="right"), 0).clip(0, bins)
            hist[i] = np.bincount(index, minlength=bins + 1)[: bins + 1]
    pooled = counts @ hist  # B x bins
    base = hist.sum(axis=0)
    out: dict[str, Interval] = {}
    for name, q in qs.items():
        exact = float(np.percentile(every, q))
        grid_point = _grid_percentile(base[None, :], centres, q)[0]
        replicates = _grid_percentile(pooled, centres, q) + (exact - grid_point)
        lo, hi, se = _quantiles(replicates, level, len(nonempty))
        out[name] = Interval(exact, lo, hi, se, len(nonempty))
    return out


def _grid_percentile(weights: np.ndarray, centres: np.ndarray, q: float) -> np.ndarray:
    cumulative = np.cumsum(weights, axis=1)
    totals = cumulative[:, -1]
    target = q / 100.0 * totals
    index = (cumulative < target[:, None]).sum(axis=1).clip(0, centres.size - 1)
    values = centres[index]
    values[totals <= 0] = np.nan
    return values


def _gaps_ms(record: RequestRecord) -> np.ndarray:
    """A request's inter-token gaps in ms, each chunk's gap spread over its tokens (as ``stats.summarize``)."""
    times = record.chunk_times
    if len(times) < 2:
        return np.empty(0)
    t = np.asarray(times, dtype=float)
    k = np.asarray(record.chunk_tokens[1:], dtype=float)
    k[k <= 0] = 1
    per_token = np.diff(t) / k * 1000.0
    return np.repeat(per_token, k.astype(int))


def window_intervals(
    records: Sequence[RequestRecord],
    *,
    output_tok_s: float | None,
    open_loop: bool,
    concurrency: int | None,
    level: float = 0.95,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    figures: Sequence[str] | None = None,
) -> dict[str, Interval]:
    """The ``level`` intervals of one window's figures from its measured ``records`` (failed requests left
    out, as the figures leave them out); ``output_tok_s`` is the headline throughput the interval is scaled
    to. See the module docstring for each figure's resampling."""
    wanted = set(figures or INTERVAL_FIGURES)
    ok = [r for r in records if r.ok]
    n = len(ok)
    out: dict[str, Interval] = {}
    if n < 2:
        return out
    rng = np.random.default_rng(seed)
    draw = _Resampler(n, resamples, rng)
    counts = draw.counts
    tokens = np.array([r.output_tokens for r in ok], dtype=float)
    e2e = np.array([r.e2e if r.e2e is not None else math.nan for r in ok], dtype=float)

    if "output_tok_s" in wanted and output_tok_s:
        if open_loop:
            poisson = _Resampler(n, resamples, rng, poisson=True).counts
            ratio = (poisson @ tokens) / tokens.sum() if tokens.sum() > 0 else np.full(resamples, math.nan)
        else:
            valid = np.isfinite(e2e) & (e2e > 0)
            if valid.sum() >= 2 and tokens[valid].sum() > 0:
                base = tokens[valid].sum() / e2e[valid].sum()
                ratio = (counts[:, valid] @ tokens[valid]) / (counts[:, valid] @ e2e[valid]) / base
            else:
                ratio = np.full(resamples, math.nan)
        lo, hi, se = _quantiles(ratio * output_tok_s, level, n)
        if math.isfinite(lo):
            out["output_tok_s"] = Interval(output_tok_s, lo, hi, se, n)

    if "accept_len" in wanted:
        terms = [r.spec.accept_terms(r.output_tokens) if r.spec is not None else None for r in ok]
        pairs = [(i, t) for i, t in enumerate(terms) if t is not None]
        if len(pairs) >= 2:
            index = np.array([i for i, _ in pairs])
            num = np.array([t[0] for _, t in pairs], dtype=float)
            den = np.array([t[1] for _, t in pairs], dtype=float)
            sub = counts[:, index]
            with np.errstate(invalid="ignore", divide="ignore"):
                replicates = (sub @ num) / (sub @ den)
            lo, hi, se = _quantiles(replicates, level, len(pairs))
            if math.isfinite(lo):
                out["accept_len"] = Interval(float(num.sum() / den.sum()), lo, hi, se, len(pairs))

    if "per_user_tok_s" in wanted:
        rates = []
        index_list = []
        for i, r in enumerate(ok):
            if r.streamed and r.first_token is not None and r.end is not None and r.output_tokens > 1:
                decode = r.end - r.first_token
                if decode > 0:
                    rates.append((r.output_tokens - 1) / decode)
                    index_list.append(i)
        if len(rates) >= 2:
            values = np.array(rates)
            sub = counts[:, np.array(index_list)]
            with np.errstate(invalid="ignore", divide="ignore"):
                replicates = (sub @ values) / sub.sum(axis=1)
            lo, hi, se = _quantiles(replicates, level, len(rates))
            if math.isfinite(lo):
                out["per_user_tok_s"] = Interval(float(values.mean()), lo, hi, se, len(rates))

    def per_request(name: str, values_s: list[float | None]) -> None:
        index = np.array([i for i, v in enumerate(values_s) if v is not None], dtype=int)
        if index.size < 2:
            return
        values = np.array([values_s[i] for i in index], dtype=float)
        for stat, q in _PERCENTILES.items():
            figure = f"{name}_{stat}"
            if figure in wanted:
                interval = _percentile_interval(values, q, counts[:, index], level)
                if interval is not None and math.isfinite(interval.lo):
                    out[figure] = interval

    per_request("ttft_ms", [r.ttft for r in ok])
    per_request("e2e_ms", [r.e2e for r in ok])
    tpot: list[float | None] = []
    for r in ok:
        if r.streamed and r.first_token is not None and r.end is not None and r.output_tokens > 1:
            tpot.append((r.end - r.first_token) / (r.output_tokens - 1))
        else:
            tpot.append(None)
    per_request("tpot_ms", tpot)

    itl_wanted = {f"itl_ms_{s}": q for s, q in _PERCENTILES.items() if f"itl_ms_{s}" in wanted}
    if itl_wanted:
        gaps = [_gaps_ms(r) if r.streamed else np.empty(0) for r in ok]
        out.update(_pooled_percentiles(gaps, itl_wanted, counts, level))
    _ = concurrency  # the closed loop's ratio needs no C: it cancels in ratio / base
    return {f: out[f] for f in INTERVAL_FIGURES if f in out}


def headline_interval(
    records: Sequence[RequestRecord],
    figure: str,
    *,
    output_tok_s: float | None,
    open_loop: bool,
    level: float = 0.95,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> Interval | None:
    """One figure's interval (only that figure's resamples are computed): what adaptive stopping asks."""
    intervals = window_intervals(
        records,
        output_tok_s=output_tok_s,
        open_loop=open_loop,
        concurrency=None,
        level=level,
        resamples=resamples,
        seed=seed,
        figures=[figure],
    )
    return intervals.get(figure)
