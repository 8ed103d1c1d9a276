"""Resuming a run: which run ``--resume latest`` means, and whether the experiment still is the one it ran.

``latest`` is the newest run of *this experiment file on these hosts* under the results root (``run.json``
keeps ``experiment_file`` and ``hosts``; runs written before that are matched by the hosts in their stored
experiment), not merely the newest directory with the experiment's name.

A resume compares the stored experiment (``experiment.yaml``, as resolved when the run began) and plan with
the current ones, and refuses when anything that shapes a measurement changed, with what changed:

- settings every point is measured with (``engine``, ``parsers``, ``server.url``/``model``/``api``/...,
  the workload: ``load.max_tokens``, ``temperature``, ``prompts``, ``seed``, ``warmup``, ``timeouts``, ...,
  and the hosts): every finished point is affected;
- the rendered server configurations and load points (variants, matrices, baselines, vars, the service's
  templates, ``load.concurrency``/``rates``/``requests``/``duration``, ``load.workloads``: each workload's
  name, source, format, category and cap are in its points' content): the finished points whose content
  hash (``plan.json`` ids) is not in the current plan are affected, and new points are listed.

The repeats (``load.repeats``, ``repeats_across_restarts``) and adaptive stopping (``load.until``) are planned
settings too: more repeats add points, fewer leave the extra ones out. Settings that change nothing measured
are ignored (``description``, ``failure_policy``, ``checks``, ``lossless``, ``telemetry``, ``load.decide``
(its budget: a larger one continues the rounds, and their points count as planned), ``baselines_from``,
``results_dir``, ``server.ready_timeout``, ``expected_load_time``,
``expected_tokens_per_second``, how a host is reached apart from its target, ``service.stop_timeout``,
``service.log_file``).

``redo_changed=True`` (``--redo-changed``) accepts the change instead: the affected records move to
``superseded.jsonl`` (nothing measured is lost), the run's ``experiment.yaml`` and ``plan.json`` become the
current ones, and the affected and new points are measured in this run.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator.errors import StoreError
from orchestrator.redaction import redact
from orchestrator.runs.identity import experiment_file, host_identities, resolved_experiment
from orchestrator.runs.store import Record, ResumeState, RunStore, find_latest, run_directories

if TYPE_CHECKING:
    from orchestrator.experiment.schema import Experiment
    from orchestrator.plan.deployments import Plan

__all__ = [
    "ResumeCheck",
    "compare_run",
    "experiment_file",
    "find_resumable",
    "host_identities",
    "open_for_resume",
    "resume_run",
]

#: Keys (dotted prefixes) whose change alters no measurement.
IGNORED = (
    "description",
    "failure_policy",
    "checks",
    "baselines_from",
    "results_dir",
    "server.ready_timeout",
    "server.expected_load_time",
    "server.expected_tokens_per_second",
    "service.stop_timeout",
    "service.log_file",
    "host",
    "hosts",
    "lossless",
    "telemetry",
    "load.decide",
)
#: Keys whose change shows in the plan's content hashes (so only the points it touches are affected).
PLANNED = (
    "variants",
    "baselines",
    "vars",
    "load.concurrency",
    "load.rates",
    "load.requests",
    "load.duration",
    "load.repeats",
    "load.repeats_across_restarts",
    "load.until",
    "load.workloads",
    "service.kind",
    "service.command",
    "service.exec_start",
    "service.unit_file",
    "service.unit",
    "service.mode",
    "service.environment",
    "service.workdir",
)
_SHOWN_CHANGES = 8


def find_resumable(experiment: Experiment, results_root: str | Path, *, resolved: dict[str, Any] | None = None) -> Path:
    """The newest run of this experiment file on this experiment's hosts under ``results_root`` (``resolved``,
    the experiment resolved, when the caller has it)."""
    wanted_file = experiment_file(experiment)
    wanted_hosts = host_identities(resolved if resolved is not None else resolved_experiment(experiment))
    find_latest(results_root, experiment.name)  # refuses when the newest run's run.json cannot be read
    dirs = run_directories(results_root, experiment.name)
    for path in reversed(dirs):
        try:
            store = RunStore.open(path)
            hosts = store.info.hosts or host_identities(store.experiment())
        except StoreError:
            continue
        recorded = store.info.experiment_file
        if hosts == wanted_hosts and (recorded is None or wanted_file is None or recorded == wanted_file):
            return path
    newest = dirs[-1]
    try:
        info = RunStore.open(newest).info
        what = f"{info.experiment_file or 'an unrecorded file'} on {', '.join(info.hosts) or 'unrecorded hosts'}"
    except StoreError as exc:
        what = f"unreadable ({exc})"
    raise StoreError(
        f"no run of {wanted_file or experiment.name} on {', '.join(wanted_hosts)} under "
        f"{Path(results_root) / experiment.name} (the newest run there, {newest.name}, is of {what}); "
        "give a run directory to --resume to continue that one"
    )


def _normalized(stored: dict[str, Any]) -> dict[str, Any]:
    """The stored experiment read through the current schema, so a setting this specsweep added since the run
    (with its default) is not a change; as stored when it no longer validates."""
    from pydantic import ValidationError

    from orchestrator.experiment.schema import Experiment

    try:
        return resolved_experiment(Experiment.model_validate(stored))
    except (ValidationError, ValueError, TypeError):
        return stored


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(_flatten(item, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: value}


def _under(key: str, prefixes: tuple[str, ...]) -> bool:
    return any(key == p or key.startswith(p + ".") for p in prefixes)


def _show(value: Any) -> str:
    if value is None:
        return "unset"
    text = json.dumps(value, default=str) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


@dataclass
class ResumeCheck:
    """What changed between a run and the current experiment, and which of its finished points it touches."""

    changes: list[str] = field(default_factory=list)
    #: (host, point id) of finished records measured with a configuration that is no longer the current one.
    affected: set[tuple[str, str]] = field(default_factory=set)
    finished: int = 0
    new_points: int = 0
    #: Something every point is measured with changed (not only some configurations).
    everything: bool = False
    #: Only settings that alter no measurement differ (the stored experiment is still rewritten).
    cosmetic: bool = False

    @property
    def changed(self) -> bool:
        return bool(self.changes)

    def describe(self) -> str:
        shown = "; ".join(self.changes[:_SHOWN_CHANGES])
        if len(self.changes) > _SHOWN_CHANGES:
            shown += f"; and {len(self.changes) - _SHOWN_CHANGES} more"
        return shown


def compare_run(
    experiment: Experiment,
    plan: Plan,
    store: RunStore,
    *,
    latest: dict[tuple[str, str], Record] | None = None,
    resolved: dict[str, Any] | None = None,
) -> ResumeCheck:
    """Compare the run in ``store`` with ``experiment`` and its ``plan`` (see the module docstring).

    ``latest`` (the run's last record of each point) and ``resolved`` (the current experiment resolved) are
    read or computed here unless the caller already has them."""
    old = _normalized(store.experiment())
    # The values the plan renders as secrets (a vars or matrix value after --api-key) are masked in the stored
    # experiment (runs/store.py _configuration_texts): learnt here too, so the two compare alike.
    redact(plan.to_json_dict())
    new = redact(resolved if resolved is not None else resolved_experiment(experiment))
    check = ResumeCheck()
    flat_old, flat_new = _flatten(old), _flatten(new)
    cosmetic = False
    for key in sorted(set(flat_old) | set(flat_new)):
        a, b = flat_old.get(key), flat_new.get(key)
        if a == b:
            continue
        if _under(key, IGNORED):
            cosmetic = True
            continue
        check.changes.append(f"{key}: {_show(a)} became {_show(b)}")
        if not _under(key, PLANNED):
            check.everything = True
    old_hosts, new_hosts = host_identities(old), host_identities(new)
    if old_hosts != new_hosts:
        check.changes.append(f"hosts: {', '.join(old_hosts) or 'none'} became {', '.join(new_hosts)}")
        check.everything = True
    stored_plan = store.plan()
    known = {p.get("id") for d in stored_plan.get("deployments", []) for p in d.get("load_points", [])}
    planned = {p.id for d in plan.deployments for p in d.load_points}
    current = planned | set(plan.decide_point_ids)  # a round of load.decide measured is no change
    if latest is None:
        latest = store.latest_records()
    check.finished = len(latest)
    check.affected = set(latest) if check.everything else {k for k in latest if k[1] not in current}
    check.new_points = len(planned - known)
    removed = len(known - current)
    if removed and not check.everything:
        check.changes.append(f"{removed} planned point(s) are no longer in the plan")
    if check.new_points and not check.everything:
        check.changes.append(f"{check.new_points} point(s) are new to the plan")
    check.cosmetic = cosmetic and not check.changes
    return check


def open_for_resume(
    experiment: Experiment, plan: Plan, ref: str, results_root: str | Path, *, redo_changed: bool = False
) -> tuple[RunStore, ResumeCheck]:
    """Open the run ``ref`` names (a directory, or ``latest``) for ``experiment``, refusing (``StoreError``,
    one line with what changed) a run the experiment no longer matches unless ``redo_changed``; with it,
    the affected records are superseded and the stored configuration replaced. The run is left as found
    when refused."""
    store, check, _state = resume_run(experiment, plan, ref, results_root, redo_changed=redo_changed)
    return store, check


def resume_run(
    experiment: Experiment,
    plan: Plan,
    ref: str,
    results_root: str | Path,
    *,
    redo_changed: bool = False,
    retry_failed: bool = False,
    resolved: dict[str, Any] | None = None,
) -> tuple[RunStore, ResumeCheck, ResumeState]:
    """:func:`open_for_resume`, and what the run holds (:class:`~orchestrator.runs.store.ResumeState`, its
    records read once, superseded ones already taken out) for the loop that continues it."""
    resolved = resolved if resolved is not None else resolved_experiment(experiment)
    path = find_resumable(experiment, results_root, resolved=resolved) if ref == "latest" else Path(ref)
    store = RunStore.open(path)
    store.hold()  # before anything is read to change or written: another controller's run stays as it is
    try:
        return _resume_held(experiment, plan, store, redo_changed, retry_failed, resolved)
    except BaseException:
        store.release()
        raise


def _resume_held(
    experiment: Experiment,
    plan: Plan,
    store: RunStore,
    redo_changed: bool,
    retry_failed: bool,
    resolved: dict[str, Any],
) -> tuple[RunStore, ResumeCheck, ResumeState]:
    state = store.read_state(retry_failed=retry_failed)
    check = compare_run(experiment, plan, store, latest=state.latest, resolved=resolved)
    if check.changed and not redo_changed:
        affected = (
            f"{len(check.affected)} of its {check.finished} finished point(s) were measured with what changed"
            if check.affected
            else "no finished point is affected"
        )
        raise StoreError(
            f"cannot resume {store.path}: the experiment changed since that run ({check.describe()}); {affected}. "
            "Pass --redo-changed to measure the changed and new points in this run (the old records move to "
            "superseded.jsonl), or start a new run without --resume"
        )
    if check.changed or check.cosmetic:
        if check.affected:
            store.supersede(check.affected, "the experiment changed: " + check.describe())
            state.supersede(check.affected)
        store.replace_configuration(resolved, plan.to_json_dict())
        if check.changed:
            store.event(
                "resume_changed",
                changes=check.changes,
                superseded=len(check.affected),
                new_points=check.new_points,
            )
    if store.info.experiment_file is None or not store.info.hosts:
        store.set_origin(experiment_file(experiment), host_identities(resolved))
    return store, check, state
