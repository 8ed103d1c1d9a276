"""Launchers: where a deployment runs and how many run at once (:mod:`orchestrator.launchers.base`).

:func:`launcher_for` builds the launcher an experiment asks for, by its kind (:mod:`orchestrator.launchers.registry`:
``local`` and ``ssh`` hosts with the experiment's service on each, ``gpu-slots``, ``slurm``, ``kubernetes``).
Importing this package loads no scheduler kind: a kind's modules are imported when an experiment asks for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from orchestrator.launchers.base import HealthCallback, Launcher, LauncherKind, LogSource, RunningServer, Slot
from orchestrator.launchers.hosts import HostLauncher, HostServer, HostSlot, LocalLauncher, SSHPoolLauncher
from orchestrator.launchers.registry import kind_of, launcher_kind, register_launcher

if TYPE_CHECKING:
    from orchestrator.experiment.schema import Experiment
    from orchestrator.launchers.slurm.launcher import SlurmLauncher
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


def __getattr__(name: str) -> Any:
    """``SlurmLauncher``, imported when first asked for: a kind's module loads only when it is used."""
    if name == "SlurmLauncher":
        from orchestrator.launchers.slurm.launcher import SlurmLauncher

        return SlurmLauncher
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
