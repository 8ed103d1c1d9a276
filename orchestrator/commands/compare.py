"""`specsweep compare RUN_A RUN_B`: what changed from run A (the reference) to run B, point by point and in
the findings."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape
from rich.table import Table

from orchestrator.console import console

if TYPE_CHECKING:  # pandas loads only when runs are compared
    from orchestrator.analysis.diff import RunComparison


def _value(value: Any, digits: int = 1) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:,.{digits}f}"


def _change(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    colour = "green" if value > 0 else "red" if value < 0 else "white"
    return f"[{colour}]{value:+.1%}[/]"


def render_comparison(comparison: RunComparison, show_all: bool) -> Table:
    rows = comparison.table if show_all else comparison.changed
    title = (
        f"{comparison.run_a} → {comparison.run_b}: {len(comparison.changed)} of {len(comparison.table)} points "
        f"changed by at least {comparison.threshold:.0%} (or in status)"
    )
    table = Table(title=title, title_justify="left")
    for name in (
        "configuration",
        "load",
        "status",
        "tok/s A",
        "tok/s B",
        "Δ tok/s",
        "accept A",
        "accept B",
        "Δ accept",
        "× AR A",
        "× AR B",
    ):
        table.add_column(name, justify="left" if name in ("configuration", "load", "status") else "right")
    several_hosts = comparison.table["host"].nunique() > 1
    for row in rows.to_dict("records"):
        label = row["label"] + (f" on {row['host']}" if several_hosts else "")
        if row["presence"] == "only_a":
            status = f"only in A ({row['status_a']})"
        elif row["presence"] == "only_b":
            status = f"only in B ({row['status_b']})"
        elif row["status_a"] != row["status_b"]:
            status = f"{row['status_a']} → {row['status_b']}"
        else:
            status = str(row["status_b"])
        table.add_row(
            escape(label),
            escape(str(row["load_label"])),
            escape(status),
            _value(row["output_tok_s_a"]),
            _value(row["output_tok_s_b"]),
            _change(row["output_tok_s_change"]),
            _value(row["accept_len_a"], 2),
            _value(row["accept_len_b"], 2),
            _change(row["accept_len_change"]),
            _value(row["speedup_vs_ar_a"], 2),
            _value(row["speedup_vs_ar_b"], 2),
        )
    return table


def compare(
    run_a: Path = typer.Argument(..., help="The reference run directory.", show_default=False),
    run_b: Path = typer.Argument(..., help="The run directory to compare with it.", show_default=False),
    threshold: float = typer.Option(0.05, "--threshold", help="Relative change that counts as changed (0.05 = 5%)."),
    show_all: bool = typer.Option(False, "--all", help="List every point, not only the changed ones."),
    as_json: bool = typer.Option(False, "--json", help="Print the comparison as JSON."),
) -> None:
    """Report what changed between two runs of the same experiment: figures per point, status, findings."""
    from orchestrator.analysis import analyse, compare_runs

    comparison = compare_runs(analyse(run_a), analyse(run_b), threshold=threshold)
    if as_json:
        table = comparison.table.astype(object).where(comparison.table.notna(), None)
        payload = {
            "run_a": comparison.run_a,
            "run_b": comparison.run_b,
            "experiment_a": comparison.experiment_a,
            "experiment_b": comparison.experiment_b,
            "threshold": comparison.threshold,
            "notes": comparison.notes,
            "points": table.to_dict("records"),
            "findings_new": [f.model_dump() for f in comparison.findings_new],
            "findings_gone": [f.model_dump() for f in comparison.findings_gone],
        }
        typer.echo(json.dumps(payload, indent=2, default=str))
        return
    from orchestrator.report import tables

    for note in comparison.notes:
        console.print(f"[yellow]note:[/] {escape(note)}")
    console.print(render_comparison(comparison, show_all))
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
