"""The load generator against the real simulator over loopback: the CLI as a user runs it, response metadata,
and the simulator's injected faults (HTTP 500s, a stalled stream, a crash mid-run) counted, never fatal."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.load import LoadSettings, run_load
from tests.timing import scaled

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_sim(*args: str) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    command = [sys.executable, "-m", "orchestrator.sim", "--port", str(port), "--load-seconds", "0", *args]
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + scaled(30)
    while time.monotonic() < deadline and process.poll() is None:
        try:
            with urllib.request.urlopen(url + "/health", timeout=1) as response:
                if response.status == 200:
                    return process, url
        except OSError:
            time.sleep(0.05)
    stop_sim(process)
    raise RuntimeError(f"the simulator did not start: {command}")


def stop_sim(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="module")
def sim() -> Iterator[str]:
    process, url = start_sim("--profile", "tiny", "--algorithm", "linear", "--draft-tokens", "4")
    try:
        yield url
    finally:
        stop_sim(process)


@pytest.fixture
def faulty() -> Iterator[object]:
    started: list[subprocess.Popen[bytes]] = []

    def start(*faults: str) -> str:
        process, url = start_sim("--profile", "tiny", *(f"--fault={f}" for f in faults))
        started.append(process)
        return url

    try:
        yield start
    finally:
        for process in started:
            stop_sim(process)


def specsweep(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "160"}
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=scaled(120),
        env=env,
    )


def test_cli_json_one_object_per_level(sim: str) -> None:
    done = specsweep(
        "load", "--url", sim, "--engine", "sim", "-c", "1,4", "--requests", "8", "--max-tokens", "24", "--json"
    )
    assert done.returncode == 0, done.stderr
    levels = [json.loads(line) for line in done.stdout.splitlines()]
    assert [level["concurrency"] for level in levels] == [1, 4]
    for level in levels:
        assert level["model"] == "sim"  # discovered from /v1/models
        assert level["requests"] == 8
        assert level["errors"] == 0
        assert level["output_tokens"] == 8 * 24
        assert level["output_tok_s"] > 0
        for key in ("ttft_ms", "itl_ms"):
            assert set(level[key]) == {"mean", "p50", "p90", "p99"}
        assert level["spec"]["accept_len"] > 1.0  # a chain of 4 drafts accepts more than the bonus token


def test_cli_table(sim: str) -> None:
    done = specsweep("load", "--url", sim, "-c", "2", "-n", "4", "--max-tokens", "16", "--rate", "50")
    assert done.returncode == 0, done.stderr
    assert "C=2" in done.stdout
    assert "50/s" in done.stdout
    assert "accept" in done.stdout


def test_cli_bad_url_is_one_line_and_an_exit_code() -> None:
    done = specsweep("load", "--url", "localhost-without-scheme", "-n", "1")
    assert done.returncode == 1
    assert done.stderr.strip().count("\n") == 0
    assert "http://host:port" in done.stderr


def test_cli_exits_non_zero_when_nothing_succeeds() -> None:
    done = specsweep("load", "--url", f"http://127.0.0.1:{_free_port()}", "--model", "m", "-n", "2", "--warmup", "0")
    assert done.returncode == 1
    assert "connect" in done.stdout + done.stderr


async def test_native_generate_api_reports_accept_length(sim: str) -> None:
    settings = LoadSettings(url=sim, model="sim", api="generate", concurrency=2, requests=6, max_tokens=40)
    data = (await run_load(settings)).to_dict()
    assert data["errors"] == 0
    assert data["token_sources"] == {"continuous_usage": 6}
    assert data["spec"]["verify_steps"] > 0
    # SGLang's own per-response formula counts the prefill's first token; accept_len leaves it out (engines.md).
    steps = data["spec"]["verify_steps"]
    assert data["spec"]["accept_len_engine"] == pytest.approx(data["output_tokens"] / steps, rel=1e-3)
    assert data["spec"]["accept_len"] == pytest.approx((data["output_tokens"] - 6) / steps, rel=1e-3)


async def test_http_500s_are_counted(faulty) -> None:  # type: ignore[no-untyped-def]
    url = faulty("http-500-rate=0.5")
    data = (await run_load(LoadSettings(url=url, model="sim", concurrency=4, requests=24, max_tokens=16))).to_dict()
    assert data["requests"] == 24
    assert set(data["errors_by_kind"]) == {"http_500"}
    assert 0 < data["errors"] < 24


async def test_a_stalled_stream_is_cut_by_the_idle_timeout(faulty) -> None:  # type: ignore[no-untyped-def]
    url = faulty("stall")
    settings = LoadSettings(url=url, model="sim", concurrency=2, requests=2, warmup=0, max_tokens=32, idle_timeout=0.5)
    data = (await run_load(settings)).to_dict()
    assert data["errors_by_kind"] == {"stall": 2}


async def test_a_server_crash_mid_run_is_counted(faulty) -> None:  # type: ignore[no-untyped-def]
    url = faulty("crash-after=3")
    # The simulator exits 50 ms after its third completed request: 40 requests of 64 tokens outlast that.
    settings = LoadSettings(url=url, model="sim", concurrency=1, requests=40, warmup=0, max_tokens=64)
    data = (await run_load(settings)).to_dict()
    assert data["requests"] == 40
    assert data["completed"] >= 3
    assert data["errors"] >= 20
    assert set(data["errors_by_kind"]) <= {"connect", "reset", "truncated"}


async def test_a_login_page_is_said_to_be_one_not_a_truncated_stream(faulty) -> None:  # type: ignore[no-untyped-def]
    """Issue 40: a 200 ``text/html`` answer (a login form in front of the server) was reported ``truncated``."""
    url = faulty("login-page")
    for stream in (True, False):
        settings = LoadSettings(url=url, model="sim", concurrency=1, requests=2, warmup=0, max_tokens=8, stream=stream)
        result = await run_load(settings)
        assert result.to_dict()["errors_by_kind"] == {"malformed": 2}, stream
        error = result.records[0].error or ""
        assert error.startswith("not an OpenAI-compatible answer: HTTP 200 with Content-Type 'text/html"), error
        assert "it begins '<!DOCTYPE html> <html><head><title>Sign in</title>" in error, error


async def test_a_stream_without_done_on_a_kept_open_connection_ends_at_its_finish_reason(faulty) -> None:  # type: ignore[no-untyped-def]
    """Issue 40: every token and the finish reason came, then no ``[DONE]`` and no end of the body: the request
    waited for its total timeout and failed. Now it is complete, its tokens counted (the usage chunk after the
    finish reason's is read), with a note on each request and a count in the figures."""
    url = faulty("no-done")
    settings = LoadSettings(
        url=url, model="sim", concurrency=2, requests=4, warmup=0, max_tokens=16, ignore_eos=True, total_timeout=20
    )
    result = await run_load(settings)
    data = result.to_dict()
    assert data["errors"] == 0 and data["completed"] == 4, data["errors_by_kind"]
    assert data["output_tokens"] == 4 * 16 and data["finish_reasons"] == {"length": 4}
    assert data["without_done"] == 4
    for record in result.records:
        assert record.note is not None and record.note.startswith("no [DONE]: the stream sent its finish reason")
        assert record.token_source in ("usage", "continuous_usage"), record.token_source
        assert record.e2e is not None and record.e2e < 10  # ended at its last event, not at a timeout
