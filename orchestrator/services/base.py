"""The Service interface: how one server configuration is applied on a host, observed, and undone.

A Service is as thin as a Host: ``apply`` a Deployment (write the configuration, restart), report the
``state``, give log windows by cursor, and ``restore`` the host to what it was before the first change.
Two implementations: :class:`~orchestrator.services.systemd.SystemdService` (a drop-in or a whole unit file)
and :class:`~orchestrator.services.process.ProcessService` (a plain process in its own session).

Logs by cursor. ``journal_cursor()`` returns an opaque string marking "now" in the server's log;
``journal_since(cursor)`` returns a :class:`LogChunk`: a ``str`` holding every line the server logged after
``cursor``, whose ``.cursor`` is the cursor to pass next time. Two consecutive calls never overlap and never
leave a gap, so a metrics window is ``c0 = journal_cursor()`` before the load and ``journal_since(c0)`` after
it. For systemd the cursor is a journald cursor; for a process it is a byte offset into its log file.

Leaving the host as it was found. Before its first change a Service records on the host (in its state
directory) what it found, in a *marker*; ``restore()`` puts exactly that back and removes the marker. A run
that was killed leaves its marker behind: ``find_leftovers()`` sees it, and ``restore()`` (or
``specsweep restore FILE``) undoes it. A *lock* file beside the marker (pid, controller, time) keeps two
specsweep runs from driving the same service; :func:`driving` takes it, undoes a killed run's leftovers,
and always restores and unlocks on the way out.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from orchestrator.hosts.base import Host
    from orchestrator.plan.deployments import Deployment

__all__ = [
    "Leftover",
    "LogChunk",
    "Service",
    "ServiceState",
    "driving",
    "select_evidence",
]

_RUNNING_STATES = {"active", "activating", "reloading", "deactivating"}


@dataclass(frozen=True)
class ServiceState:
    """The server's state in systemd's words (a process service maps onto the same words).

    ``active_state``: active, activating, deactivating, reloading, inactive, failed.
    ``sub_state``: running, start, auto-restart, dead, exited, failed, ...
    ``result``: success, exit-code, signal, core-dump, timeout, start-limit-hit, ...
    ``exec_main_status``: the exit code (or signal number) of the main process once it exited, else None.
    ``invocation_id`` changes with every start (systemd clears it once the unit is inactive again);
    ``start_stamp`` grows with every start and stays after the process exited.
    """

    active_state: str
    sub_state: str = ""
    result: str = ""
    exec_main_status: int | None = None
    n_restarts: int = 0
    main_pid: int | None = None
    invocation_id: str = ""
    load_state: str = "loaded"
    #: Grows with every start, and survives the process's exit (systemd: InactiveExitTimestampMonotonic).
    start_stamp: int = 0

    @property
    def running(self) -> bool:
        """A main process is alive."""
        return self.main_pid is not None and self.main_pid > 0 and self.active_state in _RUNNING_STATES

    @property
    def failed(self) -> bool:
        """The unit failed, or is between a failure and an automatic restart."""
        return self.active_state == "failed" or self.sub_state == "auto-restart"

    @property
    def stopped(self) -> bool:
        """Not running and not starting: inactive or failed."""
        return self.active_state in {"inactive", "failed"}

    def describe(self) -> str:
        """``failed (failed, exit-code, status 1)`` style, for messages."""
        parts = [p for p in (self.sub_state, self.result) if p]
        if self.exec_main_status is not None and self.result not in ("", "success"):
            parts.append(f"status {self.exec_main_status}")
        return f"{self.active_state} ({', '.join(parts)})" if parts else self.active_state


class LogChunk(str):
    """Log text after a cursor (it *is* that text, a ``str``) and, in ``.cursor``, the cursor that ends it;
    ``.lost`` says why the log no longer holds every line after the cursor (the journal removed the window's
    start: rotated and vacuumed), None when nothing says so."""

    cursor: str
    lost: str | None

    def __new__(cls, text: str, cursor: str, lost: str | None = None) -> LogChunk:
        chunk = super().__new__(cls, text)
        chunk.cursor = cursor
        chunk.lost = lost
        return chunk

    @property
    def text(self) -> str:
        return str(self)

    @property
    def lines(self) -> list[str]:
        return self.splitlines()

    def __reduce__(self) -> tuple[Any, ...]:
        return (LogChunk, (str(self), self.cursor, self.lost))


@dataclass(frozen=True)
class Leftover:
    """What a previous specsweep run left on a host: its marker (the state to go back to) and its lock."""

    host: str
    service: str
    marker: dict[str, Any] | None
    lock: dict[str, Any] | None
    lock_stale: bool = True
    detail: str = ""
    files: list[str] = field(default_factory=list)

    def describe(self) -> str:
        who = ""
        source = self.marker or self.lock or {}
        if source:
            who = f" by {source.get('controller', '?')} pid {source.get('pid', '?')} at {source.get('started', '?')}"
        what = "a configuration change" if self.marker else "a lock" if self.lock else "a server it started"
        return f"{self.host}: {self.service}: {what} left{who}{(': ' + self.detail) if self.detail else ''}"

    def __str__(self) -> str:
        return self.describe()


@runtime_checkable
class Service(Protocol):
    """How a server configuration is applied on a host and undone."""

    host: Host
    name: str
    #: The log cursor taken by the last ``apply`` just before the (re)start: where this start's lines begin.
    start_cursor: str | None

    def apply(self, deployment: Deployment) -> None:
        """Write the deployment's configuration and (re)start the server; return once the new start began.

        Raises StartFailed when the start was refused outright (a bad unit setting), ServiceError when the
        configuration could not be written.
        """
        ...

    def state(self) -> ServiceState:
        """The server's current state (one round trip)."""
        ...

    def journal_cursor(self) -> str:
        """An opaque cursor marking the end of the server's log now."""
        ...

    def journal_since(self, cursor: str) -> LogChunk:
        """The log after ``cursor`` and the new cursor (see the module docstring)."""
        ...

    def logs_tail(self, n: int = 50) -> list[str]:
        """The last ``n`` lines of the server's log."""
        ...

    def restore(self) -> bool:
        """Undo every change recorded in the marker; False when there was nothing to undo. Idempotent."""
        ...

    def find_leftovers(self) -> Leftover | None:
        """What a previous run left behind (marker and/or lock), or None."""
        ...

    def recover(self) -> Leftover | None:
        """Undo what a killed run left (its marker), returning what was found; None when nothing was."""
        ...

    def lock(self, label: str, *, break_lock: bool = False) -> None:
        """Take the host lock for this service; HostLockedError when another live run holds it."""
        ...

    def unlock(self) -> None:
        """Release the host lock if this object holds it."""
        ...


@contextmanager
def driving(
    service: Service,
    label: str,
    *,
    break_lock: bool = False,
    on_leftover: Callable[[Leftover], None] | None = None,
) -> Iterator[Service]:
    """Hold ``service`` for one run: lock, undo a killed run's leftovers, and on the way out (success, error,
    Ctrl-C) restore and unlock.

    ``label`` names the run in the lock file (the experiment name and run id, say).
    """
    service.lock(label, break_lock=break_lock)
    try:
        leftover = service.recover()
        if leftover is not None and on_leftover is not None:
            on_leftover(leftover)
        yield service
    finally:
        try:
            service.restore()
        finally:
            service.unlock()


_EVIDENCE = re.compile(
    r"Traceback|Error|ERROR|Exception|FATAL|Fatal|fatal:|error:|panic|Killed|OOM|out of memory|"
    r"Main process exited|Failed with result|core dumped|Failed to start",
)


def select_evidence(lines: list[str], *, tail: int = 20, limit: int = 60) -> list[str]:
    """The lines that explain a failure: every line that looks like an error, then the last ``tail`` lines.

    Order is kept, duplicates of the same position are not repeated, at most ``limit`` lines (the latest).
    """
    picked: list[int] = [i for i, line in enumerate(lines) if _EVIDENCE.search(line)]
    picked += range(max(0, len(lines) - tail), len(lines))
    ordered = sorted(set(picked))
    return [lines[i] for i in ordered][-limit:]
