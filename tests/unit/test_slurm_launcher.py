"""The Slurm launcher (orchestrator/launchers/slurm/) in the sweep loop, on an in-memory scheduler
(tests/unit/slurm_fakes.py): jobs at once, job states as failures with the log's tail, pending limits,
leftovers of a dead run, reattaching on resume, node types, stop, and every job cancelled at the end."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from orchestrator.errors import Interrupted, ServiceError
from orchestrator.experiment.schema import Experiment, load_experiment
from orchestrator.launchers import SlurmLauncher, launcher_for
from orchestrator.launchers.slurm.jobs import ENDED, NodeInfo, job_name, render_batch_script
from orchestrator.plan.deployments import build_plan
from orchestrator.sweep.frame import StopSignal
from orchestrator.sweep.measure import PointMeasurer
from orchestrator.sweep.runner import SweepOptions, run_sweep
from tests.timing import scaled
from tests.unit.launch_fakes import fake_tools
from tests.unit.slurm_fakes import SLURM_EXPERIMENT, FakeScheduler, HealthServer, use_scheduler


@pytest.fixture
def health() -> Iterator[HealthServer]:
    server = HealthServer()
    try:
        yield server
    finally:
        server.close()


def _experiment(
    tmp_path: Path,
    health: HealthServer,
    *,
    max_jobs: int = 2,
    pending_timeout: str = "30s",
    launcher_extra: str = "",
    extra: str = "",
) -> Experiment:
    path = tmp_path / "fake.yaml"
    path.write_text(
        SLURM_EXPERIMENT.format(
            max_jobs=max_jobs,
            shared=tmp_path / "shared",
            pending_timeout=pending_timeout,
            launcher_extra=launcher_extra,
            port=health.port,
            extra=extra,
        )
    )
    return load_experiment(path)


def _sweep(exp: Experiment, tmp_path: Path, *, stop: StopSignal | None = None, **options: Any) -> Any:
    return run_sweep(
        exp,
        SweepOptions(results_root=tmp_path / "results", **options),
        measurer=PointMeasurer(exp, fake_tools()),
        stop=stop,
    )


def _two_nodes() -> list[NodeInfo]:
    return [NodeInfo("127.0.0.1", "gpu:8", "", "gpu*"), NodeInfo("127.0.0.2", "gpu:8", "", "gpu*")]


def _by_label(scheduler: FakeScheduler, variant_part: str) -> str:
    return next(s.name for s in scheduler.submitted if variant_part in s.text)


def test_each_deployment_is_one_job_two_at_a_time_and_all_are_cancelled(
    tmp_path: Path, health: HealthServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    scheduler = FakeScheduler(nodes=_two_nodes())
    use_scheduler(monkeypatch, scheduler)
    exp = _experiment(tmp_path, health)
    assert isinstance(launcher_for(exp, lock_label="fake r", run_id="r"), SlurmLauncher)
    result = _sweep(exp, tmp_path)
    assert result.state == "done" and result.points == {"planned": 8, "ok": 8, "failed": 0}
    assert len(scheduler.submitted) == 4 and scheduler.max_running == 2
    assert all(j.state in ENDED for j in scheduler.jobs.values())  # every job cancelled by the end
    assert {r.host for r in result.records} == {"slurm-gpu"}  # one target: baselines measured once
    run_id = result.run_dir.name
    assert {s.name for s in scheduler.submitted} == {
        job_name("fake", run_id, d.id) for d in build_plan(exp).deployments
    }
    script = scheduler.submitted[0].text
    for line in ("#SBATCH --partition=gpu", "#SBATCH --gres=gpu:8", "#SBATCH --time=10", "#SBATCH --nodes=1"):
        assert line in script.splitlines()
    for record in result.records:
        placement = record.model_extra["placement"]  # type: ignore[index]
        assert placement["launcher"] == "slurm" and placement["node"] in ("127.0.0.1", "127.0.0.2")
        assert placement["node_type"] == "gpu:8" and placement["gres"] == "gpu:8(IDX:0-7)"
    # The windows come from the jobs' output files, read by byte offsets.
    logs = sorted((tmp_path / "shared" / "fake" / run_id).glob("*.log"))
    assert len(logs) == 4 and all("ready to roll" in p.read_text() for p in logs)
    assert not (tmp_path / "shared" / "fake.lock").exists()  # the experiment's lock is released
    events = [json.loads(x) for x in (result.run_dir / "events.jsonl").read_text().splitlines()]
    assert [e["kind"] for e in events].count("restore") == 2  # one per slot


@pytest.mark.parametrize(
    ("state", "kind"), [("FAILED", "start_job_failed"), ("OUT_OF_MEMORY", "start_job_out_of_memory")]
)
def test_a_job_that_ends_before_serving_fails_its_points_with_the_log(
    tmp_path: Path, health: HealthServer, monkeypatch: pytest.MonkeyPatch, state: str, kind: str
) -> None:
    def start(job: Any) -> str | None:
        return state if "budget 7" in job.script else None

    def log(job: Any) -> list[str]:
        if job.state == state:
            return ["Traceback (most recent call last):", "RuntimeError: CUDA out of memory"]
        return ["ready to roll"]

    scheduler = FakeScheduler(start=start, log=log)
    use_scheduler(monkeypatch, scheduler)
    result = _sweep(_experiment(tmp_path, health, max_jobs=1), tmp_path)
    assert result.state == "done" and result.points == {"planned": 8, "ok": 6, "failed": 2}
    failed = [r for r in result.records if r.status == "failed"]
    assert {r.params["budget"] for r in failed} == {7}
    error = failed[0].error or {}
    assert error["kind"] == kind and f"{state} on 127.0.0.1" in error["message"]
    assert error["evidence"][0].startswith("job ") and "RuntimeError: CUDA out of memory" in error["evidence"]


def test_a_job_pending_past_its_limit_is_a_clear_failure(
    tmp_path: Path, health: HealthServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    scheduler = FakeScheduler(start=lambda job: "PENDING" if "budget 16" in job.script else None)
    use_scheduler(monkeypatch, scheduler)
    seen: list[Any] = []
    exp = _experiment(tmp_path, health, max_jobs=1, pending_timeout="0.3s")
    result = run_sweep(
        exp,
        SweepOptions(results_root=tmp_path / "results"),
        measurer=PointMeasurer(exp, fake_tools()),
        observer=seen.append,
    )
    failed = [r for r in result.records if r.status == "failed"]
    assert {r.params.get("budget") for r in failed} == {16}
    error = failed[0].error or {}
    assert error["kind"] == "start_job_pending_timeout"
    assert "PENDING (Resources)" in error["message"] and "pending_timeout is 0.3 s" in error["message"]
    progress = [e.last_line for e in seen if type(e).__name__ == "HealthProgress"]
    assert any("PENDING (Resources)" in line for line in progress)
    assert all(j.state in ENDED for j in scheduler.jobs.values())


def test_a_job_cancelled_from_outside_mid_point_fails_that_point_and_is_submitted_again(
    tmp_path: Path, health: HealthServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    scheduler = FakeScheduler()
    use_scheduler(monkeypatch, scheduler)
    exp = _experiment(tmp_path, health, max_jobs=1)
    cancelled: list[str] = []

    def on_load(settings: Any) -> None:
        if not cancelled and settings.concurrency == 1 and settings.requests == 8:
            running = [j for j in scheduler.running() if "budget 7" in j.script]
            if running:
                cancelled.append(running[0].job_id)
                scheduler.set(running[0].job_id, "CANCELLED")

    result = run_sweep(
        exp, SweepOptions(results_root=tmp_path / "results"), measurer=PointMeasurer(exp, fake_tools(on_load=on_load))
    )
    assert cancelled, "the load never ran on the budget-7 job"
    died = [r for r in result.records if r.status == "failed"]
    assert len(died) == 1 and (died[0].error or {})["kind"] == "server_died"
    assert any(f"job {cancelled[0]} CANCELLED" in line for line in (died[0].error or {})["evidence"])
    budget7 = [s for s in scheduler.submitted if "budget 7" in s.text]
    assert len(budget7) == 2  # launched again once, for the point that was left
    assert result.points == {"planned": 8, "ok": 7, "failed": 1}


def test_leftovers_of_a_dead_run_are_cancelled_and_other_jobs_left_alone(
    tmp_path: Path, health: HealthServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    scheduler = FakeScheduler(
        nodes=_two_nodes(), start=lambda job: "PENDING" if job.name == "my training job" else None
    )
    old = scheduler.add("specsweep.fake.20200101T000000Z-dead.d-1", "specsweep;run=20200101T000000Z-dead")
    mine_elsewhere = scheduler.add("specsweep.other-experiment.r.d-1", "specsweep;run=r", node="127.0.0.2")
    foreign = scheduler.add("my training job", "", state="PENDING", node="")
    use_scheduler(monkeypatch, scheduler)
    notices: list[str] = []
    exp = _experiment(tmp_path, health)
    result = run_sweep(
        exp,
        SweepOptions(results_root=tmp_path / "results"),
        measurer=PointMeasurer(exp, fake_tools()),
        observer=lambda e: notices.append(getattr(e, "message", "")),
    )
    assert result.state == "done"
    assert old.state == "CANCELLED" and old.job_id in scheduler.cancelled
    assert mine_elsewhere.state == "RUNNING" and foreign.state == "PENDING"
    assert any("cancelled 1 Slurm job(s) an earlier run left" in n and old.job_id in n for n in notices)


def test_resume_reattaches_to_its_own_job_that_still_runs_what_it_would_submit(
    tmp_path: Path, health: HealthServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    scheduler = FakeScheduler(nodes=_two_nodes())
    use_scheduler(monkeypatch, scheduler)
    exp = _experiment(tmp_path, health)
    plan = build_plan(exp)
    first, second, third = plan.deployments[:3]
    launcher = SlurmLauncher(exp, run_id="r1", lock_label="fake r1")
    log_dir = f"{tmp_path / 'shared'}/fake/r1"
    settings = launcher.job_settings()

    def left(deployment: Any, *, command: str | None = None, node: str = "127.0.0.1") -> Any:
        d = deployment if command is None else deployment.model_copy(update={"command": command})
        script = render_batch_script(settings, d, experiment="fake", run_id="r1", log_dir=log_dir, label=d.label)
        comment = f"specsweep;run=r1;deployment={d.id};config={d.config_hash};script={script.script_hash}"
        stdout = f"{log_dir}/{d.id}.left.log"
        Path(log_dir).mkdir(parents=True, exist_ok=True)
        Path(stdout).write_text("ready to roll\n")
        return scheduler.add(script.name, comment, node=node, stdout=stdout)

    same = left(first)
    edited = left(second, command="/opt/other-server", node="127.0.0.2")  # what it runs changed: not reattached
    done = left(third)  # its deployment has nothing left to run: cancelled at once
    launcher.expect([first, second])
    slot = launcher.slots()[0]
    recovered: list[str] = []
    slot.open(recovered.append)
    try:
        assert done.state == "CANCELLED" and same.state == "RUNNING" and edited.state == "CANCELLED"
        server = slot.launch(first, progress=None, stop=threading.Event())
        assert server.job_id == same.job_id and not scheduler.submitted  # reattached: nothing submitted
        assert server.placement is not None and server.placement["job_id"] == same.job_id
        assert "ready to roll" in server.logs.journal_since("0")
        other = slot.launch(second, progress=None, stop=threading.Event())
        assert other.job_id != edited.job_id and len(scheduler.submitted) == 1
        assert same.state == "CANCELLED"  # the slot's previous job ended when the next was launched
    finally:
        slot.close()
        for s in launcher.slots()[1:]:
            s.close()
    assert all(j.state in ENDED for j in scheduler.jobs.values())
    assert any(done.job_id in line and edited.job_id in line for line in recovered)


def test_a_partition_of_several_node_types_needs_a_constraint(
    tmp_path: Path, health: HealthServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    nodes = [NodeInfo("127.0.0.1", "gpu:a100:8", "a100", "gpu*"), NodeInfo("127.0.0.2", "gpu:h100:8", "h100", "gpu*")]
    scheduler = FakeScheduler(nodes=nodes)
    use_scheduler(monkeypatch, scheduler)
    with pytest.raises(ServiceError, match=r"mixes node types .*pin one with launcher\.constraint"):
        _sweep(_experiment(tmp_path, health), tmp_path)
    assert not scheduler.submitted
    assert not (tmp_path / "shared" / "fake.lock").exists()
    # Pinned by a constraint, the run keeps to the type its first job landed on.
    result = _sweep(_experiment(tmp_path, health, max_jobs=1, launcher_extra="  constraint: a100"), tmp_path)
    assert result.state == "done"
    assert {r.model_extra["placement"]["node_type"] for r in result.records} == {"gpu:a100:8 [a100]"}  # type: ignore[index]


def test_a_stop_while_jobs_are_pending_cancels_them_all(
    tmp_path: Path, health: HealthServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    scheduler = FakeScheduler(nodes=_two_nodes(), start=lambda job: "PENDING")
    use_scheduler(monkeypatch, scheduler)
    stop = StopSignal()

    def stop_soon() -> None:
        deadline = time.monotonic() + scaled(10)
        while len(scheduler.submitted) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        stop.request()

    thread = threading.Thread(target=stop_soon)
    thread.start()
    with pytest.raises(Interrupted):
        _sweep(_experiment(tmp_path, health), tmp_path, stop=stop)
    thread.join()
    assert len(scheduler.submitted) == 2
    assert all(j.state == "CANCELLED" for j in scheduler.jobs.values())


def test_restore_cancels_a_dead_runs_jobs_and_lock_and_leaves_a_live_one(
    tmp_path: Path, health: HealthServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from orchestrator.launchers.restore import restore_experiment
    from orchestrator.services.hoststate import controller_identity

    scheduler = FakeScheduler(nodes=_two_nodes())
    use_scheduler(monkeypatch, scheduler)
    exp = _experiment(tmp_path, health)
    lock = tmp_path / "shared" / "fake.lock"
    lock.parent.mkdir(parents=True)
    assert restore_experiment(exp)[0].summary == "nothing to restore"
    left = scheduler.add("specsweep.fake.r0.d-1", "specsweep;run=r0")
    other = scheduler.add("specsweep.fake-two.r0.d-1", "specsweep;run=r0", node="127.0.0.2")
    dead = {**controller_identity(), "pid": 2**22 + 17, "pid_start": "", "label": "fake r0", "token": "t"}
    lock.write_text(json.dumps(dead))
    (found,) = restore_experiment(exp, dry_run=True)
    assert not found.restored and found.leftover is not None and left.job_id in found.summary
    assert left.state == "RUNNING" and lock.exists()
    (done,) = restore_experiment(exp)
    assert done.restored and done.error is None and left.state == "CANCELLED" and other.state == "RUNNING"
    assert not lock.exists()
    # A lock of a live run (this very process) is not broken, and its jobs are left running, unless asked.
    alive = scheduler.add("specsweep.fake.r1.d-1", "specsweep;run=r1")
    lock.parent.mkdir(exist_ok=True)  # the lock's release removed the directory it left empty
    lock.write_text(json.dumps({**controller_identity(), "label": "fake r1", "token": "u"}))
    (refused,) = restore_experiment(exp)
    assert refused.error and "--break-lock" in refused.error and alive.state == "RUNNING"
    (forced,) = restore_experiment(exp, break_lock=True)
    assert forced.restored and alive.state == "CANCELLED" and not lock.exists()


def test_doctor_checks_the_login_node_partition_and_shared_directory(
    tmp_path: Path, health: HealthServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from orchestrator.hosts import LocalHost
    from orchestrator.launchers import doctor
    from orchestrator.launchers.slurm import kind as slurmkind
    from tests.unit.slurm_fakes import FakeClient

    scheduler = FakeScheduler(nodes=_two_nodes())
    scheduler.add("specsweep.fake.r0.d-1", "specsweep;run=r0")
    monkeypatch.setattr(slurmkind, "connect_host", lambda spec: LocalHost(name="login"))
    monkeypatch.setattr(slurmkind, "SlurmClient", lambda host: FakeClient(host, scheduler))
    (report,) = doctor.run_doctor(_experiment(tmp_path, health))
    checks = {c.name: (c.status, c.detail) for c in report.checks}
    assert checks["slurm"] == ("ok", "slurm 22.05.8")
    assert checks["partition"] == ("ok", "gpu: 2 node(s), type(s) gpu:8")
    assert checks["shared_dir"][0] == "ok" and checks["leftovers"][0] == "warn" and report.ok
    assert not list((tmp_path / "shared").iterdir())  # the probe file is gone


def test_the_dry_run_shows_each_batch_script(tmp_path: Path, health: HealthServer) -> None:
    from orchestrator.sweep.dryrun import describe_plan

    text = describe_plan(_experiment(tmp_path, health))
    assert text.count("submit with sbatch --parsable") == 4
    assert "    #SBATCH --gres=gpu:8" in text and "    exec /opt/server --port" in text
    assert "then: scancel the job" in text and text.rstrip().endswith("wait until squeue lists none of them")
