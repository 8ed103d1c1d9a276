"""Sweeps on a real Slurm cluster (tests/system/slurm_cluster.py: slurmctld on a login container, slurmd on
two compute containers, munge, a GPU GRES of fake devices), through the CLI as a user runs them, with the
simulator as each job's server, reached through the login node's SSH connection (``server.via: ssh``).

One cluster for the whole module. Every test ends with no job left (nothing pending, running or
completing in squeue) and no server process on the nodes; whatever a test left is cancelled before the
next one starts, so a failure stays in its own test.
"""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.system.slurm_cluster import SHARED, SlurmCluster, boot_cluster, cannot_run_reason, shut_down_cluster
from tests.system.support import wait_for
from tests.timing import scaled

pytestmark = pytest.mark.timeout(300)

ROOT = Path(__file__).resolve().parents[2]
#: The simulator as the job's user runs it: the guest's Python, the checkout and its packages on the path
#: (the checkout's virtualenv interpreter may live in a home other users cannot enter).
SITE = f"{ROOT}/.venv/lib/python{sys.version_info.major}.{sys.version_info.minor}/site-packages"
SIM = "/usr/bin/python3 -m orchestrator.sim --host 0.0.0.0 --port 18181 --profile tiny --seed 7"
ACTIVE = "PENDING,RUNNING,SUSPENDED,COMPLETING,CONFIGURING,REQUEUED,RESIZING,SIGNALING,STAGE_OUT"


@pytest.fixture(scope="module")
def cluster() -> Iterator[SlurmCluster]:
    reason = cannot_run_reason()
    if reason:
        pytest.skip(reason)
    booted = boot_cluster(computes=2)
    try:
        yield booted
    finally:
        shut_down_cluster(booted)


@pytest.fixture
def slurm(cluster: SlurmCluster) -> Iterator[SlurmCluster]:
    """The cluster, quiet before the test; after it, nothing may be left, and whatever is, is cancelled."""
    cluster.cancel_everything()
    cluster.wait_nodes_idle()
    yield cluster
    left = active_jobs(cluster)
    servers = sim_processes(cluster)
    cluster.cancel_everything()
    assert not left, f"jobs left in squeue: {left}"
    assert not servers, f"server processes left on the nodes: {servers}"


def active_jobs(cluster: SlurmCluster) -> list[str]:
    out = cluster.run(f"squeue -h -a -t {ACTIVE} -o '%i|%j|%T'")
    return [line for line in out.splitlines() if line.strip()]


def sim_processes(cluster: SlurmCluster) -> list[str]:
    found = []
    for node in cluster.computes:
        out = node.admin("pgrep -af '[o]rchestrator.sim' || true", check=False).stdout.strip()
        if out:
            found.append(f"{cluster.node_name(node)}: {out}")
    return found


def experiment(
    cluster: SlurmCluster,
    tmp_path: Path,
    name: str,
    *,
    max_jobs: int = 2,
    variants: dict[str, Any] | None = None,
    baselines: list[str] | None = None,
    load: dict[str, Any] | None = None,
    load_seconds: float = 1.0,
    **launcher: Any,
) -> Path:
    """An experiment file sweeping the simulator on the cluster; six deployments by default."""
    data: dict[str, Any] = {
        "name": name,
        "launcher": {
            "kind": "slurm",
            "login": cluster.login_spec(),
            "partition": "gpu",
            "gres": "gpu:8",
            "time": "10",
            "max_jobs": max_jobs,
            "shared_dir": SHARED,
            "poll_interval": "0.5s",
            **launcher,
        },
        "service": {
            "kind": "process",
            "command": f"{SIM} --load-seconds {load_seconds:g} --decode-log-interval 10 {{spec_args}}",
            "environment": {"PYTHONPATH": f"{ROOT}:{SITE}"},
        },
        "server": {"url": "http://{node}:18181", "via": "ssh", "model": "sim", "ready_timeout": f"{scaled(60):.0f}s"},
        "engine": "sim",
        "variants": variants
        or {
            "autoregressive": {"spec_args": "--algorithm ar"},
            "linear": {"spec_args": "--algorithm linear --draft-tokens 7"},
            "ddtree": {
                "spec_args": "--algorithm ddtree --budget {budget} --topk {topk}",
                "matrix": {"budget": [7, 16], "topk": [1, 4]},
            },
        },
        "baselines": ["autoregressive", "linear"] if baselines is None else baselines,
        "load": load or {"concurrency": [1, 4], "warmup": 1, "requests": 8, "max_tokens": 32},
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def sweep(path: Path, tmp_path: Path, *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", "sweep", str(path), "--results", str(tmp_path / "results"), *args],
        capture_output=True,
        text=True,
        timeout=scaled(timeout),
        env={**os.environ, "COLUMNS": "160"},
    )


def run_dir(tmp_path: Path, name: str) -> Path:
    runs = sorted((tmp_path / "results" / name).glob("2*"))
    assert runs, f"no run of {name}"
    return runs[-1]


def whole_lines(path: Path) -> list[dict[str, Any]]:
    """The JSON lines of a file the sweep may still be writing: none before it exists (the run directory is made
    first), and a last line still being written is not one yet."""
    if not path.exists():
        return []
    text = path.read_text()
    whole = text if text.endswith("\n") else text[: text.rfind("\n") + 1]
    return [json.loads(line) for line in whole.splitlines() if line.strip()]


def records(run: Path) -> list[dict[str, Any]]:
    """The run's finished records, read while the sweep runs or after."""
    return whole_lines(run / "records.jsonl")


def events(run: Path) -> list[dict[str, Any]]:
    return whole_lines(run / "events.jsonl")


def test_six_deployments_over_two_nodes_two_jobs_at_a_time(slurm: SlurmCluster, tmp_path: Path) -> None:
    path = experiment(slurm, tmp_path, "slurm-six")
    result = sweep(path, tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    run = run_dir(tmp_path, "slurm-six")
    recs = records(run)
    assert len(recs) == 12 and all(r["status"] == "ok" for r in recs)
    assert len({r["point_id"] for r in recs}) == 12  # every record once
    assert {r["host"] for r in recs} == {"slurm-gpu"}
    placements = {r["deployment_id"]: r["placement"] for r in recs}
    assert len(placements) == 6 and len({p["job_id"] for p in placements.values()}) == 6  # one job each
    assert {p["node"] for p in placements.values()} == set(slurm.node_names)
    assert all(p["node_type"] == "gpu:8" and p["gres"].startswith("gpu:8") for p in placements.values())
    # Two at a time: the second job was serving before the first was released for the third deployment.
    kinds = [e["kind"] for e in events(run)]
    healthy = [i for i, k in enumerate(kinds) if k == "healthy"]
    deploys = [i for i, k in enumerate(kinds) if k == "deploy"]
    assert healthy[1] < deploys[2], kinds
    # Every job's output file is on the shared file system; the nodes keep nothing of the jobs.
    logs = slurm.run(f"ls {SHARED}/slurm-six/{run.name}").split()
    assert len(logs) == 6 and all(name.endswith(".log") for name in logs)
    for node in slurm.computes:
        assert node.admin("ls /var/spool/slurmd | grep -c '^job' || true", check=False).stdout.strip() == "0"
    # The scheduler says every job was cancelled by specsweep once its points were measured.
    states = {j["JobId"]: j["JobState"] for j in slurm.jobs(f"specsweep.slurm-six.{run.name}.")}
    assert len(states) == 6 and set(states.values()) == {"CANCELLED"}


def test_resume_after_kill_9_reattaches_and_measures_each_point_once(slurm: SlurmCluster, tmp_path: Path) -> None:
    load = {"concurrency": [1, 4], "warmup": 1, "requests": 24, "max_tokens": 48}
    path = experiment(slurm, tmp_path, "slurm-resume", load=load, load_seconds=2)
    controller = subprocess.Popen(
        [sys.executable, "-m", "orchestrator", "sweep", str(path), "--results", str(tmp_path / "results")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        # Kill it as soon as a non-baseline deployment has its first point: its job runs, a point is left.
        def first_point_of_a_shared_deployment() -> dict[str, Any] | None:
            runs = sorted((tmp_path / "results" / "slurm-resume").glob("2*"))
            recs = records(runs[-1]) if runs else []
            shared = [r for r in recs if not r["baseline"]]
            per = collections.Counter(r["deployment_id"] for r in shared)
            return next((r for r in shared if per[r["deployment_id"]] == 1), None)

        caught = wait_for(first_point_of_a_shared_deployment, timeout=120, interval=0.05)
        assert caught, "no shared deployment got its first point"
        os.killpg(controller.pid, signal.SIGKILL)
        controller.wait(timeout=scaled(30))
    finally:
        if controller.poll() is None:
            os.killpg(controller.pid, signal.SIGKILL)
            controller.wait(timeout=scaled(30))
    run = run_dir(tmp_path, "slurm-resume")
    before = records(run)
    left_running = active_jobs(slurm)
    assert any(caught["placement"]["job_id"] == line.split("|")[0] for line in left_running), left_running

    result = sweep(path, tmp_path, "--resume", "latest")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    after = records(run)
    assert after[: len(before)] == before  # what was recorded stays as it was
    assert collections.Counter(r["point_id"] for r in after) == collections.Counter(
        {p: 1 for p in {r["point_id"] for r in after}}
    )
    assert len(after) == 12 and all(r["status"] == "ok" for r in after)
    # The job that was serving the caught deployment was reattached to, not submitted again.
    rest = [r for r in after[len(before) :] if r["deployment_id"] == caught["deployment_id"]]
    assert rest and all(r["placement"]["job_id"] == caught["placement"]["job_id"] for r in rest)


def test_a_configuration_that_fails_to_start_is_a_failed_record_with_the_jobs_log(
    slurm: SlurmCluster, tmp_path: Path
) -> None:
    variants = {
        "autoregressive": {"spec_args": "--algorithm ar"},
        "broken": {"spec_args": "--algorithm linear --fault fail-start"},
    }
    path = experiment(slurm, tmp_path, "slurm-fails", max_jobs=1, variants=variants, baselines=["autoregressive"])
    result = sweep(path, tmp_path)
    assert result.returncode == 3, result.stdout[-3000:] + result.stderr[-3000:]  # points failed, sweep done
    recs = records(run_dir(tmp_path, "slurm-fails"))
    failed = [r for r in recs if r["status"] == "failed"]
    assert {r["variant"] for r in failed} == {"broken"} and len(failed) == 2
    error = failed[0]["error"]
    assert error["kind"] == "start_job_failed", error
    assert error["evidence"][0].startswith("job ") and " FAILED on specsweep-th" in error["evidence"][0]
    assert any("Traceback" in line for line in error["evidence"]), error["evidence"]
    assert all(r["status"] == "ok" for r in recs if r["variant"] == "autoregressive")


def test_a_job_cancelled_from_outside_is_a_failed_record_and_the_sweep_goes_on(
    slurm: SlurmCluster, tmp_path: Path
) -> None:
    variants = {"autoregressive": {"spec_args": "--algorithm ar"}}
    load = {"concurrency": [1, 2], "warmup": 1, "requests": 300, "max_tokens": 64}
    path = experiment(slurm, tmp_path, "slurm-scancel", max_jobs=1, variants=variants, baselines=[], load=load)
    controller = subprocess.Popen(
        [sys.executable, "-m", "orchestrator", "sweep", str(path), "--results", str(tmp_path / "results")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:

        def serving_job() -> str | None:
            runs = sorted((tmp_path / "results" / "slurm-scancel").glob("2*"))
            if not runs or not any(e["kind"] == "warmup" for e in events(runs[-1])):
                return None
            jobs = [line.split("|") for line in active_jobs(slurm)]
            return next((j[0] for j in jobs if j[2] == "RUNNING"), None)

        job_id = wait_for(serving_job, timeout=120, interval=0.1)
        assert job_id, "the job never served"
        time.sleep(1.0)  # into the first point
        slurm.run(f"scancel {job_id}")  # as root, from outside specsweep
        out, err = controller.communicate(timeout=scaled(200))
    finally:
        if controller.poll() is None:
            os.killpg(controller.pid, signal.SIGKILL)
            controller.wait(timeout=scaled(30))
    assert controller.returncode == 3, out[-3000:] + err[-3000:]
    recs = records(run_dir(tmp_path, "slurm-scancel"))
    failed = [r for r in recs if r["status"] == "failed"]
    assert len(failed) == 1 and failed[0]["error"]["kind"] == "server_died", failed
    assert any(f"job {job_id} CANCELLED" in line for line in failed[0]["error"]["evidence"])
    ok = [r for r in recs if r["status"] == "ok"]
    assert len(ok) == 1 and ok[0]["placement"]["job_id"] != job_id  # the rest ran on a job submitted again


def test_a_job_past_its_time_limit_is_a_timeout_record(slurm: SlurmCluster, tmp_path: Path) -> None:
    # Slurm counts time limits in minutes (the shortest is 1) and ends a job past its limit at its next
    # periodic check: a server that takes five minutes to load is ended 60 to 90 s after it started here.
    variants = {"autoregressive": {"spec_args": "--algorithm ar"}}
    path = experiment(
        slurm,
        tmp_path,
        "slurm-timeout",
        max_jobs=1,
        variants=variants,
        baselines=[],
        load={"concurrency": [1], "warmup": 0, "requests": 2, "max_tokens": 8},
        load_seconds=300,
        time="1",
    )
    data = yaml.safe_load(path.read_text())
    data["server"]["ready_timeout"] = "200s"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    result = sweep(path, tmp_path)
    assert result.returncode == 3, result.stdout[-3000:] + result.stderr[-3000:]
    (record,) = records(run_dir(tmp_path, "slurm-timeout"))
    error = record["error"]
    assert record["status"] == "failed" and error["kind"] == "start_job_timeout", error
    assert " TIMEOUT on specsweep-th" in error["evidence"][0] and "Load weight begin" in "\n".join(error["evidence"])


def test_a_plain_ssh_host_whose_server_only_the_host_reaches(slurm: SlurmCluster, tmp_path: Path) -> None:
    """``server.via: ssh`` without Slurm: the server listens on the host's loopback, reachable only through
    the SSH connection (as behind a firewall that lets port 22 alone in)."""
    data = {
        "name": "via-ssh",
        "host": {**slurm.login_spec(), "name": "box"},
        "service": {
            "kind": "process",
            "command": SIM.replace("0.0.0.0", "127.0.0.1") + " --load-seconds 0.5 {spec_args}",
            "environment": {"PYTHONPATH": f"{ROOT}:{SITE}"},
        },
        "server": {
            "url": "http://127.0.0.1:18181",
            "via": "ssh",
            "model": "sim",
            "ready_timeout": f"{scaled(60):.0f}s",
        },
        "engine": "sim",
        "variants": {"autoregressive": {"spec_args": "--algorithm ar"}},
        "load": {"concurrency": [1, 2], "warmup": 1, "requests": 6, "max_tokens": 16},
    }
    path = tmp_path / "via-ssh.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    result = sweep(path, tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    recs = records(run_dir(tmp_path, "via-ssh"))
    assert len(recs) == 2 and all(r["status"] == "ok" for r in recs)
    assert all(r["client"]["url"].startswith("http://127.0.0.1:") for r in recs)
    assert slurm.login.admin("pgrep -af '[o]rchestrator.sim' || true", check=False).stdout.strip() == ""
