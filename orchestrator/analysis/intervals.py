"""From windows to points: every measurement of one load (its repeats and restarts) combined into one row, with
a confidence interval on each figure, and the significance of a difference between two such rows.

Each record is one *window* (one measurement of one load point): its figures and, in ``intervals``, each
figure's interval from a bootstrap over the window's requests (``orchestrator/load/uncertainty.py``). The
frame (``frame.py``) carries them as ``<figure>_lo``, ``<figure>_hi`` and ``<figure>_se`` beside the figure.

:func:`aggregate_windows` makes one row per (host, configuration, mode, load) from its successful windows:

- one window: its figures and intervals as they are (``ci_method`` ``bootstrap over requests``);
- several: the figure is the mean over restarts of the mean over each restart's repeats, and its interval a
  hierarchical bootstrap (Davison and Hinkley, 1997, section 3.8): restarts are resampled, then repeats within
  each, then each window's own figure is drawn from its request-level bootstrap (normal, with its ``se``). At
  each level the deviations from the level's mean are first scaled by sqrt(k / (k - 1)) (k the units at that
  level), which makes the resampled variance the unbiased one, so two or three repeats are not taken for more
  certainty than they give. ``ci_method`` then says ``bootstrap over N repeats (and M restarts) and their
  requests``.

Counts (``requests``, ``errors``, ``output_tokens``, ...) and the errors by kind (``errors_by_kind``) are summed
over the windows, other figures averaged;
``windows`` and ``windows_failed`` count them, ``point_ids`` lists them. A failed window stays a row of its own
(its error and evidence are what the failed-points table shows) and does not enter the combined figure; a
point with no successful window is its last failed window.

:func:`difference` is the significance of "A beats B": the relative difference A / B - 1 with its interval
(delta method on the two figures' standard errors, which are independent measurements); the difference is
*significant* when that interval excludes zero at the chosen level.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np
import pandas as pd

from orchestrator.analysis.agreement import SUMMED_COLUMNS
from orchestrator.analysis.roles import finite as _finite
from orchestrator.load.uncertainty import INTERVAL_FIGURES

__all__ = [
    "COUNT_COLUMNS",
    "INTERVAL_FIGURES",
    "Difference",
    "aggregate_windows",
    "difference",
    "interval_columns",
    "z_value",
]

#: The figures that carry an interval: the window's bootstrap's (``orchestrator/load/uncertainty.py``).
COUNT_COLUMNS = ("requests", "completed", "errors", "output_tokens", "input_tokens", "cancelled")
GROUP_KEYS = ["host", "workload", "label", "mode", "load"]
_RESAMPLES = 2000


def interval_columns(figure: str) -> tuple[str, str, str]:
    return f"{figure}_lo", f"{figure}_hi", f"{figure}_se"


def z_value(level: float) -> float:
    """The two-sided normal quantile of ``level`` (1.96 at 0.95)."""
    return NormalDist().inv_cdf(0.5 + level / 2)


def _inflated(values: np.ndarray) -> np.ndarray:
    """Deviations from each row's mean scaled by sqrt(k / (k - 1)), k the row's length (see the module docstring)."""
    k = values.shape[-1]
    if k < 2:
        return values
    mean = values.mean(axis=-1, keepdims=True)
    return mean + (values - mean) * math.sqrt(k / (k - 1))


def _drawn_sum(values: np.ndarray, drawn: np.ndarray) -> np.ndarray:
    """``np.take(values, drawn).sum(axis=-1)``, bit for bit, in about a quarter of the time: numpy's reduction
    over a last axis of a few elements is slow, and the gathered array is as large as ``drawn``. numpy adds a
    short last axis in order from its first element, as this loop does (tests/unit/test_interval_scale.py holds
    the two equal); from 8 draws the sum is left to numpy, whose pairwise summation starts there."""
    k = drawn.shape[-1]
    if k >= 8:
        return np.take(values, drawn).sum(axis=-1)
    total = np.take(values, drawn[..., 0])
    for j in range(1, k):
        total += np.take(values, drawn[..., j])
    return total


def _hierarchical(
    values: np.ndarray, ses: np.ndarray, shape: tuple[int, ...], level: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(estimate, lo, hi, se) of each of G groups of windows that share one ``shape`` (the number of windows of
    each restart, in restart order): ``values`` and ``ses`` are G x sum(shape), a restart's windows side by
    side. Every group is resampled at once (numpy), so the cost is a few array operations per shape, not a
    Python loop per point."""
    groups, r = values.shape[0], len(shape)
    edges = np.cumsum((0, *shape))
    inflated = [_inflated(values[:, edges[j] : edges[j + 1]]) for j in range(r)]
    spread = [ses[:, edges[j] : edges[j + 1]] for j in range(r)]
    means = np.column_stack([values[:, edges[j] : edges[j + 1]].mean(axis=1) for j in range(r)])
    estimate = means.mean(axis=1)
    shift = _inflated(means) - means  # the restart level's inflation, carried by each restart's windows
    # Which restart each of the r draws of a replicate resamples (with one restart: that one, no draw needed).
    picks = rng.integers(0, r, size=(groups, _RESAMPLES, r)) if r > 1 else None
    replicates = np.zeros((groups, _RESAMPLES))
    for j, k in enumerate(shape):
        # The repeats within the restart, drawn with replacement: their values' mean, plus each drawn window's
        # own request-level noise (normal, with its se): the mean of k such normals is one normal with
        # sd sqrt(sum se^2) / k, so one draw per replicate stands for k.
        inner = rng.integers(0, k, size=(groups, _RESAMPLES, r, k), dtype=np.int32)
        inner += (np.arange(groups, dtype=np.int32) * k)[:, None, None, None]
        centre = _drawn_sum(inflated[j].ravel(), inner) / k
        noise = np.sqrt(_drawn_sum((spread[j] ** 2).ravel(), inner)) / k
        # centre + noise * z + shift, the same operations in the same order, in place
        draws = rng.standard_normal(centre.shape)
        draws *= noise
        draws += centre
        draws += shift[:, j, None, None]
        replicates += draws[:, :, 0] if picks is None else np.where(picks == j, draws, 0.0).sum(axis=2)
    replicates /= r
    alpha = (1 - level) / 2
    lo, hi = np.quantile(replicates, [alpha, 1 - alpha], axis=1)
    return estimate, lo, hi, replicates.std(axis=1, ddof=1)


# Elements of one batch's largest array (draws: groups x resamples x restarts x repeats): about 16 MB each.
_BATCH_ELEMENTS = 2_000_000


def _bootstrap_all(
    jobs: list[list[tuple[int, float, float]]], level: float, rng: np.random.Generator
) -> list[tuple[float, float, float, float]]:
    """(estimate, lo, hi, se) of each job, a job being one figure of one point as its windows (restart, value,
    se): jobs of one shape are resampled together, in batches of bounded memory."""
    out: list[tuple[float, float, float, float]] = [(math.nan, math.nan, math.nan, math.nan)] * len(jobs)
    by_shape: dict[tuple[int, ...], list[int]] = {}
    flat: list[list[tuple[float, float]]] = []
    for index, windows in enumerate(jobs):
        by_restart: dict[int, list[tuple[float, float]]] = {}
        for restart, value, se in windows:
            by_restart.setdefault(restart, []).append((value, se))
        ordered = [by_restart[restart] for restart in sorted(by_restart)]
        flat.append([window for restart in ordered for window in restart])
        by_shape.setdefault(tuple(len(restart) for restart in ordered), []).append(index)
    for shape, members in by_shape.items():
        size = max(1, _BATCH_ELEMENTS // (_RESAMPLES * len(shape) * max(shape)))
        for first in range(0, len(members), size):
            batch = members[first : first + size]
            data = np.array([flat[i] for i in batch], dtype=float)
            found = _hierarchical(data[:, :, 0], data[:, :, 1], shape, level, rng)
            for position, index in enumerate(batch):
                out[index] = (
                    float(found[0][position]),
                    float(found[1][position]),
                    float(found[2][position]),
                    float(found[3][position]),
                )
    return out


def _method(windows: int, restarts: int) -> str:
    if windows <= 1:
        return "bootstrap over requests"
    if restarts > 1:
        per = windows / restarts
        repeats = f"{per:g} repeats each" if per != 1 else "one window each"
        return f"bootstrap over {restarts} restarts ({repeats}) and their requests"
    return f"bootstrap over {windows} repeats and their requests"


def _errors_by_kind(windows: list[dict[str, Any]]) -> str | None:
    """The windows' ``errors_by_kind`` (JSON text) summed kind by kind, as the counts are summed: every
    repeat's errors, not the first window's alone."""
    total: dict[str, int] = {}
    for window in windows:
        text = window.get("errors_by_kind")
        try:
            kinds = json.loads(text) if isinstance(text, str) and text else {}
        except json.JSONDecodeError:
            kinds = {}
        for kind, count in kinds.items() if isinstance(kinds, dict) else ():
            if isinstance(count, int | float) and not isinstance(count, bool):
                total[str(kind)] = total.get(str(kind), 0) + int(count)
    return json.dumps(dict(sorted(total.items())), sort_keys=True) if total else None


def _mean(values: list[float]) -> float:
    """``float(np.mean(values))`` of a few finite floats, bit for bit, without numpy's cost per call (about
    30 us; a point's every numeric column was one call: 185,000 at 4,875 points). Under 8 values numpy's
    pairwise sum adds them in order from 0.0, as this loop does; 8 or more are numpy's. A loop, not ``sum()``:
    from Python 3.12 ``sum`` of floats compensates its rounding, and would then differ from numpy's."""
    if len(values) >= 8:
        return float(np.mean(values))
    total = 0.0
    for value in values:
        total += value
    return total / len(values)


def aggregate_windows(frame: pd.DataFrame, *, level: float = 0.95, seed: int = 0) -> pd.DataFrame:
    """One row per (host, configuration, mode, load): see the module docstring. ``frame`` is the window frame
    (``tidy_frame``); alias rows are aggregated like the rows they stand for."""
    if frame.empty:
        out = frame.copy()
        for column in ("windows", "windows_failed", "ci_method", "ci_level", "point_ids"):
            if column not in out.columns:
                out[column] = pd.Series(dtype=object)
        return out
    if "workload" not in frame.columns:
        frame = frame.assign(workload="")
    rng = np.random.default_rng(seed)
    rows: list[dict[str, Any]] = []
    jobs: list[list[tuple[int, float, float]]] = []  # the windows of one figure of one point
    wanted: list[tuple[dict[str, Any], str]] = []  # the row and figure each job's interval goes to
    numeric = [c for c in frame.columns if pd.api.types.is_numeric_dtype(frame[c]) and c != "load"]
    # The frame made into records once, each group taking its rows by position: a to_dict per group cost
    # tens of milliseconds each on a wide frame (bench/scale.py).
    every: list[dict[str, Any]] = [{str(k): v for k, v in r.items()} for r in frame.to_dict("records")]
    for positions in frame.groupby(GROUP_KEYS, sort=False, dropna=False).indices.values():
        records: list[dict[str, Any]] = [every[i] for i in positions]
        ok = [r for r in records if r.get("status") == "ok"]
        failed = [r for r in records if r.get("status") != "ok"]
        if not ok:
            last = dict(records[-1])
            last.update(
                windows=0,
                windows_failed=len(failed),
                ci_method=None,
                ci_level=level,
                point_ids=[str(r.get("point_id")) for r in records],
            )
            rows.append(last)
            continue
        for window in failed:
            rows.append(
                {**window, "windows": 0, "windows_failed": 1, "ci_method": None, "ci_level": level, "point_ids": None}
            )
        base = dict(ok[0])
        restarts = sorted({int(r.get("restart") or 1) for r in ok})
        if len(ok) > 1:
            for column in numeric:
                values = [_finite(r.get(column)) for r in ok]
                present = [v for v in values if v is not None]
                if column in COUNT_COLUMNS or column in SUMMED_COLUMNS:
                    base[column] = sum(present) if present else None
                elif present:
                    base[column] = _mean(present)
            for figure in (*INTERVAL_FIGURES, "goodput"):  # goodput: analysis/goodput.py, when the run has it
                se_col = interval_columns(figure)[2]
                windows = []
                for r in ok:
                    value = _finite(r.get(figure))
                    if value is None:
                        continue
                    se = _finite(r.get(se_col))
                    windows.append((int(r.get("restart") or 1), value, se if se is not None else 0.0))
                if len(windows) >= 2:  # resampled below, every point's at once
                    jobs.append(windows)
                    wanted.append((base, figure))
            base["finished_at"] = ok[-1].get("finished_at")
            if "errors_by_kind" in base:
                base["errors_by_kind"] = _errors_by_kind(ok)
        base["windows"] = len(ok)
        base["windows_failed"] = len(failed)
        base["ci_method"] = _method(len(ok), len(restarts))
        base["ci_level"] = level
        base["point_ids"] = [str(r.get("point_id")) for r in ok]
        # Any window measured beside another sweep makes the point so (not only the first window's say).
        beside = list(dict.fromkeys(r["overlapped_with"] for r in ok if isinstance(r.get("overlapped_with"), str)))
        beside = [name for name in beside if name]
        if "overlapped_with" in base:
            base["overlapped_with"] = "; ".join(beside) or None
        if "machine_load" in base:  # the busiest of its windows
            loads = [float(r["machine_load"]) for r in ok if isinstance(r.get("machine_load"), int | float)]
            base["machine_load"] = max((v for v in loads if v == v), default=None)
        rows.append(base)
    for (base, figure), (estimate, lo, hi, se) in zip(wanted, _bootstrap_all(jobs, level, rng), strict=True):
        lo_col, hi_col, se_col = interval_columns(figure)
        base[figure], base[lo_col], base[hi_col], base[se_col] = estimate, lo, hi, se
    extra = [c for c in ("windows", "windows_failed", "ci_method", "ci_level", "point_ids") if c not in frame.columns]
    out = pd.DataFrame(rows, columns=[*frame.columns, *extra])
    return out.reset_index(drop=True)


@dataclass(frozen=True)
class Difference:
    """``a / b - 1`` with its interval; ``significant`` when the interval excludes zero (None: no interval)."""

    relative: float
    lo: float | None
    hi: float | None
    level: float

    @property
    def significant(self) -> bool | None:
        if self.lo is None or self.hi is None:
            return None
        return self.lo > 0 or self.hi < 0

    def describe(self) -> str:
        if self.lo is None or self.hi is None:
            return f"{self.relative:+.1%}"
        return f"{self.lo:+.1%} … {self.hi:+.1%}"


def difference(
    a: float | None, se_a: float | None, b: float | None, se_b: float | None, *, level: float = 0.95
) -> Difference | None:
    """The relative difference of two independent figures and its ``level`` interval (delta method): None when
    either figure is missing or ``b`` is zero."""
    a, b = _finite(a), _finite(b)
    if a is None or b is None or b == 0:
        return None
    relative = a / b - 1
    sa, sb = _finite(se_a), _finite(se_b)
    if sa is None or sb is None:
        return Difference(relative, None, None, level)
    se = math.sqrt((sa / b) ** 2 + (a * sb / b**2) ** 2)
    z = z_value(level)
    return Difference(relative, relative - z * se, relative + z * se, level)
