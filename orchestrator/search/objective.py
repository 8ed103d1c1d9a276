"""A candidate's score under the objective, read from its records (and, for goodput, its requests).

Each finished window (record) gives the objective's figure and every constrained figure with its standard
error: the figure's bootstrap interval from the record (``intervals``, :mod:`orchestrator.load.uncertainty`)
where it has one; goodput from the window's ``requests/<point>.jsonl`` (the requests meeting every
per-request limit, per second of the window, as vLLM and AIPerf define it: see :mod:`orchestrator.experiment.search`)
with a binomial standard error; tokens per joule from the window's GPU telemetry. Several windows of one
configuration at one load (repeats, or the rungs of successive halving) are pooled by inverse variance. A
mix of loads weighs each load's figure by its weight.

A constraint *holds* when its interval lies within the limit, *fails* when the interval lies beyond it, and is
*uncertain* otherwise; feasibility decisions use the point value, reports say which of the three it was.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator.analysis.intervals import z_value
from orchestrator.runs.reading import parse_json

if TYPE_CHECKING:
    from orchestrator.experiment.search import LimitSpec, ObjectiveSpec
    from orchestrator.runs.store import Record

__all__ = [
    "ConstraintCheck",
    "LevelScore",
    "Measured",
    "Score",
    "check_constraint",
    "load_key",
    "lossless_check",
    "score_records",
    "window_figure",
]


def load_key(mode: str, value: float | None) -> str:
    """The label of one load level: ``C=16`` or ``rate=4/s``."""
    if value is None:
        return "?"
    return f"C={int(value)}" if mode == "concurrency" else f"rate={value:g}/s"


@dataclass(frozen=True)
class Measured:
    """One figure: value and standard error (None: unknown)."""

    value: float
    se: float | None


@dataclass(frozen=True)
class ConstraintCheck:
    figure: str
    value: float | None
    lo: float | None
    hi: float | None
    max: float | None
    min: float | None
    #: ``holds`` | ``fails`` | ``uncertain`` | ``unknown`` (no figure measured)
    status: str

    @property
    def met(self) -> bool:
        """The point value is within the limit (``uncertain`` counts as met on its value)."""
        if self.value is None:
            return False
        return (self.max is None or self.value <= self.max) and (self.min is None or self.value >= self.min)

    @property
    def excess(self) -> float:
        """How far beyond the limit the value is, relative to the limit (0 within)."""
        if self.value is None:
            return 1.0
        if self.max is not None and self.value > self.max:
            return (self.value - self.max) / max(abs(self.max), 1e-9)
        if self.min is not None and self.value < self.min:
            return (self.min - self.value) / max(abs(self.min), 1e-9)
        return 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "figure": self.figure,
            "value": _r(self.value),
            "lo": _r(self.lo),
            "hi": _r(self.hi),
            "max": self.max,
            "min": self.min,
            "status": self.status,
        }


@dataclass(frozen=True)
class LevelScore:
    load: str
    value: float | None
    se: float | None
    windows: int
    constraints: tuple[ConstraintCheck, ...] = ()


@dataclass(frozen=True)
class Score:
    """A candidate's objective (the mix's weighted figure), its interval and its constraints."""

    figure: str
    sense: str
    value: float | None
    se: float | None
    level: float
    levels: tuple[LevelScore, ...] = field(default_factory=tuple)

    @property
    def lo(self) -> float | None:
        if self.value is None or self.se is None:
            return None
        return self.value - z_value(self.level) * self.se

    @property
    def hi(self) -> float | None:
        if self.value is None or self.se is None:
            return None
        return self.value + z_value(self.level) * self.se

    @property
    def constraints(self) -> list[ConstraintCheck]:
        return [c for lv in self.levels for c in lv.constraints]

    @property
    def feasible(self) -> bool:
        return self.value is not None and all(c.met for c in self.constraints)

    @property
    def violation(self) -> float:
        return sum(c.excess for c in self.constraints) + (1.0 if self.value is None else 0.0)

    def gain(self) -> float:
        """The value as a figure to maximise (minimised objectives negated); -inf without a value."""
        if self.value is None:
            return -math.inf
        return self.value if self.sense == "max" else -self.value

    def rank_key(self) -> tuple[int, float, float]:
        """Sorts best first: feasible before infeasible, then by objective, then by violation."""
        return (0 if self.feasible else 1, self.violation if not self.feasible else 0.0, -self.gain())

    def worse_beyond_noise(self, other: Score) -> bool:
        """This score is below ``other`` by more than the noise of both (their intervals do not overlap)."""
        if self.value is None:
            return True
        if other.value is None:
            return False
        if self.sense == "max":
            return self.hi is not None and other.lo is not None and self.hi < other.lo
        return self.lo is not None and other.hi is not None and self.lo > other.hi

    def to_dict(self) -> dict[str, Any]:
        return {
            "figure": self.figure,
            "sense": self.sense,
            "value": _r(self.value),
            "lo": _r(self.lo),
            "hi": _r(self.hi),
            "se": _r(self.se),
            "feasible": self.feasible,
            "levels": [
                {
                    "load": lv.load,
                    "value": _r(lv.value),
                    "se": _r(lv.se),
                    "windows": lv.windows,
                    "constraints": [c.to_dict() for c in lv.constraints],
                }
                for lv in self.levels
            ],
        }


def _r(value: float | None, digits: int = 4) -> float | None:
    return None if value is None or not math.isfinite(value) else round(value, digits)


def _interval_se(record: Record, figure: str) -> float | None:
    figures = (record.intervals or {}).get("figures") or {}
    entry = figures.get(figure)
    if isinstance(entry, Mapping) and entry.get("se") is not None:
        return float(entry["se"])
    return None


def _requests(run_dir: Path | None, record: Record) -> list[dict[str, Any]]:
    if run_dir is None or not record.requests_file:
        return []
    path = run_dir / record.requests_file
    rows: list[dict[str, Any]] = []
    try:
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                rows.append(parse_json(line))
            except json.JSONDecodeError:
                continue
    except OSError:
        return []
    return rows


def _goodput(record: Record, limits: Mapping[str, float], run_dir: Path | None) -> Measured | None:
    """Good requests per second of the window (vLLM's ``request_goodput``, AIPerf's ``goodput``): the answer's
    definition (``orchestrator/analysis/goodput.py``), so the search scores a window as every output shows it."""
    from orchestrator.analysis.goodput import window_goodput

    found = window_goodput(_requests(run_dir, record), limits, (record.client or {}).get("duration_s"))
    return None if found is None else Measured(*found)


def window_figure(
    record: Record, figure: str, *, goodput: Mapping[str, float] | None = None, run_dir: Path | None = None
) -> Measured | None:
    """``figure`` of one ok window with its standard error (None when the window does not have it)."""
    client = record.client or {}
    if figure == "goodput":
        return _goodput(record, goodput or {}, run_dir)
    if figure == "tokens_per_joule":
        joules = (record.telemetry or {}).get("tokens_per_joule")
        return Measured(float(joules), None) if joules is not None else None
    if figure == "error_rate":
        total = client.get("requests") or 0
        if not total:
            return None
        share = (client.get("errors") or 0) / total
        return Measured(share, math.sqrt(max(share * (1 - share), 1.0 / total) / total))
    se = _interval_se(record, figure)
    figures = (record.intervals or {}).get("figures") or {}
    value: Any = None
    if isinstance(figures.get(figure), Mapping):
        value = figures[figure].get("value")
    if value is None:
        if figure == "accept_len":
            value = (record.server or {}).get("accept_len")
        elif figure in client:
            value = client.get(figure)
        else:
            stem, _, pct = figure.rpartition("_")
            nested = client.get(stem)
            value = nested.get(pct) if isinstance(nested, Mapping) else None
    if value is None:
        return None
    return Measured(float(value), se)


def _pool(values: Sequence[Measured]) -> Measured | None:
    """Windows of one configuration at one load, pooled: inverse-variance when every window has an error."""
    if not values:
        return None
    if all(v.se is not None and v.se > 0 for v in values):
        weights = [1.0 / (v.se or 1.0) ** 2 for v in values]
        total = sum(weights)
        mean = sum(w * v.value for w, v in zip(weights, values, strict=True)) / total
        return Measured(mean, math.sqrt(1.0 / total))
    mean = sum(v.value for v in values) / len(values)
    if len(values) > 1:
        spread = math.sqrt(sum((v.value - mean) ** 2 for v in values) / (len(values) - 1) / len(values))
        return Measured(mean, spread)
    return Measured(mean, values[0].se)


def lossless_check(verdicts: Sequence[bool | None]) -> ConstraintCheck:
    """The lossless constraint from each window's verdict (None: unknown)."""
    known = [v for v in verdicts if v is not None]
    ok = None if not known else all(known)
    return ConstraintCheck(
        "lossless",
        None if ok is None else float(ok),
        None,
        None,
        None,
        1.0,
        "unknown" if ok is None else ("holds" if ok else "fails"),
    )


def check_constraint(
    figure: str,
    limit: LimitSpec,
    measured: Measured | None,
    z: float,
    interval: tuple[float, float] | None = None,
) -> ConstraintCheck:
    """The constraint on ``figure`` judged on its interval: ``interval`` where the answer gives the point one
    (``orchestrator/search/recommend.py``), else the measured value +- z * se."""
    if measured is None:
        return ConstraintCheck(figure, None, None, None, limit.max, limit.min, "unknown")
    lo = hi = None
    if interval is not None:
        lo, hi = interval
    elif measured.se is not None:
        lo, hi = measured.value - z * measured.se, measured.value + z * measured.se
    low, high = (lo, hi) if lo is not None else (measured.value, measured.value)
    assert high is not None and low is not None
    inside = (limit.max is None or high <= limit.max) and (limit.min is None or low >= limit.min)
    outside = (limit.max is not None and low > limit.max) or (limit.min is not None and high < limit.min)
    status = "holds" if inside else "fails" if outside else "uncertain"
    return ConstraintCheck(figure, measured.value, lo, hi, limit.max, limit.min, status)


def score_records(
    records: Iterable[Record],
    objective: ObjectiveSpec,
    loads: Sequence[tuple[str, float, float]],
    *,
    run_dir: Path | None = None,
    level: float = 0.95,
    lossless: Mapping[str, bool | None] | None = None,
    workload: str | None = None,
) -> Score:
    """The score of one configuration from its ok records at ``loads`` (``(mode, value, weight)``);
    ``lossless`` maps a deployment id to whether its answers matched the autoregressive baseline's; with
    ``workload``, only that workload's records count (``load.workloads``: one figure per workload)."""
    from orchestrator.experiment.search import LimitSpec

    z = z_value(level)
    by_load: dict[str, list[Record]] = {}
    for record in records:
        if record.status != "ok" or (workload is not None and getattr(record, "workload", None) != workload):
            continue
        level_value = record.concurrency if record.mode == "concurrency" else record.rate
        by_load.setdefault(load_key(record.mode, level_value), []).append(record)
    levels: list[LevelScore] = []
    total = 0.0
    variance: float | None = 0.0
    missing = False
    for mode, value, weight in loads:
        key = load_key(mode, value)
        windows = by_load.get(key, [])

        def pooled(figure: str, windows: list[Record] = windows) -> Measured | None:
            found = [
                m
                for r in windows
                if (m := window_figure(r, figure, goodput=objective.goodput, run_dir=run_dir)) is not None
            ]
            return _pool(found)

        main = pooled(objective.figure)
        checks: list[ConstraintCheck] = []
        for name, limit in objective.constraints.items():
            if name == "lossless":
                if limit is True:
                    checks.append(lossless_check([(lossless or {}).get(r.deployment_id) for r in windows]))
                continue
            assert isinstance(limit, LimitSpec)
            checks.append(check_constraint(name, limit, pooled(name), z))
        if main is None:
            missing = True
        else:
            total += weight * main.value
            if variance is not None:
                variance = None if main.se is None else variance + (weight * main.se) ** 2
        levels.append(
            LevelScore(key, main.value if main else None, main.se if main else None, len(windows), tuple(checks))
        )
    se = None if missing or variance is None else math.sqrt(variance)
    return Score(objective.figure, objective.sense, None if missing else total, se, level, tuple(levels))
