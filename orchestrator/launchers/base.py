"""The launcher interface: where a deployment runs, and how many deployments run at once.

The sweep decides *what* runs (the plan's deployments, in order, minus what a resume already has); a launcher
decides *where* (the split of hydra's sweeper and launcher, ``hydra/plugins/launcher.py``). A launcher offers
``slots()``: the places where one deployment at a time can run, all of them at once, so a launcher with N
slots runs up to N deployments together. The sweep starts one worker per slot. For each deployment it takes,
a worker asks its slot for a running server and measures its load points on it:

    slot.open(recovered)               take the slot: lock it, undo what a killed run left (told to
                                       ``recovered``), refuse a URL that something else already serves
    server = slot.launch(d, ...)       apply the deployment and wait until it is healthy; raises StartFailed
                                       (it never became healthy: reason and evidence) or ServiceError/HostError
                                       (it could not be applied)
    server.url, server.logs            where the load goes, and the log window source (a cursor before the
                                       load, the text since that cursor after it)
    server.alive(), server.evidence()  is it still serving; the log lines that explain a failure
    server.release()                   this deployment's own restore: what ends it once its points are done
    slot.close()                       restore everything the slot changed and let it go

Which launcher an experiment gets is decided by :func:`orchestrator.launchers.launcher_for`. Today's are all
"a host and a service on it" (:mod:`orchestrator.launchers.hosts`): this machine, or a pool of SSH hosts; a
host's server stays up between deployments (the next ``launch`` restarts it with the next configuration,
``release`` does nothing) and ``close`` puts the host back as it was found. A scheduler's launcher (Slurm)
gives ``max_jobs`` slots, submits one job per ``launch`` (its URL known once the job runs on a node), reads
the job's output file as the log window and ends the job in ``release``; see docs/scaling.md.

``Slot.name`` is the target the records name (their ``host``): every slot of a pool of hosts has its own,
so each host measures the baselines for itself; the slots of one scheduler partition share theirs, so a
baseline is measured once for all of them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from orchestrator.plan.deployments import Deployment
    from orchestrator.services.base import LogChunk

__all__ = ["HealthCallback", "Launcher", "LogSource", "RunningServer", "Slot"]

#: ``progress(elapsed_seconds, timeout_seconds, latest_log_line)`` while a launch waits for a healthy server.
HealthCallback = Callable[[float, float, str], None]


@runtime_checkable
class LogSource(Protocol):
    """A server's log, read by cursor (the contract of :class:`orchestrator.services.base.Service`'s log
    methods): ``journal_since(journal_cursor())`` after a load is exactly what the server logged during it."""

    def journal_cursor(self) -> str:
        """An opaque cursor marking the end of the server's log now."""
        ...

    def journal_since(self, cursor: str) -> LogChunk:
        """The log after ``cursor``, and (``.cursor``) the cursor to pass next time."""
        ...

    def logs_tail(self, n: int = 50) -> list[str]:
        """The last ``n`` lines of the server's log."""
        ...


@runtime_checkable
class RunningServer(Protocol):
    """One deployment, up and healthy: what measuring a load point needs of it."""

    #: The base URL the load and the control-plane GETs go to.
    url: str

    @property
    def logs(self) -> LogSource:
        """Where its log windows come from."""
        ...

    def alive(self) -> bool:
        """Whether it is still serving (False also when that cannot be told)."""
        ...

    def evidence(self, lines: int = 40) -> list[str]:
        """The last lines of its log, to explain a failure (a line saying why, when the log cannot be read)."""
        ...

    def release(self) -> None:
        """End this deployment once its points are done (its own restore; nothing for a host's server, whose
        next launch replaces it and whose slot's ``close`` restores the host)."""
        ...


@runtime_checkable
class Slot(Protocol):
    """One place where deployments run, one at a time."""

    #: The target records and events name (their ``host``); slots of one target share it.
    name: str

    def open(self, recovered: Callable[[str], None]) -> None:
        """Take the slot before its first launch; what an earlier, killed run left there is undone and told to
        ``recovered`` (one line). Raises HostLockedError when another run holds it, ServiceError when something
        that is not our server answers at its URL, HostError when it cannot be reached."""
        ...

    def launch(
        self, deployment: Deployment, *, progress: HealthCallback | None, stop: threading.Event
    ) -> RunningServer:
        """Apply ``deployment`` and return once it is healthy. Raises StartFailed when it never became healthy
        (``reason``, ``evidence``; ``stop`` set ends the wait with reason ``stopped``), ServiceError or
        HostError when it could not be applied."""
        ...

    def evidence(self, lines: int = 40) -> list[str]:
        """The last lines of the slot's server log (for a deployment that could not be applied)."""
        ...

    def close(self) -> bool:
        """Restore what the slot changed and release it. True when there was anything to restore (the slot
        had been opened); raises SpecsweepError when the restore failed (the slot is released anyway)."""
        ...


@runtime_checkable
class Launcher(Protocol):
    """Where an experiment's deployments run: its slots, each running one deployment at a time."""

    #: ``local``, ``ssh``, ``slurm``: names the launcher in events and messages.
    kind: str

    def slots(self) -> Sequence[Slot]:
        """The slots, in a stable order; the sweep runs one deployment on each at the same time."""
        ...
