"""What a resume calls a change: ``compare_run`` between a stored run and the experiment as it is now."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator.errors import StoreError
from orchestrator.experiment.schema import Experiment, load_experiment
from orchestrator.plan.deployments import build_plan
from orchestrator.runs.store import Record, RunStore, utc_now_iso
from orchestrator.sweep.resume import compare_run, experiment_file, host_identities, open_for_resume
from orchestrator.sweep.runner import resolved_experiment

DOC: dict[str, Any] = {
    "name": "r",
    "host": "local",
    "service": {"kind": "process", "command": "{python} -m orchestrator.sim --port 18999 {spec_args}"},
    "server": {"url": "http://127.0.0.1:18999", "model": "sim", "ready_timeout": "30s"},
    "engine": "sim",
    "variants": {"ar": {"spec_args": "--algorithm ar"}, "linear": {"spec_args": "--algorithm linear"}},
    "baselines": ["ar"],
    "load": {"concurrency": [1, 4], "requests": 2, "max_tokens": 8},
}


def _load(tmp_path: Path, doc: dict[str, Any], name: str = "r.yaml") -> Experiment:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return load_experiment(path)


def _run(tmp_path: Path, experiment: Experiment) -> RunStore:
    plan = build_plan(experiment)
    resolved = resolved_experiment(experiment)
    store = RunStore.create(
        tmp_path / "results",
        experiment.name,
        resolved,
        plan.to_json_dict(),
        experiment_file=experiment_file(experiment),
        hosts=host_identities(resolved),
    )
    for deployment in plan.deployments:
        for point in deployment.load_points:
            store.append(
                Record(
                    run_id=store.run_id,
                    experiment=experiment.name,
                    deployment_id=deployment.id,
                    point_id=point.id,
                    config_hash=deployment.config_hash,
                    host="local",
                    variant=deployment.variant,
                    mode="concurrency",
                    concurrency=point.concurrency,
                    status="ok",
                    started_at=utc_now_iso(),
                    finished_at=utc_now_iso(),
                )
            )
    return store


def _edited(**changes: Any) -> dict[str, Any]:
    doc = yaml.safe_load(yaml.safe_dump(DOC))
    for dotted, value in changes.items():
        target = doc
        *parents, last = dotted.split("__")
        for key in parents:
            target = target[key]
        target[last] = value
    return doc


def test_an_unchanged_experiment_is_no_change(tmp_path: Path) -> None:
    experiment = _load(tmp_path, DOC)
    check = compare_run(experiment, build_plan(experiment), _run(tmp_path, experiment))
    assert not check.changed and not check.affected and check.finished == 4


@pytest.mark.parametrize(
    "changes",
    [
        {"server__ready_timeout": "5m", "server__expected_load_time": "3s"},
        {"failure_policy": {"max_consecutive_failed_deployments": 0}},
        {"checks": {"chain_tolerance": 0.2}, "description": "now described"},
    ],
)
def test_settings_that_measure_nothing_are_not_a_change(tmp_path: Path, changes: dict[str, Any]) -> None:
    store = _run(tmp_path, _load(tmp_path, DOC))
    edited = _load(tmp_path, _edited(**changes))
    check = compare_run(edited, build_plan(edited), store)
    assert not check.changed and check.cosmetic


def test_a_setting_every_point_is_measured_with_affects_every_point(tmp_path: Path) -> None:
    store = _run(tmp_path, _load(tmp_path, DOC))
    edited = _load(tmp_path, _edited(engine="sglang", load__max_tokens=16))
    check = compare_run(edited, build_plan(edited), store)
    assert check.everything and len(check.affected) == 4
    assert check.changes == ["engine: 'sim' became 'sglang'", "load.max_tokens: 8 became 16"]


def test_a_changed_configuration_affects_its_points_only(tmp_path: Path) -> None:
    store = _run(tmp_path, _load(tmp_path, DOC))
    edited = _load(tmp_path, _edited(variants={**DOC["variants"], "linear": {"spec_args": "--algorithm ddtree"}}))
    check = compare_run(edited, build_plan(edited), store)
    assert not check.everything
    assert {store.latest_records()[k].variant for k in check.affected} == {"linear"}
    assert "variants.linear.spec_args: '--algorithm linear' became '--algorithm ddtree'" in check.changes
    assert "2 planned point(s) are no longer in the plan" in check.changes
    assert "2 point(s) are new to the plan" in check.changes


def test_a_setting_added_since_the_run_is_not_a_change(tmp_path: Path) -> None:
    """A run written before ``failure_policy`` existed: its stored experiment has no such key."""
    experiment = _load(tmp_path, DOC)
    store = _run(tmp_path, experiment)
    stored = yaml.safe_load((store.path / "experiment.yaml").read_text())
    del stored["failure_policy"]
    (store.path / "experiment.yaml").write_text(yaml.safe_dump(stored))
    check = compare_run(experiment, build_plan(experiment), store)
    assert not check.changed


def test_a_refused_resume_touches_nothing_and_redo_changed_supersedes(tmp_path: Path) -> None:
    store = _run(tmp_path, _load(tmp_path, DOC))
    before = (store.path / "records.jsonl").read_text()
    edited = _load(tmp_path, _edited(load__temperature=0.7))
    plan = build_plan(edited)
    with pytest.raises(StoreError, match=r"load\.temperature: 0\.0 became 0\.7.*4 of its 4 finished point"):
        open_for_resume(edited, plan, str(store.path), tmp_path / "results")
    assert (store.path / "records.jsonl").read_text() == before
    reopened, check = open_for_resume(edited, plan, str(store.path), tmp_path / "results", redo_changed=True)
    assert reopened.records() == [] and len(reopened.superseded_records()) == 4 and len(check.affected) == 4
    assert "temperature: 0.7" in (store.path / "experiment.yaml").read_text()


def test_a_run_made_before_repeats_resumes_and_more_repeats_only_add_points(tmp_path: Path) -> None:
    """Issue 17: ids stay what they were with one repeat, so a run made before repeats existed (its stored
    experiment has no ``repeats``) is unchanged; asking for more repeats adds points and touches none."""
    experiment = _load(tmp_path, DOC)
    store = _run(tmp_path, experiment)
    stored = yaml.safe_load((store.path / "experiment.yaml").read_text())
    for key in ("repeats", "repeats_across_restarts", "until", "flush_cache"):
        stored["load"].pop(key, None)
    for key in ("lossless", "telemetry"):
        stored.pop(key, None)
    (store.path / "experiment.yaml").write_text(yaml.safe_dump(stored))
    assert not compare_run(experiment, build_plan(experiment), store).changed
    more = _load(tmp_path, _edited(load__repeats=2))
    check = compare_run(more, build_plan(more), store)
    assert check.affected == set() and not check.everything
    assert "4 point(s) are new to the plan" in check.changes
