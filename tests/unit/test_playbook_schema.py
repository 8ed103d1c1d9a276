"""Playbook files: what parses, and every error naming file:line:column, the key path and the nearest key."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from orchestrator.errors import ConfigError
from orchestrator.playbooks import STEP_KINDS, load_playbook
from orchestrator.playbooks.schema import (
    BaselinesStep,
    DeployStep,
    ExpectStep,
    LoadStep,
    MeasureStep,
    MetricRef,
    RestoreStep,
    ShellStep,
    SmokeStep,
)

ROOT = Path(__file__).resolve().parents[2]

GOOD = """\
name: check
description: a test
experiment: exp.yaml
allow_shell: true
vars: {faults: ""}
steps:
  - deploy: {variant: linear}
  - load: {concurrency: 1, requests: 4}
  - measure: linear
  - deploy:
      variant: ddtree
      params: {budget: 7, topk: 1}
  - load
  - load: {concurrency: 2}
  - measure: tree
  - restore
  - expect: {metric: accept_len, of: tree, compare: equal, to: {of: linear}, tolerance: 10%}
  - expect: {metric: client.output_tok_s, of: tree, compare: at_least, to: 1}
  - expect: {check: depth_vs_commit, of: [tree, linear], message: why}
  - expect: {check: failed_points}
  - baselines
  - smoke
  - shell: uptime
  - doctor
"""


def test_a_full_playbook_parses_with_bare_steps_and_shorthands(write_yaml: Callable[..., Path]) -> None:
    playbook = load_playbook(write_yaml(GOOD, "pb.yaml"))
    kinds = [type(s) for s in playbook.steps]
    assert kinds[:7] == [DeployStep, LoadStep, MeasureStep, DeployStep, LoadStep, LoadStep, MeasureStep]
    assert isinstance(playbook.steps[7], RestoreStep)
    first_expect = playbook.steps[8]
    assert isinstance(first_expect, ExpectStep)
    assert first_expect.expect.tolerance == pytest.approx(0.10)
    assert isinstance(first_expect.expect.to, MetricRef) and first_expect.expect.to.metric is None
    bare_load = playbook.steps[4]
    assert isinstance(bare_load, LoadStep) and bare_load.load.experiment_points
    assert isinstance(playbook.steps[12], BaselinesStep)
    smoke = playbook.steps[13]
    assert isinstance(smoke, SmokeStep) and smoke.smoke.requests == 1
    shell = playbook.steps[14]
    assert isinstance(shell, ShellStep) and shell.shell.command == "uptime" and shell.shell.check
    assert playbook.experiment_path() == playbook.source.parent / "exp.yaml"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("steps", "where", "message"),
    [
        pytest.param(
            "  - deplyo: {variant: linear}\n",
            "3:5: steps.0.deplyo",
            "unknown step 'deplyo'; did you mean 'deploy'?",
            id="step-typo",
        ),
        pytest.param("  - restor\n", "3:5: steps.0", "unknown step 'restor'; did you mean 'restore'?", id="bare-typo"),
        pytest.param("  - deploy\n", "3:5: steps.0", "step 'deploy' needs settings", id="bare-deploy"),
        pytest.param(
            "  - deploy: {variant: linear}\n    load: {}\n",
            "3:5: steps.0",
            "a step is a one-key mapping",
            id="two-keys",
        ),
        pytest.param(
            "  - deploy: {variant: linear, parms: {a: 1}}\n",
            "3:31: steps.0.deploy.parms",
            "unknown key 'parms'; did you mean 'params'?",
            id="deploy-key-typo",
        ),
        pytest.param(
            "  - deploy: {params: {}}\n", "steps.0.deploy.variant", "missing required key 'variant'", id="no-variant"
        ),
        pytest.param(
            "  - load: {concurrency: 1}\n", "3:5: steps.0.load", "load needs a deploy step before it", id="load-first"
        ),
        pytest.param(
            "  - deploy: {variant: a}\n  - load: {concurency: 1}\n",
            "4:12: steps.1.load.concurency",
            "did you mean 'concurrency'?",
            id="load-key-typo",
        ),
        pytest.param(
            "  - deploy: {variant: a}\n  - load: {concurrency: 1, rate: 2}\n",
            "steps.1.load",
            "set concurrency or rate, not both",
            id="both-modes",
        ),
        pytest.param(
            "  - deploy: {variant: a}\n  - load: {requests: 3}\n",
            "steps.1.load",
            "requests/duration need a concurrency or a rate",
            id="requests-alone",
        ),
        pytest.param(
            "  - deploy: {variant: a}\n  - measure: x\n",
            "4:5: steps.1.measure",
            "put a load step before it",
            id="measure-no-load",
        ),
        pytest.param(
            "  - deploy: {variant: a}\n  - load: {concurrency: 1}\n  - measure: x\n  - measure: y\n",
            "steps.3.measure",
            "the load on line 4 is already measured",
            id="measure-twice",
        ),
        pytest.param(
            "  - deploy: {variant: a}\n  - load: {concurrency: 1}\n  - measure: x\n"
            "  - deploy: {variant: b}\n  - load: {concurrency: 1}\n  - measure: x\n",
            "steps.5.measure",
            "measurement 'x' is already defined on line 5",
            id="duplicate-name",
        ),
        pytest.param(
            "  - deploy: {variant: a}\n  - load: {concurrency: 1}\n  - measure: lin\n"
            "  - expect: {metric: accept_len, of: lni, compare: equal, to: 3}\n",
            "6:34: steps.3.expect.of",
            "no measurement named 'lni' before this step; did you mean 'lin'?",
            id="unknown-measurement",
        ),
        pytest.param(
            "  - deploy: {variant: a}\n  - load: {concurrency: 1}\n  - measure: lin\n"
            "  - expect: {metric: accept_len, of: lin, compare: equal, to: {of: tree}}\n"
            "  - deploy: {variant: b}\n  - load: {concurrency: 1}\n  - measure: tree\n",
            "steps.3.expect.to.of",
            "measurement 'tree' is measured only later, on line 9",
            id="measured-later",
        ),
        pytest.param(
            "  - deploy: {variant: a}\n  - load: {concurrency: 1}\n  - measure: m\n"
            "  - expect: {check: depth_vs_comit, of: m}\n",
            "steps.3.expect.check",
            "unknown check 'depth_vs_comit'; did you mean 'depth_vs_commit'?",
            id="check-typo",
        ),
        pytest.param(
            "  - deploy: {variant: a}\n  - load: {concurrency: 1}\n  - measure: m\n"
            "  - expect: {metric: accept_len, of: m, compare: equals, to: 3}\n",
            "steps.3.expect.compare",
            "Input should be 'equal', 'at_most' or 'at_least'",
            id="compare-typo",
        ),
        pytest.param(
            "  - deploy: {variant: a}\n  - load: {concurrency: 1}\n  - measure: m\n"
            "  - expect: {metric: accept_len, of: m, compare: equal, to: 3, tolerence: 0.1}\n",
            "steps.3.expect.tolerence",
            "did you mean 'tolerance'?",
            id="tolerance-typo",
        ),
        pytest.param(
            "  - deploy: {variant: a}\n  - load: {concurrency: 1}\n  - measure: m\n"
            "  - expect: {metric: accept_len, of: m, compare: equal, to: 3, tolerance: ten}\n",
            "steps.3.expect.tolerance",
            "",
            id="tolerance-not-a-number",
        ),
        pytest.param(
            "  - deploy: {variant: a}\n  - load: {concurrency: 1}\n  - measure: m\n"
            "  - expect: {metric: accept_len, of: m}\n",
            "steps.3.expect",
            "a metric expectation needs compare, to",
            id="metric-incomplete",
        ),
        pytest.param(
            "  - deploy: {variant: a}\n  - load: {concurrency: 1}\n  - measure: m\n  - expect: {of: m}\n",
            "steps.3.expect",
            "missing key 'metric' (compare a figure) or 'check'",
            id="neither-metric-nor-check",
        ),
        pytest.param(
            "  - deploy: {variant: a}\n  - load: {concurrency: 1}\n  - measure: m\n"
            "  - expect: {check: depth_vs_commit, of: m, compare: equal}\n",
            "steps.3.expect",
            "a check expectation takes no compare",
            id="check-with-compare",
        ),
        pytest.param(
            "  - deploy: {variant: a}\n  - load: {concurrency: 1}\n  - measure: m\n"
            "  - expect: {metric: sever.accept_len, of: m, compare: equal, to: 3}\n",
            "steps.3.expect.metric",
            "did you mean 'server'?",
            id="dotted-root-typo",
        ),
        pytest.param(
            "  - deploy: {variant: a}\n  - shell: uptime\n",
            "4:5: steps.1.shell",
            "set `allow_shell: true`",
            id="shell-refused",
        ),
    ],
)
def test_a_bad_playbook_names_file_line_key_and_a_fix(
    write_yaml: Callable[..., Path], steps: str, where: str, message: str
) -> None:
    path = write_yaml("name: t\nsteps:\n" + steps, "pb.yaml")
    with pytest.raises(ConfigError) as info:
        load_playbook(path)
    text = str(info.value)
    assert text.startswith(str(path) + ":"), text
    assert where in text, text
    assert message in text, text
    assert info.value.exit_code == 2
    assert "\n" not in text


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("", "the file is empty", id="empty"),
        pytest.param("- a\n", "a playbook is a mapping", id="list"),
        pytest.param("name: t\n", "missing required key 'steps'", id="no-steps"),
        pytest.param("name: t\nsteps: []\n", "at least 1 item", id="no-step"),
        pytest.param("name: bad name\nsteps: [restore]\n", "it names a folder", id="bad-name"),
        pytest.param("name: t\nstep: [restore]\n", "unknown key 'step'; did you mean 'steps'?", id="top-typo"),
        pytest.param("name: t\nsteps: [restore]\nsteps: [restore]\n", "duplicate key 'steps'", id="duplicate"),
        pytest.param("name: t\nsteps: [restore\n", "invalid YAML", id="bad-yaml"),
    ],
)
def test_document_level_errors(write_yaml: Callable[..., Path], text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=None) as info:
        load_playbook(write_yaml(text, "pb.yaml"))
    assert message in str(info.value)


def test_a_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such file"):
        load_playbook(tmp_path / "nope.yaml")


@pytest.mark.parametrize("path", sorted((ROOT / "playbooks").glob("*.yaml")), ids=lambda p: p.name)
def test_shipped_playbooks_parse(path: Path) -> None:
    playbook = load_playbook(path)
    assert playbook.name == path.stem
    assert playbook.description


def test_every_step_kind_is_documented_in_the_module_docstring() -> None:
    from orchestrator.playbooks import schema

    assert schema.__doc__ is not None
    for kind in STEP_KINDS:
        assert f"- {kind}" in schema.__doc__ or f"{kind}:" in schema.__doc__, kind
