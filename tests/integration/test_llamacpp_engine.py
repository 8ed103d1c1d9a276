"""The facts about a real llama-server that specsweep's llama.cpp parsers rely on.

Runs the llama-server built by scripts/get-llama-server.sh (skipped when it is not built) on a free
loopback port, with n-gram speculation, and checks: the per-request `draft acceptance` log line,
the Prometheus speculative counters and their growth, and `timings.draft_n` in responses, and that
the three agree with each other exactly. Also checks what a server without speculation reports.
See docs/llamacpp.md for the formats.
"""

from __future__ import annotations

import json
import pathlib
import re
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from tests.integration.llamacpp_support import paths
from tests.timing import scaled

# `slot print_timing: id  3 | task 1 | draft acceptance = 0.64706 (   66 accepted /   102 generated), mean len =  3.54`
DRAFT_ACCEPTANCE = re.compile(
    r"slot print_timing: id +(?P<slot>\d+) \| task (?P<task>\d+) \| draft acceptance = (?P<rate>[\d.]+)"
    r" \( *(?P<accepted>\d+) accepted / *(?P<generated>\d+) generated\), mean len = +(?P<mean>[\d.]+)"
)
EVAL_TIME = re.compile(r"slot print_timing: id +\d+ \| task (?P<task>\d+) \| +eval time = ")
SPEC_COUNTERS = (
    "llamacpp:spec_decode_num_drafts_total",
    "llamacpp:spec_decode_num_draft_tokens_total",
    "llamacpp:spec_decode_num_accepted_tokens_total",
)
NGRAM_ARGS = ["--spec-type", "ngram-simple", "--spec-ngram-simple-size-n", "3", "--spec-ngram-simple-size-m", "16"]
# A code prompt: the completion repeats its own identifiers, so n-gram lookup finds drafts.
PROMPT = "Write a Python quicksort with comments.\n\n```python\n"
MAX_TOKENS = 64
# Generous: the machine is shared, and a loaded CPU slows llama-server a lot. Not a speed check.
READY_TIMEOUT_S = 120.0
REQUEST_TIMEOUT_S = 300.0


pytestmark = pytest.mark.llamacpp  # skipped, with the reason, where llama-server is not built (tests/conftest.py)


@dataclass
class Server:
    base_url: str
    log_path: pathlib.Path

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def metrics(self) -> dict[str, float]:
        resp = httpx.get(f"{self.base_url}/metrics", timeout=30)
        resp.raise_for_status()
        return parse_prometheus(resp.text)

    def complete(self, prompt: str = PROMPT, **extra: object) -> httpx.Response:
        body = {"prompt": prompt, "max_tokens": MAX_TOKENS, "temperature": 0, **extra}
        return httpx.post(f"{self.base_url}/v1/completions", json=body, timeout=REQUEST_TIMEOUT_S)

    def wait_for_log(self, pattern: re.Pattern[str], task: int) -> re.Match[str]:
        """The line for `task`: it is written right around the time the response is sent."""
        deadline = time.monotonic() + scaled(30)
        while True:
            for match in pattern.finditer(self.log_text()):
                if int(match["task"]) == task:
                    return match
            if time.monotonic() > deadline:
                raise AssertionError(f"no {pattern.pattern!r} line for task {task}:\n{self.log_text()}")
            time.sleep(0.05)


def parse_prometheus(text: str) -> dict[str, float]:
    """Sample name (with labels, as written) -> value; enough for llama-server's flat exposition."""
    samples: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            samples[name] = float(value)
    return samples


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start_server(tmp_dir: pathlib.Path, extra_args: list[str]) -> Iterator[Server]:
    binary, model = paths()
    port = _free_port()
    log_path = tmp_dir / "llama-server.log"
    # One thread: on a shared 2-core machine, two spinning compute threads slow to a crawl when
    # another process takes a core, and these checks do not need speed.
    cmd = [binary, "-m", model, "--host", "127.0.0.1", "--port", str(port), "--metrics", "-np", "4"]
    cmd += ["-t", "1", "-c", "8192", *extra_args]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    server = Server(f"http://127.0.0.1:{port}", log_path)
    try:
        deadline = time.monotonic() + scaled(READY_TIMEOUT_S)
        while True:
            if proc.poll() is not None:
                pytest.fail(f"llama-server exited with {proc.returncode}:\n{server.log_text()}")
            try:
                if httpx.get(f"{server.base_url}/health", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"llama-server not healthy after {READY_TIMEOUT_S} s:\n{server.log_text()}")
            time.sleep(0.1)
        yield server
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=scaled(30))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def ngram_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    yield from _start_server(tmp_path_factory.mktemp("llama-ngram"), NGRAM_ARGS)


@pytest.fixture(scope="module")
def plain_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    yield from _start_server(tmp_path_factory.mktemp("llama-plain"), [])


def test_health_answers_ok(ngram_server: Server) -> None:
    resp = httpx.get(f"{ngram_server.base_url}/health", timeout=10)
    assert resp.status_code == 200
    assert resp.json() == {"status": "ok"}


def test_speculative_counters_are_exposed_from_the_start(ngram_server: Server) -> None:
    samples = ngram_server.metrics()
    for name in SPEC_COUNTERS:
        assert name in samples


def test_log_line_counters_and_timings_agree_for_one_request(ngram_server: Server) -> None:
    before = ngram_server.metrics()
    resp = ngram_server.complete()
    resp.raise_for_status()
    after = ngram_server.metrics()
    body = resp.json()
    timings = body["timings"]

    # timings: drafted and accepted tokens of this request
    assert timings["predicted_n"] == body["usage"]["completion_tokens"]
    assert timings["draft_n"] > 0, "n-gram lookup on a code prompt should draft something"
    assert 0 <= timings["draft_n_accepted"] <= timings["draft_n"]

    # /metrics: the counters grew by exactly this request's figures (the fixture serves one test at a time)
    delta = {name: after[name] - before[name] for name in SPEC_COUNTERS}
    assert delta["llamacpp:spec_decode_num_draft_tokens_total"] == timings["draft_n"]
    assert delta["llamacpp:spec_decode_num_accepted_tokens_total"] == timings["draft_n_accepted"]
    steps = delta["llamacpp:spec_decode_num_drafts_total"]
    assert steps > 0
    per_pos = [v for k, v in after.items() if k.startswith("llamacpp:spec_decode_num_accepted_tokens_per_pos")]
    assert per_pos, "the per-position counter appears once a draft was verified"

    # the log: one `draft acceptance` line per request, after its `eval time` line, same figures
    task = int(ngram_server.wait_for_log(EVAL_TIME, _last_task(ngram_server))["task"])
    line = ngram_server.wait_for_log(DRAFT_ACCEPTANCE, task)
    assert int(line["accepted"]) == timings["draft_n_accepted"]
    assert int(line["generated"]) == timings["draft_n"]
    assert float(line["rate"]) == pytest.approx(timings["draft_n_accepted"] / timings["draft_n"], abs=1e-5)
    # mean len = 1 + accepted / verification steps, the same steps /metrics counts
    assert float(line["mean"]) == pytest.approx(1 + timings["draft_n_accepted"] / steps, abs=0.006)


def test_streamed_response_carries_timings_in_its_last_chunk(ngram_server: Server) -> None:
    body = {"prompt": PROMPT, "max_tokens": MAX_TOKENS, "temperature": 0, "stream": True}
    events: list[dict[str, object]] = []
    done = False
    with httpx.stream("POST", f"{ngram_server.base_url}/v1/completions", json=body, timeout=REQUEST_TIMEOUT_S) as resp:
        resp.raise_for_status()
        for line in resp.iter_lines():
            if line == "data: [DONE]":
                done = True
            elif line.startswith("data: "):
                events.append(json.loads(line.removeprefix("data: ")))
    assert done
    with_timings = [e for e in events if "timings" in e]
    assert with_timings == [events[-1]], "only the final chunk carries timings"
    timings = events[-1]["timings"]
    assert isinstance(timings, dict)
    assert timings["draft_n"] >= timings["draft_n_accepted"] >= 0
    assert timings["draft_n"] > 0


def test_without_speculation_there_are_no_draft_figures(plain_server: Server) -> None:
    before = plain_server.metrics()
    resp = plain_server.complete(max_tokens=16)
    resp.raise_for_status()
    after = plain_server.metrics()
    timings = resp.json()["timings"]
    assert timings["predicted_n"] == 16
    # absent, not zero: parsers must treat a missing draft_n as "no speculation"
    assert "draft_n" not in timings
    assert "draft_n_accepted" not in timings
    for name in SPEC_COUNTERS:
        assert after[name] == before[name] == 0
    task = int(plain_server.wait_for_log(EVAL_TIME, _last_task(plain_server))["task"])
    assert not [m for m in DRAFT_ACCEPTANCE.finditer(plain_server.log_text()) if int(m["task"]) == task]


def _last_task(server: Server) -> int:
    """The id of the newest task the server launched (the request just sent)."""
    deadline = time.monotonic() + scaled(30)
    while True:
        tasks = [int(t) for t in re.findall(r"launch_slot_: id +\d+ \| task (\d+) \|", server.log_text())]
        if tasks:
            return tasks[-1]
        if time.monotonic() > deadline:
            raise AssertionError(f"no launch_slot_ line:\n{server.log_text()}")
        time.sleep(0.05)
