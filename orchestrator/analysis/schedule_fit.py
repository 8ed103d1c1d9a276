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
schedule is recommended only when it is expected to beat it: its picks are not all one configuration, its
total is higher, and at no load does the best static configuration beat the schedule's pick beyond noise (the
answer's significance rule where the static one is that load's winner; else their intervals do not overlap).
Otherwise the best static configuration is recommended, and why.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

__all__ = ["Fit", "Measured", "fit_schedule"]

#: A load's score where a configuration was not measured: never chosen while a measured one is there.
_UNMEASURED = -1e6


@dataclass(frozen=True)
class Measured:
    """One configuration's figure at one load, with its interval (None where the point has none)."""

    value: float
    lo: float | None = None
    hi: float | None = None


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
    recommend: str  # "schedule" or "static"
    why: str

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
) -> Fit:
    """Fit the schedule (see the module docstring).

    ``loads``: the measured concurrencies, ascending; ``candidates``: the variant's configurations -> their
    draft length (distinct); ``statics``: every configuration that could run alone at every load (the
    candidates and autoregressive); ``values``: (load, configuration) -> its figure; ``beats(load, a, b)``:
    whether ``a`` beats ``b`` beyond noise at ``load`` by the answer."""
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
    recommend, why = _decide(picks, fitted, static, static_score, beaten)
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
    )


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
    picks: list[str], fitted: float, static: str | None, static_score: float, beaten: list[int]
) -> tuple[str, str]:
    if static is None:
        return "schedule", "no configuration was measured at every load: the schedule is the only choice"
    if len(set(picks)) <= 1:
        if picks and picks[0] == static:
            return "static", f"the fitted schedule runs {static} at every measured load"
        return "static", (
            f"the fitted schedule runs {picks[0] if picks else '-'} at every measured load, and {static} "
            "scores higher over the loads"
        )
    gain = fitted / static_score - 1 if static_score > 0 else float("inf")
    if beaten:
        where = ", ".join(f"C={c}" for c in beaten)
        return "static", (
            f"{static} beats the schedule's choice beyond noise at {where} (the schedule's estimated total "
            f"{gain * 100:+.1f}% over it)"
        )
    if fitted <= static_score:
        return "static", f"the schedule is not expected to beat {static} (its estimated total {gain * 100:+.1f}%)"
    return "schedule", f"expected to beat the best static configuration {static} (estimated total {gain * 100:+.1f}%)"
