"""Prometheus exposition: counters by difference, gauges sampled, derived figures per engine."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.errors import MetricsError
from orchestrator.metrics import parse_exposition, parse_window, scrape_delta

DATA = Path(__file__).resolve().parent.parent / "data" / "logs"


def _read(name: str) -> str:
    return (DATA / name).read_text()


def test_parse_exposition_types_labels_and_prefix() -> None:
    snap = parse_exposition(_read("prometheus_vllm_before.txt"), "vllm:")
    key = 'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="2"}'
    assert snap.values[key] == 55.0
    assert snap.labels[key]["position"] == "2"
    assert snap.kind("vllm:spec_decode_num_drafts_total") == "counter"
    assert snap.kind("vllm:num_requests_running") == "gauge"
    assert not any(k.startswith("python_gc") for k in snap.values)
    assert not any("_created" in k for k in snap.values)


def test_parse_exposition_special_values_and_bad_lines() -> None:
    text = (
        'a:x{l="has \\"quote\\", and comma"} +Inf\n'
        "a:y NaN 1712345678000\n"
        "a:z not-a-number\n"
        "garbage line here\n"
        "# TYPE a:h histogram\n"
        'a:h_bucket{le="1"} 3\n'
        "a:h_sum 2.5\n"
    )
    snap = parse_exposition(text)
    assert snap.values['a:x{l="has \\"quote\\", and comma"}'] == float("inf")
    assert snap.lines_skipped == 2
    assert snap.kind("a:h_bucket") == "counter"
    assert snap.kind("a:h_sum") == "counter"


def test_vllm_counters_by_difference() -> None:
    # Hand-checked: d(accepted) 500, d(drafts) 200, d(draft tokens) 800, d(generated) 700 in 10 s.
    prom = scrape_delta(_read("prometheus_vllm_before.txt"), _read("prometheus_vllm_after.txt"), "vllm", elapsed_s=10)
    assert prom.accept_len == pytest.approx(3.5)
    assert prom.acceptance_rate == pytest.approx(0.625)
    assert prom.per_position == pytest.approx([0.9, 0.7, 0.55, 0.35])
    assert prom.gen_throughput == pytest.approx(70.0)
    running = prom.gauges['vllm:num_requests_running{engine="0",model_name="m"}']
    assert (running["before"], running["after"], running["mean"]) == (0.0, 4.0, 4.0)
    assert prom.resets == []


def test_llamacpp_counters_by_difference() -> None:
    # A real llama-server's scrapes around one -lv 4 run (tests/data/llamacpp/, capture.py): d(accepted) 92,
    # d(drafts) 18 verify steps, d(draft tokens) 246, d(predicted) 256; the same requests' log lines give the
    # same figures (print_timings and the counters are added up from the same slot statistics).
    base = DATA.parent / "llamacpp" / "ngram-simple-n3-m16-lv4"
    before, after = (Path(f"{base}.metrics.before").read_text(), Path(f"{base}.metrics.after").read_text())
    prom = scrape_delta(before, after, "llamacpp", elapsed_s=2.0)
    assert prom.accept_len == pytest.approx(1 + 92 / 18)
    assert prom.acceptance_rate == pytest.approx(92 / 246)
    assert prom.gen_throughput == pytest.approx(256 / 2.0)
    assert prom.details["generated"] == 256
    log = parse_window("llamacpp", Path(f"{base}.log").read_text())
    assert log.accept_len == pytest.approx(prom.accept_len)
    assert log.acceptance_rate == pytest.approx(prom.acceptance_rate)
    assert log.details["per_position_acceptance"] == pytest.approx(prom.per_position)


def test_sglang_counters_first_gauges_sampled_during_and_after() -> None:
    during = [_read("prometheus_sglang_during_1.txt"), _read("prometheus_sglang_during_2.txt")]
    before, after = _read("prometheus_sglang_before.txt"), _read("prometheus_sglang_after.txt")
    prom = scrape_delta(before, after, "sglang", during=during)
    # (d(generation_tokens) 1100 - d(num_requests) 50, both is_streaming series) / d(spec_verify_calls) 400:
    # the prefill's first token of each finished request is not a verify step's.
    assert prom.accept_len == pytest.approx((1100 - 50) / 400)
    assert prom.details["accept_len_engine"] == pytest.approx(1100 / 400)  # SGLang's completion / verify calls
    assert prom.details["accept_len_source"] == "counters"
    # Gauges: mean of the tp_rank 0 samples 3.0, 3.4, 3.2 (the before value 2.0 and the copy stay out).
    assert prom.details["gauge_accept_len"] == pytest.approx(3.2)
    assert prom.acceptance_rate == pytest.approx((0.4 + 0.5 + 0.45) / 3)
    assert prom.details["acceptance_rate_definition"] == "drafts_only"
    assert prom.gen_throughput == pytest.approx(110.0)
    timed = scrape_delta(before, after, "sim", during=during, elapsed_s=10.0)
    assert timed.gen_throughput == pytest.approx(1100 / 10.0)  # the counter wins when the window length is known
    only_two = scrape_delta(before, after, "sglang")
    assert only_two.accept_len == pytest.approx((1100 - 50) / 400)
    assert only_two.details["gauge_accept_len"] == pytest.approx(3.2)


def test_a_counter_reset_gives_no_figure() -> None:
    # Every counter went down and nothing says the process restarted: the counts between the scrapes are not
    # known (tests/unit/test_prometheus_windows.py has every case of a window that is not whole).
    before = "vllm:spec_decode_num_drafts_total 500\nvllm:spec_decode_num_accepted_tokens_total 900\n"
    after = "vllm:spec_decode_num_drafts_total 10\nvllm:spec_decode_num_accepted_tokens_total 25\n"
    prom = scrape_delta(before, after, "vllm")
    assert set(prom.resets) == {"vllm:spec_decode_num_drafts_total", "vllm:spec_decode_num_accepted_tokens_total"}
    assert (prom.accept_len, prom.acceptance_rate, prom.per_position) == (None, None, None)
    assert prom.integrity.names() == ["counter_reset"]


def test_series_born_during_the_window_start_from_zero() -> None:
    after = "vllm:spec_decode_num_drafts_total 4\nvllm:spec_decode_num_accepted_tokens_total 6\n"
    prom = scrape_delta("", after, "vllm")
    assert prom.accept_len == pytest.approx(2.5)
    assert prom.gen_throughput is None  # no counter and no elapsed time


def test_no_spec_counters_means_no_figures() -> None:
    prom = scrape_delta("vllm:num_requests_running 1\n", "vllm:num_requests_running 2\n", "vllm")
    assert (prom.accept_len, prom.acceptance_rate, prom.per_position) == (None, None, None)
    data = prom.to_dict()
    assert data["source"] == "prometheus"
    assert data["gauges"]["vllm:num_requests_running"]["after"] == 2.0


def test_unknown_engine() -> None:
    with pytest.raises(MetricsError, match="unknown engine"):
        scrape_delta("", "", "tgi")


SCHED = 'engine_type="unified",model_name="m",moe_ep_rank="0",pp_rank="0"'


def _gauges(rows: list[tuple[str, float, float, float]], rate_help: str = "accepted drafts / proposed drafts") -> str:
    """Scheduler gauges in sglang's format, one (extra labels, accept length, accept rate, throughput) per series."""
    out = [
        "# HELP sglang:spec_accept_length Mean acceptance length of speculative decoding.",
        "# TYPE sglang:spec_accept_length gauge",
    ]
    out += [f"sglang:spec_accept_length{{{SCHED},{labels}}} {al}" for labels, al, _, _ in rows]
    out += [
        f"# HELP sglang:spec_accept_rate Speculative acceptance rate (`{rate_help}` in batch).",
        "# TYPE sglang:spec_accept_rate gauge",
    ]
    out += [f"sglang:spec_accept_rate{{{SCHED},{labels}}} {rate}" for labels, _, rate, _ in rows]
    out += ["# TYPE sglang:gen_throughput gauge"]
    out += [f"sglang:gen_throughput{{{SCHED},{labels}}} {thr}" for labels, _, _, thr in rows]
    return "\n".join(out) + "\n"


def test_sglang_counters_win_over_the_gauges() -> None:
    label = '{engine_type="unified",model_name="m"}'
    before = (
        f"sglang:spec_verify_calls_total{label} 100.0\nsglang:generation_tokens_total{label} 250.0\n"
        f"sglang:num_requests_total{label} 4\n"
    )
    after = (
        f"sglang:spec_verify_calls_total{label} 300.0\nsglang:generation_tokens_total{label} 850.0\n"
        f"sglang:num_requests_total{label} 24\n"
    )
    prom = scrape_delta(before, after + _gauges([('tp_rank="0"', 9.0, 0.5, 100.0)]), "sglang")
    assert prom.accept_len == pytest.approx((600 - 20) / 200)  # bonus included, the prefill tokens left out
    assert prom.details["accept_len_engine"] == pytest.approx(600 / 200)  # as meta_info spec_accept_length
    assert prom.details["gauge_accept_len"] == pytest.approx(9.0)
    assert (prom.details["verify_calls"], prom.details["finished_requests"]) == (200, 20)


def test_sglang_without_the_verify_counter_reads_the_gauges() -> None:
    # SGLang < 0.5.13 has no sglang:spec_verify_calls_total: the generation counter alone gives no accept length.
    after = 'sglang:generation_tokens_total{model_name="m"} 500\n' + _gauges([('tp_rank="0"', 2.5, 0.5, 80.0)])
    prom = scrape_delta("", after, "sglang")
    assert (prom.accept_len, prom.details["accept_len_source"]) == (2.5, "gauges")


def test_sglang_dp_groups_add_up_and_copies_count_once() -> None:
    # dp_rank 0 has two copies (tp_rank 0 and 2: ATTN_CP ranks <= 0.5.22, or all schedulers exporting).
    rows = [
        ('dp_rank="0",tp_rank="0"', 3.0, 0.6, 240.0),
        ('dp_rank="0",tp_rank="2"', 3.0, 0.6, 240.0),
        ('dp_rank="1",tp_rank="4"', 3.5, 0.8, 175.0),
    ]
    prom = scrape_delta("", _gauges(rows), "sglang")
    assert prom.gen_throughput == pytest.approx(415.0)
    assert prom.accept_len == pytest.approx(415 / (240 / 3.0 + 175 / 3.5))  # weighted by verify rate
    assert prom.acceptance_rate == pytest.approx(415 / (240 / 0.6 + 175 / 0.8))
    assert prom.details["gauge_groups"] == 2


def test_sglang_old_accept_rate_definition_is_kept_apart() -> None:
    # sglang 0.5.10: "(`accepted tokens / total draft tokens` in batch)", the bonus token counted.
    prom = scrape_delta(
        "", _gauges([('tp_rank="0"', 3.0, 0.75, 100.0)], "accepted tokens / total draft tokens"), "sglang"
    )
    assert prom.acceptance_rate is None
    assert prom.details["acceptance_rate_incl_bonus"] == pytest.approx(0.75)
    assert prom.details["acceptance_rate_definition"] == "incl_bonus"


@pytest.mark.parametrize(("version", "rate"), [(None, None), ("0.5.23", 0.5), ("0.5.10", None)])
def test_sglang_rate_without_help_text_follows_the_version(version: str | None, rate: float | None) -> None:
    text = 'sglang:spec_accept_rate{tp_rank="0"} 0.5\nsglang:gen_throughput{tp_rank="0"} 9\n'
    prom = scrape_delta("", text, "sglang", version=version)
    assert prom.acceptance_rate == rate
    assert prom.details["gauge_acceptance_rate"] == pytest.approx(0.5)


def test_sglang_single_process_exposition_counter_family() -> None:
    # Without PROMETHEUS_MULTIPROC_DIR, prometheus_client names the counter family without _total and adds
    # *_created samples.
    family = "# TYPE sglang:spec_verify_calls counter\n"
    created = "sglang:spec_verify_calls_created 1.7e9\n"
    before = f"{family}sglang:spec_verify_calls_total 10\n{created}"
    after = (
        f"{family}sglang:spec_verify_calls_total 30\n{created}"
        "# TYPE sglang:generation_tokens counter\nsglang:generation_tokens_total 70\n"
        "# TYPE sglang:num_requests counter\nsglang:num_requests_total 2\n"
    )
    prom = scrape_delta(before, after, "sglang")
    assert prom.accept_len == pytest.approx((70 - 2) / 20)


def test_idle_zero_gauges_are_not_values() -> None:
    label = '{tp_rank="0"}'
    during = [f"sglang:spec_accept_length{label} 3.0\nsglang:gen_throughput{label} 90.0\n"]
    after = f"sglang:spec_accept_length{label} 0.0\nsglang:gen_throughput{label} 0.0\n"
    prom = scrape_delta("", after, "sglang", during=during)
    assert (prom.accept_len, prom.gen_throughput) == (3.0, 90.0)
    idle = scrape_delta("", after, "sglang")
    assert (idle.accept_len, idle.gen_throughput) == (None, None)


def test_sglang_bad_lines_and_an_autoregressive_server() -> None:
    label = '{engine_type="unified",model_name="m"}'
    after = (
        f"sglang:spec_verify_calls_total{label} 40\nsglang:generation_tokens_total{label} 100\n"
        f"sglang:num_requests_total{label} 4\nnot a metric line\n"
    )
    prom = scrape_delta("", after, "sglang", elapsed_s=4.0)
    assert prom.lines_skipped == 1
    assert prom.accept_len == pytest.approx((100 - 4) / 40)
    assert prom.gen_throughput == pytest.approx(25.0)
    # Autoregressive: no verify call was counted, the spec gauges stay 0.
    ar = f"sglang:generation_tokens_total{label} 100\n" + _gauges([('tp_rank="0"', 0.0, 0.0, 50.0)])
    idle = scrape_delta("", ar, "sglang")
    assert (idle.accept_len, idle.acceptance_rate, idle.gen_throughput) == (None, None, 50.0)


def test_vllm_v0_spec_counters_are_not_read() -> None:
    # vLLM V0's PrometheusStatLogger.log (vllm/engine/metrics.py, 0.9.2) does
    # counter.inc(cumulative value) every interval: a difference of two scrapes is no window's count.
    def scrape(accepted: int, draft: int, emitted: int) -> str:
        return (
            "# TYPE vllm:spec_decode_num_accepted_tokens_total counter\n"
            f'vllm:spec_decode_num_accepted_tokens_total{{model_name="m"}} {accepted}.0\n'
            "# TYPE vllm:spec_decode_num_draft_tokens_total counter\n"
            f'vllm:spec_decode_num_draft_tokens_total{{model_name="m"}} {draft}.0\n'
            "# TYPE vllm:spec_decode_num_emitted_tokens_total counter\n"
            f'vllm:spec_decode_num_emitted_tokens_total{{model_name="m"}} {emitted}.0\n'
        )

    prom = scrape_delta(scrape(100, 300, 250), scrape(400, 900, 800), "vllm")
    assert prom.accept_len is None and prom.acceptance_rate is None
    assert "not read" in prom.details["vllm_v0_spec_counters"]
