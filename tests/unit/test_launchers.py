"""The launchers (orchestrator/launchers/): the interface, which launcher an experiment gets, and the host
slot's open/launch/close over a fake host and service."""

from __future__ import annotations

import http.server
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest

from orchestrator.engines.controlplane import Answer
from orchestrator.errors import HostLockedError, ServiceError, StartFailed
from orchestrator.experiment.schema import load_experiment
from orchestrator.launchers import (
    HostServer,
    HostSlot,
    Launcher,
    LocalLauncher,
    RunningServer,
    Slot,
    SSHPoolLauncher,
    launcher_for,
)
from orchestrator.launchers import health as health_module
from orchestrator.launchers import hosts as hosts_module
from orchestrator.plan.deployments import build_plan
from orchestrator.services.base import LogChunk, ServiceState
from tests.unit.launch_fakes import FakeLauncher, FakeSlot, make_experiment


class FakeHost:
    def __init__(self) -> None:
        self.closed = False

    def close(self) -> None:
        self.closed = True


class FakeService:
    def __init__(self, *, running: bool = False, leftovers: str | None = None, locked_by: str | None = None) -> None:
        self.calls: list[str] = []
        self.running = running
        self.leftovers = leftovers
        self.locked_by = locked_by
        self.restore_error: str | None = None

    def lock(self, label: str, *, break_lock: bool = False) -> None:
        self.calls.append(f"lock {label}")
        if self.locked_by and not break_lock:
            raise HostLockedError(f"held by {self.locked_by}")

    def unlock(self) -> None:
        self.calls.append("unlock")

    def recover(self) -> str | None:
        self.calls.append("recover")
        return self.leftovers

    def state(self) -> ServiceState:
        return ServiceState("active", "running", main_pid=42) if self.running else ServiceState("inactive")

    def apply(self, deployment: Any) -> None:
        self.calls.append(f"apply {deployment.label}")
        self.running = True

    def restore(self) -> bool:
        self.calls.append("restore")
        if self.restore_error:
            raise ServiceError(self.restore_error)
        return True

    def journal_cursor(self) -> str:
        return "0"

    def journal_since(self, cursor: str) -> LogChunk:
        return LogChunk("", "0")

    def logs_tail(self, n: int = 50) -> list[str]:
        return ["last line"]


@pytest.fixture
def fakes(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    made: dict[str, Any] = {"service": FakeService(), "host": FakeHost(), "waits": []}
    monkeypatch.setattr(hosts_module, "connect_host", lambda spec: made["host"])
    monkeypatch.setattr(hosts_module, "make_service", lambda exp, host: made["service"])

    def wait(service: Any, url: str, paths: Any, timeout: float, **kwargs: Any) -> None:
        made["waits"].append((url, list(paths), timeout, kwargs["poll_interval"]))
        if made.get("unhealthy"):
            raise StartFailed("never healthy", evidence=["boom"], reason="timeout")

    monkeypatch.setattr(health_module, "wait_until_healthy", wait)  # what wait_for_experiment calls
    monkeypatch.setattr(hosts_module.httpx, "get", _refused)
    return made


def _refused(url: str, **kwargs: Any) -> Any:
    raise httpx.ConnectError("refused")


def test_the_launchers_and_fakes_satisfy_the_interface(tmp_path: Path) -> None:
    exp = make_experiment(tmp_path)
    launcher = launcher_for(exp, lock_label="fake run")
    assert isinstance(launcher, Launcher) and isinstance(launcher, LocalLauncher)
    (slot,) = launcher.slots()
    assert isinstance(slot, Slot) and isinstance(slot, HostSlot)
    assert (slot.name, slot.url) == ("local", "http://127.0.0.1:9000")
    fake = FakeLauncher(FakeSlot("box"))
    assert isinstance(fake, Launcher) and isinstance(fake.slots()[0], Slot)
    assert isinstance(HostServer("http://x", FakeService()), RunningServer)  # type: ignore[arg-type]


def test_a_pool_gets_one_slot_per_host(tmp_path: Path) -> None:
    exp = make_experiment(tmp_path, hosts='hosts: [{ssh: "root@a"}, {ssh: "root@b", name: gpu-b}]')
    launcher = launcher_for(exp, lock_label="x", break_lock=True)
    assert isinstance(launcher, SSHPoolLauncher) and launcher.kind == "ssh"
    slots = launcher.slots()
    assert [s.name for s in slots] == ["root@a", "gpu-b"]
    assert [s.url for s in slots] == ["http://a:9000", "http://b:9000"]
    assert all(s.break_lock for s in slots)
    one = make_experiment(tmp_path, hosts='host: {ssh: "root@a"}')
    assert isinstance(launcher_for(one, lock_label="x"), SSHPoolLauncher)


def test_open_locks_recovers_and_checks_the_port(tmp_path: Path, fakes: dict[str, Any]) -> None:
    fakes["service"].leftovers = "local: server: a configuration change left"
    slot = HostSlot(make_experiment(tmp_path), make_experiment(tmp_path).host_specs()[0], lock_label="fake run-1")
    told: list[str] = []
    slot.open(told.append)
    assert fakes["service"].calls == ["lock fake run-1", "recover"]
    assert told == ["local: server: a configuration change left"]


def test_a_port_someone_else_serves_is_refused(
    tmp_path: Path, fakes: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(hosts_module, "request", lambda client, method, url, **kw: Answer(200, ""))
    exp = make_experiment(tmp_path)
    slot = HostSlot(exp, exp.host_specs()[0], lock_label="x")
    with pytest.raises(ServiceError, match="already answers \\(HTTP 200\\) although the service is not running"):
        slot.open(lambda _: None)
    assert slot.close() is True  # the lock was ours: restored and unlocked
    assert fakes["service"].calls[-2:] == ["restore", "unlock"] and fakes["host"].closed


def test_a_running_service_is_not_a_stranger_on_the_port(
    tmp_path: Path, fakes: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(hosts_module, "request", lambda client, method, url, **kw: Answer(200, ""))
    fakes["service"].running = True
    exp = make_experiment(tmp_path)
    HostSlot(exp, exp.host_specs()[0], lock_label="x").open(lambda _: None)


def test_a_locked_host_is_never_restored(tmp_path: Path, fakes: dict[str, Any]) -> None:
    fakes["service"].locked_by = "another run"
    exp = make_experiment(tmp_path)
    slot = HostSlot(exp, exp.host_specs()[0], lock_label="x")
    with pytest.raises(HostLockedError):
        slot.open(lambda _: None)
    assert slot.close() is False
    assert "restore" not in fakes["service"].calls and fakes["host"].closed


def test_launch_applies_and_waits_until_healthy(tmp_path: Path, fakes: dict[str, Any]) -> None:
    exp = make_experiment(tmp_path)
    deployment = build_plan(exp).deployments[1]
    slot = HostSlot(exp, exp.host_specs()[0], lock_label="x")
    slot.open(lambda _: None)
    server = slot.launch(deployment, progress=None, stop=threading.Event())
    assert fakes["service"].calls[-1] == "apply linear"
    assert fakes["waits"] == [("http://127.0.0.1:9000", exp.health_paths, exp.server.ready_timeout, 0.5)]
    assert server.url == "http://127.0.0.1:9000" and server.alive() and server.logs is fakes["service"]
    assert server.evidence() == ["last line"]
    server.release()  # nothing to undo until the slot closes
    assert fakes["service"].calls[-1] == "apply linear"
    fakes["unhealthy"] = True
    with pytest.raises(StartFailed):
        slot.launch(deployment, progress=None, stop=threading.Event())


def test_close_restores_even_when_it_fails(tmp_path: Path, fakes: dict[str, Any]) -> None:
    exp = make_experiment(tmp_path)
    slot = HostSlot(exp, exp.host_specs()[0], lock_label="x")
    slot.open(lambda _: None)
    fakes["service"].restore_error = "cannot reload"
    with pytest.raises(ServiceError, match="cannot reload"):
        slot.close()
    assert fakes["service"].calls[-1] == "unlock" and fakes["host"].closed
    assert slot.close() is False  # once closed, nothing is left to restore


def test_launch_before_open_is_an_error(tmp_path: Path) -> None:
    exp = make_experiment(tmp_path)
    slot = HostSlot(exp, exp.host_specs()[0], lock_label="x")
    with pytest.raises(ServiceError, match="not open"):
        slot.launch(build_plan(exp).deployments[0], progress=None, stop=threading.Event())
    assert slot.evidence() == []


class _Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args: Any) -> None:
        pass


def test_a_server_already_running_is_launched_through_make_service(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``service: {kind: none}`` goes through make_service as every kind does: nothing applied, the answering
    server is the running one, and closing restores nothing but the lock."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # where a local service keeps its lock
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Health)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}"
        path = tmp_path / "none.yaml"
        path.write_text(
            f'name: existing\nhost: local\nservice: {{kind: none}}\nserver: {{url: "{url}", model: sim}}\n'
            "engine: sim\nload: {concurrency: [1], requests: 2}\n"
        )
        exp = load_experiment(path)
        (slot,) = launcher_for(exp, lock_label="existing run").slots()
        slot.open(lambda what: None)  # the answering server is not a stranger: it is the one measured
        (deployment,) = build_plan(exp).deployments
        server = slot.launch(deployment, progress=None, stop=threading.Event())
        assert server.url == url and server.alive()
        assert slot.close() is True
    finally:
        httpd.shutdown()
        httpd.server_close()
