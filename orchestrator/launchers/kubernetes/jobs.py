"""A Kubernetes launcher's parts that are not the launcher: the manifests of a deployment (a Job and a Service),
the one boundary where ``kubectl`` runs (:func:`kubectl`, :func:`port_forward`), and what its answers say
(:class:`PodInfo`). Pure but for those two functions, so tests put a fake ``kubectl`` on ``PATH`` and hold the
rest against its argv and standard input.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import yaml

from orchestrator.errors import HostError, ServiceError
from orchestrator.quoting import split_command
from orchestrator.redaction import redact

if TYPE_CHECKING:
    from orchestrator.experiment.launcherspecs.kubernetes import KubernetesLauncherSpec
    from orchestrator.plan.deployments import Deployment

__all__ = [
    "LABEL_DEPLOYMENT",
    "LABEL_EXPERIMENT",
    "LABEL_JOB",
    "LABEL_RUN",
    "NOTE_EXPERIMENT",
    "KubectlFailed",
    "KubectlResult",
    "Manifests",
    "PodInfo",
    "experiment_label",
    "field",
    "job_name",
    "kubectl",
    "label_value",
    "lock_name",
    "output_lines",
    "parse_pods",
    "port_forward",
    "render_manifests",
]

LABEL_EXPERIMENT = "specsweep.io/experiment"
LABEL_RUN = "specsweep.io/run"
LABEL_DEPLOYMENT = "specsweep.io/deployment"
LABEL_JOB = "specsweep.io/job"
#: The annotation that holds the experiment's whole name (a label holds a prefix of it and its hash).
NOTE_EXPERIMENT = "specsweep.io/experiment"
MANAGED_BY = {"app.kubernetes.io/managed-by": "specsweep"}
#: A container that waits for one of these will not start by itself: the deployment fails at once, with it.
HOPELESS = {"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "CreateContainerConfigError", "CrashLoopBackOff"}


def label_value(text: str) -> str:
    """``text`` as a label value (at most 63 of ``[A-Za-z0-9._-]``, starting and ending alphanumeric)."""
    value = re.sub(r"[^A-Za-z0-9._-]", "-", text)[:63].strip("-._")
    return value or "x"


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def experiment_label(experiment: str) -> str:
    """The experiment's label value: a readable prefix of its name and a hash of the whole name, so two names
    that differ past the label's 63 characters, or only in case, ``_`` against ``-`` or a character a label
    cannot hold, have two labels (the whole name is the Job's annotation, :data:`NOTE_EXPERIMENT`)."""
    prefix = re.sub(r"[^A-Za-z0-9._-]", "-", experiment)[:50].strip("-._")
    return f"{prefix}-{_digest(experiment)}" if prefix else _digest(experiment)


def lock_name(experiment: str) -> str:
    """The experiment's lock, a ConfigMap's name (a DNS-1123 subdomain: lower case): a readable prefix and the
    hash of the whole name, as :func:`experiment_label`."""
    prefix = re.sub(r"[^a-z0-9-]+", "-", experiment.lower())[:34].strip("-")
    return f"specsweep-lock-{prefix + '-' if prefix else ''}{_digest(experiment)}"


def job_name(experiment: str, run_id: str, deployment_id: str) -> str:
    """The Job's (and its Service's) name: unique per run and deployment, a DNS-1123 label."""
    digest = hashlib.sha256(f"{experiment}/{run_id}/{deployment_id}".encode()).hexdigest()[:10]
    return f"specsweep-{digest}"


def _port(url: str) -> int:
    parts = urlsplit(url)
    return parts.port or (443 if parts.scheme == "https" else 80)


@dataclass(frozen=True)
class Manifests:
    """A deployment's Job and Service: their name, their labels, and the YAML ``kubectl apply -f -`` reads."""

    name: str
    labels: dict[str, str]
    port: int
    documents: tuple[dict[str, Any], ...]

    @property
    def text(self) -> str:
        return yaml.safe_dump_all(list(self.documents), sort_keys=False)

    @property
    def shown(self) -> str:
        """The YAML to show: every secret redacted in the documents before they are written, so ``[redacted]``
        is a quoted string where a value stood (redacting the text would make ``value: [redacted]`` a list);
        the container's command on one flow-style line, so no option's value is a line of its own that the
        console's redactor (which reads an option's next word as its value) could take the list's ``-`` for."""
        docs = redact(list(self.documents))
        for doc in docs:
            if doc.get("kind") == "Job":
                for container in doc["spec"]["template"]["spec"]["containers"]:
                    container["command"] = _Flow(container["command"])
        return yaml.dump_all(docs, Dumper=_ShownDumper, sort_keys=False)


class _Flow(list[Any]):
    """A list written in flow style (``[a, b]``) by :class:`_ShownDumper`."""


class _ShownDumper(yaml.SafeDumper):
    pass


_ShownDumper.add_representer(
    _Flow, lambda dumper, value: dumper.represent_sequence("tag:yaml.org,2002:seq", value, flow_style=True)
)


def render_manifests(
    spec: KubernetesLauncherSpec,
    deployment: Deployment,
    *,
    experiment: str,
    run_id: str,
    server_url: str,
    health_path: str,
) -> Manifests:
    """The Job (one pod, never restarted: a server that exits is a failed deployment, as a process's) and the
    Service in front of its port. The container's command is the deployment's command, split as a process
    service splits it; its environment the deployment's, then each of ``spec.secrets`` by ``secretKeyRef``.
    The pod meets the restricted Pod Security Standard (no privilege escalation, every capability dropped, the
    runtime's seccomp profile; ``runAsNonRoot`` when ``spec.run_as_user`` is set) and mounts no API token."""
    name = job_name(experiment, run_id, deployment.id)
    labels = {
        **MANAGED_BY,
        LABEL_EXPERIMENT: experiment_label(experiment),
        LABEL_RUN: label_value(run_id),
        LABEL_DEPLOYMENT: label_value(deployment.id),
        LABEL_JOB: name,
    }
    port = _port(server_url)
    env: list[dict[str, Any]] = [{"name": k, "value": str(v)} for k, v in deployment.environment.items()]
    env += [
        {"name": k, "valueFrom": {"secretKeyRef": {"name": ref.secret, "key": ref.key}}}
        for k, ref in spec.secrets.items()
    ]
    limits: dict[str, Any] = {}
    if spec.gpus:
        limits["nvidia.com/gpu"] = spec.gpus
    if spec.cpu:
        limits["cpu"] = spec.cpu
    if spec.memory:
        limits["memory"] = spec.memory
    container: dict[str, Any] = {
        "name": "server",
        "image": spec.image,
        "command": split_command(deployment.command or "", what="the server command"),
        "ports": [{"name": "http", "containerPort": port}],
        "readinessProbe": {"httpGet": {"path": health_path, "port": port}, "periodSeconds": 2},
        # The restricted Pod Security Standard's container rules: a server needs no privilege of its own.
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
    }
    if env:
        container["env"] = env
    if limits:
        container["resources"] = {"limits": limits, "requests": dict(limits)}
    security: dict[str, Any] = {"seccompProfile": {"type": "RuntimeDefault"}}
    if spec.run_as_user is not None:
        security.update(runAsNonRoot=True, runAsUser=spec.run_as_user)
    pod: dict[str, Any] = {
        "restartPolicy": "Never",
        # The server never talks to the API server: no token of the service account in its file system.
        "automountServiceAccountToken": False,
        "securityContext": security,
        "containers": [container],
    }
    if spec.node_selector:
        pod["nodeSelector"] = dict(spec.node_selector)
    if spec.service_account:
        pod["serviceAccountName"] = spec.service_account
    if spec.image_pull_secret:
        pod["imagePullSecrets"] = [{"name": spec.image_pull_secret}]
    meta = {"name": name, "namespace": spec.namespace, "labels": labels, "annotations": {NOTE_EXPERIMENT: experiment}}
    annotations = {
        NOTE_EXPERIMENT: experiment,
        "specsweep.io/label": deployment.label,
        "specsweep.io/config-hash": deployment.config_hash,
    }
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {**meta, "annotations": annotations},
        "spec": {"backoffLimit": 0, "template": {"metadata": {"labels": labels}, "spec": pod}},
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta,
        "spec": {"selector": {LABEL_JOB: name}, "ports": [{"name": "http", "port": port, "targetPort": port}]},
    }
    return Manifests(name, labels, port, (job, service))


# -- the boundary: kubectl ----------------------------------------------------------------------------------------


#: Of a failed call's output, the characters its error message shows (the rest is in :class:`KubectlFailed`).
SHOWN_CHARS = 300
#: A failed call's output as evidence: lines of at most this many characters, at most this many of them.
EVIDENCE_WIDTH, EVIDENCE_LINES = 160, 50


class KubectlFailed(ServiceError):
    """``kubectl`` ran and failed. The message shows its last line, bounded (:data:`SHOWN_CHARS`);
    ``output`` is all it said, :func:`output_lines` that wrapped and bounded for a record's evidence."""

    def __init__(self, message: str, *, output: str) -> None:
        self.output = output
        super().__init__(message)


def _bounded(text: str, limit: int = SHOWN_CHARS) -> str:
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text) - limit} characters more)"


def output_lines(text: str, *, width: int = EVIDENCE_WIDTH, limit: int = EVIDENCE_LINES) -> list[str]:
    """``text`` cut into lines of at most ``width`` characters, the first ``limit`` of them and a last one that
    says how much was left out."""
    out: list[str] = []
    total = 0
    for line in text.splitlines():
        for start in range(0, max(len(line), 1), width):
            total += 1
            if len(out) < limit:
                out.append(line[start : start + width])
    if total > limit:
        out.append(f"(kubectl's output: {total - limit} more line(s) of {width} characters left out)")
    return out


def _shape(value: Any) -> str:
    """``value``'s JSON type in a message."""
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number" if isinstance(value, int | float) else type(value).__name__)


def field(obj: dict[str, Any], key: str, kind: type, what: str) -> Any:
    """``obj[key]`` when it is a ``kind`` (dict or list; missing or null: an empty one), else ServiceError saying
    where in ``kubectl what``'s answer the shape is wrong."""
    value = obj.get(key)
    if value is None:
        return kind()
    if not isinstance(value, kind):
        expected = "an object" if kind is dict else "a list"
        raise ServiceError(f"kubectl {what} answered {_shape(value)} where {expected} belongs ({key})")
    return value


@dataclass(frozen=True)
class KubectlResult:
    argv: tuple[str, ...]
    code: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.code == 0

    def check(self, what: str) -> str:
        """The output; :class:`KubectlFailed` naming ``what`` and kubectl's last error line (bounded) when it
        failed."""
        if self.code != 0:
            output = self.stderr.strip() or self.stdout.strip()
            said = (output or "no output").splitlines()[-1]
            raise KubectlFailed(f"kubectl {what} failed (exit {self.code}): {_bounded(said)}", output=output)
        return self.stdout

    def json(self, what: str) -> Any:
        text = self.check(what)
        try:
            return json.loads(text)
        except ValueError as exc:
            raise ServiceError(f"kubectl {what}: not JSON ({_bounded(str(exc))})") from None

    def object(self, what: str) -> dict[str, Any]:
        """The answer, a JSON object; ServiceError when it is anything else."""
        data = self.json(what)
        if not isinstance(data, dict):
            raise ServiceError(f"kubectl {what} answered {_shape(data)} where an object belongs")
        return data

    def items(self, what: str) -> list[dict[str, Any]]:
        """The ``items`` of a list answer (``get pods -o json``), each an object; ServiceError when the answer,
        its ``items`` or one of them has another shape."""
        items = field(self.object(what), "items", list, what)
        for item in items:
            if not isinstance(item, dict):
                raise ServiceError(f"kubectl {what} answered {_shape(item)} where an object belongs (items)")
        return items


def _base(spec: KubernetesLauncherSpec) -> list[str]:
    argv = [spec.kubectl]
    if spec.kubeconfig:
        argv += ["--kubeconfig", spec.kubeconfig]
    if spec.context:
        argv += ["--context", spec.context]
    return [*argv, "--namespace", spec.namespace]


def kubectl(spec: KubernetesLauncherSpec, *args: str, stdin: str | None = None, timeout: float = 60.0) -> KubectlResult:
    """Run ``kubectl`` (``spec.kubectl``, found on ``PATH``) with the launcher's kubeconfig, context and namespace;
    its own failures (not found, timed out) are HostError, its answer a :class:`KubectlResult`."""
    argv = [*_base(spec), *args]
    try:
        done = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=timeout, check=False)
    except FileNotFoundError:
        raise HostError(f"{spec.kubectl} not found: install kubectl or set launcher.kubectl") from None
    except subprocess.TimeoutExpired:
        raise HostError(f"kubectl {' '.join(args[:2])} did not answer within {timeout:g} s") from None
    except OSError as exc:
        raise HostError(f"cannot run {spec.kubectl}: {exc}") from None
    return KubectlResult(tuple(argv), done.returncode, done.stdout, done.stderr)


def port_forward(
    spec: KubernetesLauncherSpec, name: str, port: int, *, timeout: float = 30.0
) -> tuple[subprocess.Popen[str], int]:
    """``kubectl port-forward service/NAME :PORT``: the process (to terminate once done) and the local port it
    forwards, read from its first line (``Forwarding from 127.0.0.1:LOCAL -> PORT``)."""
    argv = [*_base(spec), "port-forward", f"service/{name}", f":{port}", "--address", "127.0.0.1"]
    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    except OSError as exc:
        raise HostError(f"cannot run {spec.kubectl}: {exc}") from None
    found: list[str] = []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            found.append(line)
            if "Forwarding from" in line:
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout)
    match = re.search(r"Forwarding from 127\.0\.0\.1:(\d+)", "".join(found))
    if match is None:
        proc.terminate()
        err = proc.stderr.read() if proc.stderr is not None and proc.poll() is not None else ""
        said = (err.strip() or "".join(found).strip() or f"nothing within {timeout:g} s").splitlines()[-1]
        raise ServiceError(f"kubectl port-forward service/{name} failed: {said}")
    return proc, int(match.group(1))


# -- what kubectl says ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PodInfo:
    """A Job's pod as ``kubectl get pods -o json`` tells it."""

    name: str
    phase: str
    ready: bool = False
    node: str = ""
    waiting: str = ""
    message: str = ""
    exit_code: int | None = None

    @property
    def running(self) -> bool:
        return self.phase == "Running"

    @property
    def ended(self) -> bool:
        return self.phase in ("Succeeded", "Failed")

    @property
    def hopeless(self) -> bool:
        return self.waiting in HOPELESS

    def describe(self) -> str:
        parts = [f"pod {self.name or '?'}: {self.phase}"]
        if self.node:
            parts.append(f"on {self.node}")
        if self.waiting:
            parts.append(f"({self.waiting}{': ' + self.message if self.message else ''})")
        elif self.message:
            parts.append(f"({self.message})")
        if self.exit_code is not None:
            parts.append(f"exit code {self.exit_code}")
        return " ".join(parts)


def parse_pods(items: list[dict[str, Any]], what: str = "get pods") -> list[PodInfo]:
    """The pods of a ``kubectl get pods -o json`` answer's ``items`` (:meth:`KubectlResult.items`); a field of
    another shape than the API's is a ServiceError that names it."""
    out = []
    for item in items:
        status = field(item, "status", dict, what)
        conditions = {}
        for condition in field(status, "conditions", list, what):
            if isinstance(condition, dict):
                conditions[condition.get("type")] = condition
        ready = conditions.get("Ready", {}).get("status") == "True"
        message = str(conditions.get("PodScheduled", {}).get("message") or status.get("message") or "")
        waiting, exit_code = "", None
        for container in field(status, "containerStatuses", list, what):
            if not isinstance(container, dict):
                raise ServiceError(f"kubectl {what} answered {_shape(container)} where an object belongs")
            state = field(container, "state", dict, what)
            if "waiting" in state:
                detail = field(state, "waiting", dict, what)
                waiting = str(detail.get("reason") or "")
                message = str(detail.get("message") or message)
            if "terminated" in state:
                detail = field(state, "terminated", dict, what)
                exit_code = detail.get("exitCode")
                message = str(detail.get("reason") or message)
        out.append(
            PodInfo(
                name=str(field(item, "metadata", dict, what).get("name") or ""),
                phase=str(status.get("phase") or "Pending"),
                ready=ready,
                node=str(field(item, "spec", dict, what).get("nodeName") or ""),
                waiting=waiting,
                message=message,
                exit_code=exit_code if isinstance(exit_code, int) and not isinstance(exit_code, bool) else None,
            )
        )
    return out
