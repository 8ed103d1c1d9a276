"""``specsweep sweep --dry-run``: per deployment, exactly what would be written and run, touching nothing.

The text comes from the same pure render functions the services use, so a dry run cannot drift from a real
run: the drop-in (or unit file) a systemd service would write, the argv a process service would start. A
launcher that runs deployments its own way (a scheduler's job, a cluster's pod) describes them itself
(``LauncherKind.dry_run``, :mod:`orchestrator.launchers.registry`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.experiment.schema import Experiment
from orchestrator.experiment.service import SystemdServiceSpec
from orchestrator.experiment.slots import as_fields
from orchestrator.launchers.registry import kind_of
from orchestrator.plan.deployments import Plan, build_plan, load_lines
from orchestrator.quoting import shell_join, split_command, visible
from orchestrator.redaction import redact_text
from orchestrator.services.secrets import reference
from orchestrator.services.systemd import (
    DROPIN_NAME,
    UNIT_DIR,
    render_dropin,
    render_unit,
    secret_environment_file,
)

__all__ = ["ResumeView", "describe_plan", "resume_view"]


def _workload_lines(experiment: Experiment) -> list[str]:
    """What each workload of ``load.workloads`` sends (each is a load point of every deployment)."""
    from orchestrator.experiment.workloads import workload_sources

    return [
        f"# workload {name}: {source.describe()} (a load point of every deployment, no restart)"
        for name, source in workload_sources(experiment).items()
    ]


@dataclass(frozen=True)
class ResumeView:
    """What a ``--resume`` would continue, read without taking the run's lock or writing anything: the run,
    the point ids it has finished (not to run again), and what changed in the experiment since."""

    path: Path
    done: frozenset[str]
    changed: str | None = None


def resume_view(
    experiment: Experiment, ref: str, results_root: str | Path, *, retry_failed: bool = False
) -> ResumeView:
    """The run ``ref`` names (a run directory or ``latest``), as :func:`resume_run` would find it, read only."""
    from orchestrator.runs.store import RunStore
    from orchestrator.sweep.resume import compare_run, find_resumable

    path = find_resumable(experiment, results_root) if ref == "latest" else Path(ref)
    store = RunStore.open(path)
    state = store.read_state(retry_failed=retry_failed)
    check = compare_run(experiment, build_plan(experiment), store, latest=state.latest)
    changed = check.describe() if check.changed else None
    return ResumeView(store.path, frozenset(point for _host, point in state.final), changed)


def describe_plan(experiment: Experiment, resume: ResumeView | None = None) -> str:
    """A plain-text description of every deployment's host actions and load points; with ``resume``, only
    the deployments and points that run has not finished (what ``--resume`` would still measure)."""
    plan = build_plan(experiment)
    if resume is not None and kind_of(experiment).dry_run(experiment, plan) is None:
        return as_fields(redact_text(_describe_resume(experiment, plan, resume)))
    return as_fields(
        redact_text(_describe(experiment, plan))
    )  # secrets written inline are not shown (orchestrator/redaction.py)


def _describe(
    experiment: Experiment, plan: Plan, head: list[str] | None = None, done: frozenset[str] = frozenset()
) -> str:
    """The dry run of ``plan``; with ``head``, those lines first instead of the plan's totals, and the points
    of ``done`` (a resumed run's finished points) left out, with the deployments left with none."""
    service = experiment.service
    hosts = ", ".join(h.display_name for h in experiment.host_specs())
    searching: list[str] = []
    if experiment.search is not None and experiment.search.strategy != "grid":
        from orchestrator.search.preview import first_round

        plan, cost = first_round(experiment, plan)
        searching = [f"# {cost.describe()}", "# the first round (the baselines and the strategy's first batch):"]
    out: list[str] = [
        *(head or [f"# dry run of {experiment.name}: {plan.restarts} deployments, {plan.points_text} on {hosts}"]),
        *searching,
        *_decide_lines(experiment, plan),
        "# nothing below has been run",
    ]
    out += _workload_lines(experiment)
    out.append("")
    secrets = service.secrets or {}
    own = kind_of(experiment).dry_run(experiment, plan)
    if own is not None:  # a launcher that runs deployments its own way describes them itself (a job, a pod)
        return own
    for index, deployment in enumerate(plan.deployments, 1):
        points = [p for p in deployment.load_points if p.id not in done]
        if not points:
            continue
        out.append(f"## {index}/{plan.restarts} {deployment.label} ({deployment.id})")
        if isinstance(service, SystemdServiceSpec):
            unit = service.unit
            env_file = secret_environment_file(unit) if secrets else None
            if env_file is not None:
                where = ", ".join(f"{k} ({v.describe()})" for k, v in secrets.items())
                out.append(f"write {env_file} (mode 0600; the values of {where}, never shown)")
            if service.mode == "unit":
                path = f"{UNIT_DIR}/{unit}"
                text = render_unit(service.unit_file, deployment, environment_file=env_file)
                out.append(f"write {path} (the original is backed up and restored byte for byte):")
            else:
                path = f"{UNIT_DIR}/{unit}.d/{DROPIN_NAME}"
                text = render_dropin(deployment, secrets=list(secrets), environment_file=env_file)
                out.append(f"write {path}:")
            out.extend("    " + line for line in text.rstrip("\n").splitlines())
            out.append("run: systemctl daemon-reload")
            out.append(f"run: systemctl restart {unit}")
        elif service.kind == "none":
            out.append(f"nothing is written or restarted: the server at {experiment.server.url} is measured as it runs")
        else:
            argv = split_command(deployment.command or "", what="the process command")
            argv = [f"${{{name}}}" if (name := reference(w, secrets)) else w for w in argv]
            env = [f"{k}={v}" for k, v in deployment.environment.items()]
            if secrets:
                where = ", ".join(f"{k} ({v.describe()})" for k, v in secrets.items())
                out.append(f"pass {where} through the server's environment only (a 0600 file, removed at start)")
            out.append("stop the previous server process group, then start in its own session:")
            if env:  # exported in the server's shell just before it execs the program (services/process.py)
                out.append("    environment: " + shell_join(env))
            out.append("    " + shell_join(argv))
        out.append(
            f"wait until healthy: {', '.join(experiment.health_paths)} under {experiment.server.url} "
            f"(timeout {experiment.server.ready_timeout:g}s)"
        )
        out.extend(load_lines(experiment.load.warmup, points))
        out.append("")
    out.append(_restore_line(service))
    return "\n".join(visible(line) for line in out)  # a matrix value's control characters escaped, not sent raw


def _decide_lines(experiment: Experiment, plan: Plan) -> list[str]:
    """``load.decide``: the extra rounds' budget and worst case (they follow the planned points below)."""
    from orchestrator.plan.deciding import decide_budget

    budget = decide_budget(experiment, plan)
    if budget is None:
        return []
    return [f"# {budget.lead()}", "# the rounds run after the points below, at the loads not yet decided"]


def _restore_line(service: Any) -> str:
    """What the run's way out undoes, in the words of the service that did it."""
    if service.kind == "none":
        return "finally: nothing to restore (nothing was changed)"
    if isinstance(service, SystemdServiceSpec):
        changed = "the unit file put back byte for byte" if service.mode == "unit" else "drop-in removed"
        return f"finally: restore every host as it was found ({changed}, daemon-reload, unit state put back)"
    return (
        "finally: restore every host as it was found (the last server process group stopped, the state files "
        "specsweep wrote removed)"
    )


def _describe_resume(experiment: Experiment, plan: Plan, resume: ResumeView) -> str:
    """The dry run of a resume: the plan without the finished points (nor the deployments left with none)."""
    total = plan.load_point_count
    pending = [[p for p in d.load_points if p.id not in resume.done] for d in plan.deployments]
    points = sum(len(p) for p in pending)
    deployments = sum(1 for p in pending if p)
    head = [
        f"# dry run of resuming {resume.path}: {total - points} of {total} points done, {points} to measure in "
        f"{deployments} of {plan.restarts} deployments"
    ]
    if resume.changed:
        head.append(
            f"# the experiment changed since that run ({resume.changed}): --resume refuses it without --redo-changed"
        )
    if not points:
        return "\n".join([*head, "# nothing left to measure: the run is complete"])
    return _describe(experiment, plan, head, resume.done)
