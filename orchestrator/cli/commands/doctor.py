"""`specsweep doctor FILE`: check every host of an experiment before a sweep, as a checklist."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from orchestrator.cli.console import console

if TYPE_CHECKING:  # paramiko loads only when a host is reached
    from orchestrator.launchers.doctor import Check
from orchestrator.experiment.schema import load_experiment

_MARKS = {"ok": "[green]✓[/green]", "warn": "[yellow]![/yellow]", "fail": "[red]✗[/red]", "skip": "[dim]-[/dim]"}


def _show(host: str, check: Check) -> None:
    detail = check.detail[len(host) + 2 :] if check.detail.startswith(f"{host}: ") else check.detail
    console.print(f"{_MARKS[check.status]} {host}: {check.name}: {detail}", highlight=False, soft_wrap=True)


def doctor(
    file: Path = typer.Argument(
        ..., metavar="FILE", help="The experiment file (YAML) whose hosts to check.", show_default=False
    ),
    as_json: bool = typer.Option(False, "--json", help="Print every host's checks as JSON (and nothing else)."),
) -> None:
    """Check SSH, sudo, systemd, the unit, the journal, the port, the clock and GPUs on every host.
    Exit 0 when nothing failed (warnings allowed), 1 otherwise."""
    from orchestrator.launchers.doctor import run_doctor

    reports = run_doctor(load_experiment(file), progress=None if as_json else _show)
    failed = [r.host for r in reports if not r.ok]
    if as_json:
        payload = {
            "ok": not failed,
            "hosts": [
                {
                    "host": r.host,
                    "ok": r.ok,
                    "checks": [{"name": c.name, "status": c.status, "detail": c.detail} for c in r.checks],
                }
                for r in reports
            ],
        }
        typer.echo(json.dumps(payload, indent=2))
        if failed:
            raise typer.Exit(1)
        return
    if failed:
        console.print(f"[red]{len(failed)} host(s) not ready:[/red] {', '.join(failed)}", highlight=False)
        raise typer.Exit(1)
    console.print(f"[green]all {len(reports)} host(s) ready[/green]", highlight=False)


def register(app: typer.Typer) -> None:
    app.command("doctor")(doctor)
