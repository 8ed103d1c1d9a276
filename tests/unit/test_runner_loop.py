"""The sweep loop (orchestrator/sweep/runner.py) on fake launchers: order, failures, the failure policy, pools,
slots that share a target, resume, restore and stop, with no server, socket or host."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from orchestrator.errors import Interrupted, ServiceError
from orchestrator.plan.deployments import Deployment
from orchestrator.runs.store import RunStore
from orchestrator.sweep.events import DeploymentFailed, HostRestored, Notice, PointFinished, SweepStarted
from orchestrator.sweep.frame import StopSignal
from orchestrator.sweep.measure import PointMeasurer
from orchestrator.sweep.runner import SweepOptions, run_sweep
from tests.timing import scaled
from tests.unit.launch_fakes import FakeLauncher, FakeSlot, fake_tools, make_experiment


def _sweep(tmp_path: Path, *slots: FakeSlot, experiment: Any = None, observer: Any = None, **options: Any) -> Any:
    exp = experiment or make_experiment(tmp_path)
    return run_sweep(
        exp,
        SweepOptions(results_root=tmp_path / "results", **options),
        observer=observer,
        launcher=FakeLauncher(*slots),
        measurer=PointMeasurer(exp, fake_tools(list(slots))),
    )


def _events(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]


def test_one_slot_runs_the_plan_in_order_and_restores_once(tmp_path: Path) -> None:
    slot = FakeSlot("box")
    seen: list[Any] = []
    result = _sweep(tmp_path, slot, observer=seen.append)
    assert result.state == "done" and result.points == {"planned": 8, "ok": 8, "failed": 0}
    assert slot.launches == ["autoregressive", "linear", "ddtree(budget=7)", "ddtree(budget=16)"]
    assert (slot.opened, slot.closed) == (1, 1)
    assert [r.concurrency for r in result.records] == [1, 4] * 4
    assert all(r.host == "box" and r.status == "ok" for r in result.records)
    assert all(r.window_file and r.window_file.startswith("windows/p-") for r in result.records)
    stored = RunStore.open(result.run_dir)
    assert [r.point_id for r in stored.records()] == [r.point_id for r in result.records]
    assert stored.info.state == "done" and stored.info.points == result.points
    kinds = [e["kind"] for e in _events(result.run_dir)]
    assert kinds[0] == "start" and kinds[-2:] == ["restore", "end"]
    assert kinds.count("deploy") == 4 and kinds.count("healthy") == 4
    started = next(e for e in seen if isinstance(e, SweepStarted))
    assert (started.total_points, started.pending_points, started.deployments) == (8, 8, 4)
    assert sum(isinstance(e, PointFinished) for e in seen) == 8 and isinstance(seen[-1], HostRestored)


def test_a_deployment_that_never_starts_fails_its_points_with_the_evidence(tmp_path: Path) -> None:
    slot = FakeSlot("box", script=lambda d, _a: "fail" if d.params.get("budget") == 7 else "ok")
    seen: list[Any] = []
    result = _sweep(tmp_path, slot, observer=seen.append)
    assert result.state == "done" and result.points == {"planned": 8, "ok": 6, "failed": 2}
    failed = [r for r in result.records if r.status == "failed"]
    assert [r.params for r in failed] == [{"budget": 7}] * 2
    assert failed[0].error["kind"] == "start_failed"
    assert "CUDA out of memory" in failed[0].error["message"]
    assert any("CUDA out of memory" in line for line in failed[0].error["evidence"])
    assert any(isinstance(e, DeploymentFailed) for e in seen)
    assert slot.launches[-1] == "ddtree(budget=16)"  # the sweep went on


def test_a_deployment_that_cannot_be_applied_fails_with_the_log_tail(tmp_path: Path) -> None:
    slot = FakeSlot("box", script=lambda d, _a: "error" if d.variant == "ddtree" else "ok")
    result = _sweep(tmp_path, slot)
    failed = [r for r in result.records if r.status == "failed"]
    assert len(failed) == 4 and {r.error["kind"] for r in failed} == {"deploy_failed"}
    assert "cannot write the configuration" in failed[0].error["message"]
    assert "deploy_failed" in [e["kind"] for e in _events(result.run_dir)]


def test_a_baseline_that_cannot_start_stops_the_sweep(tmp_path: Path) -> None:
    slot = FakeSlot("box", script=lambda d, _a: "fail" if d.variant == "linear" else "ok")
    seen: list[Any] = []
    result = _sweep(tmp_path, slot, observer=seen.append)
    assert result.state == "stopped"
    assert result.stop_reason is not None and result.stop_reason.startswith("the baseline linear cannot start on box")
    assert slot.launches == ["autoregressive", "linear"] and slot.closed == 1
    assert RunStore.open(result.run_dir).info.stop_reason == result.stop_reason
    assert any(isinstance(e, Notice) and e.level == "error" for e in seen)


def test_consecutive_failed_deployments_stop_the_sweep(tmp_path: Path) -> None:
    exp = make_experiment(
        tmp_path, extra="failure_policy: {stop_on_baseline_failure: false, max_consecutive_failed_deployments: 2}"
    )
    slot = FakeSlot("box", script=lambda d, _a: "fail")
    result = _sweep(tmp_path, slot, experiment=exp)
    assert result.state == "stopped" and result.stop_reason.startswith("2 deployments in a row could not start")
    assert slot.launches == ["autoregressive", "linear"]


def test_nothing_but_failures_is_a_failed_run(tmp_path: Path) -> None:
    exp = make_experiment(
        tmp_path, extra="failure_policy: {stop_on_baseline_failure: false, max_consecutive_failed_deployments: 0}"
    )
    result = _sweep(tmp_path, FakeSlot("box", script=lambda d, _a: "fail"), experiment=exp)
    assert result.state == "failed" and result.points == {"planned": 8, "ok": 0, "failed": 8}


def test_a_server_that_dies_is_launched_again_once(tmp_path: Path) -> None:
    slot = FakeSlot("box", script=lambda d, a: "die" if d.variant == "linear" and a == 1 else "ok")
    result = _sweep(tmp_path, slot)
    linear = [r for r in result.records if r.variant == "linear"]
    assert [(r.concurrency, r.status, r.attempt) for r in linear] == [(1, "failed", 1), (4, "ok", 1)]
    assert linear[0].error["kind"] == "server_died"
    assert slot.launches.count("linear") == 2
    assert result.state == "done"


def test_a_server_that_dies_again_fails_what_is_left(tmp_path: Path) -> None:
    slot = FakeSlot("box", script=lambda d, _a: "die" if d.variant == "linear" else "ok")
    result = _sweep(tmp_path, slot)
    linear = [r for r in result.records if r.variant == "linear"]
    assert [(r.concurrency, r.status, r.error["kind"]) for r in linear] == [
        (1, "failed", "server_died"),
        (4, "failed", "server_died"),
    ]
    assert slot.launches.count("linear") == 2
    once = FakeSlot("box", script=lambda d, _a: "die" if d.variant == "linear" else "ok")
    result = _sweep(tmp_path, once, redeploy_limit=0)
    linear = [r for r in result.records if r.variant == "linear"]
    assert [r.error["message"] for r in linear] == ["the server stopped during the point", "the server is not running"]
    assert once.launches.count("linear") == 1


def test_a_pool_measures_baselines_on_every_host_and_the_rest_once(tmp_path: Path) -> None:
    exp = make_experiment(tmp_path, hosts='hosts: [{ssh: "root@a"}, {ssh: "root@b"}]')
    a, b = FakeSlot("root@a", launch_seconds=0.05), FakeSlot("root@b", launch_seconds=0.05)
    result = _sweep(tmp_path, a, b, experiment=exp)
    assert result.state == "done" and result.points == {"planned": 12, "ok": 12, "failed": 0}
    for slot in (a, b):
        assert slot.launches[:2] == ["autoregressive", "linear"]
    assert sorted(a.launches[2:] + b.launches[2:]) == ["ddtree(budget=16)", "ddtree(budget=7)"]
    assert {r.window_file.split("/")[1] for r in result.records} == {"root_a", "root_b"}  # per host windows


def test_slots_that_share_a_target_measure_each_deployment_once_at_the_same_time(tmp_path: Path) -> None:
    """The seam a scheduler's launcher uses: N slots of one target (a partition) run N deployments at once,
    the baselines once for all of them."""
    one, two = FakeSlot("cluster", launch_seconds=0.2), FakeSlot("cluster", launch_seconds=0.2)
    two.url = "http://node2:9000"
    result = _sweep(tmp_path, one, two)
    assert result.state == "done" and result.points == {"planned": 8, "ok": 8, "failed": 0}
    assert sorted(one.launches + two.launches) == sorted(
        ["autoregressive", "linear", "ddtree(budget=7)", "ddtree(budget=16)"]
    )
    assert one.launches and two.launches
    starts = sorted(t for s in (one, two) for (_k, _l, t) in s.events)
    assert starts[1] - starts[0] < 0.15  # the second slot did not wait for the first
    assert len({r.point_id for r in result.records}) == 8 == len(result.records)


def test_resume_runs_only_what_is_left_reading_the_records_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stop = StopSignal()
    exp = make_experiment(tmp_path)
    slot = FakeSlot("box")

    def stop_after_linear(event: Any) -> None:
        if isinstance(event, PointFinished) and event.label == "C=4" and len(slot.launches) == 2:
            stop.request()

    with pytest.raises(Interrupted) as info:
        run_sweep(
            exp,
            SweepOptions(results_root=tmp_path / "results"),
            observer=stop_after_linear,
            stop=stop,
            launcher=FakeLauncher(slot),
            measurer=PointMeasurer(exp, fake_tools([slot])),
        )
    assert "resume with specsweep sweep " in str(info.value) and " --resume " in str(info.value)
    reads: list[str] = []
    real = RunStore.records

    def counted(self: RunStore) -> Any:
        reads.append(str(self.path))
        return real(self)

    monkeypatch.setattr(RunStore, "records", counted)
    again = FakeSlot("box")
    result = _sweep(tmp_path, again, experiment=exp, resume="latest")
    assert reads == [str(result.run_dir)]  # records.jsonl read once, when the run opened
    # linear measured its points; the stop came before its lossless probe (which follows them): deployed again
    # for the probe alone.
    assert again.launches == ["linear", "ddtree(budget=7)", "ddtree(budget=16)"]
    assert result.state == "done" and result.points == {"planned": 8, "ok": 8, "failed": 0}
    assert len(result.records) == 4


def test_a_restore_that_fails_is_the_error_the_run_ends_with(tmp_path: Path) -> None:
    slot = FakeSlot("box", restore_error="box: systemctl daemon-reload failed")
    with pytest.raises(ServiceError) as info:
        _sweep(tmp_path, slot)
    assert "box: restore failed: box: systemctl daemon-reload failed" in str(info.value)
    assert "(run directory: " in str(info.value)


def test_an_error_opening_a_slot_ends_the_run_failed_and_restored(tmp_path: Path) -> None:
    slot = FakeSlot("box")

    def refuse(recovered: Any) -> None:
        raise ServiceError("box: http://box:9000/health already answers")

    slot.open = refuse  # type: ignore[method-assign]
    with pytest.raises(ServiceError) as info:
        _sweep(tmp_path, slot)
    assert str(info.value).endswith("; hosts restored)")
    assert slot.closed == 1 and slot.launches == []
    run_dir = next((tmp_path / "results" / "fake").iterdir())
    assert json.loads((run_dir / "run.json").read_text())["state"] == "failed"


def test_a_stop_request_ends_the_run_interrupted_and_restored(tmp_path: Path) -> None:
    stop = StopSignal()
    exp = make_experiment(tmp_path)
    slot = FakeSlot("box")

    def stop_soon(event: Any) -> None:
        if isinstance(event, PointFinished):
            stop.request()

    with pytest.raises(Interrupted):
        run_sweep(
            exp,
            SweepOptions(results_root=tmp_path / "results"),
            observer=stop_soon,
            stop=stop,
            launcher=FakeLauncher(slot),
            measurer=PointMeasurer(exp, fake_tools([slot])),
        )
    run_dir = next((tmp_path / "results" / "fake").iterdir())
    assert json.loads((run_dir / "run.json").read_text())["state"] == "interrupted"
    assert slot.closed == 1 and slot.launches == ["autoregressive"]


def test_every_point_failing_its_requests_is_a_failed_point(tmp_path: Path) -> None:
    exp = make_experiment(tmp_path)
    slot = FakeSlot("box")
    tools = fake_tools([slot], all_fail=lambda settings: settings.concurrency == 4)
    result = run_sweep(
        exp,
        SweepOptions(results_root=tmp_path / "results"),
        launcher=FakeLauncher(slot),
        measurer=PointMeasurer(exp, tools),
    )
    assert {(r.concurrency, r.status) for r in result.records} == {(1, "ok"), (4, "failed")}
    assert result.state == "done"


def test_a_deployment_released_before_the_next_one(tmp_path: Path) -> None:
    released: list[Deployment] = []
    slot = FakeSlot("box")
    real_launch = slot.launch

    def launch(deployment: Deployment, **kwargs: Any) -> Any:
        if slot.server is not None and slot.server.released:
            released.append(slot.server.deployment)
        return real_launch(deployment, **kwargs)

    slot.launch = launch  # type: ignore[method-assign]
    _sweep(tmp_path, slot)
    assert [d.label for d in released] == ["autoregressive", "linear", "ddtree(budget=7)"]


def test_worker_threads_are_joined(tmp_path: Path) -> None:
    exp = make_experiment(tmp_path, hosts='hosts: [{ssh: "root@a"}, {ssh: "root@b"}]')
    before = threading.active_count()
    _sweep(tmp_path, FakeSlot("root@a"), FakeSlot("root@b"), experiment=exp)
    deadline = time.monotonic() + scaled(5)
    while threading.active_count() > before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert threading.active_count() <= before


def test_a_stop_asked_before_the_run_is_made_makes_no_run(tmp_path: Path) -> None:
    """A Ctrl-C while the plan is made (verify-schedule's derivation ends there; issue 58, S13): no run directory,
    no deployment; the interrupt says no run was made."""
    stop = StopSignal()
    stop.request()
    exp = make_experiment(tmp_path)
    slot = FakeSlot("box")
    with pytest.raises(Interrupted, match="no run directory was made"):
        run_sweep(
            exp,
            SweepOptions(results_root=tmp_path / "results"),
            stop=stop,
            launcher=FakeLauncher(slot),
            measurer=PointMeasurer(exp, fake_tools([slot])),
        )
    assert slot.launches == [] and not (tmp_path / "results").exists()
