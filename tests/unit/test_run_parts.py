"""The parts the sweep loop is made of: the schedule (orchestrator/sweep/schedule.py), the failure policy
(policy.py), the run skeleton shared with playbooks (runs.py), the resume state (store.py) and opening a run
(opening.py)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from orchestrator.errors import ConfigError, HostError, Interrupted, ServiceError, StoreError
from orchestrator.experiment.schema import FailurePolicySpec, load_experiment
from orchestrator.plan.deployments import build_plan
from orchestrator.runs.identity import resolved_experiment
from orchestrator.runs.store import Record, ResumeState, RunStore
from orchestrator.sweep.frame import RunEnd, RunFrame, StopSignal
from orchestrator.sweep.opening import OpenOptions, open_run
from orchestrator.sweep.policy import FailureTracker
from orchestrator.sweep.schedule import Schedule
from tests.unit.launch_fakes import make_experiment


def _record(point_id: str, host: str = "box", status: str = "ok", attempt: int = 1, **extra: Any) -> Record:
    return Record(
        run_id="r",
        experiment="fake",
        deployment_id="d",
        point_id=point_id,
        config_hash="c",
        host=host,
        variant="v",
        mode="concurrency",
        concurrency=1,
        status=status,  # type: ignore[arg-type]
        attempt=attempt,
        started_at="2026-01-01T00:00:00.000Z",
        finished_at="2026-01-01T00:00:01.000Z",
        **extra,
    )


# -- the schedule ----------------------------------------------------------------------------------------


def _drain(schedule: Schedule, target: str, skipped: list[str] | None = None) -> list[str]:
    out = skipped if skipped is not None else []
    return [d.label for d in schedule.deployments_for(target, going=lambda: True, skipped=lambda: out.append("skip"))]


def test_one_target_runs_the_plan_in_order(tmp_path: Path) -> None:
    plan = build_plan(make_experiment(tmp_path))
    schedule = Schedule(plan, ["box"], set())
    assert not schedule.pooled and schedule.total_points == 8 and schedule.pending_count() == 8
    assert _drain(schedule, "box") == ["autoregressive", "linear", "ddtree(budget=7)", "ddtree(budget=16)"]


def test_each_target_gets_the_baselines_and_shares_the_rest(tmp_path: Path) -> None:
    plan = build_plan(make_experiment(tmp_path))
    schedule = Schedule(plan, ["a", "b"], set())
    assert schedule.pooled and schedule.total_points == 4 * 2 + 4 and schedule.pending_count() == 4 * 2 + 4
    first = _drain(schedule, "a")
    second = _drain(schedule, "b")
    assert first == ["autoregressive", "linear", "ddtree(budget=7)", "ddtree(budget=16)"]
    assert second == ["autoregressive", "linear"]  # the shared ones were taken


def test_slots_of_one_target_share_its_baselines(tmp_path: Path) -> None:
    plan = build_plan(make_experiment(tmp_path))
    schedule = Schedule(plan, ["cluster", "cluster"], set())
    assert schedule.targets == ["cluster"] and not schedule.pooled
    one = schedule.deployments_for("cluster", going=lambda: True, skipped=lambda: None)
    two = schedule.deployments_for("cluster", going=lambda: True, skipped=lambda: None)
    taken = [next(one).label, next(two).label, next(one).label, next(two).label]
    assert taken == ["autoregressive", "linear", "ddtree(budget=7)", "ddtree(budget=16)"]


def test_finished_points_are_not_pending_and_finished_shared_deployments_are_skipped(tmp_path: Path) -> None:
    plan = build_plan(make_experiment(tmp_path))
    ddtree7 = plan.deployments[2]
    final = {("b", p.id) for p in ddtree7.load_points} | {("a", plan.deployments[0].load_points[0].id)}
    schedule = Schedule(plan, ["a", "b"], final)
    assert [p.label for p in schedule.pending_points("a", plan.deployments[0])] == ["C=4"]
    assert schedule.shared_done(ddtree7)
    skipped: list[str] = []
    assert _drain(schedule, "a", skipped) == ["autoregressive", "linear", "ddtree(budget=16)"]
    assert skipped == ["skip"]
    assert schedule.pending_count() == 7 + 2
    assert schedule.remaining_loads() == 4 + 2  # the ETA counts a shared deployment until every target has it


def test_a_stopped_sweep_takes_no_shared_deployment(tmp_path: Path) -> None:
    plan = build_plan(make_experiment(tmp_path))
    schedule = Schedule(plan, ["a"], set())
    taken = [d.label for d in schedule.deployments_for("a", going=lambda: False, skipped=lambda: None)]
    assert taken == ["autoregressive", "linear"]


def test_a_schedule_needs_a_target(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        Schedule(build_plan(make_experiment(tmp_path)), [], set())


# -- the failure policy ----------------------------------------------------------------------------------


def test_the_failure_policy(tmp_path: Path) -> None:
    plan = build_plan(make_experiment(tmp_path))
    baseline, other = plan.deployments[0], plan.deployments[2]
    tracker = FailureTracker(FailurePolicySpec())
    assert tracker.failed("a", other, "a: no") is None
    assert tracker.failed("a", baseline, "a: failed to start") == (
        "the baseline autoregressive cannot start on a: failed to start"
    )
    assert tracker.failed("a", baseline, "again") is None and tracker.halted is not None  # set once
    tracker = FailureTracker(FailurePolicySpec(stop_on_baseline_failure=False, max_consecutive_failed_deployments=2))
    assert tracker.failed("a", baseline, "x") is None
    tracker.succeeded("a")
    assert tracker.failed("a", other, "x") is None
    assert tracker.failed("b", other, "y") is None  # counted per target
    assert tracker.failed("a", other, "") == "2 deployments in a row could not start on a, the last ddtree(budget=7)"
    never = FailureTracker(FailurePolicySpec(stop_on_baseline_failure=False, max_consecutive_failed_deployments=0))
    assert all(never.failed("a", other, "x") is None for _ in range(10))


# -- the run skeleton ------------------------------------------------------------------------------------


@pytest.fixture
def store(tmp_path: Path) -> RunStore:
    return RunStore.create(tmp_path, "fake", {"name": "fake"}, {"deployments": []})


def _end_events(store: RunStore) -> list[dict[str, Any]]:
    return [e for e in store.events() if e["kind"] == "end"]


def test_a_frame_restores_and_records_the_end_of_a_good_run(store: RunStore) -> None:
    order: list[str] = []
    frame = RunFrame(store, StopSignal())
    end = frame.run(
        lambda: order.append("body") or "done",  # type: ignore[func-returns-value]
        restore=lambda: order.append("restore") or [],  # type: ignore[func-returns-value]
        closing=lambda e: order.append(f"closing {e.state}") or {"points": {"ok": 1}},  # type: ignore[func-returns-value]
    )
    assert order == ["body", "restore", "closing done"]
    assert (end.state, end.error, end.restore_errors) == ("done", None, [])
    assert _end_events(store)[0]["points"] == {"ok": 1}
    assert RunStore.open(store.path).info.state == "done"
    frame.raise_for(end, named=lambda e: e, interrupted="x")


def test_an_error_ends_the_run_failed_and_is_named(store: RunStore) -> None:
    frame = RunFrame(store, StopSignal())

    def body() -> str:
        raise HostError("gone", host="box")

    end = frame.run(body, restore=lambda: [])
    assert end.state == "failed" and isinstance(end.error, HostError)
    assert RunStore.open(store.path).info.state == "failed"
    with pytest.raises(HostError, match=r"^box: gone \(named\)$"):
        frame.raise_for(end, named=lambda e: HostError(f"{e} (named)"), interrupted="x")
    with pytest.raises(HostError, match=r"^box: gone$"):
        frame.raise_for(end, named=lambda e: e, interrupted="x")


def test_restore_problems_come_before_the_error(store: RunStore) -> None:
    frame = RunFrame(store, StopSignal())
    end = frame.run(lambda: (_ for _ in ()).throw(ConfigError("bad")), restore=lambda: ["box: restore failed: x"])
    with pytest.raises(ServiceError, match=r"box: restore failed: x \(run directory: "):
        frame.raise_for(end, named=lambda e: e, interrupted="x")


def test_a_bug_propagates_as_it_is(store: RunStore) -> None:
    frame = RunFrame(store, StopSignal())
    end = frame.run(lambda: (_ for _ in ()).throw(RuntimeError("bug")), restore=lambda: [])
    with pytest.raises(RuntimeError, match="bug"):
        frame.raise_for(end, named=lambda e: e, interrupted="x")


def test_ctrl_c_ends_the_run_interrupted_after_the_way_out(store: RunStore) -> None:
    stop = StopSignal()
    restored: list[bool] = []
    frame = RunFrame(store, stop)

    def body() -> str:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        frame.run(body, restore=lambda: restored.append(True) or [])  # type: ignore[func-returns-value]
    assert restored == [True] and stop
    assert RunStore.open(store.path).info.state == "interrupted"
    with pytest.raises(Interrupted, match="stopped here"):
        frame.raise_for(RunEnd("interrupted"), named=lambda e: e, interrupted="stopped here")


def test_a_store_that_cannot_be_written_does_not_replace_the_error(
    store: RunStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(*args: Any, **kwargs: Any) -> None:
        raise StoreError("disk full")

    monkeypatch.setattr(store, "event", full)
    monkeypatch.setattr(store, "set_state", full)
    end = RunFrame(store, StopSignal()).run(lambda: (_ for _ in ()).throw(HostError("gone")), restore=lambda: [])
    assert isinstance(end.error, HostError)


def test_stop_signal_twice_is_a_hurry() -> None:
    stop = StopSignal()
    assert not stop
    stop.request()
    assert stop and not stop.hurry.is_set()
    stop.request()
    assert stop.hurry.is_set()


# -- the resume state and opening a run ------------------------------------------------------------------


def test_resume_state_from_records() -> None:
    records = [
        _record("p1", attempt=1, status="failed"),
        _record("p1", attempt=2),
        _record("p2", status="failed"),
        _record("p3", status="skipped"),
    ]
    superseded = [_record("p4", attempt=3)]
    state = ResumeState.from_records(records, superseded)
    assert list(state.latest) == [("box", "p1"), ("box", "p2"), ("box", "p3")]
    assert state.final == {("box", "p1"), ("box", "p2")}
    assert state.attempts == {("box", "p1"): 2, ("box", "p2"): 1, ("box", "p3"): 1, ("box", "p4"): 3}
    assert state.next_attempt("box", "p4") == 4 and state.next_attempt("box", "p9") == 1
    retry = ResumeState.from_records(records, retry_failed=True)
    assert retry.final == {("box", "p1")}
    retry.add(_record("p2", attempt=2, status="failed"))
    assert ("box", "p2") in retry.final  # failed again: not retried twice in one run
    retry.add(_record("p5", status="skipped"))
    assert ("box", "p5") not in retry.final
    retry.supersede({("box", "p1")})
    assert ("box", "p1") not in retry.latest and ("box", "p1") not in retry.final
    assert retry.attempts[("box", "p1")] == 2


def test_a_new_run_reads_nothing_of_its_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reads: list[str] = []
    real = RunStore.records
    monkeypatch.setattr(RunStore, "records", lambda self: reads.append("read") or real(self))
    exp = make_experiment(tmp_path)
    opened = open_run(exp, build_plan(exp), OpenOptions(results_root=tmp_path / "results"))
    assert not opened.resumed and reads == [] and opened.notices == []
    assert opened.state.latest == {} and opened.store.info.state == "running"
    assert opened.store.info.hosts == ["local (this machine)"]


def test_a_resumed_run_reads_its_records_once_and_supersedes_in_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    exp = make_experiment(tmp_path)
    plan = build_plan(exp)
    first = open_run(exp, plan, OpenOptions(results_root=tmp_path / "results"))
    kept, changed = plan.deployments[0].load_points[0].id, plan.deployments[2].load_points[0].id
    first.store.append(_record(kept, "local"))
    first.store.append(_record(changed, "local", attempt=2))
    first.store.set_state("interrupted")
    (tmp_path / "fake.yaml").write_text((tmp_path / "fake.yaml").read_text().replace("--budget", "--tree-budget"))
    edited = load_experiment(tmp_path / "fake.yaml")
    reads: list[str] = []
    real = RunStore.records
    monkeypatch.setattr(RunStore, "records", lambda self: reads.append("read") or real(self))
    options = OpenOptions(results_root=tmp_path / "results", resume="latest")
    with pytest.raises(StoreError, match="the experiment changed since that run"):
        open_run(edited, build_plan(edited), options)
    reads.clear()
    opened = open_run(edited, build_plan(edited), replace(options, redo_changed=True))
    assert opened.resumed and opened.store.path == first.store.path and reads == ["read"]
    assert set(opened.state.latest) == {("local", kept)}  # the changed configuration's record was superseded
    assert opened.state.attempts[("local", changed)] == 2  # and still counts for attempts
    superseded = (first.store.path / "superseded.jsonl").read_text().splitlines()
    assert [json.loads(line)["point_id"] for line in superseded] == [changed]
    assert RunStore.open(first.store.path).info.state == "running"


def test_a_new_run_adopts_reused_baselines_into_its_state(tmp_path: Path) -> None:
    exp = make_experiment(tmp_path)
    plan = build_plan(exp)
    earlier = RunStore.create(tmp_path / "results", exp.name, resolved_experiment(exp), plan.to_json_dict())
    for dep in plan.deployments[:2]:
        for point in dep.load_points:
            earlier.append(
                _record(point.id, "local").model_copy(
                    update={"deployment_id": dep.id, "config_hash": dep.config_hash, "baseline": True}
                )
            )
    earlier.set_state("done")
    opened = open_run(exp, plan, OpenOptions(results_root=tmp_path / "results", baselines_from=str(earlier.path)))
    assert opened.notices[0] == f"reused 4 baseline point(s) from {earlier.path}"
    assert len(opened.state.final) == 4 and all(r.baseline_source for r in opened.state.latest.values())
