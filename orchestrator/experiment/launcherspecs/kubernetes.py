"""The ``launcher: {kind: kubernetes}`` section: each deployment one Kubernetes Job, driven with ``kubectl``
(``orchestrator/launchers/kubernetes.py``)."""

from __future__ import annotations

import re
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator

from orchestrator.experiment.common import Duration, _no_control, _Strict
from orchestrator.experiment.launcherspecs.base import LauncherSpecBase, Problem
from orchestrator.experiment.service import ProcessServiceSpec
from orchestrator.redaction import is_secret_name, redact_text

__all__ = ["KubernetesLauncherSpec", "SecretKeyRef"]

#: A namespace, Secret or context name, a label value: DNS-1123 words (no spaces, quotes or shell syntax).
_KUBE_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")
#: A resource quantity (``500m``, ``16Gi``, ``2``).
_QUANTITY = re.compile(r"[0-9]+(\.[0-9]+)?(m|k|M|G|T|Ki|Mi|Gi|Ti)?")
#: The cluster's own namespaces: a sweep's objects have no place there.
_SYSTEM_NAMESPACES = frozenset({"kube-system", "kube-public", "kube-node-lease"})
#: A service account whose name says it holds wide rights (``cluster-admin``, ``admin``, ``root``, ``system-x``).
_PRIVILEGED_ACCOUNT = re.compile(r"(^|[-.])(admin|root|superuser|privileged|system|cluster-admin|operator)([-.]|$)")
#: An environment variable's name.
_ENV = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
#: A label key (``nvidia.com/gpu.product``) or value.
_LABEL = re.compile(r"([a-z0-9.-]{1,253}/)?[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?")


class SecretKeyRef(_Strict):
    """One key of a Kubernetes Secret, passed to the server as an environment variable (``secretKeyRef``): the
    value stays in the cluster, specsweep never reads it."""

    secret: str
    key: str

    @field_validator("secret")
    @classmethod
    def _secret(cls, value: str) -> str:
        if not _KUBE_NAME.fullmatch(value):
            raise ValueError(f"a Secret's name is lower-case letters, digits, '-' and '.', got {value!r}")
        return value

    @field_validator("key")
    @classmethod
    def _key(cls, value: str) -> str:
        if not re.fullmatch(r"[-._A-Za-z0-9]{1,253}", value):
            raise ValueError(f"a Secret's key is letters, digits, '-', '_' and '.', got {value!r}")
        return value


class KubernetesLauncherSpec(LauncherSpecBase):
    """Each deployment as one Kubernetes Job (one pod, ``image`` running the service's command, ``gpus``
    ``nvidia.com/gpu`` requested) and a Service in front of its port, applied with ``kubectl apply -f -``;
    ``max_jobs`` deployments at once. The server is reached through ``kubectl port-forward`` (``reach:
    port-forward``, from anywhere ``kubectl`` works) or at the Service's cluster name (``reach: service``,
    ``{service}`` in server.url, when specsweep runs in the cluster). ``secrets``: environment variables taken
    from Secrets already in the namespace (never read by specsweep). ``pending_timeout``: a pod not running
    after that long (no node with the GPUs, an image that cannot be pulled) fails its deployment."""

    kind: Literal["kubernetes"] = "kubernetes"
    image: str = Field(min_length=1)
    namespace: str = "default"
    context: str | None = None
    kubeconfig: str | None = None
    kubectl: str = "kubectl"
    gpus: int = Field(1, ge=0, le=64)
    cpu: str | None = None
    memory: str | None = None
    node_selector: dict[str, str] = Field(default_factory=dict)
    service_account: str | None = None
    #: The user the container runs as: with it the pod also asks ``runAsNonRoot`` (the restricted Pod Security
    #: Standard's last rule). Without it the image's own user, which for most engine images is root.
    run_as_user: int | None = Field(None, ge=1, le=2**31 - 1)
    image_pull_secret: str | None = None
    secrets: dict[str, SecretKeyRef] = Field(default_factory=dict)
    reach: Literal["port-forward", "service"] = "port-forward"
    max_jobs: int = Field(1, ge=1, le=256)
    pending_timeout: Duration = 1800.0
    poll_interval: Duration = 1.0

    title: ClassVar[str] = "a Kubernetes launcher"
    url_fields: ClassVar[frozenset[str]] = frozenset({"service"})
    gpu_request: ClassVar[str] = "launcher.gpus (nvidia.com/gpu per pod)"
    hosts_note: ClassVar[str] = "a Job's pod runs on the node the scheduler picks"
    runs_as: ClassVar[str] = "a Kubernetes Job runs the server as its container's command"
    command_of: ClassVar[str] = "container"

    @property
    def target(self) -> str:
        """One target per namespace (and context): the baselines are measured once for all of its pods."""
        return f"kubernetes-{self.context + '-' if self.context else ''}{self.namespace}"

    @field_validator("image", "kubectl", "kubeconfig")
    @classmethod
    def _plain(cls, value: str | None) -> str | None:
        _no_control(value, "an image, a program or a path")
        if value is not None and any(c.isspace() for c in value):
            raise ValueError(f"expected one word (no spaces), got {value!r}")
        return value

    @field_validator("namespace", "context", "service_account", "image_pull_secret")
    @classmethod
    def _name(cls, value: str | None) -> str | None:
        if value is not None and not _KUBE_NAME.fullmatch(value):
            raise ValueError(f"a Kubernetes name is lower-case letters, digits, '-' and '.', got {value!r}")
        return value

    @field_validator("cpu", "memory")
    @classmethod
    def _quantity(cls, value: str | None) -> str | None:
        if value is not None and not _QUANTITY.fullmatch(str(value)):
            raise ValueError(f"a Kubernetes quantity (2, 500m, 16Gi), got {value!r}")
        return None if value is None else str(value)

    @field_validator("node_selector")
    @classmethod
    def _labels(cls, value: dict[str, str]) -> dict[str, str]:
        for key, label in value.items():
            if not _LABEL.fullmatch(str(key)) or not _LABEL.fullmatch(str(label)):
                raise ValueError(f"node_selector takes label keys and values, got {key!r}: {label!r}")
        return {str(k): str(v) for k, v in value.items()}

    @field_validator("secrets")
    @classmethod
    def _env_names(cls, value: dict[str, SecretKeyRef]) -> dict[str, SecretKeyRef]:
        for name in value:
            if not _ENV.fullmatch(str(name)):
                raise ValueError(f"secrets are named by the environment variable they set, got {name!r}")
        return value

    @field_validator("poll_interval", "pending_timeout")
    @classmethod
    def _positive(cls, value: float) -> float:
        if value <= 0:
            raise ValueError("must be positive")
        return value

    def warnings(self, exp: Any) -> list[Problem]:
        """A namespace of the cluster's own, or a service account whose name says it may do much: allowed, but
        a benchmark's server needs neither (its pod mounts no API token either way)."""
        out: list[Problem] = []
        if self.namespace in _SYSTEM_NAMESPACES:
            out.append(
                (
                    ("launcher", "namespace"),
                    f"{self.namespace} is the cluster's own namespace: the Jobs, Services and lock of a sweep belong "
                    "in a namespace of their own (kubectl create namespace bench)",
                )
            )
        account = self.service_account or ""
        if _PRIVILEGED_ACCOUNT.search(account):
            out.append(
                (
                    ("launcher", "service_account"),
                    f"{account!r} looks like a privileged service account: the server needs no Kubernetes "
                    "rights, so leave service_account out or name one without roles",
                )
            )
        return out

    def problems(self, exp: Any) -> list[Problem]:
        """The base's, then: the pod's log is ``kubectl logs`` (no ``log_file``), secrets come from the
        cluster's Secrets (``launcher.secrets``, not ``service.secrets``, whose values the controller reads),
        and ``{service}`` in server.url only with ``reach: service``. A secret written inline in
        ``service.environment`` is refused: it would stand in clear in the Job object, readable by anyone who
        may read Jobs in the namespace and kept there until the Job is deleted."""
        out = super().problems(exp)
        service = exp.service
        if isinstance(service, ProcessServiceSpec):
            for name, value in service.environment.items():
                if is_secret_name(name) or redact_text(value) != value:
                    out.append(
                        (
                            ("service", "environment", name),
                            "a secret written inline would stand in clear in the Job object (kubectl get jobs "
                            "shows it): put it in a Secret of the namespace and name it in launcher.secrets "
                            f"({{{name}: {{secret: S, key: K}}}})",
                        )
                    )
            if service.log_file is not None:
                out.append((("service", "log_file"), "a pod's log is kubectl logs; drop log_file"))
            if service.secrets:
                out.append(
                    (
                        ("service", "secrets"),
                        "a Kubernetes Job takes its secrets from the cluster's Secrets, never from the controller: "
                        "name each one's Secret and key in launcher.secrets ({NAME: {secret: S, key: K}})",
                    )
                )
        if "{service}" in exp.server.url and self.reach != "service":
            out.append(
                (
                    ("server", "url"),
                    "{service} is the Service's name in the cluster, reached with launcher.reach: service; with "
                    "port-forward the URL's host is this machine's forwarded port (write 127.0.0.1)",
                )
            )
        return out
