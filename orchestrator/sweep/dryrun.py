"""``specsweep sweep --dry-run``: per deployment, exactly what would be written and run, touching nothing.

The text comes from the same pure render functions the services use, so a dry run cannot drift from a real
run: the drop-in (or unit file) a systemd service would write, the argv a process service would start.
"""

from __future__ import annotations

from typing import Any

from orchestrator.experiment.schema import Experiment
from orchestrator.experiment.service import SystemdServiceSpec
from orchestrator.plan.deployments import Plan, build_plan
from orchestrator.quoting import shell_join, split_command
from orchestrator.services.secrets import reference
from orchestrator.services.systemd import (
    DROPIN_NAME,
    UNIT_DIR,
    render_dropin,
    render_unit,
    secret_environment_file,
)

__all__ = ["describe_plan"]


def _workload_lines(experiment: Experiment) -> list[str]:
    """What each workload of ``load.workloads`` sends (each is a load point of every deployment)."""
    from orchestrator.experiment.workloads import workload_sources

    return [
        f"# workload {name}: {source.describe()} (a load point of every deployment, no restart)"
        for name, source in workload_sources(experiment).items()
    ]


def describe_plan(experiment: Experiment) -> str:
    """A plain-text description of every deployment's host actions and load points."""
    plan = build_plan(experiment)
    service = experiment.service
    hosts = ", ".join(h.display_name for h in experiment.host_specs())
    searching: list[str] = []
    if experiment.search is not None and experiment.search.strategy != "grid":
        from orchestrator.search.preview import first_round

        plan, cost = first_round(experiment, plan)
        searching = [f"# {cost.describe()}", "# the first round (the baselines and the strategy's first batch):"]
    out: list[str] = [
        f"# dry run of {experiment.name}: {plan.restarts} deployments, {plan.load_point_count} load points on {hosts}",
        *searching,
        "# nothing below has been run",
    ]
    out += _workload_lines(experiment)
    out.append("")
    secrets = service.secrets or {}
    if experiment.launcher is not None:
        return _describe_jobs(experiment, plan)
    for index, deployment in enumerate(plan.deployments, 1):
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
            out.append("    " + shell_join(["env", "--", *env, *argv]))
        out.append(
            f"wait until healthy: {', '.join(experiment.health_paths)} under {experiment.server.url} "
            f"(timeout {experiment.server.ready_timeout:g}s)"
        )
        if experiment.load.warmup:
            out.append(f"warm up: {experiment.load.warmup} requests at C=1")
        for point in deployment.load_points:
            size = f"{point.requests} requests" if point.requests else f"{point.duration_s:g}s"
            out.append(f"load {point.label}: {size} ({point.id})")
        out.append("")
    out.append(_restore_line(service))
    return "\n".join(out)


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


def _describe_jobs(experiment: Experiment, plan: Plan) -> str:
    """A Slurm launcher's dry run: each deployment's batch script, as ``sbatch`` would get it."""
    from orchestrator.launchers.slurm import job_settings
    from orchestrator.launchers.slurmjobs import render_batch_script

    spec = experiment.launcher
    assert spec is not None
    run, url = "<run id>", experiment.server.url
    log_dir = f"{spec.shared_dir}/{experiment.name}/{run}"
    reach = " through the login node's SSH connection" if experiment.server.via == "ssh" else ""
    out = [
        f"# dry run of {experiment.name}: {plan.restarts} deployments (one Slurm job each, {spec.max_jobs} at once), "
        f"{plan.load_point_count} load points; login {spec.login.display_name}",
        "# nothing below has been run",
        "",
    ]
    for index, deployment in enumerate(plan.deployments, 1):
        script = render_batch_script(
            job_settings(experiment),
            deployment,
            experiment=experiment.name,
            run_id=run,
            log_dir=log_dir,
            label=deployment.label,
        )
        out.append(f"## {index}/{plan.restarts} {deployment.label} ({deployment.id})")
        out.append("submit with sbatch --parsable (the script on its standard input):")
        out.extend("    " + line for line in script.text.rstrip("\n").splitlines())
        out.append(
            f"wait: pending (at most {spec.pending_timeout:g}s), then running on a node, then healthy: "
            f"{', '.join(experiment.health_paths)} under {url}{reach} (timeout {experiment.server.ready_timeout:g}s)"
        )
        if experiment.load.warmup:
            out.append(f"warm up: {experiment.load.warmup} requests at C=1")
        for point in deployment.load_points:
            size = f"{point.requests} requests" if point.requests else f"{point.duration_s:g}s"
            out.append(f"load {point.label}: {size} ({point.id})")
        out.append("then: scancel the job")
        out.append("")
    out.append("finally: scancel every job of the run and wait until squeue lists none of them")
    return "\n".join(out)
