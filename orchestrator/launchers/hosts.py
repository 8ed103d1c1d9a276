"""Launchers whose slots are hosts: this machine, or a pool of hosts reached over SSH.

A :class:`HostSlot` is one host and the experiment's service on it (systemd drop-in or unit, a plain process,
or any kind :func:`orchestrator.services.make_service` builds): ``open`` connects, takes the service's lock,
undoes what a killed run left (its marker) and refuses a server URL that something else already answers;
``launch`` applies the deployment (one restart) and waits until the server is healthy
(:func:`orchestrator.launchers.health.wait_until_healthy`: the unit's state and the health paths together, failing fast
with the log's evidence); ``close`` restores the service, releases the lock and closes the connection. The
server stays up between deployments: the next ``launch`` restarts it with the next configuration. With
``server.via: ssh`` the server's URL is reached through a port forwarded over the host's SSH connection
(:mod:`orchestrator.hosts.tunnel`), opened with the slot and closed with it.

:class:`LocalLauncher` is one slot on this machine; :class:`SSHPoolLauncher` one slot per host of the
experiment (``hosts:``), each host its own target, so each measures the baselines itself and the other
deployments go to whichever host is free.
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import httpx

from orchestrator.engines.controlplane import request
from orchestrator.errors import ServiceError, SpecsweepError
from orchestrator.hosts import connect_host
from orchestrator.hosts.tunnel import Tunnel
from orchestrator.launchers.base import HealthCallback, Launcher, RunningServer, Slot
from orchestrator.launchers.health import wait_for_experiment
from orchestrator.services import make_service

if TYPE_CHECKING:
    from orchestrator.experiment.hosts import LocalHostSpec, SSHHostSpec
    from orchestrator.experiment.schema import Experiment
    from orchestrator.hosts.base import Host
    from orchestrator.plan.deployments import Deployment
    from orchestrator.services.base import Service

__all__ = [
    "HostLauncher",
    "HostServer",
    "HostSlot",
    "LocalLauncher",
    "SSHPoolLauncher",
    "check_port_free",
    "port_holder",
]


def _tail(service: Service, lines: int) -> list[str]:
    try:
        return list(service.logs_tail(lines))
    except SpecsweepError as exc:
        return [f"(could not read the server log: {exc})"]


def port_holder(host: Host | None, url: str) -> str:
    """Who listens on ``url``'s port on ``host``, from its ``ss -Hltnp`` (``python3 (pid 1234)``); ``another
    process`` when the host cannot tell (no ``ss``, another user's process, a URL reached through a tunnel)."""
    from urllib.parse import urlsplit

    if host is None:
        return "another process"
    parts = urlsplit(url)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
        r = host.run(f"command -v ss >/dev/null || exit 127; ss -Hltnp 'sport = :{int(port)}'", timeout=10)
    except Exception:  # naming the holder is a courtesy: it must never hide the refusal it explains
        return "another process"
    names = re.findall(r'\("([^"]+)",pid=(\d+)', r.stdout)
    seen: list[str] = []
    for name, pid in names:
        who = f"{name} (pid {pid})"
        if who not in seen:
            seen.append(who)
    return ", ".join(seen) or "another process"


def check_port_free(service: Service, experiment: Experiment, url: str, name: str) -> None:
    """Refuse to start when something that is not our server already answers at ``url``.

    Otherwise a stray server on the port would pass every health check while ours fails to bind, and its
    numbers would be recorded as ours. Called while our service is stopped (a host's slot when it opens, a GPU
    slot before each deployment); a running service is ours. Raises ServiceError naming who holds the port.
    """
    if service.state().running:
        return
    api_key = experiment.server.api_key_value
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    path = experiment.health_paths[0]
    # A total deadline (orchestrator/engines/controlplane.py).
    with httpx.Client(timeout=2.0, trust_env=False) as client:
        answer = request(client, "GET", url + path, headers=headers, deadline_s=2.0)
    if answer.status is None:
        return
    who = port_holder(getattr(service, "host", None), url)
    raise ServiceError(
        f"{name}: {url}{path} already answers (HTTP {answer.status}) although the service is not running: "
        f"{who} serves that port; stop it or change the port in the experiment"
    )


class HostServer(RunningServer):
    """A healthy deployment on a host: its URL and its service (the log window source)."""

    def __init__(self, url: str, service: Service) -> None:
        self.url = url
        self._service = service
        #: The host it runs on (GPU telemetry and provenance read it) and its service (the command read back).
        self.host: Host | None = getattr(service, "host", None)
        self.service: Service | None = service

    @property
    def logs(self) -> Service:
        return self._service

    def alive(self) -> bool:
        try:
            return bool(self._service.state().running)
        except SpecsweepError:
            return False

    def evidence(self, lines: int = 40) -> list[str]:
        return _tail(self._service, lines)

    def release(self) -> None:
        """Nothing: the next launch on the host replaces this configuration, and the slot's close restores it."""


class HostSlot(Slot):
    """One host and the experiment's service on it (see the module docstring)."""

    def __init__(
        self, experiment: Experiment, spec: SSHHostSpec | LocalHostSpec, *, lock_label: str, break_lock: bool = False
    ) -> None:
        self.experiment = experiment
        self.spec = spec
        self.name = spec.display_name
        self.url = experiment.server_url(spec)
        self.lock_label = lock_label
        self.break_lock = break_lock
        self.host: Host | None = None
        self.service: Service | None = None
        self.tunnel: Tunnel | None = None

    def open(self, recovered: Callable[[str], None]) -> None:
        self.host = connect_host(self.spec)
        if self.experiment.server.via == "ssh" and self.tunnel is None:
            # The server is reached through the host's own SSH connection (a firewall that lets only port 22 in).
            self.tunnel = Tunnel(self.host, self.experiment.server_url(self.spec))  # type: ignore[arg-type]
            self.url = self.tunnel.start()
        service = make_service(self.experiment, self.host)
        service.lock(self.lock_label, break_lock=self.break_lock)
        # Only once the lock is ours may close() touch the service: a run refused by the lock must never undo
        # (stop, reconfigure) what the run holding it applied.
        self.service = service
        leftovers = service.recover()
        if leftovers:
            recovered(str(leftovers))
        self._check_port_free(service)

    def _check_port_free(self, service: Service) -> None:
        check_port_free(service, self.experiment, self.url, self.name)

    def _service(self) -> Service:
        if self.service is None:
            raise ServiceError(f"{self.name}: the slot is not open")
        return self.service

    def launch(self, deployment: Deployment, *, progress: HealthCallback | None, stop: threading.Event) -> HostServer:
        service = self._service()
        service.apply(deployment)
        wait_for_experiment(service, self.url, self.experiment, progress=progress, stop=stop)
        return HostServer(self.url, service)

    def evidence(self, lines: int = 40) -> list[str]:
        if self.service is None:
            return []
        return _tail(self.service, lines)

    def close(self) -> bool:
        service, host = self.service, self.host
        self.service, self.host = None, None
        if self.tunnel is not None:
            self.tunnel.close()
            self.tunnel, self.url = None, self.experiment.server_url(self.spec)
        if service is None:
            if host is not None:
                with contextlib.suppress(Exception):
                    host.close()
            return False
        try:
            service.restore()
        finally:
            with contextlib.suppress(SpecsweepError):
                service.unlock()
            if host is not None:
                with contextlib.suppress(Exception):
                    host.close()
        return True


class HostLauncher(Launcher):
    """One slot per host of ``specs``, each running one deployment at a time."""

    kind = "hosts"

    def __init__(
        self,
        experiment: Experiment,
        specs: Sequence[SSHHostSpec | LocalHostSpec],
        *,
        lock_label: str,
        break_lock: bool = False,
    ) -> None:
        self._slots = [HostSlot(experiment, spec, lock_label=lock_label, break_lock=break_lock) for spec in specs]

    def slots(self) -> list[HostSlot]:
        return list(self._slots)


class LocalLauncher(HostLauncher):
    """This machine: one slot, the service run by this user (a process) or this machine's systemd."""

    kind = "local"


class SSHPoolLauncher(HostLauncher):
    """A pool of hosts (SSH, or this machine among them): one slot per host."""

    kind = "ssh"
