"""The Slurm launcher kind (``launcher: {kind: slurm}``): each deployment one batch job.

``launcher.py`` the launcher and a job as a running server (on :mod:`orchestrator.launchers.scheduler`'s base),
``jobs.py`` the batch script and Slurm's commands (``sbatch``, ``squeue``, ``scontrol``, ``scancel``), ``kind.py``
what the kind does outside a sweep (dry run, restore, doctor). Its spec is
``orchestrator/experiment/launcherspecs/slurm.py`` (the experiment layer validates ``launcher:``). Loaded only
when an experiment asks for the kind (:mod:`orchestrator.launchers.registry`).
"""

from __future__ import annotations

from orchestrator.launchers.slurm.kind import SLURM
from orchestrator.launchers.slurm.launcher import SlurmJobServer, SlurmLauncher

__all__ = ["SLURM", "SlurmJobServer", "SlurmLauncher"]
