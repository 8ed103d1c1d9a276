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
        help="A run directory (results/<experiment>/<run id>), latest, latest~N, EXPERIMENT/latest, or an "
        "experiment file (its latest run).",
        show_default=False,
    ),
    results: Path | None = typer.Option(
        None, "--results", help="Where runs are looked up for latest (default: $SPECSWEEP_RESULTS, else ./results)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the recommendations as JSON instead of YAML."),
) -> None:
    """Print the best configuration per load level (interval, runner-up, margin, constraints, what was not
    tried) as an experiment fragment: a `variants:` mapping with one variant per recommended configuration."""
    from orchestrator.runs.runref import resolve_run
    from orchestrator.search.recommend import recommend as build
    from orchestrator.search.recommend import to_yaml

    recs = build(resolve_run(run, results))
    if as_json:
        typer.echo(json.dumps(recs.to_dict(), indent=2, default=str))
    else:
        typer.echo(to_yaml(recs), nl=False)


def register(app: typer.Typer) -> None:
    app.command("recommend")(recommend)
