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

The protocols' members with a body are defaults: an implementation that subclasses the protocol inherits
them, and the loop calls them without asking whether they are there:

    launcher.expect(deployments)       the deployments the run will still launch (a scheduler keeps only the
                                       leftover jobs it can reattach to); default: nothing
    launcher.layout                    GPU slots' packing (:class:`~orchestrator.plan.slots.SlotLayout`): the
                                       sweep schedules the slots phase by phase; default None
    slot.blocked                       the last start failed for the slot's own reason (another process holds
                                       its GPUs): the failure policy retires the slot instead of counting the
                                       failure against the configuration; default False
    slot.failure_placement()           where a deployment that failed to start was placed, for its records;
                                       default None
    server.placement                   where it runs, kept in each of its records (job, node, GPUs); default None
    server.host, server.service        the host it runs on and its service (provenance, GPU telemetry, the
                                       command read back); default None

What a launcher does outside a sweep is its *kind*'s (:class:`LauncherKind`, registered by name in
:mod:`orchestrator.launchers.registry`; the experiment names it, ``Experiment.launcher_kind``): ``make`` the
launcher, ``dry_run`` (what ``sweep --dry-run`` prints for each deployment), ``restore`` (find and undo what a
killed run left: ``specsweep restore``) and ``doctor`` (check, changing nothing, that it can run: ``specsweep
doctor``). Today's kinds: ``local`` and ``ssh`` (a host and a service on it, :mod:`orchestrator.launchers.hosts`:
a host's server stays up between deployments, the next ``launch`` restarts it with the next configuration,
``release`` does nothing and ``close`` puts the host back as it was found), ``gpu-slots`` (the hosts' GPUs
packed into slots, :mod:`orchestrator.launchers.gpuslots`), ``slurm`` (``max_jobs`` slots, one job per
``launch``, its output file the log window, the job ended in ``release``) and ``kubernetes`` (one Job per
deployment, ``kubectl``); see docs/scaling.md.

``Slot.name`` is the target the records name (their ``host``): every slot of a pool of hosts has its own,
so each host measures the baselines for itself; the slots of one scheduler partition share theirs, so a
baseline is measured once for all of them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

if TYPE_CHECKING:
    from orchestrator.experiment.schema import Experiment
    from orchestrator.hosts.base import Host
    from orchestrator.launchers.outcomes import Check, HostReport, RestoreOutcome
    from orchestrator.plan.deployments import Deployment, Plan
    from orchestrator.plan.slots import SlotLayout
    from orchestrator.services.base import LogChunk, Service

__all__ = ["HealthCallback", "Launcher", "LauncherKind", "LogSource", "RunningServer", "Slot"]

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
    #: Where it runs, kept in each of its records (a job, its node and GPUs; a GPU slot): None when the
    #: target says it all (a host).
    placement: Mapping[str, Any] | None = None
    #: The host it runs on (GPU telemetry and provenance read it), None when there is none to read.
    host: Host | None = None
    #: Its service (the command read back into provenance), None when there is none.
    service: Service | None = None

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
    #: The last start failed for the slot's own reason, not the configuration's (GPU slots: another process
    #: holds its GPUs): the failure policy retires the slot instead of counting the failure.
    blocked: bool = False

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

    def failure_placement(self) -> dict[str, Any] | None:
        """Where a deployment that could not start was placed, for its failed records (None: the target)."""
        return None


@runtime_checkable
class Launcher(Protocol):
    """Where an experiment's deployments run: its slots, each running one deployment at a time."""

    #: ``local``, ``ssh``, ``gpu-slots``, ``slurm``, ``kubernetes``: names the launcher in events and messages.
    kind: str
    #: GPU slots' packing, phase by phase (the sweep schedules its slots by it); None for any other launcher.
    layout: SlotLayout | None = None

    def slots(self) -> Sequence[Slot]:
        """The slots, in a stable order; the sweep runs one deployment on each at the same time."""
        ...

    def expect(self, deployments: Sequence[Deployment]) -> None:
        """Told once, before any slot opens, the deployments this run will still launch (a scheduler keeps
        only the leftover jobs it can reattach to). Nothing by default."""
        return None


#: ``progress(host, check)`` as each doctor check finishes.
DoctorCallback = Callable[[str, "Check"], None]


class LauncherKind:
    """A kind of launcher, registered by name (:mod:`orchestrator.launchers.registry`): what it does before,
    outside and after a sweep. Subclass it and override what the kind does; the defaults are those of a
    launcher that leaves nothing behind and describes its deployments as the service would run them."""

    #: The name the experiment selects it by (``Experiment.launcher_kind``).
    kind: ClassVar[str] = ""

    def make(
        self, experiment: Experiment, *, plan: Plan | None, run_id: str, lock_label: str, break_lock: bool
    ) -> Launcher:
        """The launcher of one run (``lock_label`` names the run in every lock it takes; ``break_lock`` takes a
        lock whose run is gone; ``run_id`` names what the run starts; ``plan``, when the caller has it)."""
        raise NotImplementedError(f"the {self.kind} launcher cannot run deployments")

    def dry_run(self, experiment: Experiment, plan: Plan) -> str | None:
        """``sweep --dry-run``'s text for the whole plan, or None for the service's own description on each host
        (what a host's launcher runs: the drop-in written, the command started)."""
        return None

    def restore(
        self,
        experiment: Experiment,
        *,
        break_lock: bool,
        dry_run: bool,
        progress: Callable[[RestoreOutcome], None] | None,
    ) -> list[RestoreOutcome]:
        """Find, and unless ``dry_run`` undo, what killed runs of ``experiment`` left (``specsweep restore``):
        the kind's :meth:`restore_each`, each outcome told to ``progress`` as it comes."""
        outcomes: list[RestoreOutcome] = []
        for outcome in self.restore_each(experiment, break_lock=break_lock, dry_run=dry_run):
            outcomes.append(outcome)
            if progress is not None:
                progress(outcome)
        return outcomes

    def restore_each(self, experiment: Experiment, *, break_lock: bool, dry_run: bool) -> Iterable[RestoreOutcome]:
        """What :meth:`restore` finds and undoes, one outcome per place (a host, a login node, a namespace), as
        each is done. Nothing by default."""
        return ()

    def doctor(self, experiment: Experiment, *, progress: DoctorCallback | None) -> list[HostReport]:
        """Check, changing nothing, that ``experiment``'s deployments can run there (``specsweep doctor``).
        Nothing by default."""
        return []
