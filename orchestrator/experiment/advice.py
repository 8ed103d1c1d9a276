"""Warnings of a valid experiment: settings that are allowed but cannot act as written, each with its fix.

An error stops a file; these do not, but each says where it is (file:line:column and key) and what to change:

- ``gpus_per_deployment`` (top level or a variant's) on hosts that declare no ``gpus:``: only GPU slots read it,
  so it changes nothing.
- a closed-loop level above the point's request count (``load.requests`` below a ``load.concurrency`` level,
  without ``load.duration``): that concurrency is never reached, so the level measures a smaller one, and its
  few requests rarely tell configurations apart.
- a launcher's own (``LauncherSpecBase.warnings``: a cluster's system namespace, a privileged-looking
  account).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from orchestrator.experiment.yamlsource import Positions, locate

__all__ = ["advice_warnings", "setting_warnings"]


def _slot_setting_warnings(exp: Any) -> list[tuple[tuple[Any, ...], str]]:
    from orchestrator.experiment.slots import gpu_slots_enabled

    if gpu_slots_enabled(exp):
        return []
    sizes: list[tuple[tuple[Any, ...], int]] = []
    if "gpus_per_deployment" in exp.model_fields_set:
        sizes.append((("gpus_per_deployment",), exp.gpus_per_deployment))
    for name, variant in exp.variants.items():
        own = getattr(variant, "gpus_per_deployment", None)
        if own is not None:
            sizes.append((("variants", name, "gpus_per_deployment"), own))
    if getattr(exp, "launcher", None) is not None:
        fix = f"{exp.launcher.title} asks for GPUs with {exp.launcher.gpu_request}; remove it"
    else:
        host = "hosts[i].gpus" if exp.hosts else "host.gpus"
        fix = f"declare the host's GPUs ({host}: N, or auto) to run deployments side by side, or remove it"
    return [
        (path, f"{size} GPUs per deployment changes nothing: only GPU slots read it, and no host declares gpus; {fix}")
        for path, size in sizes
    ]


def _load_warnings(exp: Any) -> list[tuple[tuple[Any, ...], str]]:
    load = exp.load
    if load.duration is not None or load.requests is None:
        return []
    out = []
    for index, level in enumerate(load.concurrency):
        if level > load.requests:
            out.append(
                (
                    ("load", "concurrency", index),
                    f"C={level} is never reached: load.requests is {load.requests}, fewer than the level's "
                    f"concurrency, so at most {load.requests} requests are ever in flight and the point cannot tell "
                    f"configurations apart; give load.requests at least {4 * level} (4 x C), or drop the level",
                )
            )
    return out


def setting_warnings(exp: Any) -> list[tuple[tuple[Any, ...], str]]:
    """Every warning of ``exp``: (key path, message) pairs."""
    launcher = getattr(exp, "launcher", None)
    return _slot_setting_warnings(exp) + _load_warnings(exp) + (launcher.warnings(exp) if launcher is not None else [])


def advice_warnings(exp: Any, positions: Positions, file: str | Path) -> list[str]:
    """The warnings of ``exp`` read from ``file``, one line each: ``file:line:column: key: message``."""
    out = []
    for path, message in setting_warnings(exp):
        line, column = locate(positions, path)
        where = f"{file}:{line}:{column}" if line is not None else str(file)
        out.append(f"{where}: {'.'.join(str(p) for p in path)}: {message}")
    return out
