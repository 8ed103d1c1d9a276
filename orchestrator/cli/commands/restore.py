"""`specsweep restore FILE`: find and undo what a killed run left on every host of an experiment."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from orchestrator.cli.console import console
from orchestrator.experiment.schema import load_experiment

if TYPE_CHECKING:  # paramiko loads only when a host is reached
    from orchestrator.launchers.restore import RestoreOutcome


def _show(outcome: RestoreOutcome) -> None:
    if outcome.error:
        mark = "[red]error[/red]"
    elif outcome.leftover is None:
        mark = "[green]clean[/green]"
    elif outcome.restored:
        mark = "[green]restored[/green]"
    else:
        mark = "[yellow]found[/yellow]"
    console.print(f"{mark} {outcome.host}: {outcome.service}: {outcome.summary}", highlight=False, soft_wrap=True)


def restore(
    file: Path = typer.Argument(
        ..., metavar="FILE", help="The experiment file (YAML) whose hosts to restore.", show_default=False
    ),
    break_lock: bool = typer.Option(
        False, "--break-lock", help="Also break a lock held by a run that cannot be proven dead."
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="Only report what would be restored."),
    as_json: bool = typer.Option(False, "--json", help="Print what was found and done on each host as JSON."),
) -> None:
    """Undo the configuration changes and locks a killed run left behind. Exit 1 if a host could not be
    restored."""
    from orchestrator.launchers.restore import restore_experiment

    # The secrets stay unread: undoing a run must not need the tokens the server was given.
    experiment = load_experiment(file, read_secrets=False)
    outcomes = restore_experiment(
        experiment, break_lock=break_lock, dry_run=dry_run, progress=None if as_json else _show
    )
    if as_json:
        payload = [
            {
                "host": o.host,
                "service": o.service,
                "found": o.leftover.describe() if o.leftover is not None else None,
                "restored": o.restored,
                "error": o.error,
                "summary": o.summary,
            }
            for o in outcomes
        ]
        typer.echo(json.dumps({"dry_run": dry_run, "hosts": payload}, indent=2))
    if any(o.error for o in outcomes):
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("restore")(restore)
