"""The run lock: one controller at a time writes a run directory.

    lock = RunLock.take(run_dir)      before anything in the directory is written; RunLockedError when another
                                      specsweep process holds it, naming that process
    lock.release()                    at the run's end (a process that dies releases it with its descriptors)

The lock is ``flock(2)`` on ``<run>/.lock``: the kernel drops it with the process, so a controller killed by
SIGKILL leaves no stale lock to break by hand, unlike the host's lock (orchestrator/services/hoststate.py), which
lives on another machine. The file's text names the holder (pid, host, when) for the refusal's message; it is
written only by the process that holds the lock, so a refused controller reads and changes nothing.

Within one process the lock is counted, not exclusive: the same controller may open a run it already holds
(a playbook's sweep, a test that creates a run and resumes it); two controllers are two processes.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import threading
from datetime import UTC, datetime
from pathlib import Path

from orchestrator.errors import StoreError

__all__ = ["LOCK_FILE", "RunLock", "RunLockedError"]

LOCK_FILE = ".lock"


class RunLockedError(StoreError):
    """Another specsweep process is writing the run directory."""


# path -> [descriptor, holders in this process]
_HELD: dict[str, list[int]] = {}
_GUARD = threading.Lock()


class RunLock:
    """A held run lock (module docstring)."""

    def __init__(self, key: str) -> None:
        self._key: str | None = key

    @classmethod
    def take(cls, run_dir: str | Path) -> RunLock:
        path = Path(run_dir) / LOCK_FILE
        key = str(Path(run_dir).resolve())
        with _GUARD:
            held = _HELD.get(key)
            if held is not None:
                held[1] += 1
                return cls(key)
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            except OSError as exc:
                raise StoreError(f"cannot lock the run directory {run_dir}: {exc.strerror or exc}") from exc
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                holder = _holder(fd)
                os.close(fd)
                raise RunLockedError(
                    f"{run_dir} is being written by another specsweep ({holder}); nothing was changed. Wait for "
                    "that run to end (or stop it with Ctrl-C), then resume"
                ) from exc
            text = json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "since": _now()}) + "\n"
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
                os.pwrite(fd, text.encode(), 0)
            _HELD[key] = [fd, 1]
            return cls(key)

    @property
    def held(self) -> bool:
        return self._key is not None

    def release(self) -> None:
        """Give the lock back (idempotent); the last holder in this process unlocks and closes it."""
        with _GUARD:
            key, self._key = self._key, None
            if key is None or key not in _HELD:
                return
            entry = _HELD[key]
            entry[1] -= 1
            if entry[1] > 0:
                return
            del _HELD[key]
            with contextlib.suppress(OSError):
                fcntl.flock(entry[0], fcntl.LOCK_UN)
            os.close(entry[0])


def _holder(fd: int) -> str:
    """Who holds the lock, from its file's text, for the refusal's message."""
    try:
        raw = os.pread(fd, 4096, 0)
        info = json.loads(raw.decode("utf-8", "replace") or "{}")
    except (OSError, ValueError):
        info = {}
    if not isinstance(info, dict) or "pid" not in info:
        return "a process that has not said who it is"
    return f"pid {info.get('pid')} on {info.get('host', '?')} since {info.get('since', '?')}"


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
