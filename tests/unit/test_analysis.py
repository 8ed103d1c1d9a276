"""Analysis: the tidy frame, baseline roles and chain lengths, comparison arithmetic on hand-made frames,
winners, the Pareto front, and run-to-run differences."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from orchestrator.analysis import (
    add_baseline_comparisons,
    analyse,
    baseline_roles,
    best_per_load,
    chain_length,
    compare_frames,
    compare_runs,
    open_run,
    pareto_front,
    tidy_frame,
    tree_shape,
)
from orchestrator.analysis.roles import (
    BaselineRoles,
    chain_accept_len,
    expected_chain_range,
    fit_acceptance,
    is_speculative,
)
from orchestrator.runs.store import Record, RunStore

RUNS = Path(__file__).resolve().parents[1] / "data" / "runs"


def record(variant: str, load: int = 1, *, host: str = "h1", status: str = "ok", **fields: Any) -> Record:
    params = fields.pop("params", {})
    point = fields.pop("point_id", f"p-{variant}-{load}-{host}-{sorted(params.items())}")
    return Record(
        run_id="r",
        experiment="demo",
        deployment_id=fields.pop("deployment_id", f"d-{variant}-{sorted(params.items())}"),
        point_id=point,
        config_hash="c",
        host=host,
        variant=variant,
        params=params,
        baseline=fields.pop("baseline", variant in ("autoregressive", "linear")),
        mode="concurrency",
        concurrency=load,
        status=status,  # type: ignore[arg-type]
        started_at="t0",
        finished_at="t1",
        **fields,
    )


def ok(tok_s: float, accept: float | None = None, **client: Any) -> dict[str, Any]:
    """Client and server dicts of one successful point."""
    return {
        "client": {"requests": 32, "errors": 0, "output_tok_s": tok_s, "per_user_tok_s": tok_s, **client},
        "server": {"engine": "sglang", "accept_len": accept, "gen_throughput": tok_s},
    }


# ---- roles ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("baselines", "ar", "linear"),
    [
        pytest.param(["autoregressive", "linear"], "autoregressive", "linear", id="canonical"),
        pytest.param(["linear", "autoregressive"], "autoregressive", "linear", id="names-beat-order"),
        pytest.param(["ar", "dflash16"], "ar", "dflash16", id="ar-dflash-prefix"),
        pytest.param(["dflash", "vanilla"], "vanilla", "dflash", id="linear-by-name-ar-by-position"),
        pytest.param(["vanilla", "eagle-chain"], "vanilla", "eagle-chain", id="positional"),
        pytest.param(["ar-k26", "chain_7"], "ar-k26", "chain_7", id="first-word"),
        pytest.param(["autoregressive"], "autoregressive", None, id="ar-only"),
        pytest.param(["my-baseline"], "my-baseline", None, id="single-unnamed-is-ar"),
        pytest.param([], None, None, id="none"),
    ],
)
def test_baseline_roles(baselines: list[str], ar: str | None, linear: str | None) -> None:
    assert baseline_roles(baselines) == BaselineRoles(ar=ar, linear=linear)


@pytest.mark.parametrize(
    ("params", "command", "explicit", "expected"),
    [
        pytest.param({}, "--speculative-algorithm DFLASH --speculative-num-draft-tokens 16", None, 15, id="sglang"),
        pytest.param({}, "--speculative-num-steps 5 --speculative-num-draft-tokens 6", None, 5, id="sglang-steps"),
        pytest.param({}, "--algorithm linear --draft-tokens 7", None, 7, id="simulator"),
        pytest.param({}, "llama-server -m m.gguf --draft-max 8", None, 8, id="llamacpp"),
        pytest.param({}, """--speculative-config '{"num_speculative_tokens": 4}'""", None, 4, id="vllm"),
        pytest.param({"draft_tokens": 9}, "--draft-tokens 7", None, 9, id="param-beats-command"),
        pytest.param({"num_draft_tokens": 16}, None, None, 15, id="param-counts-block"),
        pytest.param({}, "--draft-tokens 7", 12, 12, id="explicit-wins"),
        pytest.param({}, "--speculative-algorithm EAGLE", None, None, id="unknown"),
    ],
)
def test_chain_length(params: dict[str, Any], command: str | None, explicit: int | None, expected: int | None) -> None:
    assert chain_length(params, command, explicit) == expected


def test_tree_shape_from_params_or_command() -> None:
    shape = tree_shape({"budget": 7, "topk": 1}, None)
    assert shape is not None and (shape.budget, shape.topk, shape.chain_drafts) == (7, 1, 7)
    shape = tree_shape({}, "--speculative-ddtree-budget 32 --speculative-ddtree-topk 8")
    assert shape is not None and (shape.budget, shape.topk) == (32, 8)
    capped = tree_shape({"budget": 32, "topk": 1, "block_size": 16}, None)
    assert capped is not None and capped.chain_drafts == 15
    assert tree_shape({"k": 4}, "--draft-tokens 4") is None


def test_is_speculative() -> None:
    roles = BaselineRoles(ar="autoregressive", linear="linear")
    assert not is_speculative("autoregressive", roles, {}, "--draft-tokens 7")
    assert is_speculative("linear", roles, {}, "--draft-tokens 7")
    assert not is_speculative("plain", roles, {}, "python -m sglang.launch_server --tp 8")
    assert is_speculative("mystery", roles, {}, None)


def test_chain_formula_and_its_inverse() -> None:
    assert chain_accept_len(0.0, 7) == 1.0
    assert chain_accept_len(1.0, 7) == 8.0
    assert math.isclose(chain_accept_len(0.5, 2), 1 + 0.5 + 0.25)
    alpha = fit_acceptance(3.75, 15)
    assert math.isclose(chain_accept_len(alpha, 15), 3.75, rel_tol=1e-9)
    low, high = expected_chain_range(3.75, 15, 7)
    assert low < high == 3.75
    assert expected_chain_range(3.75, 15, 15) == (3.75, 3.75)
    low, high = expected_chain_range(3.0, 7, 16)
    assert low == 3.0 < high


# ---- the tidy frame ------------------------------------------------------------------------------------


def test_tidy_frame_flattens_figures_and_keeps_params_as_columns() -> None:
    rec = record(
        "ddtree",
        8,
        params={"budget": 7, "topk": 1, "requests": "x"},
        client={
            "concurrency": 8,
            "requests": 32,
            "errors": 1,
            "errors_by_kind": {"timeout": 1},
            "output_tok_s": 100.0,
            "ttft_ms": {"mean": 1.0, "p50": 2.0, "p90": 3.0, "p99": 4.0},
            "spec": {"accept_len": 2.5, "verify_steps": 10},
        },
        server={
            "engine": "sglang",
            "accept_len": 2.0,
            "avg_commit_len": 2.0,
            "avg_accepted_depth": 5.0,
            "samples": [{"x": 1}],
            "definitions": {"accept_len": "prose"},
            "prometheus": {"accept_len": 2.1, "counters": {"a": 1}},
            "sources": {"figures": {"accept_len": {"values": {"log": 2.0, "prometheus": 2.1}}}},
        },
    )
    frame, params = tidy_frame([rec])
    row = frame.iloc[0]
    assert params == ["budget", "topk", "param_requests"]  # "requests" would overwrite a client figure
    assert row["budget"] == 7 and row["param_requests"] == "x" and row["requests"] == 32
    assert row["client_concurrency"] == 8 and row["concurrency"] == 8
    assert row["ttft_ms_p99"] == 4.0
    assert row["client_accept_len"] == 2.5 and row["client_verify_steps"] == 10
    assert row["errors_by_kind"] == '{"timeout": 1}'
    assert row["server_accept_len"] == 2.0 and row["server_engine"] == "sglang"
    assert row["ddtree_avg_commit_len"] == 2.0 and row["ddtree_avg_accepted_depth"] == 5.0
    assert row["prom_accept_len"] == 2.1 and "prom_counters" not in frame.columns
    assert row["source_log_accept_len"] == 2.0 and row["source_prometheus_accept_len"] == 2.1
    assert "server_definitions_accept_len" not in frame.columns and "server_samples" not in frame.columns
    assert row["accept_len"] == 2.0 and row["accept_len_source"] == "server"
    assert row["label"] == "ddtree(budget=7, topk=1, requests=x)" and row["load_label"] == "C=8"


@pytest.mark.parametrize(
    ("server", "client", "expected", "source"),
    [
        pytest.param({"accept_len": 3.0}, {"spec": {"accept_len": 2.9}}, 3.0, "server", id="server"),
        pytest.param({"prometheus": {"accept_len": 3.1}}, {"spec": {"accept_len": 2.9}}, 2.9, "client", id="client"),
        pytest.param({"prometheus": {"accept_len": 3.1}}, {}, 3.1, "prometheus", id="prom"),
        pytest.param({"accept_len": 0.0, "prometheus": {"accept_len": 0.0}}, {}, None, None, id="idle-gauge"),
        pytest.param({"avg_commit_len": 2.0}, {}, 2.0, "ddtree_commit", id="commit"),
        pytest.param({}, {}, None, None, id="none"),
        # The most exact source first (issue 27): an SGLang log window only bounds its accept length, the
        # responses' integer counts give it exactly; a /metrics gauge comes after a bounded log figure.
        pytest.param(
            {"accept_len": 3.5, "exactness": {"accept_len": {"kind": "bounded", "bounds": [3.0, 4.0]}}},
            {"spec": {"accept_len": 3.2, "exactness": {"accept_len": {"kind": "exact"}}}},
            3.2,
            "client",
            id="exact-client-over-bounded-server",
        ),
        pytest.param(
            {
                "accept_len": 3.5,
                "exactness": {"accept_len": {"kind": "bounded"}},
                "prometheus": {"accept_len": 3.3, "exactness": {"accept_len": {"kind": "gauge"}}},
            },
            {},
            3.5,
            "server",
            id="bounded-over-gauge",
        ),
        pytest.param(
            {
                "accept_len": 3.5,
                "exactness": {"accept_len": {"kind": "rounded"}},
                "prometheus": {"accept_len": 3.4, "exactness": {"accept_len": {"kind": "exact"}}},
            },
            {},
            3.4,
            "prometheus",
            id="exact-counters-over-rounded-log",
        ),
    ],
)
def test_accept_len_precedence(
    server: dict[str, Any], client: dict[str, Any], expected: float | None, source: str | None
) -> None:
    frame, _ = tidy_frame([record("linear", server=server or None, client=client or None)])
    value = frame.iloc[0]["accept_len"]
    assert (value is None or pd.isna(value)) if expected is None else value == expected
    assert frame.iloc[0]["accept_len_source"] == source or (
        source is None and pd.isna(frame.iloc[0]["accept_len_source"])
    )
    said = (server.get("exactness") or {}) if source == "server" else {}
    if source == "client":
        said = client["spec"].get("exactness") or {}
    if source == "prometheus":
        said = server["prometheus"].get("exactness") or {}
    kind = (said.get("accept_len") or {}).get("kind")
    shown = frame.iloc[0]["accept_len_exactness"]
    assert shown == kind or (kind is None and (shown is None or pd.isna(shown)))


def test_aliases_become_rows_of_their_own() -> None:
    rec = record("linear", aliases=[{"variant": "ddtree", "params": {"budget": 15, "topk": 1}}], **ok(90.0, 3.5))
    frame, params = tidy_frame([rec])
    assert list(frame["label"]) == ["linear", "ddtree(budget=15, topk=1)"]
    assert list(frame["alias_of"].fillna("")) == ["", "linear"]
    assert list(frame["baseline"]) == [True, False]
    assert params == ["budget", "topk"]


def test_open_run_keeps_the_last_attempt(tmp_path: Path) -> None:
    store = RunStore.create(tmp_path, "demo", {"name": "demo", "baselines": ["autoregressive"]}, {"deployments": []})
    store.append(record("autoregressive", status="failed", point_id="p1"))
    store.append(record("autoregressive", attempt=2, point_id="p1", **ok(100.0)))
    assert len(open_run(store.path).frame) == 1
    assert open_run(store.path).frame.iloc[0]["status"] == "ok"
    assert len(open_run(store.path, all_attempts=True).frame) == 2


# ---- comparison arithmetic on hand-made frames ---------------------------------------------------------


def _frame(records: list[Record]) -> pd.DataFrame:
    frame, _ = tidy_frame(records)
    return add_baseline_comparisons(frame, BaselineRoles(ar="autoregressive", linear="linear"))


def test_speedups_join_baselines_per_host_and_load() -> None:
    frame = _frame(
        [
            record("autoregressive", 1, **ok(100.0)),
            record("autoregressive", 8, **ok(400.0)),
            record("linear", 1, **ok(80.0, 4.0)),
            record("linear", 8, **ok(600.0, 4.0)),
            record("ddtree", 1, params={"budget": 7, "topk": 1}, **ok(120.0, 3.0)),
            record("ddtree", 8, params={"budget": 7, "topk": 1}, **ok(500.0, 2.0)),
            record("autoregressive", 1, host="h2", **ok(50.0)),
            record("ddtree", 1, host="h2", params={"budget": 7, "topk": 1}, **ok(75.0, 3.0)),
            record("ddtree", 8, host="h2", params={"budget": 7, "topk": 1}, status="failed"),
        ]
    )
    tree = frame[frame["variant"] == "ddtree"].set_index(["host", "load"])
    assert tree.loc[("h1", 1.0), "speedup_vs_ar"] == pytest.approx(1.2)
    assert tree.loc[("h1", 1.0), "speedup_vs_linear"] == pytest.approx(1.5)
    assert tree.loc[("h1", 1.0), "accept_len_vs_linear"] == pytest.approx(0.75)
    assert tree.loc[("h1", 8.0), "speedup_vs_ar"] == pytest.approx(1.25)
    assert tree.loc[("h1", 8.0), "speedup_vs_linear"] == pytest.approx(500 / 600)
    # The second host is compared with its own AR baseline, and has no linear one.
    assert tree.loc[("h2", 1.0), "speedup_vs_ar"] == pytest.approx(1.5)
    assert pd.isna(tree.loc[("h2", 1.0), "speedup_vs_linear"])
    assert pd.isna(tree.loc[("h2", 8.0), "speedup_vs_ar"])  # failed: no ratio
    ar = frame[frame["variant"] == "autoregressive"]
    assert list(ar["speedup_vs_ar"]) == [1.0, 1.0, 1.0]


def test_best_per_load_with_runner_up_and_margin() -> None:
    frame = _frame(
        [
            record("autoregressive", 1, **ok(100.0)),
            record("linear", 1, **ok(80.0, 4.0)),
            record("ddtree", 1, params={"budget": 7}, **ok(125.0, 3.0)),
            record("autoregressive", 8, **ok(400.0)),
            record("linear", 8, **ok(600.0, 4.0)),
            record("ddtree", 8, params={"budget": 7}, status="failed"),
        ]
    )
    best = best_per_load(frame).set_index("load_label")
    assert best.loc["C=1", "label"] == "ddtree(budget=7)"
    assert best.loc["C=1", "runner_up"] == "autoregressive"
    assert best.loc["C=1", "margin"] == pytest.approx(0.25)
    assert best.loc["C=1", "speedup_vs_ar"] == pytest.approx(1.25)
    assert best.loc["C=8", "label"] == "linear"
    assert best.loc["C=8", "margin"] == pytest.approx(0.5)


def test_pareto_front_keeps_only_undominated_points() -> None:
    points = [(10.0, 100.0), (20.0, 90.0), (15.0, 80.0), (5.0, 200.0), (20.0, 50.0), (30.0, 10.0), (4.0, 150.0)]
    records = [
        record("v", i + 1, params={"i": i}, client={"output_tok_s": y, "per_user_tok_s": x})
        for i, (x, y) in enumerate(points)
    ]
    frame, _ = tidy_frame(records)
    front = pareto_front(frame)
    kept = list(zip(front["per_user_tok_s"], front["output_tok_s"], strict=True))
    assert kept == [(5.0, 200.0), (10.0, 100.0), (20.0, 90.0), (30.0, 10.0)]


def test_compare_frames_arithmetic() -> None:
    a = _frame(
        [
            record("autoregressive", 1, **ok(100.0)),
            record("ddtree", 1, params={"budget": 7}, **ok(120.0, 3.0)),
            record("ddtree", 8, params={"budget": 7}, **ok(400.0, 3.0)),
            record("linear", 1, **ok(80.0, 4.0)),
        ]
    )
    b = _frame(
        [
            record("autoregressive", 1, **ok(100.0)),
            record("ddtree", 1, params={"budget": 7}, **ok(150.0, 3.06)),
            record("ddtree", 8, params={"budget": 7}, status="failed"),
            record("ddtree", 1, params={"budget": 16}, **ok(90.0, 3.5)),
        ]
    )
    table = compare_frames(a, b, threshold=0.05).set_index(["label", "load_label"])
    tree = table.loc[("ddtree(budget=7)", "C=1")]
    assert tree["output_tok_s_delta"] == pytest.approx(30.0)
    assert tree["output_tok_s_change"] == pytest.approx(0.25)
    assert tree["accept_len_change"] == pytest.approx(0.02)
    assert tree["speedup_vs_ar_a"] == pytest.approx(1.2) and tree["speedup_vs_ar_b"] == pytest.approx(1.5)
    assert bool(tree["changed"])
    assert not bool(table.loc[("autoregressive", "C=1"), "changed"])
    assert table.loc[("ddtree(budget=7)", "C=8"), "status_b"] == "failed"
    assert bool(table.loc[("ddtree(budget=7)", "C=8"), "changed"])
    assert table.loc[("linear", "C=1"), "presence"] == "only_a"
    assert table.loc[("ddtree(budget=16)", "C=1"), "presence"] == "only_b"


def test_compare_runs_on_the_fixture_runs() -> None:
    clean, field = analyse(RUNS / "clean"), analyse(RUNS / "field-report")
    comparison = compare_runs(clean, field)
    assert comparison.notes == []
    assert len(comparison.table) == 44
    assert {f.check for f in comparison.findings_new} >= {"depth_vs_commit", "topk1_vs_chain"}
    assert comparison.findings_gone == []
    row = comparison.table.set_index(["label", "load_label"]).loc[("ddtree(budget=7, topk=1)", "C=1")]
    assert row["output_tok_s_a"] == pytest.approx(104.0) and row["output_tok_s_b"] == pytest.approx(109.7)
    assert row["accept_len_b"] == pytest.approx(2.0)
