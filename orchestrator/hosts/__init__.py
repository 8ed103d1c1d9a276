"""Hosts: where commands run. :class:`Host` is the interface, :class:`LocalHost` and :class:`SSHHost` the two
implementations, :func:`connect_host` builds one from an experiment's host spec.
"""

from __future__ import annotations

from typing import Any

from orchestrator.errors import ConfigError
from orchestrator.hosts.base import CommandResult, Host
from orchestrator.hosts.local import LocalHost
from orchestrator.hosts.ssh import SSHHost, fingerprint

__all__ = ["CommandResult", "Host", "LocalHost", "SSHHost", "connect_host", "fingerprint"]


def connect_host(spec: Any) -> Host:
    """A Host for an experiment's host spec (``kind: ssh`` or ``kind: local``). Does not connect yet: the
    first command does (call ``SSHHost.connect()`` to fail early)."""
    kind = getattr(spec, "kind", None)
    if kind == "ssh":
        return SSHHost.from_spec(spec)
    if kind == "local":
        return LocalHost(
            name=getattr(spec, "name", None) or "local",
            sudo=getattr(spec, "sudo", "never"),
            command_timeout=float(getattr(spec, "command_timeout", 60.0)),
        )
    raise ConfigError(f"unknown host kind {kind!r} (expected ssh or local)", key="host.kind")
