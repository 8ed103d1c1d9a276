"""`specsweep plan FILE [--json]`: what a sweep would do: deployments, load points, restarts, ETA."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

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
        total += per_deployment if per_deployment is not None else dep.wall_start_seconds
        total += scale * sum(p.estimated_seconds for p in dep.load_points)
    return total


def render_plan(
    plan: Plan,
    history: EtaHistory | None = None,
    width: int = 80,
    *,
    search: bool = False,
    in_slots: tuple[int, int, float] | None = None,
    guesses: str = "",
) -> RenderableType:
    """One row per deployment (one restart each), fitted to ``width``: the configuration is never cut. With
    ``search``, the plan is the grid a search draws from, and its totals say so (the search's own come first).
    ``in_slots`` (restarts, slots, seconds: :func:`orchestrator.cli.slotview.slot_totals`): the hosts run GPU
    slots, and the totals are the slot table's (each slot restarting for its own baselines)."""
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
                format_duration(dep.wall_seconds()),
                dep.id,
            ]
        )
    totals = plan.totals()
    eta = f"ETA {format_duration(totals['eta_seconds'])}"
    if history is not None and history.known:
        eta = f"ETA {format_duration(learned_eta(plan, history))} ({history.describe()}; the first guess: {eta})"
    elif guesses:  # what a first run's ETA stands on, and that the sweep replaces it by what it measures
        eta = f"{eta} ({guesses}; a sweep learns the real figures as it runs)"
    restarts = f"{totals['restarts']} restarts"
    if in_slots is not None:
        count, slots, seconds = in_slots
        restarts = f"{count} restarts on {slots} GPU slot(s) (the slot table below)"
        eta = f"ETA {format_duration(seconds)} in slots"
    caption = (
        "the whole grid: " if search else ""
    ) + f"{totals['deployments']} deployments, {plan.points_text}, {restarts}, {eta}; * baseline"
    return fit_table(columns, rows, width, title=f"plan: {escape(plan.experiment)}", caption=caption)


def _search_lead(cost: Any, plan: Plan) -> str:
    """The search's budget as the plan's first line: restarts, ETA and GPU-hours, then the grid's for scale.
    The ETA is by the clock (a deployment's :meth:`wall_seconds`: the simulator's own start where the command
    runs it); the GPU-hours keep the file's ``expected_load_time`` per restart (the host the file stands for)."""
    budget, grid = cost.budget_restarts, cost.grid_restarts
    walls = [d.wall_seconds() for d in plan.deployments if not d.baseline] or [cost.restart_seconds]
    each = sum(walls) / len(walls)
    return (
        f"search {cost.strategy}: at most {budget} restarts, ETA {format_duration(budget * each)} "
        f"({cost.gpu_hours(budget):.1f} GPU-hours) over {cost.candidates} candidates and {cost.baselines} "
        f"baseline(s), measured at the objective's load; the whole grid below: {grid} restarts, ETA "
        f"{format_duration(grid * each)} ({cost.gpu_hours(grid):.1f} GPU-hours); a restart: "
        f"{cost.restart_seconds:.0f} s on {cost.gpus} GPU(s)"
    )


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
    the objective's load only) and the restarts and GPU-hours of the grid and of the budget. On hosts that
    declare their GPUs, the GPU slots: each slot's GPUs, port and service instance, what runs where, and the
    wall-clock and GPU-hours before and after packing. With ``load.decide``, the budget of the extra rounds
    and their worst case.
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
    from orchestrator.plan.deciding import decide_budget

    decide = decide_budget(experiment, shown)  # load.decide: the extra rounds' budget and worst case
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
        if decide is not None:
            data["decide"] = decide.to_dict()
        if experiment.gpu_slots:
            from orchestrator.cli.slotview import slots_json

            data["slots"] = slots_json(experiment, shown)
        from orchestrator.redaction import redact

        typer.echo(json.dumps(redact(data), indent=2))  # secrets written inline are not shown either
        return
    if cost is not None:  # a search: its own budget first, the grid it draws from second
        console.print(escape(_search_lead(cost, shown)), soft_wrap=True)
    in_slots = None
    if experiment.gpu_slots:
        from orchestrator.cli.slotview import slot_totals

        in_slots = slot_totals(experiment, shown)
    from orchestrator.plan.pace import plan_basis

    guesses = plan_basis(experiment, [d.command for d in shown.deployments])  # what the first ETA stands on
    console.print(
        render_plan(shown, history, console.width, search=cost is not None, in_slots=in_slots, guesses=guesses)
    )
    if decide is not None:
        console.print(escape(decide.lead()), soft_wrap=True)
    if experiment.gpu_slots:  # GPU slots: what runs where, and the time before and after packing
        from orchestrator.cli.slotview import render_slots

        console.print(render_slots(experiment, shown, console.width))
    if reuse is not None:
        console.print(
            f"baselines from {source}: {len(reuse.records)} point(s) reused, "
            f"{the_plan.restarts - shown.restarts} restart(s) saved"
        )
        for reason in reuse.reasons:
            console.print(f"  not reused: {reason}", markup=False)


def register(app: typer.Typer) -> None:
    app.command("plan")(plan)
