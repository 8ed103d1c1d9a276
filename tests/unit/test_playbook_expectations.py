"""Expectations on hand-made measurements: comparisons with their numbers, the analysis's checks, and what
happens when a figure is missing or a measurement failed (never a silent pass)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from orchestrator.experiment.schema import Experiment, load_experiment
from orchestrator.plan.deployments import Deployment, LoadPoint
from orchestrator.playbooks import Measurement, metric_value
from orchestrator.playbooks.expectations import evaluate
from orchestrator.playbooks.schema import ExpectSpec
from orchestrator.runs.store import Record

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def experiment() -> Experiment:
    return load_experiment(ROOT / "playbooks" / "experiments" / "sim-chain.yaml")


def measurement(
    name: str,
    variant: str,
    *,
    params: dict[str, Any] | None = None,
    server: dict[str, Any] | None = None,
    output_tok_s: float = 100.0,
    status: str = "ok",
    error: dict[str, Any] | None = None,
    command: str | None = None,
) -> Measurement:
    point = LoadPoint(id=f"p-{name}", mode="concurrency", concurrency=1, requests=16)
    dep = Deployment(
        id=f"d-{name}",
        variant=variant,
        params=params or {},
        command=command,
        config_hash=f"c-{name}",
        load_points=[point],
        baseline=variant in ("linear", "autoregressive"),
    )
    record = Record(
        run_id="r",
        experiment="sim-chain",
        deployment_id=dep.id,
        point_id=point.id,
        config_hash=dep.config_hash,
        host="local",
        variant=variant,
        params=dep.params,
        baseline=dep.baseline,
        mode="concurrency",
        concurrency=1,
        status=status,  # type: ignore[arg-type]
        started_at="2026-01-01T00:00:00.000Z",
        finished_at="2026-01-01T00:00:10.000Z",
        client={"requests": 16, "completed": 16, "errors": 0, "output_tok_s": output_tok_s},
        server=server,
        error=error,
    )
    return Measurement(name, record, dep, point)


LINEAR = {"accept_len": 3.4}
TREE_OK = {"accept_len": 3.3, "avg_accepted_depth": 2.4, "avg_commit_len": 3.3}
TREE_BUG = {"accept_len": 1.8, "avg_accepted_depth": 5.0, "avg_commit_len": 2.0}


def run(spec: dict[str, Any], experiment: Experiment, *ms: Measurement) -> Any:
    by_name = {m.name: m for m in ms}
    deployments = {m.deployment.id: m.deployment for m in ms}
    return evaluate(
        ExpectSpec.model_validate(spec),
        3,
        by_name,
        records=[m.record for m in ms],
        experiment=experiment,
        deployments=deployments,
    )


@pytest.mark.parametrize(
    ("tree_accept", "compare", "tolerance", "status", "detail"),
    [
        pytest.param(3.3, "equal", 0.10, "pass", "2.9% below; allowed ±10%", id="equal-within"),
        pytest.param(1.8, "equal", 0.10, "fail", "47.1% below; allowed ±10%", id="equal-outside"),
        pytest.param(3.4, "equal", 0.0, "pass", "identical", id="identical"),
        pytest.param(3.7, "at_most", 0.10, "pass", "limit 3.74", id="at-most-slack"),
        pytest.param(3.8, "at_most", 0.10, "fail", "limit 3.74", id="at-most-over"),
        pytest.param(3.1, "at_least", 0.10, "pass", "limit 3.06", id="at-least-slack"),
        pytest.param(3.0, "at_least", 0.10, "fail", "limit 3.06", id="at-least-under"),
    ],
)
def test_comparisons_against_another_measurement(
    experiment: Experiment, tree_accept: float, compare: str, tolerance: float, status: str, detail: str
) -> None:
    linear = measurement("linear", "linear", server=LINEAR)
    tree = measurement("tree", "ddtree", params={"budget": 7, "topk": 1}, server={"accept_len": tree_accept})
    spec = {"metric": "accept_len", "of": "tree", "compare": compare, "to": {"of": "linear"}, "tolerance": tolerance}
    outcome = run(spec, experiment, linear, tree)
    assert outcome.status == status
    assert f"tree.accept_len = {tree_accept:.2f}, linear.accept_len = 3.40" in outcome.detail
    assert detail in outcome.detail
    assert outcome.values == {"tree.accept_len": tree_accept, "linear.accept_len": 3.4}
    assert outcome.step == 3 and outcome.kind == "expect"


def test_against_a_number_and_through_a_dotted_path(experiment: Experiment) -> None:
    tree = measurement("tree", "ddtree", server=TREE_OK, output_tok_s=250.0)
    outcome = run({"metric": "client.output_tok_s", "of": "tree", "compare": "at_least", "to": 200}, experiment, tree)
    assert outcome.status == "pass" and "tree.client.output_tok_s = 250.0, expected = 200.0" in outcome.detail
    depth = run(
        {
            "metric": "server.avg_accepted_depth",
            "of": "tree",
            "compare": "at_most",
            "to": {"of": "tree", "metric": "server.avg_commit_len"},
        },
        experiment,
        tree,
    )
    assert depth.status == "pass" and depth.values == {
        "tree.server.avg_accepted_depth": 2.4,
        "tree.server.avg_commit_len": 3.3,
    }


@pytest.mark.parametrize(
    ("metric", "message"),
    [
        pytest.param(
            "acept_len", "measurement 'tree' has no metric 'acept_len'; did you mean 'accept_len'?", id="bare-typo"
        ),
        pytest.param(
            "server.avg_comit_len",
            "server of 'tree' has no 'avg_comit_len'; did you mean 'avg_commit_len'?",
            id="dotted-typo",
        ),
        pytest.param("server_gen_throughput", "has no value for server_gen_throughput", id="no-value"),
        pytest.param("server.engine", "server.engine of 'tree' is 'sim', not a number", id="not-a-number"),
    ],
)
def test_a_missing_figure_fails_and_says_which(experiment: Experiment, metric: str, message: str) -> None:
    tree = measurement("tree", "ddtree", server={**TREE_OK, "engine": "sim", "gen_throughput": None})
    outcome = run({"metric": metric, "of": "tree", "compare": "at_least", "to": 1}, experiment, tree)
    assert outcome.status == "fail"
    assert message in outcome.detail, outcome.detail
    assert outcome.detail.startswith("cannot compare: ")


def test_a_failed_measurement_fails_its_expectations_with_the_evidence(experiment: Experiment) -> None:
    linear = measurement("linear", "linear", server=LINEAR)
    tree = measurement(
        "tree",
        "ddtree",
        status="failed",
        error={
            "kind": "start_failed",
            "message": "the unit failed",
            "evidence": ["Traceback (most recent call last):"],
        },
    )
    spec = {"metric": "accept_len", "of": "tree", "compare": "equal", "to": {"of": "linear"}, "message": "why"}
    outcome = run(spec, experiment, linear, tree)
    assert outcome.status == "fail"
    assert "measurement 'tree' (ddtree @ C=1) failed (start_failed): the unit failed" in outcome.detail
    assert outcome.evidence == ("Traceback (most recent call last):",)
    assert outcome.message == "why"
    check = run({"check": "depth_vs_commit", "of": "tree"}, experiment, tree)
    assert check.status == "fail" and "start_failed" in check.detail


def test_depth_vs_commit_passes_on_a_chain_and_names_the_contradiction_on_the_bug(experiment: Experiment) -> None:
    good = measurement("tree", "ddtree", params={"budget": 7, "topk": 1}, server=TREE_OK)
    outcome = run({"check": "depth_vs_commit", "of": "tree"}, experiment, good)
    assert outcome.status == "pass"
    assert outcome.detail == "tree.ddtree_avg_accepted_depth = 2.40, tree.ddtree_avg_commit_len = 3.30"
    bad = measurement("tree", "ddtree", params={"budget": 7, "topk": 1}, server=TREE_BUG)
    outcome = run({"check": "depth_vs_commit", "of": "tree"}, experiment, bad)
    assert outcome.status == "fail"
    assert outcome.detail.startswith("tree: accepted depth 5.00 exceeds commit length 2.00: impossible")
    assert "avg_accepted_depth=5.00 avg_commit_len=2.00" in outcome.evidence


def test_a_check_that_cannot_look_does_not_pass(experiment: Experiment) -> None:
    linear = measurement("linear", "linear", server=LINEAR)  # no DDTree figures at all
    outcome = run({"check": "depth_vs_commit", "of": "linear"}, experiment, linear)
    assert outcome.status == "fail"
    assert outcome.detail == (
        "cannot check depth_vs_commit: linear has no ddtree_avg_accepted_depth, ddtree_avg_commit_len "
        "(it reads ddtree_avg_accepted_depth, ddtree_avg_commit_len)"
    )


def test_topk1_vs_chain_uses_the_experiments_linear_baseline(experiment: Experiment) -> None:
    linear = measurement("linear", "linear", server=LINEAR, command="sim --algorithm linear --draft-tokens 7")
    low = measurement(
        "tree",
        "ddtree",
        params={"budget": 7, "topk": 1},
        server=TREE_BUG,
        command="sim --algorithm ddtree --budget 7 --topk 1",
    )
    outcome = run({"check": "topk1_vs_chain", "of": ["tree", "linear"]}, experiment, linear, low)
    assert outcome.status == "fail"
    assert "top-k=1 tree (budget 7) is a chain of 7 drafts" in outcome.detail
    same = measurement(
        "tree",
        "ddtree",
        params={"budget": 7, "topk": 1},
        server=TREE_OK,
        command="sim --algorithm ddtree --budget 7 --topk 1",
    )
    assert run({"check": "topk1_vs_chain", "of": ["tree", "linear"]}, experiment, linear, same).status == "pass"


def test_failed_points_over_every_record_so_far(experiment: Experiment) -> None:
    ok = measurement("a", "linear", server=LINEAR)
    assert run({"check": "failed_points"}, experiment, ok).status == "pass"
    broken = measurement("b", "autoregressive", status="failed", error={"kind": "server_died", "message": "gone"})
    outcome = run({"check": "failed_points"}, experiment, ok, broken)
    assert outcome.status == "fail"
    assert "point failed (server_died): gone" in outcome.detail


def test_outcome_and_measurement_summaries_are_json_ready(experiment: Experiment) -> None:
    tree = measurement("tree", "ddtree", params={"budget": 7, "topk": 1}, server=TREE_OK)
    outcome = run({"check": "depth_vs_commit", "of": "tree", "message": "m"}, experiment, tree)
    assert set(outcome.to_dict()) == {"step", "kind", "title", "status", "detail", "message", "evidence", "values"}
    summary = tree.summary()
    assert summary["label"] == "ddtree(budget=7, topk=1) @ C=1"
    assert summary["accept_len"] == 3.3 and summary["accept_len_source"] == "server"
    assert metric_value(tree, "ddtree_avg_commit_len") == (3.3, None)


def test_a_failed_accept_length_comparison_notes_chains_of_different_lengths(experiment: Experiment) -> None:
    linear = measurement(
        "linear", "linear", server=LINEAR, command="python -m sglang.launch_server --speculative-num-draft-tokens 16"
    )
    tree = measurement(
        "tree",
        "ddtree",
        params={"budget": 7, "topk": 1},
        server={"accept_len": 2.6},
        command="python -m sglang.launch_server --speculative-algorithm DDTREE",
    )
    spec = {"metric": "accept_len", "of": "tree", "compare": "equal", "to": {"of": "linear"}, "tolerance": 0.1}
    outcome = run(spec, experiment, linear, tree)
    assert outcome.status == "fail"
    assert "note: tree is a chain of 7 drafts and linear of 15" in outcome.detail
    same = measurement("tree", "ddtree", params={"budget": 7, "topk": 1}, server={"accept_len": 2.6})
    seven = measurement("linear", "linear", server=LINEAR, command="sim --algorithm linear --draft-tokens 7")
    assert "note:" not in run(spec, experiment, seven, same).detail
