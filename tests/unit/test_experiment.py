"""Experiment schema: every error path names file, line and key, and suggests the nearest valid key."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.errors import ConfigError
from orchestrator.experiment.hosts import LocalHostSpec, SSHHostSpec
from orchestrator.experiment.schema import load_experiment

GOOD = """\
name: t
host: {ssh: root@gpu-box}
service:
  kind: systemd
  unit: sglang.service
  exec_start: python -m sglang.launch_server --port 30001 {spec_args}
server: {url: "http://gpu-box:30001", ready_timeout: 15m}
engine: sglang
variants:
  ar: {spec_args: ""}
  tree:
    spec_args: "--budget {budget} --topk {topk}"
    matrix: {budget: [7, 16], topk: [1, 4]}
baselines: [ar]
load: {concurrency: [1, 8], requests: 16}
"""


def load_text(tmp_path: Path, text: str) -> object:
    path = tmp_path / "exp.yaml"
    path.write_text(text)
    return load_experiment(path)


def error_for(tmp_path: Path, text: str) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load_text(tmp_path, text)
    assert info.value.exit_code == 2
    assert str(info.value).startswith(str(tmp_path / "exp.yaml"))
    return info.value


def test_good_file_loads(tmp_path: Path) -> None:
    exp = load_text(tmp_path, GOOD)
    assert exp.server.ready_timeout == 900.0  # type: ignore[attr-defined]
    assert exp.host_specs()[0].ssh == "root@gpu-box"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("old", "new", "line", "key", "fragment"),
    [
        pytest.param(
            "matrix: {budget:",
            "matrix: {budegt:",
            13,
            "variants.tree.matrix.budegt",
            "did you mean 'budget'",
            id="matrix-key-typo",
        ),
        pytest.param(
            "  unit: sglang",
            "  unitt: sglang",
            5,
            "service.unitt",
            "did you mean 'unit'",
            id="service-key-typo",
        ),
        pytest.param("load: {", "lod: {", 15, "lod", "did you mean 'load'", id="top-level-typo"),
        pytest.param(
            "ready_timeout: 15m",
            "ready_timeout: 15x",
            7,
            "server.ready_timeout",
            "expected a duration",
            id="bad-duration",
        ),
        pytest.param(
            "baselines: [ar]",
            "baselines: [arr]",
            14,
            "baselines.0",
            "did you mean 'ar'",
            id="unknown-baseline",
        ),
        pytest.param("kind: systemd", "kind: sytemd", 4, "service.kind", "did you mean 'systemd'", id="unknown-kind"),
        pytest.param(
            "  ar: {spec_args",
            "  ar: {spec_arg",
            10,
            "variants.ar.spec_arg",
            "did you mean 'spec_args'",
            id="variant-field-typo",
        ),
        pytest.param('{topk}"', '{topk"', 12, "variants.tree.spec_args", "expected '}'", id="unbalanced-brace"),
        pytest.param('{topk}"', '{top}"', 12, "variants.tree.spec_args", "did you mean {topk}", id="placeholder-typo"),
        pytest.param("[7, 16], topk", "[], topk", 13, "variants.tree.matrix", "empty list", id="empty-matrix"),
        pytest.param(
            "concurrency: [1, 8]",
            "concurrency: [1, x]",
            15,
            "load.concurrency.1",
            "valid integer",
            id="bad-concurrency",
        ),
        pytest.param(
            "concurrency: [1, 8]",
            "concurrency: [0]",
            15,
            "load.concurrency.0",
            "greater than",
            id="zero-concurrency",
        ),
        pytest.param('url: "http://gpu-box:30001"', 'url: "gpu-box:30001"', 7, "server.url", "http://", id="bad-url"),
        pytest.param(
            "unit: sglang.service",
            "unit: 'a b;rm -rf /'",
            5,
            "service.unit",
            "unit name",
            id="hostile-unit-name",
        ),
        pytest.param(
            "host: {ssh: root@gpu-box}",
            "host: {ssh: '-oProxyCommand=x'}",
            2,
            "host.ssh",
            "ssh target",
            id="ssh-option-injection",
        ),
        pytest.param("engine: sglang", "engine: sglag", 8, "engine", "sglang", id="bad-engine"),
        pytest.param(
            "load: {concurrency: [1, 8], requests: 16}",
            "load: {requests: 16}",
            15,
            "load",
            "concurrency",
            id="no-load-levels",
        ),
        pytest.param(
            '  ar: {spec_args: ""}\n',
            '  ar: {spec_args: ""}\n  ar: {spec_args: x}\n',
            11,
            "variants.ar",
            "duplicate key",
            id="duplicate-key",
        ),
        pytest.param(
            "matrix: {budget: [7, 16]",
            'matrix: {budget: [7, "16\\u202eevil"]',
            13,
            "variants.tree.matrix.budget",
            "bidirectional control character",
            id="rtl-override-in-a-matrix-value",
        ),
    ],
)
def test_error_paths(tmp_path: Path, old: str, new: str, line: int, key: str, fragment: str) -> None:
    assert old in GOOD
    err = error_for(tmp_path, GOOD.replace(old, new, 1))
    assert err.line == line, str(err)
    assert err.key is not None and err.key.startswith(key), str(err)
    assert fragment in str(err)
    assert "\n" not in str(err)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        pytest.param("", "empty", id="empty"),
        pytest.param("- a\n- b\n", "mapping", id="top-level-list"),
        pytest.param("name: [\n", "invalid YAML", id="broken-yaml"),
        pytest.param("\tname: x\n", "invalid YAML", id="tab-indent"),
    ],
)
def test_document_level_errors(tmp_path: Path, text: str, fragment: str) -> None:
    assert fragment in str(error_for(tmp_path, text))


def test_missing_file_is_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such file"):
        load_experiment(tmp_path / "nope.yaml")


def test_host_shorthands(tmp_path: Path) -> None:
    exp = load_text(
        tmp_path,
        GOOD.replace("host: {ssh: root@gpu-box}", "hosts: [root@a:2222, local, {ssh: b, name: bee}]"),
    )
    specs = exp.host_specs()  # type: ignore[attr-defined]
    assert isinstance(specs[0], SSHHostSpec) and specs[0].address == "a"
    assert isinstance(specs[1], LocalHostSpec)
    assert specs[2].display_name == "bee"


def test_host_and_hosts_conflict(tmp_path: Path) -> None:
    err = error_for(tmp_path, GOOD.replace("host: {ssh: root@gpu-box}", "host: local\nhosts: [local]"))
    assert "either host or hosts" in str(err)


def test_server_url_only_allows_host_placeholder(tmp_path: Path) -> None:
    exp = load_text(tmp_path, GOOD.replace('"http://gpu-box:30001"', '"http://{host}:30001"'))
    assert exp.server_url(exp.host_specs()[0]) == "http://gpu-box:30001"  # type: ignore[attr-defined]
    err = error_for(tmp_path, GOOD.replace('"http://gpu-box:30001"', '"http://{hots}:30001"'))
    assert err.key == "server.url"


def test_huge_matrix_refused(tmp_path: Path) -> None:
    big = GOOD.replace(
        "matrix: {budget: [7, 16], topk: [1, 4]}",
        "matrix: {budget: " + str(list(range(100))) + ", topk: " + str(list(range(100))) + "}",
    )
    assert "more than" in str(error_for(tmp_path, big))


def test_api_key_is_secret(tmp_path: Path) -> None:
    exp = load_text(tmp_path, GOOD.replace("ready_timeout: 15m", "ready_timeout: 15m, api_key: sk-secret-123"))
    assert "sk-secret-123" not in repr(exp) and "sk-secret-123" not in exp.model_dump_json()  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("log_file", "workdir"),
    [
        pytest.param("{file}", None, id="absolute"),
        pytest.param("exp.yaml", "{dir}", id="relative-to-workdir"),
        pytest.param("{dir}/./sub/../exp.yaml", None, id="dotted"),
    ],
)
def test_a_log_file_that_is_the_experiment_file_itself_is_refused_at_its_line(
    tmp_path: Path, log_file: str, workdir: str | None
) -> None:
    (tmp_path / "sub").mkdir()
    path = tmp_path / "exp.yaml"
    service = (
        "service:\n  kind: process\n  command: python -m orchestrator.sim --port 30001 {spec_args}\n"
        f"  log_file: {log_file.format(file=path, dir=tmp_path)}\n"
        + (f"  workdir: {workdir.format(dir=tmp_path)}\n" if workdir else "")
    )
    text = GOOD.replace("host: {ssh: root@gpu-box}", "host: local").replace(
        "service:\n  kind: systemd\n  unit: sglang.service\n"
        "  exec_start: python -m sglang.launch_server --port 30001 {spec_args}\n",
        service,
    )
    err = error_for(tmp_path, text)
    assert f"{path}:6" in str(err) and "service.log_file" in str(err), str(err)
    assert "is this experiment file" in str(err)
