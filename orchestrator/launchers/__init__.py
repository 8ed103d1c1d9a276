"""Launchers: where a deployment runs and how many run at once (:mod:`orchestrator.launchers.base`).

:func:`launcher_for` builds the launcher an experiment asks for, by its kind (:mod:`orchestrator.launchers.registry`:
``local`` and ``ssh`` hosts with the experiment's service on each, ``gpu-slots``, ``slurm``, ``kubernetes``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.launchers.base import HealthCallback, Launcher, LauncherKind, LogSource, RunningServer, Slot
from orchestrator.launchers.hosts import HostLauncher, HostServer, HostSlot, LocalLauncher, SSHPoolLauncher
from orchestrator.launchers.registry import kind_of, launcher_kind, register_launcher
from orchestrator.launchers.slurm import SlurmLauncher

if TYPE_CHECKING:
    from orchestrator.experiment.schema import Experiment
    from orchestrator.plan.deployments import Plan

__all__ = [
    "HealthCallback",
    "HostLauncher",
    "HostServer",
    "HostSlot",
    "Launcher",
    "LauncherKind",
    "LocalLauncher",
    "LogSource",
    "RunningServer",
    "SSHPoolLauncher",
    "Slot",
    "SlurmLauncher",
    "kind_of",
    "launcher_for",
    "launcher_kind",
    "register_launcher",
]


def launcher_for(
    experiment: Experiment,
    *,
    lock_label: str,
    break_lock: bool = False,
    run_id: str | None = None,
    plan: Plan | None = None,
) -> Launcher:
    """The launcher of ``experiment``, made by its kind (``Experiment.launcher_kind``). ``lock_label`` names the
    run in each lock it takes; ``break_lock`` takes a lock whose run is gone; ``run_id`` names what the run
    starts (the label's last word when not given); ``plan``, the run's plan (GPU slots pack it; built from the
    experiment when not given)."""
    return kind_of(experiment).make(
        experiment,
        plan=plan,
        run_id=run_id or lock_label.split()[-1],
        lock_label=lock_label,
        break_lock=break_lock,
    )
