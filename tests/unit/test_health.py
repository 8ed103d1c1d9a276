"""wait_until_healthy against a real HTTP server on loopback, with a fake Service whose state the test scripts."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from orchestrator.errors import StartFailed
from orchestrator.hosts import LocalHost
from orchestrator.launchers.health import wait_until_healthy
from orchestrator.services import LogChunk, ServiceState

RUNNING = ServiceState("active", "running", "success", None, 0, 1234, "inv-1")


@dataclass
class FakeService:
    """A Service whose state and log come from lists the test fills; state() pops until one is left."""

    states: list[ServiceState]
    log: list[str] = field(default_factory=list)
    host: LocalHost = field(default_factory=LocalHost)
    name: str = "fake.service"
    start_cursor: str | None = "0"
    state_calls: int = 0

    def state(self) -> ServiceState:
        self.state_calls += 1
        return self.states.pop(0) if len(self.states) > 1 else self.states[0]

    def journal_since(self, cursor: str) -> LogChunk:
        start = int(cursor or 0)
        return LogChunk("".join(line + "\n" for line in self.log[start:]), str(len(self.log)))

    def logs_tail(self, n: int = 50) -> list[str]:
        return self.log[-n:]


class Server:
    """A loopback HTTP server answering ``status`` on every path and recording requests; with ``ready_after``
    N, 503 to its first N requests and 200 from then on (a server that comes up between two polls, whatever
    the machine's speed)."""

    def __init__(self) -> None:
        self.status = 503
        self.ready_after: int | None = None
        self.requests: list[tuple[str, str | None]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                owner.requests.append((self.path, self.headers.get("Authorization")))
                if owner.ready_after is not None and len(owner.requests) > owner.ready_after:
                    owner.status = 200
                self.send_response(owner.status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server() -> Iterator[Server]:
    s = Server()
    try:
        yield s
    finally:
        s.close()


def test_returns_once_every_path_answers(server: Server) -> None:
    service = FakeService([RUNNING])
    server.ready_after = 1  # the first poll finds it loading (a timer of 0.3 s came before the first poll on a busy CI)
    progress: list[tuple[float, float, str]] = []
    service.log.append("loading weights")
    report = wait_until_healthy(
        service, server.url, ["/health", "/v1/models"], 30, api_key="sk-test", progress=lambda *a: progress.append(a)
    )
    assert report.status_code == 200 and report.url.endswith("/v1/models") and report.polls >= 2
    assert ("/health", "Bearer sk-test") in server.requests and ("/v1/models", "Bearer sk-test") in server.requests
    assert progress and progress[-1][1] == 30 and progress[-1][2] == "loading weights"


def test_a_failed_unit_fails_fast_with_the_explaining_lines(server: Server) -> None:
    failed = ServiceState("failed", "failed", "exit-code", 1, 0, None, "inv-1")
    service = FakeService([RUNNING, RUNNING, failed])
    service.log += ["Load weight begin", "Traceback (most recent call last):", '  File "x.py", line 1', "OOM: boom"]
    with pytest.raises(StartFailed) as caught:
        wait_until_healthy(service, server.url, ["/health"], 600)
    error = caught.value
    assert error.reason == "failed"
    assert "Traceback (most recent call last):" in error.evidence
    assert str(error).endswith("OOM: boom") and "fake.service failed to start" in str(error)


@pytest.mark.parametrize(
    ("later", "reason"),
    [
        pytest.param(ServiceState("activating", "auto-restart", "exit-code", 1, 0, None), "failed", id="auto-restart"),
        pytest.param(ServiceState("active", "running", "success", None, 1, 99, "inv-2"), "restarted", id="restarted"),
        pytest.param(ServiceState("inactive", "dead", "success", 0, 0, None), "exited", id="exited"),
    ],
)
def test_failure_reasons(server: Server, later: ServiceState, reason: str) -> None:
    service = FakeService([RUNNING, later])
    with pytest.raises(StartFailed) as caught:
        wait_until_healthy(service, server.url, ["/health"], 600)
    assert caught.value.reason == reason


def test_a_server_answering_while_the_unit_failed_is_not_healthy(server: Server) -> None:
    server.status = 200  # something else answers on the port
    service = FakeService([ServiceState("failed", "failed", "exit-code", 2, 0, None)])
    with pytest.raises(StartFailed):
        wait_until_healthy(service, server.url, ["/health"], 600)
    assert server.requests == []


def test_timeout_names_the_last_answer(server: Server) -> None:
    with pytest.raises(StartFailed, match=r"within 0.4 s \(last answer: GET /health: HTTP 503\)") as caught:
        wait_until_healthy(FakeService([RUNNING]), server.url, ["/health"], 0.4)
    assert caught.value.reason == "timeout"


def test_a_closed_port_is_just_not_ready_yet() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(StartFailed, match="ConnectError"):
        wait_until_healthy(FakeService([RUNNING]), f"http://127.0.0.1:{port}", ["/health"], 0.3)


def test_stop_event_ends_the_wait(server: Server) -> None:
    stop = threading.Event()
    threading.Timer(0.2, stop.set).start()
    with pytest.raises(StartFailed) as caught:
        wait_until_healthy(FakeService([RUNNING]), server.url, ["/health"], 600, stop=stop)
    assert caught.value.reason == "stopped"
