"""Where deployments run: the ``host:``/``hosts:`` sections (an SSH host or this machine) and the
``launcher:`` section (a Slurm scheduler), with the shorthands that spell a host as one string."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from orchestrator.experiment.common import Duration, _no_control, _Strict
from orchestrator.experiment.slots import gpus_field

__all__ = ["HostSpec", "LauncherSpec", "LocalHostSpec", "SSHHostSpec", "SlurmLauncherSpec"]


class SSHHostSpec(_Strict):
    """A host reached over SSH: ``user@host[:port]`` or an alias from ~/.ssh/config."""

    kind: Literal["ssh"] = "ssh"
    ssh: str = Field(min_length=1)
    name: str | None = None
    identity_file: str | None = None
    known_hosts: str | None = None
    host_key_policy: Literal["strict", "accept-new"] = "strict"
    ssh_config: str | None = None
    connect_timeout: Duration = 10.0
    command_timeout: Duration = 60.0
    keepalive: Duration = 15.0
    sudo: Literal["auto", "always", "never"] = "auto"
    #: Its GPUs, for GPU slots (``orchestrator/experiment/slots.py``): a count, or ``auto`` (nvidia-smi's).
    gpus: int | Literal["auto"] | None = None

    @field_validator("gpus", mode="before")
    @classmethod
    def _gpus(cls, value: Any) -> Any:
        return gpus_field(value)

    @field_validator("ssh")
    @classmethod
    def _target(cls, value: str) -> str:
        if any(ch.isspace() or not ch.isprintable() for ch in value) or value.startswith("-"):
            raise ValueError(f"not an ssh target (user@host[:port] or a ~/.ssh/config alias): {value!r}")
        return value

    @field_validator("name", "identity_file", "known_hosts", "ssh_config")
    @classmethod
    def _plain(cls, value: str | None) -> str | None:
        return _no_control(value, "a host name or path")

    @property
    def display_name(self) -> str:
        return self.name or self.ssh

    @property
    def address(self) -> str:
        """The host part of the target (for ``{host}`` in server.url)."""
        target = self.ssh.rsplit("@", 1)[-1]
        if target.startswith("["):
            return target[1:].split("]", 1)[0]
        return target.rsplit(":", 1)[0] if target.count(":") == 1 else target


class LocalHostSpec(_Strict):
    """This machine: commands run as local subprocesses (the local demo, a controller on the GPU host)."""

    kind: Literal["local"] = "local"
    name: str = "local"
    #: Its GPUs, for GPU slots (``orchestrator/experiment/slots.py``): a count, or ``auto`` (nvidia-smi's).
    gpus: int | Literal["auto"] | None = None

    @field_validator("gpus", mode="before")
    @classmethod
    def _gpus(cls, value: Any) -> Any:
        return gpus_field(value)

    @field_validator("name")
    @classmethod
    def _plain(cls, value: str) -> str:
        return _no_control(value, "a host name") or value

    @property
    def display_name(self) -> str:
        return self.name

    @property
    def address(self) -> str:
        return "127.0.0.1"


HostSpec = Annotated[SSHHostSpec | LocalHostSpec, Field(discriminator="kind")]


#: sbatch options specsweep sets itself: the job's name, comment and output file are how it finds its jobs again.
_OWN_SBATCH_OPTIONS = {"--job-name", "--comment", "--output", "--error", "--open-mode", "--parsable", "--wrap"}
_OWN_SBATCH_OPTIONS |= {"--array", "--nodes", "-J", "-o", "-e", "-a", "-N"}
#: What Slurm accepts as a time limit (sbatch(1), --time): minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS.
_SLURM_TIME = re.compile(r"\d+|\d+:\d+|\d+:\d+:\d+|\d+-\d+|\d+-\d+:\d+|\d+-\d+:\d+:\d+|UNLIMITED|INFINITE")
#: A partition, account, QOS, GRES or constraint: one word of Slurm's (no spaces, quotes or shell syntax).
_SLURM_WORD = re.compile(r"[A-Za-z0-9_.:,=+*!&|()\[\]/@%-]{1,200}")


class SlurmLauncherSpec(_Strict):
    """Each deployment as one Slurm job (``orchestrator/launchers/slurm.py``): a batch script submitted with
    ``sbatch`` on the login node (``login``: an SSH host, or ``local`` when specsweep runs there), its server
    on the node Slurm picks (``{node}`` in server.url), its output file (under ``shared_dir``, a directory
    the login node and the compute nodes share) the log window. ``max_jobs`` deployments run at once;
    ``pending_timeout``: a job still pending after that long fails its deployment (status, not a hang)."""

    kind: Literal["slurm"] = "slurm"
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


LauncherSpec = Annotated[SlurmLauncherSpec, Field(discriminator="kind")]


def _host_shorthand(value: Any) -> Any:
    if isinstance(value, str):
        return {"kind": "local"} if value == "local" else {"kind": "ssh", "ssh": value}
    if isinstance(value, dict) and "kind" not in value:
        if "ssh" in value:
            return {"kind": "ssh", **value}
        if value.get("local") is True and len(value) == 1:
            return {"kind": "local"}
    return value
