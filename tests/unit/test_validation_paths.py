"""Issue 40, smaller items: validate errors name the key path the user wrote, never pydantic's internal one (a
union's core schema, a union member's type name) nor a key the model moved (``environment`` -> ``secrets``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.errors import ConfigError
from orchestrator.experiment.schema import load_experiment
from orchestrator.experiment.validation import problems_of

BASE = """\
name: t
host: local
service:
  kind: process
  command: python -m orchestrator.sim --port 30001 {{spec_args}}
{service_extra}server:
  url: "http://127.0.0.1:30001"
{server_extra}engine: sim
variants:
  ar:
    spec_args: "{{x}}"
    matrix:
      x: {matrix}
baselines: [ar]
load: {{concurrency: [1], requests: 4}}
"""


def _errors(tmp_path: Path, *, service_extra: str = "", server_extra: str = "", matrix: str = "[1]") -> list[str]:
    path = tmp_path / "exp.yaml"
    path.write_text(BASE.format(service_extra=service_extra, server_extra=server_extra, matrix=matrix))
    with pytest.raises(ConfigError) as caught:
        load_experiment(path)
    return [str(p).replace(f"{path}:", "") for p in problems_of(caught.value)]


def test_a_bad_secret_reference_in_the_environment_names_where_it_was_written(tmp_path: Path) -> None:
    errors = _errors(tmp_path, service_extra="  environment:\n    HF_TOKEN: {secret_env: 5}\n")
    assert errors == ["7:16: service.environment.HF_TOKEN.secret_env: Input should be a valid string"], errors


def test_a_bad_api_key_reference_names_its_key_not_pydantics_core_schema(tmp_path: Path) -> None:
    errors = _errors(tmp_path, server_extra="  api_key: {secret_env: 5}\n")
    assert errors == ["8:13: server.api_key.secret_env: Input should be a valid string"], errors
    errors = _errors(tmp_path, server_extra="  api_key: 5\n")
    assert len(errors) == 1 and errors[0].startswith("8:3: server.api_key: Input should be a valid string or "), errors
    assert all("[" not in e.split(":")[2] for e in errors)  # no lax-or-strict[...] in the key path


def test_a_matrix_value_of_the_wrong_type_is_one_error_at_its_own_key(tmp_path: Path) -> None:
    errors = _errors(tmp_path, matrix="[1, {a: 1}]")
    assert len(errors) == 1, errors
    _where, key, message = errors[0].split(": ", 2)
    assert key == "variants.ar.matrix.x.1", errors  # not x.1.str, x.1.int, ...
    assert message == (
        "Input should be a valid string or a valid integer or a valid number or a valid boolean, got {'a': 1}"
    )


@pytest.mark.parametrize(
    ("typos", "keys"),
    [
        pytest.param(
            {"budget: [7, 16]": "budgte: [7, 16]", "lossless: {prompts: 4}": "lossless: {promts: 4}"},
            ["variants.ddtree.matrix.budgte", "load.prompts", "lossless.promts"],
            id="beside-a-cross-check-and-an-unknown-key",
        ),
        pytest.param(
            {"max_tokens: 64": "max_tokens: 6x4"}, ["load.max_tokens", "load.prompts"], id="beside-a-refused-value"
        ),
    ],
)
def test_a_prompt_set_that_does_not_exist_is_reported_with_the_other_errors(
    tmp_path: Path, typos: dict[str, str], keys: list[str]
) -> None:
    """Three typos in the demo's file (a matrix key, a lossless key, a prompt set): ``validate`` reported two, and
    the prompt set only once they were fixed (issue 59, item 7)."""
    text = (Path(__file__).parents[2] / "sweeps" / "demo.yaml").read_text().replace('"builtin:chat"', '"builtin:chatt"')
    for before, after in typos.items():
        assert before in text, before
        text = text.replace(before, after)
    path = tmp_path / "demo.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_experiment(path)
    found = problems_of(caught.value)
    assert sorted(p.key or "" for p in found) == sorted(keys), [str(p) for p in found]
    assert any("no builtin prompt set 'chatt'" in str(p) for p in found)
