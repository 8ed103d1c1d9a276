"""`specsweep sweep FILE`: run the whole experiment, resumable, restoring every host on every way out.

Exit codes: 0 every point succeeded (or ``--allow-failures``), 1 an error ended the run, 2 a bad experiment
file, 3 the plan ran to its end but points failed or were degraded (lost more than ``checks.degraded_requests``
of their requests), 4 the experiment's ``failure_policy`` stopped the sweep,
130 interrupted.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape

from orchestrator.cli.console import console, err_console
from orchestrator.cli.progress import SweepProgress
from orchestrator.cli.signals import stopping_signals
from orchestrator.cli.summary import OneLine, summary_renderables
from orchestrator.experiment.schema import load_experiment

if TYPE_CHECKING:
    from orchestrator.analysis.answer import Answer

EXIT_POINTS_FAILED = 3
EXIT_STOPPED = 4


def sweep(
    file: Path = typer.Argument(..., metavar="FILE", help="Experiment file (YAML).", show_default=False),
    resume: str | None = typer.Option(
        None,
        "--resume",
        metavar="RUN_DIR|latest",
        help="Continue a run: only points without a final record run. latest: the newest run of this file on "
        "these hosts. An experiment changed since the run is refused, with what changed.",
    ),
    retry_failed: bool = typer.Option(False, "--retry-failed", help="With --resume, run failed points again."),
    redo_changed: bool = typer.Option(
        False,
        "--redo-changed",
        help="With --resume of an edited experiment: measure the changed and new points in this run (the old "
        "records move to superseded.jsonl) instead of refusing.",
    ),
    allow_failures: bool = typer.Option(
        False,
        "--allow-failures",
        help="Exit 0 although points failed (a sweep the failure policy stopped still exits 4).",
    ),
    dry_run: bool = typer.Option(
        False,
        "--dry-run",
        help="Print each deployment's drop-in and commands; touch nothing. With --resume: only what that run "
        "has not finished.",
    ),
    results: Path | None = typer.Option(
        None,
        "--results",
        help="Where run directories are created (default: the experiment's results_dir, else $SPECSWEEP_RESULTS, "
        "else results/ beside the experiment file).",
        show_default=False,
    ),
    baselines_from: str | None = typer.Option(
        None,
        "--baselines-from",
        metavar="RUN_DIR|latest",
        help="Reuse baseline points from an earlier run where the configuration and host are identical.",
    ),
    break_lock: bool = typer.Option(
        False, "--break-lock", help="Take over a host lock left by another controller (make sure it is dead)."
    ),
    report: bool = typer.Option(True, "--report/--no-report", help="Write the report into the run directory."),
    quiet: bool = typer.Option(
        False, "-q", "--quiet", help="No progress; print only the run directory (and warnings, on stderr)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print a machine-readable summary at the end."),
) -> None:
    """Deploy each configuration, measure every load point, store records, restore the host, report.

    Ctrl-C (or SIGTERM) stops the load, restores the host and marks the run interrupted (exit 130); a second
    Ctrl-C skips waiting but still restores.

    With a search (an objective: and a search: strategy other than grid), the strategy picks each next
    configuration from what the finished ones scored, measures candidates at the objective's load only and
    stops at its budget; --dry-run shows its first round, --resume continues it without repeating a restart
    (docs/search.md).

    Exit codes: 0 every point succeeded (or --allow-failures); 3 the plan ran to its end but points failed,
    or lost more than checks.degraded_requests of their requests (run state done, or failed when none
    succeeded); 4 the experiment's failure_policy stopped the sweep (a
    baseline that cannot start, or N deployments in a row that cannot; state stopped); 1 an error ended the
    run; 2 a bad experiment file; 130 interrupted.
    """
    from orchestrator.runs.runref import results_root
    from orchestrator.sweep.runner import StopSignal, SweepOptions, run_sweep

    experiment = load_experiment(file)
    root = results_root(results, experiment)
    if dry_run:
        from orchestrator.sweep.dryrun import describe_plan, resume_view

        view = resume_view(experiment, resume, root, retry_failed=retry_failed) if resume is not None else None
        typer.echo(describe_plan(experiment, view))
        return
    stop = StopSignal()

    progress = None if (quiet or as_json) else SweepProgress(err_console)
    stop_timeout = getattr(experiment.service, "stop_timeout", None)

    def say(message: str) -> None:
        if stop.requested.is_set():
            message = "second interrupt: not waiting; restoring the host"
        elif message.startswith("interrupt") and progress is not None:  # what it waits for, and how long at most
            message = f"interrupt: {progress.stopping_text(stop_timeout)}"
        err_console.print(f"[yellow]{escape(message)}[/yellow]")

    if progress is None:
        # -q and --json hide progress, not a warning: a secret written inline is said on stderr all the same
        # (stdout keeps only the run directory, or the JSON); with progress it comes as the run's first notice.
        for warning in experiment.warnings:
            err_console.print(f"[yellow]warning[/yellow] {escape(warning)}", highlight=False, soft_wrap=True)
    with stopping_signals(stop.request, say), progress if progress is not None else _nothing():
        result = run_sweep(
            experiment,
            SweepOptions(
                results_root=root,
                resume=resume,
                retry_failed=retry_failed,
                break_lock=break_lock,
                baselines_from=baselines_from,
                redo_changed=redo_changed,
            ),
            observer=progress.observe if progress is not None else None,
            stop=stop,
        )
    from orchestrator.analysis.answer import answer as make_answer

    # The run's answer, made once: the ending, the report, --json and the exit code all render it (a resumed run
    # that measured nothing new has its earlier records: it has an answer all the same).
    records = result.run_dir / "records.jsonl"
    has_records = bool(result.records) or (records.is_file() and records.stat().st_size > 0)
    the_answer = make_answer(result.run_dir, save=True) if has_records else None
    report_path = None
    if report:
        from orchestrator.report import build_report

        talk = not (quiet or as_json)
        if talk:  # the analysis and the figures take seconds: say what is happening after "host restored"
            err_console.print("building the report (analysis, figures, tables) ...", highlight=False)
        built = build_report(
            result.run_dir,
            answer=the_answer,
            progress=_report_step if talk else None,
        )
        report_path = built.files.get("report.html")
    code, problem = outcome(result, allow_failures, the_answer)
    if as_json:
        summary = {**_json_summary(result, report_path, the_answer), "exit_code": code}
        typer.echo(json.dumps(summary, indent=2, default=str))
    elif quiet:
        typer.echo(str(result.run_dir))
    else:
        for part in summary_renderables(result.run_dir, console.width, answer=the_answer):
            # A finding and its advice stays one line, for grep; tables and the rest fit the width.
            console.print(part, soft_wrap=isinstance(part, OneLine))
        console.print(f"run directory: {result.run_dir}", soft_wrap=True)
        if report_path is not None:
            console.print(f"report: {report_path}", soft_wrap=True)
    if problem:  # whole, with the reason: the one line a script or a CI log reads (also after -q)
        typer.secho(f"specsweep: error: {problem}", err=True, fg=typer.colors.RED)
    if code:
        raise typer.Exit(code)


def outcome(result: Any, allow_failures: bool = False, answer: Answer | None = None) -> tuple[int, str | None]:
    """(exit code, the one line that says why it is not 0) for a finished sweep (see the module docstring).

    Every count said is the run's ``answer``'s (points, not windows; degraded points count as failed points for
    the exit code; the failed points by kind and the line itself: ``Answer.problem``); a run without a record
    has no answer: nothing measured, of the points its plan holds."""
    from orchestrator.analysis.answer import Counts

    counts = answer.counts if answer is not None else Counts(planned=int((result.points or {}).get("planned", 0)))
    if result.state == "stopped":
        return EXIT_STOPPED, (
            f"stopped by the failure policy: {result.stop_reason}; hosts restored; {counts.failed} point(s) failed, "
            f"{counts.not_measured} of {counts.planned} not measured (run directory: {result.run_dir})"
        )
    problem = answer.problem() if answer is not None else None
    if problem is None or allow_failures:
        return 0, None
    return EXIT_POINTS_FAILED, f"{problem}; --allow-failures exits 0 (run directory: {result.run_dir})"


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def _json_summary(result: Any, report_path: Path | None, answer: Answer | None = None) -> dict[str, Any]:
    """What ``sweep --json`` prints: how the sweep ended and the run's answer (every point's figures with their
    intervals and sources, the winners, the counts, the findings); ``records`` keeps one line per window."""
    from orchestrator.analysis.answer import Counts
    from orchestrator.analysis.frame import record_accept_len

    counts = answer.counts if answer is not None else Counts(planned=int((result.points or {}).get("planned", 0)))
    return {
        "run_dir": str(result.run_dir),
        "state": result.state,
        "points": counts.measured,
        "failed": counts.failed,
        "degraded": counts.degraded,
        "run_points": result.points,
        "stop_reason": result.stop_reason,
        "report": str(report_path) if report_path else None,
        "records": [
            {
                "host": r.host,
                "variant": r.variant,
                "params": r.params,
                "concurrency": r.concurrency,
                "rate": r.rate,
                "status": r.status,
                "output_tok_s": (r.client or {}).get("output_tok_s"),
                # The accept length the answer shows for this window (its most exact source), not the log's.
                "accept_len": record_accept_len(r)[0],
            }
            for r in result.records
        ],
        "answer": answer.to_dict() if answer is not None else None,
    }


def _report_step(message: str) -> None:
    err_console.print(f"report: {escape(message)}", highlight=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    app.command("sweep")(sweep)
