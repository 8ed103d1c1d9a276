"""The run lock: one controller at a time writes a run directory.

    lock = RunLock.take(run_dir)      before anything in the directory is written; RunLockedError when another
                                      specsweep process holds it, naming that process
    lock.release()                    at the run's end (a process that dies releases it with its descriptors)

The lock is ``flock(2)`` on the run directory itself and on ``<run>/.lock``: the kernel drops it with the
process, so a controller killed by SIGKILL leaves no stale lock to break by hand, unlike the host's lock
(orchestrator/services/hoststate.py), which lives on another machine. The file's text names the holder (pid,
host, when) for the refusal's message; it is written only by the process that holds the lock, so a refused
controller reads and changes nothing. The directory's own lock is what a hand cannot silently replace:
removing ``.lock`` lets no second controller in (the run puts the file back at its next write). ``check()``,
before every write of the store, notices a run directory moved or removed while the run writes it and stops
the run saying where it is now, instead of recreating a partial copy at the old path.

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
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from orchestrator.errors import StoreError

__all__ = ["LOCK_FILE", "RunLock", "RunLockedError"]

LOCK_FILE = ".lock"


class RunLockedError(StoreError):
    """Another specsweep process is writing the run directory."""


@dataclass
class _Held:
    """This process's hold on one run directory."""

    fd: int  # the lock file, flocked (older controllers lock only it)
    dir_fd: int  # the run directory itself, flocked: removing the lock file by hand does not let another in
    identity: tuple[int, int]  # the directory's (device, inode) when taken
    count: int = 1


# resolved path -> this process's hold
_HELD: dict[str, _Held] = {}
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
                held.count += 1
                return cls(key)
            try:
                dir_fd = os.open(run_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            except OSError as exc:
                raise StoreError(f"cannot lock the run directory {run_dir}: {exc.strerror or exc}") from exc
            try:
                fcntl.flock(dir_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                os.close(dir_fd)
                raise _locked(run_dir, _holder_of(path)) from exc
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            except OSError as exc:
                os.close(dir_fd)
                raise StoreError(f"cannot lock the run directory {run_dir}: {exc.strerror or exc}") from exc
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # an older controller locks only the file
            except OSError as exc:
                holder = _holder(fd)
                os.close(fd)
                os.close(dir_fd)
                raise _locked(run_dir, holder) from exc
            _write_holder(fd)
            st = os.fstat(dir_fd)
            _HELD[key] = _Held(fd, dir_fd, (st.st_dev, st.st_ino))
            return cls(key)

    @property
    def held(self) -> bool:
        return self._key is not None

    def check(self) -> None:
        """Before a write: StoreError when the run directory is no longer where the run holds it (moved,
        removed, replaced), saying where it is now, so nothing is written into a new, partial copy at the old
        path. A lock file removed by hand is put back (the directory's own lock kept the run exclusive)."""
        key = self._key
        if key is None:
            return
        with _GUARD:
            held = _HELD.get(key)
            if held is None:
                return
            try:
                st = os.stat(key)
                same = (st.st_dev, st.st_ino) == held.identity
            except OSError:
                same = False
            if not same:
                raise StoreError(
                    f"the run directory {key} {_whereabouts(held.dir_fd, key)} while the run was writing it: "
                    "stopped, and nothing more is written at the old path"
                )
            lock_path = os.path.join(key, LOCK_FILE)
            try:
                lock_st = os.stat(lock_path)
                ours = os.fstat(held.fd)
                if (lock_st.st_dev, lock_st.st_ino) == (ours.st_dev, ours.st_ino):
                    return
            except FileNotFoundError:
                pass
            except OSError:
                return
            _restore_lock_file(held, lock_path)

    def release(self) -> None:
        """Give the lock back (idempotent); the last holder in this process unlocks and closes it."""
        with _GUARD:
            key, self._key = self._key, None
            if key is None or key not in _HELD:
                return
            entry = _HELD[key]
            entry.count -= 1
            if entry.count > 0:
                return
            del _HELD[key]
            for fd in (entry.fd, entry.dir_fd):
                with contextlib.suppress(OSError):
                    fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)


def _write_holder(fd: int) -> None:
    text = json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "since": _now()}) + "\n"
    with contextlib.suppress(OSError):
        os.ftruncate(fd, 0)
        os.pwrite(fd, text.encode(), 0)


def _restore_lock_file(held: _Held, lock_path: str) -> None:
    """The lock file was removed (or replaced) by hand: a new one, flocked and naming this run, in its place
    (best effort: the directory's flock is what keeps another controller out)."""
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # an older controller holds the new file: the directory's lock is still ours
        os.close(fd)
        return
    _write_holder(fd)
    old, held.fd = held.fd, fd
    with contextlib.suppress(OSError):
        os.close(old)


def _whereabouts(dir_fd: int, old: str) -> str:
    """Where the directory the run holds is now (Linux tells through /proc), as words after its old path."""
    try:
        now = os.readlink(f"/proc/self/fd/{dir_fd}")
    except OSError:
        return "was moved or removed"
    if now.endswith(" (deleted)"):
        return "was removed"
    if now == old:
        return "was replaced by another directory"
    return f"was moved to {now}"


def _locked(run_dir: str | Path, holder: str) -> RunLockedError:
    return RunLockedError(
        f"{run_dir} is being written by another specsweep ({holder}); nothing was changed. Wait for "
        "that run to end (or stop it with Ctrl-C), then resume"
    )


def _holder_of(path: Path) -> str:
    """:func:`_holder` of the lock file at ``path`` without creating it (a refused controller changes nothing)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return "a process whose lock file was removed"
    try:
        return _holder(fd)
    finally:
        os.close(fd)


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
