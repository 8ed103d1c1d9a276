"""service: {kind: none}: the schema (one configuration, nothing to fill in) and ExistingService over a real
loopback HTTP server and this machine's shell; and validation reporting every error of a file."""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator.errors import ConfigError, StartFailed
from orchestrator.experiment.schema import load_experiment
from orchestrator.experiment.service import ExistingServiceSpec
from orchestrator.experiment.validation import problems_of
from orchestrator.hosts import LocalHost
from orchestrator.plan.deployments import build_plan
from orchestrator.services import ExistingService, make_service


class _Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"{}"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Health)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def _closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _write(path: Path, doc: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _doc(url: str, **service: Any) -> dict[str, Any]:
    return {
        "name": "existing",
        "host": "local",
        "service": {"kind": "none", **service},
        "server": {"url": url, "model": "sim"},
        "engine": "sim",
        "load": {"concurrency": [1, 4], "requests": 4},
    }


def test_kind_none_is_one_configuration_with_nothing_to_render(tmp_path: Path) -> None:
    experiment = load_experiment(_write(tmp_path / "e.yaml", _doc("http://127.0.0.1:1")))
    assert isinstance(experiment.service, ExistingServiceSpec)
    plan = build_plan(experiment)
    assert plan.restarts == 1 and plan.load_point_count == 2
    (deployment,) = plan.deployments
    assert deployment.variant == "current" and deployment.command is None and deployment.environment == {}


def test_kind_none_refuses_what_it_could_not_apply(tmp_path: Path) -> None:
    doc = _doc("http://127.0.0.1:1", unit="sglang")
    doc["variants"] = {"eagle": {"spec_args": "--speculative-algorithm EAGLE", "matrix": {"k": [1, 2]}}, "other": {}}
    with pytest.raises(ConfigError) as caught:
        load_experiment(_write(tmp_path / "e.yaml", doc))
    messages = [p.message for p in problems_of(caught.value)]
    assert any("define one variant" in m for m in messages)
    assert any("'spec_args'" in m and "kind none never changes" in m for m in messages)
    assert any("'matrix'" in m for m in messages)
    keys = {p.key for p in problems_of(caught.value)}
    assert {"variants", "variants.eagle.spec_args", "variants.eagle.matrix"} <= keys
    doc = _doc("http://127.0.0.1:1", command="x")
    with pytest.raises(ConfigError, match=r"unknown key 'command' \(valid keys: kind, unit, log_file\)"):
        load_experiment(_write(tmp_path / "f.yaml", doc))


def test_validation_reports_every_error_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(
        'name: bad\nhost: local\nservice:\n  kind: process\n  command: "{python} -m x --port 1 {spec_args}"\n'
        'server: {url: "http://127.0.0.1:1", model: sim}\nengine: sim\nvariants:\n'
        '  autoregressive: {spec_args: "--algorithm ar"}\n'
        '  ddtree: {spec_args: "--budget {budget}", matrix: {budegt: [7]}}\n'
        '  linear: {spec_arg: "x"}\nbaselines: [autoregresive]\nload: {concurrency: [1], requests: 3}\n'
    )
    with pytest.raises(ConfigError) as caught:
        load_experiment(path)
    problems = problems_of(caught.value)
    assert [(p.line, p.key) for p in sorted(problems, key=lambda p: p.line or 0)] == [
        (10, "variants.ddtree.matrix.budegt"),
        (11, "variants.linear.spec_arg"),
        (12, "baselines.0"),
    ]
    assert "(and 2 more errors)" in str(caught.value)
    # Schema errors too: every one, not only the first.
    path.write_text(path.read_text().replace("requests: 3", "requets: 3, max_tokens: many"))
    with pytest.raises(ConfigError) as caught:
        load_experiment(path)
    # Schema errors and the semantic ones beside them, all at once (issue 50: validate reports every error).
    assert {p.key for p in problems_of(caught.value)} == {
        "load.requets",
        "load.max_tokens",
        "variants.ddtree.matrix.budegt",
        "variants.linear.spec_arg",
        "baselines.0",
    }


def test_existing_service_measures_a_running_server_and_changes_nothing(tmp_path: Path, server: str) -> None:
    log = tmp_path / "server.log"
    log.write_text("before\n")
    experiment = load_experiment(_write(tmp_path / "e.yaml", _doc(server, log_file=str(log))))
    service = make_service(experiment, LocalHost(), state_dir=str(tmp_path / "state"))
    assert isinstance(service, ExistingService) and service.url == server
    service.lock("test")
    try:
        assert service.recover() is None and service.find_leftovers() is None
        (deployment,) = build_plan(experiment).deployments
        service.apply(deployment)  # nothing deployed: the server answers
        state = service.state()
        assert state.running and state.active_state == "active"
        cursor = service.journal_cursor()
        with open(log, "a") as handle:
            handle.write("during the point\n")
        assert service.journal_since(cursor) == "during the point\n"
        assert service.logs_tail(5) == ["before", "during the point"]
        assert service.restore() is False
    finally:
        service.unlock()
    assert log.read_text() == "before\nduring the point\n"


def test_a_server_that_does_not_answer_fails_at_once(tmp_path: Path) -> None:
    experiment = load_experiment(_write(tmp_path / "e.yaml", _doc(f"http://127.0.0.1:{_closed_port()}")))
    service = make_service(experiment, LocalHost(), state_dir=str(tmp_path / "state"))
    (deployment,) = build_plan(experiment).deployments
    started = time.monotonic()
    with pytest.raises(StartFailed, match="kind none measures a server that is already running") as caught:
        service.apply(deployment)
    assert caught.value.reason == "not_running" and time.monotonic() - started < 5
    state = service.state()
    assert not state.running and state.failed
    assert service.journal_since("0") == "" and service.logs_tail() == []  # no log source: no lines
