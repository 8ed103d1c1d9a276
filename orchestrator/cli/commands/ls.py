"""`specsweep ls [FILE|EXPERIMENT]`: the runs under a results root, newest last: experiment, run, hosts, state,
points ok and failed, when it started and how long it took."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import typer
from rich.text import Text

from orchestrator.cli.console import console
from orchestrator.cli.textfit import Column, fit_table
from orchestrator.experiment.durations import format_duration

_STATE_STYLE = {"done": "green", "running": "cyan", "interrupted": "yellow", "stopped": "yellow", "failed": "red"}


def _time(text: Any) -> datetime | None:
    if not isinstance(text, str):
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def _counts(run_dir: Path) -> dict[str, int]:
    """Points by the status of their last record, read from records.jsonl (a run that never ended has no
    counts in run.json)."""
    latest: dict[tuple[str, str], str] = {}
    try:
        with open(run_dir / "records.jsonl", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if isinstance(record, dict):
                    latest[(str(record.get("host")), str(record.get("point_id")))] = str(record.get("status"))
    except OSError:
        return {"ok": 0, "failed": 0}
    statuses = list(latest.values())
    return {"ok": statuses.count("ok"), "failed": statuses.count("failed")}


def run_summary(run_dir: Path) -> dict[str, Any]:
    """What ``ls`` shows of one run directory (``--json`` prints these)."""
    try:
        info = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return {
            "run_dir": str(run_dir),
            "run_id": run_dir.name,
            "experiment": run_dir.parent.name,
            "state": "unreadable",
            "error": str(exc),
        }
    info = info if isinstance(info, dict) else {}
    points = info.get("points") if isinstance(info.get("points"), dict) else None
    counts = _counts(run_dir)
    started, ended = _time(info.get("started_at")), _time(info.get("ended_at"))
    hosts: list[Any] = info["hosts"] if isinstance(info.get("hosts"), list) else []
    return {
        "run_dir": str(run_dir),
        "run_id": str(info.get("run_id", run_dir.name)),
        "experiment": str(info.get("experiment", run_dir.parent.name)),
        "experiment_file": info.get("experiment_file"),
        "hosts": [str(h) for h in hosts],
        "state": str(info.get("state", "?")),
        "planned": points.get("planned") if points else None,
        "ok": counts["ok"],
        "failed": counts["failed"],
        "started_at": info.get("started_at"),
        "ended_at": info.get("ended_at"),
        "seconds": round((ended - started).total_seconds(), 1) if started and ended else None,
        "stop_reason": info.get("stop_reason"),
    }


def _host_names(hosts: list[str]) -> str:
    # ``name (how it is reached)``: the name is enough here; --json has the rest.
    return ", ".join(h.split(" (", 1)[0] for h in hosts) or "-"


def ls(
    what: str | None = typer.Argument(
        None,
        metavar="[FILE|EXPERIMENT]",
        help="Only the runs of this experiment file (under its results root) or experiment name.",
        show_default=False,
    ),
    results: Path | None = typer.Option(
        None,
        "--results",
        help="The results root (default: the experiment file's, else $SPECSWEEP_RESULTS, else ./results).",
        show_default=False,
    ),
    limit: int = typer.Option(20, "--limit", "-n", help="Show the newest N runs (0: all)."),
    as_json: bool = typer.Option(False, "--json", help="Print the runs as JSON (every run, oldest first)."),
) -> None:
    """List runs, newest last: experiment, run id, hosts, state, points ok and failed, when and how long."""
    import difflib

    from orchestrator.errors import ConfigError
    from orchestrator.runs.runref import all_runs, results_root, runs_of

    if what is not None and what.endswith((".yaml", ".yml")) and Path(what).is_file():
        from orchestrator.experiment.schema import load_experiment

        experiment = load_experiment(what)
        root = results_root(results, experiment)
        runs = runs_of(root, experiment.name)
    elif what is not None and what.endswith((".yaml", ".yml")):
        raise ConfigError(
            "no such experiment file (give an experiment file, an experiment's name, or nothing)", file=what
        )
    else:
        root = results_root(results)
        if what is not None and not (root / what).is_dir():
            known = sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
            close = difflib.get_close_matches(what, known, n=1)
            hint = (
                f"; did you mean {close[0]!r}?" if close else (f" (experiments: {', '.join(known)})" if known else "")
            )
            raise ConfigError(f"no experiment {what!r} has runs under {root}{hint}")
        runs = runs_of(root, what) if what is not None else all_runs(root)
    summaries = [run_summary(p) for p in runs]
    if as_json:
        typer.echo(json.dumps({"results_root": str(root), "runs": summaries}, indent=2))
        return
    if not summaries:
        console.print(f"no runs under {root}" + (f" of {what}" if what else ""), soft_wrap=True, markup=False)
        return
    shown = summaries[-limit:] if limit > 0 else summaries
    columns = [
        Column("experiment", "left", required=True, wrap=True),
        Column("run", "left", required=True),
        Column("state", "left", required=True),
        Column("ok", required=True),
        Column("failed", required=True),
        Column("started (UTC)", "left", priority=70),
        Column("took", priority=40),
        Column("hosts", "left", priority=60, wrap=True),
    ]
    rows = []
    for run in shown:
        started = _time(run.get("started_at"))
        state = str(run["state"])
        rows.append(
            [
                Text(str(run["experiment"])),
                Text(str(run["run_id"])),
                Text(state, style=_STATE_STYLE.get(state, "")),
                str(run.get("ok", "-")),
                Text(str(run.get("failed", "-")), style="red" if run.get("failed") else ""),
                started.astimezone(UTC).strftime("%Y-%m-%d %H:%M") if started else "-",
                format_duration(run["seconds"]) if run.get("seconds") is not None else "-",
                Text(_host_names(run.get("hosts") or [])),
            ]
        )
    more = len(summaries) - len(shown)
    caption = f"{len(summaries)} run(s) under {root}" + (f"; the {more} oldest not shown (--limit 0)" if more else "")
    console.print(fit_table(columns, rows, console.width, caption=Text(caption).markup))


def register(app: typer.Typer) -> None:
    app.command("ls")(ls)
