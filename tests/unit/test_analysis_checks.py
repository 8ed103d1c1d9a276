"""Consistency checks: the field report's commit bug is flagged, a clean run is not, and each check fires on
exactly the shape it exists for."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from orchestrator.analysis import CHECKS, CheckContext, CheckSettings, analyse, run_checks, tidy_frame
from orchestrator.analysis.compare import add_baseline_comparisons
from orchestrator.analysis.roles import BaselineRoles, annotate
from orchestrator.errors import ConfigError
from orchestrator.runs.store import Record

RUNS = Path(__file__).resolve().parents[1] / "data" / "runs"
ROLES = BaselineRoles(ar="autoregressive", linear="linear")


def record(variant: str, load: int = 1, *, status: str = "ok", **fields: Any) -> Record:
    params = fields.pop("params", {})
    return Record(
        run_id="r",
        experiment="demo",
        deployment_id=f"d-{variant}-{sorted(params.items())}",
        point_id=fields.pop("point_id", f"p-{variant}-{load}-{sorted(params.items())}"),
        config_hash="c",
        host="h",
        variant=variant,
        params=params,
        baseline=variant in ("autoregressive", "linear"),
        mode="concurrency",
        concurrency=load,
        status=status,  # type: ignore[arg-type]
        started_at="t0",
        finished_at="t1",
        **fields,
    )


def point(tok_s: float, accept: float | None = None, *, requests: int = 32, **server: Any) -> dict[str, Any]:
    return {
        "client": {"requests": requests, "errors": 0, "output_tok_s": tok_s, "per_user_tok_s": tok_s},
        "server": {"engine": "sglang", "lines_matched": 20, "accept_len": accept, "gen_throughput": tok_s, **server},
    }


def baselines(load: int = 1) -> list[Record]:
    return [
        record("autoregressive", load, **point(100.0)),
        record("linear", load, params={"draft_tokens": 7}, **point(250.0, 4.0)),
    ]


def findings(records: list[Record], **settings: Any) -> list[Any]:
    frame, params = tidy_frame(records)
    checks = CheckSettings(**settings)
    frame = add_baseline_comparisons(annotate(frame, ROLES, params, checks.linear_chain_length), ROLES)
    return run_checks(CheckContext(frame=frame, roles=ROLES, settings=checks))


def checks_of(found: list[Any], severity: str | None = None) -> set[str]:
    return {f.check for f in found if severity is None or f.severity == severity}


# ---- the two fixture runs --------------------------------------------------------------------------------


def test_field_report_run_is_flagged_by_depth_and_chain_checks() -> None:
    analysis = analyse(RUNS / "field-report")
    errors = [f for f in analysis.findings if f.severity == "error"]
    assert {"depth_vs_commit", "topk1_vs_chain", "failed_points"} <= {f.check for f in errors}
    bug = [f for f in errors if f.check == "depth_vs_commit" and f.config == "ddtree(budget=7, topk=1)"]
    assert [f.load for f in bug] == ["C=1", "C=8", "C=32", "C=128"]
    assert "accepted depth 5.00 exceeds commit length 2.00" in bug[0].message
    assert any("avg_accepted_depth=5.00" in line for line in bug[0].evidence)
    assert any("DDTREE metrics" in line and line.startswith("windows/") for line in bug[0].evidence)
    chain = [f for f in errors if f.check == "topk1_vs_chain"]
    assert {f.config for f in chain} == {
        "ddtree(budget=7, topk=1)",
        "ddtree(budget=16, topk=1)",
        "ddtree(budget=32, topk=1)",
    }
    assert "chain of 7 drafts" in chain[0].message and "accepts 2.00" in chain[0].message
    failed = [f for f in errors if f.check == "failed_points"]
    assert len(failed) == 1 and any("CUDA out of memory" in line for line in failed[0].evidence)
    warnings = {f.check for f in analysis.findings if f.severity == "warning"}
    assert warnings == {"tree_below_chain", "request_errors"}


def test_clean_run_has_no_findings() -> None:
    analysis = analyse(RUNS / "clean")
    assert analysis.findings == []
    assert analysis.status_counts() == {"ok": 44, "degraded": 0, "failed": 0, "skipped": 0}


def test_simulator_commit_bug_run_is_flagged_and_its_clean_twin_is_not() -> None:
    """Runs the real runner produced against the simulator (sweeps/demo.yaml, and the same with the DDTree
    variant's ``--fault commit-bug``), imported by tests/data/runs/import_run.py."""
    clean = analyse(RUNS / "sim-demo")
    assert [f for f in clean.findings if f.severity in ("error", "warning")] == []
    buggy = analyse(RUNS / "sim-commit-bug")
    errors = {(f.check, f.config) for f in buggy.findings if f.severity == "error"}
    assert {config for check, config in errors if check == "depth_vs_commit"} == {
        "ddtree(budget=7, topk=1)",
        "ddtree(budget=7, topk=4)",
        "ddtree(budget=16, topk=1)",
        "ddtree(budget=16, topk=4)",
    }
    assert {config for check, config in errors if check == "topk1_vs_chain"} == {
        "ddtree(budget=7, topk=1)",
        "ddtree(budget=16, topk=1)",
    }


def test_a_torn_records_file_is_reported_not_fatal(tmp_path: Path) -> None:
    run = shutil.copytree(RUNS / "clean", tmp_path / "clean")
    with open(run / "records.jsonl", "a") as fh:
        fh.write('{"schema_version": 1, "run_id": "20260601T0')
    analysis = analyse(run)
    assert [(f.check, f.severity) for f in analysis.findings] == [("unreadable_records", "warning")]
    assert "line 45" in analysis.findings[0].evidence[0]


def test_settings_come_from_the_stored_experiment(tmp_path: Path) -> None:
    run = shutil.copytree(RUNS / "field-report", tmp_path / "run")
    text = (run / "experiment.yaml").read_text()
    assert "chain_tolerance: 0.1" in text
    disabled = text.replace("  disabled: []", "  disabled: [depth_vs_commit, no_such_check]")
    assert disabled != text
    (run / "experiment.yaml").write_text(disabled)
    analysis = analyse(run)
    assert analysis.settings.disabled == ["depth_vs_commit", "no_such_check"]
    assert "depth_vs_commit" not in {f.check for f in analysis.findings}
    notes = [f for f in analysis.findings if f.check == "settings"]
    assert len(notes) == 1 and "no_such_check" in notes[0].message


def test_bad_checks_block_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"checks\.chain_tolerance"):
        CheckSettings.from_experiment({"checks": {"chain_tolerance": -1}})
    assert CheckSettings.from_experiment({}).speedup_slack == 1.10


def test_every_check_is_named_and_documented() -> None:
    assert list(CHECKS) == [
        "depth_vs_commit",
        "topk1_vs_chain",
        "tree_below_chain",
        "golden",
        "spec_shape",
        "speedup_vs_accept_len",
        "speculation_off",
        "engine_mismatch",
        "client_vs_server",
        "source_agreement",
        "window_integrity",
        "failed_points",
        "request_errors",
        "too_few_requests",
        "missing_baseline",
        "unreadable_records",
        "overlapping_runs",
        "machine_load",
        "lossless",
        "runaway_outputs",
        "schedule_ignored",
        "drafter_corpus",
    ]
    assert all(fn.__doc__ for fn in CHECKS.values())


# ---- each check on its own shape ----------------------------------------------------------------------


def test_depth_vs_commit_tolerates_print_rounding() -> None:
    well_formed = point(300.0, 3.0, avg_commit_len=3.0, avg_accepted_depth=2.0)
    rounding = point(300.0, 3.0, avg_commit_len=3.00, avg_accepted_depth=3.01)
    broken = point(300.0, 2.0, avg_commit_len=2.0, avg_accepted_depth=5.0)
    found = findings(
        [
            *baselines(),
            record("ddtree", params={"budget": 7, "topk": 4}, **well_formed),
            record("ddtree", params={"budget": 8, "topk": 4}, **rounding),
            record("ddtree", params={"budget": 9, "topk": 4}, **broken),
        ]
    )
    depth = [f for f in found if f.check == "depth_vs_commit"]
    assert [f.config for f in depth] == ["ddtree(budget=9, topk=4)"]


@pytest.mark.parametrize(
    ("budget", "accept", "flagged"),
    [
        pytest.param(7, 4.0, False, id="same-length-matches"),
        pytest.param(7, 3.5, True, id="same-length-12pct-low"),
        pytest.param(7, 4.35, False, id="same-length-9pct-high"),
        pytest.param(3, 2.8, False, id="shorter-chain-in-range"),
        pytest.param(3, 1.5, True, id="shorter-chain-too-low"),
        pytest.param(16, 4.3, False, id="longer-chain-in-range"),
        pytest.param(16, 3.0, True, id="longer-chain-below-linear"),
    ],
)
def test_topk1_tree_against_the_linear_chain(budget: int, accept: float, flagged: bool) -> None:
    found = findings([*baselines(), record("ddtree", params={"budget": budget, "topk": 1}, **point(250.0, accept))])
    assert ("topk1_vs_chain" in checks_of(found, "error")) is flagged


def test_topk1_check_says_when_it_cannot_run() -> None:
    unknown_length = [record("autoregressive", **point(100.0)), record("linear", **point(200.0, 4.0))]
    found = findings([*unknown_length, record("ddtree", params={"budget": 7, "topk": 1}, **point(200.0, 2.0))])
    notes = [f for f in found if f.check == "topk1_vs_chain"]
    assert [f.severity for f in notes] == ["info"] and "linear_chain_length" in notes[0].message
    found = findings(
        [*unknown_length, record("ddtree", params={"budget": 7, "topk": 1}, **point(200.0, 2.0))],
        linear_chain_length=7,
    )
    assert "topk1_vs_chain" in checks_of(found, "error")


def test_tree_below_chain_only_when_the_tree_can_hold_the_chain() -> None:
    found = findings(
        [
            *baselines(),
            record("ddtree", params={"budget": 16, "topk": 4}, **point(200.0, 2.5)),  # room for 7 drafts
            record("ddtree", params={"budget": 4, "topk": 4}, **point(200.0, 2.5)),  # too small
            record("ddtree", params={"budget": 32, "topk": 8}, **point(200.0, 4.4)),  # above the chain
        ]
    )
    below = [f for f in found if f.check == "tree_below_chain"]
    assert [(f.config, f.severity) for f in below] == [("ddtree(budget=16, topk=4)", "warning")]


def test_speedup_larger_than_accept_length_allows() -> None:
    found = findings(
        [
            *baselines(),
            record("ddtree", params={"budget": 7, "topk": 4}, **point(250.0, 2.0)),  # 2.5x with accept 2.0
            record("ddtree", params={"budget": 9, "topk": 4}, **point(215.0, 2.0)),  # 2.15x: inside the slack
        ]
    )
    flagged = [f for f in found if f.check == "speedup_vs_accept_len"]
    assert [f.config for f in flagged] == ["ddtree(budget=7, topk=4)"]
    assert "2.50x over AR" in flagged[0].message


def test_client_against_server() -> None:
    agree = point(100.0, 3.0)
    disagree = point(100.0, 3.0)
    disagree["server"]["gen_throughput"] = 160.0
    disagree["client"]["spec"] = {"accept_len": 2.0}
    found = findings(
        [
            *baselines(),
            record("ddtree", params={"budget": 7, "topk": 4}, **agree),
            record("ddtree", params={"budget": 9, "topk": 4}, **disagree),
        ]
    )
    flagged = [f for f in found if f.check == "client_vs_server"]
    assert {f.config for f in flagged} == {"ddtree(budget=9, topk=4)"}
    assert len(flagged) == 2  # throughput and accept length
    assert all(f.severity == "warning" for f in flagged)


def test_speculation_silently_off() -> None:
    nothing = {"client": {"requests": 32, "output_tok_s": 100.0}, "server": {"engine": "sglang", "lines_matched": 0}}
    found = findings(
        [
            *baselines(),
            record("ddtree", params={"budget": 7, "topk": 4}, **nothing),
            record("ddtree", params={"budget": 9, "topk": 4}, **point(100.0, 1.0)),
        ]
    )
    off = {(f.config, f.severity) for f in found if f.check == "speculation_off"}
    assert off == {("ddtree(budget=7, topk=4)", "error"), ("ddtree(budget=9, topk=4)", "warning")}
    # The AR baseline has no speculative metrics and must not be flagged.
    assert all(f.config != "autoregressive" for f in found if f.check == "speculation_off")


def test_failed_points_errors_and_too_few_requests() -> None:
    failed = record(
        "ddtree",
        params={"budget": 7, "topk": 4},
        status="failed",
        error={"kind": "start_failed", "message": "never healthy", "evidence": ["Traceback", "OOM"]},
    )
    errored = point(100.0, 3.0)
    errored["client"].update(errors=3, errors_by_kind={"timeout": 2, "http_500": 1})
    all_failed = point(0.0, None)
    all_failed["client"].update(errors=32)
    found = findings(
        [
            *baselines(),
            failed,
            record("ddtree", params={"budget": 9, "topk": 4}, **errored),
            record("ddtree", params={"budget": 11, "topk": 4}, **point(100.0, 3.0, requests=4)),
            record("ddtree", params={"budget": 13, "topk": 4}, **all_failed),
        ]
    )
    by = {(f.check, f.config): f for f in found}
    assert by[("failed_points", "ddtree(budget=7, topk=4)")].evidence == ["Traceback", "OOM"]
    assert "never healthy" in by[("failed_points", "ddtree(budget=7, topk=4)")].message
    errors = by[("request_errors", "ddtree(budget=9, topk=4)")]
    assert errors.severity == "warning" and "3 of 32" in errors.message and "timeout: 2" in errors.message
    assert by[("request_errors", "ddtree(budget=13, topk=4)")].severity == "error"
    assert by[("too_few_requests", "ddtree(budget=11, topk=4)")].severity == "warning"


def test_missing_baseline_is_a_note() -> None:
    found = findings([*baselines(1), record("ddtree", 8, params={"budget": 7, "topk": 4}, **point(100.0, 3.0))])
    notes = [f for f in found if f.check == "missing_baseline"]
    assert {f.load for f in notes} == {"C=8"} and {f.severity for f in notes} == {"info"}


def test_a_window_that_is_not_whole_is_one_warning_naming_its_reasons() -> None:
    reset = {"reason": "counter_reset", "detail": "2 counter series went down between scrapes: sglang:a_total, ..."}
    restart = {"reason": "restart", "detail": "2 process starts in the window"}
    broken = point(250.0, 4.0, integrity={"whole": False, "reasons": [restart], "part": "since_restart"})
    broken["server"]["prometheus"] = {
        "accept_len": None,
        "integrity": {"whole": False, "reasons": [reset], "part": None},
    }
    whole = point(250.0, 4.0, integrity={"whole": True, "reasons": [], "part": None})
    whole["server"]["prometheus"] = {"accept_len": 4.0, "integrity": {"whole": True, "reasons": [], "part": None}}
    found = [
        f
        for f in findings([*baselines(), record("linear", 8, params={"draft_tokens": 7}, **broken)])
        + findings([record("linear", 2, params={"draft_tokens": 7}, **whole)])
        if f.check == "window_integrity"
    ]
    assert len(found) == 1 and found[0].severity == "warning" and found[0].load == "C=8"
    assert found[0].message == (
        "window not whole: log window: restart (figures from its since restart part only); "
        "/metrics: counter_reset (no figure)"
    )
    assert found[0].evidence == [
        f"log window: restart: {restart['detail']}",
        f"/metrics: counter_reset: {reset['detail']}",
    ]


def test_a_log_that_cannot_show_every_interval_is_a_note_when_metrics_is_whole() -> None:
    # The real vLLM under a busy machine: idle intervals logged at DEBUG leave the log's throughput untimed
    # (missing_intervals) at 11 of 12 points, while /metrics counted the window whole: the figures stand.
    missing = {"reason": "missing_intervals", "detail": "vLLM logs an engine's interval at DEBUG when ..."}
    restart = {"reason": "restart", "detail": "2 process starts in the window"}

    def row(reasons: list[dict[str, str]], prom_whole: bool | None) -> dict[str, Any]:
        data = point(250.0, 4.0, integrity={"whole": False, "reasons": reasons, "part": None})
        if prom_whole is not None:
            data["server"]["prometheus"] = {
                "accept_len": 4.0,
                "integrity": {"whole": prom_whole, "reasons": [], "part": None},
            }
        return data

    def found(data: dict[str, Any]) -> list[Any]:
        out = findings([*baselines(), record("linear", 8, params={"draft_tokens": 7}, **data)])
        return [f for f in out if f.check == "window_integrity"]

    note = found(row([missing], True))
    assert [f.severity for f in note] == ["info"]
    assert note[0].message == (
        "window not whole: log window: missing_intervals (no figure); the point's figures come from /metrics, "
        "which is whole"
    )
    # no whole source to take the figures from, or an event rather than a limit: a warning as before
    assert [f.severity for f in found(row([missing], None))] == ["warning"]
    assert [f.severity for f in found(row([missing], False))] == ["warning"]
    assert [f.severity for f in found(row([missing, restart], True))] == ["warning"]


def test_findings_are_ordered_errors_first_and_serialisable() -> None:
    found = findings(
        [
            *baselines(),
            record("ddtree", params={"budget": 7, "topk": 4}, **point(100.0, 3.0, requests=2)),
            record(
                "ddtree",
                params={"budget": 9, "topk": 4},
                **point(100.0, 2.0, avg_commit_len=2.0, avg_accepted_depth=5.0),
            ),
        ]
    )
    ranks = [{"error": 0, "warning": 1, "info": 2}[f.severity] for f in found]
    assert ranks == sorted(ranks)
    assert json.loads(json.dumps([f.model_dump() for f in found]))[0]["check"] == "depth_vs_commit"
