"""`specsweep ls [FILE|EXPERIMENT] [--kind KIND]`: the runs under a results root, newest last: experiment, run,
kind, hosts, state (a playbook's PASS or FAIL; ``(resumed)`` for a run continued with --resume), points ok and
failed, when it started and how long it took. The sweeps and searches by default; `--kind playbook` (or
`search`, `sweep`, several joined by commas, `all`)."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import typer
from rich.text import Text

from orchestrator.cli.console import console
from orchestrator.cli.textfit import Column, fit_table
from orchestrator.experiment.durations import format_duration
from orchestrator.files import read_bounded

_STATE_STYLE = {
    "done": "green",
    "PASS": "green",
    "running": "cyan",
    "interrupted": "yellow",
    "stopped": "yellow",
    "failed": "red",
    "FAIL": "bold red",
}


def _time(text: Any) -> datetime | None:
    if not isinstance(text, str):
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def _seconds(run_dir: Path, started: datetime | None, ended: datetime | None, resumed: list[str]) -> float | None:
    """How long the run ran: from its start to its end, or, resumed, its openings' spans summed (the pause
    between a stop and its resume is not the run's time)."""
    from orchestrator.runs.identity import running_seconds

    if not started or not ended:
        return None
    running = running_seconds(run_dir) if resumed else None
    return round(running if running is not None else (ended - started).total_seconds(), 1)


def run_summary(run_dir: Path) -> dict[str, Any]:
    """What ``ls`` shows of one run directory (``--json`` prints these)."""
    try:
        info = json.loads(read_bounded(run_dir / "run.json", 64 * 1024 * 1024).decode("utf-8"))
    except (OSError, ValueError) as exc:
        return {
            "run_dir": str(run_dir),
            "run_id": run_dir.name,
            "experiment": run_dir.parent.name,
            "state": "unreadable",
            "error": str(exc),
        }
    from orchestrator.runs.identity import playbook_verdict, resumed_at, run_kind

    info = info if isinstance(info, dict) else {}
    points = info.get("points") if isinstance(info.get("points"), dict) else None
    counts, why = _counts(run_dir)
    verdict = playbook_verdict(run_dir)
    from orchestrator.runs.liveness import effective_state, resume_hint

    # A run killed (kill -9) still says running in run.json; no controller holds its lock: it is interrupted.
    state = effective_state(run_dir, str(info.get("state", "?")))
    started, ended = _time(info.get("started_at")), _time(info.get("ended_at"))
    resumed = resumed_at(run_dir)
    hosts: list[Any] = info["hosts"] if isinstance(info.get("hosts"), list) else []
    return {
        "run_dir": str(run_dir),
        "run_id": str(info.get("run_id", run_dir.name)),
        "experiment": str(info.get("experiment", run_dir.parent.name)),
        "experiment_file": info.get("experiment_file"),
        "kind": run_kind(run_dir),
        "hosts": [str(h) for h in hosts],
        # A playbook's run shows its verdict where a sweep shows how it ended: `FAIL`, not `done`.
        "state": verdict.word if verdict is not None and state in ("done", "failed") else state,
        "run_state": state,
        "verdict": verdict.to_dict() if verdict is not None else None,
        # The answer's planned points (a configuration at a load, repeats combined), as its ok and failed (None,
        # with ``counts_error``, when the run's answer cannot be made).
        "planned": (counts or {}).get("planned", points.get("planned") if points else None),
        "ok": None if counts is None else counts["ok"],
        "degraded": None if counts is None else counts["degraded"],
        "failed": None if counts is None else counts["failed"],
        "counts_error": why,
        "started_at": info.get("started_at"),
        "ended_at": info.get("ended_at"),
        # A resumed run's time is its openings' (runs/identity.py, running_seconds): not the pause between them.
        "seconds": _seconds(run_dir, started, ended, resumed),
        "stop_reason": info.get("stop_reason"),
        # When it was resumed (--resume), oldest first: the state column says "resumed" beside how it ended.
        "resumed_at": resumed,
        "resume": resume_hint(run_dir, info.get("experiment_file")) if state in ("interrupted", "stopped") else None,
    }


def _counts(run_dir: Path) -> tuple[dict[str, int] | None, str | None]:
    """The run's points by status as its answer counts them, and why there are none: ``answer.json`` when it is
    current (the sweep's ending and ``report`` keep it), else the answer's rules applied to the records'
    identities and statuses alone (``analysis/quickcounts.py``), else the answer made now. A run without a
    record has none of any status; a run whose answer cannot be made shows no counts (never a count of its own:
    the same counts as the ending and the report, or none)."""
    # answer.json and quickcounts without pandas; the answer (pandas, the whole analysis) only when made here.
    from orchestrator.analysis.answerfile import cached_counts
    from orchestrator.analysis.quickcounts import quick_counts
    from orchestrator.errors import SpecsweepError

    cached = cached_counts(run_dir)
    if cached is not None:
        return cached, None
    if not (run_dir / "records.jsonl").exists():
        return {"ok": 0, "degraded": 0, "failed": 0, "skipped": 0}, None
    quick = quick_counts(run_dir)
    if quick is not None:  # no answer made: a run of thousands of points costs milliseconds (bench/scale.py)
        return quick, None
    from orchestrator.analysis.answer import answer

    try:
        return answer(run_dir).counts.to_dict(), None
    except (SpecsweepError, OSError, ValueError) as exc:
        return None, f"no answer: {exc}"


#: Runs whose records must be read (no current ``answer.json``) before ``ls`` reads them in worker processes.
PARALLEL_FROM = 4


def _summaries(runs: list[Path]) -> list[dict[str, Any]]:
    """:func:`run_summary` of each run, in order. A run without a current ``answer.json`` has its records read
    (``analysis/quickcounts.py``, tens of milliseconds a run of thousands of points): when at least
    :data:`PARALLEL_FROM` runs need that and the process may use more than one core, they are read in forked
    worker processes, one a core (at most 8), each run whole in one worker (the same summary). ``ls -n 0`` of 100
    runs of 4,875 points: bench/RESULTS-scale.md."""
    from orchestrator.analysis.answerfile import cached_counts

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    heavy = [p for p in runs if cached_counts(p) is None and (p / "records.jsonl").exists()]
    if len(heavy) < PARALLEL_FROM or cores < 2:
        return [run_summary(p) for p in runs]
    import multiprocessing
    import signal
    from concurrent.futures import ProcessPoolExecutor

    workers = min(cores, 8, len(heavy))
    # fork: the workers start with this process's modules already imported (spawn would import them again).
    pool = ProcessPoolExecutor(
        workers, mp_context=multiprocessing.get_context("fork"), initializer=signal.signal,
        initargs=(signal.SIGINT, signal.SIG_IGN),  # Ctrl-C is this process's to handle, not each worker's
    )  # fmt: skip
    try:
        chunk = max(1, len(heavy) // (workers * 4))
        read = dict(zip(heavy, pool.map(_summary_of, heavy, chunksize=chunk), strict=True))
    finally:
        pool.shutdown(cancel_futures=True)  # after Ctrl-C, the runs not yet read are not read
    return [read[p] if p in read else run_summary(p) for p in runs]


def _summary_of(run_dir: Path) -> dict[str, Any]:
    """:func:`run_summary` as a worker finds it (a worker is given this function's name, not the function)."""
    return run_summary(run_dir)


def _count(value: Any) -> str:
    return "-" if value is None else str(value)


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
    kind: str | None = typer.Option(
        None,
        "--kind",
        metavar="KIND",
        help="Which runs: sweep, search, playbook (several joined by commas) or all (default: sweep,search, the "
        "runs `latest` means).",
        show_default=False,
    ),
    limit: int = typer.Option(20, "--limit", "-n", help="Show the newest N runs (0: all)."),
    as_json: bool = typer.Option(False, "--json", help="Print the runs as JSON (every run, oldest first)."),
) -> None:
    """List runs, newest last: experiment, run id, kind, state (a playbook's PASS or FAIL), points ok and failed,
    when and how long, hosts. Sweeps and searches unless --kind says otherwise."""
    import difflib
    from collections import Counter

    from orchestrator.errors import ConfigError
    from orchestrator.runs.identity import RUN_KINDS, parse_kinds, run_kind
    from orchestrator.runs.runref import all_runs, kinds_text, of_kinds, results_root, runs_of, where_else

    kinds = parse_kinds(kind)

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
    if what is not None and kind is None:  # a name shows its runs whatever their kind, unless --kind narrows it
        kinds = frozenset(RUN_KINDS)
    every, runs = runs, of_kinds(runs, kinds)
    if as_json:
        summaries = _summaries(runs)
        typer.echo(json.dumps({"results_root": str(root), "kinds": sorted(kinds), "runs": summaries}, indent=2))
        return
    listed = set(runs)
    others = Counter(run_kind(p) for p in every if p not in listed)
    if not runs:
        what_runs = "runs" if kinds == frozenset(RUN_KINDS) else f"{kinds_text(kinds)} runs"
        hint = "".join(f"; {n} {k} run{'s' if n != 1 else ''}: --kind {k} lists them" for k, n in others.items())
        if not every and what is None and results is None:  # none here at all: maybe beside a file below
            hint += where_else(root)
        console.print(
            f"no {what_runs} under {root}" + (f" of {what}" if what else "") + hint, soft_wrap=True, markup=False
        )
        return
    # Only the runs shown are read (a run's counts may need its answer made): the others are only counted.
    shown = _summaries(runs[-limit:] if limit > 0 else runs)
    several_kinds = len({run.get("kind") for run in shown}) > 1
    columns = [
        Column("experiment", "left", required=True, wrap=True),
        Column("run", "left", required=True),
        *([Column("kind", "left", priority=80)] if several_kinds else []),
        Column("state", "left", required=True),
        Column("ok", required=True),
        *([Column("degraded", required=True)] if any(run.get("degraded") for run in shown) else []),
        Column("failed", required=True),
        Column("started (UTC)", "left", priority=70, wrap=True),  # at 80 columns the date over the time
        Column("took", priority=40),
        Column("hosts", "left", priority=60, wrap=True),
    ]
    rows = []
    for run in shown:
        started = _time(run.get("started_at"))
        state = str(run["state"])
        shown_state = f"{state} (resumed)" if run.get("resumed_at") else state
        rows.append(
            [
                Text(str(run["experiment"])),
                Text(str(run["run_id"])),
                *([Text(str(run.get("kind", "?")))] if several_kinds else []),
                Text(shown_state, style=_STATE_STYLE.get(state, "")),
                _count(run.get("ok")),
                *(
                    [Text(_count(run.get("degraded")), style="red" if run.get("degraded") else "")]
                    if any(r.get("degraded") for r in shown)
                    else []
                ),
                Text(_count(run.get("failed")), style="red" if run.get("failed") else ""),
                started.astimezone(UTC).strftime("%Y-%m-%d %H:%M") if started else "-",
                format_duration(run["seconds"]) if run.get("seconds") is not None else "-",
                Text(_host_names(run.get("hosts") or [])),
            ]
        )
    more = len(runs) - len(shown)
    noun = "run(s)" if kinds == frozenset(RUN_KINDS) else f"{kinds_text(kinds)} run(s)"
    caption = (
        f"{len(runs)} {noun} under {root}"
        + (f"; the {more} oldest not shown (--limit 0)" if more else "")
        + "".join(f"; {n} {k} run{'s' if n != 1 else ''} not shown (--kind {k})" for k, n in others.items())
    )
    console.print(fit_table(columns, rows, console.width, caption=Text(caption).markup))
    for run in shown:
        if run.get("resume"):
            console.print(
                f"{run['run_id']} is {run['state']}; resume it: {run['resume']}", soft_wrap=True, markup=False
            )


def register(app: typer.Typer) -> None:
    app.command("ls")(ls)
