"""bench/peers.py's pure parts: the sweep file cut to a reduced grid, the counters' window arithmetic (the referee),
and bench_serving's output line read into the common figures."""

from __future__ import annotations

from datetime import datetime

import pytest

from bench.peers import agrees, bench_serving_figures, by_name, counter_deltas, phases, referee, trim_experiment

DOC = {
    "variants": {
        "autoregressive": {"spec_args": ""},
        "ngram": {"spec_args": "--k {k}", "matrix": {"k": [2, 4]}},
    },
    "baselines": ["autoregressive"],
    "load": {"concurrency": [1, 2, 4], "requests": 4},
}

BEFORE = """# HELP sglang:generation_tokens_total Number of generation tokens processed.
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{is_streaming="1",model_name="m"} 100.0
sglang:generation_tokens_total{is_streaming="0",model_name="m"} 20.0
# TYPE sglang:num_requests_total counter
sglang:num_requests_total{model_name="m"} 3.0
# TYPE sglang:spec_verify_calls_total counter
sglang:spec_verify_calls_total{model_name="m"} 50.0
# TYPE sglang:time_to_first_token_seconds histogram
sglang:time_to_first_token_seconds_sum{model_name="m"} 1.5
sglang:time_to_first_token_seconds_count{model_name="m"} 3.0
# TYPE sglang:request_time_per_output_token_seconds histogram
sglang:request_time_per_output_token_seconds_sum{model_name="m"} 0.3
sglang:request_time_per_output_token_seconds_count{model_name="m"} 3.0
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="m"} 0.0
"""

AFTER = """# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{is_streaming="1",model_name="m"} 260.0
sglang:generation_tokens_total{is_streaming="0",model_name="m"} 20.0
# TYPE sglang:num_requests_total counter
sglang:num_requests_total{model_name="m"} 7.0
# TYPE sglang:spec_verify_calls_total counter
sglang:spec_verify_calls_total{model_name="m"} 178.0
# TYPE sglang:time_to_first_token_seconds histogram
sglang:time_to_first_token_seconds_sum{model_name="m"} 3.5
sglang:time_to_first_token_seconds_count{model_name="m"} 7.0
# TYPE sglang:request_time_per_output_token_seconds histogram
sglang:request_time_per_output_token_seconds_sum{model_name="m"} 0.7
sglang:request_time_per_output_token_seconds_count{model_name="m"} 7.0
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="m"} 4.0
"""


def test_a_variant_is_picked_by_name_alias_or_one_matrix_value() -> None:
    doc = trim_experiment(DOC, [1, 4], ["ar", "ngram4"])
    assert doc["load"]["concurrency"] == [1, 4]
    assert doc["variants"]["autoregressive"] == {"spec_args": ""}
    assert doc["variants"]["ngram"]["matrix"] == {"k": [4]}
    assert doc["baselines"] == ["autoregressive"]
    assert DOC["variants"]["ngram"]["matrix"] == {"k": [2, 4]}  # the file's document is left as it was
    only_ngram = trim_experiment(DOC, None, ["ngram2", "ngram4"])
    assert only_ngram["baselines"] == [] and only_ngram["variants"]["ngram"]["matrix"] == {"k": [2, 4]}
    assert only_ngram["load"]["concurrency"] == [1, 2, 4]


@pytest.mark.parametrize(
    ("token", "message"),
    [pytest.param("eagle", "no variant 'eagle'", id="unknown"), pytest.param("ngram3", "no k = 3", id="no-value")],
)
def test_an_unknown_variant_is_named(token: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        trim_experiment(DOC, None, [token])


def test_the_window_is_the_counters_increase_summed_over_series_gauges_left_out() -> None:
    deltas = counter_deltas(BEFORE, AFTER)
    assert deltas["sglang:generation_tokens_total"] == 160.0
    assert deltas["sglang:num_requests_total"] == 4.0
    assert "sglang:num_running_reqs" not in deltas
    window = referee(deltas, duration_s=8.0)
    assert window["output_tokens"] == 160.0 and window["requests"] == 4.0
    assert window["tok_s"] == 20.0
    assert window["accept_len"] == 160 / 128  # SGLang's: completion tokens / verify steps
    assert window["accept_len_excl_prefill"] == (160 - 4) / 128  # specsweep's: each prefill token left out
    assert window["ttft_ms"] == pytest.approx(500.0)
    assert window["tpot_ms"] == pytest.approx(100.0)


def test_a_window_without_verify_steps_has_no_accept_length_and_a_record_sums_per_name() -> None:
    deltas = by_name({'sglang:generation_tokens_total{a="1"}': 30.0, 'sglang:generation_tokens_total{a="2"}': 12.0})
    window = referee(deltas, duration_s=None)
    assert window["output_tokens"] == 42.0
    assert window["accept_len"] is None and window["tok_s"] is None and window["ttft_ms"] is None


def test_bench_serving_line_gives_the_common_figures() -> None:
    line = {
        "completed": 4, "total_output_tokens": 192, "output_throughput": 12.5, "accept_length": 1.25,
        "mean_ttft_ms": 300.0, "mean_tpot_ms": 80.0, "duration": 15.36, "median_ttft_ms": 1.0,
    }  # fmt: skip
    assert bench_serving_figures(line) == {
        "requests": 4, "output_tokens": 192, "tok_s": 12.5, "accept_len": 1.25,
        "ttft_ms": 300.0, "tpot_ms": 80.0, "duration_s": 15.36,
    }  # fmt: skip


def test_agreement_is_exact_for_counts_and_within_5e_4_for_accept_length() -> None:
    assert agrees("output_tokens", 168, 168.0) is True
    assert agrees("output_tokens", 192, 168.0) is False
    assert agrees("accept_len", 1.2424, 1.24242) is True
    assert agrees("accept_len", 1.25, 1.2424) is False
    assert agrees("tok_s", 10.04, 10.0) is True and agrees("tok_s", 11.4, 10.0) is False
    assert agrees("ttft_ms", 300.0, 290.0) is None and agrees("output_tokens", None, 3.0) is None


def test_a_runs_phases_come_from_its_events_each_ending_at_the_next() -> None:
    events = [
        {"time": "2026-12-07T20:05:01.000Z", "kind": "start"},
        {"time": "2026-12-07T20:05:02.000Z", "kind": "deploy"},
        {"time": "2026-12-07T20:06:52.000Z", "kind": "healthy"},
        {"time": "2026-12-07T20:07:10.000Z", "kind": "warmup"},
        {"time": "2026-12-07T20:10:05.000Z", "kind": "lossless_probe"},
        {"time": "2026-12-07T20:15:30.000Z", "kind": "deploy"},
        {"time": "2026-12-07T20:17:00.000Z", "kind": "healthy"},
    ]
    t0 = datetime.fromisoformat("2026-12-07T20:05:00+00:00").timestamp()
    assert phases(events, t0) == {
        "server start": 110.0 + 90.0,
        "warm-up": 18.0,
        "lossless probe": 175.0,
        "before first event": 1.0,
    }


def test_the_probes_phase_leaves_out_the_points_measured_before_it() -> None:
    """The probe runs after a deployment's points (issue 59): its event's span holds their windows, which are
    counted as measured, not as probe; what follows the last window and no phase holds is after the last point."""
    events = [
        {"time": "2026-12-07T20:05:01.000Z", "kind": "start"},
        {"time": "2026-12-07T20:05:02.000Z", "kind": "deploy"},
        {"time": "2026-12-07T20:05:32.000Z", "kind": "healthy"},
        {"time": "2026-12-07T20:05:42.000Z", "kind": "warmup"},
        {"time": "2026-12-07T20:06:42.000Z", "kind": "lossless_probe"},
        {"time": "2026-12-07T20:06:50.000Z", "kind": "restore"},
    ]
    t0 = datetime.fromisoformat("2026-12-07T20:05:00+00:00").timestamp()
    windows = [(t0 + 45.0, t0 + 65.0), (t0 + 70.0, t0 + 90.0)]  # 40 s of points inside the probe's 60 s span
    got = phases(events, t0, windows)
    assert got == {
        "server start": 30.0,
        "warm-up": 10.0,
        "lossless probe": 20.0,
        "before first event": 1.0,
        "after the last point": 8.0,
    }
    # With the windows and the second from start to deploy (no phase), the run's 110 s from t0 to its last event.
    assert sum(got.values()) + 40.0 + 1.0 == 110.0
