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
    baselines_from: str | None = typer.Option(
        None, "--baselines-from", metavar="RUN_DIR|latest", help="Show the plan with baselines reused from a run."
    ),
    results: Path = typer.Option(Path("results"), "--results", help="Where runs are looked up for 'latest'."),
) -> None:
    """Show the deployments (one restart each), their load points, the restart count and the ETA.

    With baselines to reuse (``baselines_from`` in the file, or ``--baselines-from``), the reused points are
    left out, and each baseline that cannot be reused says why.
    """
    from orchestrator.baselines import baselines_source, reuse_baselines

    experiment = load_experiment(file)
    the_plan = build_plan(experiment)
    source = baselines_source(experiment, baselines_from, results)
    reuse = reuse_baselines(experiment, the_plan, source) if source is not None else None
    shown = reuse.plan if reuse is not None else the_plan
    if as_json:
        data = shown.to_json_dict()
        if reuse is not None:
            data["baselines_from"] = {
                "run_dir": str(source),
                "reused_points": [
                    {"host": r.host, "point_id": r.point_id, "variant": r.variant} for r in reuse.records
                ],
                "not_reused": reuse.reasons,
            }
        typer.echo(json.dumps(data, indent=2))
        return
    console.print(render_plan(shown))
    if reuse is not None:
        console.print(
            f"baselines from {source}: {len(reuse.records)} point(s) reused, "
            f"{the_plan.restarts - shown.restarts} restart(s) saved"
        )
        for reason in reuse.reasons:
            console.print(f"  not reused: {reason}", markup=False)


def register(app: typer.Typer) -> None:
    app.command("plan")(plan)
