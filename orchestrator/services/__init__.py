"""Services: how a server configuration is applied on a host and undone.

:class:`Service` is the interface (see :mod:`orchestrator.services.base` for the cursor and marker
contracts), :class:`SystemdService`, :class:`ProcessService` and :class:`ExistingService` (``kind: none``: a
running server, measured as it is) the implementations, :func:`make_service`
builds one from an experiment's service spec, :func:`driving` holds one for the length of a run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from orchestrator.errors import ConfigError
from orchestrator.services.base import Leftover, LogChunk, Service, ServiceState, driving, select_evidence
from orchestrator.services.existing import ExistingService
from orchestrator.services.process import ProcessService
from orchestrator.services.systemd import SystemdService

if TYPE_CHECKING:
    from orchestrator.hosts.base import Host

__all__ = [
    "ExistingService",
    "Leftover",
    "LogChunk",
    "ProcessService",
    "Service",
    "ServiceState",
    "SystemdService",
    "driving",
    "make_service",
    "select_evidence",
]


def make_service(source: Any, host: Host, *, name: str | None = None, state_dir: str | None = None) -> Service:
    """A Service on ``host`` for an experiment (its ``service`` spec) or a service spec directly.

    ``kind: systemd`` gives a :class:`SystemdService`, ``kind: process`` a :class:`ProcessService` whose files
    and lock are named after ``name`` (default: its server's port, ``server-30001``: two sweeps of one name on
    two ports never block each other, and two of any names on one port always do; else ``server``). ``state_dir``
    overrides where markers and locks live. For ``mode: unit`` the spec's ``unit_file`` template text is kept
    to check each rendered unit against it.
    """
    spec = getattr(source, "service", source)
    kind = getattr(spec, "kind", None)
    # The service's secrets go to the server alone; they and the server's API key are masked in its logs.
    values = getattr(spec, "secret_values", None)
    secrets = values() if callable(values) else {}
    api_key = getattr(getattr(source, "server", None), "api_key_value", None)
    redact = {"server.api_key": api_key} if isinstance(api_key, str) else {}
    if kind == "systemd":
        mode = getattr(spec, "mode", "dropin")
        template = getattr(spec, "unit_file", None) if mode == "unit" else None
        kwargs: dict[str, Any] = {"mode": mode, "unit_template": template, "secrets": secrets, "redact": redact}
        if state_dir is not None:
            kwargs["state_dir"] = state_dir
        return SystemdService(host, spec.unit, **kwargs)
    if kind == "process":
        pkwargs: dict[str, Any] = {
            "workdir": getattr(spec, "workdir", None),
            "log_file": getattr(spec, "log_file", None),
            "stop_timeout": float(getattr(spec, "stop_timeout", 30.0)),
            "secrets": secrets,
            "redact": redact,
        }
        if state_dir is not None:
            pkwargs["state_dir"] = state_dir
        return ProcessService(host, name or _process_name(source, spec, host), **pkwargs)
    if kind == "none":
        return _existing(source, spec, host, state_dir=state_dir, redact=redact)
    raise ConfigError(f"unknown service kind {kind!r} (expected systemd, process or none)", key="service.kind")


def _process_name(source: Any, spec: Any, host: Host) -> str:
    """What a process service's files and lock are named after: the port its server listens on
    (``server-30001``), which is what two sweeps on one host really share, whatever their experiments are
    called; the experiment's name with GPU slots (each instance's own, ``launchers/gpuslots.py``) or where its
    URL has no port yet, else ``server``."""
    if spec is source:
        return "server"
    fallback = str(getattr(source, "name", None) or "server")
    if getattr(source, "gpu_slots", False):  # each slot's instance is named after the experiment (gpuslots.py)
        return fallback
    try:
        specs = source.host_specs() if callable(getattr(source, "host_specs", None)) else []
        match = next((s for s in specs if s.display_name == host.name), None)
        url = source.server_url(match) if match is not None else str(source.server.url)
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except (AttributeError, ValueError):
        return fallback
    return fallback if "{" in url else f"server-{port}"


def _existing(source: Any, spec: Any, host: Host, *, state_dir: str | None, redact: dict[str, str]) -> Service:
    """``kind: none``: the server already running at the experiment's URL on ``host`` (services/existing.py)."""
    server = getattr(source, "server", None)
    if server is None:
        raise ConfigError("service kind none needs the experiment (its server.url)", key="service.kind")
    specs = source.host_specs() if callable(getattr(source, "host_specs", None)) else []
    match = next((s for s in specs if s.display_name == host.name), None)
    url = source.server_url(match) if match is not None else server.url.replace("{host}", getattr(host, "address", ""))
    kwargs: dict[str, Any] = {
        "health_path": source.health_paths[0],
        "api_key": getattr(server, "api_key_value", None),
        "unit": getattr(spec, "unit", None),
        "log_file": getattr(spec, "log_file", None),
        "redact": redact,
    }
    if state_dir is not None:
        kwargs["state_dir"] = state_dir
    return ExistingService(host, url, **kwargs)
