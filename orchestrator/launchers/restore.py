"""Finding and undoing what killed runs left on the hosts of an experiment (``specsweep restore FILE``).

For each host: connect, build the experiment's service, look for a marker (a configuration change not yet
undone) and a lock. A marker is undone with ``restore()`` under the lock; a lock of a dead run is broken (a
run on this controller whose process is gone), a lock of a live or unknown run only with ``break_lock``.
Hosts are independent: one host's error is reported in its outcome and the others are still restored.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from orchestrator.errors import HostLockedError, SpecsweepError
from orchestrator.hosts import connect_host
from orchestrator.services import make_service
from orchestrator.services.base import Leftover

__all__ = ["RestoreOutcome", "restore_experiment"]


@dataclass(frozen=True)
class RestoreOutcome:
    """What ``restore`` found and did on one host."""

    host: str
    service: str
    leftover: Leftover | None
    restored: bool = False
    error: str | None = None

    @property
    def summary(self) -> str:
        if self.error:
            prefix = f"{self.host}: "
            return self.error[len(prefix) :] if self.error.startswith(prefix) else self.error
        if self.leftover is None:
            return "nothing to restore"
        what = self.leftover.describe().split(": ", 2)[-1]
        return ("restored: " if self.restored else "found: ") + what


def restore_experiment(
    experiment: Any,
    *,
    break_lock: bool = False,
    dry_run: bool = False,
    progress: Callable[[RestoreOutcome], None] | None = None,
) -> list[RestoreOutcome]:
    """Find, and unless ``dry_run`` undo, every leftover of the experiment's service on each of its hosts
    (with a Slurm launcher: its jobs still queued or running, and its lock, on the login node)."""
    if getattr(experiment, "launcher", None) is not None:
        outcome = _restore_jobs(experiment, break_lock=break_lock, dry_run=dry_run)
        if progress is not None:
            progress(outcome)
        return [outcome]
    outcomes: list[RestoreOutcome] = []
    for spec in experiment.host_specs():
        sources = [experiment]
        if getattr(experiment, "gpu_slots", False):  # GPU slots: every service instance, and the run's lock
            try:
                sources += _slot_sources(experiment, spec)
            except SpecsweepError as exc:
                outcome = RestoreOutcome(spec.display_name, "the GPU slots' instances", None, error=str(exc))
                outcomes.append(outcome)
                if progress is not None:
                    progress(outcome)
        for source in sources:
            outcome = _restore_host(source, spec, break_lock=break_lock, dry_run=dry_run)
            outcomes.append(outcome)
            if progress is not None:
                progress(outcome)
    return outcomes


def _slot_sources(experiment: Any, spec: Any) -> list[Any]:
    """The experiment once per slot instance the host holds anything of (read from the host, no GPU query)."""
    from orchestrator.launchers.gpuslots import instance_experiments

    host = connect_host(spec)
    try:
        return instance_experiments(experiment, host)
    finally:
        host.close()


def _restore_jobs(experiment: Any, *, break_lock: bool, dry_run: bool) -> RestoreOutcome:
    from orchestrator.launchers.slurm import restore_jobs

    what = f"the Slurm jobs of {experiment.name}"
    try:
        host, leftover, restored = restore_jobs(experiment, break_lock=break_lock, dry_run=dry_run)
    except SpecsweepError as exc:
        return RestoreOutcome(getattr(experiment.launcher.login, "display_name", "login"), what, None, error=str(exc))
    return RestoreOutcome(host, what, leftover, restored=restored)


def _restore_host(experiment: Any, spec: Any, *, break_lock: bool, dry_run: bool) -> RestoreOutcome:
    name = str(getattr(spec, "display_name", None) or getattr(spec, "name", None) or "host")
    service_name = str(getattr(experiment.service, "unit", None) or getattr(experiment, "name", None) or "server")
    try:
        host = connect_host(spec)
    except SpecsweepError as exc:
        return RestoreOutcome(name, service_name, None, error=str(exc))
    try:
        service = make_service(experiment, host)
        leftover = service.find_leftovers()
        if leftover is None or dry_run:
            return RestoreOutcome(name, service.name, leftover)
        if leftover.lock is not None and not leftover.lock_stale and not break_lock:
            holder = leftover.lock
            raise HostLockedError(
                f"{service.name} is held by a live or unknown run ({holder.get('label', '?')}, pid "
                f"{holder.get('pid', '?')} on {holder.get('controller', '?')}): {leftover.detail}; "
                "pass --break-lock if that run is dead",
                host=host.name,
            )
        service.lock("specsweep restore", break_lock=True)
        try:
            restored = service.restore()
        finally:
            service.unlock()
        return RestoreOutcome(name, service.name, leftover, restored=restored or leftover.lock is not None)
    except SpecsweepError as exc:
        return RestoreOutcome(name, service_name, None, error=str(exc))
    finally:
        host.close()
