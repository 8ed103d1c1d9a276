"""`specsweep validate FILE...`: check experiment files without touching any host."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.markup import escape

from orchestrator.cli.console import console, err_console
from orchestrator.errors import ConfigError
from orchestrator.experiment.schema import load_experiment
from orchestrator.experiment.validation import problems_of
from orchestrator.plan.deployments import build_plan


def validate(
    files: list[Path] = typer.Argument(
        ..., metavar="FILE...", help="Experiment files (YAML) to check.", show_default=False
    ),
    as_json: bool = typer.Option(False, "--json", help="Print each file's result (and every error) as JSON."),
) -> None:
    """Check experiment files: schema, templates, baselines, matrix size. Every error of a file is listed, each
    with its file:line:column and key. Exit 2 if any file is invalid."""
    failed = 0
    results = []
    for file in files:
        try:
            experiment = load_experiment(file)
            plan = build_plan(experiment)
        except ConfigError as exc:
            failed += 1
            problems = sorted(problems_of(exc), key=lambda p: (p.line or 0, p.column or 0))
            results.append(
                {
                    "file": str(file),
                    "ok": False,
                    "errors": [
                        {"line": p.line, "column": p.column, "key": p.key, "message": p.message, "text": str(p)}
                        for p in problems
                    ],
                }
            )
            if not as_json:
                for problem in problems:
                    err_console.print(f"[red]invalid[/red] {escape(str(problem))}", highlight=False, soft_wrap=True)
                if len(problems) > 1:
                    err_console.print(f"{escape(str(file))}: {len(problems)} errors", highlight=False, soft_wrap=True)
            continue
        totals = plan.totals()
        results.append({"file": str(file), "ok": True, "errors": [], "warnings": experiment.warnings, **totals})
        if not as_json:
            for warning in experiment.warnings:
                err_console.print(f"[yellow]warning[/yellow] {escape(warning)}", highlight=False, soft_wrap=True)
            console.print(
                f"[green]ok[/green] {escape(str(file))}: {totals['deployments']} deployments, "
                f"{totals['load_points']} load points, {totals['restarts']} restarts",
                highlight=False,
                soft_wrap=True,
            )
    if as_json:
        typer.echo(json.dumps({"ok": not failed, "files": results}, indent=2))
    if failed:
        raise typer.Exit(2)


def register(app: typer.Typer) -> None:
    app.command("validate")(validate)
