"""`specsweep report RUN_DIR`: analyse a run directory and write its report (HTML, Markdown, CSV, Parquet,
checks, figures) into it, then print the findings and the winners."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.markup import escape
from rich.table import Table

from orchestrator.console import console, err_console

if TYPE_CHECKING:  # matplotlib and pandas load only when a report is built
    from orchestrator.report import ReportResult

_STYLE = {"error": "bold red", "warning": "yellow", "info": "blue"}


def render_findings(result: ReportResult) -> Table:
    from orchestrator.report import tables

    counts = result.counts
    table = Table(
        title=f"findings: {counts['error']} error(s), {counts['warning']} warning(s), {counts['info']} note(s)",
        title_justify="left",
    )
    table.add_column("severity")
    table.add_column("check")
    table.add_column("where")
    table.add_column("what", overflow="fold")
    for group in tables.group_findings(result.analysis.findings):
        table.add_row(
            f"[{_STYLE[group.severity]}]{group.severity}[/]",
            escape(group.check),
            escape(group.where),
            escape(group.message),
        )
    return table


def render_winners(result: ReportResult) -> Table:
    from orchestrator.report import tables

    frame = tables.formatted(tables.winners_table(result.analysis))
    table = Table(title="best configuration at each load", title_justify="left")
    for column in frame.columns:
        table.add_column(str(column), justify="left" if column in ("load", "best configuration", "host") else "right")
    for row in frame.itertuples(index=False):
        table.add_row(*[escape(str(v)) for v in row])
    return table


def report(
    run_dir: Path = typer.Argument(..., help="A run directory (results/<experiment>/<run id>).", show_default=False),
    out: Path | None = typer.Option(None, "--out", "-o", help="Write the report here instead of into RUN_DIR."),
    as_json: bool = typer.Option(False, "--json", help="Print the files written and the findings as JSON."),
    strict: bool = typer.Option(False, "--strict", help="Exit with code 1 when any check reports an error."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Print only where the report is."),
) -> None:
    """Build the report of a run from its run directory alone: findings first, then winners, figures, tables."""
    from orchestrator.report import build_report

    result = build_report(run_dir, out_dir=out, progress=None if quiet or as_json else _progress)
    if as_json:
        payload = {
            "run_id": result.analysis.run_id,
            "experiment": result.analysis.experiment_name,
            "files": {name: str(path) for name, path in result.files.items()},
            "figures": {name: str(path) for name, path in result.figures.items()},
            "counts": result.counts,
            "findings": [f.model_dump() for f in result.analysis.findings],
        }
        typer.echo(json.dumps(payload, indent=2))
    elif quiet:
        typer.echo(str(result.files["report.html"]))
    else:
        if result.analysis.findings:
            console.print(render_findings(result))
        else:
            console.print("[green]no findings: every check passed[/]")
        if not result.analysis.best.empty:
            console.print(render_winners(result))
        console.print(
            f"report: {escape(str(result.files['report.html']))}  (and report.md, summary.csv, checks.json, figures/)"
        )
    if strict and result.counts["error"]:
        raise typer.Exit(1)


def _progress(message: str) -> None:
    err_console.print(f"[dim]report: {message}[/]")


def register(app: typer.Typer) -> None:
    app.command("report")(report)
