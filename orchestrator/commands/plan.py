"""`specsweep plan FILE [--json]`: what a sweep would do: deployments, load points, restarts, ETA."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.table import Table

from orchestrator.console import console
from orchestrator.durations import format_duration
from orchestrator.experiment import load_experiment
from orchestrator.plan import Plan, build_plan


def render_plan(plan: Plan) -> Table:
    table = Table(title=f"plan: {plan.experiment}", title_justify="left")
    table.add_column("#", justify="right")
    table.add_column("deployment")
    table.add_column("variant")
    table.add_column("parameters")
    table.add_column("load points", justify="right")
    table.add_column("est.", justify="right")
    for index, dep in enumerate(plan.deployments, 1):
        params = ", ".join(f"{k}={v}" for k, v in dep.params.items()) or "-"
        variant = dep.variant + (" (baseline)" if dep.baseline else "")
        if dep.aliases:
            variant += " = " + ", ".join(a.variant for a in dep.aliases)
        points = ", ".join(p.label for p in dep.load_points)
        table.add_row(
            str(index),
            dep.id,
            variant,
            params,
            f"{len(dep.load_points)}: {points}",
            format_duration(dep.estimated_seconds()),
        )
    totals = plan.totals()
    table.caption = (
        f"{totals['deployments']} deployments, {totals['load_points']} load points, {totals['restarts']} restarts, "
        f"ETA {format_duration(totals['eta_seconds'])}"
    )
    table.caption_justify = "left"
    return table


def plan(
    file: Path = typer.Argument(..., help="Experiment file (YAML).", show_default=False),
    as_json: bool = typer.Option(False, "--json", help="Print the plan as JSON (deployments and totals)."),
) -> None:
    """Show the deployments (one restart each), their load points, the restart count and the ETA."""
    the_plan = build_plan(load_experiment(file))
    if as_json:
        typer.echo(json.dumps(the_plan.to_json_dict(), indent=2))
    else:
        console.print(render_plan(the_plan))


def register(app: typer.Typer) -> None:
    app.command("plan")(plan)
