"""Reusing an earlier run's baselines: accepted when configuration, host and workload are identical, refused
(with the reason) when anything that shapes the measurement changed. Run directories are written with the
real store; nothing is deployed."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from orchestrator.errors import StoreError
from orchestrator.experiment.schema import Experiment, load_experiment
from orchestrator.plan.deployments import Plan, build_plan
from orchestrator.runs.store import Record, RunStore
from orchestrator.sweep.baselines import adopt_reused, baselines_source, reuse_baselines
from orchestrator.sweep.runner import resolved_experiment

EXPERIMENT = """\
name: reuse
host: {host}
service:
  kind: process
  command: "/opt/server --port 9000 {{spec_args}}"
server: {{url: "http://127.0.0.1:9000"}}
engine: sim
variants:
  autoregressive: {{spec_args: "--algorithm ar"}}
  linear: {{spec_args: "--algorithm linear --draft-tokens {drafts}"}}
  ddtree:
    spec_args: "--algorithm ddtree --budget {{budget}} --topk 1"
    matrix: {{budget: [7, 16]}}
baselines: [autoregressive, linear]
load: {{concurrency: {concurrency}, requests: {requests}, max_tokens: {max_tokens}}}
"""


@pytest.fixture
def make_experiment(tmp_path: Path) -> Callable[..., Experiment]:
    counter = iter(range(1000))

    def make(
        *, host: str = "local", drafts: int = 7, concurrency: str = "[1, 4]", requests: int = 16, max_tokens: int = 64
    ) -> Experiment:
        text = EXPERIMENT.format(
            host=host, drafts=drafts, concurrency=concurrency, requests=requests, max_tokens=max_tokens
        )
        path = tmp_path / f"exp{next(counter)}.yaml"
        path.write_text(text)
        return load_experiment(path)

    return make


def earlier_run(root: Path, experiment: Experiment, *, failed: set[str] | None = None) -> Path:
    """A finished run of ``experiment`` whose baselines were measured (points of ``failed`` labels failed)."""
    plan = build_plan(experiment)
    store = RunStore.create(root, experiment.name, resolved_experiment(experiment), plan.to_json_dict())
    host = experiment.host_specs()[0].display_name
    for dep in plan.deployments:
        if not dep.baseline:
            continue
        for point in dep.load_points:
            status = "failed" if f"{dep.label}@{point.label}" in (failed or set()) else "ok"
            window = store.write_window(point.id, f"[sim] Decode batch, accept len: 1.00 ({dep.label} {point.label})\n")
            store.append(
                Record(
                    run_id=store.run_id,
                    experiment=experiment.name,
                    deployment_id=dep.id,
                    point_id=point.id,
                    config_hash=dep.config_hash,
                    host=host,
                    variant=dep.variant,
                    baseline=True,
                    mode=point.mode,
                    concurrency=point.concurrency,
                    status=status,  # type: ignore[arg-type]
                    started_at="2026-01-01T00:00:00.000Z",
                    finished_at="2026-01-01T00:00:01.000Z",
                    client={"output_tok_s": 100.0},
                    server={"accept_len": 1.0},
                    error={"kind": "start_failed", "message": "no"} if status == "failed" else None,
                    window_file=window,
                )
            )
    store.set_state("done")
    return store.path


def labels(plan: Plan) -> list[str]:
    return [f"{d.label}:{','.join(p.label for p in d.load_points)}" for d in plan.deployments]


def test_identical_configuration_reuses_every_baseline_point(
    tmp_path: Path, make_experiment: Callable[..., Experiment]
) -> None:
    exp = make_experiment()
    run = earlier_run(tmp_path / "results", exp)
    plan = build_plan(exp)
    reuse = reuse_baselines(exp, plan, run)
    assert reuse.reasons == []
    assert labels(reuse.plan) == ["ddtree(budget=7):C=1,C=4", "ddtree(budget=16):C=1,C=4"]
    assert reuse.plan.restarts == plan.restarts - 2
    assert sorted((r.variant, r.concurrency) for r in reuse.records) == [
        ("autoregressive", 1),
        ("autoregressive", 4),
        ("linear", 1),
        ("linear", 4),
    ]
    assert all(r.baseline_source == str(run) and r.baseline and r.status == "ok" for r in reuse.records)
    # the tuple form the lead unpacks
    plan_without, records, reasons = reuse
    assert plan_without is reuse.plan and records is reuse.records and reasons is reuse.reasons


def test_a_changed_configuration_is_deployed_and_says_what_changed(
    tmp_path: Path, make_experiment: Callable[..., Experiment]
) -> None:
    run = earlier_run(tmp_path / "results", make_experiment(drafts=7))
    exp = make_experiment(drafts=8)
    reuse = reuse_baselines(exp, build_plan(exp), run)
    assert labels(reuse.plan)[:2] == ["linear:C=1,C=4", "ddtree(budget=7):C=1,C=4"]  # AR reused, linear not
    assert {r.variant for r in reuse.records} == {"autoregressive"}
    (reason,) = reuse.reasons
    assert reason.startswith(f"linear: configuration changed since {run} (config hash c-")
    assert reason.endswith("command: '--draft-tokens 7' became '--draft-tokens 8')")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        pytest.param({"max_tokens": 256}, "the workload changed (load.max_tokens was 64, now 256)", id="max-tokens"),
        pytest.param({"host": "{ssh: root@gpu-box}"}, "host root@gpu-box: not a host of", id="other-host"),
    ],
)
def test_a_changed_workload_or_host_reuses_nothing(
    tmp_path: Path, make_experiment: Callable[..., Experiment], change: dict[str, object], message: str
) -> None:
    run = earlier_run(tmp_path / "results", make_experiment())
    exp = make_experiment(**change)
    plan = build_plan(exp)
    reuse = reuse_baselines(exp, plan, run)
    assert reuse.plan == plan and reuse.records == []
    (reason,) = reuse.reasons
    assert reason.startswith(f"baselines not reused from {run}: ")
    assert message in reason


def test_the_same_host_name_reached_another_way_is_another_host(
    tmp_path: Path, make_experiment: Callable[..., Experiment]
) -> None:
    run = earlier_run(tmp_path / "results", make_experiment(host="{ssh: root@gpu-a, name: box}"))
    exp = make_experiment(host="{ssh: root@gpu-b, name: box}")
    (reason,) = reuse_baselines(exp, build_plan(exp), run).reasons
    assert reason.endswith("host box: reached as root@gpu-a in " + str(run) + ", as root@gpu-b now")


def test_points_are_reused_one_by_one(tmp_path: Path, make_experiment: Callable[..., Experiment]) -> None:
    run = earlier_run(tmp_path / "results", make_experiment(), failed={"linear@C=4"})
    exp = make_experiment(concurrency="[1, 4, 8]")
    reuse = reuse_baselines(exp, build_plan(exp), run)
    assert labels(reuse.plan)[:2] == ["autoregressive:C=8", "linear:C=4,C=8"]  # restarts stay: points are missing
    assert len(reuse.records) == 3
    assert reuse.reasons == [
        "autoregressive @ C=8 on local: not measured in the earlier run",
        "linear @ C=4 on local: the earlier point failed (start_failed)",
        "linear @ C=8 on local: not measured in the earlier run",
    ]


def test_a_different_request_count_is_a_different_point(
    tmp_path: Path, make_experiment: Callable[..., Experiment]
) -> None:
    run = earlier_run(tmp_path / "results", make_experiment(requests=16))
    exp = make_experiment(requests=32)
    reuse = reuse_baselines(exp, build_plan(exp), run)
    assert reuse.records == []
    assert (
        "autoregressive @ C=1 on local: measured with C=1, 16 requests earlier, C=1, 32 requests now" in reuse.reasons
    )


def test_adopted_records_carry_their_windows_into_the_new_run(
    tmp_path: Path, make_experiment: Callable[..., Experiment]
) -> None:
    exp = make_experiment()
    run = earlier_run(tmp_path / "old", exp)
    reuse = reuse_baselines(exp, build_plan(exp), run)
    store = RunStore.create(tmp_path / "new", exp.name, resolved_experiment(exp), reuse.plan.to_json_dict())
    written = adopt_reused(store, reuse.records)
    stored = RunStore.open(store.path).records()
    assert [r.point_id for r in stored] == [r.point_id for r in written] == [r.point_id for r in reuse.records]
    for record in stored:
        assert record.baseline_source == str(run)
        assert record.window_file is not None
        assert "Decode batch" in (store.path / record.window_file).read_text()
    assert store.final_point_keys() == {(r.host, r.point_id) for r in stored}
    assert [e["kind"] for e in store.events()] == ["baselines_reused"]


def test_where_baselines_come_from(
    tmp_path: Path, make_experiment: Callable[..., Experiment], monkeypatch: pytest.MonkeyPatch
) -> None:
    exp = make_experiment()
    assert baselines_source(exp) is None
    run = earlier_run(tmp_path / "results", exp)
    assert baselines_source(exp, "latest", tmp_path / "results") == run
    monkeypatch.chdir(tmp_path)
    relative = run.relative_to(tmp_path)
    assert baselines_source(exp, relative) == relative  # from the working directory
    monkeypatch.chdir(run.parent)
    assert baselines_source(exp, relative) == tmp_path / relative  # else beside the experiment file
    with_field = exp.model_copy(update={"baselines_from": str(run)})
    assert baselines_source(with_field) == run
    assert baselines_source(with_field, tmp_path / "other") == tmp_path / "other"  # the flag wins


def test_a_path_that_is_not_a_run_is_an_error(tmp_path: Path, make_experiment: Callable[..., Experiment]) -> None:
    exp = make_experiment()
    with pytest.raises(StoreError, match="not a run directory"):
        reuse_baselines(exp, build_plan(exp), tmp_path)


def test_a_forged_record_cannot_copy_a_file_from_outside_its_run(
    tmp_path: Path, make_experiment: Callable[..., Experiment]
) -> None:
    """Issue 28, item 5: a record of the --baselines-from run names '../../…' as its window and requests
    file; nothing outside that run directory is read, and nothing of it reaches the new run."""
    secret = tmp_path / "outside.txt"
    secret.write_text('{"private": "key material"}\n')
    exp = make_experiment()
    run = earlier_run(tmp_path / "old", exp)
    reuse = reuse_baselines(exp, build_plan(exp), run)
    escape = str(Path("..") / ".." / ".." / secret.relative_to(tmp_path))
    forged = [r.model_copy(update={"window_file": escape, "requests_file": str(secret)}) for r in reuse.records]
    assert (run / escape).resolve() == secret.resolve()  # the forged path does lead to the file
    store = RunStore.create(tmp_path / "new", exp.name, resolved_experiment(exp), reuse.plan.to_json_dict())
    written = adopt_reused(store, forged)
    assert written and all(r.window_file is None and r.requests_file is None for r in written)
    copied = [p.read_text(errors="replace") for p in store.path.rglob("*") if p.is_file()]
    assert not any("key material" in text for text in copied)
    with pytest.raises(StoreError, match="is not a file of this run directory"):
        RunStore.open(run).read_lines(escape)
