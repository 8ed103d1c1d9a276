"""Waiting until a freshly started server is healthy, and failing fast, with evidence, when it will not be.

:func:`wait_until_healthy` watches two things together on every poll: the service's state (one round trip:
``systemctl show`` or a pid probe) and the server's HTTP health paths (httpx, the control-plane client). It
returns as soon as every health path answers 2xx while the service runs. It raises
:class:`~orchestrator.errors.StartFailed` as soon as the state says the start cannot succeed:

    reason="failed"     the unit entered ``failed`` (or ``auto-restart``, the moment between a failure and
                        systemd's automatic restart)
    reason="restarted"  ``NRestarts`` grew: the server crashed and systemd restarted it
    reason="exited"     the main process exited (inactive, with no failure recorded)
    reason="timeout"    ``timeout`` seconds passed without a healthy answer
    reason="stopped"    the caller's ``stop`` event was set

``evidence`` holds the log lines that explain it (errors and tracebacks, then the last lines) from the log
window that began at ``log_cursor`` (or the tail of the log), and the message quotes the most telling one.

Polls start fast (50 ms) and slow down to one per ``poll_interval`` (1 s), each period measured from the
start of the previous poll, so a server is noticed at most one period after it became ready, and a failed
start at most one period after it failed.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import httpx

from orchestrator.errors import StartFailed
from orchestrator.services.base import Service, ServiceState, select_evidence

__all__ = ["HealthReport", "ProgressCallback", "wait_until_healthy"]

#: ``progress(elapsed_seconds, timeout_seconds, latest_log_line)``
ProgressCallback = Callable[[float, float, str], None]

_TELLING = re.compile(r"(Error|Exception|error:|FATAL|Killed|out of memory)")


@dataclass(frozen=True)
class HealthReport:
    """How the server became healthy: after how long, which URL answered last, how many polls it took."""

    elapsed: float
    url: str
    status_code: int
    polls: int
    state: ServiceState


def _telling_line(evidence: list[str]) -> str:
    """The line that says most: the last error-looking line (a traceback ends with the exception)."""
    for line in reversed(evidence):
        if _TELLING.search(line) and not line.lstrip().startswith("File "):
            return line.strip()
    return evidence[-1].strip() if evidence else ""


def _failure(state: ServiceState, baseline: ServiceState) -> str | None:
    if state.failed:
        return "failed"
    if state.n_restarts > baseline.n_restarts:
        return "restarted"
    if state.active_state == "inactive":
        return "exited"
    return None


class _Evidence:
    """Reads the log window since ``cursor`` (incrementally, for progress) and picks the explaining lines."""

    def __init__(self, service: Service, cursor: str | None) -> None:
        self.service = service
        self.cursor = cursor
        self.lines: list[str] = []
        self.last_line = ""

    def update(self) -> None:
        if self.cursor is None:
            tail = self.service.logs_tail(1)
            self.last_line = tail[-1] if tail else self.last_line
            return
        chunk = self.service.journal_since(self.cursor)
        self.cursor = chunk.cursor
        new = [line for line in chunk.splitlines() if line.strip()]
        self.lines.extend(new)
        if new:
            self.last_line = new[-1]

    def collect(self) -> list[str]:
        if self.cursor is None:
            return select_evidence(self.service.logs_tail(200))
        self.update()
        return select_evidence(self.lines)


def wait_until_healthy(
    service: Service,
    base_url: str,
    health_paths: Sequence[str],
    timeout: float,
    *,
    api_key: str | None = None,
    progress: ProgressCallback | None = None,
    stop: threading.Event | None = None,
    log_cursor: str | None = None,
    poll_interval: float = 1.0,
    http_timeout: float = 2.0,
) -> HealthReport:
    """Wait until every path of ``health_paths`` under ``base_url`` answers 2xx while ``service`` runs.

    ``log_cursor`` bounds the evidence to this start; it defaults to the ``start_cursor`` the last ``apply``
    recorded, and without either the log's tail is used. See the module docstring for the failure reasons.
    """
    paths = list(health_paths) or ["/health"]
    base = base_url.rstrip("/")
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    if log_cursor is None:
        log_cursor = getattr(service, "start_cursor", None)
    evidence = _Evidence(service, log_cursor)
    started = time.monotonic()
    delay = min(0.05, poll_interval)
    polls = 0
    baseline: ServiceState | None = None
    last_answer = "no answer yet"

    def fail(reason: str, what: str) -> StartFailed:
        lines = evidence.collect()
        if reason in ("failed", "restarted", "exited") and not any(_TELLING.search(x) for x in lines):
            # journald may not have read the dying process's last lines yet: look once more.
            time.sleep(0.3)
            lines = evidence.collect()
        telling = _telling_line(lines)
        elapsed = time.monotonic() - started
        message = f"{service.host.name}: {service.name} {what} after {elapsed:.1f} s"
        if telling:
            message += f": {telling}"
        return StartFailed(message, evidence=lines, reason=reason)

    with httpx.Client(timeout=http_timeout, headers=headers, follow_redirects=False, trust_env=False) as client:
        while True:
            poll_started = time.monotonic()
            polls += 1
            if stop is not None and stop.is_set():
                raise fail("stopped", "was not healthy yet when the run was stopped")
            state = service.state()
            if baseline is None:
                baseline = state
            reason = _failure(state, baseline)
            if reason is not None:
                what = {
                    "failed": f"failed to start ({state.describe()})",
                    "restarted": f"crashed and was restarted by systemd ({state.n_restarts} restarts)",
                    "exited": f"exited before becoming healthy ({state.describe()})",
                }[reason]
                raise fail(reason, what)
            healthy = True
            url, status = "", 0
            for path in paths:
                url = base + path
                try:
                    response = client.get(url)
                except httpx.HTTPError as exc:
                    healthy, last_answer = False, f"GET {path}: {type(exc).__name__}"
                    break
                status = response.status_code
                if not 200 <= status < 300:
                    healthy, last_answer = False, f"GET {path}: HTTP {status}"
                    break
            elapsed = time.monotonic() - started
            if healthy:
                return HealthReport(elapsed=elapsed, url=url, status_code=status, polls=polls, state=state)
            if elapsed >= timeout:
                raise fail("timeout", f"was not healthy within {timeout:g} s (last answer: {last_answer})")
            if progress is not None:
                evidence.update()
                progress(elapsed, timeout, evidence.last_line)
            # The next poll starts one period after this one started (not after it ended).
            pause = max(0.0, min(delay - (time.monotonic() - poll_started), timeout - elapsed))
            delay = min(delay * 1.6, poll_interval)
            if stop is not None:
                stop.wait(pause)
            else:
                time.sleep(pause)
