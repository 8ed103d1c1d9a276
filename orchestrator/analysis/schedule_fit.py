"""The draft length per load that a schedule is made of, fitted to the measured figures, and whether it is
expected to beat the best static configuration (issue 48; docs/schedule.md, "The rule").

Pure: measured figures in (each configuration's value and interval at each load), a choice out. Nothing here
reads a run; :func:`orchestrator.analysis.schedule.schedule` gives it the run's answer's figures.

**The fit.** At each load a configuration's figure is scored against the best figure measured there by any
configuration (autoregressive included), ``value / best``, so loads of different throughput count alike; each
load is weighted by how precisely it was measured (the inverse of the median relative width of its intervals,
scaled to a mean of 1: a load of wide intervals moves the fit less). The schedule is the sequence of the
variant's measured configurations, one per load, whose draft length never grows with the load (vLLM's batch
size schedule is meant to shorten drafts as batches fill; a k that went up and down between ties was noise),
with the highest weighted score in total: the isotonic (non-increasing) fit, found exactly by dynamic
programming over loads and draft lengths. A configuration not measured at a load is not chosen there.

**Against the best static configuration.** Each configuration run at every load (the variant's, and
autoregressive, a server of its own) is scored the same way; the best static one has the highest total. The
schedule is recommended only when it is expected to beat it: its picks are not all one configuration, at no
load does the best static configuration beat the schedule's pick beyond noise (the answer's significance rule
where the static one is that load's winner; else their intervals do not overlap), and the interval of its
total over the static one's excludes zero.

**Every estimate has its interval.** A total over another, ``a / b - 1``, is given with a parametric bootstrap
(numpy, as :mod:`orchestrator.analysis.intervals` does): each measured figure is drawn from a normal of its
value and standard error, each load's scores and both totals made again from the draws, and the interval is
the draws' central ``level`` share (a comparison where a figure it needs has no standard error has none).

**Told apart, or not at all.** Where the schedule is not recommended, the best static configuration is, but
only when it is told apart from autoregressive (its total over autoregressive's excludes zero; where it *is*
autoregressive, over the best speculative one; without autoregressive, over the runner-up static one).
Otherwise nothing is: no schedule or static configuration can be told apart at these loads, and the run must
measure longer (``recommend == "none"``).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from orchestrator.analysis.intervals import Difference

__all__ = ["MEASURE_LONGER", "Fit", "Measured", "fit_schedule", "total_gain"]

#: What a run whose configurations cannot be told apart needs (docs/guide.md, "Deciding each load").
MEASURE_LONGER = (
    "measure longer: more requests a point (load.requests or load.duration), more repeats (load.repeats), or "
    'load.decide to spend a budget on the tied loads (docs/guide.md, "Deciding each load")'
)
_RESAMPLES = 2000

#: A load's score where a configuration was not measured: never chosen while a measured one is there.
_UNMEASURED = -1e6


@dataclass(frozen=True)
class Measured:
    """One configuration's figure at one load, with its interval (None where the point has none)."""

    value: float
    lo: float | None = None
    hi: float | None = None
    se: float | None = None


@dataclass(frozen=True)
class Fit:
    """The fitted schedule and the recommendation."""

    loads: list[int]
    picks: list[str]  # per load, the configuration the schedule runs there
    best_here: list[str]  # per load, the best measured configuration of the variant
    weights: list[float]
    score: float  # the schedule's weighted total
    static: str | None  # the best static configuration
    static_score: float
    scores: dict[str, float]  # each static configuration's weighted total
    beaten_at: list[int]  # loads where the best static configuration beats the schedule's pick beyond noise
    recommend: str  # "schedule", "static", or "none" (nothing is told apart: measure longer)
    why: str
    #: The schedule's total over the best static one's, with its interval (None: no static configuration).
    gain: Difference | None = None
    #: What the best static configuration is told apart from (autoregressive, else the runner-up static one).
    reference: str | None = None
    #: The best static configuration's total over the reference's, with its interval.
    static_gain: Difference | None = None

    @property
    def constant(self) -> bool:
        return len(set(self.picks)) <= 1


def _weights(loads: Sequence[int], values: Mapping[tuple[int, str], Measured]) -> list[float]:
    """Per load, the inverse of the median relative interval width of its points, scaled to a mean of 1 (all
    1 where no point has an interval)."""
    raw: list[float | None] = []
    for load in loads:
        widths = [
            (m.hi - m.lo) / m.value
            for (at, _label), m in values.items()
            if at == load and m.lo is not None and m.hi is not None and m.value > 0 and m.hi >= m.lo
        ]
        raw.append(1.0 / max(statistics.median(widths), 1e-3) if widths else None)
    known = [w for w in raw if w is not None]
    if not known:
        return [1.0] * len(loads)
    mean = sum(known) / len(known)
    fill = mean  # a load without intervals counts as an average one
    return [(w if w is not None else fill) / mean for w in raw]


def fit_schedule(
    loads: Sequence[int],
    candidates: Mapping[str, int],
    statics: Sequence[str],
    values: Mapping[tuple[int, str], Measured],
    beats: Callable[[int, str, str], bool],
    *,
    ar: str | None = None,
    level: float = 0.95,
) -> Fit:
    """Fit the schedule (see the module docstring).

    ``loads``: the measured concurrencies, ascending; ``candidates``: the variant's configurations -> their
    draft length (distinct); ``statics``: every configuration that could run alone at every load (the
    candidates and autoregressive, ``ar``); ``values``: (load, configuration) -> its figure; ``beats(load, a,
    b)``: whether ``a`` beats ``b`` beyond noise at ``load`` by the answer; ``level``: the intervals' level."""
    loads = sorted(loads)
    best = {
        load: max((m.value for (at, _l), m in values.items() if at == load and m.value > 0), default=0.0)
        for load in loads
    }

    def score(load: int, label: str) -> float:
        m = values.get((load, label))
        if m is None or best[load] <= 0:
            return _UNMEASURED
        return m.value / best[load]

    weights = _weights(loads, values)
    # Candidates by draft length, longest first: a path may only move to the right (k never grows with the load).
    order = sorted(candidates, key=lambda label: (-candidates[label], label))
    total: list[list[float]] = []
    back: list[list[int]] = []
    for i, load in enumerate(loads):
        row: list[float] = []
        came: list[int] = []
        for j, label in enumerate(order):
            here = weights[i] * score(load, label)
            if i == 0:
                row.append(here)
                came.append(-1)
                continue
            # the best of the previous load's candidates with a k at least this one's (order[:j + 1]);
            # ties go to the longer k there, so the path keeps the shorter k no sooner than the figures say
            prev = max(range(j + 1), key=lambda p: (total[i - 1][p], -p))
            row.append(total[i - 1][prev] + here)
            came.append(prev)
        total.append(row)
        back.append(came)
    # The end: the highest total; a tie goes to the shorter k (the cheaper drafting for the same figure).
    j = max(range(len(order)), key=lambda p: (total[-1][p], p))
    fitted = total[-1][j]
    path = [j]
    for i in range(len(loads) - 1, 0, -1):
        j = back[i][j]
        path.append(j)
    picks = [order[j] for j in reversed(path)]
    best_here = [max(candidates, key=lambda label: (score(load, label), -candidates[label])) for load in loads]

    scores = {s: sum(w * max(score(load, s), 0.0) for w, load in zip(weights, loads, strict=True)) for s in statics}
    static = max(scores, key=lambda s: (scores[s], -candidates.get(s, 0))) if scores else None
    static_score = scores.get(static, 0.0) if static is not None else 0.0
    beaten = [
        load
        for load, pick in zip(loads, picks, strict=True)
        if static is not None and pick != static and _beaten(load, static, pick, values, beats)
    ]
    gain = total_gain(loads, weights, picks, [static] * len(loads), values, level) if static is not None else None
    others = sorted((s for s in statics if s != static), key=lambda s: (-scores[s], candidates.get(s, 0)))
    reference = (ar if static != ar else None) if ar is not None else None
    reference = reference or (
        next((s for s in others if s in candidates), None) if static == ar else (others[0] if others else None)
    )
    static_gain = None
    if static is not None and reference is not None:
        static_gain = total_gain(loads, weights, [static] * len(loads), [reference] * len(loads), values, level)
    over_ar = None  # the schedule against autoregressive too, where that is not the static one it beat
    if ar is not None and static is not None and static != ar:
        over_ar = total_gain(loads, weights, picks, [ar] * len(loads), values, level)
    recommend, why = _decide(picks, static, beaten, gain, ar, reference, static_gain, over_ar)
    return Fit(
        loads=list(loads),
        picks=picks,
        best_here=best_here,
        weights=weights,
        score=fitted,
        static=static,
        static_score=static_score,
        scores=scores,
        beaten_at=beaten,
        recommend=recommend,
        why=why,
        gain=gain,
        reference=reference,
        static_gain=static_gain,
    )


def total_gain(
    loads: Sequence[int],
    weights: Sequence[float],
    a: Sequence[str],
    b: Sequence[str],
    values: Mapping[tuple[int, str], Measured],
    level: float,
    *,
    seed: int = 0,
) -> Difference | None:
    """The weighted total of running ``a[i]`` at ``loads[i]`` over that of ``b``, ``total(a) / total(b) - 1``,
    with its ``level`` interval from a parametric bootstrap (module docstring); None when ``b`` totals nothing.
    Each load's score is a figure over the best figure measured there, drawn again in every replicate."""
    labels = sorted({label for (_load, label) in values})
    index = {label: j for j, label in enumerate(labels)}
    mean = np.full((len(loads), len(labels)), np.nan)
    se = np.zeros_like(mean)
    known = True
    for i, load in enumerate(loads):
        for label in labels:
            m = values.get((load, label))
            if m is None:
                continue
            mean[i, index[label]] = m.value
            if m.se is not None and m.se == m.se and m.se >= 0:
                se[i, index[label]] = m.se
            elif label in (a[i], b[i]):
                known = False  # a compared figure without its standard error: no interval
    w = np.asarray(weights, dtype=float)
    pick_a = np.array([index.get(label, -1) for label in a])
    pick_b = np.array([index.get(label, -1) for label in b])

    def totals(draws: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """draws: (..., loads, labels) -> the two totals (...)."""
        filled = np.where(np.isnan(draws), -np.inf, draws)
        best = filled.max(axis=-1, keepdims=True)
        score = np.where(np.isnan(draws) | (best <= 0), 0.0, np.clip(draws / np.where(best > 0, best, 1.0), 0, None))
        rows = np.arange(len(loads))

        def side(pick: np.ndarray) -> np.ndarray:
            taken = np.where(pick >= 0, score[..., rows, np.clip(pick, 0, None)], 0.0)
            return np.asarray((taken * w).sum(axis=-1))

        return side(pick_a), side(pick_b)

    total_a, total_b = totals(mean)
    if float(total_b) <= 0:
        return None
    relative = float(total_a) / float(total_b) - 1
    if not known:
        return Difference(relative, None, None, level)
    rng = np.random.default_rng(seed)
    draws = mean + se * rng.standard_normal((_RESAMPLES, *mean.shape))
    draw_a, draw_b = totals(draws)
    ratios = draw_a[draw_b > 0] / draw_b[draw_b > 0] - 1
    if not len(ratios):
        return Difference(relative, None, None, level)
    alpha = (1 - level) / 2
    lo, hi = np.quantile(ratios, [alpha, 1 - alpha])
    return Difference(relative, float(lo), float(hi), level)


def gain_text(gain: Difference | None) -> str:
    """``+0.4% [-3.1% … +4.0%]`` (``+0.4%, no interval`` without one)."""
    if gain is None:
        return "no total to compare"
    if gain.lo is None or gain.hi is None:
        return f"{gain.relative:+.1%}, no interval"
    return f"{gain.relative:+.1%} [{gain.lo:+.1%} … {gain.hi:+.1%}]"


def _beaten(
    load: int,
    static: str,
    pick: str,
    values: Mapping[tuple[int, str], Measured],
    beats: Callable[[int, str, str], bool],
) -> bool:
    """Whether ``static`` beats ``pick`` beyond noise at ``load``: the answer's rule where it judged them, else
    their intervals do not overlap."""
    if beats(load, static, pick):
        return True
    a, b = values.get((load, static)), values.get((load, pick))
    return a is not None and b is not None and a.lo is not None and b.hi is not None and a.lo > b.hi


def _decide(
    picks: list[str],
    static: str | None,
    beaten: list[int],
    gain: Difference | None,
    ar: str | None,
    reference: str | None,
    static_gain: Difference | None,
    over_ar: Difference | None,
) -> tuple[str, str]:
    if static is None:
        return "schedule", "no configuration was measured at every load: the schedule is the only choice"
    total = f"the schedule's estimated total {gain_text(gain)} over {static}"
    if len(set(picks)) <= 1:
        schedule_why = (
            f"the fitted schedule runs {static} at every measured load"
            if picks and picks[0] == static
            else f"the fitted schedule runs {picks[0] if picks else '-'} at every measured load, and {static} "
            "scores higher over the loads"
        )
    elif beaten:
        where = ", ".join(f"C={c}" for c in beaten)
        schedule_why = f"{static} beats the schedule's choice beyond noise at {where} ({total})"
    elif gain is not None and gain.significant and gain.relative > 0 and (over_ar is None or _beyond(over_ar)):
        return (
            "schedule",
            f"expected to beat the best static configuration {static} (estimated total {gain_text(gain)})",
        )
    elif gain is not None and gain.significant and gain.relative > 0:
        schedule_why = f"{total}, but the schedule is not told apart from {ar} (its total {gain_text(over_ar)})"
    elif gain is not None and gain.relative > 0:
        schedule_why = f"the schedule is not told apart from {static} (its estimated total {gain_text(gain)})"
    else:
        schedule_why = f"the schedule is not expected to beat {static} (its estimated total {gain_text(gain)})"
    if reference is None:
        return "static", schedule_why
    told = static_gain is not None and _beyond(static_gain)
    against = f"{static} over {reference}: {gain_text(static_gain)}"
    if told:
        return "static", f"{schedule_why}; {against}"
    whom = "autoregressive" if ar is not None else "one another"
    return "none", (
        f"no schedule or static configuration can be told apart from {whom} at these loads; {MEASURE_LONGER}. "
        f"The evidence: {schedule_why}; {against}"
    )


def _beyond(gain: Difference) -> bool:
    """A total told apart from the other's, and above it."""
    return bool(gain.significant) and gain.relative > 0
