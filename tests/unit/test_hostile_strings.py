"""Strings `sweep` cannot use are refused by `validate`, with file:line:col and the key, never a traceback later.

YAML escapes make a lone surrogate (``"\\ud800"``) or a NUL (``"\\0"``) out of a valid UTF-8 file, and
``!!binary`` makes arbitrary bytes; a surrogate cannot be encoded for a file, a command line or a terminal, a NUL
cannot be in an argv or environment. Both are refused in every string of every YAML document specsweep reads.
Control characters are refused where they cannot work (paths, URLs, names, the API key).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.errors import ConfigError
from orchestrator.experiment.schema import load_experiment
from orchestrator.plan.deployments import build_plan
from orchestrator.sweep.dryrun import describe_plan

# Any code point, lone surrogates (category Cs, which hypothesis leaves out by default) and NUL weighted in:
# YAML escapes make both out of a valid UTF-8 file.
ANY_CHARACTER = st.one_of(
    st.characters(codec=None, exclude_categories=()), st.integers(0xD800, 0xDFFF).map(chr), st.just("\0")
)


PROCESS = """\
name: hostile
description: a process-service experiment with one field made hostile
host: {ssh: "root@gpu-box", identity_file: ~/.ssh/id_ed25519}
service:
  kind: process
  command: "{python} -m orchestrator.sim --port 18191 {spec_args} --x {extra}"
  workdir: /tmp
  log_file: /tmp/sim.log
  environment:
    FOO: "bar"
server:
  url: "http://127.0.0.1:18191"
  model: sim
  health_paths: [/health]
  metrics_path: /metrics
  api_key: "sk-123"
engine: sim
parsers:
  - {name: mine, regex: "x=(?P<x>[0-9]+)"}
vars: {extra: "1"}
variants:
  ar: {spec_args: "--algorithm ar"}
  tree:
    spec_args: "--algorithm ddtree --budget {budget}"
    matrix: {budget: [7, 16]}
baselines: [ar]
load: {concurrency: [1], requests: 2, prompts: "builtin:chat"}
"""

SYSTEMD = """\
name: hostile
host: {ssh: "root@gpu-box"}
service:
  kind: systemd
  unit: sim.service
  exec_start: "/opt/py -m sim {spec_args}"
  environment:
    FOO: "bar"
server: {url: "http://gpu-box:1"}
engine: sim
variants:
  ar: {spec_args: "--algorithm ar"}
load: {concurrency: [1]}
"""

UNIT = """\
name: hostile
host: {ssh: "root@gpu-box"}
service:
  kind: systemd
  unit: sim.service
  mode: unit
  unit_file: "[Service]\\nExecStart=/opt/py -m sim {spec_args}\\nEnvironment=A={spec_args}\\n"
server: {url: "http://gpu-box:1"}
engine: sim
variants:
  ar: {spec_args: "--algorithm ar"}
load: {concurrency: [1]}
"""

# (document, text to replace, replacement with the placeholder BAD, expected key)
FIELDS = [
    (PROCESS, '"bar"', "BAD", "service.environment.FOO"),
    (PROCESS, "    FOO:", "    BAD:", "service.environment"),
    (PROCESS, '"{python} -m', '"{python} BAD -m', "service.command"),
    (PROCESS, "workdir: /tmp", "workdir: BAD", "service.workdir"),
    (PROCESS, "log_file: /tmp/sim.log", "log_file: BAD", "service.log_file"),
    (PROCESS, '"root@gpu-box"', "BAD", "host.ssh"),
    (PROCESS, "~/.ssh/id_ed25519", "BAD", "host.identity_file"),
    (PROCESS, '"http://127.0.0.1:18191"', "BAD", "server.url"),
    (PROCESS, "model: sim", "model: BAD", "server.model"),
    (PROCESS, "[/health]", "[BAD]", "server.health_paths"),
    (PROCESS, "metrics_path: /metrics", "metrics_path: BAD", "server.metrics_path"),
    (PROCESS, '"sk-123"', "BAD", "server.api_key"),
    (PROCESS, '"x=(?P<x>[0-9]+)"', "BAD", "parsers.0.regex"),
    (PROCESS, 'extra: "1"', "extra: BAD", "vars.extra"),
    (PROCESS, '"--algorithm ar"', "BAD", "variants.ar.spec_args"),
    (PROCESS, "[7, 16]", "[7, BAD]", "variants.tree.matrix.budget.1"),
    (PROCESS, '"builtin:chat"', "BAD", "load.prompts"),
    (
        PROCESS,
        "description: a process-service experiment with one field made hostile",
        "description: BAD",
        "description",
    ),
    (PROCESS, "baselines: [ar]", "baselines: [ar]\nbaselines_from: BAD", "baselines_from"),
    (SYSTEMD, '"bar"', "BAD", "service.environment.FOO"),
    (SYSTEMD, '"/opt/py -m', '"/opt/py BAD -m', "service.exec_start"),
    (SYSTEMD, "sim.service", "BAD", "service.unit"),
    (UNIT, "-m sim {spec_args}", "-m sim BAD {spec_args}", "service.unit_file"),
]
EVERYWHERE = {
    "surrogate": '"\\ud800"',
    "nul": '"\\0"',
    "binary-nul": "!!binary AAAA",
}
# Where a field is not free text, control characters cannot work either.
CONTROL_FIELDS = {
    "host.ssh",
    "host.identity_file",
    "service.workdir",
    "service.log_file",
    "server.url",
    "server.model",
    "server.health_paths",
    "server.metrics_path",
    "server.api_key",
    "load.prompts",
    "baselines_from",
    "service.unit",
    "service.environment",
}


def _load(tmp_path: Path, text: str) -> object:
    path = tmp_path / "exp.yaml"
    path.write_text(text, encoding="utf-8")
    return build_plan(load_experiment(path))  # type: ignore[arg-type]


def _refused(tmp_path: Path, text: str, key: str) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, text)
    message = str(info.value)
    assert re.match(re.escape(str(tmp_path / "exp.yaml")) + r":\d+:\d+: ", message), message
    assert f": {key}" in message, message
    assert "\n" not in message and message.isprintable(), message
    message.encode("utf-8")  # printable on any terminal
    return info.value


@pytest.mark.parametrize("doc", [PROCESS, SYSTEMD, UNIT], ids=["process", "systemd", "unit"])
def test_the_seed_documents_are_valid(tmp_path: Path, doc: str) -> None:
    assert all(f[1] in f[0] for f in FIELDS)
    _load(tmp_path, doc)


def _inside_a_string(new: str) -> bool:
    return "{python} BAD" in new or "sim BAD" in new or "py BAD" in new


# Every field with every kind, but a YAML tag (binary-nul) where the field's value is part of a longer string:
# a tag cannot stand there, so that case does not exist (it was a skip in every run).
HOSTILE = [
    pytest.param(*field, kind, id=f"{field[3]}-{i}-{kind}")
    for kind in EVERYWHERE
    for i, field in enumerate(FIELDS)
    if not (kind == "binary-nul" and _inside_a_string(field[2]))
]


@pytest.mark.parametrize(("doc", "old", "new", "key", "kind"), HOSTILE)
def test_surrogates_and_nul_are_refused_in_every_field(
    tmp_path: Path, doc: str, old: str, new: str, key: str, kind: str
) -> None:
    bad = EVERYWHERE[kind]
    if _inside_a_string(new):
        bad = bad.strip('"')
    error = _refused(tmp_path, doc.replace(old, new.replace("BAD", bad)), key)
    assert error.exit_code == 2


@pytest.mark.parametrize("control", ["\\n", "\\t", "\\x01", "\\x7f", "\\x85", "\\u2028"])
@pytest.mark.parametrize("key", sorted(CONTROL_FIELDS))
def test_control_characters_are_refused_where_they_cannot_work(tmp_path: Path, key: str, control: str) -> None:
    doc, old, new, _ = next(f for f in FIELDS if f[3] == key)
    value = {"service.environment": "FOO", "service.unit": "sim"}.get(key, "/x")
    if key == "server.url":
        value = "http://127.0.0.1:1/"
    elif key == "host.ssh":
        value = "root@gpu"
    elif key == "server.api_key":
        value = "sk"
    _refused(tmp_path, doc.replace(old, new.replace("BAD", f'"{value}{control}x"')), key)


def test_an_environment_value_may_hold_control_characters(tmp_path: Path) -> None:
    # A value in an environment is data: newlines and tabs work (quoted for systemd, passed as is to a process).
    for doc in (PROCESS, SYSTEMD):
        _load(tmp_path, doc.replace('"bar"', '"a\\nb\\tc\\x01"'))


def test_nul_in_a_playbook_is_refused_too(tmp_path: Path) -> None:
    from orchestrator.experiment.yamlsource import load_yaml_with_positions

    path = tmp_path / "p.yaml"
    path.write_text('steps:\n  - shell: {command: "echo \\0"}\n')
    with pytest.raises(ConfigError, match=r"p\.yaml:2:\d+: steps\.0\.shell\.command: .*NUL"):
        load_yaml_with_positions(path)


# -------------------------------------------------------------------- any string, in any field, never a traceback


def _escaped(text: str) -> str:
    """``text`` as a YAML double-quoted scalar (JSON escapes are YAML escapes), surrogates included."""
    return json.dumps(text, ensure_ascii=True)


TARGETS = [f for f in FIELDS if "BAD" in f[2] and not f[2].startswith(('"{python} BAD', '"/opt/py BAD', "-m sim BAD"))]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    target=st.sampled_from(TARGETS),
    value=st.text(alphabet=ANY_CHARACTER, max_size=12),
)
def test_any_string_either_validates_and_renders_or_is_refused(
    tmp_path: Path, target: tuple[str, str, str, str], value: str
) -> None:
    doc, old, new, _key = target
    text = doc.replace(old, new.replace("BAD", _escaped(value)))
    path = tmp_path / "exp.yaml"
    path.write_text(text, encoding="utf-8")
    try:
        experiment = load_experiment(path)
        plan = build_plan(experiment)
    except ConfigError as exc:
        assert str(exc).startswith(str(path)) and "\n" not in str(exc)
        str(exc).encode("utf-8")
        return
    # What validate accepts, sweep can write and print: the dry run, the resolved experiment, the plan.
    describe_plan(experiment).encode("utf-8")
    json.dumps(plan.to_json_dict(), default=str).encode("utf-8")
    from orchestrator.sweep.runner import resolved_experiment

    yaml.safe_dump(resolved_experiment(experiment), allow_unicode=True).encode("utf-8")
    for deployment in plan.deployments:
        for name, val in deployment.environment.items():
            assert "\0" not in name + val
