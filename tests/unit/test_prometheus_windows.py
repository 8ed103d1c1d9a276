"""Whole ``/metrics`` windows (orchestrator/metrics/prometheus.py) and how exact each figure is.

A window whose counters went down, or that spans two processes, gives no figure (or, after a restart every
counter shows, the figures of the new process's counts since its start); every figure says whether it is exact,
rounded or a last-interval gauge. The texts are written in each engine's exposition format (prometheus_client's
``floatToGoString`` for vLLM and SGLang, llama.cpp's ``std::ostream`` doubles, ``%g``); the contract tests make the
same cases with the engines' own code (tests/contract/test_prometheus_windows_contract.py).
"""

from __future__ import annotations

import pytest

from orchestrator.engines.llamacpp.prometheus import printed_step
from orchestrator.metrics import scrape_delta
from orchestrator.metrics.prometheus import process_start

E0 = '{engine="0",model_name="m"}'
START = (
    "# HELP process_start_time_seconds Start time of the process since unix epoch in seconds.\n"
    "# TYPE process_start_time_seconds gauge\n"
    "process_start_time_seconds {t}\n"
)


def vllm(drafts: int, draft_tokens: int, accepted: int, generated: int, *, started: str | None = None) -> str:
    """vLLM's counters as PrometheusStatLogger / SpecDecodingProm expose them (one engine)."""
    text = (
        "# TYPE vllm:spec_decode_num_drafts_total counter\n"
        f"vllm:spec_decode_num_drafts_total{E0} {float(drafts)}\n"
        "# TYPE vllm:spec_decode_num_draft_tokens_total counter\n"
        f"vllm:spec_decode_num_draft_tokens_total{E0} {float(draft_tokens)}\n"
        "# TYPE vllm:spec_decode_num_accepted_tokens_total counter\n"
        f"vllm:spec_decode_num_accepted_tokens_total{E0} {float(accepted)}\n"
        "# TYPE vllm:generation_tokens_total counter\n"
        f"vllm:generation_tokens_total{E0} {float(generated)}\n"
    )
    return text + (START.format(t=started) if started is not None else "")


def no_figure(prom: object) -> bool:
    return all(
        getattr(prom, name) is None for name in ("accept_len", "acceptance_rate", "gen_throughput", "per_position")
    )


def test_a_whole_window_of_one_process_gives_exact_figures() -> None:
    before = vllm(100, 300, 150, 400, started="1.7171717e+09")
    after = vllm(300, 900, 550, 1200, started="1.7171717e+09")
    prom = scrape_delta(before, after, "vllm", elapsed_s=8.0)
    assert prom.integrity.whole and prom.integrity.part is None
    assert prom.accept_len == pytest.approx(1 + 400 / 200)
    assert prom.gen_throughput == pytest.approx(800 / 8.0)
    assert {k: v["kind"] for k, v in prom.exactness.items()} == {
        "accept_len": "exact",
        "acceptance_rate": "exact",
        "gen_throughput": "exact",
    }


def test_only_some_counters_down_is_the_issues_vllm_case_and_gives_nothing() -> None:
    # The server restarted between the scrapes: drafts went down (500 -> 100), the accepted and drafted tokens
    # restarted above their old values. The differences said accept length 9.0 and acceptance rate 2.0.
    before = vllm(500, 1000, 200, 2000)
    after = vllm(100, 1400, 1000, 2600)
    prom = scrape_delta(before, after, "vllm", elapsed_s=10.0)
    assert no_figure(prom)
    assert prom.integrity.names() == ["counter_reset", "inconsistent"]
    assert "vllm:spec_decode_num_drafts_total" in prom.integrity.reasons[0]["detail"]
    assert prom.resets == [f"vllm:spec_decode_num_drafts_total{E0}"]
    assert prom.exactness == {}
    assert prom.to_dict()["integrity"]["whole"] is False
    assert "only 1 of the 4 counters" in (prom.integrity.describe() or "")


def test_every_counter_down_without_a_process_start_gives_nothing() -> None:
    prom = scrape_delta(vllm(500, 1500, 900, 2000), vllm(10, 30, 25, 40), "vllm", elapsed_s=5.0)
    assert no_figure(prom)
    assert prom.integrity.names() == ["counter_reset"] and prom.integrity.part is None
    assert "4 counter series went down" in prom.integrity.reasons[0]["detail"]


def test_a_restart_every_counter_shows_gives_the_new_process_counts_without_throughput() -> None:
    before = vllm(500, 1500, 900, 2000, started="1717171717.25")
    after = vllm(10, 30, 25, 40, started="1717172000.5")
    prom = scrape_delta(before, after, "vllm", elapsed_s=5.0)
    assert prom.integrity.names() == ["restart", "counter_reset"]
    assert "1717171717.25 to 1717172000.5" in prom.integrity.reasons[0]["detail"]
    assert prom.integrity.part == "since_restart"
    assert prom.accept_len == pytest.approx(1 + 25 / 10)  # the after scrape's counts
    assert prom.acceptance_rate == pytest.approx(25 / 30)
    assert prom.gen_throughput is None  # the seconds since the restart are not known
    assert set(prom.exactness) == {"accept_len", "acceptance_rate"}
    assert all("since the restart" in e["note"] for e in prom.exactness.values())
    assert "no throughput" in prom.details["since_restart"]
    assert prom.counters[f"vllm:spec_decode_num_drafts_total{E0}"] == 10
    assert "figures from the since restart part only" in (prom.integrity.describe() or "")


@pytest.mark.parametrize(
    ("after", "down"),
    [(vllm(600, 1600, 950, 2100), 0), (vllm(10, 1600, 950, 2100), 1)],
    ids=["none-down", "some-down"],
)
def test_a_restart_with_counters_that_stayed_up_gives_nothing(after: str, down: int) -> None:
    # A counter that stayed up restarted above its old value, or a kept PROMETHEUS_MULTIPROC_DIR carried it
    # over: the after values are not known to be the new process's counts.
    before = vllm(500, 1500, 900, 2000, started="100.0")
    prom = scrape_delta(before, after + START.format(t="200.0"), "vllm", elapsed_s=5.0)
    assert no_figure(prom)
    assert "restart" in prom.integrity.names() and "inconsistent" in prom.integrity.names()
    assert ("counter_reset" in prom.integrity.names()) == bool(down)
    assert prom.integrity.part is None


def test_a_reset_hidden_between_the_scrapes_shows_in_a_scrape_during_the_window() -> None:
    # After the reset the counters rose above their values at the window's start: before and after alone look
    # whole, the scrape taken during the window does not.
    before, during, after = vllm(100, 300, 150, 400), vllm(400, 1200, 700, 1600), vllm(300, 900, 500, 1200)
    alone = scrape_delta(before, after, "vllm", elapsed_s=5.0)
    assert alone.integrity.whole  # what two scrapes cannot see
    prom = scrape_delta(before, after, "vllm", during=[during], elapsed_s=5.0)
    assert no_figure(prom) and prom.integrity.names() == ["counter_reset"]


def test_a_series_that_is_gone_went_down() -> None:
    # SGLang's multiprocess registry writes a family only once one of its series exists: a new process's
    # exposition lacks the counters it has not yet counted.
    label = '{engine_type="unified",model_name="m"}'
    before = (
        f"sglang:spec_verify_calls_total{label} 100\nsglang:generation_tokens_total{label} 400\n"
        f"sglang:num_requests_total{label} 5\n"
    )
    after = f"sglang:generation_tokens_total{label} 40\nsglang:num_requests_total{label} 1\n"
    prom = scrape_delta(before, after, "sglang", elapsed_s=2.0)
    assert no_figure(prom)
    assert f"sglang:spec_verify_calls_total{label}" in prom.resets


def test_a_running_maximum_says_nothing_of_a_reset() -> None:
    # llama.cpp's n_tokens_max is declared a counter but is a maximum: equal after a reset, it is not a counter
    # that stayed up.
    def text(drafts: int, accepted: int, longest: int) -> str:
        return (
            f"llamacpp:spec_decode_num_drafts_total {drafts}\nllamacpp:spec_decode_num_accepted_tokens_total "
            f"{accepted}\n# TYPE llamacpp:n_tokens_max counter\nllamacpp:n_tokens_max {longest}\n"
        )

    prom = scrape_delta(text(50, 80, 300), text(5, 8, 300), "llamacpp")
    assert prom.integrity.names() == ["counter_reset"]  # not "inconsistent"


def test_process_start_is_read_from_the_raw_text() -> None:
    assert process_start(START.format(t="1.71717171712e+09")) == pytest.approx(1717171717.12)
    assert process_start("vllm:x_total 1\n") is None


# -- exactness -----------------------------------------------------------------------------------------


SG = '{engine_type="unified",model_name="m"}'
SCHED = '{engine_type="unified",model_name="m",moe_ep_rank="0",pp_rank="0",tp_rank="0"}'


def sglang_gauges(length: float, rate: float, throughput: float) -> str:
    return (
        "# HELP sglang:spec_accept_length Mean acceptance length of speculative decoding.\n"
        "# TYPE sglang:spec_accept_length gauge\n"
        f"sglang:spec_accept_length{SCHED} {length}\n"
        "# HELP sglang:spec_accept_rate Speculative acceptance rate (`accepted drafts / proposed drafts` in batch).\n"
        "# TYPE sglang:spec_accept_rate gauge\n"
        f"sglang:spec_accept_rate{SCHED} {rate}\n"
        f"# TYPE sglang:gen_throughput gauge\nsglang:gen_throughput{SCHED} {throughput}\n"
    )


def test_sglang_counters_are_exact_and_its_gauges_are_last_interval_gauges() -> None:
    after = (
        f"sglang:spec_verify_calls_total{SG} 200\nsglang:generation_tokens_total{SG} 600\n"
        f"sglang:num_requests_total{SG} 20\n" + sglang_gauges(2.9, 0.6, 80.0)
    )
    prom = scrape_delta("", after, "sglang", elapsed_s=4.0)
    kinds = {k: v["kind"] for k, v in prom.exactness.items()}
    assert kinds == {"accept_len": "exact", "acceptance_rate": "gauge", "gen_throughput": "exact"}
    note = prom.exactness["acceptance_rate"]["note"]
    assert "last decode-log interval" in note and "not a figure of the whole window" in note
    gauges_only = scrape_delta("", after, "sglang")  # no seconds: the throughput is the gauge's
    assert gauges_only.gen_throughput == pytest.approx(80.0)
    assert gauges_only.exactness["gen_throughput"]["kind"] == "gauge"


def test_sglang_before_the_verify_counter_has_a_gauge_accept_length() -> None:
    # SGLang < 0.5.13 exports no sglang:spec_verify_calls_total.
    after = 'sglang:generation_tokens_total{model_name="m"} 500\n' + sglang_gauges(2.5, 0.5, 80.0)
    prom = scrape_delta("", after, "sglang")
    assert prom.accept_len == pytest.approx(2.5)
    assert prom.exactness["accept_len"]["kind"] == "gauge"
    assert "< 0.5.13" in prom.exactness["accept_len"]["note"]


def test_sglang_since_a_restart_keeps_the_counters_figure_and_drops_the_gauges() -> None:
    before = (
        f"sglang:spec_verify_calls_total{SG} 900\nsglang:generation_tokens_total{SG} 3000\n"
        f"sglang:num_requests_total{SG} 90\n" + START.format(t="100.0")
    )
    after = (
        f"sglang:spec_verify_calls_total{SG} 40\nsglang:generation_tokens_total{SG} 130\n"
        f"sglang:num_requests_total{SG} 4\n" + sglang_gauges(3.1, 0.6, 90.0) + START.format(t="200.0")
    )
    prom = scrape_delta(before, after, "sglang", elapsed_s=3.0)
    assert prom.integrity.part == "since_restart"
    assert prom.accept_len == pytest.approx((130 - 4) / 40)
    assert prom.acceptance_rate is None and prom.gen_throughput is None  # gauges span both processes
    assert set(prom.exactness) == {"accept_len"}
    assert not any(k.startswith("gauge_") for k in prom.details)


def test_vllm_per_position_is_exact() -> None:
    pos = "".join(
        f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",model_name="m",position="{i}"}} {n}\n'
        for i, n in enumerate((80, 50))
    )
    prom = scrape_delta("", vllm(100, 200, 130, 230) + pos, "vllm")
    assert prom.per_position == pytest.approx([0.8, 0.5])
    assert prom.exactness["per_position_acceptance"]["kind"] == "exact"


def test_llamacpp_rounding_step_of_six_significant_digits() -> None:
    assert [printed_step(v) for v in (0, 999_999, 1_000_000, 1_234_567, 12_345_678, 9.99999e8)] == [
        0,
        0,
        10,
        10,
        100,
        1000,
    ]


def llamacpp(drafts: int, draft_tokens: int, accepted: int, predicted: int) -> str:
    """llama.cpp's to_metrics: each counter a double streamed with 6 significant digits (%g)."""
    rows = [
        ("tokens_predicted_total", predicted),
        ("spec_decode_num_draft_tokens_total", draft_tokens),
        ("spec_decode_num_accepted_tokens_total", accepted),
        ("spec_decode_num_drafts_total", drafts),
    ]
    return "".join(f"# TYPE llamacpp:{n} counter\nllamacpp:{n} {float(v):g}\n" for n, v in rows)


def test_llamacpp_counters_of_a_million_or_more_are_rounded_with_bounds() -> None:
    early = (1_234_567, 4_938_268, 2_469_134, 7_000_001)
    late = (1_334_571, 5_338_284, 2_769_140, 7_512_345)
    before, after = llamacpp(*early), llamacpp(*late)
    assert "llamacpp:spec_decode_num_drafts_total 1.23457e+06" in before
    prom = scrape_delta(before, after, "llamacpp", elapsed_s=10.0)
    d = [b - a for a, b in zip(early, late, strict=True)]
    truth = {
        "accept_len": 1 + d[2] / d[0],
        "acceptance_rate": d[2] / d[1],
        "gen_throughput": d[3] / 10.0,
    }
    for figure, true in truth.items():
        entry = prom.exactness[figure]
        shown = getattr(prom, figure)
        assert entry["kind"] == "rounded", figure
        assert entry["resolution"] == 10
        low, high = entry["bounds"]
        assert low <= true <= high and low <= shown <= high, figure
        assert "6 significant digits" in entry["note"]
    assert prom.accept_len != pytest.approx(truth["accept_len"], rel=1e-6)  # the rounding shows
    small = scrape_delta(llamacpp(10, 40, 20, 100), llamacpp(30, 120, 70, 400), "llamacpp", elapsed_s=2.0)
    assert {v["kind"] for v in small.exactness.values()} == {"exact"}
    assert small.accept_len == pytest.approx(1 + 50 / 20)


# -- windows without a verify step -------------------------------------------------------------------------


def test_a_vllm_window_without_drafts_says_why_it_has_no_accept_length() -> None:
    # A window in which the counters did not move: no verify step, so no accept length, no rate, no positions;
    # vLLM exports no gauge for them, so nothing stands in; the throughput is 0 over the known seconds.
    same = vllm(40, 160, 90, 300)
    prom = scrape_delta(same, same, "vllm", elapsed_s=3.0)
    assert (prom.accept_len, prom.acceptance_rate, prom.per_position) == (None, None, None)
    assert prom.gen_throughput == 0.0
    why = prom.details["no_figure"]
    assert why["accept_len"].startswith("no verify steps in the window: d(vllm:spec_decode_num_drafts_total) = 0")
    assert why["acceptance_rate"].startswith("no draft tokens in the window")
    assert set(prom.exactness) == {"gen_throughput"}


def test_a_llamacpp_window_without_drafts_says_why_it_has_no_accept_length() -> None:
    text = "llamacpp:spec_decode_num_drafts_total 50\nllamacpp:spec_decode_num_accepted_tokens_total 80\n"
    prom = scrape_delta(text, text, "llamacpp")
    assert prom.accept_len is None
    assert prom.details["no_figure"]["accept_len"].startswith("no verify steps in the window")


def test_an_sglang_window_without_verify_steps_does_not_read_the_gauges() -> None:
    # The issue's case: no request finished, the gauges hold the interval before the window (2.99, 0.66).
    text = (
        f"sglang:spec_verify_calls_total{SG} 200\nsglang:generation_tokens_total{SG} 600\n"
        f"sglang:num_requests_total{SG} 20\n" + sglang_gauges(2.99, 0.66, 80.0)
    )
    prom = scrape_delta(text, text, "sglang")
    assert (prom.accept_len, prom.acceptance_rate) == (None, None)
    assert prom.gen_throughput == 0.0 and prom.exactness["gen_throughput"]["kind"] == "exact"
    assert prom.details["no_figure"]["accept_len"].startswith("no verify steps in the window")
    assert "counter" not in prom.exactness.get("accept_len", {}).get("note", "")


def test_an_sglang_window_before_the_verify_counter_in_which_no_request_finished() -> None:
    # SGLang < 0.5.13: no verify counter; a window with no finished request does not read the stale gauges.
    text = 'sglang:generation_tokens_total{model_name="m"} 500\nsglang:num_requests_total{model_name="m"} 9\n'
    prom = scrape_delta(text + sglang_gauges(2.5, 0.5, 80.0), text + sglang_gauges(2.5, 0.5, 80.0), "sglang")
    assert prom.accept_len is None and prom.acceptance_rate is None
    assert prom.details["no_figure"]["accept_len"].startswith("no request finished in the window")
