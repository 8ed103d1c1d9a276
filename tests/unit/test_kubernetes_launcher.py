"""The Kubernetes launcher (issue 51): its manifests, its dry run, and its ``kubectl`` calls against a fake
``kubectl`` on PATH (tests/unit/kubectl_fake.py) for launch, the log window, release, close and restore."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator.errors import ConfigError, StartFailed
from orchestrator.experiment.schema import Experiment, load_experiment
from orchestrator.launchers import launcher_for
from orchestrator.launchers.kubernetes.jobs import experiment_label, render_manifests
from orchestrator.launchers.kubernetes.launcher import KubernetesLauncher, KubernetesServer
from orchestrator.plan.deployments import build_plan
from tests.unit import kubectl_fake

EXPERIMENT = """\
name: kube
launcher:
  kind: kubernetes
  image: example/sglang:0.5
  namespace: bench
  gpus: 2
  memory: 64Gi
  node_selector: {nvidia.com/gpu.product: H100}
  secrets: {HF_TOKEN: {secret: hf, key: token}}
{extra}
service:
  kind: process
  command: "python3 -m sglang.launch_server --port 30000 {spec_args}"
  environment: {MODE: bench}
server: {url: "http://127.0.0.1:30000"}
engine: sglang
variants:
  autoregressive: {spec_args: ""}
  linear: {spec_args: "--speculative-num-draft-tokens {k}", matrix: {k: [2, 4]}}
baselines: [autoregressive]
load: {concurrency: [1], requests: 4, max_tokens: 16}
"""


def owned_by(experiment: str, name: str, kind: str = "Job") -> dict[str, Any]:
    """A Job (or Service) of ``experiment`` as a run of it leaves one: its label and its annotation."""
    meta = {
        "name": name,
        "labels": {"specsweep.io/experiment": experiment_label(experiment)},
        "annotations": {"specsweep.io/experiment": experiment},
    }
    return {"kind": kind, "metadata": meta}


def make(tmp_path: Path, extra: str = "", text: str | None = None) -> Experiment:
    path = tmp_path / "kube.yaml"
    path.write_text(text if text is not None else EXPERIMENT.replace("{extra}\n", extra + "\n" if extra else ""))
    return load_experiment(path)


class _Healthy(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def healthy() -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Healthy)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()


def test_the_manifests_are_a_job_and_a_service_with_the_deployments_command(tmp_path: Path) -> None:
    exp = make(tmp_path)
    assert exp.launcher_kind == "kubernetes"
    deployment = build_plan(exp).deployments[1]
    m = render_manifests(
        exp.launcher,  # type: ignore[arg-type]
        deployment,
        experiment=exp.name,
        run_id="20261206-r1",
        server_url=exp.server.url,
        health_path="/health",
    )
    job, service = yaml.safe_load_all(m.text)
    assert (job["apiVersion"], job["kind"], service["kind"]) == ("batch/v1", "Job", "Service")
    assert job["metadata"]["namespace"] == "bench" and job["metadata"]["name"] == m.name
    labels = job["metadata"]["labels"]
    assert labels["specsweep.io/experiment"] == experiment_label("kube") and labels["specsweep.io/run"] == "20261206-r1"
    assert job["metadata"]["annotations"]["specsweep.io/experiment"] == "kube"
    assert service["metadata"]["annotations"]["specsweep.io/experiment"] == "kube"
    assert labels["specsweep.io/deployment"] == deployment.id and labels["specsweep.io/job"] == m.name
    assert job["spec"]["backoffLimit"] == 0
    pod = job["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never" and pod["nodeSelector"] == {"nvidia.com/gpu.product": "H100"}
    (container,) = pod["containers"]
    assert container["image"] == "example/sglang:0.5"
    assert container["command"][:3] == ["python3", "-m", "sglang.launch_server"]
    assert container["command"][-2:] == ["--speculative-num-draft-tokens", "2"]
    assert {"name": "MODE", "value": "bench"} in container["env"]
    assert {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}} in container["env"]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": 2, "memory": "64Gi"}
    assert container["resources"]["requests"] == container["resources"]["limits"]
    assert container["ports"] == [{"name": "http", "containerPort": 30000}]
    assert container["readinessProbe"]["httpGet"] == {"path": "/health", "port": 30000}
    assert service["spec"]["selector"] == {"specsweep.io/job": m.name}
    assert service["spec"]["ports"][0]["port"] == 30000
    assert job["spec"]["template"]["metadata"]["labels"]["specsweep.io/job"] == m.name
    assert len(m.name) <= 63 and m.name == m.name.lower()


def test_the_dry_run_shows_each_deployments_manifests(tmp_path: Path) -> None:
    from orchestrator.sweep.dryrun import describe_plan

    text = describe_plan(make(tmp_path))
    assert "one Kubernetes Job each" in text and "namespace bench" in text
    assert text.count("kubectl apply -f -") == 3 and text.count("kind: Job") == 3
    assert "nvidia.com/gpu: 2" in text and "secretKeyRef" in text
    assert "kubectl port-forward service/specsweep-" in text and "kubectl delete job/specsweep-" in text


@pytest.mark.parametrize(
    ("extra", "key", "message"),
    [
        pytest.param("  log_file_note: 1", "launcher.log_file_note", "unknown key", id="unknown-key"),
        pytest.param("  reach: tunnel", "launcher.reach", "port-forward", id="bad-reach"),
        pytest.param("  service_account: Bad_Name", "launcher.service_account", "lower-case", id="bad-name"),
    ],
)
def test_the_spec_refuses_what_kubernetes_would(tmp_path: Path, extra: str, key: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        make(tmp_path, extra=extra)
    assert key in str(info.value) and message in str(info.value)


def test_the_checks_across_sections_are_the_specs(tmp_path: Path) -> None:
    base = EXPERIMENT.replace("{extra}\n", "")
    with pytest.raises(ConfigError) as info:
        make(tmp_path, text=base.replace("name: kube\n", "name: kube\nhost: local\n"))
    assert "set either launcher or host/hosts" in str(info.value)
    with pytest.raises(ConfigError) as info:
        make(tmp_path, text=base.replace('"http://127.0.0.1:30000"', '"http://{service}:30000"'))
    assert "launcher.reach: service" in str(info.value)
    assert (
        make(
            tmp_path,
            text=base.replace("  gpus: 2\n", "  gpus: 2\n  reach: service\n").replace(
                '"http://127.0.0.1:30000"', '"http://{service}:30000"'
            ),
        ).launcher.reach
        == "service"
    )  # type: ignore[union-attr]
    with pytest.raises(ConfigError) as info:
        make(tmp_path, text=base.replace("kind: kubernetes", "kind: kubernetess"))
    assert "unknown kind 'kubernetess'" in str(info.value) and "kubernetes" in str(info.value)


def _verbs(directory: Path) -> list[str]:
    return [" ".join(kubectl_fake.without_flags(c["argv"])[:2]) for c in kubectl_fake.calls(directory)]


def test_launch_logs_release_and_close_drive_kubectl(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, healthy: int
) -> None:
    cluster = kubectl_fake.install(tmp_path / "cluster", monkeypatch, forward_port=healthy, log="a\nb\n")
    exp = make(tmp_path)
    launcher = launcher_for(exp, lock_label="kube r1", run_id="r1")
    assert isinstance(launcher, KubernetesLauncher) and launcher.kind == "kubernetes"
    (slot,) = launcher.slots()
    told: list[str] = []
    slot.open(told.append)
    deployment = build_plan(exp).deployments[0]
    server = slot.launch(deployment, progress=None, stop=threading.Event())
    assert isinstance(server, KubernetesServer)
    assert server.url == f"http://127.0.0.1:{healthy}"
    assert server.placement == {
        "launcher": "kubernetes",
        "job": server.name,
        "pod": f"{server.name}-x7k2p",
        "node": "gpu-node-1",
        "namespace": "bench",
        "gpus": 2,
    }
    cursor = server.logs.journal_cursor()
    assert cursor == "4" and server.logs.journal_since("2").text == "b\n"
    assert server.alive()
    server.release()
    assert slot.close() is True
    calls = kubectl_fake.calls(cluster)
    assert all(c["argv"][:2] == ["--namespace", "bench"] for c in calls)
    assert _verbs(cluster) == [
        "create configmap",  # the lock
        "get jobs,services",  # what a killed run left
        "apply -f",  # the Job and the Service
        "get pods",  # running on a node
        "port-forward service/" + server.name,
        "logs job/" + server.name,  # the cursor
        "logs job/" + server.name,  # the window
        "get pods",  # alive
        "delete job/" + server.name,  # release
        "delete jobs,services",  # the run's, at the last close
        "delete configmap",
    ]
    applied = list(yaml.safe_load_all(calls[2]["stdin"]))
    assert [d["kind"] for d in applied] == ["Job", "Service"]
    selector = f"specsweep.io/experiment={experiment_label('kube')},specsweep.io/run=r1"
    assert calls[-2]["argv"][-3:] == ["-l", selector, "--ignore-not-found"]
    assert kubectl_fake.state(cluster)["objects"] == {}  # nothing left in the cluster
    assert told == []


def test_a_pod_that_cannot_pull_its_image_fails_its_deployment_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster = kubectl_fake.install(tmp_path / "cluster", monkeypatch, mode="pull_error")
    exp = make(tmp_path)
    (slot,) = launcher_for(exp, lock_label="kube r1", run_id="r1").slots()
    slot.open(lambda _: None)
    with pytest.raises(StartFailed) as info:
        slot.launch(build_plan(exp).deployments[0], progress=None, stop=threading.Event())
    assert info.value.reason == "pod_errimagepull"
    assert "ErrImagePull: pull access denied" in info.value.evidence[0]
    assert "delete job/" in " ".join(_verbs(cluster))  # the Job that will not serve is deleted at once
    slot.close()


def test_a_killed_runs_jobs_are_deleted_when_the_next_run_opens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, healthy: int
) -> None:
    left = owned_by("kube", "specsweep-old")
    cluster = kubectl_fake.install(tmp_path / "cluster", monkeypatch, objects={"Job/specsweep-old": left})
    (slot,) = launcher_for(make(tmp_path), lock_label="kube r2", run_id="r2").slots()
    told: list[str] = []
    slot.open(told.append)
    assert told == ["1 Kubernetes Job(s) of a killed run deleted: specsweep-old"]
    assert "Job/specsweep-old" not in kubectl_fake.state(cluster)["objects"]
    slot.close()


def test_restore_finds_and_deletes_leftover_jobs_by_label(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from orchestrator.launchers.restore import restore_experiment

    objects = {
        "Job/specsweep-a": owned_by("kube", "specsweep-a"),
        "Service/specsweep-a": owned_by("kube", "specsweep-a", "Service"),
        "Job/other": owned_by("x", "other"),
    }
    cluster = kubectl_fake.install(tmp_path / "cluster", monkeypatch, objects=objects)
    exp = make(tmp_path)
    (found,) = restore_experiment(exp, dry_run=True)
    assert found.leftover is not None and not found.restored and "specsweep-a" in found.summary
    assert set(kubectl_fake.state(cluster)["objects"]) == set(objects)  # a dry run deletes nothing
    (done,) = restore_experiment(exp)
    assert done.restored and done.error is None
    assert set(kubectl_fake.state(cluster)["objects"]) == {"Job/other"}  # only this experiment's, by label
    delete = next(c["argv"] for c in kubectl_fake.calls(cluster) if "delete" in c["argv"])
    assert kubectl_fake.without_flags(delete) == [
        "delete",
        "job/specsweep-a",
        "service/specsweep-a",
        "--ignore-not-found",
    ]
    (again,) = restore_experiment(exp)
    assert again.leftover is None and again.summary == "nothing to restore"


def test_doctor_checks_kubectl_the_namespace_and_the_gpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from orchestrator.launchers.doctor import run_doctor

    kubectl_fake.install(tmp_path / "cluster", monkeypatch)
    (report,) = run_doctor(make(tmp_path))
    checks = {c.name: (c.status, c.detail) for c in report.checks}
    assert checks["kubectl"] == ("ok", "v1.31.0")
    assert checks["jobs"][0] == "ok" and checks["gpus"] == ("ok", "1 of 1 node(s) offer 2 nvidia.com/gpu")
    assert checks["leftovers"] == ("ok", "no Job of this experiment") and report.ok
