"""The sweep's count of points (orchestrator/sweep/pointcount.py): points as the answer counts them, a
configuration at a load with its repeats combined, not measurements; a point measured again counts once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from orchestrator.experiment.schema import load_experiment
from orchestrator.plan.deployments import Deployment, LoadPoint, build_plan
from orchestrator.runs.store import Record
from orchestrator.sweep.pointcount import PointCount
from orchestrator.sweep.schedule import Schedule
from tests.unit.launch_fakes import EXPERIMENT


def _plan(tmp_path: Path, repeats: int) -> Any:
    text = EXPERIMENT.format(hosts="host: local", warmup=0, extra="").replace(
        "warmup: 0}", f"warmup: 0, repeats: {repeats}}}"
    )
    path = tmp_path / "fake.yaml"
    path.write_text(text)
    return build_plan(load_experiment(path))


def _record(deployment: Deployment, point: LoadPoint, host: str = "local", status: str = "ok") -> Record:
    return Record(
        run_id="r",
        experiment="fake",
        deployment_id=deployment.id,
        point_id=point.id,
        config_hash=deployment.config_hash,
        host=host,
        variant=deployment.variant,
        baseline=deployment.baseline,
        mode=point.mode,
        concurrency=point.concurrency,
        rate=point.rate,
        status=status,  # type: ignore[arg-type]
        started_at="2026-01-01T00:00:00.000Z",
        finished_at="2026-01-01T00:00:01.000Z",
        repeat=point.repeat,
    )


def test_repeats_are_one_point_done_when_its_last_repeat_is(tmp_path: Path) -> None:
    plan = _plan(tmp_path, repeats=2)
    assert plan.load_point_count == 16  # 4 configurations x 2 loads x 2 repeats
    count = PointCount(plan, Schedule(plan, ["local"], set()).total_points, pooled=False)
    assert count.total == 8 and count.done == 0
    first = plan.deployments[0]
    for point in first.load_points:
        if point.repeat == 1:
            count.add(_record(first, point))
    assert count.done == 0  # the first repeat of each load: no point is whole yet
    (second,) = [p for p in first.load_points if p.repeat == 2 and p.concurrency == 1]
    count.add(_record(first, second))
    assert count.done == 1
    count.add(_record(first, second))  # measured again: still one point
    assert count.done == 1
    (skipped,) = [p for p in first.load_points if p.repeat == 2 and p.concurrency == 4]
    count.add(_record(first, skipped, status="skipped"))  # measured nothing
    assert count.done == 1
    count.add(_record(first, skipped, status="failed"))  # a failed point is done (as the answer counts it)
    assert count.done == 2


def test_without_repeats_a_point_is_a_measurement_and_a_pool_counts_baselines_per_host(tmp_path: Path) -> None:
    plan = _plan(tmp_path, repeats=1)
    count = PointCount(plan, Schedule(plan, ["local"], set()).total_points, pooled=False)
    assert count.total == 8
    pool = Schedule(plan, ["a", "b"], set())
    count = PointCount(plan, pool.total_points, pooled=True)  # the baselines' 4 points on each host, the rest once
    assert count.total == 12
    baseline, tree = plan.deployments[0], plan.deployments[2]
    for host in ("a", "b"):
        count.add(_record(baseline, baseline.load_points[0], host=host))
        count.add(_record(tree, tree.load_points[0], host=host))  # a shared point: one, wherever measured
    assert count.done == 3
    assert count.by_status([_record(baseline, baseline.load_points[0], host="a", status="failed")]) == {
        "planned": 12,
        "ok": 0,
        "failed": 1,
    }


def test_the_statuses_of_points_combine_their_windows(tmp_path: Path) -> None:
    plan = _plan(tmp_path, repeats=2)
    count = PointCount(plan, plan.load_point_count, pooled=False)
    first = plan.deployments[0]
    c1 = [p for p in first.load_points if p.concurrency == 1]
    c4 = [p for p in first.load_points if p.concurrency == 4]
    records = [_record(first, c1[0], status="failed"), _record(first, c1[1]), _record(first, c4[0], status="failed")]
    # C=1: one window ok (a point with a successful window is ok); C=4: none ok.
    assert count.by_status(records) == {"planned": 8, "ok": 1, "failed": 1}
