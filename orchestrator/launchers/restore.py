"""Finding and undoing what killed runs left on the hosts of an experiment (``specsweep restore FILE``).

The launcher's kind decides what there is to restore (``LauncherKind.restore``). For hosts: connect, build the
experiment's service, look for a marker (a configuration change not yet undone) and a lock. A marker is undone with
``restore()`` under the lock; a lock of a dead run is broken (a run on this controller whose process is gone), a
lock of a live or unknown run only with ``break_lock``. Hosts are independent: one host's error is reported in its
outcome and the others are still restored."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from orchestrator.errors import HostLockedError, SpecsweepError
from orchestrator.hosts import connect_host
from orchestrator.launchers.outcomes import RestoreOutcome
from orchestrator.services import make_service

__all__ = ["RestoreOutcome", "restore_experiment", "restore_hosts"]


def restore_experiment(
    experiment: Any,
    *,
    break_lock: bool = False,
    dry_run: bool = False,
    progress: Callable[[RestoreOutcome], None] | None = None,
) -> list[RestoreOutcome]:
    """Find, and unless ``dry_run`` undo, what killed runs of the experiment left, as its launcher's kind does
    (``LauncherKind.restore``: the service on each host; a Slurm launcher's jobs and lock on the login node; a
    Kubernetes launcher's Jobs by their labels)."""
    from orchestrator.launchers.registry import kind_of

    return kind_of(experiment).restore(experiment, break_lock=break_lock, dry_run=dry_run, progress=progress)


def restore_hosts(
    experiment: Any, *, break_lock: bool = False, dry_run: bool = False, slot_instances: bool = False
) -> Iterator[RestoreOutcome]:
    """Every leftover of the experiment's service on each of its hosts (with ``slot_instances``, GPU slots': of
    every slot instance a host holds anything of, and the run's lock), undone unless ``dry_run``; each outcome
    as it is done."""
    for spec in experiment.host_specs():
        sources = [experiment]
        if slot_instances:  # GPU slots: every service instance, and the run's lock
            try:
                sources += _slot_sources(experiment, spec)
            except SpecsweepError as exc:
                yield RestoreOutcome(spec.display_name, "the GPU slots' instances", None, error=str(exc))
        for source in sources:
            yield _restore_host(source, spec, break_lock=break_lock, dry_run=dry_run)


def _slot_sources(experiment: Any, spec: Any) -> list[Any]:
    """The experiment once per slot instance the host holds anything of (read from the host, no GPU query)."""
    from orchestrator.launchers.gpuslots import instance_experiments

    host = connect_host(spec)
    try:
        return instance_experiments(experiment, host)
    finally:
        host.close()


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
