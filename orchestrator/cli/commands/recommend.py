"""`specsweep recommend RUN`: the best configuration per load level of a run, as YAML to paste into an
experiment (the evidence in comments), or as JSON."""

from __future__ import annotations

import json
from pathlib import Path

import typer


def recommend(
    run: str = typer.Argument(
        ...,
        metavar="RUN",
        help="A run directory (results/<experiment>/<run id>), latest (the newest sweep or search), latest~N, "
        "latest-search (or -sweep, -playbook), EXPERIMENT/latest, or an experiment file (its latest run).",
        show_default=False,
    ),
    results: Path | None = typer.Option(
        None, "--results", help="Where runs are looked up for latest (default: $SPECSWEEP_RESULTS, else ./results)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the recommendations as JSON instead of YAML."),
    as_schedule: bool = typer.Option(
        False,
        "--schedule",
        help="Print a draft length per batch-size range instead (vLLM's num_speculative_tokens_per_batch_size "
        "in --speculative-config), each range with its evidence (docs/schedule.md).",
    ),
    variant: str | None = typer.Option(
        None, "--variant", help="With --schedule: the variant whose draft length varies (default: the only one)."
    ),
    host: str | None = typer.Option(None, "--host", help="With --schedule: the host (default: the only one)."),
    workload: str | None = typer.Option(
        None, "--workload", help="With --schedule: the workload (default: the only one)."
    ),
    max_batch_size: int | None = typer.Option(
        None,
        "--max-batch-size",
        min=1,
        help="With --schedule: where the last range ends (default: the command's --max-num-seqs, else vLLM's 128).",
    ),
) -> None:
    """Print the best configuration per load level (interval, runner-up, margin, constraints, what was not
    tried) as an experiment fragment: a `variants:` mapping with one variant per recommended configuration.
    A run without a point that succeeded is refused: there is nothing to recommend."""
    from orchestrator.runs.identity import require_points
    from orchestrator.runs.runref import resolve_run
    from orchestrator.search.recommend import recommend as build
    from orchestrator.search.recommend import to_yaml

    run_dir = resolve_run(run, results)
    require_points(run_dir, "recommend", usable=True)
    if as_schedule:
        from orchestrator.analysis.answer import answer
        from orchestrator.analysis.breakeven import break_even_text
        from orchestrator.analysis.schedule import schedule, schedule_text

        ans = answer(run_dir)
        sched = schedule(ans, variant=variant, host=host, workload=workload, max_batch_size=max_batch_size)
        from orchestrator.analysis.verification import verdict_text

        stops = ans.break_even
        if as_json:
            doc = {
                **sched.to_dict(),
                "break_even": [b.to_dict() for b in stops],
                "schedule_verdicts": [v.to_dict() for v in ans.schedule_verdicts],
            }
            typer.echo(json.dumps(doc, indent=2, default=str))
        else:
            text = schedule_text(sched) + break_even_text(stops) + verdict_text(ans.schedule_verdicts)
            typer.echo(text, nl=False)
        return
    recs = build(run_dir)
    if as_json:
        typer.echo(json.dumps(recs.to_dict(), indent=2, default=str))
    else:
        typer.echo(to_yaml(recs), nl=False)


def register(app: typer.Typer) -> None:
    app.command("recommend")(recommend)
