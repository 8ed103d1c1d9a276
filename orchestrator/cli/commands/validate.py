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
        ..., metavar="FILE...", help="Experiment or playbook files (YAML) to check.", show_default=False
    ),
    as_json: bool = typer.Option(False, "--json", help="Print each file's result (and every error) as JSON."),
) -> None:
    """Check experiment files (schema, templates, baselines, matrix size) and playbooks (their steps, and the
    experiment each names). Every error of a file is listed, each with its file:line:column and key. Exit 2 if
    any file is invalid."""
    failed = 0
    results = []
    for file in files:
        try:
            if _is_playbook(file):
                results.append(_validate_playbook(file, as_json))
                continue
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
                f"{escape(plan.points_text)}, {totals['restarts']} restarts",
                highlight=False,
                soft_wrap=True,
            )
    if as_json:
        typer.echo(json.dumps({"ok": not failed, "files": results}, indent=2))
    if failed:
        raise typer.Exit(2)


def _is_playbook(file: Path) -> bool:
    """Whether ``file`` reads as a playbook (its top-level keys; orchestrator/experiment/kind.py)."""
    from orchestrator.experiment.kind import file_kind
    from orchestrator.experiment.yamlsource import load_yaml_with_positions

    data, _positions = load_yaml_with_positions(file)
    return file_kind(data) == "playbook"


def _validate_playbook(file: Path, as_json: bool) -> dict[str, object]:
    """A playbook's check: its steps, and with the experiment it names, that experiment and every step resolved
    on it (what ``specsweep playbook`` would run)."""
    from orchestrator.playbooks.runner import prepare
    from orchestrator.playbooks.schema import load_playbook

    playbook = load_playbook(file)
    experiment = None
    if playbook.experiment_path() is not None:
        experiment = prepare(file).experiment.name
    if not as_json:
        on = f" on experiment {experiment}" if experiment else " (give it an experiment with --experiment FILE)"
        console.print(
            f"[green]ok[/green] {escape(str(file))}: playbook {escape(playbook.name)}, {len(playbook.steps)} steps"
            f"{escape(on)}; run it with specsweep playbook {escape(str(file))}",
            highlight=False,
            soft_wrap=True,
        )
    return {"file": str(file), "ok": True, "kind": "playbook", "errors": [], "steps": len(playbook.steps),
            "experiment": experiment}  # fmt: skip


def register(app: typer.Typer) -> None:
    app.command("validate")(validate)
