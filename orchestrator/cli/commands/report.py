"""`specsweep report RUN_DIR`: analyse a run directory and write its report (HTML, Markdown, CSV, Parquet,
checks, figures) into it, then print the findings and the winners."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Group, RenderableType
from rich.markup import escape
from rich.padding import Padding
from rich.text import Text

from orchestrator.cli.console import console, err_console
from orchestrator.cli.textfit import Column, fit_table, plain_width

if TYPE_CHECKING:  # matplotlib and pandas load only when a report is built
    from orchestrator.report import ReportResult

_STYLE = {"error": "bold red", "warning": "yellow", "info": "blue"}


def render_findings(result: ReportResult, width: int = 80) -> RenderableType:
    from orchestrator.analysis.answer import findings_text
    from orchestrator.report import tables

    counts = result.counts
    columns = [
        Column("severity", "left", required=True),
        Column("check", "left", required=True),
        Column("where", "left", required=True, wrap=True),
        Column("what", "left", required=True, wrap=True),
    ]
    groups = tables.group_findings(result.answer.findings)
    rows = [[f"[{_STYLE[g.severity]}]{g.severity}[/]", Text(g.check), Text(g.where), Text(g.message)] for g in groups]
    title = f"findings: {findings_text(counts)}"
    # The table while each check name and place fits on its line beside a readable message; narrower (80
    # columns), one finding a paragraph: its severity, whole check name and place, then the message, wrapped
    # at words. (A table squeezed to 80 columns cut the check names and broke the place into letters.)
    fixed = max(plain_width(c) for c in ("severity", *(g.severity for g in groups)))
    fixed += max(plain_width(c) for c in ("check", *(g.check for g in groups)))
    fixed += max(plain_width(c) for c in ("where", *(g.where for g in groups)))
    if fixed + _MESSAGE_MIN + 8 <= width:
        return fit_table(columns, rows, width, title=title)
    lines: list[RenderableType] = [Text(title)]
    for g in groups:
        head = Text.assemble((g.severity, _STYLE[g.severity]), " ", g.check, " ", (g.where, "bold"), ":")
        lines += [head, Padding(Text(g.message), (0, 0, 0, 2))]
    return Group(*lines)


#: The narrowest a finding's message may be in the findings table before findings print as paragraphs.
_MESSAGE_MIN = 30


def render_winners(result: ReportResult, width: int = 80) -> RenderableType:
    from orchestrator.cli.summary import best_table

    return best_table(result.answer, width)


def report(
    run: str = typer.Argument(
        ...,
        metavar="RUN",
        help="A run directory (results/<experiment>/<run id>), latest (the newest sweep or search), latest~N, "
        "latest-playbook (or -search, -sweep), EXPERIMENT/latest, or an experiment file (its latest run).",
        show_default=False,
    ),
    out: Path | None = typer.Option(None, "--out", "-o", help="Write the report here instead of into the run."),
    open_it: bool = typer.Option(False, "--open", help="Open report.html in the web browser ($BROWSER) once written."),
    results: Path | None = typer.Option(
        None, "--results", help="Where runs are looked up for latest (default: $SPECSWEEP_RESULTS, else ./results)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the files written and the findings as JSON."),
    strict: bool = typer.Option(
        False, "--strict", help="Exit with code 1 when any check reports an error (or a playbook's run failed)."
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Print only where the report is."),
) -> None:
    """Build the report of a run from its run directory alone: findings first, then winners, figures, tables.
    A playbook's run leads with its verdict (PASS or FAIL, and each check that failed); an empty run is refused."""
    from orchestrator.analysis.deciding import decision_lines
    from orchestrator.report import build_report
    from orchestrator.runs.identity import playbook_verdict, require_points
    from orchestrator.runs.runref import resolve_run

    run_dir = resolve_run(run, results)
    require_points(run_dir, "report")
    verdict = playbook_verdict(run_dir)
    result = build_report(run_dir, out_dir=out, progress=None if quiet or as_json else _progress)
    if open_it:
        _open(result.files["report.html"])
    if as_json:
        payload = {
            "run_dir": str(run_dir),
            "run_id": result.analysis.run_id,
            "experiment": result.analysis.experiment_name,
            "files": {name: str(path) for name, path in result.files.items()},
            "figures": {name: str(path) for name, path in result.figures.items()},
            "counts": result.counts,
            "findings": [f.model_dump() for f in result.answer.findings],
            "playbook": verdict.to_dict() if verdict is not None else None,
            # The run's answer: every point's figures (source, exactness, interval), winners, counts.
            "answer": result.answer.to_dict() if result.answer is not None else None,
        }
        typer.echo(json.dumps(payload, indent=2, default=str))
    elif quiet:
        typer.echo(str(result.files["report.html"]))
    else:
        if verdict is not None:
            style = "green" if verdict.passed else "bold red"
            console.print(Text(f"playbook {result.analysis.experiment_name}: {verdict.sentence()}", style=style))
        if result.answer.findings:
            console.print(render_findings(result, console.width))
        elif verdict is not None:
            console.print("[green]no findings in the figures[/] (the analysis' checks; the playbook's are above)")
        else:
            console.print("[green]no findings: every check passed[/]")
        if result.answer.loads:
            console.print(render_winners(result, console.width))
        # load.decide: decided, or the budget ran out (as the sweep's ending says them, issue 59 item 7)
        for line in decision_lines(result.answer.decisions, result.answer.path):
            console.print(Text(line))
        console.print(
            f"report: {escape(str(result.files['report.html']))}  (and report.md, summary.csv, checks.json, figures/)",
            soft_wrap=True,
        )
    if strict and (result.counts["error"] or (verdict is not None and not verdict.passed)):
        raise typer.Exit(1)


def _open(page: Path) -> None:
    """Open ``page`` in the user's web browser (Python's webbrowser: $BROWSER, else the desktop's default); where
    there is none, one line says where the page is (the command still succeeds: the report was built)."""
    import webbrowser

    if not webbrowser.open(page.resolve().as_uri()):
        # A headless GPU host is the common case: the report is built, so say where it is and succeed.
        err_console.print(
            f"no web browser here to open it: {page} (copy it to a machine with one, or set $BROWSER)",
            markup=False,
            soft_wrap=True,
        )


def _progress(message: str) -> None:
    err_console.print(f"[dim]report: {message}[/]")


def register(app: typer.Typer) -> None:
    app.command("report")(report)
