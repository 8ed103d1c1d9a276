"""Waiting until a freshly started server is healthy, and failing fast, with evidence, when it will not be.

:func:`wait_until_healthy` watches two things together on every poll: the service's state (one round trip:
``systemctl show`` or a pid probe) and the server's HTTP health paths (httpx, the control-plane client). It
returns as soon as every health path answers 2xx while the service runs. It raises
:class:`~orchestrator.errors.StartFailed` as soon as the state says the start cannot succeed:

    reason="failed"     the unit entered ``failed`` (or ``auto-restart``, the moment between a failure and
                        systemd's automatic restart)
    reason="restarted"  ``NRestarts`` grew: the server crashed and systemd restarted it
    reason="exited"     the main process exited (inactive, with no failure recorded)
    reason="wrong_port" the URL refuses connections while the server listens on another port: its log
                        says so (``Uvicorn running on http://0.0.0.0:18300``, vLLM's and llama.cpp's
                        listening lines, :mod:`orchestrator.engines.listening`), or the host's sockets do
                        (``ss -Hltnp`` for the server's processes: one listening port, where a health
                        path answers 2xx)
    reason="refused"    the URL refuses connections while the log says the server listens on the URL's
                        port (on another address) or is ready (SGLang's ``The server is fired up``)
    reason="timeout"    ``timeout`` seconds passed without a healthy answer
    reason="stopped"    the caller's ``stop`` event was set

Only a refusal seen by a request that began after the telling line was read counts (a server behind a port
mapping that was refused before it bound, then logged its own port, is not failed), so the check costs at
most one poll after the line appears. ``refused`` takes two such polls in a row, and a bind address that
takes the URL's connections (``0.0.0.0``, the URL's own host) is never one: that server is going away, and
its state will say so. A server that died meanwhile reports that instead. A URL that answers at all (a
proxy's 502, a 503 while loading) is waited for as before.

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
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import httpx

from orchestrator.engines.controlplane import request
from orchestrator.engines.listening import Listening, listening_lines, ready_line, url_port
from orchestrator.errors import StartFailed
from orchestrator.services.base import Service, ServiceState, select_evidence

if TYPE_CHECKING:
    from orchestrator.experiment.schema import Experiment
    from orchestrator.hosts.base import Host

__all__ = ["HEALTH_POLL_SECONDS", "HealthReport", "ProgressCallback", "wait_for_experiment", "wait_until_healthy"]

#: At most this long between a launch's health polls: noticing a ready server is the largest orchestration cost
#: of a sweep (every restart pays it); half a second keeps ready -> noticed under 1 s, one ``systemctl show`` and
#: a GET or two per poll.
HEALTH_POLL_SECONDS = 0.5

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


#: A health answer is a few bytes; more than this is no health answer (and is not read on).
_HEALTH_LIMIT = 1024 * 1024


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


def _failure_text(reason: str, state: ServiceState) -> str:
    # The words already say it failed: the state's details, without its "failed (failed, …)" again.
    details = [p for p in (state.sub_state, state.result) if p and p not in (state.active_state, "success")]
    if state.exec_main_status is not None and state.result not in ("", "success"):
        details.append(f"status {state.exec_main_status}")
    why = f" ({', '.join(details)})" if details else ""
    return {
        "failed": f"failed to start{why}",
        "restarted": f"crashed and was restarted by systemd ({state.n_restarts} restarts)",
        "exited": f"exited before becoming healthy ({state.describe()})",
    }[reason]


def _refused(exc: BaseException) -> bool:
    """Whether a failed request was refused (nothing listens at that address), not slow or unreachable."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ConnectionRefusedError) or "refused" in str(current).lower():
            return True
        current = current.__cause__ or current.__context__
    return False


_ANY = {"", "0.0.0.0", "::", "*"}
_LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def _covers(listen_host: str, url_host: str) -> bool:
    """Whether a socket bound to ``listen_host`` accepts connections made to ``url_host``."""
    return listen_host in _ANY or listen_host == url_host or {listen_host, url_host} <= _LOOPBACK


def _with_port(base_url: str, port: int) -> str:
    parts = urlsplit(base_url)
    host = parts.hostname or "127.0.0.1"
    netloc = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    return parts._replace(netloc=netloc).geturl().rstrip("/")


_SS_PID = re.compile(r"pid=(\d+)")
# $1: the main pid. Prints the pids of its session, a separator, then the host's listening TCP sockets.
_SOCKETS = """s=$(ps -o sid= -p {pid} 2>/dev/null | tr -d ' ')
[ -n "$s" ] || exit 0
command -v ss >/dev/null 2>&1 || exit 0
ps -e -o pid=,sid= 2>/dev/null | awk -v s="$s" '$2 == s {{print $1}}'
echo ---
ss -Hltnp 2>/dev/null
true
"""


def listening_ports(host: Host, main_pid: int | None) -> list[Listening]:
    """The TCP addresses the processes of ``main_pid``'s session listen on, from the host's ``ss -Hltnp``.

    The session of the main process: the process service's wrapper, or the unit's main process, which systemd
    starts in a session of its own. Asked for engines whose log says nothing
    :mod:`orchestrator.engines.listening` recognises. Best effort: empty when the pid is unknown, ``ps`` or
    ``ss`` is missing, or the host does not show other users' processes. Never raises for what the host answers.
    """
    if not main_pid or main_pid <= 0:
        return []
    try:
        result = host.run(_SOCKETS.format(pid=int(main_pid)), timeout=10)
    except Exception:  # a diagnosis must never turn into the failure it diagnoses
        return []
    head, sep, sockets = result.stdout.partition("---\n")
    if not sep:
        return []
    pids = {int(p) for p in head.split() if p.isdigit()}
    found: list[Listening] = []
    seen: set[tuple[str, int]] = set()
    for line in sockets.splitlines():
        fields = line.split()
        if len(fields) < 5 or not pids.intersection(int(p) for p in _SS_PID.findall(line)):
            continue
        local = fields[3]
        address, _, port_text = local.rpartition(":")
        if not port_text.isdigit():
            continue
        address = address.strip("[]").split("%", 1)[0]
        key = (address, int(port_text))
        if key not in seen:
            seen.add(key)
            found.append(
                Listening(host=address, port=int(port_text), line=line.strip()[:300], source="ss", quote=local)
            )
    return found


@dataclass(frozen=True)
class _Verdict:
    reason: str
    what: str
    line: str  # the whole line, for the evidence
    said: str  # where it was found and its telling words, for the message


class _PortCheck:
    """Decides, when the URL refuses connections, whether the server serves somewhere else (module docstring)."""

    #: Seconds between two looks at the host's sockets (one ``ss`` round trip each) while the URL refuses.
    SOCKETS_EVERY = 2.0

    def __init__(self, service: Service, base_url: str, health_path: str, client: httpx.Client) -> None:
        self.service = service
        self.base = base_url
        self.port = url_port(base_url)
        self.url_host = urlsplit(base_url).hostname or ""
        self.health_path = health_path
        self.client = client
        self.next_sockets = time.monotonic() + 1.0

    def verdict(self, lines: list[str], state: ServiceState) -> _Verdict | None:
        """``lines``: the log lines read before the refused request began."""
        where = f"{self.base} refuses connections"
        listening = listening_lines(lines)
        same = [x for x in listening if x.port == self.port]
        other = [x for x in listening if x.port != self.port]
        if other and not same:
            found = other[-1]
            return _Verdict("wrong_port", self._wrong(found.port, where), found.line, f"the log: {found.quote!r}")
        if same:
            found = same[-1]
            if _covers(found.host, self.url_host):
                return None  # it listens where the URL points: a refusal means it is going away (state says)
            return _Verdict(
                "refused",
                f"listens on {found.address}, but {where}: the URL's host {self.url_host} is not the address "
                f"the server listens on (start it with --host {self.url_host} or 0.0.0.0, or use {found.host} "
                "in server.url)",
                found.line,
                f"the log: {found.quote!r}",
            )
        ready = ready_line(lines)
        if ready is not None:
            sockets = [x for x in listening_ports(self.service.host, state.main_pid) if x.port != self.port]
            ports = ", ".join(sorted({str(x.port) for x in sockets}, key=int))
            also = f"; its processes listen on port(s) {ports}" if ports else ""
            return _Verdict("refused", f"says it is ready, but {where}{also}", ready, f"the log: {ready!r}")
        now = time.monotonic()
        if now >= self.next_sockets and state.main_pid:
            self.next_sockets = now + self.SOCKETS_EVERY
            sockets = listening_ports(self.service.host, state.main_pid)
            # Only a server with one listening port is asked over HTTP: a loading engine's other ports (NCCL,
            # torch's TCPStore, ZMQ) are nobody's business, and a request could disturb them.
            if len({x.port for x in sockets}) == 1 and sockets[0].port != self.port:
                found = sockets[0]
                if self._answers(found.port):
                    said = f"the host's sockets: {found.quote}, where GET {self.health_path} answers"
                    return _Verdict("wrong_port", self._wrong(found.port, where), found.line, said)
        return None

    def _wrong(self, port: int, where: str) -> str:
        return (
            f"listens on port {port}, not on the URL's port {self.port}: {where}; set the port of server.url to "
            f"{port}, or start the server on {self.port}"
        )

    def _answers(self, port: int) -> bool:
        answer = request(self.client, "GET", _with_port(self.base, port) + self.health_path, deadline_s=1.0)
        return answer.status is not None and 200 <= answer.status < 300


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

    def fail(reason: str, what: str, line: str | None = None, said: str = "") -> StartFailed:
        lines = evidence.collect()
        if reason in ("failed", "restarted", "exited") and not any(_TELLING.search(x) for x in lines):
            # journald may not have read the dying process's last lines yet: look once more.
            time.sleep(0.3)
            lines = evidence.collect()
        elapsed = time.monotonic() - started
        if line is not None:  # the line that proves it, quoted whole: it names the address found
            if line not in lines:
                lines.append(line)
            message = f"{service.host.name}: {service.name} {what} (found after {elapsed:.1f} s in {said})"
            return StartFailed(message, evidence=lines, reason=reason)
        telling = _telling_line(lines)
        message = f"{service.host.name}: {service.name} {what} after {elapsed:.1f} s"
        if telling:
            message += f": {telling}"
        return StartFailed(message, evidence=lines, reason=reason)

    with httpx.Client(timeout=http_timeout, headers=headers, follow_redirects=False, trust_env=False) as client:
        ports = _PortCheck(service, base, paths[0], client)
        strikes = 0
        while True:
            poll_started = time.monotonic()
            polls += 1
            known = len(evidence.lines)  # the log lines read before this poll's requests
            refused = False
            if stop is not None and stop.is_set():
                raise fail("stopped", "was not healthy yet when the run was stopped")
            state = service.state()
            if baseline is None:
                baseline = state
            reason = _failure(state, baseline)
            if reason is not None:
                raise fail(reason, _failure_text(reason, state))
            healthy = True
            url, status = "", 0
            for path in paths:
                url = base + path
                answer = request(client, "GET", url, deadline_s=http_timeout, limit=_HEALTH_LIMIT)
                if answer.status is None:
                    exc = answer.error
                    healthy, last_answer = False, f"GET {path}: {type(exc).__name__ if exc else answer.problem}"
                    refused = isinstance(exc, httpx.ConnectError) and _refused(exc)
                    break
                status = answer.status
                if not 200 <= status < 300:
                    healthy, last_answer = False, f"GET {path}: HTTP {status}"
                    break
            elapsed = time.monotonic() - started
            if healthy:
                return HealthReport(elapsed=elapsed, url=url, status_code=status, polls=polls, state=state)
            verdict = ports.verdict(evidence.lines[:known], state) if refused else None
            # A wrong port is final at once; a refusal on the server's own port must be seen twice (a server
            # that is going away closes its listener first). Either way a server that died says so instead.
            strikes = 0 if verdict is None else strikes + (2 if verdict.reason == "wrong_port" else 1)
            if verdict is not None and strikes >= 2:
                now_state = service.state()
                reason = _failure(now_state, baseline)
                if reason is not None:
                    raise fail(reason, _failure_text(reason, now_state))
                raise fail(verdict.reason, verdict.what, verdict.line, verdict.said)
            if elapsed >= timeout:
                raise fail("timeout", f"was not healthy within {timeout:g} s (last answer: {last_answer})")
            if progress is not None or refused:
                evidence.update()
            if progress is not None:
                progress(elapsed, timeout, evidence.last_line)
            # The next poll starts one period after this one started (not after it ended).
            pause = max(0.0, min(delay - (time.monotonic() - poll_started), timeout - elapsed))
            delay = min(delay * 1.6, poll_interval)
            if stop is not None:
                stop.wait(pause)
            else:
                time.sleep(pause)


def wait_for_experiment(
    service: Service,
    base_url: str,
    experiment: Experiment,
    *,
    progress: ProgressCallback | None,
    stop: threading.Event | None,
) -> HealthReport:
    """:func:`wait_until_healthy` as a launch waits for the experiment's server: its health paths, its
    ``server.ready_timeout`` and API key, polled every :data:`HEALTH_POLL_SECONDS`."""
    return wait_until_healthy(
        service,
        base_url,
        experiment.health_paths,
        experiment.server.ready_timeout,
        api_key=experiment.server.api_key_value,
        progress=progress,
        stop=stop,
        poll_interval=HEALTH_POLL_SECONDS,
    )
