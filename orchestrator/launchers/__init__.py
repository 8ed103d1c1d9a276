"""Launchers: where a deployment runs and how many run at once (:mod:`orchestrator.launchers.base`).

:func:`launcher_for` picks the launcher an experiment asks for: its hosts (``host:``/``hosts:``; none means
this machine) with its service on each, one deployment at a time per host.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.launchers.base import HealthCallback, Launcher, LogSource, RunningServer, Slot
from orchestrator.launchers.hosts import HostLauncher, HostServer, HostSlot, LocalLauncher, SSHPoolLauncher
from orchestrator.launchers.slurm import SlurmLauncher

if TYPE_CHECKING:
    from orchestrator.experiment.schema import Experiment

__all__ = [
    "HealthCallback",
    "HostLauncher",
    "HostServer",
    "HostSlot",
    "Launcher",
    "LocalLauncher",
    "LogSource",
    "RunningServer",
    "SSHPoolLauncher",
    "Slot",
    "SlurmLauncher",
    "launcher_for",
]


def launcher_for(
    experiment: Experiment, *, lock_label: str, break_lock: bool = False, run_id: str | None = None
) -> Launcher:
    """The launcher of ``experiment``: :class:`SlurmLauncher` for ``launcher: {kind: slurm}``,
    :class:`LocalLauncher` when its one host is this machine, :class:`SSHPoolLauncher` otherwise (one slot
    per host). ``lock_label`` names the run in each host's lock; ``break_lock`` takes a lock whose run is
    gone; ``run_id`` names the run's Slurm jobs (the label's last word when not given)."""
    if experiment.launcher is not None:
        return SlurmLauncher(
            experiment, run_id=run_id or lock_label.split()[-1], lock_label=lock_label, break_lock=break_lock
        )
    specs = experiment.host_specs()
    if len(specs) == 1 and specs[0].kind == "local":
        return LocalLauncher(experiment, specs, lock_label=lock_label, break_lock=break_lock)
    return SSHPoolLauncher(experiment, specs, lock_label=lock_label, break_lock=break_lock)
