"""Comparisons inside one run: every point against its baselines, the winner at each load, the Pareto front.

A point is compared only with baselines measured on the same host at the same load (mode and concurrency or
rate) with the same workload (``load.workloads``): comparisons never cross machines, load levels or
workloads. Throughput is the client's ``output_tok_s`` (total
output tokens per second of the load window) unless a caller names another column.

Columns added by ``add_baseline_comparisons``:

- ``ar_<metric>``, ``linear_<metric>``, ``ar_accept_len``, ``linear_accept_len``: the baselines' figures;
- ``speedup_vs_ar`` = metric / AR metric, ``speedup_vs_linear`` = metric / linear metric, each with its
  standard error ``speedup_vs_ar_se`` / ``speedup_vs_linear_se`` (delta method on the two independent
  figures' ``<metric>_se``: ratio x sqrt((se / metric)^2 + (se_base / base)^2); 0 on the baseline's own
  points, whose ratio is 1 by definition; none where either figure has no interval), so ``compare`` judges
  a speedup's move against its noise as it judges the throughput's (``orchestrator/analysis/diff.py``);
- ``accept_len_vs_linear`` = accept length / the linear baseline's accept length.

Winners (``best_per_load``) are ranked by point estimate and judged by a winner rule: with
:func:`significance` (what :func:`orchestrator.analysis.result.analyse` uses) the best configuration *beats*
the runner-up only when the interval of their relative difference excludes zero at the chosen level
(``orchestrator/analysis/intervals.py``: the two figures' standard errors); otherwise the two are
indistinguishable at that load, and ``tied`` names every configuration the best one cannot be told apart
from. The Pareto front follows the same rule: a point leaves the front only when another is at least as good
on both figures and better beyond noise on one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from orchestrator.analysis.intervals import difference, z_value
from orchestrator.analysis.roles import BaselineRoles
from orchestrator.analysis.statuses import MEASURED

__all__ = [
    "COMPARISON_COLUMNS",
    "JOIN_KEYS",
    "THROUGHPUT",
    "Verdict",
    "WinnerRule",
    "add_baseline_comparisons",
    "baseline_rows",
    "best_per_load",
    "pareto_front",
    "point_estimate",
    "significance",
]

THROUGHPUT = "output_tok_s"
JOIN_KEYS = ["host", "workload", "mode", "load"]
COMPARISON_COLUMNS = ["speedup_vs_ar", "speedup_vs_linear", "accept_len_vs_linear"]


def _ok(frame: pd.DataFrame, statuses: tuple[str, ...] = ("ok",)) -> pd.Series:
    return frame["status"].isin(statuses)


def with_workload(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with a ``workload`` column ("" where a frame made by hand has none)."""
    return frame if "workload" in frame.columns else frame.assign(workload="")


def baseline_rows(frame: pd.DataFrame, variant: str | None) -> pd.DataFrame:
    """The measured, successful points of one baseline variant (records marked ``baseline``; if the run has
    none so marked, points of that variant name)."""
    if variant is None or frame.empty:
        return frame.iloc[0:0]
    of_variant = (frame["variant"] == variant) & frame["alias_of"].isna() & _ok(frame)
    marked = frame[of_variant & frame["baseline"].astype(bool)]
    return marked if not marked.empty else frame[of_variant]


def add_baseline_comparisons(frame: pd.DataFrame, roles: BaselineRoles, *, metric: str = THROUGHPUT) -> pd.DataFrame:
    """``frame`` with its baselines' figures and the ratios to them (see the module docstring)."""
    frame = with_workload(frame)
    out = frame.copy()
    for column in (metric, "accept_len", f"{metric}_se"):
        if column not in out.columns:
            out[column] = float("nan")
    for role, variant in (("ar", roles.ar), ("linear", roles.linear)):
        base = baseline_rows(frame, variant)
        renamed = {metric: f"{role}_{metric}", "accept_len": f"{role}_accept_len"}
        renamed[f"{metric}_se"] = f"{role}_{metric}_se"
        columns = JOIN_KEYS + [c for c in (metric, "accept_len", f"{metric}_se") if c in base.columns]
        table = base.drop_duplicates(JOIN_KEYS, keep="last")[columns].rename(columns=renamed)
        out = out.drop(columns=[c for c in renamed.values() if c in out.columns]).merge(table, on=JOIN_KEYS, how="left")
        for column in renamed.values():
            if column not in out.columns:
                out[column] = float("nan")
    value = pd.to_numeric(out[metric], errors="coerce")
    ok = _ok(out, MEASURED)
    out["speedup_vs_ar"] = (value / pd.to_numeric(out[f"ar_{metric}"], errors="coerce")).where(ok)
    out["speedup_vs_linear"] = (value / pd.to_numeric(out[f"linear_{metric}"], errors="coerce")).where(ok)
    relative_se = pd.to_numeric(out[f"{metric}_se"], errors="coerce") / value
    for role, variant in (("ar", roles.ar), ("linear", roles.linear)):
        baseline = pd.to_numeric(out[f"{role}_{metric}"], errors="coerce")
        base_relative_se = pd.to_numeric(out[f"{role}_{metric}_se"], errors="coerce") / baseline
        ratio = out[f"speedup_vs_{role}"]
        se = ratio * np.sqrt(relative_se**2 + base_relative_se**2)
        out[f"speedup_vs_{role}_se"] = se.where(out["variant"] != variant, 0.0).where(ratio.notna())
    accept = pd.to_numeric(out["accept_len"], errors="coerce")
    out["accept_len_vs_linear"] = (accept / pd.to_numeric(out["linear_accept_len"], errors="coerce")).where(ok)
    return out


@dataclass(frozen=True)
class Verdict:
    """What a winner rule says about the two best points of one load: whether the best one is told apart from
    the runner-up (``None``: the rule cannot say), and on what ground (``basis``, shown to the reader)."""

    decided: bool | None
    basis: str
    #: The interval of the relative difference best / runner-up - 1, when the rule has one.
    low: float | None = None
    high: float | None = None


#: ``rule(best_row, runner_up_row, metric) -> Verdict``; rows are the group's frame rows (pandas Series),
#: holding the columns ``best_per_load`` shows and their intervals (``<figure>_lo``/``_hi``/``_se``).
WinnerRule = Callable[[pd.Series, pd.Series, str], Verdict]


def point_estimate(best: pd.Series, runner_up: pd.Series, metric: str) -> Verdict:
    """The rule until intervals exist: the higher point estimate wins, and nothing is said about noise."""
    return Verdict(decided=None, basis="point estimates")


def significance(level: float = 0.95) -> WinnerRule:
    """The rule of significance at ``level``: decided when the interval of best / runner-up - 1 excludes zero
    (from the figures' ``<metric>_se``); not judged when either has no interval."""

    def rule(best: pd.Series, runner_up: pd.Series, metric: str) -> Verdict:
        diff = difference(
            best.get(metric),
            best.get(f"{metric}_se"),
            runner_up.get(metric),
            runner_up.get(f"{metric}_se"),
            level=level,
        )
        if diff is None or diff.significant is None:
            return Verdict(decided=None, basis="point estimates (no interval)")
        return Verdict(decided=bool(diff.significant), basis=f"{level:.0%} intervals", low=diff.lo, high=diff.hi)

    return rule


def best_per_load(
    frame: pd.DataFrame,
    *,
    metric: str = THROUGHPUT,
    rule: WinnerRule = point_estimate,
    statuses: tuple[str, ...] = ("ok",),
) -> pd.DataFrame:
    """The configuration with the highest ``metric`` at each (host, mode, load), baselines included, with
    the runner-up, the margin (best / runner-up - 1) and what ``rule`` says of them: ``decided`` (True: told
    apart, False: within noise, None: not judged), its ``basis`` and the margin's interval (``margin_lo``,
    ``margin_hi``), and ``tied``: the configurations the rule cannot tell from the best one (each judged
    against it), and ``beats``: the others measured there, fastest first. The ranking is by point estimate.
    Only points of ``statuses`` are ranked (a ``degraded`` point only when the caller asks for it)."""
    shown = ["host", "workload", "mode", "load", "load_label", "label", "variant", metric]
    shown += ["per_user_tok_s", "accept_len"]
    intervals = [f"{metric}_lo", f"{metric}_hi", f"{metric}_se", "ci_method"]
    columns = [
        *shown,
        *intervals,
        *COMPARISON_COLUMNS,
        "runner_up",
        "margin",
        "margin_lo",
        "margin_hi",
        "decided",
        "basis",
        "tied",
        "beats",
    ]
    frame = with_workload(frame)
    candidates = frame[_ok(frame, statuses) & frame["alias_of"].isna()].copy()
    if metric not in candidates.columns:
        return pd.DataFrame(columns=columns)
    candidates[metric] = pd.to_numeric(candidates[metric], errors="coerce")
    # A point without a finite figure never wins (Infinity is no measurement; runs/plausible.py refuses it).
    candidates = candidates[candidates[metric].abs() < float("inf")]
    # The columns a row shows and a rule reads (the metric and its interval) only: the rows of a group are
    # walked one by one, and a row of the whole wide frame costs far more to make (bench/RESULTS-scale.md).
    keep = [*JOIN_KEYS, *shown, *intervals, *COMPARISON_COLUMNS, *(f"{c}_se" for c in shown)]
    candidates = candidates[[c for c in dict.fromkeys(keep) if c in candidates.columns]]
    rows = []
    for _key, group in candidates.groupby(JOIN_KEYS, sort=True):
        ranked = group.sort_values(metric, ascending=False, kind="stable")
        best = ranked.iloc[0]
        row = {c: best.get(c) for c in [*shown, *intervals, *COMPARISON_COLUMNS]}
        row["runner_up"], row["margin"], row["decided"], row["basis"] = None, float("nan"), None, "only one point"
        row["margin_lo"], row["margin_hi"], row["tied"], row["beats"] = float("nan"), float("nan"), [], []
        if len(ranked) > 1:
            second = ranked.iloc[1]
            row["runner_up"] = second["label"]
            if second[metric] > 0:
                row["margin"] = best[metric] / second[metric] - 1
            verdict = rule(best, second, metric)
            row["decided"], row["basis"] = verdict.decided, verdict.basis
            if verdict.low is not None and verdict.high is not None:
                row["margin_lo"], row["margin_hi"] = verdict.low, verdict.high
            row["tied"] = [
                str(other["label"])
                for _index, other in ranked.iloc[1:].iterrows()
                if rule(best, other, metric).decided is False
            ]
            tied = {str(x) for x in row["tied"] or []}
            row["beats"] = [
                label
                for label in dict.fromkeys(str(x) for x in ranked.iloc[1:]["label"])
                if label != best["label"] and label not in tied
            ]
        rows.append(row)
    out = pd.DataFrame(rows, columns=columns)
    # Python's True/False/None, never numpy's: readers test ``decided is False``.
    out["decided"] = pd.Series([r["decided"] for r in rows], index=out.index, dtype=object)
    return out


def pareto_front(
    frame: pd.DataFrame,
    *,
    x: str = "per_user_tok_s",
    y: str = THROUGHPUT,
    by: list[str] | None = None,
    level: float | None = None,
    statuses: tuple[str, ...] = ("ok",),
) -> pd.DataFrame:
    """The points no other point beats on both ``x`` and ``y`` (higher is better on both), per host.

    The usual serving trade-off: per-user speed (interactivity) against total throughput (cost).
    Returned sorted by ``x``; ties on both figures keep every tied point. With ``level``, beating needs
    significance: a point leaves the front only when another is at least as good on both figures and better
    on one by more than the interval of the difference (``<figure>_se``; a figure without one compares by
    point estimate).
    """
    if by is None:
        by = ["host", "workload"] if "workload" in frame.columns else ["host"]
    points = frame[_ok(frame, statuses) & frame["alias_of"].isna()].copy()
    points[x] = pd.to_numeric(points[x], errors="coerce")
    points[y] = pd.to_numeric(points[y], errors="coerce")
    points = points.dropna(subset=[x, y])
    kept: list[Any] = []
    groups = points.groupby(by, sort=True) if by else [((), points)]
    for _key, group in groups:
        if level is None:
            kept += _front(group, x, y)
        else:
            kept += _significant_front(group, x, y, level)
    return points.loc[kept].sort_values([*by, x], kind="stable")


def _front(group: pd.DataFrame, x: str, y: str) -> list[Any]:
    """The exact front of one group in O(n log n): sorted by ``x`` then ``y``, both descending, a point is on it
    when no point before it has a higher ``y`` (equal pairs stay together)."""
    ordered = group.sort_values([x, y], ascending=[False, False], kind="stable")
    xs, ys = ordered[x].to_numpy(dtype=float), ordered[y].to_numpy(dtype=float)
    kept = []
    best_y, best_x = float("-inf"), float("inf")
    for index, vx, vy in zip(ordered.index, xs, ys, strict=True):
        if vy > best_y or (vy == best_y and vx == best_x):
            kept.append(index)
            best_y, best_x = vy, vx
    return kept


def _significant_front(group: pd.DataFrame, x: str, y: str, level: float) -> list[Any]:
    """The front where beating needs significance (see :func:`pareto_front`), in arrays: sorted by ``x``
    descending, a point is checked only against the points at or before it (the only ones with at least its
    ``x``), all at once (:func:`_beats`), instead of a pandas comparison of every pair."""
    ordered = group.sort_values([x, y], ascending=[False, False], kind="stable")
    cols = {}
    for figure in (x, y):
        cols[figure] = pd.to_numeric(ordered[figure], errors="coerce").to_numpy(dtype=float)
        se = f"{figure}_se"
        cols[se] = (
            pd.to_numeric(ordered[se], errors="coerce").to_numpy(dtype=float)
            if se in ordered.columns
            else np.full(len(ordered), np.nan)
        )
    z = z_value(level)
    kept = []
    xs, ys = cols[x], cols[y]
    for i, index in enumerate(ordered.index):
        # Candidates: at least as good on both figures (sorted by x: they are all before, or tied after).
        last = int(np.searchsorted(-xs, -xs[i], side="right"))
        ahead = np.arange(last) != i
        at_least = ahead & (xs[:last] >= xs[i]) & (ys[:last] >= ys[i])
        if not at_least.any():
            kept.append(index)
            continue
        beats = _beats(cols, x, i, last, z) | _beats(cols, y, i, last, z)
        if not (at_least & beats).any():
            kept.append(index)
    return kept


def _beats(cols: dict[str, np.ndarray], figure: str, i: int, last: int, z: float) -> np.ndarray:
    """For the points ``[0, last)``: better than point ``i`` on ``figure`` beyond noise (the vector form of
    ``difference(a, se_a, b, se_b)`` of :mod:`orchestrator.analysis.intervals`: its interval's low end above
    zero, or the point estimate above when either has no interval)."""
    a, b = cols[figure][:last], cols[figure][i]
    sa, sb = cols[f"{figure}_se"][:last], cols[f"{figure}_se"][i]
    out = np.zeros(last, dtype=bool)
    if not np.isfinite(b) or b == 0:
        return out
    finite = np.isfinite(a)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        relative = a / b - 1
        has_se = np.isfinite(sa) & bool(np.isfinite(sb))
        se = np.sqrt((sa / b) ** 2 + (a * sb / b**2) ** 2)
        lo = relative - z * se
    out = finite & np.where(has_se, lo > 0, relative > 0)
    return np.asarray(out, dtype=bool)
