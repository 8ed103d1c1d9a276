"""Plan expansion, deduplication, ordering and ids, as tables of cases."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import yaml

from orchestrator.experiment.schema import load_experiment
from orchestrator.plan.deployments import build_plan, content_id

BASE = {
    "name": "t",
    "host": "local",
    "service": {"kind": "process", "command": "server {args}"},
    "server": {"url": "http://127.0.0.1:9"},
    "engine": "sim",
    "load": {"concurrency": [1, 8], "requests": 4},
}


def plan_of(tmp_path: Path, variants: dict, baselines: list[str] | None = None, **extra: object):
    doc = {**BASE, "variants": variants, **extra}
    if baselines is not None:
        doc["baselines"] = baselines
    path = tmp_path / "e.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return build_plan(load_experiment(path))


@pytest.mark.parametrize(
    ("variants", "baselines", "expected"),
    [
        pytest.param({"ar": {"args": ""}}, [], ["ar"], id="single-variant-no-matrix"),
        pytest.param(
            {"t": {"args": "--b {b} --k {k}", "matrix": {"b": [7, 16], "k": [1, 4]}}},
            [],
            ["t(b=7, k=1)", "t(b=7, k=4)", "t(b=16, k=1)", "t(b=16, k=4)"],
            id="product-in-file-order",
        ),
        pytest.param(
            {"t": {"args": "--b {b} --k {k}", "matrix": {"b": [7, 16], "k": [1, 4]}, "exclude": [{"b": 16}]}},
            [],
            ["t(b=7, k=1)", "t(b=7, k=4)"],
            id="exclude-partial-rule",
        ),
        pytest.param(
            {
                "t": {
                    "args": "--b {b} --k {k}",
                    "matrix": {"b": [7], "k": [1]},
                    "include": [{"b": 32, "k": 8}],
                }
            },
            [],
            ["t(b=7, k=1)", "t(b=32, k=8)"],
            id="include-adds-a-point",
        ),
        pytest.param(
            {
                "tree": {"args": "--b {b}", "matrix": {"b": [1, 2]}},
                "ar": {"args": ""},
                "lin": {"args": "--lin"},
            },
            ["ar", "lin"],
            ["ar", "lin", "tree(b=1)", "tree(b=2)"],
            id="baselines-first-in-listed-order",
        ),
        pytest.param(
            {
                "ar": {"args": "--algo {a}", "matrix": {"a": ["x"]}},
                "tree": {"args": "--algo {a}", "matrix": {"a": ["x", "y"]}},
            },
            ["ar"],
            ["ar(a=x)", "tree(a=y)"],
            id="identical-config-deploys-once",
        ),
    ],
)
def test_expansion_and_order(tmp_path: Path, variants: dict, baselines: list[str], expected: list[str]) -> None:
    plan = plan_of(tmp_path, variants, baselines)
    assert [d.label for d in plan.deployments] == expected
    assert plan.restarts == len(expected)
    assert plan.load_point_count == 2 * len(expected)


def test_duplicate_keeps_alias(tmp_path: Path) -> None:
    plan = plan_of(
        tmp_path,
        {"lin": {"args": "--chain 7"}, "tree": {"args": "--chain {b}", "matrix": {"b": [7, 16]}}},
        ["lin"],
    )
    first = plan.deployments[0]
    assert first.variant == "lin" and first.baseline
    assert [(a.variant, a.params) for a in first.aliases] == [("tree", {"b": 7})]


def test_ids_stable_under_key_reordering(tmp_path: Path) -> None:
    a = textwrap.dedent(
        """
        name: t
        host: local
        service: {kind: process, command: "server {args}"}
        server: {url: "http://127.0.0.1:9"}
        engine: sim
        variants:
          t: {args: "--b {b} --k {k}", matrix: {b: [7, 16], k: [1]}}
        load: {concurrency: [1, 8], requests: 4}
        """
    )
    b = textwrap.dedent(
        """
        load: {requests: 4, concurrency: [1, 8]}
        variants:
          t: {matrix: {b: [7, 16], k: [1]}, args: "--b {b} --k {k}"}
        engine: sim
        server: {url: "http://127.0.0.1:9"}
        service: {command: "server {args}", kind: process}
        host: local
        name: t
        """
    )
    (tmp_path / "a.yaml").write_text(a)
    (tmp_path / "b.yaml").write_text(b)
    pa = build_plan(load_experiment(tmp_path / "a.yaml"))
    pb = build_plan(load_experiment(tmp_path / "b.yaml"))
    assert [d.id for d in pa.deployments] == [d.id for d in pb.deployments]
    assert [p.id for d in pa.deployments for p in d.load_points] == [
        p.id for d in pb.deployments for p in d.load_points
    ]
    assert len({p.id for d in pa.deployments for p in d.load_points}) == 4


def test_ids_change_when_config_changes(tmp_path: Path) -> None:
    p1 = plan_of(tmp_path, {"ar": {"args": "--x 1"}})
    p2 = plan_of(tmp_path, {"ar": {"args": "--x 2"}})
    assert p1.deployments[0].id != p2.deployments[0].id


def test_content_id_ignores_key_order() -> None:
    assert content_id("d", {"a": 1, "b": [1, 2]}) == content_id("d", {"b": [1, 2], "a": 1})
    assert content_id("d", {"a": 1}) != content_id("d", {"a": 2})


@pytest.mark.parametrize(
    ("load", "points"),
    [
        pytest.param({"concurrency": [1, 8, 32]}, ["C=1", "C=8", "C=32"], id="closed-loop"),
        pytest.param({"rates": [0.5, 2]}, ["rate=0.5/s", "rate=2/s"], id="open-loop"),
        pytest.param({"concurrency": 4, "rates": 1}, ["C=4", "rate=1/s"], id="scalars-become-lists"),
    ],
)
def test_load_points(tmp_path: Path, load: dict, points: list[str]) -> None:
    plan = plan_of(tmp_path, {"ar": {"args": ""}}, load={**load, "requests": 8})
    assert [p.label for p in plan.deployments[0].load_points] == points


def test_k26_example_counts(repo_root: Path) -> None:
    plan = build_plan(load_experiment(repo_root / "sweeps" / "k26-ddtree.yaml"))
    assert plan.totals()["deployments"] == 11
    assert plan.totals()["load_points"] == 44 * 3  # each measured three times (load.repeats)
    assert plan.totals()["restarts"] == 11
    # ETA: 11 loads of 8 minutes plus the measurement time of every point
    assert plan.eta_seconds > 11 * 480
    assert plan.deployments[0].variant == "autoregressive"
    assert "--speculative-ddtree-budget 32 --speculative-ddtree-topk 8" in (plan.deployments[-1].command or "")


def test_eta_uses_duration_when_given(tmp_path: Path) -> None:
    plan = plan_of(tmp_path, {"ar": {"args": ""}}, load={"concurrency": [1, 2], "duration": "30s", "warmup": 0})
    assert [p.estimated_seconds for p in plan.deployments[0].load_points] == [30.0, 30.0]
    assert plan.deployments[0].estimated_seconds() == pytest.approx(60.0 + 60.0)


def test_every_shipped_sweep_plans(repo_root: Path) -> None:
    for path in sorted((repo_root / "sweeps").glob("*.yaml")):
        plan = build_plan(load_experiment(path))
        assert plan.restarts >= 1, path
        assert all(d.command for d in plan.deployments), path
