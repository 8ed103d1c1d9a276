"""`specsweep plan FILE [--json]`: what a sweep would do: deployments, load points, restarts, ETA."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import RenderableType
from rich.markup import escape
from rich.text import Text

from orchestrator.cli.console import console
from orchestrator.cli.textfit import Column, fit_table
from orchestrator.experiment.durations import format_duration
from orchestrator.experiment.schema import load_experiment
from orchestrator.plan.deployments import Plan, build_plan

if TYPE_CHECKING:
    from orchestrator.plan.eta import EtaHistory


def learned_eta(plan: Plan, history: EtaHistory) -> float:
    """The plan's ETA with what earlier runs taught (:mod:`orchestrator.plan.eta`): their cost per deployment and
    their measured/estimated point time, where known, in place of the experiment's guesses."""
    per_deployment = history.deployment_seconds
    scale = history.point_scale if history.point_scale is not None else 1.0
    total = 0.0
    for dep in plan.deployments:
        total += per_deployment if per_deployment is not None else dep.expected_load_seconds
        total += scale * sum(p.estimated_seconds for p in dep.load_points)
    return total


def render_plan(plan: Plan, history: EtaHistory | None = None, width: int = 80) -> RenderableType:
    """One row per deployment (one restart each), fitted to ``width``: the configuration is never cut."""
    columns = [
        Column("#", required=True),
        Column("configuration", "left", required=True, wrap=True),
        Column("load points", "left", priority=80, wrap=True),
        Column("est.", required=True),
        Column("deployment", "left", priority=10),
    ]
    rows = []
    for index, dep in enumerate(plan.deployments, 1):
        label = dep.label + (" *" if dep.baseline else "")
        if dep.aliases:
            label += " = " + ", ".join(a.variant for a in dep.aliases)
        points = ", ".join(p.label for p in dep.load_points)
        rows.append(
            [
                str(index),
                Text(label),
                f"{len(dep.load_points)}: {escape(points)}",
                format_duration(dep.estimated_seconds()),
                dep.id,
            ]
        )
    totals = plan.totals()
    eta = f"ETA {format_duration(totals['eta_seconds'])}"
    if history is not None and history.known:
        eta = f"ETA {format_duration(learned_eta(plan, history))} ({history.describe()}; the file's guesses: {eta})"
    caption = (
        f"{totals['deployments']} deployments, {totals['load_points']} load points, {totals['restarts']} restarts, "
        f"{eta}; * baseline"
    )
    return fit_table(columns, rows, width, title=f"plan: {escape(plan.experiment)}", caption=caption)


def plan(
    file: Path = typer.Argument(..., metavar="FILE", help="Experiment file (YAML).", show_default=False),
    as_json: bool = typer.Option(False, "--json", help="Print the plan as JSON (deployments and totals)."),
    baselines_from: str | None = typer.Option(
        None, "--baselines-from", metavar="RUN_DIR|latest", help="Show the plan with baselines reused from a run."
    ),
    results: Path | None = typer.Option(
        None,
        "--results",
        help="Where earlier runs are looked up (for latest and the ETA); default: the experiment's results_dir, "
        "$SPECSWEEP_RESULTS, else results/ beside the file.",
        show_default=False,
    ),
) -> None:
    """Show the deployments (one restart each), their load points, the restart count and the ETA.

    With baselines to reuse (``baselines_from`` in the file, or ``--baselines-from``), the reused points are
    left out, and each baseline that cannot be reused says why. With earlier runs of the experiment, the ETA is
    the one they teach (their time per deployment and per point). With a search, the candidates (measured at
    the objective's load only) and the restarts and GPU-hours of the grid and of the budget.
    """
    from orchestrator.plan.eta import eta_history
    from orchestrator.runs.runref import results_root
    from orchestrator.sweep.baselines import baselines_source, reuse_baselines

    experiment = load_experiment(file)
    root = results_root(results, experiment)
    from orchestrator.search.preview import plan_and_cost

    the_plan, cost = plan_and_cost(experiment, build_plan(experiment))  # a search: its candidates and its cost
    source = baselines_source(experiment, baselines_from, root)
    reuse = reuse_baselines(experiment, the_plan, source) if source is not None else None
    shown = reuse.plan if reuse is not None else the_plan
    history = eta_history(root, experiment.name)
    if as_json:
        data = shown.to_json_dict()
        data["results_root"] = str(root)
        data["eta_learned"] = (
            {
                "eta_seconds": round(learned_eta(shown, history), 1),
                "runs": history.runs,
                "deployment_seconds": history.deployment_seconds,
                "point_scale": history.point_scale,
            }
            if history.known
            else None
        )
        if reuse is not None:
            data["baselines_from"] = {
                "run_dir": str(source),
                "reused_points": [
                    {"host": r.host, "point_id": r.point_id, "variant": r.variant} for r in reuse.records
                ],
                "not_reused": reuse.reasons,
            }
        if cost is not None:
            data["search"] = cost.to_dict()
        typer.echo(json.dumps(data, indent=2))
        return
    console.print(render_plan(shown, history, console.width))
    if cost is not None:
        console.print(escape(cost.describe()), soft_wrap=True)
    if reuse is not None:
        console.print(
            f"baselines from {source}: {len(reuse.records)} point(s) reused, "
            f"{the_plan.restarts - shown.restarts} restart(s) saved"
        )
        for reason in reuse.reasons:
            console.print(f"  not reused: {reason}", markup=False)


def register(app: typer.Typer) -> None:
    app.command("plan")(plan)
