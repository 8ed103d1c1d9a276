"""The live controllers on this machine: a sweep registers itself, and sees the others that run beside it.

    mine = Registration.take(experiment="demo", hosts=["local (this machine)"], run_dir=...)
    mine.others()      the other live controllers (Neighbour: pid, host, experiment, run, since)
    mine.release()     at the run's end (a killed controller's entry is dropped by the kernel's flock)
    live_controllers() the same list before (or without) registering
    controllers_between(t0, t1)   every controller alive at any time from t0 to t1 (epoch seconds): the live
                       ones and those that ended since t0 (a neighbour that started and ended inside a point)

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

A controller that ends (or is found dead) leaves a note of its life (its entry, with ``ended``: epoch seconds)
in ``ended-controllers/`` beside the registry, kept for :data:`ENDED_KEEP_SECONDS`: a sweep asks at a point's
end who ran at any time in its window, and a neighbour that came and went between the point's two looks is
named too. A dead controller's ``ended`` is when it was found dead (it ran until then at the latest).
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

__all__ = [
    "ENDED_KEEP_SECONDS",
    "Neighbour",
    "Registration",
    "controllers_between",
    "ended_dir",
    "live_controllers",
    "registry_dir",
]

_SUFFIX = ".json"
_MAX_ENTRY = 64 * 1024
# A temporary file older than this whose lock is free was left by a controller killed while registering.
_STALE_TMP_SECONDS = 60.0
#: How long the note of an ended controller is kept (longer than any one point's window).
ENDED_KEEP_SECONDS = 6 * 3600.0


def registry_dir() -> Path:
    """``$XDG_STATE_HOME/specsweep/controllers`` of the user running the controller; without ``XDG_STATE_HOME``
    (or with a relative one, which the XDG spec says to ignore) ``~/.local/state/specsweep/controllers``."""
    base = os.environ.get("XDG_STATE_HOME", "")
    state = Path(base) if os.path.isabs(base) else Path.home() / ".local" / "state"
    return state / "specsweep" / "controllers"


def ended_dir() -> Path:
    """Where the notes of ended controllers are kept: ``ended-controllers`` beside :func:`registry_dir`."""
    return registry_dir().with_name("ended-controllers")


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
    #: Epoch seconds it registered (None in an entry of an older specsweep) and ended (None: still running).
    started: float | None = None
    ended: float | None = None

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
        } | ({"ended": _iso(self.ended)} if self.ended is not None else {})


class Registration:
    """This controller's entry in the registry (module docstring)."""

    def __init__(self, fd: int, path: Path, token: str, entry: dict[str, Any] | None = None) -> None:
        self._fd: int | None = fd
        self.path = path
        self.token = token
        self.entry = entry or {}

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
            "started": time.time(),
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
        return cls(fd, directory / name, token, entry)

    @property
    def held(self) -> bool:
        return self._fd is not None

    def others(self) -> list[Neighbour]:
        """The other live controllers (this process's own entries left out: one process is one controller)."""
        return live_controllers(exclude_pid=os.getpid())

    def release(self) -> None:
        """Leave the note of this controller's life, remove the entry and give its lock back (idempotent)."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        _note_ended(self.path.name, self.entry)
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
        with contextlib.suppress(OSError, ValueError):
            entry = json.loads(os.pread(fd, _MAX_ENTRY, 0).decode("utf-8", "replace"))
            if isinstance(entry, dict) and path.exists():
                _note_ended(path.name, entry)
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
            started=_seconds(info.get("started")),
            ended=_seconds(info.get("ended")),
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


def _seconds(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _note_ended(name: str, entry: dict[str, Any]) -> None:
    """Keep ``entry`` with the time it ended in :func:`ended_dir` (written whole: a temporary file renamed)."""
    directory = ended_dir()
    note = {**entry, "ended": time.time()}
    tmp = directory / f".{name}.{secrets.token_hex(4)}.tmp"
    try:
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp.write_text(json.dumps(note) + "\n", encoding="utf-8")
        os.chmod(tmp, 0o600)
        os.rename(tmp, directory / name)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()


def _ended_controllers(since: float) -> list[Neighbour]:
    """The notes of controllers that ended at ``since`` or later; notes older than :data:`ENDED_KEEP_SECONDS`
    are removed."""
    directory = ended_dir()
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return []
    now = time.time()
    found: list[Neighbour] = []
    for name in names:
        path = directory / name
        if name.startswith(".") or not name.endswith(_SUFFIX):
            continue
        try:
            with open(path, "rb") as handle:
                neighbour = _parse(handle.read(_MAX_ENTRY))
        except OSError:
            continue
        if neighbour is None or neighbour.ended is None:
            continue
        if neighbour.ended < now - ENDED_KEEP_SECONDS:
            with contextlib.suppress(OSError):
                path.unlink()
        elif neighbour.ended >= since:
            found.append(neighbour)
    return found


def controllers_between(t0: float, t1: float, *, exclude_pid: int | None = None) -> list[Neighbour]:
    """Every controller alive at any time from ``t0`` to ``t1`` (epoch seconds): the live ones, and those that
    ended at ``t0`` or later having started by ``t1`` (``exclude_pid``: as :func:`live_controllers`)."""
    live = live_controllers(exclude_pid=exclude_pid)
    tokens = {n.token for n in live}
    ended = [
        n
        for n in _ended_controllers(t0)
        if n.pid != exclude_pid and n.token not in tokens and (n.started is None or n.started <= t1)
    ]
    return sorted([*live, *ended], key=lambda n: (n.since, n.pid))
