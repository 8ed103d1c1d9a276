"""The simulator as a process: ``python -m orchestrator.sim`` and ``specsweep sim``, signals, exit codes, and
the faults that end the process (fail-start, crash-after). Loopback only; every process is stopped by PID."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from orchestrator.cli.commands import sim as sim_command
from orchestrator.errors import SpecsweepError
from tests.timing import scaled

pytestmark = pytest.mark.timeout(60)

ROOT = Path(__file__).resolve().parents[2]


class SimProcess:
    """A simulator subprocess whose stdout is read by a thread (so a full pipe never blocks it)."""

    def __init__(self, argv: list[str], command: list[str] | None = None) -> None:
        cmd = command or [sys.executable, "-m", "orchestrator.sim"]
        self.proc = subprocess.Popen(
            [*cmd, "--profile", "tiny", "--host", "127.0.0.1", "--port", "0", *argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            text=True,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, pattern: str, timeout: float = 15) -> re.Match[str]:
        deadline = time.monotonic() + scaled(timeout)
        while time.monotonic() < deadline:
            for line in list(self.lines):
                match = re.search(pattern, line)
                if match:
                    return match
            if self.proc.poll() is not None and not self._reader.is_alive():
                break
            time.sleep(0.02)
        raise AssertionError(f"{pattern!r} never appeared; output:\n" + "\n".join(self.lines))

    @property
    def url(self) -> str:
        return self.wait_for(r"Uvicorn running on (http://\S+)").group(1)

    def wait(self, timeout: float = 10) -> int:
        code = self.proc.wait(timeout=scaled(timeout))
        self._reader.join(timeout=scaled(5))
        return code

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=scaled(10))


@pytest.fixture
def sim_process() -> Iterator[Callable[..., SimProcess]]:
    started: list[SimProcess] = []

    def start(*argv: str, command: list[str] | None = None) -> SimProcess:
        process = SimProcess(list(argv), command)
        started.append(process)
        return process

    try:
        yield start
    finally:
        for process in started:
            process.stop()


def http(url: str, body: dict[str, object] | None = None, timeout: float = 10) -> tuple[int, bytes]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


CHAT = {"model": "sim", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 64}


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_serves_then_exits_cleanly_on_a_signal(sim_process: Callable[..., SimProcess], sig: signal.Signals) -> None:
    sim = sim_process("--algorithm", "linear", "--load-seconds", "0")
    url = sim.url
    sim.wait_for("The server is fired up and ready to roll!")
    status, body = http(url + "/v1/chat/completions", CHAT)
    assert status == 200
    assert json.loads(body)["usage"]["completion_tokens"] == 64
    sim.proc.send_signal(sig)
    assert sim.wait(timeout=scaled(10)) == 0


def test_loading_logs_progress_and_answers_503(sim_process: Callable[..., SimProcess]) -> None:
    sim = sim_process("--load-seconds", "1.5")
    url = sim.url
    sim.wait_for("Load weight begin")
    assert http(url + "/health")[0] == 503
    sim.wait_for("The server is fired up and ready to roll!")
    assert http(url + "/health")[0] == 200
    assert any("Loading safetensors checkpoint shards" in line for line in sim.lines)


def test_fault_fail_start_prints_a_traceback_and_exits_non_zero(sim_process: Callable[..., SimProcess]) -> None:
    sim = sim_process("--load-seconds", "0.2", "--fault", "fail-start")
    assert sim.wait() != 0
    assert "Traceback (most recent call last):" in "\n".join(sim.lines)
    assert any(re.match(r"\w+(\.\w+)*Error: ", line) for line in sim.lines)
    assert not any("ready to roll" in line for line in sim.lines)


def test_fault_crash_after_n_requests(sim_process: Callable[..., SimProcess]) -> None:
    sim = sim_process("--fault", "crash-after=2", "--load-seconds", "0")
    url = sim.url
    sim.wait_for("ready to roll")
    for _ in range(2):
        assert http(url + "/v1/chat/completions", CHAT)[0] == 200
    assert sim.wait() != 0
    assert any("Scheduler hit an exception" in line for line in sim.lines)
    with pytest.raises(OSError):
        http(url + "/health", timeout=2)


def test_port_in_use_is_one_error_line(sim_process: Callable[..., SimProcess]) -> None:
    first = sim_process("--load-seconds", "0")
    port = first.url.rsplit(":", 1)[1]
    second = subprocess.run(
        [sys.executable, "-m", "orchestrator.sim", "--profile", "tiny", "--port", port],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=scaled(30),
    )
    assert second.returncode == 1
    assert second.stderr.startswith("sim: error: cannot listen on 127.0.0.1:")


def _app() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        """specsweep (test shell)."""

    sim_command.register(app)
    return app


def test_specsweep_sim_passes_flags_through() -> None:
    result = CliRunner().invoke(_app(), ["sim", "--help"])
    assert result.exit_code == 0
    # The short help shows the flags a first run needs; the rest is in docs/simulator.md (and the simulator's own
    # --help), and every one of them reaches the simulator's parser the same way.
    for flag in ("--algorithm", "--draft-tokens", "--budget", "--topk", "--profile", "--fault", "--seed",
                 "--load-seconds", "--model"):  # fmt: skip
        assert flag in result.output
    docs = (Path(__file__).resolve().parents[2] / "docs" / "simulator.md").read_text()
    for flag in ("--decode-log-interval", "--ttft-ms", "--itl-ms", "--speculative-config"):
        assert f"`{flag}`" in docs and flag not in result.output


def test_specsweep_sim_turns_a_failed_start_into_our_error() -> None:
    result = CliRunner().invoke(
        _app(), ["sim", "--profile", "tiny", "--port", "0", "--load-seconds", "0", "--fault", "fail-start"]
    )
    assert isinstance(result.exception, SpecsweepError)
    assert "exit code 1" in str(result.exception)
    assert "Traceback (most recent call last):" in result.output


def test_specsweep_sim_rejects_an_unknown_fault() -> None:
    result = CliRunner().invoke(_app(), ["sim", "--fault", "meteor-strike"])
    assert isinstance(result.exception, SpecsweepError)
    assert "unknown fault 'meteor-strike'" in str(result.exception)
