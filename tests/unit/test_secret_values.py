"""Secrets an experiment names (``{secret_env: ...}``, ``{secret_file: ...}``): read on the controller when the
file is loaded, kept out of the resolved experiment, the plan and the dry run, rendered as references, and
written for the host in a form systemd and sh read back exactly. The test host runs them for real
(tests/reliability/test_secrets.py)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator.errors import ConfigError
from orchestrator.experiment.schema import load_experiment
from orchestrator.experiment.service import SecretSource
from orchestrator.plan.deployments import build_plan
from orchestrator.runs.identity import resolved_experiment
from orchestrator.services.secrets import Redactor, env_file_text, reference
from orchestrator.services.systemd import render_dropin, secret_environment_file
from orchestrator.sweep.dryrun import describe_plan

TOKEN = "hf_unit-test-TOKEN-5f1c2e"
KEY = "sk-unit-test-KEY-9a8b7c"


def _doc(kind: str = "systemd", **service: Any) -> dict[str, Any]:
    base: dict[str, Any] = (
        {"kind": "systemd", "unit": "sim.service", "exec_start": "/opt/server --api-key $API_KEY --x {x}"}
        if kind == "systemd"
        else {"kind": "process", "command": "/opt/server --api-key $API_KEY --x {x}"}
    )
    base["environment"] = {"HF_TOKEN": {"secret_env": "SPECSWEEP_TEST_TOKEN"}, "PLAIN": "1"}
    base.update(service)
    return {
        "name": "secrets",
        "host": "root@gpu-box",
        "service": base,
        "server": {"url": "http://127.0.0.1:1", "api_key": {"secret_file": "key.txt"}},
        "engine": "sim",
        "variants": {"a": {"x": "1"}, "b": {"x": "2"}},
        "load": {"concurrency": [1]},
    }


def _write(tmp_path: Path, doc: dict[str, Any]) -> Path:
    (tmp_path / "key.txt").write_text(KEY + "\n")
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


@pytest.fixture(autouse=True)
def _token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECSWEEP_TEST_TOKEN", TOKEN)


@pytest.mark.parametrize("kind", ["systemd", "process"])
def test_values_are_read_and_only_references_are_kept(tmp_path: Path, kind: str) -> None:
    doc = _doc(kind)
    doc["service"]["environment"]["API_KEY"] = {"secret_file": "key.txt"}
    exp = load_experiment(_write(tmp_path, doc))
    values = {k: v.get_secret_value() if v else None for k, v in exp.service.secret_values().items()}
    assert values == {"HF_TOKEN": TOKEN, "API_KEY": KEY}
    assert exp.server.api_key_value == KEY
    assert exp.service.environment == {"PLAIN": "1"}
    stored = resolved_experiment(exp)
    assert stored["service"]["secrets"] == {
        "HF_TOKEN": {"secret_env": "SPECSWEEP_TEST_TOKEN"},
        "API_KEY": {"secret_file": "key.txt"},
    }
    plan = build_plan(exp)
    outputs = [yaml.safe_dump(stored), json.dumps(plan.to_json_dict()), describe_plan(exp), repr(exp), str(exp)]
    for text in outputs:
        assert TOKEN not in text and KEY not in text
    # A stored experiment validates again as it is (a resume compares them) without reading anything.
    from orchestrator.experiment.schema import Experiment

    again = Experiment.model_validate(stored)
    assert resolved_experiment(again) == stored
    assert again.service.secret_values() == {"HF_TOKEN": None, "API_KEY": None}


def test_a_secret_changes_the_configuration_ids_but_not_the_others(tmp_path: Path) -> None:
    with_secret = build_plan(load_experiment(_write(tmp_path, _doc())))
    plain_doc = _doc()
    plain_doc["service"]["environment"] = {"PLAIN": "1"}
    plain_doc["server"].pop("api_key")
    without = build_plan(load_experiment(_write(tmp_path, plain_doc)))
    assert {d.id for d in with_secret.deployments}.isdisjoint({d.id for d in without.deployments})


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"environment": {"HF_TOKEN": {"secret_env": "SPECSWEEP_UNSET_VAR"}}}, "not set in the controller"),
        ({"environment": {"HF_TOKEN": {"secret_file": "missing.txt"}}}, "cannot read the secret file"),
        ({"environment": {"HF_TOKEN": {"secret_env": "X", "secret_file": "y"}}}, "either"),
        ({"environment": {"HF_TOKEN": {}}}, "either"),
        ({"environment": {"HF_TOKEN": {"secret_env": "1BAD"}}}, "secret_env must name"),
        ({"environment": {"bad name": {"secret_env": "X"}}}, "not valid"),
    ],
)
def test_bad_secrets_are_one_config_error_that_never_quotes_a_value(
    tmp_path: Path, change: dict[str, Any], words: str
) -> None:
    doc = _doc(**change)
    with pytest.raises(ConfigError) as caught:
        load_experiment(_write(tmp_path, doc))
    message = str(caught.value)
    assert words in message and "\n" not in message and message.startswith(str(tmp_path / "exp.yaml"))
    assert TOKEN not in message and KEY not in message


@pytest.mark.parametrize(
    ("content", "words"),
    [(b"", "is empty"), (b"two\nlines\n", "one line"), (b"\xff\xfe", "not UTF-8"), (b"a\0b", "NUL")],
)
def test_a_secret_file_holds_one_line_of_text(tmp_path: Path, content: bytes, words: str) -> None:
    doc = _doc(environment={"HF_TOKEN": {"secret_file": "token.txt"}})
    path = _write(tmp_path, doc)
    (tmp_path / "token.txt").write_bytes(content)
    with pytest.raises(ConfigError, match=words):
        load_experiment(path)


def test_an_api_key_from_a_file_must_fit_a_header(tmp_path: Path) -> None:
    path = _write(tmp_path, _doc())
    (tmp_path / "key.txt").write_text("ünïcode key\n")
    with pytest.raises(ConfigError, match="printable ASCII"):
        load_experiment(path)


def test_the_drop_in_names_the_secret_file_and_references_the_secret(tmp_path: Path) -> None:
    exp = load_experiment(_write(tmp_path, _doc(environment={"API_KEY": {"secret_env": "SPECSWEEP_TEST_TOKEN"}})))
    deployment = build_plan(exp).deployments[0]
    path = secret_environment_file("sim.service")
    text = render_dropin(deployment, secrets=["API_KEY"], environment_file=path)
    assert 'ExecStart="/opt/server" "--api-key" ${API_KEY} "--x" "1"' in text
    assert text.rstrip().endswith("EnvironmentFile=/run/specsweep/sim.service.env")
    assert TOKEN not in text
    # Without the secret, $API_KEY is a literal word as always.
    assert '"$$API_KEY"' in render_dropin(deployment)


def test_the_program_cannot_be_a_secret() -> None:
    from orchestrator.plan.deployments import Deployment

    deployment = Deployment(id="d", variant="v", command="$API_KEY --x", config_hash="c", load_points=[])
    with pytest.raises(ConfigError, match="program"):
        render_dropin(deployment, secrets=["API_KEY"], environment_file="/run/specsweep/x.env")


@pytest.mark.parametrize(
    "value", ["plain", "it's", "a'b'c", 'x"y', "$HOME `id` $(id) ; | &", "  spaced  ", "\\back\\", "ünï ✓", "#"]
)
def test_the_environment_file_reads_back_exactly_in_sh(tmp_path: Path, value: str) -> None:
    """The same text systemd's EnvironmentFile= parser reads (single quotes keep everything; see
    orchestrator/services/secrets.py); sh reads it alike, which the process service relies on."""
    file = tmp_path / "env"
    file.write_text(env_file_text({"SECRET": value}))
    out = subprocess.run(["sh", "-c", '. "$0"; printf %s "$SECRET"', str(file)], capture_output=True, text=True)
    assert out.stdout == value


def test_references_and_redaction() -> None:
    assert reference("$X", ["X"]) == "X" and reference("${X}", ["X"]) == "X"
    assert reference("$X", ["Y"]) is None and reference("a$X", ["X"]) is None and reference("$X}", ["X"]) is None
    redact = Redactor({"HF_TOKEN": TOKEN, "SHORT": "abc"})
    assert redact(f"server_args(token={TOKEN!r}) abc") == "server_args(token='[secret HF_TOKEN]') abc"
    assert not Redactor({"SHORT": "abc"})


def test_secret_source_describes_itself_without_a_value() -> None:
    assert SecretSource(secret_env="X").describe() == "$X"
    assert SecretSource(secret_file="~/.hf").describe() == "file ~/.hf"


def test_restore_loads_an_experiment_whose_secrets_are_not_there(tmp_path: Path) -> None:
    # After a kill -9, `specsweep restore FILE` runs in whatever shell is at hand: undoing the run must not
    # need the tokens the server was given (the env file is found by the unit's name, not by its content).
    path = _write(tmp_path, _doc(environment={"HF_TOKEN": {"secret_env": "SPECSWEEP_UNSET_VAR"}}))
    (tmp_path / "key.txt").unlink()
    with pytest.raises(ConfigError):
        load_experiment(path)
    exp = load_experiment(path, read_secrets=False)
    assert exp.service.secrets is not None and exp.service.secrets["HF_TOKEN"].value is None
