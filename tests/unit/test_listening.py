"""The engines' listening lines, the health wait's wrong-port verdict, and the engine guess for silent windows."""

from __future__ import annotations

import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from orchestrator.engines.listening import listening_lines, ready_line, url_port
from orchestrator.errors import StartFailed
from orchestrator.launchers.health import wait_until_healthy
from orchestrator.metrics.engine_guess import engine_fit
from tests.unit.test_health import RUNNING, FakeService

DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.mark.parametrize(
    ("line", "host", "port"),
    [
        # uvicorn/server.py _log_started_message, as SGLang's uvicorn.run prints it
        (
            "[2026-05-30 00:39:10] INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)",
            "0.0.0.0",
            30000,
        ),
        ("INFO:     Uvicorn running on https://[::1]:8443 (Press CTRL+C to quit)", "::1", 8443),
        # vllm/entrypoints/openai/api_server.py, three generations of the line
        (
            "(APIServer pid=4609) INFO 12-18 06:01:05 [api_server.py:1945] Starting vLLM API server 0 on http://0.0.0.0:8080",
            "0.0.0.0",
            8080,
        ),
        ("INFO 01-02 03:04:05 [api_server.py:1] Starting vLLM server on http://127.0.0.1:8000", "127.0.0.1", 8000),
        ("INFO 03-27 23:19:15 api_server.py:958] Starting vLLM API server on http://0.0.0.0:8000", "0.0.0.0", 8000),
        # llama.cpp tools/server/server.cpp, vendored (llama-cpp-python 0.3.36) and ggml-org trees
        ("0.12.603.408 I srv  llama_server: listening on http://127.0.0.1:47485", "127.0.0.1", 47485),
        ("main: server is listening on http://127.0.0.1:8080 - starting the main loop", "127.0.0.1", 8080),
    ],
)
def test_every_engine_listening_line_names_its_address(line: str, host: str, port: int) -> None:
    (found,) = listening_lines([line])
    assert (found.host, found.port) == (host, port)
    assert found.quote in line and str(port) in found.quote


def test_lines_that_only_mention_a_port_are_not_listening() -> None:
    lines = [
        "[2026-05-30] server_args=ServerArgs(model_path='m', host='127.0.0.1', port=30000, nccl_port=None)",
        "Serving HTTP on 127.0.0.1 port 8000 (http://127.0.0.1:8000/) ...",
        "GET http://127.0.0.1:8000/health 200",
    ]
    assert listening_lines(lines) == []
    assert ready_line(lines) is None
    assert (
        ready_line(["[x] The server is fired up and ready to roll!"]) == "[x] The server is fired up and ready to roll!"
    )


def test_the_captured_llama_server_logs_are_read() -> None:
    text = (DATA / "llamacpp" / "ar.log").read_text()
    assert [x.port for x in listening_lines(text.splitlines())] == [47485]


def test_url_port() -> None:
    assert url_port("http://gpu-box:30001") == 30001
    assert url_port("https://gpu-box") == 443 and url_port("http://[::1]:9") == 9


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_wrong_port_fails_within_a_poll_naming_the_port() -> None:
    wrong = _free_port()
    service = FakeService(
        [RUNNING], log=["Loading", "INFO:     Uvicorn running on http://0.0.0.0:18300 (Press CTRL+C to quit)"]
    )
    t0 = time.monotonic()
    with pytest.raises(StartFailed) as caught:
        wait_until_healthy(service, f"http://127.0.0.1:{wrong}", ["/health"], 60, poll_interval=0.2)  # type: ignore[arg-type]
    assert time.monotonic() - t0 < 3
    assert caught.value.reason == "wrong_port"
    message = str(caught.value)
    assert f"listens on port 18300, not on the URL's port {wrong}" in message
    assert "'Uvicorn running on http://0.0.0.0:18300'" in message
    assert any("Uvicorn running on" in line for line in caught.value.evidence)


def test_a_port_mapped_server_that_logs_its_own_port_is_waited_for() -> None:
    """Refused while it loads, then it binds (inside a container, port 8000, mapped to the URL's) and logs its
    own port: the requests made before the line was read do not count, the next one is answered."""
    port = _free_port()
    service = FakeService([RUNNING])
    servers: list[ThreadingHTTPServer] = []

    class Ok(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    def start_late() -> None:
        time.sleep(0.4)
        httpd = ThreadingHTTPServer(("127.0.0.1", port), Ok)
        servers.append(httpd)
        threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True).start()
        service.log.append("INFO:     Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)")

    starter = threading.Thread(target=start_late)
    starter.start()
    try:
        report = wait_until_healthy(service, f"http://127.0.0.1:{port}", ["/health"], 20, poll_interval=0.1)  # type: ignore[arg-type]
        assert report.status_code == 200
    finally:
        starter.join()
        for httpd in servers:
            httpd.shutdown()
            httpd.server_close()


def test_a_refusal_on_the_servers_own_address_is_not_a_wrong_port() -> None:
    """Listening where the URL points but refusing (going away): no verdict of ours, the timeout says it."""
    port = _free_port()
    service = FakeService([RUNNING], log=[f"INFO:     Uvicorn running on http://0.0.0.0:{port} (Press CTRL+C to quit)"])
    with pytest.raises(StartFailed) as caught:
        wait_until_healthy(service, f"http://127.0.0.1:{port}", ["/health"], 1.0, poll_interval=0.1)  # type: ignore[arg-type]
    assert caught.value.reason == "timeout"


@pytest.mark.parametrize(
    ("engine", "path", "likely"),
    [
        ("vllm", "logs/sglang_tp4_short_iso.log", "sglang"),
        ("sim", "logs/vllm_v1.log", "vllm"),
        ("sglang", "llamacpp/ngram-simple-n3-m16.log", "llamacpp"),
    ],
)
def test_a_silent_parser_names_the_engine_that_reads_the_log(engine: str, path: str, likely: str) -> None:
    fit = engine_fit(engine, (DATA / path).read_text())
    assert fit.silent and fit.likely == likely and fit.likely_matched > 0 and fit.examples
    warning = fit.describe()
    assert warning is not None and f"the server looks like {likely} (set engine: {likely})" in warning


def test_the_right_engine_is_not_silent() -> None:
    assert not engine_fit("sglang", (DATA / "logs" / "sglang_tp4_short_iso.log").read_text()).silent
    assert engine_fit("sglang", "").describe() is None
    fit = engine_fit("vllm", "just\nsome\nlines\n")
    assert fit.silent and fit.likely is None
    assert "no other engine's parser reads them either" in (fit.describe() or "")
