"""`specsweep sweep FILE`: run the whole experiment, resumable, restoring every host on every way out."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from types import FrameType
from typing import Any

import typer

from orchestrator.console import console, err_console
from orchestrator.experiment import load_experiment
from orchestrator.progress import SweepProgress
from orchestrator.summary import summary_table


def sweep(
    file: Path = typer.Argument(..., help="Experiment file (YAML).", show_default=False),
    resume: str | None = typer.Option(
        None, "--resume", metavar="RUN_DIR|latest", help="Continue a run: only points without a final record run."
    ),
    retry_failed: bool = typer.Option(False, "--retry-failed", help="With --resume, run failed points again."),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Print each deployment's drop-in and commands; touch nothing."
    ),
    results: Path = typer.Option(Path("results"), "--results", help="Where run directories are created."),
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
    quiet: bool = typer.Option(False, "-q", "--quiet", help="No progress; print only the run directory."),
    as_json: bool = typer.Option(False, "--json", help="Print a machine-readable summary at the end."),
) -> None:
    """Deploy each configuration, measure every load point, store records, restore the host, report.

    Ctrl-C (or SIGTERM) stops the load, restores the host and marks the run interrupted (exit 130); a second
    Ctrl-C skips waiting but still restores.
    """
    from orchestrator.runner import StopSignal, SweepOptions, run_sweep

    experiment = load_experiment(file)
    if dry_run:
        from orchestrator.dryrun import describe_plan

        typer.echo(describe_plan(experiment))
        return
    stop = StopSignal()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        if stop.requested.is_set():
            err_console.print("[yellow]second interrupt: not waiting; restoring the host[/yellow]")
        else:
            err_console.print("[yellow]interrupt: stopping the load and restoring the host...[/yellow]")
        stop.request()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    progress = None if (quiet or as_json) else SweepProgress(err_console)
    try:
        with progress if progress is not None else _nothing():
            result = run_sweep(
                experiment,
                SweepOptions(
                    results_root=results,
                    resume=resume,
                    retry_failed=retry_failed,
                    break_lock=break_lock,
                    baselines_from=baselines_from,
                ),
                observer=progress.observe if progress is not None else None,
                stop=stop,
            )
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    report_path = None
    if report:
        from orchestrator.report import build_report

        report_path = build_report(result.run_dir).files.get("report.html")
    if as_json:
        typer.echo(json.dumps(_json_summary(result, report_path), indent=2, default=str))
    elif quiet:
        typer.echo(str(result.run_dir))
    else:
        console.print(summary_table(result.run_dir))
        console.print(f"run directory: {result.run_dir}")
        if report_path is not None:
            console.print(f"report: {report_path}")


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def _json_summary(result: Any, report_path: Path | None) -> dict[str, Any]:
    return {
        "run_dir": str(result.run_dir),
        "state": result.state,
        "points": len(result.records),
        "failed": result.failed,
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
                "accept_len": (r.server or {}).get("accept_len"),
            }
            for r in result.records
        ],
    }


def register(app: typer.Typer) -> None:
    app.command("sweep")(sweep)
