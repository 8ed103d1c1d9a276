"""`specsweep verify-schedule RUN`: deploy the draft-length schedule derived from a sweep as one more
configuration, measure it against the best static configurations at each load and over a ramp, and say whether
it beats, ties or loses, and whether the engine ran the k it was given (docs/schedule.md)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import typer


def verify_schedule(
    run: str | None = typer.Argument(
        None,
        metavar="RUN",
        help="The sweep the schedule is derived from: a run directory, latest, latest~N, EXPERIMENT/latest, or "
        "an experiment file (its latest run). May be left out with --resume.",
        show_default=False,
    ),
    resume: str | None = typer.Option(
        None,
        "--resume",
        metavar="VERIFY_RUN",
        help="Continue an interrupted verification run (the command an interrupted verify-schedule prints): its "
        "verification experiment as written, the inline secrets read again from the source's experiment file.",
    ),
    results: Path | None = typer.Option(
        None,
        "--results",
        help="Where runs are looked up for latest, and where the verification run is made (default: the "
        "source run's results directory).",
    ),
    variant: str | None = typer.Option(None, "--variant", help="The variant whose draft length varies."),
    host: str | None = typer.Option(None, "--host", help="The host (default: the only one)."),
    workload: str | None = typer.Option(None, "--workload", help="The workload (default: the only one)."),
    max_batch_size: int | None = typer.Option(
        None, "--max-batch-size", min=1, help="Where the last range ends (default: --max-num-seqs, else 128)."
    ),
    rates: list[float] = typer.Option(
        [],
        "--rate",
        min=0.001,
        metavar="R",
        help="Requests per second of the ramp (repeatable; default: what the source sweep's winner completed at "
        "its middle concurrency). Arrivals are Poisson, capped at the highest measured concurrency in flight.",
    ),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Write the verification experiment and print its path and plan; deploy nothing."
    ),
    allow_failures: bool = typer.Option(False, "--allow-failures", help="Exit 0 although points failed."),
    quiet: bool = typer.Option(False, "-q", "--quiet", help="No progress; print the run directory and the verdict."),
    as_json: bool = typer.Option(
        False, "--json", help="Print the sweep's JSON summary; its answer holds schedule_verdicts."
    ),
) -> None:
    """Verify a schedule: derive it from RUN (as `recommend RUN --schedule` prints it), write the verification
    experiment (RUN/verify-schedule.yaml: the autoregressive baseline, the variant's configurations that won a
    load, and variant `schedule` running the schedule's --speculative-config; RUN's concurrencies and an
    open-loop ramp), sweep it like `specsweep sweep`, and print the verdict: at each load and over the ramp,
    whether the schedule beats, ties or loses to the best static configuration, and the k the engine ran
    there by its own counters (draft tokens per draft; a schedule it ignored is the error finding
    schedule_ignored). The verdict is in the verification run's report and in `recommend VERIFY_RUN --schedule`.
    Where the schedule fitted to RUN runs one configuration at every load, there is nothing to deploy: the verdict
    is that static configuration (exit 0).

    An interrupted verification run is continued by `verify-schedule --resume VERIFY_RUN` (the command it
    prints); a Ctrl-C while the schedule is derived, before the verification run is made, leaves no run.

    Exit codes are the sweep's (0, 1, 2, 3, 4, 130); a verdict of losing is not an error."""
    from orchestrator.analysis.answer import answer
    from orchestrator.analysis.verification import verdict_text
    from orchestrator.cli.commands.sweep import sweep
    from orchestrator.errors import Interrupted
    from orchestrator.runs.liveness import effective_state
    from orchestrator.runs.runref import resolve_run, runs_of
    from orchestrator.runs.store import RunStore
    from orchestrator.sweep.verification import resumed_verification
    from orchestrator.sweep.verifysecrets import verification_secrets

    if resume is not None:
        if variant or host or workload or max_batch_size or rates:
            raise typer.BadParameter(
                "with --resume the verification experiment is the run's own: leave out --variant, --host, "
                "--workload, --max-batch-size and --rate"
            )
        made_dir, path, run_dir = resumed_verification(resume, run, results)
        secrets = verification_secrets(run_dir)
        os.environ.update(secrets)  # the inline secrets, read again from the source's experiment file
        root = made_dir.parent.parent  # its own results directory, whatever --results looked it up in
        resume = str(made_dir)
    else:
        if run is None:
            raise typer.BadParameter("give RUN, the sweep to derive the schedule from (or --resume VERIFY_RUN)")
        try:
            derived = _derive(run, results, variant, host, workload, max_batch_size, rates, quiet or as_json)
        except KeyboardInterrupt:
            raise Interrupted("verify-schedule: interrupted while deriving the schedule; no run was made") from None
        if derived is None:
            return
        doc, run_dir, path = derived
        root = results if results is not None else run_dir.parent.parent
    name = RunStore.open(Path(resume)).info.experiment if resume is not None else str(doc["name"])
    before = set(runs_of(root, name))
    code = 0
    try:
        if not (quiet or as_json):
            typer.echo(f"verification experiment: {path}", err=True)
        sweep(
            file=path,
            resume=resume,
            retry_failed=False,
            redo_changed=False,
            allow_failures=allow_failures,
            dry_run=dry_run,
            results=root,
            baselines_from=None,
            break_lock=False,
            report=True,
            quiet=quiet,
            as_json=as_json,
        )
    except typer.Exit as stop:
        code = stop.exit_code
    except KeyboardInterrupt:  # outside the sweep's own handler: before it began, or after its run ended
        new = sorted(set(runs_of(root, name)) - before)
        if resume is None and not new:
            raise Interrupted(
                "verify-schedule: interrupted before the verification run began; no run was made"
            ) from None
        store = RunStore.open((new or [Path(str(resume))])[-1])
        if effective_state(store.path, store.info.state) in ("interrupted", "running"):
            raise Interrupted(f"verify-schedule: interrupted; resume with {store.resume_command}") from None
        raise Interrupted(
            f"verify-schedule: interrupted after run {store.path} ended ({store.info.state}): its report may be "
            f"incomplete; specsweep report {store.path} writes it again"
        ) from None
    if dry_run or as_json or code not in (0, 3):
        if code:
            raise typer.Exit(code)
        return
    made = Path(resume) if resume is not None else resolve_run(f"{doc['name']}/latest", root)
    typer.echo(verdict_text(answer(made).schedule_verdicts), nl=False)
    if code:
        raise typer.Exit(code)


def _derive(
    run: str,
    results: Path | None,
    variant: str | None,
    host: str | None,
    workload: str | None,
    max_batch_size: int | None,
    rates: list[float],
    silent: bool,
) -> tuple[dict[str, Any], Path, Path] | None:
    """(the verification experiment, the source run, where it is written) of RUN's schedule; None when there is
    nothing to deploy (the verdict printed). Sets the variables its inline secrets are read from."""
    import yaml

    from orchestrator.analysis.answer import answer
    from orchestrator.analysis.schedule import schedule
    from orchestrator.errors import StoreError
    from orchestrator.files import write_atomic
    from orchestrator.runs.identity import require_points
    from orchestrator.runs.liveness import still_running
    from orchestrator.runs.runref import resolve_run
    from orchestrator.runs.store import RunStore
    from orchestrator.sweep.verification import VERIFY_FILE, verification_experiment
    from orchestrator.sweep.verifysecrets import restore_secrets

    run_dir = resolve_run(run, results)
    if still_running(run_dir):  # first: its points, its winners and so the schedule are not yet what they will be
        raise StoreError(
            f"{run_dir}: the sweep is still running (a controller holds its lock): verify its schedule once it ends"
        )
    require_points(run_dir, "verify-schedule", usable=True)
    ans = answer(run_dir)
    sched = schedule(ans, variant=variant, host=host, workload=workload, max_batch_size=max_batch_size)
    if sched.constant and sched.unsupported is None:  # one configuration everywhere: nothing to deploy
        typer.echo(f"# verdict: no schedule to verify: {sched.recommendation_text()}")
        return None
    doc = verification_experiment(run_dir, ans, sched, rates=list(rates) or None)
    source = RunStore.open(run_dir).info.experiment_file
    secrets = restore_secrets(doc, run_dir / "experiment.yaml", source)
    os.environ.update(secrets)  # the inline secrets, read again from the experiment file, for this sweep only
    if secrets and not silent:
        names = ", ".join(f"${name}" for name in secrets)
        typer.echo(f"secrets written inline in {source} reach the verification sweep as {names}", err=True)
    path = run_dir / VERIFY_FILE
    write_atomic(path, yaml.safe_dump(doc, sort_keys=False, allow_unicode=True))  # whole, even if interrupted
    return doc, run_dir, path


def register(app: typer.Typer) -> None:
    app.command("verify-schedule")(verify_schedule)
