"""Fakes of the runner's seams, for unit tests of the sweep loop and of measuring a point.

:class:`FakeLauncher` gives :class:`FakeSlot` s whose servers (:class:`FakeServer`) log SGLang-style
``Decode batch`` lines while a fake load runs; :func:`fake_tools` is a :class:`~orchestrator.sweep.measure.Tools`
whose load returns client figures without a socket. A script (``script``) says what a slot does for a
deployment: ``"ok"``, ``"fail"`` (never healthy), ``"error"`` (cannot be applied), ``"die"`` (dies during
its first point, then is fine once launched again).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from orchestrator.errors import ServiceError, StartFailed
from orchestrator.experiment.schema import Experiment, load_experiment
from orchestrator.launchers.base import Launcher, RunningServer, Slot
from orchestrator.plan.deployments import Deployment
from orchestrator.services.base import LogChunk
from orchestrator.sweep.measure import Tools

DECODE = (
    "[2026-05-30 00:39:1{i} TP0] Decode batch, #running-req: 1, #token: 1234, token usage: 0.01, "
    "accept len: {accept:.2f}, accept rate: 0.63, cuda graph: True, gen throughput (token/s): 86.12, #queue-req: 0,"
)

EXPERIMENT = """\
name: fake
{hosts}
service:
  kind: process
  command: "/opt/server --port 9000 {{spec_args}}"
server: {{url: "http://{{host}}:9000", expected_load_time: 10s}}
engine: sim
variants:
  autoregressive: {{spec_args: "--algorithm ar"}}
  linear: {{spec_args: "--algorithm linear"}}
  ddtree:
    spec_args: "--algorithm ddtree --budget {{budget}}"
    matrix: {{budget: [7, 16]}}
baselines: [autoregressive, linear]
load: {{concurrency: [1, 4], requests: 8, max_tokens: 32, warmup: {warmup}}}
{extra}
"""


def make_experiment(tmp_path: Path, *, hosts: str = "host: local", warmup: int = 0, extra: str = "") -> Experiment:
    path = tmp_path / "fake.yaml"
    path.write_text(EXPERIMENT.format(hosts=hosts, warmup=warmup, extra=extra))
    return load_experiment(path)


class FakeLogs:
    """A log by cursor: a list of lines, the cursor an index into it."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.lock = threading.Lock()

    def log(self, line: str) -> None:
        with self.lock:
            self.lines.append(line)

    def journal_cursor(self) -> str:
        with self.lock:
            return str(len(self.lines))

    def journal_since(self, cursor: str) -> LogChunk:
        with self.lock:
            text = "".join(line + "\n" for line in self.lines[int(cursor) :])
            return LogChunk(text, str(len(self.lines)))

    def logs_tail(self, n: int = 50) -> list[str]:
        with self.lock:
            return self.lines[-n:]


class FakeServer(RunningServer):
    def __init__(self, slot: FakeSlot, deployment: Deployment, url: str) -> None:
        self.slot = slot
        self.deployment = deployment
        self.url = url
        self.up = True
        self.released = False

    @property
    def logs(self) -> FakeLogs:
        return self.slot.logs

    def alive(self) -> bool:
        return self.up

    def evidence(self, lines: int = 40) -> list[str]:
        return self.slot.logs.logs_tail(lines)

    def release(self) -> None:
        self.released = True


class FakeSlot(Slot):
    """A slot that launches fake servers; ``script(deployment, attempt)`` says how each launch goes."""

    def __init__(
        self,
        name: str,
        *,
        script: Callable[[Deployment, int], str] | None = None,
        url: str | None = None,
        launch_seconds: float = 0.0,
        restore_error: str | None = None,
    ) -> None:
        self.name = name
        self.url = url or f"http://{name}:9000"
        self.script = script or (lambda _d, _a: "ok")
        self.launch_seconds = launch_seconds
        self.restore_error = restore_error
        self.logs = FakeLogs()
        self.opened = 0
        self.closed = 0
        self.launches: list[str] = []
        self.server: FakeServer | None = None
        self._attempts: dict[str, int] = {}
        self.busy = threading.Lock()
        self.events: list[tuple[str, str, float]] = []

    def open(self, recovered: Callable[[str], None]) -> None:
        self.opened += 1

    def launch(self, deployment: Deployment, *, progress: Any, stop: threading.Event) -> FakeServer:
        if not self.busy.acquire(blocking=False):
            raise AssertionError(f"{self.name}: two deployments at once on one slot")
        try:
            attempt = self._attempts[deployment.id] = self._attempts.get(deployment.id, 0) + 1
            self.launches.append(deployment.label)
            self.events.append(("launch", deployment.label, time.monotonic()))
            if self.launch_seconds:
                time.sleep(self.launch_seconds)
            action = self.script(deployment, attempt)
            self.logs.log(f"starting {deployment.command}")
            if action == "fail":
                self.logs.log("Traceback (most recent call last):")
                self.logs.log("RuntimeError: CUDA out of memory")
                raise StartFailed(
                    f"{self.name}: failed to start (failed, exit-code, status 1): RuntimeError: CUDA out of memory",
                    evidence=self.logs.logs_tail(5),
                    reason="failed",
                )
            if action == "error":
                raise ServiceError(f"{self.name}: cannot write the configuration")
            server = FakeServer(self, deployment, self.url)
            server.dies = action == "die"  # type: ignore[attr-defined]
            self.server = server
            return server
        finally:
            self.busy.release()

    def evidence(self, lines: int = 40) -> list[str]:
        return self.logs.logs_tail(lines)

    def close(self) -> bool:
        self.closed += 1
        if self.restore_error:
            raise ServiceError(self.restore_error)
        return self.opened > 0


class FakeLauncher(Launcher):
    kind = "fake"

    def __init__(self, *slots: FakeSlot) -> None:
        self._slots = list(slots)

    def slots(self) -> list[FakeSlot]:
        return list(self._slots)


def fake_tools(
    slots: list[FakeSlot] | None = None,
    *,
    accept: float = 3.0,
    point_seconds: float = 0.0,
    all_fail: Callable[[Any], bool] | None = None,
    on_load: Callable[[Any], None] | None = None,
) -> Tools:
    """Tools whose load logs three decode lines on the slot serving the URL (the first is the cut window's
    edge) and returns client figures; a server marked ``dies`` stops during the load."""
    by_url = {slot.url: slot for slot in slots or []}

    def load(settings: Any, stop: threading.Event, progress: Any) -> dict[str, Any]:
        if on_load is not None:
            on_load(settings)
        slot = by_url.get(settings.url)
        if point_seconds:
            time.sleep(point_seconds)
        if slot is not None and slot.server is not None:
            for i, value in enumerate((accept + 1, accept - 0.5, accept + 0.5)):
                slot.logs.log(DECODE.format(i=i, accept=value))
            if progress is not None and getattr(slot.server, "dies", False):  # a point (the warm-up has none)
                slot.server.up = False
        requests = int(settings.requests or 1)
        errors = requests if all_fail is not None and all_fail(settings) else 0
        return {
            "requests": requests,
            "errors": errors,
            "errors_by_kind": {"http_500": errors} if errors else {},
            "output_tok_s": 0.0 if errors else 100.0 * settings.concurrency,
            "partial": stop.is_set(),
            "spec": {},
        }

    class NoSampler:
        def finish(self) -> list[str]:
            return []

    def probe(*args: Any, stop: threading.Event | None = None, **kwargs: Any) -> list[Any]:
        """One answer, as a server that answered the probe (none once a stop came: a probe cut short)."""
        from orchestrator.sweep.lossless import Answer

        if stop is not None and stop.is_set():
            return []
        return [Answer(prompt_index=0, prompt_sha256="0", run=1, text="a")]

    return Tools(
        load=load,
        scrape=lambda url, path, key: None,
        get=lambda url, path, key: (None, None),
        sampler=lambda url, path, key: NoSampler(),
        probe=probe,
    )
