"""`specsweep validate FILE...`: check experiment files without touching any host."""

from __future__ import annotations

from pathlib import Path

import typer

from orchestrator.console import console, err_console
from orchestrator.errors import ConfigError
from orchestrator.experiment import load_experiment
from orchestrator.plan import build_plan


def validate(
    files: list[Path] = typer.Argument(..., help="Experiment files (YAML) to check.", show_default=False),
) -> None:
    """Check experiment files: schema, templates, baselines, matrix size. Exit 2 if any is invalid."""
    failed = 0
    for file in files:
        try:
            plan = build_plan(load_experiment(file))
        except ConfigError as exc:
            failed += 1
            err_console.print(f"[red]invalid[/red] {exc}", markup=True, highlight=False, soft_wrap=True)
            continue
        totals = plan.totals()
        console.print(
            f"[green]ok[/green] {file}: {totals['deployments']} deployments, {totals['load_points']} load points, "
            f"{totals['restarts']} restarts",
            highlight=False,
        )
    if failed:
        raise typer.Exit(2)


def register(app: typer.Typer) -> None:
    app.command("validate")(validate)
