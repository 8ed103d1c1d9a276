"""ProcessService on this machine (LocalHost) with the simulator on loopback: the local demo's path."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from orchestrator.errors import HostLockedError, StartFailed
from orchestrator.hosts import LocalHost
from orchestrator.launchers.health import wait_until_healthy
from orchestrator.plan.deployments import Deployment
from orchestrator.services import ProcessService, driving
from tests.timing import scaled

pytestmark = pytest.mark.timeout(90)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def sim(port: int, *extra: str, load_seconds: float = 0.3) -> str:
    return (
        f"{sys.executable} -m orchestrator.sim --host 127.0.0.1 --port {port} --profile tiny "
        f"--load-seconds {load_seconds:g} " + " ".join(extra)
    )


def dep(command: str, id: str = "d-1", env: dict[str, str] | None = None) -> Deployment:
    return Deployment(id=id, variant="v", command=command, environment=env or {}, config_hash="c", load_points=[])


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().rsplit(")", 1)[1].split()[0] != "Z"


def test_apply_healthy_window_restore(tmp_path: Path) -> None:
    port = free_port()
    service = ProcessService(LocalHost(), "sim", state_dir=str(tmp_path / "state"), workdir=str(tmp_path))
    url = f"http://127.0.0.1:{port}"
    with driving(service, "integration"):
        service.apply(dep(sim(port, "--decode-log-interval", "1"), env={"SIM_TAG": "x y"}))
        report = wait_until_healthy(service, url, ["/health", "/v1/models"], 60)
        pid = report.state.main_pid
        assert pid is not None and alive(pid)
        cursor = service.journal_cursor()
        reply = httpx.post(
            url + "/v1/chat/completions",
            json={"model": "sim", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 16},
            timeout=30,
        )
        assert reply.status_code == 200
        window = service.journal_since(cursor)
        assert "Decode batch" in window and "ready to roll" not in window
        assert service.journal_since(window.cursor) == ""
    assert not alive(pid)
    assert sorted(p.name for p in (tmp_path / "state").iterdir()) == ["sim.log"]


def test_fail_start_is_reported_with_the_traceback(tmp_path: Path) -> None:
    port = free_port()
    service = ProcessService(LocalHost(), "sim", state_dir=str(tmp_path))
    try:
        service.apply(dep(sim(port, "--fault", "fail-start")))
        with pytest.raises(StartFailed) as caught:
            wait_until_healthy(service, f"http://127.0.0.1:{port}", ["/health"], 60)
    finally:
        service.restore()
    assert caught.value.reason == "failed"
    assert service.state().active_state in ("failed", "inactive")
    assert any("Traceback" in line for line in caught.value.evidence)
    assert "OutOfMemoryError" in str(caught.value)


def test_a_new_apply_stops_the_previous_process_group(tmp_path: Path) -> None:
    service = ProcessService(LocalHost(), "sleeper", state_dir=str(tmp_path), stop_timeout=5)
    try:
        service.apply(dep("/bin/sh -c 'sleep 60 & sleep 60'"))
        first = service.state().main_pid
        assert first is not None
        children = subprocess.run(["pgrep", "-g", str(first)], capture_output=True, text=True).stdout.split()
        assert len(children) >= 2
        service.apply(dep("/bin/sleep 60", id="d-2"))
        assert all(not alive(int(p)) for p in children)
        assert service.state().running
    finally:
        service.restore()


def test_log_windows_only_return_whole_lines(tmp_path: Path) -> None:
    service = ProcessService(LocalHost(), "printer", state_dir=str(tmp_path))
    try:
        service.apply(dep("/bin/sh -c 'printf \"one\\ntw\"; sleep 60'"))
        deadline = time.monotonic() + scaled(10)
        while "one" not in (chunk := service.journal_since("0")) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert chunk == "one\n" and chunk.cursor == "4"
    finally:
        service.restore()


def test_a_log_truncated_under_an_open_window_says_its_lines_are_gone(tmp_path: Path) -> None:
    # logrotate's copytruncate empties the file the server writes to: a window read after it starts over at byte
    # 0, and what was written between its start and the truncation is gone; the chunk says so (LogChunk.lost).
    service = ProcessService(LocalHost(), "printer", state_dir=str(tmp_path))
    try:
        service.apply(dep("/bin/sh -c 'echo one; echo two; sleep 60'"))
        deadline = time.monotonic() + scaled(10)
        while "two" not in (chunk := service.journal_since("0")) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert chunk.lost is None
        cursor = service.journal_cursor()
        Path(service.log_path).write_bytes(b"")  # copytruncate, as logrotate does it
        gone = service.journal_since(cursor)
        assert gone == "" and gone.lost is not None and "truncated or replaced" in gone.lost
    finally:
        service.restore()


_KILLED = """
import os, signal, sys
from orchestrator.hosts import LocalHost
from orchestrator.plan.deployments import Deployment
from orchestrator.services import ProcessService
service = ProcessService(LocalHost(), "orphan", state_dir=sys.argv[1])
service.lock("doomed")
service.apply(Deployment(id="d", variant="v", command="/bin/sleep 120", config_hash="c", load_points=[]))
print(service.state().main_pid, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_killed_controllers_process_is_found_and_stopped(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _KILLED, str(tmp_path)], capture_output=True, text=True, timeout=scaled(60)
    )
    assert proc.returncode == -signal.SIGKILL
    orphan = int(proc.stdout.split()[0])
    try:
        assert alive(orphan)
        service = ProcessService(LocalHost(), "orphan", state_dir=str(tmp_path))
        leftover = service.find_leftovers()
        assert leftover is not None and leftover.marker is not None and leftover.lock_stale
        assert "still running" in leftover.detail
        other = ProcessService(LocalHost(), "orphan", state_dir=str(tmp_path))
        with driving(service, "next") as held:
            assert not alive(orphan)
            with pytest.raises(HostLockedError):
                other.lock("concurrent")
            assert held is service
        assert service.find_leftovers() is None
    finally:
        if alive(orphan):
            os.killpg(orphan, signal.SIGKILL)


# Killed in the moment between starting the server and recording it in the marker: only the pid file (which
# the wrapper writes first thing) names it.
_KILLED_BEFORE_MARKER = """
import os, signal, sys
import orchestrator.services.process as process
from orchestrator.hosts import LocalHost
from orchestrator.plan.deployments import Deployment
real = process.write_json
def write_json(host, path, data):
    if data.get("process"):
        os.kill(os.getpid(), signal.SIGKILL)
    real(host, path, data)
process.write_json = write_json
service = process.ProcessService(LocalHost(), "orphan", state_dir=sys.argv[1])
service.lock("doomed")
service.apply(Deployment(id="d", variant="v", command="/bin/sleep 120", config_hash="c", load_points=[]))
"""


def test_a_server_started_but_not_yet_recorded_is_found_by_its_pid_file(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _KILLED_BEFORE_MARKER, str(tmp_path)], capture_output=True, text=True, timeout=scaled(60)
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    orphan = int((tmp_path / "orphan.pid").read_text())
    try:
        assert alive(orphan)
        service = ProcessService(LocalHost(), "orphan", state_dir=str(tmp_path))
        leftover = service.find_leftovers()
        assert leftover is not None and leftover.marker is not None and leftover.marker["process"] is None
        assert f"process {orphan} still running" in leftover.detail
        with driving(service, "next"):
            assert not alive(orphan)
        assert service.find_leftovers() is None
    finally:
        if alive(orphan):
            os.killpg(orphan, signal.SIGKILL)


def test_a_pid_file_naming_another_process_is_left_alone(tmp_path: Path) -> None:
    # A recycled pid: the pid file names a live process that is not this service's wrapper.
    bystander = subprocess.Popen(["/bin/sleep", "60"], start_new_session=True)
    try:
        service = ProcessService(LocalHost(), "orphan", state_dir=str(tmp_path))
        service.lock("first")
        service._ensure_marker()
        service.unlock()
        (tmp_path / "orphan.pid").write_text(f"{bystander.pid}\n")
        assert service._from_pid_file() is None
        assert service.restore() and alive(bystander.pid)
    finally:
        bystander.kill()
        bystander.wait()


def _cmdline(pid: int) -> str:
    with open(f"/proc/{pid}/cmdline", "rb") as fh:
        return fh.read().replace(b"\0", b" ").decode()


def test_no_value_of_the_experiment_is_on_the_wrappers_command_line(tmp_path: Path) -> None:
    """Issue 40, item 14: an inline ``HF_TOKEN`` and an argument's value reached the server through the wrapper's
    own argv (``sh -c WRAPPER ... env -- HF_TOKEN=... program args``), which ``ps`` shows for as long as the
    server runs. Now the wrapper's command line holds paths only; the server's environment holds the token, and
    the server's own argv its own arguments; the launch file is gone once read. No ``env`` runs between them
    (its argv held the token until it exec'd the server: CI's secrets test once sampled it there)."""
    token, argument = "hf_" + "9c1d" * 6, "arg-" + "77e2" * 4
    service = ProcessService(LocalHost(), "argv", state_dir=str(tmp_path), stop_timeout=5)
    try:
        service.apply(dep(f"/bin/sh -c 'sleep 60' server {argument}", env={"HF_TOKEN": token}))
        wrapper = service.state().main_pid
        assert wrapper is not None
        deadline = time.monotonic() + scaled(20)
        children: list[str] = []
        while not children and time.monotonic() < deadline:
            children = subprocess.run(["pgrep", "-P", str(wrapper)], capture_output=True, text=True).stdout.split()
            time.sleep(0.05)
        assert len(children) == 1, children
        server = int(children[0])
        deadline = time.monotonic() + scaled(20)
        while "server" not in _cmdline(server) and time.monotonic() < deadline:  # the subshell has exec'd it
            time.sleep(0.05)
        wrapper_line = _cmdline(wrapper)
        assert token not in wrapper_line and argument not in wrapper_line, wrapper_line
        assert "argv.launch" in wrapper_line  # what it holds instead: the launch file's path
        assert argument in _cmdline(server) and token not in _cmdline(server)
        with open(f"/proc/{server}/environ", "rb") as fh:
            assert f"HF_TOKEN={token}".encode() in fh.read().split(b"\0")
        assert not (tmp_path / "argv.launch").exists()
    finally:
        service.restore()


def test_the_environment_reaches_the_server_alone_even_a_path_or_ifs(tmp_path: Path) -> None:
    """The environment is exported in the server's subshell just before its exec, not by ``env K=V program``
    (whose argv holds the values until it execs) nor in the wrapper: a PATH that has no ``rm`` and an IFS that
    splits nothing change neither the launch file's removal nor the secret's substitution, and reach the
    server as given."""
    secret, path = "s3cr3t-" + "5a" * 6, str(tmp_path / "bin-none")
    service = ProcessService(LocalHost(), "envs", state_dir=str(tmp_path), stop_timeout=5, secrets={"TOKEN": secret})
    out = tmp_path / "seen.json"
    code = (
        "import json, os, sys, time; "
        f"open({str(out) + '.tmp'!r}, 'w').write(json.dumps([dict(os.environ), sys.argv[1:]])); "
        f"os.rename({str(out) + '.tmp'!r}, {str(out)!r}); time.sleep(60)"
    )
    command = f'{sys.executable} -c "{code}" $TOKEN word'
    try:
        argv = service.command_line(dep(command, env={"PATH": path}))
        assert argv[0] == sys.executable and argv[-2:] == ["${TOKEN}", "word"], argv  # no environment in it
        service.apply(dep(command, env={"PATH": path, "IFS": "@", "A": "x y"}))
        deadline = time.monotonic() + scaled(20)
        while not out.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        environment, args = json.loads(out.read_text())
        assert {k: environment.get(k) for k in ("PATH", "IFS", "A", "TOKEN")} == {
            "PATH": path,
            "IFS": "@",
            "A": "x y",
            "TOKEN": secret,
        }
        assert args == [secret, "word"], args
        assert not (tmp_path / "envs.launch").exists()  # removed although the PATH has no rm
    finally:
        service.restore()


def test_stopping_waits_for_the_whole_process_group_not_its_leader(tmp_path: Path) -> None:
    # A real SGLang's scheduler and detokenizer exit seconds after its launcher, holding the server's port: the
    # service said it had stopped while they still listened (issue 47). The child here takes 2 s after TERM.
    service = ProcessService(LocalHost(), "lingering", state_dir=str(tmp_path), stop_timeout=10)
    script = tmp_path / "linger.sh"
    script.write_text("(trap 'sleep 2; exit 0' TERM; while :; do sleep 0.1; done) &\nexec sleep 60\n")
    try:
        service.apply(dep(f"/bin/sh {script}"))
        leader = service.state().main_pid
        assert leader is not None
        deadline = time.monotonic() + scaled(10)
        while len(group := pgrep_group(leader)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(group) >= 2, group
        started = time.monotonic()
        service.restore()
        assert pgrep_group(leader) == [], "a process of the server's group outlived its stop"
        assert time.monotonic() - started >= 1.5  # it waited for the lingering child
    finally:
        service.restore()


def pgrep_group(pgid: int) -> list[int]:
    """The group's processes that are not zombies."""
    out = subprocess.run(["pgrep", "-g", str(pgid)], capture_output=True, text=True).stdout.split()
    return [int(p) for p in out if Path(f"/proc/{p}/stat").exists() and not _zombie(int(p))]


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True
