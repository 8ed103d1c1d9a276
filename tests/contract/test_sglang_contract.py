"""SGLang's own code is the oracle: specsweep must recover exactly the figures SGLang's formulas give.

``sglang_oracle.py`` runs SGLang's metrics code from a pinned wheel (SchedulerMetricsReporter.report_decode_stats,
SchedulerMetricsCollector / TokenizerMetricsCollector, the scheduler logger prefix, the /metrics multiprocess
rendering) on decode steps whose counts the test chooses, in one process per scheduler rank as the server runs
them. The test then reads SGLang's output with specsweep's parsers and compares with the formula applied to the
same counts (metrics_reporter.py report_decode_stats):

    accept len  = sum(tokens) / sum(batch sizes)              tokens = accepted drafts + 1 bonus per request
    accept rate = sum(accepted drafts) / (sum(batch sizes) * (speculative_num_draft_tokens - 1))
    gen throughput = tokens since the previous Decode line / seconds since it
    /metrics counters: d(sglang:generation_tokens_total) / d(sglang:spec_verify_calls_total)

Pinned: sglang 0.5.23 (newest on PyPI when written); 0.5.22 for the last version whose ATTN_CP ranks > 0 still
log and export (metrics_collector.py init_new: ``is_stats_logging_rank = attn_tp_rank == 0`` there,
``... and attn_cp_rank == 0`` in 0.5.23); 0.5.10 for the last version whose 'accept rate' counts the bonus
token (observability/scheduler_metrics_mixin.py report_decode_stats). The wheels come from PyPI (``pip
download --no-deps``) into ``~/.cache/specsweep/engines``; nothing here is skipped: without the wheel,
prometheus_client or msgspec the tests fail.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from orchestrator.engines.sglang.log import aggregate_sglang, parse_sglang
from orchestrator.metrics import parse_window, scrape_delta
from tests.contract.wheels import engine_sources
from tests.timing import scaled

CURRENT = "0.5.23"
CP_COPIES = "0.5.22"  # the last version whose ATTN_CP ranks > 0 print and export copies
BONUS_RATE = "0.5.10"  # the last version whose 'accept rate' counts the bonus token
ORACLE = Path(__file__).resolve().parent / "sglang_oracle.py"
K = 4  # speculative_num_draft_tokens: 3 drafts + the bonus slot
PRINTED = 0.005 + 1e-9  # a figure printed with two decimals is within half a unit of its last digit
# The files the oracle imports or reads definitions from (the rest of the wheel stays packed).
MEMBERS = (
    "sglang/srt/observability/",
    "sglang/srt/managers/scheduler_components/",
    "sglang/srt/managers/scheduler.py",
    "sglang/srt/managers/tokenizer_manager.py",
    "sglang/srt/utils/common.py",
    "sglang/srt/utils/gauge_histogram.py",
    "sglang/srt/runtime_context.py",
    "sglang/srt/environ.py",
    "sglang/srt/disaggregation/utils.py",
    "sglang/srt/arg_groups/fields/",
)


def run_oracle(version: str, scenario: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    sources = engine_sources("sglang", version, members=MEMBERS)
    path = tmp_path / f"scenario-{version}.json"
    path.write_text(json.dumps({"num_draft_tokens": K, **scenario}))
    env = {**os.environ, "PYTHONPATH": str(sources)}
    done = subprocess.run(
        [sys.executable, str(ORACLE), str(sources), str(path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=scaled(300),
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def steps(bs: int, drafts: list[int], dt: float) -> list[dict[str, Any]]:
    return [{"bs": bs, "correct_drafts": d, "dt": dt} for d in drafts]


def rank(parallel: dict[str, Any], step_list: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"parallel": parallel, "steps": step_list, **extra}


def formula(step_list: list[dict[str, Any]], interval: int) -> list[dict[str, float]]:
    """SGLang's per-line figures for ``step_list``, from metrics_reporter.py report_decode_stats."""
    out = []
    for start in range(0, len(step_list) - interval + 1, interval):
        chunk = step_list[start : start + interval]
        forward = sum(s["bs"] for s in chunk)
        drafts = sum(s["correct_drafts"] for s in chunk)
        tokens = drafts + forward
        seconds = sum(s["dt"] for s in chunk)
        out.append(
            {
                "accept_len": tokens / forward,
                "accept_rate": drafts / (forward * (K - 1)),
                "tokens": tokens,
                "seconds": seconds,
            }
        )
    return out


def journal(result: dict[str, Any]) -> str:
    """The ranks' lines interleaved the way a journal holds them: each interval's copies next to each other."""
    per_rank = [r["lines"] for r in result["ranks"]]
    lines = [
        line
        for i in range(max(map(len, per_rank), default=0))
        for lines in per_rank
        if i < len(lines)
        for line in [lines[i]]
    ]
    return "\n".join(lines) + "\n"


def series(exposition: str, name: str) -> dict[str, float]:
    return {
        line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
        for line in exposition.splitlines()
        if line.startswith(name + "{") or line.startswith(name + " ")
    }


# ------------------------------------------------------------------------------------------ one group


def test_single_group_line_and_figures(tmp_path: Path) -> None:
    plan = steps(4, [6, 8, 7, 9], 0.05) + steps(4, [10, 12, 11, 9], 0.04)
    result = run_oracle(CURRENT, {"decode_log_interval": 4, "ranks": [rank({}, plan)]}, tmp_path)
    (only,) = result["ranks"]
    assert only["logs"] and len(only["lines"]) == 2
    # The exact format, as SGLang 0.5.23 builds it (prefix without rank tags: tp_size 1, no DP).
    assert only["lines"][0].endswith(
        "] Decode batch, #running-req: 4, #token: 1234, token usage: 0.05, accept len: 2.88, accept rate: 0.62, "
        "cuda graph: True, gen throughput (token/s): 230.00, #queue-req: 0"
    )
    expected = formula(plan, 4)
    parsed = parse_sglang(journal(result))
    assert (parsed.matched, parsed.skipped, parsed.duplicates) == (2, 0, 0)
    for sample, want in zip(parsed.samples, expected, strict=True):
        assert sample.accept_len == pytest.approx(want["accept_len"], abs=PRINTED)  # type: ignore[attr-defined]
        assert sample.accept_rate == pytest.approx(want["accept_rate"], abs=PRINTED)  # type: ignore[attr-defined]
        assert sample.gen_throughput == pytest.approx(want["tokens"] / want["seconds"], abs=PRINTED)  # type: ignore[attr-defined]
    wm = parse_window("sglang", journal(result))
    tokens, seconds = sum(w["tokens"] for w in expected), sum(w["seconds"] for w in expected)
    # Every line covers 4 batches of 4 requests; the lines print two decimals.
    assert wm.accept_len == pytest.approx(tokens / 32, abs=PRINTED)
    assert wm.gen_throughput == pytest.approx(tokens / seconds, rel=1e-3)
    # 'accept rate' is drafts only in this version; without the version the parser cannot know it.
    assert wm.acceptance_rate is None
    assert wm.details["acceptance_rate_definition"] == "unknown"
    rate = aggregate_sglang(wm.samples, version=CURRENT)["acceptance_rate"]  # type: ignore[arg-type]
    assert rate == pytest.approx((30 + 42) / (32 * (K - 1)), abs=PRINTED)


def test_metrics_counters_give_sglangs_request_accept_length(tmp_path: Path) -> None:
    requests = [
        {"completion_tokens": 120, "spec_verify_ct": 40, "correct_drafts": 79},
        {"completion_tokens": 64, "spec_verify_ct": 25, "correct_drafts": 38, "stream": True},
        {"completion_tokens": 33, "spec_verify_ct": 10, "correct_drafts": 22},
    ]
    plan = steps(2, [3, 4], 0.1)
    result = run_oracle(CURRENT, {"decode_log_interval": 2, "ranks": [rank({}, plan)], "requests": requests}, tmp_path)
    exposition = result["metrics"]
    # The real names, TYPE and labels (multiprocess rendering, as the server's /metrics does).
    assert (
        "# TYPE sglang:spec_verify_calls_total counter" in exposition
        or "# TYPE sglang:spec_verify_calls counter" in exposition
    )
    assert series(exposition, "sglang:spec_verify_calls_total") == {
        'sglang:spec_verify_calls_total{engine_type="unified",model_name="m"}': 75.0
    }
    generated = series(exposition, "sglang:generation_tokens_total")
    assert sorted(generated.values()) == [64.0, 153.0]  # split by is_streaming
    for old in ("spec_verify_steps_total", "spec_draft_tokens_total", "spec_accepted_tokens_total"):
        assert old not in exposition
    assert sorted(series(exposition, "sglang:num_requests_total").values()) == [1.0, 2.0]
    prom = scrape_delta("", exposition, "sglang", elapsed_s=2.0)
    # Tokens per verify step: each request's first token came from prefill, not from a verify step.
    assert prom.accept_len == pytest.approx((217 - 3) / 75)
    # SGLang's own formula, completion_tokens / spec_verify_ct, as in meta_info spec_accept_length.
    assert prom.details["accept_len_engine"] == pytest.approx(217 / 75)
    assert prom.gen_throughput == pytest.approx(217 / 2.0)
    assert prom.details["accept_len_source"] == "counters"
    # The per-request meta_info SGLang computes from the same counts: completion_tokens / spec_verify_ct.
    assert [m["spec_accept_length"] for m in result["meta_info"]] == pytest.approx([3.0, 64 / 25, 3.3])
    assert [m["spec_num_proposed_drafts"] for m in result["meta_info"]] == [120, 75, 30]
    # Gauges: the last decode-log interval, a cross-check in details.
    want = formula(plan, 2)[-1]
    assert prom.details["gauge_accept_len"] == pytest.approx(want["accept_len"])
    assert prom.details["gauge_acceptance_rate"] == pytest.approx(want["accept_rate"])
    assert prom.details["gauge_gen_throughput"] == pytest.approx(want["tokens"] / want["seconds"])


def test_a_window_without_verify_steps_has_no_accept_length(tmp_path: Path) -> None:
    # SGLang sets its spec gauges only with a Decode batch line (report_decode_stats) and adds a request's verify
    # calls when it finishes (observe_one_finished_request, only when > 0). Two scrapes with nothing between, and
    # two across a request answered from prefill alone (1 token, 0 verify calls): the verify counter does not
    # move, the gauges still hold the last interval before the window.
    requests = [{"completion_tokens": 120, "spec_verify_ct": 40, "correct_drafts": 79}]
    plan = steps(2, [3, 4], 0.1)
    first = run_oracle(CURRENT, {"decode_log_interval": 2, "ranks": [rank({}, plan)], "requests": requests}, tmp_path)
    prefill_only = [*requests, {"completion_tokens": 1, "spec_verify_ct": 0, "correct_drafts": 0}]
    second = run_oracle(
        CURRENT, {"decode_log_interval": 2, "ranks": [rank({}, plan)], "requests": prefill_only}, tmp_path
    )
    assert series(first["metrics"], "sglang:spec_accept_length")  # the gauge holds a figure: 2.75 accepted
    assert series(first["metrics"], "sglang:spec_verify_calls_total") == series(
        second["metrics"], "sglang:spec_verify_calls_total"
    )
    for before, after, tokens in ((first, first, 0), (first, second, 1)):
        for elapsed in (2.0, None):
            prom = scrape_delta(before["metrics"], after["metrics"], "sglang", elapsed_s=elapsed)
            assert prom.integrity.whole
            assert (prom.accept_len, prom.acceptance_rate) == (None, None)
            assert prom.details["verify_calls"] == 0 and prom.details["accept_len_source"] is None
            for figure in ("accept_len", "acceptance_rate"):
                assert prom.details["no_figure"][figure].startswith("no verify steps in the window")
                assert figure not in prom.exactness
            assert prom.details["gauge_accept_len"] == pytest.approx(formula(plan, 2)[-1]["accept_len"])
            # Tokens counted over known seconds; 0 over any seconds; never the gen_throughput gauge (55 tok/s).
            if elapsed is None and tokens:
                assert prom.gen_throughput is None
            else:
                assert prom.gen_throughput == pytest.approx(tokens / elapsed if elapsed else 0.0)
                assert prom.exactness["gen_throughput"]["kind"] == "exact"


# What a log shipper asks SGLang for: SGLANG_LOGGING_CONFIG_PATH (utils/common.py configure_logger applies the
# file with logging.config.dictConfig instead of its own format) with python-json-logger's formatter.
JSON_LOGGING = {
    "version": 1,
    "formatters": {
        "json": {
            "()": "pythonjsonlogger.json.JsonFormatter",
            "format": "%(asctime)s %(levelname)s %(name)s %(message)s",
        }
    },
    "handlers": {"stdout": {"class": "logging.StreamHandler", "formatter": "json"}},
    "root": {"level": "INFO", "handlers": ["stdout"]},
}


def test_a_json_log_reads_as_the_plain_one(tmp_path: Path) -> None:
    plan = steps(4, [6, 8, 7, 9], 0.05) + steps(4, [10, 12, 11, 9], 0.04)
    base = {"decode_log_interval": 4, "ranks": [rank({}, plan)]}
    plain = parse_window("sglang", journal(run_oracle(CURRENT, base, tmp_path)))
    text = journal(run_oracle(CURRENT, {**base, "logging_config": JSON_LOGGING}, tmp_path))
    records = [json.loads(line) for line in text.splitlines()]
    assert [r["message"].startswith("Decode batch") for r in records] == [True, True]
    read = parse_window("sglang", text)
    assert plain.accept_len is not None and plain.gen_throughput is not None
    assert (read.lines_matched, read.lines_skipped) == (plain.lines_matched, plain.lines_skipped) == (2, 0)
    assert (read.accept_len, read.acceptance_rate, read.gen_throughput) == (
        plain.accept_len,
        plain.acceptance_rate,
        plain.gen_throughput,
    )
    assert [s.to_dict() | {"timestamp": None} for s in read.samples] == [
        s.to_dict() | {"timestamp": None} for s in plain.samples
    ]


# ------------------------------------------------------------------------------------------- DP groups


def test_dp_attention_groups_all_count(tmp_path: Path) -> None:
    # tp 4, dp 2 with DP attention: attn_tp_size 2, so TP0 (DP0) and TP2 (DP1) log and export; TP1 and TP3 not.
    dp = {"tp_size": 4, "dp_size": 2, "enable_dp_attention": True}
    plan0 = steps(4, [8] * 4, 0.05)  # 48 tokens / 0.2 s per line = 240 tok/s, accept len 3.00
    plan1 = steps(2, [5] * 4, 0.04)  # 28 tokens / 0.16 s = 175 tok/s, accept len 3.50
    ranks = [rank({**dp, "tp_rank": tp}, plan0 if tp < 2 else plan1) for tp in range(4)]
    result = run_oracle(CURRENT, {"decode_log_interval": 4, "ranks": ranks}, tmp_path)
    assert [r["logs"] for r in result["ranks"]] == [True, False, True, False]
    assert [r["labels"].get("dp_rank") for r in result["ranks"]] == ["0", "0", "1", "1"]
    text = journal(result)
    assert "DP0 TP0] Decode batch" in text and "DP1 TP2] Decode batch" in text
    wm = parse_window("sglang", text)
    assert wm.gen_throughput == pytest.approx(240.0 + 175.0)
    # Weighted by verify steps (#running-req per line): (4 * 3.0 + 2 * 3.5) / 6.
    assert wm.accept_len == pytest.approx((4 * 3.0 + 2 * 3.5) / 6)
    assert wm.details["dp_groups"] == ["DP0", "DP1"]
    prom = scrape_delta("", result["metrics"], "sglang")
    assert prom.gen_throughput == pytest.approx(240.0 + 175.0)  # every group, not only tp_rank 0
    # Gauges weighted by each group's verify rate (throughput / accept length).
    assert prom.accept_len == pytest.approx((240 + 175) / (240 / 3.0 + 175 / 3.5))
    assert prom.details["gauge_groups"] == 2


def test_attn_cp_copies_are_one_group(tmp_path: Path) -> None:
    # tp 8, dp 2 with DP attention, attn_cp 2: attn_tp_size 2; TP0/TP2 are DP0's CP ranks, TP4/TP6 DP1's.
    # In 0.5.22 every attn_tp_rank 0 logs and exports, so each DP group's figures appear twice. The CP ranks
    # time their intervals with their own clocks: the copies' throughputs differ in the last digits.
    base = {"tp_size": 8, "dp_size": 2, "enable_dp_attention": True, "attn_cp_size": 2, "moe_dp_size": 2}
    plan0 = steps(4, [8] * 4, 0.05)
    plan1 = steps(2, [5] * 4, 0.04)
    ranks = [
        rank({**base, "tp_rank": 0}, plan0),
        rank({**base, "tp_rank": 2}, [{**s, "dt": s["dt"] + 0.0001} for s in plan0]),
        rank({**base, "tp_rank": 4}, plan1),
        rank({**base, "tp_rank": 6}, [{**s, "dt": s["dt"] + 0.0001} for s in plan1]),
    ]
    result = run_oracle(CP_COPIES, {"decode_log_interval": 4, "ranks": ranks}, tmp_path)
    assert all(r["logs"] for r in result["ranks"])
    text = journal(result)
    assert "DP0 ATTN_CP1 MOE_DP0 TP2] Decode batch" in text
    wm = parse_window("sglang", text)
    assert (wm.lines_matched, wm.lines_duplicate) == (2, 2)
    assert wm.gen_throughput == pytest.approx(240.0 + 175.0, rel=1e-3)  # not 830: the CP copies count once
    prom = scrape_delta("", result["metrics"], "sglang")
    assert prom.gen_throughput == pytest.approx(240.0 + 175.0, rel=1e-3)
    assert prom.details["gauge_groups"] == 2
    # 0.5.23 no longer lets ATTN_CP ranks > 0 log or export.
    current = run_oracle(CURRENT, {"decode_log_interval": 4, "ranks": ranks}, tmp_path)
    assert [r["logs"] for r in current["ranks"]] == [True, False, True, False]
    assert parse_window("sglang", journal(current)).gen_throughput == pytest.approx(240.0 + 175.0, rel=1e-3)


def test_attn_cp_without_dp_attention_and_pp_stages_are_copies(tmp_path: Path) -> None:
    # tp 4 with attn_cp 2 (no DP): TP0 and TP2 (ATTN_CP0 MOE_DP0 / ATTN_CP1 MOE_DP1) print one group's line;
    # pp 2 (tp 1): both stages settle every micro-batch (scheduler_pp_mixin.py) and print the same figures
    # with tags PP0 / PP1 and no TP tag.
    plan = steps(4, [8] * 4, 0.05)
    cp = {"tp_size": 4, "attn_cp_size": 2, "moe_dp_size": 2}
    cp_result = run_oracle(
        CP_COPIES, {"decode_log_interval": 4, "ranks": [rank({**cp, "tp_rank": t}, plan) for t in (0, 2)]}, tmp_path
    )
    assert "ATTN_CP1 MOE_DP1 TP2] Decode batch" in journal(cp_result)
    pp = [rank({"pp_size": 2, "pp_rank": p}, plan) for p in (0, 1)]
    pp_result = run_oracle(CURRENT, {"decode_log_interval": 4, "ranks": pp}, tmp_path)
    assert " PP1] Decode batch" in journal(pp_result)
    for result in (cp_result, pp_result):
        wm = parse_window("sglang", journal(result))
        assert (wm.lines_matched, wm.lines_duplicate) == (1, 1)
        assert wm.gen_throughput == pytest.approx(240.0)
        assert wm.accept_len == pytest.approx(3.0)
        prom = scrape_delta("", result["metrics"], "sglang")
        assert prom.gen_throughput == pytest.approx(240.0)
        assert prom.details["gauge_groups"] == 1


def test_all_schedulers_exporting_are_copies_of_their_group(tmp_path: Path) -> None:
    # --enable-metrics-for-all-schedulers: every TP rank exports its group's gauges (tp 2, no DP: one group).
    plan = steps(4, [8] * 4, 0.05)
    ranks = [rank({"tp_size": 2, "tp_rank": t}, plan) for t in (0, 1)]
    result = run_oracle(
        CURRENT, {"decode_log_interval": 4, "ranks": ranks, "enable_metrics_for_all_schedulers": True}, tmp_path
    )
    assert [(r["logs"], r["exports"]) for r in result["ranks"]] == [(True, True), (False, True)]
    assert len(series(result["metrics"], "sglang:gen_throughput")) == 2
    prom = scrape_delta("", result["metrics"], "sglang")
    assert prom.gen_throughput == pytest.approx(240.0)


# ------------------------------------------------------------------------------------------ window edge


def test_idle_gap_before_the_first_line_is_in_its_throughput(tmp_path: Path) -> None:
    # last_decode_stats_tic is reset only when a Decode line is printed: after 5 s idle, the first line's
    # gen throughput spans the gap (48 tokens / 5.2 s), the next one is the steady 240 tok/s.
    plan = steps(4, [8] * 8, 0.05)
    result = run_oracle(CURRENT, {"decode_log_interval": 4, "ranks": [rank({}, plan, idle_before=5.0)]}, tmp_path)
    first, second = parse_sglang(journal(result)).samples
    assert first.gen_throughput == pytest.approx(48 / 5.2, abs=PRINTED)  # type: ignore[attr-defined]
    assert second.gen_throughput == pytest.approx(240.0)  # type: ignore[attr-defined]
    cut = parse_window("sglang", journal(result), cut=True)  # the runner's windows drop each group's first line
    assert cut.gen_throughput == pytest.approx(240.0)
    assert cut.details["edge_lines_dropped"] == 1


# ------------------------------------------------------------------------------- accept rate definitions


def test_accept_rate_before_0_5_11_counts_the_bonus(tmp_path: Path) -> None:
    plan = steps(4, [8] * 4, 0.05)  # 32 drafts accepted of 48 proposed, 48 tokens in 16 verify steps
    old = run_oracle(BONUS_RATE, {"decode_log_interval": 4, "ranks": [rank({}, plan)]}, tmp_path)
    new = run_oracle(CURRENT, {"decode_log_interval": 4, "ranks": [rank({}, plan)]}, tmp_path)
    (old_line,) = parse_sglang(journal(old)).samples
    (new_line,) = parse_sglang(journal(new)).samples
    assert old_line.accept_len == new_line.accept_len == pytest.approx(3.0)  # type: ignore[attr-defined]
    # 0.5.10: (accepted drafts + bonus) / (verify steps * num_draft_tokens) = accept len / K.
    assert old_line.accept_rate == pytest.approx(48 / (16 * K), abs=PRINTED)  # type: ignore[attr-defined]
    # 0.5.11+: accepted drafts / (verify steps * (K - 1)).
    assert new_line.accept_rate == pytest.approx(32 / (16 * (K - 1)), abs=PRINTED)  # type: ignore[attr-defined]
    old_figures = aggregate_sglang([old_line], version=BONUS_RATE)  # type: ignore[list-item]
    assert old_figures["acceptance_rate"] is None
    assert old_figures["details"]["acceptance_rate_incl_bonus"] == pytest.approx(0.75)
    new_figures = aggregate_sglang([new_line], version=CURRENT)  # type: ignore[list-item]
    assert new_figures["acceptance_rate"] == pytest.approx(2 / 3, abs=PRINTED)
