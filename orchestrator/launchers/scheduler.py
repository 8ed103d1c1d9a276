"""One base for the launchers whose deployments are a scheduler's jobs (Slurm, Kubernetes): what a job is to
the sweep whatever runs it, as hydra's submitit launcher keeps its Slurm and local launchers one base class
that differ in ``_EXECUTOR`` (``plugins/hydra_submitit_launcher/hydra_plugins/hydra_submitit_launcher/
submitit_launcher.py``). A kind subclasses these and fills in what its scheduler does:

    SchedulerLauncher   ``max_jobs`` slots on one target; the first slot to open takes the experiment's lock and
                        clears what a killed run left (``_open_first``), the last to close ends the run's jobs
                        and releases the lock (``_close_last``); ``new_server(deployment)`` one job's server
    SchedulerServer     one deployment's job: ``start`` = ``_submit``, ``wait_running`` (pending is progress,
                        ``pending_timeout`` a failure), ``connect`` (its port: the URL and the placement),
                        ``wait_healthy``; ``status`` (its state), the log window, ``_cancel`` in ``release``
    SchedulerSlot       one of the places: one job at a time (the same for every scheduler: no kind subclasses it)

The restore loop (each outcome told to ``progress`` as it comes) is every kind's: ``LauncherKind.restore``
over the kind's ``restore_each`` (:mod:`orchestrator.launchers.base`).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from orchestrator.errors import ServiceError, SpecsweepError, StartFailed
from orchestrator.launchers.base import HealthCallback, Launcher, LauncherKind, RunningServer, Slot
from orchestrator.services.base import select_evidence

if TYPE_CHECKING:
    from orchestrator.experiment.schema import Experiment
    from orchestrator.plan.deployments import Deployment, Plan
    from orchestrator.services.base import LogChunk

__all__ = ["JobStatus", "SchedulerKind", "SchedulerLauncher", "SchedulerServer", "SchedulerSlot", "SchedulerSpec"]


class SchedulerSpec(Protocol):
    """What the base reads of a scheduler launcher's spec (``launcher:``)."""

    @property
    def target(self) -> str: ...
    @property
    def max_jobs(self) -> int: ...
    @property
    def pending_timeout(self) -> float: ...
    @property
    def poll_interval(self) -> float: ...


class JobStatus(Protocol):
    """A job's state as its scheduler tells it (a Slurm job's ``JobInfo``, a Kubernetes pod's ``PodInfo``)."""

    @property
    def node(self) -> str: ...
    @property
    def running(self) -> bool: ...
    @property
    def ended(self) -> bool: ...
    def describe(self) -> str: ...


class SchedulerServer(RunningServer):
    """One deployment's job, seen through its scheduler (its log window is the job's log). A kind implements
    ``status``, ``ended_reason``, ``connect``, ``wait_healthy``, ``_failed``, the log window and ``_cancel``; and
    where its scheduler needs them ``_submit``, ``_end_start`` (a job that will never run, beyond one that
    ended), ``_disconnect`` and ``start_failed``."""

    #: The scheduler, and what a job is called in it, for the lines that say a question to it failed.
    scheduler: ClassVar[str] = ""
    #: Start failures' reasons begin with it (``job_pending_timeout``, ``pod_failed``).
    reason_prefix: ClassVar[str] = "job"
    #: Still pending after ``launcher.pending_timeout``: ``{elapsed}`` and ``{limit}`` in seconds.
    pending_text: ClassVar[str] = ""
    #: A job that ended before it ran: the end of the failure's message (its reason: ``ended_reason``).
    ended_text: ClassVar[str] = "ended before it ran its server"

    launcher: SchedulerLauncher

    def __init__(self, launcher: SchedulerLauncher, name: str, deployment: Deployment) -> None:
        self.launcher = launcher
        self.name = name
        self.deployment = deployment
        self.url = ""
        self.placement: dict[str, Any] | None = None
        self._released = False
        #: What a failed call of the launch said, wrapped and bounded: the first evidence (no job to ask about).
        self.failure: list[str] = []

    # -- what the kind says ----------------------------------------------------------------------------------

    @property
    def job_name(self) -> str:
        """The job as the lines that say a question about it failed name it."""
        return self.name

    @property
    def log_name(self) -> str:
        """The job's log as the lines that say it could not be read name it."""
        return "the job's log"

    def status(self, *, fresh: bool = False) -> JobStatus:
        """The job's state (``fresh``: asked now)."""
        raise NotImplementedError

    def _submit(self, progress: HealthCallback | None) -> None:
        """Hand the job to the scheduler (nothing when it was submitted before the server was made)."""

    def _end_start(self, status: Any) -> None:
        """Raise the StartFailed of a job that will never run (it ended, or cannot start)."""
        if status.ended:
            raise self._failed(self.ended_text, f"{self.reason_prefix}_{self.ended_reason(status)}", status)

    def ended_reason(self, status: Any) -> str:
        """The end of the reason of a job that ended before it ran (its state, lowered)."""
        raise NotImplementedError

    def connect(self, status: Any) -> None:
        """The server's URL (its port reached from here) and the placement the records carry."""
        raise NotImplementedError

    def wait_healthy(self, progress: HealthCallback | None, stop: threading.Event) -> None:
        raise NotImplementedError

    def _failed(self, what: str, reason: str, status: Any = None) -> StartFailed:
        raise NotImplementedError

    def _cancel(self) -> None:
        """End the job (its scheduler's cancel or delete)."""
        raise NotImplementedError

    def _disconnect(self) -> None:
        """End what reaches its port from here (a tunnel, a port-forward); nothing by default."""

    def journal_cursor(self) -> str:
        raise NotImplementedError

    def journal_since(self, cursor: str) -> LogChunk:
        raise NotImplementedError

    def logs_tail(self, n: int = 50) -> list[str]:
        raise NotImplementedError

    def start_failed(self, exc: BaseException) -> None:
        """The launch raised ``exc``: keep what explains it (``failure``) before the job is ended."""

    # -- the same for every scheduler ------------------------------------------------------------------------

    @property
    def logs(self) -> SchedulerServer:
        return self

    def start(self, progress: HealthCallback | None, stop: threading.Event) -> None:
        """Submit, wait until it runs on a node, reach its port, wait until it is healthy."""
        self._submit(progress)
        self.connect(self.wait_running(progress, stop))
        self.wait_healthy(progress, stop)

    def wait_running(self, progress: HealthCallback | None, stop: threading.Event) -> Any:
        """Until the job runs on a node (its state, returned): pending (with the scheduler's reason) is progress;
        a job that ends first or cannot start, or is still pending after ``pending_timeout``, is a StartFailed."""
        spec = self.launcher.spec
        limit, interval = spec.pending_timeout, spec.poll_interval
        started = time.monotonic()
        while True:
            if stop.is_set():
                raise self._failed("was not running yet when the run was stopped", "stopped")
            status = self.status()
            if status.running and status.node:
                return status
            self._end_start(status)
            elapsed = time.monotonic() - started
            if elapsed >= limit:
                what = self.pending_text.format(elapsed=elapsed, limit=limit)
                raise self._failed(what, f"{self.reason_prefix}_pending_timeout", status)
            if progress is not None:
                progress(elapsed, limit, status.describe())
            stop.wait(interval)

    def alive(self) -> bool:
        try:
            return self.status(fresh=True).running
        except SpecsweepError:
            return False

    def _tail_evidence(self) -> list[str]:
        """The telling lines of the log's last 200, for a start failure; a line saying why when it cannot be read."""
        try:
            return select_evidence(self.logs_tail(200))
        except SpecsweepError as exc:
            return [f"(could not read {self.log_name}: {exc})"]

    def log_evidence(self, lines: int = 40) -> list[str]:
        """The telling lines of the log's tail; a line saying why when it cannot be read."""
        try:
            return select_evidence(self.logs_tail(max(lines, 200)), limit=lines)
        except SpecsweepError as exc:
            return [f"(could not read {self.log_name}: {exc})"]

    def evidence(self, lines: int = 40) -> list[str]:
        if self.failure:
            return list(self.failure)  # the scheduler refused the job: there is none to ask about
        try:
            head = [self.status(fresh=True).describe()]
        except SpecsweepError as exc:
            head = [f"(could not ask {self.scheduler} about {self.job_name}: {exc})"]
        return head + self.log_evidence(lines)

    def release(self) -> None:
        """The deployment is done: what reaches its port ends, the job is ended."""
        if self._released:
            return
        self._released = True
        self._disconnect()
        with contextlib.suppress(SpecsweepError):
            self._cancel()


class SchedulerSlot(Slot):
    """One of the launcher's ``max_jobs`` places: one job at a time."""

    def __init__(self, launcher: SchedulerLauncher, index: int) -> None:
        self.launcher = launcher
        self.index = index
        self.name = launcher.target
        self.current: SchedulerServer | None = None
        self._opened = False

    def open(self, recovered: Callable[[str], None]) -> None:
        self.launcher.open_slot(recovered)
        self._opened = True

    def launch(
        self, deployment: Deployment, *, progress: HealthCallback | None, stop: threading.Event
    ) -> SchedulerServer:
        if not self._opened:
            raise ServiceError(f"{self.name}: the slot is not open")
        if self.current is not None:
            self.current.release()
            self.current = None
        server = self.launcher.new_server(deployment)
        self.current = server
        try:
            server.start(progress, stop)
        except BaseException as exc:
            server.start_failed(exc)
            server.release()  # a job that will not serve is no use to anyone: end it now
            raise
        return server

    def evidence(self, lines: int = 40) -> list[str]:
        return [] if self.current is None else self.current.evidence(lines)

    def close(self) -> bool:
        if not self._opened:
            return False
        self._opened = False
        current, self.current = self.current, None
        try:
            if current is not None:
                current.release()
        finally:
            self.launcher.close_slot()
        return True


class SchedulerLauncher(Launcher):
    """``max_jobs`` slots on one target of a scheduler, sharing the experiment's lock there (see the module
    docstring): the first slot to open takes it, the last to close ends the run's jobs and releases it."""

    #: The class of its spec (``launcher:``), and the scheduler's name in the error of an experiment without one.
    spec_class: ClassVar[type[Any]]
    scheduler: ClassVar[str] = ""
    spec: SchedulerSpec

    def __init__(self, experiment: Experiment, *, run_id: str, lock_label: str, break_lock: bool = False) -> None:
        spec = experiment.launcher
        if not isinstance(spec, self.spec_class):
            raise ServiceError(f"the experiment has no {self.scheduler} launcher")
        self.experiment = experiment
        self.spec = spec
        self.run_id = run_id
        self.lock_label = lock_label
        self.break_lock = break_lock
        self.target = spec.target
        self._guard = threading.Lock()
        self._open_slots = 0
        self._slots = [SchedulerSlot(self, i) for i in range(spec.max_jobs)]

    def slots(self) -> Sequence[SchedulerSlot]:
        return list(self._slots)

    def open_slot(self, recovered: Callable[[str], None]) -> None:
        with self._guard:
            if self._open_slots == 0:
                self._open_first(recovered)
            self._open_slots += 1

    def close_slot(self) -> None:
        with self._guard:
            self._open_slots -= 1
            if self._open_slots > 0:
                return
        self._close_last()

    def _open_first(self, recovered: Callable[[str], None]) -> None:
        """The first slot opens: take the lock, clear what a killed run left (told to ``recovered``)."""
        raise NotImplementedError

    def _close_last(self) -> None:
        """The last slot closed: end every job of the run and release the lock."""
        raise NotImplementedError

    def new_server(self, deployment: Deployment) -> SchedulerServer:
        """The server of ``deployment``'s job, not started yet (a scheduler may submit the job here)."""
        raise NotImplementedError


class SchedulerKind(LauncherKind):
    """A scheduler's kind of launcher: ``make`` builds its ``launcher_class`` (``dry_run``, ``restore_each`` and
    ``doctor`` are the kind's own)."""

    launcher_class: ClassVar[type[SchedulerLauncher]]

    def make(
        self, experiment: Experiment, *, plan: Plan | None, run_id: str, lock_label: str, break_lock: bool
    ) -> Launcher:
        return self.launcher_class(experiment, run_id=run_id, lock_label=lock_label, break_lock=break_lock)
