"""Where deployments run: the ``host:``/``hosts:`` sections (an SSH host or this machine), with the shorthands
that spell a host as one string. The ``launcher:`` section's specs are in ``experiment/launcherspecs/``."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from orchestrator.experiment.common import Duration, _no_control, _Strict
from orchestrator.experiment.slots import gpus_field

__all__ = ["HostSpec", "LocalHostSpec", "SSHHostSpec"]


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


def _host_shorthand(value: Any) -> Any:
    if isinstance(value, str):
        return {"kind": "local"} if value == "local" else {"kind": "ssh", "ssh": value}
    if isinstance(value, dict) and "kind" not in value:
        if "ssh" in value:
            return {"kind": "ssh", **value}
        if value.get("local") is True and len(value) == 1:
            return {"kind": "local"}
    return value
