"""The Kubernetes launcher kind (``launcher: {kind: kubernetes}``): each deployment one Job, driven with ``kubectl``.

``launcher.py`` the launcher and a Job as a running server (on :mod:`orchestrator.launchers.scheduler`'s base),
``jobs.py`` the manifests and the one boundary where ``kubectl`` runs, ``kind.py`` what the kind does outside a
sweep (dry run, restore, doctor). Its spec is ``orchestrator/experiment/launcherspecs/kubernetes.py`` (the
experiment layer validates ``launcher:``). Loaded only when an experiment asks for the kind
(:mod:`orchestrator.launchers.registry`).
"""

from __future__ import annotations

from orchestrator.launchers.kubernetes.kind import KUBERNETES
from orchestrator.launchers.kubernetes.launcher import KubernetesLauncher, KubernetesServer

__all__ = ["KUBERNETES", "KubernetesLauncher", "KubernetesServer"]
