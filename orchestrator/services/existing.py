"""ExistingService (``service: {kind: none}``): a server that is already running, measured as it is.

For users who may not restart the server (a shared or production host): nothing is written, started, stopped
or restored. ``apply`` only checks that the server answers at the experiment's URL (a server that does not is a
failed start, said at once: this service never starts one); ``restore`` has nothing to undo. The experiment has
one configuration, the server's own, so one deployment (the schema refuses variants with server-side templates
or a matrix: they could not be applied).

Where the engine's log lines come from, for the metric windows:

- ``unit``: a systemd unit whose journal (and state) are read, never changed (:class:`SystemdService`'s read
  methods: ``journalctl -u UNIT``, ``systemctl show``);
- ``log_file``: a file the server appends its log to, read by byte offset (:class:`ProcessService`'s log reading);
- neither: no log lines; the metrics come from ``/metrics`` and the responses alone.

Without ``unit`` the state is the server's answer: it runs while its health path answers at all (any HTTP
status, or a slow answer under load), and has failed once connections are refused or the host is unreachable.

A lock on the host (``~/.local/state/specsweep/<name>.lock``, as a process service keeps it) stops two specsweep
runs from measuring the same server at once, since each would disturb the other's numbers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import httpx

from orchestrator.engines.controlplane import request
from orchestrator.errors import StartFailed
from orchestrator.services.base import Leftover, LogChunk, ServiceState
from orchestrator.services.process import DEFAULT_STATE_DIR, ProcessService
from orchestrator.services.systemd import SystemdService

if TYPE_CHECKING:
    from orchestrator.hosts.base import Host
    from orchestrator.plan.deployments import Deployment

__all__ = ["ExistingService"]


@dataclass(frozen=True)
class _Answering(ServiceState):
    """The state of a server known only by its answers: no process of ours, so no pid; it runs while active."""

    @property
    def running(self) -> bool:
        return self.active_state == "active"


class ExistingService:
    """A running server, measured with the configuration it has (module docstring)."""

    def __init__(
        self,
        host: Host,
        url: str,
        *,
        health_path: str = "/health",
        api_key: str | None = None,
        unit: str | None = None,
        log_file: str | None = None,
        name: str | None = None,
        state_dir: str = DEFAULT_STATE_DIR,
        timeout: float = 5.0,
        redact: dict[str, str] | None = None,
    ) -> None:
        self.host = host
        self.url = url.rstrip("/")
        port = urlsplit(self.url).port or (443 if self.url.startswith("https") else 80)
        self.name = name or f"existing-{port}"
        self.health_path = health_path
        self.timeout = timeout
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        # What the readers mask in the log (the server's API key), as the other services do.
        masked: dict[str, Any] = {"redact": redact} if redact else {}
        self._unit = SystemdService(host, unit, **masked) if unit else None
        # The process service's log reading and lock, never its start or stop.
        self._files = ProcessService(host, self.name, log_file=log_file, state_dir=state_dir, **masked)
        self._log_file = log_file
        self.start_cursor: str | None = None

    def __repr__(self) -> str:
        return f"ExistingService({self.host.name!r}, {self.url!r})"

    # -- "applying": only checking ------------------------------------------------------------------------

    def _answer(self) -> tuple[bool, str]:
        """(whether the server answers at all, what happened)."""
        # Through the control plane's request: a total deadline and a size cap (orchestrator/engines/controlplane.py).
        with httpx.Client(timeout=self.timeout, trust_env=False) as client:
            answer = request(client, "GET", self.url + self.health_path, headers=self._headers, deadline_s=self.timeout)
        if answer.status is not None:
            return True, f"GET {self.health_path}: HTTP {answer.status}"
        if isinstance(answer.error, httpx.TimeoutException) or answer.error is None:
            return True, f"GET {self.health_path}: {answer.problem} (busy, not gone)"
        return False, f"GET {self.health_path}: {type(answer.error).__name__}: {answer.error}"

    def apply(self, deployment: Deployment) -> None:
        """Deploy nothing: the server must already run. A server that does not answer fails at once."""
        self.start_cursor = self.journal_cursor()
        answers, what = self._answer()
        if not answers:
            raise StartFailed(
                f"{self.host.name}: no server answers at {self.url} ({what}); service kind none measures a server "
                "that is already running and never starts one: start it, or fix server.url",
                evidence=self.logs_tail(20),
                reason="not_running",
            )

    def state(self) -> ServiceState:
        if self._unit is not None:
            return self._unit.state()
        answers, what = self._answer()
        if answers:
            return _Answering("active", "running", "success")
        return _Answering("failed", "dead", what)

    # -- logs -----------------------------------------------------------------------------------------------

    def journal_cursor(self) -> str:
        if self._unit is not None:
            return self._unit.journal_cursor()
        if self._log_file is not None:
            return self._files.journal_cursor()
        return "0"

    def journal_since(self, cursor: str) -> LogChunk:
        if self._unit is not None:
            return self._unit.journal_since(cursor)
        if self._log_file is not None:
            return self._files.journal_since(cursor)
        return LogChunk("", cursor)

    def redact(self, text: str) -> str:
        """``text`` with the values this service masks in its logs masked."""
        return self._files.redact(text)

    def logs_tail(self, n: int = 50) -> list[str]:
        if self._unit is not None:
            return self._unit.logs_tail(n)
        if self._log_file is not None:
            return self._files.logs_tail(n)
        return []

    # -- nothing to undo ------------------------------------------------------------------------------------

    def restore(self) -> bool:
        return False

    def find_leftovers(self) -> Leftover | None:
        return None

    def recover(self) -> Leftover | None:
        return None

    def lock(self, label: str, *, break_lock: bool = False) -> None:
        self._files.lock(label, break_lock=break_lock)

    def unlock(self) -> None:
        self._files.unlock()
