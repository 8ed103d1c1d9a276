"""A controller killed while it writes a state file on the host (issue 49, "wrong or lost data"):

- ``write_text`` (every state file a Service keeps on a host: markers, the process service's records) renames
  a file into place only when every byte sent arrived: a writer whose stdin closed early (its controller
  killed mid-write, 3 of 10 kills during a serving point) left a torn, empty file renamed into place, and
  resume and ``restore`` then refused it;
- ``specsweep restore`` finds and stops a server the process service started when its marker is gone (removed
  by hand after such a kill): the pid file records it apart. It said "nothing to restore" while the server
  kept its port.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from orchestrator.errors import CommandError, SpecsweepError
from orchestrator.hosts import LocalHost
from orchestrator.hosts.base import CommandResult
from tests.reliability.harness import (
    cli_env,
    free_port,
    local_experiment,
    local_leftovers_restored,
    run_cli,
    started_cli,
    write_experiment,
)
from tests.timing import scaled

pytestmark = pytest.mark.timeout(180)


class _CutHost(LocalHost):
    """A host whose writer dies after sending ``keep`` of what it meant to: the pipe to ``cat`` closes early,
    as it does when the controller is killed with SIGKILL in the middle of a write."""

    def __init__(self, keep: int) -> None:
        super().__init__()
        self.keep = keep

    def run(
        self,
        cmd: str | Sequence[str],
        timeout: float | None = None,
        *,
        input: str | None = None,
        idempotent: bool = True,
    ) -> CommandResult:
        cut = input[: self.keep] if input is not None else None
        return super().run(cmd, timeout, input=cut, idempotent=idempotent)


@pytest.mark.parametrize("keep", [0, 7], ids=["nothing-arrived", "half-arrived"])
def test_a_write_cut_short_leaves_the_old_file_not_a_torn_one(tmp_path: Path, keep: int) -> None:
    target = tmp_path / "state" / "server.marker.json"
    LocalHost().write_text(str(target), '{"process": {"pid": 1}}\n')
    with pytest.raises((CommandError, SpecsweepError)) as raised:
        _CutHost(keep).write_text(str(target), '{"process": {"pid": 4242, "start": "99"}}\n')
    assert "bytes arrived" in str(raised.value)
    assert target.read_text() == '{"process": {"pid": 1}}\n'  # was: the torn text renamed into place
    assert [p.name for p in target.parent.iterdir()] == ["server.marker.json"]  # no temporary file left


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _markers(home: Path) -> list[Path]:
    return sorted((home / ".local" / "state" / "specsweep").glob("*.marker.json"))


def test_restore_stops_a_server_whose_marker_is_gone(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = cli_env(home)
    port = free_port()
    load = {"concurrency": [1], "requests": 400, "warmup": 0, "max_tokens": 64}
    path = write_experiment(tmp_path / "torn.yaml", local_experiment("torn", port, {"ar": "--algorithm ar"}, load=load))
    with local_leftovers_restored(home, path):
        with started_cli("sweep", str(path), "--results", str(tmp_path / "results"), env=env) as proc:
            deadline = time.monotonic() + scaled(90)
            while not (_markers(home) and _listening(port)) and time.monotonic() < deadline:
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
                time.sleep(0.2)
            assert _markers(home) and _listening(port), "the server never came up"
            os.kill(proc.pid, signal.SIGKILL)  # the controller, mid-point; the server runs on in its session
            proc.wait(timeout=scaled(30))
        assert _listening(port)
        # The server's pid, read before the markers go: without them the leftovers' clean-up cannot find it, so
        # the test stops it itself when restore did not (a failing run left it serving for an hour).
        pids = [json.loads(m.read_text()).get("process", {}).get("pid") for m in _markers(home)]
        try:
            for marker in _markers(home):
                marker.unlink()  # what the user did with the torn marker the kill left
            restored = run_cli("restore", str(path), "--break-lock", env=env)
            assert restored.returncode == 0, restored.stderr
            assert "nothing to restore" not in restored.stdout + restored.stderr
            deadline = time.monotonic() + scaled(30)
            while _listening(port) and time.monotonic() < deadline:
                time.sleep(0.2)
            assert not _listening(port), "the server kept its port"
        finally:
            for pid in pids:
                if isinstance(pid, int) and pid > 1:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(pid, signal.SIGKILL)  # the server runs in a session of its own
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("keep", [0, 7], ids=["nothing-arrived", "half-arrived"])
def test_a_lock_taken_by_a_write_cut_short_is_not_taken(tmp_path: Path, keep: int) -> None:
    """The host lock is written whole or not at all: a controller killed while it takes the lock left an empty
    lock file (``set -C; cat > lock``), which the next run's sweep or resume called unreadable and refused
    without --break-lock."""
    from orchestrator.services.hoststate import HostLock

    lock = tmp_path / "state" / "server.lock"
    with pytest.raises((CommandError, SpecsweepError)) as raised:
        HostLock(_CutHost(keep), str(lock), service="sim").acquire("killed run")
    assert "bytes arrived" in str(raised.value)
    assert not lock.exists() and list(lock.parent.iterdir()) == []  # no lock, no temporary file
    taker = HostLock(LocalHost(), str(lock), service="sim")
    taker.acquire("next run")  # was: HostLockedError, "the lock file is unreadable"
    assert taker.held and json.loads(lock.read_text())["label"] == "next run"
    assert oct(lock.stat().st_mode & 0o777) == oct(0o644)
    other = HostLock(LocalHost(), str(lock), service="sim")
    with pytest.raises(SpecsweepError, match="driven by another specsweep run"):
        other.acquire("a third run")  # still exclusive: the live holder (this process) keeps it
