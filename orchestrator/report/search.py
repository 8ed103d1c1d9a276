"""The search's part of the report: a figure of the objective against restarts spent, and the
recommendations (best configuration per load level, runner-up, margin, constraints, what was not tried).

Both come from the run directory alone (``search/history.jsonl``, ``records.jsonl``); a run without a search
history gets the recommendations only when its experiment has an objective.
"""

from __future__ import annotations

import io
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator.files import write_atomic
from orchestrator.report.axes import tagged_png
from orchestrator.search.history import read_history

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from orchestrator.report.render import Block

__all__ = ["FIGURE_NAME", "progress_figure", "search_blocks", "search_figures"]

FIGURE_NAME = "search_progress"
CAPTION = (
    "The search: each measured candidate's objective (dots; error bars: its interval; hollow: a constraint "
    "fails) against the restarts spent, baselines included, and the best feasible so far (line)."
)


def progress_figure(history: list[dict[str, Any]]) -> Figure | None:
    """Objective against restarts spent (None when the history holds no scored candidate)."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    rows = [r for r in history if not r.get("baseline") and (r.get("score") or {}).get("value") is not None]
    if not rows:
        return None
    score0 = rows[0]["score"]
    figure = Figure(figsize=(9.5, 5.0), dpi=110, layout="constrained")
    ax = figure.subplots()
    xs = [int(r["restarts"]) for r in rows]
    ys = [float(r["score"]["value"]) for r in rows]
    err = [
        [y - (r["score"].get("lo") or y) for y, r in zip(ys, rows, strict=True)],
        [(r["score"].get("hi") or y) - y for y, r in zip(ys, rows, strict=True)],
    ]
    feasible = [bool(r["score"].get("feasible")) for r in rows]
    rungs = [int(r.get("rung") or 0) for r in rows]
    for want, face in ((True, "C0"), (False, "none")):
        idx = [i for i, f in enumerate(feasible) if f is want]
        if not idx:
            continue
        ax.errorbar(
            [xs[i] for i in idx],
            [ys[i] for i in idx],
            yerr=[[err[0][i] for i in idx], [err[1][i] for i in idx]],
            fmt="o",
            color="C0",
            markerfacecolor=face,
            ecolor="0.6",
            capsize=2,
            label="a candidate" if want else "a candidate failing a constraint",
        )
    if any(rungs):
        longer = [i for i, r in enumerate(rungs) if r > 0]
        ax.scatter([xs[i] for i in longer], [ys[i] for i in longer], marker="s", s=60, facecolors="none",
                   edgecolors="C1", label="measured longer (a later rung)", zorder=3)  # fmt: skip
    maximise = score0.get("sense", "max") == "max"
    # The best so far is the best of each configuration's latest score, as the search's own best() has it
    # (orchestrator/sweep/searching.py): a survivor measured longer revises its score, and the line with it,
    # down as well as up (issue 59, item 7: the line kept a short window's lucky high).
    best: list[float] = []
    latest: dict[str, tuple[float, bool]] = {}
    for i, (row, y, ok) in enumerate(zip(rows, ys, feasible, strict=True)):
        latest[str(row.get("config_hash") or row.get("label") or f"row {i}")] = (y, ok)
        values = [v for v, good in latest.values() if good]
        best.append((max(values) if maximise else min(values)) if values else (-math.inf if maximise else math.inf))
    shown = [(x, b) for x, b in zip(xs, best, strict=True) if math.isfinite(b)]
    if shown:
        ax.step([s[0] for s in shown], [s[1] for s in shown], where="post", color="C2", label="best feasible so far")
    ax.set_xlabel("restarts spent (baselines included)")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # a restart is whole: no 2.5 between 2 and 3
    ax.set_ylabel(f"{score0.get('figure', 'objective')} ({'higher' if maximise else 'lower'} is better)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="lower right" if maximise else "upper right")
    ax.set_title(f"search: {rows[0].get('strategy', '')}", fontsize=10)
    return figure


def search_figures(run_dir: Path, directory: Path) -> dict[str, tuple[Path, str]]:
    """Draw the search figure into ``directory`` when the run has a search history."""
    figure = progress_figure(read_history(run_dir))
    if figure is None:
        return {}
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{FIGURE_NAME}.png"
    png = io.BytesIO()
    figure.savefig(png, format="png")
    write_atomic(path, tagged_png(png.getvalue(), figure))  # a new file renamed over it, never through a link
    return {FIGURE_NAME: (path, CAPTION)}


def search_blocks(run_dir: Path, analysis: Any = None) -> list[Block]:
    """The report's closing section: the recommendations (only for a run with an objective or a search)."""
    from orchestrator.errors import SpecsweepError
    from orchestrator.report.render import Heading, Items, Paragraph
    from orchestrator.search.recommend import _run_experiment, recommend

    try:
        if not read_history(run_dir) and _run_experiment(run_dir).objective is None:
            return []  # no objective and no search: no recommendations to make
        recs = recommend(run_dir, analysis=analysis)
    except SpecsweepError as exc:
        return [Heading("Recommendations"), Paragraph(f"No recommendation: {exc}", "warning")]
    if recs.objective is None and not read_history(run_dir):
        return []
    blocks: list[Block] = [Heading("Recommendations")]
    blocks.append(
        Paragraph(
            f"Strategy {recs.strategy}: {recs.restarts_spent} restarts spent (the grid: {recs.grid_restarts}). "
            "`specsweep recommend` prints these as YAML to paste into an experiment.",
            "muted",
        )
    )
    blocks += [Paragraph(f"Contaminated: {c}", "warning") for c in recs.contamination]
    items: list[tuple[str, str, list[str]]] = []
    for level in recs.levels:
        severity = "" if level.told_apart else "warning"
        items.append((severity, level.statement(recs.objective), []))
    items.append(("", recs.not_tried_statement(), []))
    blocks.append(Items(items))
    return blocks
