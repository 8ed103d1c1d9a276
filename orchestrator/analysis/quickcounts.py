"""A run's point counts (planned, ok, degraded, failed, skipped) without its answer: what ``ls`` shows of a run
that has no current ``answer.json`` (killed before its ending, or never reported).

Making the answer reads every record into a model, builds the frame, bootstraps every interval and runs every
check: seconds per run of thousands of points, so ``ls`` of a results root of many such runs took minutes
(bench/RESULTS-scale.md). The counts need only each record's identity, status and request counts: each line of
``records.jsonl`` is decoded (msgspec, in C) and the answer's own rules are applied to those few fields:

- the records ``plan.json`` does not hold are left out (``orchestrator/runs/planned.py``, ``within_plan``);
- each (host, point id) counts by its last attempt (``RunStore.latest_records``);
- the windows of one point (host, workload, configuration, load: ``intervals.GROUP_KEYS``) are combined as
  ``intervals.aggregate_windows`` combines them: a point with an ok window is one ok point and each of its
  other windows a point of its own status; a point without one is its last window's status;
- an ok point that lost more than ``checks.degraded_requests`` of its requests is degraded
  (``result.mark_degraded``, ``lost_requests``; its ok windows' requests summed as the frame sums them).

Any line this reading is not sure of (not JSON, not an object, another schema, a field of another type: lines
the store skips or refuses) gives None, and the caller makes the whole answer instead, so the counts are the
answer's counts (``tests/unit/test_quickcounts.py`` holds them equal)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import msgspec

from orchestrator.analysis.frame import config_label
from orchestrator.analysis.result import lost_requests
from orchestrator.analysis.statuses import STATUSES
from orchestrator.files import bounded_lines
from orchestrator.runs.layout import planned_points, read_layout
from orchestrator.runs.record import RUN_SCHEMA_VERSION

__all__ = ["quick_counts"]

_STATUSES = ("ok", "failed", "skipped")
_MODES = ("concurrency", "rate")


class _Unsure(Exception):
    """A line the quick reading does not read as the store would: make the whole answer instead."""


def _json(path: Path) -> Any:
    try:
        return msgspec.json.decode(path.read_bytes())
    except (OSError, msgspec.DecodeError):
        return None


def _threshold(experiment: Any) -> float | None:
    checks = experiment.get("checks") if isinstance(experiment, dict) else None
    if not isinstance(checks, dict) or "degraded_requests" not in checks:
        return 0.10  # CheckSettings.degraded_requests' default
    value = checks["degraded_requests"]
    ok = isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value < 1
    return float(value) if ok else None


def _window(line: bytes) -> dict[str, Any] | None:
    """The fields the counts read of one line of records.jsonl; None for a blank line (the store skips it)."""
    text = line.strip().strip(b"\x00").strip()
    if not text:
        return None
    try:
        raw = msgspec.json.decode(text)
    except msgspec.DecodeError as exc:
        raise _Unsure from exc
    if not isinstance(raw, dict) or raw.get("schema_version", RUN_SCHEMA_VERSION) != RUN_SCHEMA_VERSION:
        raise _Unsure
    host, point_id, status, variant = (raw.get(k) for k in ("host", "point_id", "status", "variant"))
    mode, params, workload = raw.get("mode"), raw.get("params", {}), raw.get("workload")
    load = raw.get("concurrency") if mode == "concurrency" else raw.get("rate")
    client = raw.get("client")
    if not (
        all(isinstance(v, str) for v in (host, point_id, variant))
        and status in _STATUSES
        and mode in _MODES
        and isinstance(params, dict)
        and (workload is None or isinstance(workload, str))
        and (load is None or (isinstance(load, int | float) and not isinstance(load, bool)))
        and (client is None or isinstance(client, dict))
    ):
        raise _Unsure
    client = client or {}
    return {
        "key": (host, point_id),
        "point": (host, workload or "", config_label(variant, params), mode, float(load or 0)),
        "status": status,
        "baseline_source": raw.get("baseline_source"),
        "errors": client.get("errors"),
        "cancelled": client.get("cancelled"),
        "requests": client.get("requests"),
    }


def _planned_ids(plan: Any, kind: Any) -> set[str] | None:
    """The point ids ``plan`` holds (``within_plan``'s rule), None when every record is kept."""
    deployments = plan.get("deployments") if isinstance(plan, dict) else None
    if kind not in (None, "sweep") or not isinstance(deployments, list) or not deployments:
        return None
    planned = {
        point.get("id")
        for dep in deployments
        if isinstance(dep, dict)
        for point in dep.get("load_points") or []
        if isinstance(point, dict)
    }
    planned.update(plan.get("decide_point_ids") or [])
    return planned


def _summed(windows: list[dict[str, Any]], name: str) -> float | None:
    present = [float(w[name]) for w in windows if isinstance(w.get(name), int | float) and w[name] == w[name]]
    return sum(present) if present else None


def quick_counts(run_dir: str | Path) -> dict[str, int] | None:
    """The run's counts as its answer has them (``Counts.to_dict``), or None when a line cannot be read as
    surely as the store reads it (then make the answer)."""
    path = Path(run_dir)
    info, plan = _json(path / "run.json"), _json(path / "plan.json")
    if not isinstance(info, dict):
        return None
    import yaml

    try:
        experiment = yaml.safe_load((path / "experiment.yaml").read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError):
        experiment = {}
    threshold = _threshold(experiment)
    if threshold is None:
        return None
    kind = info.get("kind")
    planned_ids = _planned_ids(plan if isinstance(plan, dict) else {}, kind)
    latest: dict[tuple[str, str], dict[str, Any]] = {}
    try:
        for line in bounded_lines(path / "records.jsonl"):
            window = _window(line)
            if window is None:
                continue
            if planned_ids is not None and window["key"][1] not in planned_ids and not window["baseline_source"]:
                continue
            latest[window["key"]] = window
    except (_Unsure, OSError):
        return None
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for window in latest.values():
        groups.setdefault(window["point"], []).append(window)
    statuses: Counter[str] = Counter()
    for windows in groups.values():
        ok = [w for w in windows if w["status"] == "ok"]
        if not ok:
            statuses[windows[-1]["status"]] += 1
            continue
        statuses.update(w["status"] for w in windows if w["status"] != "ok")
        row = {name: _summed(ok, name) for name in ("errors", "cancelled", "requests")}
        lost, sent = lost_requests(row)
        statuses["degraded" if sent and lost / sent > threshold else "ok"] += 1
    points = info.get("points") if isinstance(info.get("points"), dict) else {}
    if kind == "search" and isinstance(points.get("planned"), int):
        planned = int(points["planned"])
    else:
        planned = planned_points(plan if isinstance(plan, dict) else {}, read_layout(path))
    return {"planned": planned, **{s: int(statuses.get(s, 0)) for s in STATUSES}}
