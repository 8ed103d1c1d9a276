"""Baselines without restarts: reuse an earlier run's baseline measurements when nothing that matters changed.

A sweep spends a restart (8 minutes of model loading on the K2.6 host) on each baseline, although the AR and
linear baselines rarely change between sweeps. ``reuse_baselines(experiment, plan, run_dir)`` takes them from
an earlier run directory (a sweep's, or ``playbooks/baseline-capture.yaml``'s) point by point, when all of
these are identical:

- the rendered server configuration (the deployment's ``config_hash``: command, environment, unit);
- the host (the same name, reached the same way: the same ssh target, or this machine);
- the load point (its id: mode, concurrency or rate, requests, duration, and its workload of
  ``load.workloads``: name, source, format, category, cap) and the workload settings that
  shape a measurement but not a point id (max_tokens, temperature, prompts, seed, ignore_eos, stream,
  warm-up, the API, the model, the engine);
- and the earlier point finished ``ok``.

Whatever is not reused stays in the plan (and is deployed); each reason says what differed. A point is
removed from the plan only when every host of the experiment has it; a baseline deployment left without
points is removed, so the plan's restart count drops by one.

How a sweep uses it (before creating its run directory, and again for ``--resume``)::

    source = baselines_source(experiment, flag, results_root)          # --baselines-from or baselines_from
    if source is not None:
        reuse = reuse_baselines(experiment, plan, source)
        plan = reuse.plan                                                # fewer points / deployments
        ... create the store with that plan ...
        adopt_reused(store, reuse.records, pooled=len(hosts) > 1)       # copied in, with their windows
        for reason in reuse.reasons: notice(reason)                      # why each other baseline is deployed
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any, NamedTuple

from orchestrator.errors import StoreError
from orchestrator.experiment.schema import Experiment
from orchestrator.plan.deployments import Deployment, LoadPoint, Plan
from orchestrator.runs.identity import host_table, resolved_experiment
from orchestrator.runs.reading import confined
from orchestrator.runs.store import Record, RunStore, find_latest

__all__ = ["COMPARED_SETTINGS", "BaselineReuse", "adopt_reused", "baselines_source", "reuse_baselines"]

#: Settings outside the configuration hash and the point id that change what a baseline measures.
COMPARED_SETTINGS = (
    "engine",
    "server.api",
    "server.model",
    "load.max_tokens",
    "load.prompt_max_tokens",
    "load.temperature",
    "load.prompts",
    "load.seed",
    "load.ignore_eos",
    "load.stream",
    "load.warmup",
    "load.max_in_flight",
    "load.flush_cache",
)


class BaselineReuse(NamedTuple):
    """``plan``: the plan without what is reused; ``records``: the reused records (``baseline_source`` set to
    the earlier run directory); ``reasons``: one line per baseline (or point) not reused, saying why."""

    plan: Plan
    records: list[Record]
    reasons: list[str]


def baselines_source(
    experiment: Experiment, override: str | Path | None = None, results_root: str | Path = "results"
) -> Path | None:
    """The run directory to take baselines from: ``override`` (``--baselines-from``) or the experiment's
    ``baselines_from``; ``latest`` is the newest run of this experiment under ``results_root``. A relative
    path is tried from the working directory, then from the experiment file's directory."""
    ref = override if override is not None else experiment.baselines_from
    if ref is None or str(ref) == "":
        return None
    if str(ref) == "latest":
        return find_latest(results_root, experiment.name)
    path = Path(ref).expanduser()
    if path.is_absolute() or (path / "run.json").is_file() or experiment.source is None:
        return path
    beside = experiment.source.parent / path
    return beside if (beside / "run.json").is_file() else path


def _get(data: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        if not isinstance(data, dict):
            return None
        data = data.get(part)
    return data


def _text(value: Any) -> str:
    return repr(value) if isinstance(value, str) else str(value)


def _command_change(old: str | None, new: str | None) -> str:
    """The first difference between two rendered commands, as ``'--x 7' became '--x 8'``."""
    a, b = (old or "").split(), (new or "").split()
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        if i1 > 0 and j1 > 0 and a[i1 - 1].startswith("-"):  # keep the flag a changed value belongs to
            i1, j1 = i1 - 1, j1 - 1
        before, after = " ".join(a[i1:i2]), " ".join(b[j1:j2])
        if not before:
            return f"command gained {after!r}"
        if not after:
            return f"command lost {before!r}"
        return f"command: {before!r} became {after!r}"
    return "environment or unit changed"


def _old_deployments(plan: dict[str, Any]) -> list[dict[str, Any]]:
    return [d for d in plan.get("deployments", []) if isinstance(d, dict)]


def _point_text(point: LoadPoint) -> str:
    if point.duration_s is not None:
        return f"{point.label}, {point.duration_s:g} s"
    return f"{point.label}, {point.requests} requests"


def _record_text(record: Record, old_points: dict[str, dict[str, Any]]) -> str:
    known = old_points.get(record.point_id, {})
    label = f"C={record.concurrency}" if record.mode == "concurrency" else f"rate={record.rate:g}/s"
    if known.get("duration_s") is not None:
        return f"{label}, {known['duration_s']:g} s"
    return f"{label}, {known.get('requests', '?')} requests"


def reuse_baselines(
    experiment: Experiment, plan: Plan, run_dir: str | Path, *, resolved: dict[str, Any] | None = None
) -> BaselineReuse:
    """Take what can be reused of ``plan``'s baseline deployments from the run at ``run_dir`` (see the module
    docstring); ``resolved``, the experiment resolved, when the caller has it (the opened run does). Raises
    ``StoreError`` when ``run_dir`` is not a readable run directory."""
    store = RunStore.open(run_dir)
    source = str(run_dir)
    old_exp = store.experiment()
    new_exp = resolved if resolved is not None else resolved_experiment(experiment)
    baselines = [d for d in plan.deployments if d.baseline]
    if not baselines:
        return BaselineReuse(plan, [], [f"the experiment has no baselines to take from {source}"])
    reasons: list[str] = []
    differences = [
        f"{key} was {_text(_get(old_exp, key))}, now {_text(_get(new_exp, key))}"
        for key in COMPARED_SETTINGS
        if _get(old_exp, key) != _get(new_exp, key)
    ]
    if differences:
        return BaselineReuse(
            plan, [], [f"baselines not reused from {source}: the workload changed ({'; '.join(differences)})"]
        )
    old_hosts = host_table(old_exp)
    new_hosts = host_table(new_exp)
    for name, identity in new_hosts.items():
        if name not in old_hosts:
            reasons.append(f"host {name}: not a host of {source} (its hosts: {', '.join(old_hosts) or 'none'})")
        elif old_hosts[name] != identity:
            reasons.append(f"host {name}: reached as {old_hosts[name][1]} in {source}, as {identity[1]} now")
    if reasons:  # every host measures the baselines itself: one without them means they all deploy them
        return BaselineReuse(plan, [], [f"baselines not reused from {source}: {r}" for r in reasons])
    hosts = list(new_hosts)
    latest = store.latest_records()
    old_plan = store.plan()
    old_points = {p["id"]: p for d in _old_deployments(old_plan) for p in d.get("load_points", []) if "id" in p}
    reused: list[Record] = []
    kept: list[Deployment] = []
    for dep in plan.deployments:
        if not dep.baseline:
            kept.append(dep)
            continue
        same_config = [r for r in latest.values() if r.config_hash == dep.config_hash]
        if not same_config:
            reasons.append(_config_reason(dep, old_plan, source))
            kept.append(dep)
            continue
        remaining: list[LoadPoint] = []
        for point in dep.load_points:
            found: list[Record] = []
            for host in hosts:
                record = latest.get((host, point.id))
                why = _point_reason(record, host, point, same_config, old_points)
                if why is None and record is not None:
                    found.append(record)
                else:
                    reasons.append(f"{dep.label} @ {point.label} on {host}: {why}")
            if len(found) == len(hosts):
                reused.extend(r.model_copy(update={"baseline_source": source, "baseline": True}) for r in found)
            else:
                remaining.append(point)
        if remaining:
            kept.append(dep.model_copy(update={"load_points": remaining}))
    return BaselineReuse(plan.model_copy(update={"deployments": kept}), reused, reasons)


def _config_reason(dep: Deployment, old_plan: dict[str, Any], source: str) -> str:
    before = [
        d for d in _old_deployments(old_plan) if d.get("variant") == dep.variant and d.get("params", {}) == dep.params
    ]
    if not before:
        return f"{dep.label}: {source} has no measurement of this configuration (config hash {dep.config_hash})"
    old = before[0]
    change = _command_change(old.get("command"), dep.command)
    if (old.get("environment") or {}) != dep.environment and old.get("command") == dep.command:
        change = "environment changed"
    return (
        f"{dep.label}: configuration changed since {source} "
        f"(config hash {old.get('config_hash')} -> {dep.config_hash}; {change})"
    )


def _point_reason(
    record: Record | None,
    host: str,
    point: LoadPoint,
    same_config: list[Record],
    old_points: dict[str, dict[str, Any]],
) -> str | None:
    if record is not None:
        if record.status == "ok":
            return None
        kind = (record.error or {}).get("kind") or record.status
        return f"the earlier point {record.status} ({kind})"
    same_load = [
        r
        for r in same_config
        if r.host == host
        and r.mode == point.mode
        and r.concurrency == point.concurrency
        and r.rate == point.rate
        and getattr(r, "workload", None) == point.workload
    ]
    if same_load:
        return f"measured with {_record_text(same_load[0], old_points)} earlier, {_point_text(point)} now"
    return "not measured in the earlier run"


def adopt_reused(store: RunStore, records: list[Record], *, pooled: bool = False) -> list[Record]:
    """Append reused records to ``store`` (a new run), each with its raw window copied in, so the run
    directory stays self-contained; returns the records as written (``window_file`` pointing into ``store``)."""
    written: list[Record] = []
    for record in records:
        window_file = None
        if record.window_file and record.baseline_source:
            try:
                origin = confined(record.baseline_source, record.window_file)  # a forged ../../ is not copied
                text = origin.read_text(encoding="utf-8", errors="replace")
            except (OSError, StoreError):
                text = None  # the window is evidence, not data: a missing one does not stop the sweep
            if text is not None:
                window_file = store.write_window(record.point_id, text, host=record.host if pooled else None)
        requests_file = None
        if record.requests_file and record.baseline_source:
            try:
                rows = RunStore.open(record.baseline_source).read_lines(record.requests_file)
            except StoreError:
                rows = []
            if rows:
                requests_file = store.write_lines(
                    "requests", record.point_id, rows, host=record.host if pooled else None
                )
        adopted = record.model_copy(update={"window_file": window_file, "requests_file": requests_file})
        store.append(adopted)
        written.append(adopted)
    _adopt_lossless(store, written, pooled=pooled)
    if written:
        store.event("baselines_reused", source=written[0].baseline_source, points=len(written))
    return written


def _adopt_lossless(store: RunStore, records: list[Record], *, pooled: bool) -> None:
    """The lossless check's answers of the reused baselines' deployments, copied in with them (the check compares
    every configuration with the AR baseline's answers)."""
    from orchestrator.analysis.lossless import LOSSLESS_DIR

    seen: set[tuple[str, str, str]] = set()
    for record in records:
        if not record.baseline_source:
            continue
        key = (record.baseline_source, record.host, record.deployment_id)
        if key in seen:
            continue
        seen.add(key)
        try:
            source = RunStore.open(record.baseline_source)
        except StoreError:
            continue  # evidence, not data: the check then says it has no baseline to compare with
        for rel in (
            f"{LOSSLESS_DIR}/{record.deployment_id}.jsonl",
            f"{LOSSLESS_DIR}/{record.host}/{record.deployment_id}.jsonl",
        ):
            rows = source.read_lines(rel)
            if rows:
                store.write_lines(LOSSLESS_DIR, record.deployment_id, rows, host=record.host if pooled else None)
                break
