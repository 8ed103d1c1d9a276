"""The Kubernetes launcher against what a cluster or a user may hand it (issue 58): experiments whose names a
label cannot tell apart, ``kubectl`` answers of the wrong shape, a huge ``kubectl`` error, secrets written
inline, and a pod that asks for more than it needs. Against the fake ``kubectl`` (tests/unit/kubectl_fake.py)."""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator.errors import ConfigError, ServiceError, SpecsweepError
from orchestrator.experiment.schema import Experiment, load_experiment
from orchestrator.launchers import launcher_for
from orchestrator.launchers.kubernetes.jobs import experiment_label, lock_name, render_manifests
from orchestrator.launchers.restore import restore_experiment
from orchestrator.plan.deployments import build_plan
from tests.unit import kubectl_fake
from tests.unit.test_kubernetes_launcher import owned_by

EXPERIMENT = """\
name: NAME
launcher: {kind: kubernetes, image: example/sglang:0.5, namespace: NAMESPACE, gpus: 1EXTRA}
service:
  kind: process
  command: "python3 -m sglang.launch_server --port 30000 {spec_args}"
  environment: ENVIRONMENT
server: {url: "http://127.0.0.1:30000"}
engine: sglang
variants:
  autoregressive: {spec_args: ""}
baselines: [autoregressive]
load: {concurrency: [1], requests: 4, max_tokens: 16}
"""


def make(
    tmp_path: Path,
    name: str = "kube",
    *,
    extra: str = "",
    environment: str = "{MODE: bench}",
    namespace: str = "bench",
) -> Experiment:
    path = tmp_path / f"{name}.yaml"
    text = EXPERIMENT.replace("NAMESPACE", namespace).replace("NAME", name).replace("EXTRA", extra)
    text = text.replace("ENVIRONMENT", environment)
    path.write_text(text)
    return load_experiment(path)


def live_lock(experiment: str) -> dict[str, Any]:
    """The lock ConfigMap of a live run of ``experiment`` (this process, on this machine)."""
    data = {"experiment": experiment, "label": f"{experiment} r1", "controller": socket.gethostname()}
    data["pid"] = str(os.getpid())
    return {"kind": "ConfigMap", "metadata": {"name": lock_name(experiment)}, "data": data}


# -- S4: one experiment, one label, one lock ------------------------------------------------------------------

LONG = "k26-ddtree-" + "x" * 60


@pytest.mark.parametrize(
    ("a", "b"),
    [
        pytest.param(LONG + "-a", LONG + "-b", id="differ-past-63"),
        pytest.param("Kube_A", "kube-a", id="case-and-underscore"),
        pytest.param("kube.a", "kube-a", id="dot-and-dash"),
    ],
)
def test_two_experiments_a_label_cannot_tell_apart_have_two_labels_and_two_locks(a: str, b: str) -> None:
    assert experiment_label(a) != experiment_label(b) and lock_name(a) != lock_name(b)
    for name in (a, b):
        label, lock = experiment_label(name), lock_name(name)
        assert len(label) <= 63 and label[0].isalnum() and label[-1].isalnum()
        assert len(lock) <= 63 and lock == lock.lower() and lock.startswith("specsweep-lock-")


def test_restore_with_break_lock_leaves_the_live_jobs_of_another_experiment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = LONG + "-a", LONG + "-b"
    objects = {
        f"ConfigMap/{lock_name(a)}": live_lock(a),
        "Job/specsweep-a1": owned_by(a, "specsweep-a1"),
        "Service/specsweep-a1": owned_by(a, "specsweep-a1", "Service"),
    }
    # A's Job labelled as B's (a hash's collision, or a label written by hand): the annotation tells it apart.
    forged = owned_by(a, "specsweep-a2")
    forged["metadata"]["labels"]["specsweep.io/experiment"] = experiment_label(b)
    objects["Job/specsweep-a2"] = forged
    cluster = kubectl_fake.install(tmp_path / "cluster", monkeypatch, objects=objects)
    (outcome,) = restore_experiment(make(tmp_path, b), break_lock=True)
    assert outcome.error is None and outcome.summary == "nothing to restore"
    assert set(kubectl_fake.state(cluster)["objects"]) == set(objects)  # A's lock and Jobs are A's still
    (mine,) = restore_experiment(make(tmp_path, a), dry_run=True)
    assert mine.leftover is not None and mine.leftover.marker == {"jobs": ["specsweep-a1"]}  # by A's own label


# -- S5: answers of the wrong shape --------------------------------------------------------------------------

HOSTILE_LISTS = [
    pytest.param('"jobs"', "a string where an object belongs", id="string"),
    pytest.param("[]", "a list where an object belongs", id="list"),
    pytest.param('{"items": {"name": "x"}}', "an object where a list belongs", id="items-a-dict"),
    pytest.param('{"items": ["x"]}', "a string where an object belongs", id="item-a-string"),
    pytest.param('{"items": [{"metadata": []}]}', "a list where an object belongs", id="metadata-a-list"),
]


@pytest.mark.parametrize(("answer", "said"), HOSTILE_LISTS)
def test_a_hostile_jobs_answer_fails_the_open_clearly_and_releases_the_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, answer: str, said: str
) -> None:
    cluster = kubectl_fake.install(tmp_path / "cluster", monkeypatch, answers={"get jobs,services": answer})
    (slot,) = launcher_for(make(tmp_path), lock_label="kube r1", run_id="r1").slots()
    with pytest.raises(ServiceError) as info:
        slot.open(lambda _: None)
    assert "kubectl get jobs,services answered " + said in str(info.value)
    assert kubectl_fake.state(cluster)["objects"] == {}  # the lock taken is released
    assert slot.close() is False


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        *HOSTILE_LISTS[:4],
        pytest.param('{"items": [{"status": "Running"}]}', "a string where an object belongs (status)", id="status"),
        pytest.param(
            '{"items": [{"status": {"containerStatuses": {"state": {}}}}]}',
            "an object where a list belongs (containerStatuses)",
            id="container-statuses",
        ),
        pytest.param(
            '{"items": [{"status": {"containerStatuses": [{"state": {"waiting": "x"}}]}}]}',
            "a string where an object belongs (waiting)",
            id="waiting",
        ),
    ],
)
def test_a_hostile_pods_answer_fails_the_deployment_clearly_and_the_close_releases_the_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, answer: str, said: str
) -> None:
    cluster = kubectl_fake.install(tmp_path / "cluster", monkeypatch, answers={"get pods": answer})
    exp = make(tmp_path)
    (slot,) = launcher_for(exp, lock_label="kube r1", run_id="r1").slots()
    slot.open(lambda _: None)
    with pytest.raises(ServiceError) as info:
        slot.launch(build_plan(exp).deployments[0], progress=None, stop=threading.Event())
    assert "kubectl get pods answered " + said in str(info.value)
    assert slot.close() is True
    assert kubectl_fake.state(cluster)["objects"] == {}  # the Job, its Service and the lock deleted


def test_a_hostile_answer_to_restore_and_doctor_is_an_error_not_a_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from orchestrator.launchers.doctor import run_doctor

    answers = {"get jobs,services": '{"items": "x"}', "get configmap": "[]", "version --client": '"v1"'}
    kubectl_fake.install(tmp_path / "cluster", monkeypatch, answers=answers)
    (outcome,) = restore_experiment(make(tmp_path))
    assert outcome.error is not None and "answered a list where an object belongs" in outcome.error
    (report,) = run_doctor(make(tmp_path))
    assert [(c.name, c.status) for c in report.checks] == [("kubectl", "fail")]
    assert "kubectl version answered a string where an object belongs" in report.checks[0].detail


# -- S11: a huge kubectl error -------------------------------------------------------------------------------


def test_a_huge_kubectl_error_is_bounded_in_the_message_and_wrapped_in_the_evidence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    refusal = "Error from server (Invalid): " + "the Job is invalid; " * 15_000  # 300 KB on one line
    kubectl_fake.install(tmp_path / "cluster", monkeypatch, failures={"apply -f": refusal})
    exp = make(tmp_path)
    (slot,) = launcher_for(exp, lock_label="kube r1", run_id="r1").slots()
    slot.open(lambda _: None)
    with pytest.raises(SpecsweepError) as info:
        slot.launch(build_plan(exp).deployments[0], progress=None, stop=threading.Event())
    message = str(info.value)
    assert len(message) < 500 and message.startswith("kubectl apply failed (exit 1): Error from server (Invalid)")
    assert f"({len(refusal.strip()) - 300} characters more)" in message
    evidence = slot.evidence()
    assert evidence[0].startswith("Error from server (Invalid)") and all(len(line) <= 160 for line in evidence)
    assert len(evidence) == 51 and "more line(s) of 160 characters left out" in evidence[-1]
    slot.close()


# -- S3: no secret in clear in the Job ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("environment", "key"),
    [
        pytest.param("{MODE: bench, HF_TOKEN: abcdefgh12345678}", "HF_TOKEN", id="by-name"),
        pytest.param('{MODEL_SOURCE: "https://me:pa55word@models.example/k26"}', "MODEL_SOURCE", id="by-value"),
    ],
)
def test_an_inline_secret_in_the_environment_is_refused_pointing_to_launcher_secrets(
    tmp_path: Path, environment: str, key: str
) -> None:
    with pytest.raises(ConfigError) as info:
        make(tmp_path, environment=environment)
    message = str(info.value)
    assert "kube.yaml:6:" in message and f"service.environment.{key}:" in message
    assert "stand in clear in the Job object" in message and f"launcher.secrets ({{{key}: {{secret: S" in message
    assert "abcdefgh12345678" not in message and "pa55word" not in message


def test_the_shown_manifests_hold_a_redacted_secret_as_a_quoted_string(tmp_path: Path) -> None:
    from orchestrator.redaction import redact_text

    exp = make(tmp_path)
    deployment = build_plan(exp).deployments[0]
    token = "hf_" + "a1b2c3d4" * 4
    secret = deployment.model_copy(update={"environment": {"HF_TOKEN": token}, "command": f"serve --api-key {token}"})
    m = render_manifests(
        exp.launcher,  # type: ignore[arg-type]
        secret,
        experiment=exp.name,
        run_id="r1",
        server_url=exp.server.url,
        health_path="/health",
    )
    assert token in m.text  # what kubectl apply gets (never reached: validate refuses it)
    assert "value: '[redacted]'" in m.shown and "--api-key, '[redacted]'" in m.shown and token not in m.shown
    for text in (m.shown, redact_text(m.shown)):  # as shown, and once more through the console's redactor
        job = next(yaml.safe_load_all(text))
        container = job["spec"]["template"]["spec"]["containers"][0]
        assert container["env"] == [{"name": "HF_TOKEN", "value": "[redacted]"}]
        assert container["command"] == ["serve", "--api-key", "[redacted]"]


# -- S12: a pod with no more rights than it needs ---------------------------------------------------------------


def test_the_pod_is_restricted_and_mounts_no_api_token(tmp_path: Path) -> None:
    def pod_of(exp: Experiment) -> dict[str, Any]:
        m = render_manifests(
            exp.launcher,  # type: ignore[arg-type]
            build_plan(exp).deployments[0],
            experiment=exp.name,
            run_id="r1",
            server_url=exp.server.url,
            health_path="/health",
        )
        return dict(next(yaml.safe_load_all(m.text))["spec"]["template"]["spec"])

    pod = pod_of(make(tmp_path))
    assert pod["automountServiceAccountToken"] is False
    assert pod["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}}  # the image's user
    assert pod["containers"][0]["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
    }
    pod = pod_of(make(tmp_path, extra=", run_as_user: 1000"))
    assert pod["securityContext"] == {
        "seccompProfile": {"type": "RuntimeDefault"},
        "runAsNonRoot": True,
        "runAsUser": 1000,
    }
    with pytest.raises(ConfigError) as info:
        make(tmp_path, extra=", run_as_user: 0")
    assert "launcher.run_as_user" in str(info.value)


@pytest.mark.parametrize(
    ("namespace", "extra", "key", "said"),
    [
        pytest.param("kube-system", "", "launcher.namespace", "the cluster's own namespace", id="kube-system"),
        pytest.param(
            "bench", ", service_account: cluster-admin", "launcher.service_account", "privileged", id="cluster-admin"
        ),
        pytest.param("bench", ", service_account: root", "launcher.service_account", "privileged", id="root"),
    ],
)
def test_a_system_namespace_or_a_privileged_service_account_is_warned_about_at_validate(
    tmp_path: Path, namespace: str, extra: str, key: str, said: str
) -> None:
    warnings = make(tmp_path, namespace=namespace, extra=extra).warnings
    assert len(warnings) == 1 and "kube.yaml:2:" in warnings[0] and f"{key}: " in warnings[0] and said in warnings[0]
    assert make(tmp_path, extra=", service_account: bench-runner").warnings == []
