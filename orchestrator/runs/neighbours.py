"""The live controllers on this machine: a sweep registers itself, and sees the others that run beside it.

    mine = Registration.take(experiment="demo", hosts=["local (this machine)"], run_dir=...)
    mine.others()      the other live controllers (Neighbour: pid, host, experiment, run, since)
    mine.release()     at the run's end (a killed controller's entry is dropped by the kernel's flock)
    live_controllers() the same list before (or without) registering

Two sweeps on one machine share its CPU and network: the load generator, the client's timing and a local
server compete, so both runs' figures are contaminated, and two that drive the same GPU host share its GPUs
too. The host's lock (orchestrator/services/hoststate.py) refuses a second controller of the same experiment
on the same host; two different experiments pass it, and only this registry sees them.

Each controller keeps one file ``<pid>.<token>.json`` in ``~/.local/state/specsweep/controllers/`` (the user's
state directory, ``$XDG_STATE_HOME`` when set; the process service keeps its state beside it), holding an
exclusive ``flock`` on it for as long as it runs. The file is written under a hidden temporary name, locked,
and only then renamed into place, so a reader never sees an unlocked entry of a live controller. A reader that
can lock an entry has found a dead controller's (a ``kill -9``, a lost terminal): it removes the file and
reports nothing, so a killed controller never blocks or
confuses the next one. The descriptor is close-on-exec: a server the controller starts does not keep it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import socket
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

__all__ = ["Neighbour", "Registration", "live_controllers", "registry_dir"]

_SUFFIX = ".json"
_MAX_ENTRY = 64 * 1024
# A temporary file older than this whose lock is free was left by a controller killed while registering.
_STALE_TMP_SECONDS = 60.0


def registry_dir() -> Path:
    """``$XDG_STATE_HOME/specsweep/controllers`` of the user running the controller; without ``XDG_STATE_HOME``
    (or with a relative one, which the XDG spec says to ignore) ``~/.local/state/specsweep/controllers``."""
    base = os.environ.get("XDG_STATE_HOME", "")
    state = Path(base) if os.path.isabs(base) else Path.home() / ".local" / "state"
    return state / "specsweep" / "controllers"


@dataclass(frozen=True)
class Neighbour:
    """Another live controller on this machine, as its entry says."""

    token: str
    pid: int
    machine: str
    experiment: str
    hosts: tuple[str, ...]
    run_dir: str
    since: str

    def describe(self) -> str:
        """``demo (pid 1234 on laptop since 2026-12-03T19:40:00Z, driving local (this machine); run results/…)``"""
        hosts = ", ".join(self.hosts) or "no host"
        return (
            f"{self.experiment} (pid {self.pid} on {self.machine} since {self.since}, driving {hosts}; "
            f"run {self.run_dir})"
        )

    def shares_a_host(self, hosts: list[str] | tuple[str, ...]) -> list[str]:
        """The hosts of ``hosts`` this controller drives too."""
        return [h for h in hosts if h in self.hosts]

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "pid": self.pid,
            "machine": self.machine,
            "experiment": self.experiment,
            "hosts": list(self.hosts),
            "run_dir": self.run_dir,
            "since": self.since,
        }


class Registration:
    """This controller's entry in the registry (module docstring)."""

    def __init__(self, fd: int, path: Path, token: str) -> None:
        self._fd: int | None = fd
        self.path = path
        self.token = token

    @classmethod
    def take(cls, *, experiment: str, hosts: list[str], run_dir: str | Path) -> Registration | None:
        """Register this controller; None when the registry cannot be written (a read-only home: the run goes
        on, unregistered, and nothing can warn of it)."""
        directory = registry_dir()
        token = secrets.token_hex(6)
        name = f"{os.getpid()}.{token}{_SUFFIX}"
        tmp = directory / f".{name}.tmp"
        entry = {
            "pid": os.getpid(),
            "token": token,
            "machine": socket.gethostname(),
            "experiment": experiment,
            "hosts": list(hosts),
            "run_dir": str(Path(run_dir).resolve()),  # the other controller's directory is not this one's
            "since": datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        }
        try:
            directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        except OSError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.write(fd, (json.dumps(entry) + "\n").encode())
            os.rename(tmp, directory / name)
        except OSError:
            os.close(fd)
            with contextlib.suppress(OSError):
                tmp.unlink()
            return None
        return cls(fd, directory / name, token)

    @property
    def held(self) -> bool:
        return self._fd is not None

    def others(self) -> list[Neighbour]:
        """The other live controllers (this process's own entries left out: one process is one controller)."""
        return live_controllers(exclude_pid=os.getpid())

    def release(self) -> None:
        """Remove the entry and give its lock back (idempotent)."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        with contextlib.suppress(OSError):
            self.path.unlink()
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def live_controllers(*, exclude_pid: int | None = None) -> list[Neighbour]:
    """Every live controller's entry, oldest first (this process's when ``exclude_pid`` is its pid: a process
    that registers twice, a playbook's sweep, is one controller). A dead controller's entry is removed."""
    directory = registry_dir()
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return []
    found: list[Neighbour] = []
    for name in names:
        path = directory / name
        if name.startswith("."):
            _drop_stale_tmp(path)
            continue
        if not name.endswith(_SUFFIX):
            continue
        neighbour = _read_live(path)
        if neighbour is not None and neighbour.pid != exclude_pid:
            found.append(neighbour)
    return sorted(found, key=lambda n: (n.since, n.pid))


def _read_live(path: Path) -> Neighbour | None:
    """The entry at ``path`` when its controller is alive (it holds the lock); a dead one's file is removed."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            return _parse(os.pread(fd, _MAX_ENTRY, 0))
        # Lockable: its controller is gone (the kernel dropped the lock with the process).
        with contextlib.suppress(OSError):
            path.unlink()
        return None
    except OSError:
        return None
    finally:
        os.close(fd)


def _parse(raw: bytes) -> Neighbour | None:
    try:
        info = json.loads(raw.decode("utf-8", "replace"))
    except ValueError:
        return None
    if not isinstance(info, dict):
        return None
    try:
        hosts = info.get("hosts") or []
        return Neighbour(
            token=str(info.get("token", "")),
            pid=int(info["pid"]),
            machine=str(info.get("machine", "?")),
            experiment=str(info.get("experiment", "?")),
            hosts=tuple(str(h) for h in hosts) if isinstance(hosts, list) else (),
            run_dir=str(info.get("run_dir", "?")),
            since=str(info.get("since", "?")),
        )
    except (KeyError, TypeError, ValueError):
        return None


def _drop_stale_tmp(path: Path) -> None:
    """A temporary entry whose writer died before renaming it (old, and its lock free)."""
    try:
        if time.time() - path.stat().st_mtime < _STALE_TMP_SECONDS:
            return
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        path.unlink()
    except OSError:
        pass
    finally:
        os.close(fd)
