"""The ETA model: what it learns from the run's own observations (wall clock, per worker thread) and from earlier
runs of the experiment, and what it must not learn (points that were never measured)."""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

import pytest

from orchestrator.plan.eta import EtaHistory, EtaModel, eta_history

RUNS = Path(__file__).resolve().parents[1] / "data" / "runs"


def test_before_anything_is_observed_the_plans_guesses_stand() -> None:
    model = EtaModel(expected_load_seconds=60.0, remaining_loads=3, remaining_point_estimates=30.0)
    assert model.remaining() == pytest.approx(3 * 60.0 + 30.0)
    assert model.remaining(parallel=2) == pytest.approx((3 * 60.0 + 30.0) / 2)


def test_a_deployment_costs_what_the_wall_clock_says_and_points_scale_to_their_measure() -> None:
    model = EtaModel(expected_load_seconds=60.0, remaining_loads=4, remaining_point_estimates=40.0)
    time.sleep(0.2)  # stopping the old server, starting the new one (before load_observed)
    model.load_observed(0.1)  # the health wait alone: less than the deployment really cost
    time.sleep(0.1)  # warm-up
    model.point_observed(estimated=10.0, seconds=0.05)
    cost = model.deployment_seconds()
    assert 0.25 <= cost < 1.0  # stop + start + warm-up, not only the 0.1 s load nor the 60 s guess
    assert model.point_scale() == pytest.approx(0.005)
    assert model.remaining() == pytest.approx(3 * cost + 30.0 * 0.005, rel=1e-6)


def test_points_never_measured_teach_nothing() -> None:
    model = EtaModel(expected_load_seconds=1.0, remaining_loads=2, remaining_point_estimates=20.0)
    model.point_observed(estimated=5.0, seconds=2.5)
    model.point_observed(estimated=5.0, seconds=0.0)  # a deployment that did not start fails its points at once
    assert model.point_scale() == pytest.approx(0.5)
    assert model.remaining_point_estimates == pytest.approx(10.0)


def test_each_worker_thread_closes_its_own_deployments() -> None:
    model = EtaModel(expected_load_seconds=60.0, remaining_loads=4, remaining_point_estimates=0.0)

    def worker(pause: float) -> None:
        time.sleep(pause)
        model.load_observed(pause)
        model.point_observed(estimated=1.0, seconds=0.01)

    threads = [threading.Thread(target=worker, args=(p,)) for p in (0.05, 0.3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert 0.1 < model.deployment_seconds() < 0.5  # the mean of the two workers' costs


def test_history_stands_in_until_the_run_observes_its_own() -> None:
    history = EtaHistory(deployment_seconds=2.0, point_scale=0.1, runs=1)
    model = EtaModel(expected_load_seconds=60.0, remaining_loads=5, remaining_point_estimates=100.0, history=history)
    assert model.remaining() == pytest.approx(5 * 2.0 + 100.0 * 0.1)
    model.point_observed(estimated=10.0, seconds=5.0)
    assert model.point_scale() == pytest.approx(0.5)  # its own measure wins


def test_eta_history_reads_earlier_runs_of_the_experiment(tmp_path: Path) -> None:
    root = tmp_path / "results"
    shutil.copytree(RUNS / "sim-demo", root / "sim-demo" / "20260101T000000Z-000001")
    history = eta_history(root, "sim-demo")
    assert history.runs == 1 and history.known
    assert history.deployment_seconds is not None and 0.5 < history.deployment_seconds < 60
    assert history.point_scale is not None and history.point_scale > 0
    assert "learned from 1 earlier run" in history.describe()
    assert not eta_history(root, "another").known
    assert not eta_history(root, "sim-demo", exclude=root / "sim-demo" / "20260101T000000Z-000001").known


def test_each_deployments_cost_is_held_against_its_own_planned_start() -> None:
    """The first deployment (the AR baseline: three lossless passes) cost more than the others by plan; its cost
    beyond its own planned start, not its whole cost, sets the pace of the rest (issue 50: after the demo's first
    deployment the ETA said 2m31s for 1m45s left)."""
    from types import SimpleNamespace

    model = EtaModel(expected_load_seconds=1.0, remaining_loads=3, remaining_point_estimates=0.0)
    baseline = SimpleNamespace(wall_start_seconds=2.0)  # planned: 2 s, where the others plan 0.5 s (mean 1 s)
    taken = list(model.planned([baseline]))
    assert taken == [baseline]
    time.sleep(0.25)  # what the baseline really cost before its first point: 0.25 s
    model.load_observed(0.05)
    model.point_observed(estimated=1.0, seconds=0.01)
    # 0.25 s against a 2 s plan: 1.75 s less; the others then cost the plan's mean less that, at least 0.
    assert model.deployment_seconds() == 0.0
    other = SimpleNamespace(wall_start_seconds=0.5)
    list(model.planned([other]))
    time.sleep(0.6)
    model.load_observed(0.05)
    model.point_observed(estimated=1.0, seconds=0.01)
    errors = [0.25 - 2.0, 0.6 - 0.5]
    assert model.deployment_seconds() == pytest.approx(max(0.0, 1.0 + sum(errors) / 2), abs=0.1)


def test_what_the_sweep_did_before_a_worker_took_its_first_deployment_is_no_deployments_cost() -> None:
    from types import SimpleNamespace

    model = EtaModel(expected_load_seconds=0.1, remaining_loads=2, remaining_point_estimates=0.0)
    time.sleep(0.4)  # opening the run, the host's lock, restoring what a killed run left
    list(model.planned([SimpleNamespace(wall_start_seconds=0.1)]))
    time.sleep(0.1)
    model.load_observed(0.05)
    model.point_observed(estimated=1.0, seconds=0.01)
    assert model.deployment_seconds() < 0.3  # about 0.1 s (its plan), not the 0.5 s since the model began


class _Clock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_engines_speed_before_the_first_point_scales_what_is_left() -> None:
    """Issue 59: a slow engine's ETA was the plan's guess until its first point ended (a lossless probe of 17
    minutes, ETA unchanged). The warm-up's and the probe's answers alone, timed against the plan's pace, give the
    engine's speed: it scales the points, the probe of every start to come, and what is left of the probe under
    way."""
    clock = _Clock()
    model = EtaModel(
        expected_load_seconds=70.0,  # 60 s of health wait and 10 s of probe per start, at the plan's pace
        remaining_loads=3,
        remaining_point_estimates=100.0,
        expected_probe_seconds=10.0,
        clock=clock,
    )
    assert model.remaining() == pytest.approx(3 * 70.0 + 100.0)
    clock.now += 60.0
    model.load_observed(60.0)  # the first deployment is healthy
    # The warm-up: two requests alone, each planned at 1 s, took 10 s each (the engine runs at a tenth).
    model.phase_started(0.0)
    clock.now += 10.0
    model.requests_done(1, 1.0)
    clock.now += 10.0
    model.requests_done(1, 1.0)
    model.phase_ended()
    assert model.speed_scale() == pytest.approx(10.0)
    assert model.point_scale() == pytest.approx(10.0)  # no point yet: the engine's speed stands in
    # Two starts to come: 60 s of health wait each (as observed) and the probe at a tenth of the plan's speed.
    assert model.deployment_seconds() == pytest.approx(60.0 + 10.0 * 10.0)
    assert model.remaining() == pytest.approx(2 * 160.0 + 100.0 * 10.0)
    # The probe under way: planned at 10 s, so 100 s at this speed; 30 s of it have run.
    model.phase_started(10.0)
    clock.now += 30.0
    assert model.remaining() == pytest.approx(2 * 160.0 + 1000.0 + 70.0)
    clock.now += 200.0  # longer than its estimate: what is left of it is none, never negative
    assert model.remaining() == pytest.approx(2 * 160.0 + 1000.0)
    # Once a point is measured, the points' own ratio wins, and the deployment's whole cost is known: 310 s from
    # the model's start to the point's (health 60, warm-up 20, probe 230).
    clock.now += 50.0
    model.point_observed(estimated=10.0, seconds=50.0)
    assert model.point_scale() == pytest.approx(5.0)
    assert model.deployment_seconds() == pytest.approx(310.0)
    assert model.remaining() == pytest.approx(2 * 310.0 + 90.0 * 5.0, rel=1e-6)


def test_the_engines_speed_comes_before_an_earlier_runs_point_scale() -> None:
    clock = _Clock()
    history = EtaHistory(deployment_seconds=5.0, point_scale=1.0, runs=1)
    model = EtaModel(
        expected_load_seconds=5.0, remaining_loads=0, remaining_point_estimates=10.0, history=history, clock=clock
    )
    assert model.remaining() == pytest.approx(10.0)
    model.phase_started(0.0)
    clock.now += 8.0
    model.requests_done(2, 1.0)  # 4 s a request planned at 1 s: this run's engine is slower than the last one
    assert model.remaining() == pytest.approx(40.0)


def test_requests_timed_with_no_phase_or_no_estimate_teach_nothing() -> None:
    clock = _Clock()
    model = EtaModel(expected_load_seconds=1.0, remaining_loads=1, remaining_point_estimates=10.0, clock=clock)
    clock.now += 5.0
    model.requests_done(1, 1.0)  # no phase began on this worker: no mark to time from
    model.phase_started(0.0)
    clock.now += 5.0
    model.requests_done(1, 0.0)  # the plan expects nothing of it
    model.requests_done(0, 1.0)
    assert model.speed_scale() is None
    assert model.point_scale() == 1.0
