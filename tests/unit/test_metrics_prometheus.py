"""Prometheus exposition: counters by difference, gauges sampled, derived figures per engine."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.errors import MetricsError
from orchestrator.metrics import parse_exposition, scrape_delta

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
    before, after = _read("prometheus_llamacpp_before.txt"), _read("prometheus_llamacpp_after.txt")
    prom = scrape_delta(before, after, "llamacpp", elapsed_s=2.0)
    # d(accepted) 96, d(drafts) 50, d(draft tokens) 162, d(predicted) 192 -> the same requests as
    # tests/data/logs/llamacpp_server.log, whose log-side figures are 1 + 96/50 and 96/162.
    assert prom.accept_len == pytest.approx(1 + 96 / 50)
    assert prom.acceptance_rate == pytest.approx(96 / 162)
    assert prom.per_position == pytest.approx([45 / 50, 28 / 50, 15 / 50, 8 / 50])
    assert prom.gen_throughput == pytest.approx(96.0)
    assert prom.details["generated"] == 192


def test_sglang_gauges_sampled_during_and_after() -> None:
    during = [_read("prometheus_sglang_during_1.txt"), _read("prometheus_sglang_during_2.txt")]
    before, after = _read("prometheus_sglang_before.txt"), _read("prometheus_sglang_after.txt")
    prom = scrape_delta(before, after, "sglang", during=during)
    # Mean of the TP0 samples 3.0, 3.4, 3.2 (the before value 2.0 and the tp_rank=1 series stay out).
    assert prom.accept_len == pytest.approx(3.2)
    assert prom.acceptance_rate == pytest.approx((0.4 + 0.5 + 0.45) / 3)
    assert prom.gen_throughput == pytest.approx(110.0)
    timed = scrape_delta(before, after, "sim", during=during, elapsed_s=10.0)
    assert timed.gen_throughput == pytest.approx(1100 / 10.0)  # the counter wins when the window length is known
    only_two = scrape_delta(before, after, "sglang")
    assert only_two.accept_len == pytest.approx(3.2)


def test_counter_reset_counts_the_after_value() -> None:
    before = "vllm:spec_decode_num_drafts_total 500\nvllm:spec_decode_num_accepted_tokens_total 900\n"
    after = "vllm:spec_decode_num_drafts_total 10\nvllm:spec_decode_num_accepted_tokens_total 25\n"
    prom = scrape_delta(before, after, "vllm")
    assert set(prom.resets) == {"vllm:spec_decode_num_drafts_total", "vllm:spec_decode_num_accepted_tokens_total"}
    assert prom.accept_len == pytest.approx(1 + 25 / 10)


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


def test_simulator_counters_give_exact_figures() -> None:
    label = '{model_name="sim"}'
    before = (
        f"sglang:spec_verify_steps_total{label} 100.0\nsglang:spec_draft_tokens_total{label} 700.0\n"
        f"sglang:spec_accepted_tokens_total{label} 150.0\nsglang:spec_accept_length{label} 2.5\n"
    )
    after = (
        f"sglang:spec_verify_steps_total{label} 300.0\nsglang:spec_draft_tokens_total{label} 2100.0\n"
        f"sglang:spec_accepted_tokens_total{label} 450.0\nsglang:spec_accept_length{label} 9.0\n"
    )
    prom = scrape_delta(before, after, "sim")
    assert prom.accept_len == pytest.approx(1 + 300 / 200)  # counters win over the gauge
    assert prom.acceptance_rate == pytest.approx(300 / 1400)


def test_idle_zero_gauges_are_not_values() -> None:
    label = '{tp_rank="0"}'
    during = [f"sglang:spec_accept_length{label} 3.0\nsglang:gen_throughput{label} 90.0\n"]
    after = f"sglang:spec_accept_length{label} 0.0\nsglang:gen_throughput{label} 0.0\n"
    prom = scrape_delta("", after, "sglang", during=during)
    assert (prom.accept_len, prom.gen_throughput) == (3.0, 90.0)
    idle = scrape_delta("", after, "sglang")
    assert (idle.accept_len, idle.gen_throughput) == (None, None)


def test_the_simulators_exposition_and_its_bad_lines() -> None:
    from orchestrator.sim.stats import ServerStats, render_prometheus

    stats = ServerStats(model="sim", speculative=True)
    before = render_prometheus(stats)
    stats.verify_steps, stats.accepted_tokens, stats.draft_tokens, stats.generation_tokens = 40, 60, 280, 100
    stats.last_accept_length = 2.5
    after = render_prometheus(stats, bad_line=True)
    prom = scrape_delta(before, after, "sim", elapsed_s=4.0)
    assert prom.lines_skipped == 2
    assert prom.accept_len == pytest.approx(1 + 60 / 40)
    assert prom.acceptance_rate == pytest.approx(60 / 280)
    assert prom.gen_throughput == pytest.approx(25.0)
    autoregressive = ServerStats(model="sim", speculative=False)
    idle = scrape_delta(render_prometheus(autoregressive), render_prometheus(autoregressive), "sim")
    assert (idle.accept_len, idle.acceptance_rate) == (None, None)
