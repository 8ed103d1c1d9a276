"""A whole sweep on the Kubernetes launcher, against the fake ``kubectl`` (tests/unit/kubectl_fake.py) in its
``run`` mode: each Job's container command (the simulator) runs here as the pod, its output the pod's log, so
the sweep goes through apply, the pod's state, port-forward, the log windows and the deletes end to end. No
cluster is involved: what this shows is the launcher's use of kubectl, not a cluster's behaviour."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from orchestrator.experiment.schema import load_experiment
from orchestrator.sweep.runner import SweepOptions, run_sweep
from tests.unit import kubectl_fake

pytestmark = pytest.mark.timeout(240)

EXPERIMENT = """\
name: kube-sim
launcher: {kind: kubernetes, image: example/sim:1, namespace: bench, gpus: 1, poll_interval: 0.2}
service:
  kind: process
  command: >-
    {python} -m orchestrator.sim --host 127.0.0.1 --port PORT --profile tiny --load-seconds 0.2 --decode-log-interval 1
    {spec_args}
server: {url: "http://127.0.0.1:PORT", ready_timeout: 30s, expected_load_time: 1s}
engine: sglang
variants:
  autoregressive: {spec_args: "--algorithm ar"}
  linear: {spec_args: "--algorithm linear --draft-tokens {k}", matrix: {k: [2]}}
baselines: [autoregressive]
load: {concurrency: [1], requests: 4, max_tokens: 32, warmup: 0}
lossless: {enabled: false}
"""


def test_a_sweep_runs_each_deployment_as_a_job_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, unused_tcp_port: int
) -> None:
    cluster = kubectl_fake.install(tmp_path / "cluster", monkeypatch, mode="run")
    path = tmp_path / "kube.yaml"
    path.write_text(EXPERIMENT.replace("PORT", str(unused_tcp_port)))
    result = run_sweep(load_experiment(path), SweepOptions(results_root=tmp_path / "results"))
    assert result.state == "done", result.stop_reason
    assert len(result.records) == 2 and all(r.status == "ok" for r in result.records)
    assert {r.host for r in result.records} == {"kubernetes-bench"}
    jobs = {r.placement["job"] for r in result.records if r.placement}
    assert len(jobs) == 2 and all(r.placement and r.placement["node"] == "gpu-node-1" for r in result.records)
    assert all(r.server and r.server.get("accept_len") is not None for r in result.records if r.variant == "linear")
    verbs = [" ".join(kubectl_fake.without_flags(c["argv"])[:1]) for c in kubectl_fake.calls(cluster)]
    assert verbs.count("apply") == 2 and verbs.count("port-forward") == 2 and "logs" in verbs
    assert kubectl_fake.state(cluster)["objects"] == {}  # every Job, Service and the lock deleted


# -- issue 58: what the console shows, end to end (the CLI in a process of its own, the fake kubectl on PATH) ---

CLI_EXPERIMENT = """\
name: kube-cli
launcher: {kind: kubernetes, image: example/sglang:0.5, namespace: bench, gpus: 1}
service:
  kind: process
  command: "python3 -m sglang.launch_server --port 30000 {spec_args}"
  environment: ENVIRONMENT
server: {url: "http://127.0.0.1:30000", ready_timeout: 5s}
engine: sglang
variants:
  autoregressive: {spec_args: "--api-key sk-abcdefghijklmnop1234"}
baselines: [autoregressive]
load: {concurrency: [1], requests: 4, max_tokens: 16}
lossless: {enabled: false}
"""


def cli(tmp_path: Path, *args: str, environment: str = "{MODE: bench}") -> subprocess.CompletedProcess[str]:
    path = tmp_path / "kube.yaml"
    path.write_text(CLI_EXPERIMENT.replace("ENVIRONMENT", environment))
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1", "HOME": str(tmp_path)}
    argv = [sys.executable, "-m", "orchestrator", *[str(path) if a == "FILE" else a for a in args]]
    return subprocess.run(argv, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)


def test_validate_refuses_an_inline_secret_under_kubernetes_with_its_file_line_and_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kubectl_fake.install(tmp_path / "cluster", monkeypatch)
    done = cli(tmp_path, "validate", "FILE", environment="{MODE: bench, HF_TOKEN: abcdefgh12345678}")
    out = done.stdout + done.stderr
    assert done.returncode == 2 and "Traceback" not in out and "abcdefgh12345678" not in out
    assert "kube.yaml:6:" in out and "service.environment.HF_TOKEN:" in out and "launcher.secrets" in out


def test_the_dry_run_prints_manifests_that_are_valid_yaml_with_the_secret_a_quoted_string(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kubectl_fake.install(tmp_path / "cluster", monkeypatch)
    done = cli(tmp_path, "sweep", "--dry-run", "FILE")
    assert done.returncode == 0, done.stderr
    assert "sk-abcdefghijklmnop1234" not in done.stdout
    lines = done.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("kubectl apply -f -")) + 1
    end = next(i for i, line in enumerate(lines) if line.startswith("wait: "))
    job, service = yaml.safe_load_all("\n".join(line[4:] for line in lines[start:end]))
    assert (job["kind"], service["kind"]) == ("Job", "Service")
    command = job["spec"]["template"]["spec"]["containers"][0]["command"]
    assert command[-2:] == ["--api-key", "[redacted]"]


def test_a_hostile_kubectl_answer_is_one_clear_line_and_no_lock_is_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster = kubectl_fake.install(tmp_path / "cluster", monkeypatch, answers={"get jobs,services": '"x"'})
    done = cli(tmp_path, "restore", "FILE")
    assert done.returncode != 0 and "Traceback" not in done.stderr and "internal error" not in done.stdout
    assert "kubectl get jobs,services answered a string where an object belongs" in done.stdout + done.stderr
    done = cli(tmp_path, "sweep", "FILE", "--results", str(tmp_path / "results"), "--no-report")
    out = done.stdout + done.stderr
    assert done.returncode != 0 and "Traceback" not in out and "AttributeError" not in out
    assert "answered a string where an object belongs" in out
    assert kubectl_fake.state(cluster)["objects"] == {}  # the lock was released


def test_a_huge_kubectl_error_is_shown_bounded_and_kept_wrapped_in_the_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    refusal = "Error from server (Invalid): " + "the Job is invalid; " * 15_000  # 300 KB on one line
    kubectl_fake.install(tmp_path / "cluster", monkeypatch, failures={"apply -f": refusal})
    done = cli(tmp_path, "sweep", "FILE", "--results", str(tmp_path / "results"), "--no-report", "--allow-failures")
    out = done.stdout + done.stderr
    assert "Traceback" not in out and "Error from server (Invalid)" in out
    assert max(len(line) for line in out.splitlines()) < 1000 and len(out) < 20_000
    (records,) = (tmp_path / "results").glob("kube-cli/*/records.jsonl")
    for line in records.read_text().splitlines():
        error = json.loads(line)["error"]
        assert error["kind"] == "deploy_failed" and len(error["message"]) < 500
        assert "characters more" in error["message"] and error["evidence"][0].startswith("Error from server")
        assert all(len(e) <= 160 for e in error["evidence"]) and len(error["evidence"]) == 51
