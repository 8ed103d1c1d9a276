"""The ``launcher: {kind: slurm}`` section: each deployment one Slurm job (``orchestrator/launchers/slurm.py``)."""

from __future__ import annotations

import re
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from orchestrator.experiment.common import Duration, _no_control
from orchestrator.experiment.hosts import HostSpec, LocalHostSpec, _host_shorthand
from orchestrator.experiment.launcherspecs.base import LauncherSpecBase, Problem
from orchestrator.experiment.service import ProcessServiceSpec

__all__ = ["SlurmLauncherSpec"]

#: sbatch options specsweep sets itself: the job's name, comment and output file are how it finds its jobs again.
_OWN_SBATCH_OPTIONS = {"--job-name", "--comment", "--output", "--error", "--open-mode", "--parsable", "--wrap"}
_OWN_SBATCH_OPTIONS |= {"--array", "--nodes", "-J", "-o", "-e", "-a", "-N"}
#: What Slurm accepts as a time limit (sbatch(1), --time): minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS.
_SLURM_TIME = re.compile(r"\d+|\d+:\d+|\d+:\d+:\d+|\d+-\d+|\d+-\d+:\d+|\d+-\d+:\d+:\d+|UNLIMITED|INFINITE")
#: A partition, account, QOS, GRES or constraint: one word of Slurm's (no spaces, quotes or shell syntax).
_SLURM_WORD = re.compile(r"[A-Za-z0-9_.:,=+*!&|()\[\]/@%-]{1,200}")


class SlurmLauncherSpec(LauncherSpecBase):
    """Each deployment as one Slurm job (``orchestrator/launchers/slurm.py``): a batch script submitted with
    ``sbatch`` on the login node (``login``: an SSH host, or ``local`` when specsweep runs there), its server
    on the node Slurm picks (``{node}`` in server.url), its output file (under ``shared_dir``, a directory
    the login node and the compute nodes share) the log window. ``max_jobs`` deployments run at once;
    ``pending_timeout``: a job still pending after that long fails its deployment (status, not a hang)."""

    kind: Literal["slurm"] = "slurm"

    title: ClassVar[str] = "a Slurm launcher"
    url_fields: ClassVar[frozenset[str]] = frozenset({"node"})
    gpu_request: ClassVar[str] = "launcher.gres (gpu:N per job)"
    hosts_note: ClassVar[str] = "a Slurm job runs on the node Slurm picks, and the login node is launcher.login"
    runs_as: ClassVar[str] = "a Slurm job runs the server as a process"
    command_of: ClassVar[str] = "job"
    tunnels: ClassVar[bool] = True

    login: HostSpec = Field(default_factory=LocalHostSpec)
    partition: str | None = None
    gres: str | None = None
    time: str | None = None
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None
    max_jobs: int = Field(1, ge=1, le=256)
    extra_args: list[str] = Field(default_factory=list)
    shared_dir: str = "~/.local/state/specsweep/slurm"
    pending_timeout: Duration = 3600.0
    poll_interval: Duration = 1.0

    @model_validator(mode="before")
    @classmethod
    def _shorthands(cls, data: Any) -> Any:
        if isinstance(data, dict):
            data = dict(data)
            if "login" in data:
                data["login"] = _host_shorthand(data["login"])
            if isinstance(data.get("extra_args"), str):
                import shlex

                try:
                    data["extra_args"] = shlex.split(data["extra_args"])
                except ValueError as exc:
                    raise ValueError(f"extra_args: {exc}") from None
        return data

    @field_validator("partition", "gres", "account", "qos", "constraint")
    @classmethod
    def _word(cls, value: str | None) -> str | None:
        if value is not None and not _SLURM_WORD.fullmatch(value):
            raise ValueError(f"expected one Slurm word (no spaces, quotes or control characters), got {value!r}")
        return value

    @field_validator("time")
    @classmethod
    def _time(cls, value: str | None) -> str | None:
        if value is not None and not _SLURM_TIME.fullmatch(str(value)):
            raise ValueError(
                f"a Slurm time limit is minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS, got {value!r}"
            )
        return value

    @field_validator("extra_args")
    @classmethod
    def _extra(cls, value: list[str]) -> list[str]:
        for arg in value:
            _no_control(arg, "an sbatch option")
            if not arg.startswith("-"):
                raise ValueError(f"each of extra_args is one sbatch option (--name=value), got {arg!r}")
            name = arg.split("=", 1)[0] if arg.startswith("--") else arg[:2]
            if name in _OWN_SBATCH_OPTIONS:
                raise ValueError(f"{name} is set by specsweep (it names its jobs and finds them again by it)")
        return value

    @field_validator("shared_dir")
    @classmethod
    def _dir(cls, value: str) -> str:
        _no_control(value, "a path")
        if not (value.startswith("/") or value == "~" or value.startswith("~/")) or any(c.isspace() for c in value):
            raise ValueError(f"shared_dir is an absolute path or starts with ~/ (no spaces), got {value!r}")
        return value.rstrip("/") or "/"

    @field_validator("poll_interval", "pending_timeout")
    @classmethod
    def _positive(cls, value: float) -> float:
        if value <= 0:
            raise ValueError("must be positive")
        return value

    @property
    def target(self) -> str:
        """The name the records of this launcher carry (their ``host``): one target per partition."""
        return f"slurm-{self.partition or 'default'}"

    def problems(self, exp: Any) -> list[Problem]:
        """The base's, then: the job's log is its output file (no ``log_file``), no secrets (the scheduler keeps
        the batch script and its environment), and ``via: ssh`` needs an SSH login node to tunnel through."""
        out = super().problems(exp)
        service = exp.service
        if isinstance(service, ProcessServiceSpec):
            if service.log_file is not None:
                out.append(
                    (
                        ("service", "log_file"),
                        "a Slurm job's log is its output file (under launcher.shared_dir); drop log_file",
                    )
                )
            if service.secrets:
                out.append(
                    (
                        ("service", "secrets"),
                        "secrets are not passed to Slurm jobs (the batch script and its environment are kept by "
                        "the scheduler); give the job what it needs through the cluster's own means",
                    )
                )
        if exp.server.via == "ssh" and self.login.kind != "ssh":
            out.append(
                (
                    ("server", "via"),
                    "via: ssh tunnels through the login node's SSH connection, but launcher.login is this "
                    "machine; drop via (the nodes are reached directly) or give login an ssh host",
                )
            )
        return out
