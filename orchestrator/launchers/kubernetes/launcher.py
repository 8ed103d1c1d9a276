"""The Kubernetes launcher: each deployment is one Job (and a Service in front of its port), ``max_jobs`` of
them at once, driven with ``kubectl`` (:mod:`orchestrator.launchers.kubernetes.jobs`: the manifests and the one
boundary where ``kubectl`` runs).

    launcher: {kind: kubernetes, image: lmsysorg/sglang:latest, namespace: bench, gpus: 8, max_jobs: 2}
    service:  {kind: process, command: "python3 -m sglang.launch_server ... --port 30000 {spec_args}"}
    server:   {url: "http://127.0.0.1:30000"}

The slots share one target (``kubernetes-<namespace>``): the baselines are measured once for all of them and
every other deployment by whichever slot is free. The first slot to open takes the experiment's lock (a
ConfigMap ``specsweep-lock-<prefix>-<hash of the whole name>`` naming this controller and process; a lock whose
process is gone on this controller is taken over, any other refused unless ``--break-lock``) and deletes the
Jobs and Services a killed run of the experiment left (found by their label, a prefix and the same hash, and
kept only when their annotation holds the experiment's whole name; deleted by name).

``launch(deployment)``:

    kubectl apply -f -                       the Job and the Service (jobs.render_manifests), on stdin
    kubectl get pods -l specsweep.io/job=N   until the pod runs; pending past pending_timeout, a pod that ends,
                                             or a container that cannot start (ErrImagePull, a missing Secret,
                                             ...) is StartFailed("pod_<reason>") with the pod's state line
    kubectl port-forward service/N :PORT     (reach: port-forward) the URL on this machine; or (reach:
                                             service) the Service's cluster name for {service} in server.url
    GET the health paths                     until each answers 2xx while the pod runs (server.ready_timeout)

The log window is ``kubectl logs job/N``, by byte offset (the whole log is read each time: a pod's log is the
container's since it started, and it never restarts). ``release()`` ends the port-forward and deletes the Job
and its Service; the last slot's ``close`` deletes every Job and Service of the run (by its label) and releases
the lock. Every record carries ``placement``: the Job, its pod, node and namespace, and the GPUs asked for.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import httpx

from orchestrator.engines.controlplane import request
from orchestrator.errors import HostLockedError, ServiceError, SpecsweepError, StartFailed
from orchestrator.experiment.launcherspecs.kubernetes import KubernetesLauncherSpec
from orchestrator.launchers.base import HealthCallback
from orchestrator.launchers.health import HEALTH_POLL_SECONDS
from orchestrator.launchers.kubernetes.jobs import (
    LABEL_EXPERIMENT,
    LABEL_JOB,
    LABEL_RUN,
    NOTE_EXPERIMENT,
    KubectlFailed,
    Manifests,
    PodInfo,
    experiment_label,
    field,
    kubectl,
    label_value,
    lock_name,
    output_lines,
    parse_pods,
    port_forward,
    render_manifests,
)
from orchestrator.launchers.outcomes import RestoreOutcome
from orchestrator.launchers.scheduler import SchedulerLauncher, SchedulerServer
from orchestrator.services.base import Leftover, LogChunk
from orchestrator.services.hoststate import lock_is_stale

if TYPE_CHECKING:
    import subprocess

    from orchestrator.experiment.schema import Experiment
    from orchestrator.plan.deployments import Deployment

__all__ = ["KubernetesLauncher", "KubernetesServer", "job_names", "launcher_spec", "owned_objects", "restore_jobs"]


def launcher_spec(experiment: Experiment) -> KubernetesLauncherSpec:
    """The experiment's Kubernetes launcher spec; ServiceError when it has none."""
    spec = experiment.launcher
    if not isinstance(spec, KubernetesLauncherSpec):
        raise ServiceError("the experiment has no Kubernetes launcher")
    return spec


def _experiment_selector(experiment: str) -> str:
    return f"{LABEL_EXPERIMENT}={experiment_label(experiment)}"


def owned_objects(spec: KubernetesLauncherSpec, experiment: str) -> list[tuple[str, str]]:
    """(kind, name) of each Job and Service of ``experiment``: labelled with its label and annotated with its
    whole name (the label is a prefix and a hash; the annotation makes it exact)."""
    what = "get jobs,services"
    items = kubectl(spec, "get", "jobs,services", "-l", _experiment_selector(experiment), "-o", "json").items(what)
    out = []
    for item in items:
        meta = field(item, "metadata", dict, what)
        if field(meta, "annotations", dict, what).get(NOTE_EXPERIMENT) == experiment:
            out.append((str(item.get("kind") or ""), str(meta.get("name") or "")))
    return [(kind, name) for kind, name in out if kind in ("Job", "Service") and name]


def job_names(owned: list[tuple[str, str]]) -> list[str]:
    """The Jobs among ``owned`` (:func:`owned_objects`)."""
    return [name for kind, name in owned if kind == "Job"]


def _delete_owned(spec: KubernetesLauncherSpec, owned: list[tuple[str, str]]) -> None:
    """Delete those Jobs and Services by name (never by label: a label is shared by a hash's collisions)."""
    if owned:
        refs = [f"{kind.lower()}/{name}" for kind, name in owned]
        kubectl(spec, "delete", *refs, "--ignore-not-found", timeout=120).check("delete jobs,services")


def _read_lock(spec: KubernetesLauncherSpec, experiment: str) -> dict[str, Any] | None:
    result = kubectl(spec, "get", "configmap", lock_name(experiment), "-o", "json", "--ignore-not-found")
    text = result.check("get configmap").strip()
    if not text:
        return None
    data = field(result.object("get configmap"), "data", dict, "get configmap")
    holder: dict[str, Any] = {str(k): str(v) for k, v in data.items()}
    with contextlib.suppress(TypeError, ValueError):
        holder["pid"] = int(holder.get("pid", ""))
    return holder


def _take_lock(spec: KubernetesLauncherSpec, experiment: str, label: str, *, break_lock: bool) -> None:
    """The experiment's lock in the namespace: a ConfigMap naming this controller and process."""
    name = lock_name(experiment)
    literals = {
        "experiment": experiment,
        "label": label,
        "controller": socket.gethostname(),
        "pid": str(os.getpid()),
    }
    create = ["create", "configmap", name, *(f"--from-literal={k}={v}" for k, v in literals.items())]
    result = kubectl(spec, *create)
    if result.ok:
        return
    if "AlreadyExists" not in result.stderr:
        result.check("create configmap")
    holder = _read_lock(spec, experiment) or {}
    stale, why = lock_is_stale(holder)
    if not stale and not break_lock:
        raise HostLockedError(
            f"the Kubernetes Jobs of {experiment} are driven by a live or unknown run ({holder.get('label', '?')}, "
            f"pid {holder.get('pid', '?')} on {holder.get('controller', '?')}): {why}; pass --break-lock if that "
            "run is dead",
            host=spec.namespace,
        )
    kubectl(spec, "delete", "configmap", name, "--ignore-not-found").check("delete configmap")
    kubectl(spec, *create).check("create configmap")


class KubernetesLauncher(SchedulerLauncher):
    """``max_jobs`` slots in one namespace (see the module docstring)."""

    kind = "kubernetes"
    scheduler = "Kubernetes"
    spec: KubernetesLauncherSpec
    spec_class = KubernetesLauncherSpec

    def _open_first(self, recovered: Callable[[str], None]) -> None:
        _take_lock(self.spec, self.experiment.name, self.lock_label, break_lock=self.break_lock)
        try:
            owned = owned_objects(self.spec, self.experiment.name)
            _delete_owned(self.spec, owned)
        except BaseException:
            self._release_lock()  # no slot is open: nothing else would
            raise
        left = job_names(owned)
        if left:
            recovered(f"{len(left)} Kubernetes Job(s) of a killed run deleted: {', '.join(left)}")

    def _close_last(self) -> None:
        try:
            # The run's own: its label and the experiment's (a hash's collision would need the same run id).
            selector = f"{_experiment_selector(self.experiment.name)},{LABEL_RUN}={label_value(self.run_id)}"
            kubectl(self.spec, "delete", "jobs,services", "-l", selector, "--ignore-not-found", timeout=120).check(
                "delete jobs,services"
            )
        finally:
            self._release_lock()

    def _release_lock(self) -> None:
        with contextlib.suppress(SpecsweepError):
            kubectl(self.spec, "delete", "configmap", lock_name(self.experiment.name), "--ignore-not-found")

    def new_server(self, deployment: Deployment) -> KubernetesServer:
        exp = self.experiment
        manifests = render_manifests(
            self.spec,
            deployment,
            experiment=exp.name,
            run_id=self.run_id,
            server_url=exp.server.url,
            health_path=exp.health_paths[0],
        )
        return KubernetesServer(self, manifests, deployment)

    def pod(self, name: str) -> PodInfo:
        """The Job's pod (``Pending`` until the Job has made it)."""
        result = kubectl(self.spec, "get", "pods", "-l", f"{LABEL_JOB}={name}", "-o", "json")
        pods = parse_pods(result.items("get pods"))
        return pods[-1] if pods else PodInfo(name="", phase="Pending", message="no pod yet")


class KubernetesServer(SchedulerServer):
    """One deployment's Job: its pod seen through ``kubectl`` (its log window source is ``kubectl logs``)."""

    scheduler = "Kubernetes"
    reason_prefix = "pod"
    pending_text = "still not running after {elapsed:.0f} s (launcher.pending_timeout is {limit:g} s)"
    launcher: KubernetesLauncher

    def __init__(self, launcher: KubernetesLauncher, manifests: Manifests, deployment: Deployment) -> None:
        super().__init__(launcher, manifests.name, deployment)
        self.manifests = manifests
        self._forward: subprocess.Popen[str] | None = None

    @property
    def job_name(self) -> str:
        return f"Job {self.name}"

    @property
    def log_name(self) -> str:
        return "the pod's log"

    # -- the log window ----------------------------------------------------------------------------------------

    def _text(self) -> str:
        result = kubectl(self.launcher.spec, "logs", f"job/{self.name}", timeout=120)
        return result.check("logs") if result.ok or "waiting to start" not in result.stderr else ""

    def journal_cursor(self) -> str:
        return str(len(self._text().encode()))

    def journal_since(self, cursor: str) -> LogChunk:
        data = self._text().encode()
        start = int(cursor) if cursor.isdigit() and int(cursor) <= len(data) else 0
        return LogChunk(data[start:].decode(errors="replace"), str(len(data)))

    def logs_tail(self, n: int = 50) -> list[str]:
        return self._text().splitlines()[-n:]

    # -- the running server ------------------------------------------------------------------------------------

    def status(self, *, fresh: bool = False) -> PodInfo:
        return self.launcher.pod(self.name)

    def _disconnect(self) -> None:
        if self._forward is not None:
            self._forward.terminate()
            with contextlib.suppress(Exception):
                self._forward.wait(5)

    def _cancel(self) -> None:
        """The Job and its Service are deleted."""
        kubectl(self.launcher.spec, "delete", f"job/{self.name}", f"service/{self.name}", "--ignore-not-found")

    # -- getting there -----------------------------------------------------------------------------------------

    def _failed(self, what: str, reason: str, status: Any = None) -> StartFailed:
        try:
            pod = status or self.launcher.pod(self.name)
            state = pod.describe()
        except SpecsweepError as exc:
            state = f"(could not ask Kubernetes about Job {self.name}: {exc})"
        tail = self._tail_evidence()
        message = f"{self.launcher.target}: Job {self.name} ({self.deployment.label}) {what}"
        return StartFailed(message, evidence=[state, *tail], reason=reason)

    def _submit(self, progress: HealthCallback | None) -> None:
        kubectl(self.launcher.spec, "apply", "-f", "-", stdin=self.manifests.text).check("apply")

    def start_failed(self, exc: BaseException) -> None:
        if isinstance(exc, KubectlFailed):
            self.failure = output_lines(exc.output)

    def ended_reason(self, status: Any) -> str:
        return str(status.phase).lower()

    def _end_start(self, status: Any) -> None:
        super()._end_start(status)
        if status.hopeless:
            raise self._failed(f"cannot start: {status.waiting}", f"pod_{status.waiting.lower()}", status)

    def connect(self, status: Any) -> None:
        """The URL (a port forwarded to this machine, or the Service's cluster name) and the placement."""
        pod, port = status, self.manifests.port
        spec, exp = self.launcher.spec, self.launcher.experiment
        if spec.reach == "port-forward":
            self._forward, local = port_forward(spec, self.name, port)
            base = exp.server.url.replace("{service}", "127.0.0.1")
            parts = base.split("://", 1)
            rest = parts[1].split("/", 1)
            self.url = f"{parts[0]}://127.0.0.1:{local}" + (f"/{rest[1]}" if len(rest) > 1 else "")
        else:
            self.url = exp.server.url.replace("{service}", f"{self.name}.{spec.namespace}.svc")
        self.placement = {
            "launcher": "kubernetes",
            "job": self.name,
            "pod": pod.name,
            "node": pod.node,
            "namespace": spec.namespace,
            "gpus": spec.gpus,
        }

    def wait_healthy(self, progress: HealthCallback | None, stop: threading.Event) -> None:
        """Until every health path answers 2xx while the pod runs (``server.ready_timeout``)."""
        exp = self.launcher.experiment
        timeout = float(exp.server.ready_timeout)
        api_key = exp.server.api_key_value
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        started = time.monotonic()
        with httpx.Client(timeout=2.0, trust_env=False) as client:
            while True:
                if stop.is_set():
                    raise self._failed("was stopped before it was healthy", "stopped")
                answers = [
                    request(client, "GET", self.url + p, headers=headers, deadline_s=2.0) for p in exp.health_paths
                ]
                if all(a.status is not None and 200 <= a.status < 300 for a in answers):
                    return
                pod = self.launcher.pod(self.name)
                if not pod.running:
                    raise self._failed("stopped running before its server was healthy", "failed", pod)
                elapsed = time.monotonic() - started
                if elapsed >= timeout:
                    raise self._failed(f"not healthy after {elapsed:.0f} s (server.ready_timeout)", "timeout", pod)
                if progress is not None:
                    last = next(iter(self.logs_tail(1)), "")
                    progress(elapsed, timeout, last)
                stop.wait(HEALTH_POLL_SECONDS)


def restore_jobs(experiment: Experiment, *, break_lock: bool = False, dry_run: bool = False) -> RestoreOutcome:
    """``specsweep restore FILE`` for a Kubernetes launcher: the experiment's Jobs and Services (by label) and its
    lock, deleted unless ``dry_run``; a lock of a live (or unknown) run is left, and its Jobs too, unless
    ``break_lock``."""
    what = f"the Kubernetes Jobs of {experiment.name}"
    spec = launcher_spec(experiment)
    try:
        holder = _read_lock(spec, experiment.name)
        stale, why = lock_is_stale(holder) if holder else (True, "")
        owned = owned_objects(spec, experiment.name)
        jobs = job_names(owned)
        if holder is None and not owned:
            return RestoreOutcome(spec.target, what, None)
        leftover = Leftover(
            host=spec.target,
            service=what,
            marker={"jobs": jobs} if jobs else None,
            lock=holder,
            lock_stale=stale,
            detail="; ".join(x for x in ((f"{len(jobs)} Job(s): " + ", ".join(jobs)) if jobs else "", why) if x),
        )
        if dry_run:
            return RestoreOutcome(spec.target, what, leftover)
        if holder is not None and not stale and not break_lock:
            raise HostLockedError(
                f"{what} are driven by a live or unknown run ({holder.get('label', '?')}, pid "
                f"{holder.get('pid', '?')} on {holder.get('controller', '?')}): {why}; pass --break-lock if that "
                "run is dead",
                host=spec.target,
            )
        _delete_owned(spec, owned)
        kubectl(spec, "delete", "configmap", lock_name(experiment.name), "--ignore-not-found").check("delete configmap")
        return RestoreOutcome(spec.target, what, leftover, restored=True)
    except SpecsweepError as exc:
        return RestoreOutcome(spec.target, what, None, error=str(exc))
