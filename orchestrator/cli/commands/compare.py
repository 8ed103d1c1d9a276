"""`specsweep compare RUN_A RUN_B`: what changed from run A (the reference) to run B, point by point and in
the findings."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import RenderableType
from rich.markup import escape
from rich.text import Text

from orchestrator.cli.console import console
from orchestrator.cli.textfit import Column, fit_table

if TYPE_CHECKING:  # pandas loads only when runs are compared
    from orchestrator.analysis.diff import RunComparison


def _change(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    colour = "green" if value > 0 else "red" if value < 0 else "white"
    return f"[{colour}]{value:+.1%}[/]"


def _number(value: Any, figure: str) -> str:
    """A figure's value with the digits it needs: ratios and accept lengths with two decimals, small
    latencies with three significant digits (``0.0 → 0.0`` says nothing), the rest with one."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if figure in ("accept_len", "speedup_vs_ar", "speedup_vs_linear"):
        return f"{value:.2f}"
    if abs(value) < 10:
        return f"{value:.3g}"
    return f"{value:,.1f}"


def _changes(row: dict[Any, Any], show_all: bool) -> list[tuple[str, str, str, str]]:
    """(what, A, B, change) for each figure of one point that moved by at least the threshold, its status
    when that changed, its presence when it is in one run only; with ``show_all``, the throughput of a point
    that did not change."""
    from orchestrator.analysis.diff import FIGURE_NAMES

    if row["presence"] == "only_a":
        return [("only in A", escape(str(row["status_a"])), "-", "")]
    if row["presence"] == "only_b":
        return [("only in B", "-", escape(str(row["status_b"])), "")]
    out = []
    if row["status_a"] != row["status_b"]:
        out.append(("status", escape(str(row["status_a"])), escape(str(row["status_b"])), ""))
    figures = list(row["changed_figures"]) or (["output_tok_s"] if show_all else [])
    for figure in figures:
        out.append(
            (
                FIGURE_NAMES.get(figure, figure),
                _number(row[f"{figure}_a"], figure),
                _number(row[f"{figure}_b"], figure),
                _change(row[f"{figure}_change"]),
            )
        )
    return out


def comparison_title(comparison: RunComparison) -> str:
    """``A → B: 4 of 18 points changed by at least 5% (or in status): TTFT p50 ms in 3, status in 1``."""
    from orchestrator.analysis.diff import FIGURE_NAMES

    counts = comparison.figure_counts()
    which = ", ".join(f"{FIGURE_NAMES.get(f, f)} in {n}" for f, n in counts.items())
    only = len(comparison.only_in_a) + len(comparison.only_in_b)
    if only:
        which += (", " if which else "") + f"{only} in one run only"
    return (
        f"{comparison.run_a} → {comparison.run_b}: {len(comparison.changed)} of {len(comparison.table)} points "
        f"changed by at least {comparison.threshold:.0%} (or in status)" + (f": {which}" if which else "")
    )


def render_comparison(comparison: RunComparison, show_all: bool, width: int = 80) -> RenderableType:
    """The changed points (every point with ``show_all``), one row per figure that changed, with A, B and the
    change, grouped by point (the configuration and load named once) and fitted to ``width``."""
    rows_frame = comparison.table if show_all else comparison.changed
    several_hosts = comparison.table["host"].nunique() > 1
    columns = [Column("host", "left", required=True)] if several_hosts else []
    columns += [
        Column("configuration", "left", required=True, wrap=True),
        Column("load", "right", required=True),
        Column("changed", "left", required=True),
        Column("A", required=True),
        Column("B", required=True),
        Column("change", required=True),
    ]
    rows: list[list[Any]] = []
    ends: list[int] = []
    for row in rows_frame.to_dict("records"):
        for position, (what, a, b, change) in enumerate(_changes(row, show_all)):
            first = position == 0
            cells: list[Any] = [Text(str(row["host"]) if first else "")] if several_hosts else []
            cells += [Text(str(row["label"]) if first else ""), Text(str(row["load_label"]) if first else "")]
            cells += [what, a, b, change]
            rows.append(cells)
        ends.append(len(rows) - 1)
    return fit_table(columns, rows, width, title=escape(comparison_title(comparison)), sections=ends[:-1])


def compare(
    run_a: str = typer.Argument(
        ...,
        metavar="RUN_A",
        help="The reference run: a run directory, latest, latest~N, EXPERIMENT/latest or an experiment file.",
        show_default=False,
    ),
    run_b: str | None = typer.Argument(
        None,
        metavar="[RUN_B]",
        help="The run to compare with it (the same forms); without it, RUN_A is compared with the run of its "
        "experiment before it.",
        show_default=False,
    ),
    threshold: float = typer.Option(0.05, "--threshold", help="Relative change that counts as changed (0.05 = 5%)."),
    show_all: bool = typer.Option(False, "--all", help="List every point, not only the changed ones."),
    results: Path | None = typer.Option(
        None, "--results", help="Where runs are looked up for latest (default: $SPECSWEEP_RESULTS, else ./results)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the comparison as JSON."),
) -> None:
    """Report what changed between two runs of the same experiment: figures per point, status, findings.

    Each changed point names the figures that moved by at least the threshold, with both values.
    """
    from orchestrator.analysis import compare_runs
    from orchestrator.analysis.answer import answer
    from orchestrator.runs.runref import previous_run, resolve_run

    path_b = resolve_run(run_b if run_b is not None else run_a, results)
    path_a = resolve_run(run_a, results) if run_b is not None else previous_run(path_b)
    # Each run's answer (orchestrator/analysis/answer.py): the figures and statuses every other output shows.
    comparison = compare_runs(answer(path_a).analysis, answer(path_b).analysis, threshold=threshold)
    if as_json:
        table = comparison.table.astype(object).where(comparison.table.notna(), None)
        payload = {
            "run_a": comparison.run_a,
            "run_b": comparison.run_b,
            "run_dir_a": str(path_a),
            "run_dir_b": str(path_b),
            "experiment_a": comparison.experiment_a,
            "experiment_b": comparison.experiment_b,
            "threshold": comparison.threshold,
            "notes": comparison.notes,
            "changed": len(comparison.changed),
            "changed_by_figure": comparison.figure_counts(),
            "points": table.to_dict("records"),
            "findings_new": [f.model_dump() for f in comparison.findings_new],
            "findings_gone": [f.model_dump() for f in comparison.findings_gone],
        }
        typer.echo(json.dumps(payload, indent=2, default=str))
        return
    from orchestrator.report import tables

    for note in comparison.notes:
        console.print(f"[yellow]note:[/] {escape(note)}")
    console.print(render_comparison(comparison, show_all, console.width))
    for title, findings, colour in (
        ("new findings in B", comparison.findings_new, "red"),
        ("findings gone in B", comparison.findings_gone, "green"),
    ):
        if findings:
            groups = tables.group_findings(findings)
            console.print(f"[{colour}]{title}: {len(findings)}[/]")
            for group in groups[:20]:
                console.print(escape(f"  {group.severity} [{group.check}] {group.where}: {group.message}"))
            if len(groups) > 20:
                console.print(f"  … and {len(groups) - 20} more (--json lists them all)")


def register(app: typer.Typer) -> None:
    app.command("compare")(compare)
