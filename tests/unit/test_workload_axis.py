"""Workloads as a sweep axis: the dataset formats, the experiment's ``load.workloads``, the plan, the runaway
check and the simulator's text-dependent acceptance."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from orchestrator.analysis import CheckContext, tidy_frame
from orchestrator.analysis.checks import runaway_outputs
from orchestrator.analysis.compare import add_baseline_comparisons
from orchestrator.analysis.roles import BaselineRoles, annotate
from orchestrator.errors import ConfigError, LoadError
from orchestrator.experiment.schema import Experiment, load_experiment
from orchestrator.load.datasets import SPEED_BENCH_PLACEHOLDER, WorkloadSource
from orchestrator.load.workloads import builtin_names, load_workload
from orchestrator.plan.deployments import build_plan
from orchestrator.runs.identity import resolved_experiment
from orchestrator.runs.store import Record
from orchestrator.sim.profiles import get_profile

BASE = """\
name: w
host: local
service: {kind: process, command: "{python} -m orchestrator.sim --port 18999 {spec_args}"}
server: {url: "http://127.0.0.1:18999", model: sim}
engine: sim
variants:
  autoregressive: {spec_args: "--algorithm ar"}
  linear: {spec_args: "--algorithm linear"}
baselines: [autoregressive, linear]
"""


def write_lines(path: Path, rows: list[object]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def specbench_file(tmp_path: Path) -> Path:
    # The layout of Spec-Bench's data/spec_bench/question.jsonl (question_id, category, turns); text of our own.
    return write_lines(
        tmp_path / "question.jsonl",
        [
            {"question_id": 1, "category": "coding", "turns": ["Write a loop in C.", "Now in Rust."]},
            {"question_id": 2, "category": "translation", "turns": ["Translate 'good morning' into Dutch."]},
            {"question_id": 3, "category": "coding", "turns": ["Reverse a list in Python."]},
        ],
    )


def test_specbench_file_loads_by_category(tmp_path: Path) -> None:
    path = specbench_file(tmp_path)
    workload = load_workload(WorkloadSource(str(path), format="specbench", category="coding", max_tokens=64))
    texts = sorted(workload.prompt(i).as_text() for i in range(workload.size))
    assert texts == ["Reverse a list in Python.", "Write a loop in C."]  # the first turn of each coding row
    assert {workload.prompt(i).max_tokens for i in range(workload.size)} == {64}
    everything = load_workload(WorkloadSource(str(path), format="specbench"))
    assert everything.size == 3


def test_sharegpt_file_loads(tmp_path: Path) -> None:
    path = tmp_path / "sharegpt.json"
    path.write_text(
        json.dumps(
            [
                {
                    "id": "a",
                    "conversations": [{"from": "human", "value": "What is a monad?"}, {"from": "gpt", "value": "x"}],
                },
                {"id": "b", "conversations": [{"from": "gpt", "value": "hello"}]},  # no human turn: skipped
                {"id": "c", "conversations": [{"from": "human", "value": "Name three rivers."}]},
            ]
        ),
        encoding="utf-8",
    )
    workload = load_workload(WorkloadSource(str(path), format="sharegpt", max_tokens=300))
    assert sorted(workload.prompt(i).as_text() for i in range(workload.size)) == [
        "Name three rivers.",
        "What is a monad?",
    ]
    with pytest.raises(LoadError, match="conversations"):
        load_workload(WorkloadSource(str(specbench_file(tmp_path)), format="sharegpt"))


def test_speedbench_rows_and_placeholder(tmp_path: Path) -> None:
    row = {"question_id": "0" * 32, "category": "math", "messages": [{"role": "user", "content": "Add 2 and 3."}]}
    good = write_lines(tmp_path / "speed.jsonl", [row, {**row, "category": "qa"}])
    workload = load_workload(WorkloadSource(str(good), format="speedbench", category="math"))
    assert workload.size == 1
    assert workload.prompt(0).as_messages() == [{"role": "user", "content": "Add 2 and 3."}]
    held = write_lines(
        tmp_path / "held.jsonl", [{**row, "messages": [{"role": "user", "content": SPEED_BENCH_PLACEHOLDER}]}]
    )
    with pytest.raises(LoadError, match="placeholder"):
        load_workload(WorkloadSource(str(held), format="speedbench"))


def test_builtin_sets_have_expected_lengths() -> None:
    assert {"chat", "code", "math", "summarization", "translation", "qa"} <= set(builtin_names())
    for name in ("code", "math", "summarization", "translation", "qa"):
        workload = load_workload(f"builtin:{name}")
        assert workload.size >= 24, name
        lengths = [workload.prompt(i).max_tokens for i in range(workload.size)]
        assert all(isinstance(n, int) and 16 <= n <= 512 for n in lengths), name
        capped = load_workload(WorkloadSource(f"builtin:{name}", max_tokens=100))
        assert max(capped.prompt(i).max_tokens or 0 for i in range(capped.size)) <= 100


def experiment(tmp_path: Path, load: str) -> Path:
    path = tmp_path / "exp.yaml"
    path.write_text(BASE + load, encoding="utf-8")
    return path


def config_error(path: Path) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load_experiment(path)
    return info.value


@pytest.mark.parametrize(
    ("workload", "key", "fragment"),
    [
        pytest.param("{source: builtin:maht}", "load.workloads.bad", "did you mean builtin:math", id="builtin-typo"),
        pytest.param("{path: missing.jsonl}", "load.workloads.bad", "does not exist", id="missing-file"),
        pytest.param(
            "{path: question.jsonl, format: specbench, category: codding}",
            "load.workloads.bad.category",
            "did you mean 'coding'",
            id="category-without-rows",
        ),
        pytest.param(
            "{path: question.jsonl, format: spec_bench}", "load.workloads.bad.format", "specbench", id="format"
        ),
        pytest.param(
            "{path: question.jsonl, catgory: coding}", "load.workloads.bad.catgory", "did you mean 'category'", id="key"
        ),
    ],
)
def test_bad_workloads_name_file_line_key(tmp_path: Path, workload: str, key: str, fragment: str) -> None:
    specbench_file(tmp_path)
    path = experiment(
        tmp_path, f"load:\n  concurrency: [1]\n  workloads:\n    code: builtin:code\n    bad: {workload}\n"
    )
    error = config_error(path)
    assert error.file == str(path)
    assert error.line == 14
    assert error.key == key
    assert fragment in str(error)


def test_prompts_and_workloads_are_exclusive(tmp_path: Path) -> None:
    path = experiment(tmp_path, "load: {concurrency: [1], prompts: builtin:math, workloads: {code: builtin:code}}\n")
    assert "not both" in str(config_error(path))
    # A resolved experiment (every default written out, as a run stores it) validates again.
    good = load_experiment(experiment(tmp_path, "load: {concurrency: [1], workloads: {code: builtin:code}}\n"))
    assert Experiment.model_validate(resolved_experiment(good)).load.workloads is not None


def test_workloads_are_load_points_not_restarts(tmp_path: Path) -> None:
    specbench_file(tmp_path)
    plain = build_plan(load_experiment(experiment(tmp_path, "load: {concurrency: [1, 4], requests: 8}\n")))
    path = experiment(
        tmp_path,
        "load:\n  concurrency: [1, 4]\n  requests: 8\n  workloads:\n    code: builtin:code\n"
        "    math: {source: builtin:math, max_tokens: 96}\n"
        "    sb: {path: question.jsonl, format: specbench, category: coding}\n",
    )
    plan = build_plan(load_experiment(path))
    assert plan.restarts == plain.restarts == 2
    assert plan.load_point_count == 3 * plain.load_point_count
    labels = [p.label for p in plan.deployments[0].load_points]
    assert labels == ["code C=1", "code C=4", "math C=1", "math C=4", "sb C=1", "sb C=4"]
    ids = [p.id for d in plan.deployments for p in d.load_points]
    assert len(set(ids)) == len(ids)
    assert not {p.id for p in plain.deployments[0].load_points} & set(ids)
    # The ETA follows each workload's cap: math's 96 tokens take less than code's default 256.
    estimates = {p.label: p.estimated_seconds for p in plan.deployments[0].load_points}
    assert estimates["math C=4"] < estimates["code C=4"]
    # Changing one workload's cap changes only that workload's points.
    changed = build_plan(load_experiment(experiment(tmp_path, path.read_text()[len(BASE) :].replace("96", "97"))))
    before = {p.label: p.id for p in plan.deployments[0].load_points}
    after = {p.label: p.id for p in changed.deployments[0].load_points}
    assert [label for label in before if before[label] != after[label]] == ["math C=1", "math C=4"]


def _capped(variant: str, workload: str, length: int, *, params: dict[str, Any] | None = None) -> Record:
    client = {
        "requests": 20,
        "completed": 20,
        "errors": 0,
        "output_tok_s": 100.0,
        "finish_reasons": {"length": length, "stop": 20 - length},
    }
    return Record(
        run_id="r",
        experiment="w",
        deployment_id=f"d-{variant}",
        point_id=f"p-{variant}-{workload}",
        config_hash="c",
        host="h",
        variant=variant,
        params=params or {},
        baseline=variant in ("autoregressive", "linear"),
        mode="concurrency",
        concurrency=1,
        status="ok",
        started_at="t0",
        finished_at="t1",
        client=client,
        workload=workload,
    )


def test_runaway_outputs_compares_each_workload_with_ar() -> None:
    roles = BaselineRoles(ar="autoregressive", linear="linear")
    records = [
        _capped("autoregressive", "code", 2),
        _capped("autoregressive", "chat", 12),
        _capped("linear", "code", 14),  # 70% at the cap against AR's 10% on code: a sign the output changed
        _capped("linear", "chat", 14),  # as often as AR on chat: nothing to say
    ]
    frame, params = tidy_frame(records)
    frame = add_baseline_comparisons(annotate(frame, roles, params, None), roles)
    assert list(frame["load_label"]) == ["code C=1", "chat C=1", "code C=1", "chat C=1"]
    found = runaway_outputs(CheckContext(frame=frame, roles=roles))
    assert [(f.config, f.load, f.severity) for f in found] == [("linear", "code C=1", "warning")]
    assert "70%" in found[0].message and "10%" in found[0].message


def test_the_simulator_sees_text_never_a_workload_name() -> None:
    profile = get_profile("workloads")
    assert profile.rule_for("user:Write a Python function that merges intervals.").name == "code"  # type: ignore[union-attr]
    assert profile.rule_for("user:Translate into German. Answer with the translation only.").name == "translation"  # type: ignore[union-attr]
    assert profile.rule_for("user:Tell me a story about a lighthouse.") is None
    assert get_profile("k26").rule_for("user:Write a Python function") is None
    # The rules read the request's text only: nothing of the workload's name reaches the simulator.
    assert all(isinstance(word, str) for rule in profile.content_rules for word in rule.words)
