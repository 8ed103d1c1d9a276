"""The Slurm launcher's kind: what it does outside a sweep (``LauncherKind``: :mod:`orchestrator.launchers.base`).

``make`` builds :class:`~orchestrator.launchers.slurm.launcher.SlurmLauncher`; ``dry_run`` prints each
deployment's batch script as ``sbatch`` would get it; ``restore`` cancels the experiment's jobs still queued or
running and removes its lock on the login node (:func:`~orchestrator.launchers.slurm.launcher.restore_jobs`);
``doctor`` checks the login node, Slurm's commands there, the partition's nodes, the shared directory and
leftover jobs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from orchestrator.errors import SpecsweepError
from orchestrator.experiment.launcherspecs.slurm import SlurmLauncherSpec
from orchestrator.hosts import connect_host
from orchestrator.launchers.base import DoctorCallback
from orchestrator.launchers.doctor import guard
from orchestrator.launchers.outcomes import Check, HostReport, RestoreOutcome, Status
from orchestrator.launchers.scheduler import SchedulerKind
from orchestrator.launchers.slurm.jobs import SlurmClient, job_prefix, render_batch_script
from orchestrator.launchers.slurm.launcher import SlurmLauncher, job_settings, restore_jobs
from orchestrator.plan.deployments import load_lines
from orchestrator.quoting import shell_quote

if TYPE_CHECKING:
    from orchestrator.experiment.schema import Experiment
    from orchestrator.hosts.base import Host
    from orchestrator.plan.deployments import Plan

__all__ = ["SLURM", "check_slurm", "describe_jobs", "restore_slurm_jobs"]


class _SlurmKind(SchedulerKind):
    kind = "slurm"
    launcher_class = SlurmLauncher

    def dry_run(self, experiment: Experiment, plan: Plan) -> str | None:
        return describe_jobs(experiment, plan)

    def restore_each(self, experiment: Experiment, *, break_lock: bool, dry_run: bool) -> list[RestoreOutcome]:
        return [restore_slurm_jobs(experiment, break_lock=break_lock, dry_run=dry_run)]

    def doctor(self, experiment: Experiment, *, progress: DoctorCallback | None) -> list[HostReport]:
        return [check_slurm(experiment, progress=progress)]


#: Each deployment one Slurm job (``launcher: {kind: slurm}``).
SLURM = _SlurmKind()


def restore_slurm_jobs(experiment: Any, *, break_lock: bool, dry_run: bool) -> RestoreOutcome:
    """The Slurm jobs of the experiment still queued or running, and its lock, cancelled unless ``dry_run``."""
    what = f"the Slurm jobs of {experiment.name}"
    try:
        host, leftover, restored = restore_jobs(experiment, break_lock=break_lock, dry_run=dry_run)
    except SpecsweepError as exc:
        return RestoreOutcome(getattr(experiment.launcher.login, "display_name", "login"), what, None, error=str(exc))
    return RestoreOutcome(host, what, leftover, restored=restored)


def describe_jobs(experiment: Experiment, plan: Plan) -> str:
    """A Slurm launcher's dry run: each deployment's batch script, as ``sbatch`` would get it."""
    spec = experiment.launcher
    assert isinstance(spec, SlurmLauncherSpec)
    run, url = "<run id>", experiment.server.url
    log_dir = f"{spec.shared_dir}/{experiment.name}/{run}"
    reach = " through the login node's SSH connection" if experiment.server.via == "ssh" else ""
    out = [
        f"# dry run of {experiment.name}: {plan.restarts} deployments (one Slurm job each, {spec.max_jobs} at once), "
        f"{plan.points_text}; login {spec.login.display_name}",
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
        out.extend(load_lines(experiment.load.warmup, deployment.load_points))
        out.append("then: scancel the job")
        out.append("")
    out.append("finally: scancel every job of the run and wait until squeue lists none of them")
    return "\n".join(out)


def check_slurm(experiment: Any, *, progress: DoctorCallback | None = None) -> HostReport:
    """A Slurm launcher's login node: reachable, Slurm's commands there, the partition's nodes and their types,
    the shared directory writable, no job of this experiment left queued or running. Changes nothing but a
    probe file in the shared directory (removed at once)."""
    spec = experiment.launcher
    report = HostReport(host=str(spec.login.display_name))

    def add(check: Check) -> None:
        report.checks.append(check)
        if progress is not None:
            progress(report.host, check)

    try:
        host = connect_host(spec.login)
        as_login = getattr(host, "as_login_user", None)
        commands: Host = as_login() if callable(as_login) else host
        user = commands.run("id -un").check("id", host=host.name).stdout.strip()
    except SpecsweepError as exc:
        add(Check("ssh", "fail", str(exc)))
        return report
    try:
        add(Check("ssh", "ok", f"logged in as {user}" if spec.login.kind == "ssh" else "this machine"))
        client = SlurmClient(commands)

        def slurm() -> Check:
            return Check("slurm", "ok", client.check())

        def partition() -> Check:
            nodes = client.nodes(spec.partition)
            where = spec.partition or "the default partition"
            if not nodes:
                return Check("partition", "fail", f"{where} has no nodes")
            types = sorted({n.node_type for n in nodes})
            status: Status = "ok" if len(types) == 1 or spec.constraint else "fail"
            more = "" if status == "ok" else "; pin one type with launcher.constraint"
            return Check("partition", status, f"{where}: {len(nodes)} node(s), type(s) {'; '.join(types)}{more}")

        def shared_dir() -> Check:
            path = spec.shared_dir
            if path == "~" or path.startswith("~/"):
                path = client.home() + path[1:]
            probe = f"{path}/.specsweep-doctor-{user}"
            q = shell_quote
            result = commands.run(f"mkdir -p -- {q(path)} && : > {q(probe)} && rm -f -- {q(probe)}")
            if not result.ok:
                return Check("shared_dir", "fail", f"{path} is not writable: {result.stderr.strip()}")
            return Check("shared_dir", "ok", f"{path} writable (the nodes must see it too)")

        def leftovers() -> Check:
            jobs = [j for j in client.queue(user_jobs=True) if j.name.startswith(job_prefix(experiment.name))]
            if jobs:
                listed = ", ".join(j.describe() for j in jobs[:5])
                return Check("leftovers", "warn", f"{len(jobs)} job(s) of this experiment: {listed}")
            return Check("leftovers", "ok", "no job of this experiment queued or running")

        for name, body in (("slurm", slurm), ("partition", partition), ("shared_dir", shared_dir)):
            guard(add, name, body)
        guard(add, "leftovers", leftovers)
    finally:
        host.close()
    return report
