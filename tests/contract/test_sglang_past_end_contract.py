"""SGLang's own code as the oracle for what its three channels count at a request's end, and for the acceptance rate
its counters give (issue 47, seen on a real SGLang 0.5.23 with NGRAM).

A verify step accepts up to speculative_num_draft_tokens tokens whatever max_new_tokens is left
(speculative/eagle_utils.py eagle_sample); the scheduler adds the whole run to the Decode line's sums and to the
request's spec_num_correct_drafts before Req.update_finish_state cuts the run at the cap
(scheduler_components/batch_result_processor.py process_batch_result_decode and _resolve_spec_v2_tokens;
orchestrator/engines/sglang/overshoot.py). So the oracle (tests/contract/sglang_oracle.py: SGLang's
SchedulerMetricsReporter, TokenizerMetricsCollector and _calculate_spec_decoding_metrics) is fed what the scheduler
feeds them in that case: the steps' uncapped drafts, and a request whose completion_tokens stop at the cap.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from orchestrator.engines.integrity import exactness
from orchestrator.engines.registry import get_engine
from orchestrator.engines.sglang.overshoot import correct_log
from orchestrator.engines.sglang.responses import from_meta_info
from orchestrator.load.spec import summarize_spec
from orchestrator.metrics import compare_sources, parse_window, scrape_delta
from tests.contract.test_sglang_contract import CURRENT, PRINTED, K, journal, rank, run_oracle, steps

# One request, max_new_tokens 15: the prefill's token, then four verify steps each accepting all K - 1 = 3 drafts
# and the bonus (16 tokens in the log's sums); the fourth step's run crosses the cap, so the request keeps 14 of
# the 16 and discards 2 drafts. SGLang's per-request draft count is uncapped (12), its completion_tokens capped.
CAP = 15
PLAN = steps(1, [3, 3, 3, 3], 0.1)
REQUEST = {"completion_tokens": CAP, "spec_verify_ct": 4, "correct_drafts": 12}
COMMITTED_LEN = (CAP - 1) / 4  # 3.5 tokens per verify step
COMMITTED_RATE = (CAP - 1 - 4) / (4 * (K - 1))  # 10 of 12 drafts kept
# The scheduler's draft worker (NGRAMWorker) has speculative_num_draft_tokens: SGLang exports it as the
# sglang:spec_num_draft_tokens gauge (metrics_reporter.py _active_spec_config_snapshot), the counters' denominator.
WORKER = {"draft_worker": True}


@pytest.fixture(scope="module")
def past_end(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("past-end")
    scenario = {"decode_log_interval": 4, "ranks": [rank({}, PLAN)], "requests": [REQUEST], **WORKER}
    return run_oracle(CURRENT, scenario, tmp)


def _responses(result: dict[str, Any]) -> dict[str, Any]:
    (meta,) = result["meta_info"]
    spec = from_meta_info({**meta, "completion_tokens": CAP})  # meta_info carries completion_tokens beside these
    return summarize_spec([(spec, CAP)])


def test_the_log_counts_drafts_past_the_cap_and_the_responses_say_how_many(past_end: dict[str, Any]) -> None:
    # SGLang's own line: accept len 4.00 and rate 1.00, over the 16 tokens its steps accepted.
    (line,) = past_end["ranks"][0]["lines"]
    assert "accept len: 4.00, accept rate: 1.00" in line
    window = parse_window("sglang", journal(past_end), version=CURRENT)
    assert window.accept_len == pytest.approx(4.0, abs=PRINTED)
    prom = scrape_delta("", past_end["metrics"], "sglang", elapsed_s=1.0)
    assert prom.accept_len == pytest.approx(COMMITTED_LEN)  # the counters count what the request kept
    responses = _responses(past_end)
    assert responses["accept_len"] == pytest.approx(COMMITTED_LEN)
    # SGLang's per-request rate counts the discarded drafts too (12 of 12): its own figure, kept as is.
    assert past_end["meta_info"][0]["spec_accept_rate"] == pytest.approx(1.0)

    get_engine("sglang").reconcile_log(window, responses)
    # The responses' rate is now the committed one, as the counters count it; SGLang's own kept beside it.
    assert responses["acceptance_rate"] == pytest.approx(prom.acceptance_rate)
    assert responses["acceptance_rate_engine"] == pytest.approx(1.0) and responses["drafts_past_end"] == 2
    assert window.details["past_end"]["discarded_drafts"] == 2
    assert window.details["past_end"]["accept_len_printed"] == pytest.approx(4.0)
    assert window.accept_len == pytest.approx(prom.accept_len, abs=PRINTED)
    assert prom.acceptance_rate == pytest.approx(COMMITTED_RATE)
    assert window.acceptance_rate == pytest.approx(prom.acceptance_rate, abs=PRINTED)
    assert "past the requests' ends" in window.exactness["accept_len"]["note"]
    low, high = window.exactness["accept_len"]["bounds"]
    assert low <= prom.accept_len <= high
    agreed = compare_sources({"journal": window, "prometheus": prom}, rel_tol=0.0)
    assert agreed["figures"]["accept_len"]["agree"] is True


def test_without_responses_the_log_is_bounded_by_what_it_may_have_counted_past_the_end(
    past_end: dict[str, Any],
) -> None:
    window = parse_window("sglang", journal(past_end), version=CURRENT)
    assert window.exactness["accept_len"]["kind"] == "rounded"  # one line: as printed
    get_engine("sglang").reconcile_log(window, {})
    entry = window.exactness["accept_len"]
    assert entry["kind"] == "bounded"
    assert entry["bounds"] == pytest.approx([1.0, 4.0 + 0.005])
    assert "max_new_tokens" in entry["note"] and "(speculative_num_draft_tokens - 1)" in entry["note"]
    assert window.accept_len == pytest.approx(4.0, abs=PRINTED)  # the figure itself is left as printed
    prom = scrape_delta("", past_end["metrics"], "sglang", elapsed_s=1.0)
    assert entry["bounds"][0] <= prom.accept_len <= entry["bounds"][1]


def test_the_simulators_lines_are_left_alone(past_end: dict[str, Any]) -> None:
    window = parse_window("sim", journal(past_end), version=CURRENT)
    before = (window.accept_len, dict(window.exactness))
    get_engine("sim").reconcile_log(window, {})
    assert (window.accept_len, window.exactness) == before


def test_acceptance_rate_comes_from_the_counters_not_the_last_batchs_gauge(tmp_path: Path) -> None:
    # Two intervals: nothing accepted, then everything; the gauge holds the last interval's 1.00.
    plan = steps(1, [0, 0, 0, 0], 0.1) + steps(1, [3, 3, 3, 3], 0.1)
    requests = [{"completion_tokens": 21, "spec_verify_ct": 8, "correct_drafts": 12}]
    scenario = {"decode_log_interval": 4, "ranks": [rank({}, plan)], "requests": requests, **WORKER}
    result = run_oracle(CURRENT, scenario, tmp_path)
    fixed = {"speculative_adaptive": False}  # the server's settings say its draft length does not change
    prom = scrape_delta("", result["metrics"], "sglang", elapsed_s=1.0, settings=fixed)
    assert prom.details["gauge_acceptance_rate"] == pytest.approx(1.0)
    assert prom.details["speculative_num_draft_tokens"] == K
    assert prom.acceptance_rate == pytest.approx(12 / (8 * (K - 1)))
    assert prom.details["acceptance_rate_source"] == "counters"
    assert prom.exactness["acceptance_rate"]["kind"] == "exact"
    # Not knowing whether the server adapts, the same figure leans on the gauge and says so.
    unknown = scrape_delta("", result["metrics"], "sglang", elapsed_s=1.0)
    assert unknown.acceptance_rate == pytest.approx(prom.acceptance_rate)
    assert unknown.details["acceptance_rate_source"] == "counters_and_gauge"
    assert unknown.exactness["acceptance_rate"]["kind"] == "gauge"
    # SGLang's own per-request rate on the same counts (no draft past the end here) is the same number.
    assert result["meta_info"][0]["spec_accept_rate"] == pytest.approx(prom.acceptance_rate)

    # Without the spec_num_draft_tokens gauge (no denominator) the rate is the gauge's, and labelled so.
    exposition = "\n".join(line for line in result["metrics"].splitlines() if "spec_num_draft_tokens" not in line)
    gauge_only = scrape_delta("", exposition + "\n", "sglang", elapsed_s=1.0)
    assert gauge_only.acceptance_rate == pytest.approx(1.0)
    assert gauge_only.exactness["acceptance_rate"]["kind"] == "gauge"
    assert "spec_num_draft_tokens" in gauge_only.details["no_counter_rate"]


# SGLang's start line (entrypoints/engine.py _launch_subprocesses): a dict from 0.5.12 on (0.5.22, 0.5.23:
# f"server_args={_server_args_for_logging(server_args)}"), f"{server_args=}" (a ServerArgs repr) up to 0.5.11.
DICT_START = "[2026-12-06 02:29:42] server_args={'model_path': 'm', 'tp_size': 1, 'speculative_algorithm': 'NGRAM'}"
REPR_START = "[2026-12-06 02:29:42] server_args=ServerArgs(model_path='m', tp_size=1, speculative_algorithm='NGRAM')"


def test_a_saved_log_says_its_version_is_one_whose_accept_rate_counts_drafts_only(tmp_path: Path) -> None:
    # The log, read without a server to ask: 'accept rate' stayed null although SGLang printed it.
    plan = steps(1, [1, 2, 1, 0, 3, 1, 2, 2, 1], 0.1)
    result = run_oracle(CURRENT, {"decode_log_interval": 3, "ranks": [rank({}, plan)], **WORKER}, tmp_path)
    lines = journal(result)
    assert parse_window("sglang", lines).acceptance_rate is None  # no start line: the version is unknown
    window = parse_window("sglang", DICT_START + "\n" + lines)
    assert window.details["engine_version"] == "0.5.12+"
    assert window.details["acceptance_rate_definition"] == "drafts_only"
    low, high = window.exactness["acceptance_rate"]["bounds"]
    assert window.acceptance_rate is not None and low <= window.acceptance_rate <= high
    older = parse_window("sglang", REPR_START + "\n" + lines)
    assert older.acceptance_rate is None and older.details["acceptance_rate_definition"] == "unknown"
    assert parse_window("sim", DICT_START + "\n" + lines).acceptance_rate is None


def test_bounds_less_the_drafts_past_the_end_stay_possible() -> None:
    # Seen on a real 0.5.23 at C = 1: printed accept lens 1.00 to 4.00, 4 drafts past the ends over 81 steps; the
    # bounds less them fell below 1 token per step and below a rate of 0, which no verify step can give.
    window = SimpleNamespace(
        accept_len=1.1,
        acceptance_rate=0.033,
        details={},
        exactness={
            "accept_len": exactness("bounded", "printed", bounds=(0.995, 4.005)),
            "acceptance_rate": exactness("bounded", "printed", bounds=(-0.005, 1.005)),
        },
    )
    spec = {
        "verify_steps": 81,
        "accepted_drafts": 8,
        "proposed_drafts": 243,
        "accept_len": 85 / 81,
        "responses_with_verify_steps": 3,
        "responses_with_drafts": 3,
    }
    correct_log(window, spec)
    assert window.details["past_end"]["discarded_drafts"] == 4
    assert window.exactness["accept_len"]["bounds"] == pytest.approx([1.0, 4.005 - 4 / 81])
    assert window.exactness["acceptance_rate"]["bounds"] == pytest.approx([0.0, 1.005 - 4 / 243])


def test_an_adaptive_servers_metrics_give_no_acceptance_rate_but_the_committed_drafts(tmp_path: Path) -> None:
    """Issue 58: under --speculative-adaptive the draft length changes per batch (adaptive_runtime_state.py
    activate_step_by_batch); the sglang:spec_num_draft_tokens gauge holds the last Decode line's length only, so
    dividing by it called 0.1451 exact against a true 0.6728. Here: eight steps of 1 draft each, all accepted,
    then four of K - 1 drafts, none accepted; the gauge ends at K."""
    plan = [{**s, "num_draft_tokens": 2} for s in steps(1, [1] * 8, 0.1)]
    plan += [{**s, "num_draft_tokens": K} for s in steps(1, [0] * 4, 0.1)]
    requests = [{"completion_tokens": 1 + 8 * 2 + 4, "spec_verify_ct": 12, "correct_drafts": 8}]
    scenario = {"decode_log_interval": 4, "ranks": [rank({}, plan)], "requests": requests, **WORKER}
    result = run_oracle(CURRENT, scenario, tmp_path)
    true_rate = 8 / (8 * 1 + 4 * (K - 1))
    prom = scrape_delta("", result["metrics"], "sglang", elapsed_s=1.0, settings={"speculative_adaptive": True})
    assert prom.details["speculative_num_draft_tokens"] == K  # one value at the scrape: the last batch's
    assert prom.acceptance_rate is None and "acceptance_rate" not in prom.exactness
    assert "--speculative-adaptive" in prom.details["no_figure"]["acceptance_rate"]
    assert prom.details["committed_drafts_per_verify"] == pytest.approx(8 / 12)
    assert prom.details["acceptance_rate_if_gauge_held"] != pytest.approx(true_rate)
    # The accept length needs no draft count: exact from the counters whatever the length.
    assert prom.accept_len == pytest.approx((1 + 8 * 2 + 4 - 1) / 12)
    assert prom.exactness["accept_len"]["kind"] == "exact"
    # Without the settings the figure is no longer called exact.
    unknown = scrape_delta("", result["metrics"], "sglang", elapsed_s=1.0)
    assert unknown.exactness["acceptance_rate"]["kind"] != "exact"


def test_under_the_overlap_schedule_the_reconciled_bounds_hold_the_counters_figure(tmp_path: Path) -> None:
    """Issue 58: under the overlap schedule a request that finished in one batch's result is already in the next
    batch, whose verify tick for its row enters the Decode line (process_batch_result_decode passes the whole
    batch's size and drafts to update_spec_metrics) but not the request's counts (_resolve_spec_v2_tokens skips
    a finished req). Two requests, each four steps of 2 drafts kept, one capped past its end by 1 draft, then
    one extra tick each with no draft: the line reads low, and the reconciled bounds held the truth out."""
    plan = steps(1, [2, 2, 2, 3, 0], 0.1) + steps(1, [2, 2, 2, 2, 0], 0.1)
    requests = [
        {"completion_tokens": 1 + 4 * 3 - 1, "spec_verify_ct": 4, "correct_drafts": 9},  # 1 draft past its cap
        {"completion_tokens": 1 + 4 * 3, "spec_verify_ct": 4, "correct_drafts": 8},
    ]
    scenario = {"decode_log_interval": 10, "ranks": [rank({}, plan)], "requests": requests, **WORKER}
    result = run_oracle(CURRENT, scenario, tmp_path)
    prom = scrape_delta("", result["metrics"], "sglang", elapsed_s=1.0)
    truth = (11 + 12) / 8
    assert prom.accept_len == pytest.approx(truth)
    window = parse_window("sglang", journal(result), version=CURRENT)
    assert window.accept_len == pytest.approx((9 + 8 + 10) / 10, abs=PRINTED)  # 2.70: the extra ticks in it
    specs = [
        from_meta_info({**meta, "completion_tokens": r["completion_tokens"]})
        for meta, r in zip(result["meta_info"], requests, strict=True)
    ]
    responses = summarize_spec([(s, r["completion_tokens"]) for s, r in zip(specs, requests, strict=True)])
    assert responses["accept_len"] == pytest.approx(truth)
    get_engine("sglang").reconcile_log(window, responses)
    entry = window.exactness["accept_len"]
    assert entry["kind"] == "bounded" and "overlap schedule" in entry["note"]
    low, high = entry["bounds"]
    assert low <= truth <= high
    # without the widening the bounds were the printed value less the drafts past the ends: truth above them
    assert truth > 2.70 + 0.005 - 1 / 8
    rate = window.exactness["acceptance_rate"]
    assert rate["bounds"][0] <= prom.acceptance_rate <= rate["bounds"][1]


def test_one_definition_per_figure_in_every_source_before_any_sweep(past_end: dict[str, Any]) -> None:
    """Issue 58: the responses gave SGLang's own rate (drafts past the cap counted) and /metrics the committed one,
    reconciled only inside a sweep; without sglang:num_requests_total the headline accept length came from the
    gauges although the counters give SGLang's own. Now the responses' summary alone gives the committed rate,
    SGLang's beside it, and a counter in any definition comes before a gauge."""
    responses = _responses(past_end)  # no reconcile_log: as `specsweep` reads saved responses
    assert responses["acceptance_rate"] == pytest.approx(COMMITTED_RATE)
    assert responses["acceptance_rate_engine"] == pytest.approx(1.0) and responses["drafts_past_end"] == 2
    assert "acceptance_rate_engine" in responses["definitions"]["acceptance_rate"]
    window = parse_window("sglang", journal(past_end), version=CURRENT)
    get_engine("sglang").reconcile_log(window, responses)  # a sweep: the summary is not shifted twice
    assert responses["acceptance_rate"] == pytest.approx(COMMITTED_RATE)

    exposition = "\n".join(line for line in past_end["metrics"].splitlines() if "num_requests_total" not in line)
    prom = scrape_delta("", exposition + "\n", "sglang", elapsed_s=1.0)
    assert prom.details["gauge_accept_len"] is not None  # the gauges are there, and are not the figure
    assert prom.accept_len is None and prom.details["accept_len_source"] is None
    assert prom.details["accept_len_engine"] == pytest.approx(CAP / 4)  # SGLang's own, from the counters
    assert "num_requests_total" in prom.details["no_figure"]["accept_len"]


def test_specsweep_parse_labels_the_log_as_a_sweep_without_responses_does(past_end: dict[str, Any]) -> None:
    from orchestrator.metrics.saved import parse_saved_log

    saved = parse_saved_log("sglang", journal(past_end))
    swept = parse_window("sglang", journal(past_end), version=CURRENT)
    get_engine("sglang").reconcile_log(swept, {})
    assert saved.exactness["accept_len"]["kind"] == swept.exactness["accept_len"]["kind"] == "bounded"
    assert saved.exactness["accept_len"]["bounds"] == swept.exactness["accept_len"]["bounds"]
    assert "max_new_tokens" in saved.exactness["accept_len"]["note"]
