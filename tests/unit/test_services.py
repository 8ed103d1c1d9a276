"""Services above the Host interface: rendering, state parsing, log windows, locks (on a LocalHost in a tmp dir)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace

import pytest

from orchestrator import services
from orchestrator.errors import ConfigError, HostLockedError
from orchestrator.hosts import LocalHost
from orchestrator.hosts.base import CommandResult, ShellFileOps
from orchestrator.plan.deployments import Deployment
from orchestrator.services import (
    LogChunk,
    ProcessService,
    ServiceState,
    SystemdService,
    make_service,
    select_evidence,
)
from orchestrator.services.hoststate import HostLock, controller_identity, lock_is_stale
from orchestrator.services.systemd import render_dropin, render_unit


def dep(command: str | None, env: dict[str, str] | None = None) -> Deployment:
    return Deployment(id="d-1", variant="v", command=command, environment=env or {}, config_hash="c", load_points=[])


class ScriptedHost(ShellFileOps):
    """Answers commands from a list of (substring, result) rules and records what it was asked."""

    def __init__(self, rules: list[tuple[str, CommandResult]]) -> None:
        self.name = "scripted"
        self.rules = rules
        self.commands: list[str] = []

    def run(
        self,
        cmd: str | Sequence[str],
        timeout: float | None = None,
        *,
        input: str | None = None,
        idempotent: bool = True,
    ) -> CommandResult:
        text = cmd if isinstance(cmd, str) else " ".join(cmd)
        self.commands.append(text)
        for needle, result in self.rules:
            if needle in text:
                return result
        return CommandResult(0, "", "")

    def close(self) -> None:
        pass


def test_public_api() -> None:
    assert sorted(services.__all__) == [
        "ExistingService",
        "Leftover",
        "LogChunk",
        "ProcessService",
        "Service",
        "ServiceState",
        "SystemdService",
        "driving",
        "make_service",
        "select_evidence",
    ]


def test_dropin_resets_execstart_and_quotes_everything() -> None:
    text = render_dropin(dep("/opt/py -m srv --x 'a b' %n $HOME", {"CUDA_VISIBLE_DEVICES": "0,1", "N": "a\nb"}))
    lines = text.splitlines()
    assert lines[0].startswith("# Written by specsweep for deployment d-1")
    assert lines[1:] == [
        "[Service]",
        "ExecStart=",
        'ExecStart="/opt/py" "-m" "srv" "--x" "a b" "%%n" "$$HOME"',
        'Environment="CUDA_VISIBLE_DEVICES=0,1"',
        'Environment="N=a\\nb"',
    ]


def test_dropin_without_command_only_sets_environment() -> None:
    assert "ExecStart" not in render_dropin(dep(None, {"A": "1"}))


def test_unit_mode_accepts_values_that_fill_settings_and_refuses_structure_changes() -> None:
    template = "[Service]\nExecStart=/bin/srv {args}\nEnvironment=X={x}\n"
    ok = render_unit(template, dep("[Service]\nExecStart=/bin/srv --budget 7\nEnvironment=X=1\n", {"E": "v"}))
    assert ok.endswith('[Service]\nEnvironment="E=v"\n') and "--budget 7" in ok
    for hostile in (
        "[Service]\nExecStart=/bin/srv a\nExecStartPre=/bin/evil\nEnvironment=X=1\n",
        "[Service]\nExecStart=/bin/srv a ; /bin/evil\nEnvironment=X=1\n",
        "[Service]\nExecStart=/bin/srv a \\\nEnvironment=X=1\n",
        "[Service]\nExecStart=/bin/srv a\nEnvironment=X=1\n[Install]\n",
    ):
        with pytest.raises(ConfigError, match="structure"):
            render_unit(template, dep(hostile))


def test_state_is_parsed_from_one_systemctl_show() -> None:
    show = (
        "ActiveState=failed\nSubState=failed\nResult=exit-code\nExecMainStatus=1\nExecMainCode=1\nNRestarts=2\n"
        "MainPID=0\nInvocationID=abc\nLoadState=loaded\nInactiveExitTimestampMonotonic=123\nJob=\n"
    )
    host = ScriptedHost([("systemctl show", CommandResult(0, show, ""))])
    state = SystemdService(host, "sglang").state()
    assert state == ServiceState("failed", "failed", "exit-code", 1, 2, None, "abc", "loaded", 123)
    assert state.failed and state.stopped and not state.running
    assert state.describe() == "failed (failed, exit-code, status 1)"
    assert "--property=" in host.commands[0] and "sglang.service" in host.commands[0]


def test_journal_window_drops_the_cursor_entry_and_decodes_byte_messages() -> None:
    entries = [
        {"__CURSOR": "c1", "MESSAGE": "previous window's last line"},
        {"__CURSOR": "c2", "MESSAGE": "Decode batch, accept len: 3.50"},
        {"__CURSOR": "c3", "MESSAGE": list(b"bytes \xff\x1b[0m")},
    ]
    out = "\n".join(json.dumps(e) for e in entries) + "\n"
    host = ScriptedHost([("-o json", CommandResult(0, out, ""))])
    chunk = SystemdService(host, "u").journal_since("c1")
    assert isinstance(chunk, str) and isinstance(chunk, LogChunk)
    assert chunk.lines == ["Decode batch, accept len: 3.50", "bytes \ufffd\x1b[0m"]
    assert chunk.cursor == "c3"
    assert "--cursor=c1" in host.commands[0]
    empty = SystemdService(ScriptedHost([("-o json", CommandResult(1, "", ""))]), "u").journal_since("c9")
    assert (empty, empty.cursor) == ("", "c9")


def test_select_evidence_keeps_errors_and_the_tail() -> None:
    lines = [f"line {i}" for i in range(100)]
    lines[10] = "Traceback (most recent call last):"
    lines[11] = "ValueError: boom"
    picked = select_evidence(lines, tail=3)
    assert picked == ["Traceback (most recent call last):", "ValueError: boom", "line 97", "line 98", "line 99"]


def test_make_service_from_experiment_or_spec() -> None:
    host = LocalHost()
    systemd = make_service(SimpleNamespace(kind="systemd", unit="sglang", mode="dropin", unit_file=None), host)
    assert isinstance(systemd, SystemdService) and systemd.unit == "sglang.service"
    experiment = SimpleNamespace(
        name="demo",
        service=SimpleNamespace(kind="process", command="x", workdir=None, log_file=None, stop_timeout=5),
    )
    process = make_service(experiment, host)
    assert isinstance(process, ProcessService) and process.name == "demo" and process.stop_timeout == 5
    with pytest.raises(ConfigError):
        make_service(SimpleNamespace(kind="docker"), host)


def test_lock_excludes_a_second_run_and_breaks_a_dead_ones(tmp_path: Path) -> None:
    host = LocalHost()
    path = str(tmp_path / "state" / "u.lock")
    first, second = HostLock(host, path, service="u"), HostLock(host, path, service="u")
    first.acquire("run-1")
    info = json.loads(Path(path).read_text())
    assert info["label"] == "run-1" and info["pid"] == os.getpid() and info["controller"] == socket.gethostname()
    with pytest.raises(HostLockedError, match="run-1"):
        second.acquire("run-2")
    first.release()
    assert not Path(path).exists() and not (tmp_path / "state").exists()

    dead = {**controller_identity(), "pid": 2**22 + 17, "pid_start": "1", "label": "dead-run", "token": "t0"}
    Path(path).parent.mkdir()
    Path(path).write_text(json.dumps(dead))
    assert lock_is_stale(dead)[0]
    second.acquire("run-2")  # broken automatically: same controller, the pid is gone
    assert json.loads(Path(path).read_text())["label"] == "run-2"
    second.release()


def test_a_lock_from_another_controller_needs_break_lock(tmp_path: Path) -> None:
    host = LocalHost()
    path = tmp_path / "u.lock"
    path.write_text(json.dumps({"controller": "laptop-elsewhere", "pid": 1, "label": "theirs", "token": "x"}))
    lock = HostLock(host, str(path), service="u")
    with pytest.raises(HostLockedError, match="laptop-elsewhere"):
        lock.acquire("mine")
    lock.acquire("mine", break_lock=True)
    assert json.loads(path.read_text())["label"] == "mine"
    lock.release()


def test_an_inline_secret_of_the_environment_goes_to_the_environment_file_not_the_dropin() -> None:
    """Issue 40: an environment value written inline that is a secret (by its name, or by its shape) stood on an
    ``Environment=`` line of the 0644 drop-in, which ``systemctl show`` shows too; now the drop-in names the
    environment file, and holds no value of it; what is no secret stays an ``Environment=`` line."""
    from orchestrator.services import SystemdService

    token, shaped = "db-" + "5e7a" * 4, "hf_" + "Q" * 20
    service = SystemdService(ScriptedHost([]), "sglang")
    text = service.render(dep("/opt/serve --port 1", {"DB_PASSWORD": token, "REVISION": shaped, "WORKERS": "2"}))
    assert token not in text and shaped not in text, text
    assert f"EnvironmentFile={service.secret_file}" in text
    assert 'Environment="WORKERS=2"' in text


def test_the_group_probe_reads_past_a_process_that_ended_after_the_glob(tmp_path: Path) -> None:
    """The process service's group probe over ``/proc/[0-9]*/stat``: a process that ends between the shell's
    glob and the file's opening must not hide the rest. Debian's awk (mawk) stopped at such a file, so on a busy
    host a server's lingering group was called gone (a CI failure); cat now feeds awk. Here a dangling link
    stands for the ended process, listed before the group's live process."""
    from orchestrator.services.process import _GROUP_ALIVE

    proc = tmp_path / "proc"
    (proc / "100").mkdir(parents=True)
    (proc / "100" / "stat").symlink_to(tmp_path / "gone")
    (proc / "200").mkdir()
    (proc / "200" / "stat").write_text("200 (sleep) S 1 4242 4242 0 -1 4194560 0 0 0 0\n")
    probe = _GROUP_ALIVE.format(pgid=4242).replace("/proc/", f"{proc}/")
    assert subprocess.run(["sh", "-c", probe], capture_output=True, text=True).stdout.strip() == "alive"
    other = _GROUP_ALIVE.format(pgid=4243).replace("/proc/", f"{proc}/")
    assert subprocess.run(["sh", "-c", other], capture_output=True, text=True).stdout.strip() == ""
