"""The Kubernetes launcher's kind: what it does outside a sweep (``LauncherKind``: :mod:`orchestrator.launchers.base`).

``make`` builds :class:`~orchestrator.launchers.kubernetes.launcher.KubernetesLauncher`; ``dry_run`` prints each
deployment's manifests as ``kubectl apply -f -`` would get them; ``restore`` deletes the experiment's Jobs and
Services and its lock (:func:`~orchestrator.launchers.kubernetes.launcher.restore_jobs`); ``doctor`` checks
``kubectl``, the right to create Jobs, nodes with the GPUs asked for and leftover Jobs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from orchestrator.errors import SpecsweepError
from orchestrator.launchers.base import DoctorCallback
from orchestrator.launchers.kubernetes.jobs import LABEL_RUN, field, kubectl, lock_name, render_manifests
from orchestrator.launchers.kubernetes.launcher import (
    KubernetesLauncher,
    job_names,
    launcher_spec,
    owned_objects,
    restore_jobs,
)
from orchestrator.launchers.outcomes import Check, HostReport, RestoreOutcome, Status
from orchestrator.launchers.scheduler import SchedulerKind
from orchestrator.plan.deployments import load_lines

if TYPE_CHECKING:
    from orchestrator.experiment.schema import Experiment
    from orchestrator.plan.deployments import Plan

__all__ = ["KUBERNETES"]


def _allocatable_gpus(node: dict[str, Any]) -> int:
    status = field(node, "status", dict, "get nodes")
    value = field(status, "allocatable", dict, "get nodes").get("nvidia.com/gpu", 0)
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


class _KubernetesKind(SchedulerKind):
    kind = "kubernetes"
    launcher_class = KubernetesLauncher

    def dry_run(self, experiment: Experiment, plan: Plan) -> str | None:
        """Each deployment's manifests as ``kubectl apply -f -`` would get them, and what follows."""
        spec = launcher_spec(experiment)
        run = "run-id"
        out = [
            f"# dry run of {experiment.name}: {plan.restarts} deployments (one Kubernetes Job each, {spec.max_jobs} "
            f"at once), {plan.points_text}; namespace {spec.namespace}"
            + (f", context {spec.context}" if spec.context else ""),
            f"# first: take the lock (configmap {lock_name(experiment.name)}), delete the Jobs a killed run left",
            "# nothing below has been run",
            "",
        ]
        for index, deployment in enumerate(plan.deployments, 1):
            manifests = render_manifests(
                spec,
                deployment,
                experiment=experiment.name,
                run_id=run,
                server_url=experiment.server.url,
                health_path=experiment.health_paths[0],
            )
            out.append(f"## {index}/{plan.restarts} {deployment.label} ({deployment.id})")
            out.append("kubectl apply -f - (the manifests on its standard input; the run id in place of run-id):")
            out.extend("    " + line for line in manifests.shown.rstrip("\n").splitlines())
            reach = (
                f"kubectl port-forward service/{manifests.name} :{manifests.port}"
                if spec.reach == "port-forward"
                else f"the Service {manifests.name}.{spec.namespace}.svc"
            )
            out.append(
                f"wait: the pod running (at most {spec.pending_timeout:g}s), then healthy through {reach}: "
                f"{', '.join(experiment.health_paths)} (timeout {experiment.server.ready_timeout:g}s)"
            )
            window = f"kubectl logs job/{manifests.name}"
            out.extend(load_lines(experiment.load.warmup, deployment.load_points, window=window))
            out.append(f"then: kubectl delete job/{manifests.name} service/{manifests.name}")
            out.append("")
        out.append(f"finally: kubectl delete jobs,services -l {LABEL_RUN}=<run id>, and the lock")
        return "\n".join(out)

    def restore_each(self, experiment: Experiment, *, break_lock: bool, dry_run: bool) -> list[RestoreOutcome]:
        return [restore_jobs(experiment, break_lock=break_lock, dry_run=dry_run)]

    def doctor(self, experiment: Experiment, *, progress: DoctorCallback | None) -> list[HostReport]:
        """kubectl there and the cluster answering, Jobs allowed in the namespace, nodes with the GPUs asked
        for, no Job of the experiment left. Changes nothing."""
        spec = launcher_spec(experiment)
        report = HostReport(host=spec.target)

        def add(check: Check) -> None:
            report.checks.append(check)
            if progress is not None:
                progress(report.host, check)

        def step(name: str, body: Callable[[], Check]) -> bool:
            try:
                check = body()
            except SpecsweepError as exc:
                check = Check(name, "fail", str(exc))
            add(check)
            return check.status != "fail"

        def client() -> Check:
            version = kubectl(spec, "version", "--client", "-o", "json").object("version")
            client = field(version, "clientVersion", dict, "version")
            return Check("kubectl", "ok", str(client.get("gitVersion") or "kubectl"))

        def allowed() -> Check:
            said = kubectl(spec, "auth", "can-i", "create", "jobs").stdout.strip()
            ok = said == "yes"
            return Check("jobs", "ok" if ok else "fail", f"create jobs in {spec.namespace}: {said or 'no answer'}")

        def gpus() -> Check:
            nodes = kubectl(spec, "get", "nodes", "-o", "json").items("get nodes")
            fits = [n for n in nodes if _allocatable_gpus(n) >= spec.gpus]
            status: Status = "ok" if fits or not spec.gpus else "fail"
            return Check("gpus", status, f"{len(fits)} of {len(nodes)} node(s) offer {spec.gpus} nvidia.com/gpu")

        def leftovers() -> Check:
            jobs = job_names(owned_objects(spec, experiment.name))
            if jobs:
                return Check("leftovers", "warn", f"{len(jobs)} Job(s) of this experiment: {', '.join(jobs[:5])}")
            return Check("leftovers", "ok", "no Job of this experiment")

        if step("kubectl", client):
            for name, body in (("jobs", allowed), ("gpus", gpus), ("leftovers", leftovers)):
                step(name, body)
        return [report]


#: Each deployment one Kubernetes Job (``launcher: {kind: kubernetes}``).
KUBERNETES = _KubernetesKind()
