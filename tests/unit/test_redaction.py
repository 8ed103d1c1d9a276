"""One redactor for what specsweep writes and shows (issue 28, item 2): secrets written inline, by name, in
URLs and after secret options, and the run lock that keeps a second controller out (item 3)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.redaction import REDACTED, inline_secrets, is_secret_name, redact, redact_text
from orchestrator.runs.runlock import RunLock, RunLockedError
from orchestrator.runs.store import RunStore
from tests.unit.test_store import PLAN, make_record


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("HF_TOKEN", True),
        ("OPENAI_API_KEY", True),
        ("AWS_SECRET_ACCESS_KEY", True),
        ("DB_PASSWORD", True),
        ("WANDB_APIKEY", True),
        ("MAX_TOKENS", False),
        ("TOKENIZERS_PARALLELISM", False),
        ("CUDA_VISIBLE_DEVICES", False),
        ("SGLANG_KEYS_DIR", False),
    ],
)
def test_a_secret_is_known_by_a_part_of_its_name(name: str, secret: bool) -> None:
    assert is_secret_name(name) is secret


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("serve --api-key sk-12345678 --port 1", "serve --api-key [redacted] --port 1"),
        ("serve --hf-token=hf_abcdefgh", "serve --hf-token=[redacted]"),
        ("serve --num-draft-tokens 5 --speculative-num-draft-tokens 8", None),
        ("serve --api-key $API_KEY", None),  # a reference, resolved on the host
        ("serve --api-key --port 1", None),  # no value: the next option
        ("http://bob:hunter22@127.0.0.1:8000/v1", "http://bob:redacted@127.0.0.1:8000/v1"),
        ("http://bob@127.0.0.1:8000", None),
        ("HF_TOKEN=hf_abcdefgh MAX_TOKENS=5 python -m x", "HF_TOKEN=[redacted] MAX_TOKENS=5 python -m x"),
        ("Environment=HF_TOKEN=$HF_TOKEN", None),
        ("server_args api_key=[secret API_KEY] hf_token=[secret HF_TOKEN]", None),  # a service's mask stays
    ],
)
def test_text_loses_its_secret_options_and_url_passwords(text: str, shown: str | None) -> None:
    assert redact_text(text) == (shown if shown is not None else text)


def test_a_redacted_url_still_parses_and_keeps_its_host_and_port() -> None:
    url = redact_text("http://bob:p%40ss:w0rd@[::1]:8000/v1")
    parts = urlsplit(url)
    assert (parts.hostname, parts.port, parts.username) == ("::1", 8000, "bob")
    assert "w0rd" not in url


def test_a_document_loses_every_inline_secret_and_keeps_its_references() -> None:
    doc = {
        "service": {
            "environment": {"HF_TOKEN": "hf_abcdefgh123", "MAX_TOKENS": "5", "OTHER": "$X"},
            "secrets": {"API": {"secret_env": "API"}},
            "command": "python -m sglang --api-key sk-12345678 --num-draft-tokens 5",
        },
        "server": {"url": "http://user:pa55word@127.0.0.1:8000", "api_key": "sekrit-key-1"},
        "note": "the token hf_abcdefgh123 is echoed here",
    }
    shown = redact(doc)
    text = json.dumps(shown)
    for value in ("hf_abcdefgh123", "sk-12345678", "pa55word", "sekrit-key-1"):
        assert value not in text
    assert shown["service"]["environment"] == {"HF_TOKEN": REDACTED, "MAX_TOKENS": "5", "OTHER": "$X"}
    assert shown["service"]["secrets"] == doc["service"]["secrets"]
    assert "--num-draft-tokens 5" in shown["service"]["command"]
    assert redact(shown) == shown  # once is enough
    assert {".".join(map(str, path)) for path, _what in inline_secrets(doc)} == {
        "service.environment.HF_TOKEN",
        "service.command",
        "server.url",
    }  # the echo in "note" is masked as a value found elsewhere, not named as a place one is written


@settings(max_examples=200, deadline=None)
@given(
    value=st.text(alphabet=st.characters(categories=("L", "N"), include_characters="-_./+"), min_size=8),
    name=st.sampled_from(["HF_TOKEN", "OPENAI_API_KEY", "MY_SECRET", "DB_PASSWORD"]),
)
def test_no_inline_secret_value_survives_anywhere_in_a_document(value: str, name: str) -> None:
    if value.startswith(("$", "-")) or value in ("redacted", REDACTED):
        return
    doc = {
        "environment": {name: value},
        "command": f"serve --model m --{name.lower().replace('_', '-')} {value}",
        "url": f"https://u:{value.replace('/', '').replace('@', '') or 'x'}@example.invalid/x",
        "events": [{"message": f"started with {value}"}],
    }
    assert value not in json.dumps(redact(doc), ensure_ascii=False)


def test_the_run_files_hold_no_inline_secret(tmp_path: Path) -> None:
    plan = {**PLAN, "deployments": [{"id": "d-1", "environment": {"HF_TOKEN": "hf_abcdefgh123"}, "load_points": []}]}
    resolved = {"service": {"environment": {"HF_TOKEN": "hf_abcdefgh123"}}, "server": {"url": "http://a:pw123456@h:1"}}
    store = RunStore.create(tmp_path, "demo", resolved, plan)
    store.append(make_record("p-1", command="serve --api-key sk-abcdefgh12 --port 1"))
    store.event("deploy", command="serve --api-key sk-abcdefgh12")
    store.write_json("provenance.json", {"command": "serve --hf-token hf_abcdefgh123"})
    store.release()
    written = "".join(p.read_text() for p in store.path.rglob("*") if p.is_file())
    for value in ("hf_abcdefgh123", "sk-abcdefgh12", "pw123456"):
        assert value not in written
    assert "[redacted]" in (store.path / "records.jsonl").read_text()


_HOLD = (
    "import sys\nfrom orchestrator.runs.runlock import RunLock\n"
    "RunLock.take(sys.argv[1])\nprint('held', flush=True)\nsys.stdin.read()\n"
)


def test_the_run_lock_keeps_another_process_out_and_names_it(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(tmp_path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        with pytest.raises(RunLockedError, match=f"pid {proc.pid} on .* since"):
            RunLock.take(tmp_path)
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(10)
    lock = RunLock.take(tmp_path)  # the holder is gone, and with it its lock (no stale lock to break)
    again = RunLock.take(tmp_path)  # the same process may take it twice (counted)
    again.release()
    assert lock.held and not again.held
    lock.release()
    lock.release()  # idempotent


# -- issue 40: one rule, by value; the classes that leaked ----------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value"),
    [
        pytest.param('serve --api-key "Q1uoted-value-1" --port 1', "Q1uoted-value-1", id="double-quoted-option"),
        pytest.param("HF_TOKEN='Q2uoted-value-2' python -m x", "Q2uoted-value-2", id="single-quoted-assignment"),
        pytest.param("serve --auth Auth-value-3 --port 1", "Auth-value-3", id="auth-option"),
        pytest.param("DB_PASS=db-pass-value-4 python -m x", "db-pass-value-4", id="db-pass"),
        pytest.param('{"Authorization": "Bearer bearer-value-5"}', "bearer-value-5", id="authorization-bearer-json"),
        pytest.param("Authorization: Basic dXNlcjpwYXNzd29yZA==", "dXNlcjpwYXNzd29yZA==", id="authorization-basic"),
        pytest.param("MODEL_REVISION=hf_abcdefghijklmnop1234", "hf_abcdefghijklmnop1234", id="hf-shaped-neutral"),
        pytest.param("repo ghp_abcdefghijklmnopqrstuvwx12 cloned", "ghp_abcdefghijklmnopqrstuvwx12", id="ghp-shaped"),
    ],
)
def test_every_class_of_inline_secret_is_masked(text: str, value: str) -> None:
    shown = redact_text(text)
    assert value not in shown and "[redacted]" in shown, shown


def test_a_quoted_value_keeps_its_quotes_and_the_rest_of_the_line() -> None:
    assert redact_text('a --api-key "x-secret-1" --port 2') == 'a --api-key "[redacted]" --port 2'
    assert redact_text("HF_TOKEN='hf-secret-2' MAX_TOKENS=5 x") == "HF_TOKEN='[redacted]' MAX_TOKENS=5 x"


def test_a_secret_found_anywhere_is_masked_everywhere_after_by_value() -> None:
    """A matrix value rendered into ``--api-key {key}`` is found in the plan; a server's 401 body echoing it
    under no telling name, written later into requests/*.jsonl, loses it too."""
    from orchestrator.redaction import redact

    key = "matrix-key-" + "7f3a9c"
    plan = {"deployments": [{"command": f"python -m sglang.launch_server --api-key {key} --port 30000"}]}
    assert key not in json.dumps(redact(plan))
    echoed = {"status": 401, "body": f"invalid credentials {key} for this model"}
    assert key not in json.dumps(redact(echoed))
    assert key not in redact_text(f"progress: point failed: HTTP 401 {key}")


def test_a_secret_env_value_read_for_the_server_is_masked_by_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from orchestrator.experiment.schema import load_experiment

    value = "env-secret-" + "55c1e0"
    monkeypatch.setenv("SWEEP_DB_SECRET", value)
    path = tmp_path / "exp.yaml"
    path.write_text(
        "name: t\nhost: local\nservice:\n  kind: process\n"
        "  command: python -m orchestrator.sim --port 30001 {spec_args}\n"
        "  environment: {NEUTRAL: {secret_env: SWEEP_DB_SECRET}}\n"
        'server: {url: "http://127.0.0.1:30001"}\nengine: sim\nvariants:\n  ar: {spec_args: ""}\n'
        "baselines: [ar]\nload: {concurrency: [1], requests: 4}\n"
    )
    load_experiment(path)
    assert value not in redact_text(f"server log: connecting with {value}")


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("--first-token-timeout 300s", False),  # a time: the option's last part is not a secret's
        ("--first-token-timeout <str>", False),  # help text: a metavar, not a value
        ("--api-key <str>", False),
        ("--api-key-file /etc/key.txt", False),  # a path to a secret, not the secret
        ("--hf-token hf-abcdef123", True),
        ("--api-key sekrit-value-1", True),
        ("--auth sekrit-value-2", True),
    ],
)
def test_an_option_is_secret_by_its_last_part_and_a_metavar_is_no_value(text: str, masked: bool) -> None:
    assert ("[redacted]" in redact_text(text)) is masked, redact_text(text)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        pytest.param("serve --api-key -abc123 --port 1", "-abc123", id="dash-led-option"),
        pytest.param("serve --api-key=-abc123 --port 1", "-abc123", id="dash-led-joined"),
        pytest.param("serve --api-key=--xyz987 --port 1", "--xyz987", id="double-dash-led-joined"),
        pytest.param("serve --api-key 12345678 --port 1", "12345678", id="all-digit-option"),
        pytest.param("HF_TOKEN=12345678 python -m x", "12345678", id="all-digit-assignment"),
        pytest.param("HF_TOKEN=-abc123 python -m x", "-abc123", id="dash-led-assignment"),
    ],
)
def test_a_dash_led_or_all_digit_value_is_masked(text: str, value: str) -> None:
    """Issue 40, item 14: a value that starts with a dash or is all digits is a value, not the next option."""
    shown = redact_text(text)
    assert value not in shown and "[redacted]" in shown, shown
    assert shown.endswith(("--port 1", "python -m x")), shown  # what follows is kept


@pytest.mark.parametrize(
    "text",
    [
        "serve --api-key --port 1",  # no value: the next option
        "serve --api-key -v",  # a short option
        "serve --eos-token 2 --pad-token 0",  # a token id
    ],
)
def test_the_next_option_and_a_short_number_are_not_values(text: str) -> None:
    assert redact_text(text) == text


def test_an_all_digit_environment_value_read_as_a_number_is_masked_everywhere() -> None:
    """``HF_TOKEN: 12345678`` in YAML is a number: masked in the document, named in the warning, remembered."""
    doc = {"service": {"environment": {"HF_TOKEN": 12345678, "WORKERS": 4}}, "note": "token 12345678 echoed"}
    shown = redact(doc)
    assert shown["service"]["environment"] == {"HF_TOKEN": REDACTED, "WORKERS": 4}
    assert "12345678" not in json.dumps(shown)
    assert [path for path, _what in inline_secrets(doc)] == [("service", "environment", "HF_TOKEN")]
