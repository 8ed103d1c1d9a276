"""A whole sweep on the Kubernetes launcher, against the fake ``kubectl`` (tests/unit/kubectl_fake.py) in its
``run`` mode: each Job's container command (the simulator) runs here as the pod, its output the pod's log, so
the sweep goes through apply, the pod's state, port-forward, the log windows and the deletes end to end. No
cluster is involved: what this shows is the launcher's use of kubectl, not a cluster's behaviour."""

from __future__ import annotations

from pathlib import Path

import pytest

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
