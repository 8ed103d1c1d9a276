"""The launchers by kind: the one place an experiment's launcher is picked.

``Experiment.launcher_kind`` names the kind (``launcher: {kind: ...}``, else the hosts': ``gpu-slots``,
``local``, ``ssh``); :func:`launcher_kind` returns the :class:`~orchestrator.launchers.base.LauncherKind`
registered under it, whose ``make`` builds the run's launcher and whose ``dry_run``, ``restore`` and ``doctor``
serve ``sweep --dry-run``, ``specsweep restore`` and ``specsweep doctor``. The built-in kinds are imported on
first use (a kind's module is loaded only when an experiment asks for it); a package of one's own adds a kind
with :func:`register_launcher` (its experiment spec goes in ``orchestrator/experiment/launcherspecs/``).
"""

from __future__ import annotations

import importlib
import threading
from typing import TYPE_CHECKING

from orchestrator.errors import ConfigError

if TYPE_CHECKING:
    from orchestrator.experiment.schema import Experiment
    from orchestrator.launchers.base import LauncherKind

__all__ = ["kind_of", "launcher_kind", "launcher_kind_names", "register_launcher"]

#: The built-in kinds: where each one's :class:`LauncherKind` lives (``module:attribute``).
_BUILTIN = {
    "local": "orchestrator.launchers.hostkinds:LOCAL",
    "ssh": "orchestrator.launchers.hostkinds:SSH_POOL",
    "gpu-slots": "orchestrator.launchers.hostkinds:GPU_SLOTS",
    "slurm": "orchestrator.launchers.slurm.kind:SLURM",
    "kubernetes": "orchestrator.launchers.kubernetes.kind:KUBERNETES",
}

_lock = threading.Lock()
_registered: dict[str, LauncherKind] = {}


def register_launcher(kind: LauncherKind) -> None:
    """Make ``kind`` the launcher of experiments whose ``launcher_kind`` is ``kind.kind`` (a registered kind of
    the same name is replaced)."""
    with _lock:
        _registered[kind.kind] = kind


def launcher_kind_names() -> list[str]:
    """Every kind there is: the built-in ones, then those registered."""
    return list(dict.fromkeys([*_BUILTIN, *_registered]))


def launcher_kind(name: str) -> LauncherKind:
    """The kind registered as ``name``; ConfigError when there is none."""
    with _lock:
        found = _registered.get(name)
    if found is not None:
        return found
    where = _BUILTIN.get(name)
    if where is None:
        raise ConfigError(f"no launcher of kind {name!r} (one of {', '.join(launcher_kind_names())})")
    module, attribute = where.split(":")
    kind: LauncherKind = getattr(importlib.import_module(module), attribute)
    register_launcher(kind)
    return kind


def kind_of(experiment: Experiment) -> LauncherKind:
    """The kind of launcher ``experiment``'s deployments run on."""
    return launcher_kind(experiment.launcher_kind)
