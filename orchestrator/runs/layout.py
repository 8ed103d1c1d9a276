"""What a run's slots ran, and the count of its planned points from it (issue 49).

plan.json holds each point once; a baseline measured by every target (every GPU slot with ``slots.baselines:
per-slot``, every host of a pool) is a point per target, as its records are. The sweep writes ``layout.json``
when it opens or resumes: for each deployment measured per target, the targets that measure it. A resume with
other slots (fewer GPUs: ``gpus: auto``) adds its own to those the run had (the union: resume is by point,
never by slot), so the count keeps the baselines the earlier slots measured.

:func:`planned_points` is the one count of planned points: the answer's (``orchestrator/analysis/frame.py``,
``RunData.planned_points``) and the sweep's own (run.json's ``points``, the live progress line:
``orchestrator/sweep/pointcount.py``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from orchestrator.files import read_bounded, write_atomic
from orchestrator.runs.reading import parse_json

__all__ = ["LAYOUT_FILE", "planned_points", "read_layout", "record_layout"]

LAYOUT_FILE = "layout.json"
_MAX_BYTES = 64 * 1024 * 1024  # a regular file of at most this (a FIFO or /dev/zero there never holds a reader)
_SCHEMA = 1


def read_layout(run_dir: str | Path) -> dict[str, list[str]]:
    """Deployment id -> the targets that measure it, as ``layout.json`` holds it; {} without one (a run with
    one target, or made before it existed) or when it cannot be read."""
    try:
        data = parse_json(read_bounded(Path(run_dir) / LAYOUT_FILE, _MAX_BYTES).decode("utf-8"))
    except (OSError, ValueError):
        return {}
    per_target = data.get("per_target") if isinstance(data, dict) else None
    if not isinstance(per_target, dict):
        return {}
    return {
        str(dep): [str(t) for t in targets]
        for dep, targets in per_target.items()
        if isinstance(targets, list) and targets
    }


def record_layout(run_dir: str | Path, per_target: Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
    """Add ``per_target`` (deployment id -> the targets that measure it now) to the run's ``layout.json`` (the
    union with what it held: targets in the order first recorded), written atomically; the layout it holds now.
    Nothing is written when neither holds anything."""
    merged = read_layout(run_dir)
    for dep, targets in per_target.items():
        merged[dep] = list(dict.fromkeys([*merged.get(dep, []), *targets]))
    if not merged:
        return merged
    path = Path(run_dir) / LAYOUT_FILE
    write_atomic(path, json.dumps({"schema": _SCHEMA, "per_target": merged}, indent=1) + "\n", fsync=True)
    return merged


def planned_points(plan: Mapping[str, Any], layout: Mapping[str, Sequence[str]]) -> int:
    """Points ``plan`` (plan.json's dict) holds, counted as the answer counts them: a configuration at a load
    (its repeats and restarts are windows of one point), once per target for a deployment ``layout`` says is
    measured per target, else once."""
    keys: set[tuple[Any, ...]] = set()
    for deployment in plan.get("deployments") or []:
        if not isinstance(deployment, dict):
            continue
        config = deployment.get("config_hash") or deployment.get("id")
        targets = layout.get(str(deployment.get("id"))) or [""]
        for point in deployment.get("load_points") or []:
            if not isinstance(point, dict):
                continue
            mode = point.get("mode")
            key = (
                config,
                mode,
                point.get("concurrency") if mode != "rate" else None,
                point.get("rate") if mode == "rate" else None,
                point.get("workload") or "",
            )
            keys.update((target, *key) for target in targets)
    return len(keys)
