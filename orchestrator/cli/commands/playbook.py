"""`specsweep playbook FILE`: run a playbook's steps on an experiment's host and judge its expectations.

Exit 0 when every expectation (and doctor check, smoke test, shell command) passed, 1 when one failed
(``PlaybookFailed``), 2 for a bad playbook or experiment file, 130 when interrupted (the host is restored).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape
from rich.table import Table

from orchestrator.cli.console import console, err_console
from orchestrator.cli.signals import stopping_signals
from orchestrator.errors import ConfigError, PlaybookFailed
from orchestrator.sweep.events import SweepEvent

_STATUS = {
    "pass": "[green]PASS[/green]",
    "fail": "[red]FAIL[/red]",
    "warn": "[yellow]WARN[/yellow]",
    "skip": "[dim]SKIP[/dim]",
}


def _variables(values: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in values:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise ConfigError(f"expected NAME=VALUE, got {item!r}", key="--var")
        out[name.strip()] = value
    return out


class _Observer:
    """Step lines and outcomes as they happen; deploy and load progress through the sweep's renderer."""

    def __init__(self) -> None:
        from orchestrator.cli.progress import SweepProgress

        self.progress = SweepProgress(err_console)

    def __call__(self, event: SweepEvent) -> None:
        from orchestrator.playbooks import OutcomeReady, PlaybookStarted, StepStarted

        if isinstance(event, PlaybookStarted):
            err_console.print(
                f"playbook {escape(event.playbook)} on experiment {escape(event.experiment)}, "
                f"run directory: {escape(event.run_dir)}",
                soft_wrap=True,
            )
        elif isinstance(event, StepStarted):
            err_console.print(f"[bold][{event.index + 1}/{event.total}][/bold] {escape(event.text)}")
        elif isinstance(event, OutcomeReady) and event.outcome is not None:
            o = event.outcome
            err_console.print(f"  {_STATUS[o.status]} {escape(o.title)}: {escape(o.detail)}")
        else:
            self.progress.observe(event)


def _outcome_table(result: Any) -> Table:
    table = Table(title=f"{result.playbook} on {result.experiment}", title_justify="left")
    table.add_column("", no_wrap=True)
    table.add_column("check")
    table.add_column("the numbers behind it")
    for o in result.outcomes:
        table.add_row(_STATUS[o.status], escape(o.title), escape(o.detail))
    return table


def _explain_failures(result: Any) -> None:
    for o in result.failures:
        console.print(f"[red]FAIL[/red] {escape(o.title)}")
        if o.message:
            console.print(f"  why it must hold: {escape(o.message)}")
        for line in o.evidence:
            console.print(f"    {escape(line)}", soft_wrap=True)


def _dry_run(program: Any) -> None:
    console.print(
        f"playbook {escape(program.playbook.name)} on experiment {escape(program.experiment.name)} "
        f"({escape(program.experiment.host_specs()[0].display_name)}): nothing is run"
    )
    for step in program.steps:
        console.print(f"[bold][{step.index + 1}/{len(program.steps)}][/bold] {escape(step.text)}")
    console.print("deployments:")
    for dep in program.plan.deployments:
        console.print(f"  {escape(dep.label)} ({dep.config_hash}): {escape(dep.command or '')}", soft_wrap=True)
    totals = program.plan.totals()
    console.print(f"{totals['restarts']} restart(s), {totals['load_points']} load point(s)")


def playbook(
    file: Path = typer.Argument(..., metavar="FILE", help="The playbook file (YAML).", show_default=False),
    experiment: Path | None = typer.Option(
        None, "--experiment", "-e", help="Experiment file to run on (default: the one the playbook names)."
    ),
    var: list[str] = typer.Option(
        [], "--var", metavar="NAME=VALUE", help="Set one of the experiment's vars (repeatable)."
    ),
    host: str | None = typer.Option(None, "--host", help="Which host of the experiment (default: the first)."),
    results: Path | None = typer.Option(
        None,
        "--results",
        help="Where run directories are created (default: as a sweep of the playbook's experiment would).",
        show_default=False,
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="Validate and print the steps; touch nothing."),
    quiet: bool = typer.Option(False, "-q", "--quiet", help="No progress; print the outcomes only."),
    as_json: bool = typer.Option(False, "--json", help="Print expectations.json's content at the end."),
) -> None:
    """Run a playbook (deploy, load, measure, expect, restore, baselines, doctor, smoke, shell) on one host.

    Each expectation prints PASS or FAIL with the numbers behind it; the run directory keeps the records and
    expectations.json. Exit 0 when all pass, 1 when any fails, 2 for a bad file. Ctrl-C restores the host.
    """
    from orchestrator.playbooks import PlaybookOptions, prepare, run_playbook
    from orchestrator.runs.runref import results_root
    from orchestrator.sweep.runner import StopSignal

    program = prepare(file, experiment_file=experiment, variables=_variables(var), host=host)
    root = results_root(results, program.experiment)
    if dry_run:
        _dry_run(program)
        return
    stop = StopSignal()

    def say(message: str) -> None:
        err_console.print(f"[yellow]{message}[/yellow]")

    observer = None if (quiet or as_json) else _Observer()
    if observer is None:  # -q and --json hide progress, not a warning (the sweep says these as progress)
        for warning in program.experiment.warnings:
            err_console.print(f"[yellow]warning[/yellow] {escape(warning)}", highlight=False, soft_wrap=True)
    with stopping_signals(stop.request, say):
        if observer is not None:
            with observer.progress:
                result = run_playbook(program, PlaybookOptions(results_root=root), observer=observer, stop=stop)
        else:
            result = run_playbook(program, PlaybookOptions(results_root=root), stop=stop)
    if as_json:
        typer.echo(json.dumps({"run_dir": str(result.run_dir), **result.to_json_dict()}, indent=2, default=str))
    else:
        console.print(_outcome_table(result))
        _explain_failures(result)
        console.print(f"run directory: {escape(str(result.run_dir))}", soft_wrap=True)
    failures = result.failures
    if failures:
        raise PlaybookFailed(
            f"{len(failures)} of {len(result.outcomes)} checks failed ("
            + "; ".join(o.title for o in failures)
            + f"); run directory: {result.run_dir}"
        )
    if not as_json:
        console.print(f"[green]all {len(result.outcomes)} checks passed[/green]")


def register(app: typer.Typer) -> None:
    app.command("playbook")(playbook)
