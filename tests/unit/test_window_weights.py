"""Weights and denominators as the engine computes them (issue 27), where the log does not print them.

SGLang's Decode line prints each interval's ratios (accept len = spec_num_accept_tokens / spec_num_forward_ct,
gen throughput = tokens / seconds) but neither sum, and #running-req is the last batch's size only
(metrics_reporter.py report_decode_stats): a window's figure is then given with the bounds every weighting
allows. vLLM logs an engine's interval at DEBUG when it and the previous one were idle (loggers.py
LoggingStatLogger.log): the window's throughput counts those intervals as the 0 tokens/s they were, or says it
cannot. Each figure says how exact it is (orchestrator/engines/integrity.py).
"""

from __future__ import annotations

import itertools
import math
import random

import pytest

from orchestrator.engines.bounds import weighted_mean_bounds
from orchestrator.metrics import compare_sources, parse_window

# ------------------------------------------------------------------------------------------------ bounds


def test_weighted_mean_bounds_are_the_extreme_corners() -> None:
    rng = random.Random(27)
    for _ in range(300):
        n = rng.randint(1, 5)
        values = [rng.uniform(0, 10) for _ in range(n)]
        low = [rng.choice([0.0, rng.uniform(0, 3)]) for _ in range(n)]
        high = [w + rng.choice([0.0, rng.uniform(0, 3)]) for w in low]
        if not any(high):
            continue
        bounds = weighted_mean_bounds(values, values, low, high)
        assert bounds is not None
        means = [
            sum(v * w for v, w in zip(values, corner, strict=True)) / sum(corner)
            for corner in itertools.product(*zip(low, high, strict=True))
            if sum(corner) > 0
        ]
        assert bounds == pytest.approx((min(means), max(means)))


def test_unknown_weights_leave_the_smallest_and_largest_value() -> None:
    assert weighted_mean_bounds([1, 2, 3], [1, 2, 3], [0, 0, 0], [math.inf] * 3) == (1, 3)
    assert weighted_mean_bounds([1, 2, 3], [1.5, 2, 3], [1, 1, 0], [1, 1, math.inf]) == (1.5, 3)


# ------------------------------------------------------------------------------------------------ SGLang

K = 4  # speculative_num_draft_tokens


def _decode_lines(intervals: list[list[tuple[int, int]]], dt: float) -> tuple[str, list[dict[str, float]]]:
    """Decode lines as metrics_reporter.py report_decode_stats prints them for ``intervals`` (each a list of
    decode batches: (batch size, tokens committed per request)), every batch lasting ``dt`` seconds; and each
    interval's sums."""
    lines, sums = [], []
    for i, batches in enumerate(intervals):
        forward = sum(bs for bs, _ in batches)  # update_spec_metrics: spec_num_forward_ct += bs
        tokens = sum(bs * c for bs, c in batches)  # spec_num_accept_tokens
        correct = tokens - forward
        seconds = dt * len(batches)
        running = batches[-1][0]  # len(batch.reqs) of the batch that prints the line
        lines.append(
            f"[2026-05-30 00:39:{10 + i:02d}] Decode batch, #running-req: {running}, #token: 100, token usage: "
            f"0.01, accept len: {tokens / forward:.2f}, accept rate: {correct / (forward * (K - 1)):.2f}, cuda "
            f"graph: True, gen throughput (token/s): {tokens / seconds:.2f}, #queue-req: 0"
        )
        sums.append({"tokens": tokens, "forward": forward, "correct": correct, "seconds": seconds})
    return "\n".join(lines) + "\n", sums


def test_sglang_drain_tail_is_bounded_and_the_bounds_hold_the_engines_figure() -> None:
    steady = [(8, 3)] * 4
    drain = [(6, 2), (4, 2), (2, 2), (1, 2)]  # the point's last requests finish one after another
    text, sums = _decode_lines([steady, steady, steady, drain], 0.01)
    wm = parse_window("sglang", text, cut=True, version="0.5.23")
    kept = sums[1:]  # the first line began before the window
    truth_len = sum(s["tokens"] for s in kept) / sum(s["forward"] for s in kept)
    truth_rate = sum(s["correct"] for s in kept) / (sum(s["forward"] for s in kept) * (K - 1))
    truth_tput = sum(s["tokens"] for s in kept) / sum(s["seconds"] for s in kept)
    # Weighted by #running-req (the last batch: 1 for the drain), as before, the figures move: +3.9%, +19%.
    by_running = (8 * 3.0 + 8 * 3.0 + 1 * 2.0) / 17
    assert by_running > truth_len * 1.035
    for figure, truth in (("accept_len", truth_len), ("acceptance_rate", truth_rate), ("gen_throughput", truth_tput)):
        entry = wm.exactness[figure]
        assert entry["kind"] == "bounded", figure
        low, high = entry["bounds"]
        assert low <= truth <= high, (figure, truth, entry["bounds"])
        value = getattr(wm, figure)
        assert low <= value <= high
    assert wm.exactness["accept_len"]["bounds"] == pytest.approx([1.995, 3.005])
    assert wm.exactness["gen_throughput"]["bounds"] == pytest.approx([649.995, 2400.005])
    note = wm.exactness["accept_len"]["note"]
    assert "sglang:spec_verify_calls_total" in note and "#running-req" in note
    assert wm.integrity.whole  # bounded is a figure's exactness, not a broken window


def test_sglang_lines_that_agree_give_a_rounded_figure() -> None:
    text, _ = _decode_lines([[(4, 3)] * 4] * 3, 0.01)
    wm = parse_window("sglang", text, cut=True, version="0.5.23")
    assert wm.accept_len == pytest.approx(3.0)
    for figure in ("accept_len", "acceptance_rate", "gen_throughput"):
        assert wm.exactness[figure]["kind"] == "rounded"
        assert wm.exactness[figure]["resolution"] == pytest.approx(0.01)
    one = parse_window("sglang", text.splitlines()[0])
    assert one.exactness["accept_len"] == {
        "kind": "rounded",
        "resolution": pytest.approx(0.01),
        "bounds": pytest.approx([2.995, 3.005]),
        "note": one.exactness["accept_len"]["note"],
    }


def test_sglang_dp_groups_bounds_add_up() -> None:
    line = "Decode batch, #running-req: {r}, accept len: 3.00, gen throughput (token/s): {t}, #queue-req: 0"
    text = (
        f"[2026-05-30 00:39:10 DP0 TP0] {line.format(r=4, t='100.00')}\n"
        f"[2026-05-30 00:39:10 DP1 TP4] {line.format(r=2, t='50.00')}\n"
        f"[2026-05-30 00:39:11 DP0 TP0] {line.format(r=1, t='80.00')}\n"
    )
    wm = parse_window("sglang", text)
    entry = wm.exactness["gen_throughput"]
    assert entry["kind"] == "bounded"
    assert entry["bounds"] == pytest.approx([79.995 + 49.995, 100.005 + 50.005])
    assert wm.exactness["accept_len"]["kind"] == "rounded"  # every line printed 3.00


# ------------------------------------------------------------------------------------------------- vLLM


def _engine(index: int, gen: float, prompt: float = 0.0, stamp: str = "05-30 00:00:00") -> str:
    return (
        f"(APIServer pid=7) INFO {stamp} [loggers.py:335] Engine {index:03d}: Avg prompt throughput: {prompt:.1f} "
        f"tokens/s, Avg generation throughput: {gen:.1f} tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache "
        "usage: 1.0%, Prefix cache hit rate: 0.0%"
    )


def _spec(seconds: float | None, stamp: str = "05-30 00:00:00") -> str:
    """One spec line of 100 drafts of 4 tokens, 300 accepted (per position 90, 80, 70, 60), over ``seconds``
    (the 0.9 form without the throughput fields when None)."""
    if seconds is None:
        return (
            f"(APIServer pid=7) INFO {stamp} [metrics.py:87] SpecDecoding metrics: Draft acceptance rate: 75.0%, "
            "Mean acceptance length: 4.00, Accepted: 300 tokens, Drafted: 400 tokens, Per-position acceptance "
            "rate: 0.900, 0.800, 0.700, 0.600"
        )
    return (
        f"(APIServer pid=7) INFO {stamp} [metrics.py:120] SpecDecoding metrics: Mean acceptance length: 4.00, "
        f"Accepted throughput: {300 / seconds:.2f} tokens/s, Drafted throughput: {400 / seconds:.2f} tokens/s, "
        "Accepted: 300 tokens, Drafted: 400 tokens, Per-position acceptance rate: 0.900, 0.800, 0.700, 0.600, "
        "Avg Draft acceptance rate: 75.0%"
    )


def test_vllm_intervals_logged_at_debug_count_as_idle() -> None:
    # Two DP engines, 10 s rounds. Engine 1 is idle from round 1: it prints 0.0 once, then nothing at INFO
    # (idle twice in a row: logger.debug) until it works again in round 4.
    text = "\n".join(
        [
            _engine(0, 100.0), _spec(10.0), _engine(1, 50.0), _spec(10.0),  # round 0: the window's edge
            _engine(0, 100.0), _spec(10.0), _engine(1, 0.0),
            _engine(0, 100.0), _spec(10.0),
            _engine(0, 100.0), _spec(10.0),
            _engine(0, 100.0), _spec(10.0), _engine(1, 40.0), _spec(30.0),
        ]
    )  # fmt: skip
    wm = parse_window("vllm", text + "\n", cut=True)
    # Rounds 1-4: 100 + 0, 100 + idle, 100 + idle, 100 + 40 tok/s: 110 tok/s over the window.
    assert wm.gen_throughput == pytest.approx(110.0)
    # Each engine's printed lines averaged, then summed, leaves the idle intervals out: 100 + 20 = 120.
    assert wm.details["gen_throughput_lines_mean"] == pytest.approx(120.0)
    assert wm.details["hidden_intervals"] == 2
    entry = wm.exactness["gen_throughput"]
    assert entry["kind"] == "rounded"  # every round timed by a spec line of engine 0
    # Each printed value is within 0.05 of its truth: 2, 1, 1 and 2 lines in the four rounds.
    assert entry["bounds"] == pytest.approx([110.0 - 0.075, 110.0 + 0.075])
    assert wm.integrity.whole


def _split_log(e1_seconds: float | None) -> str:
    # Engine 0 finishes at the end of round 1, prints 0.0 in round 2 and nothing after; engine 1, idle in
    # rounds 1-2 (0.0 printed in round 1, round 2 at DEBUG), works in round 3. Rounds 2 and 3 read as one
    # round (engine 0 then engine 1, indices rising): only engine 1's spec line, 30 s after its last one,
    # tells them apart.
    return "\n".join(
        [
            _engine(0, 100.0), _spec(10.0), _engine(1, 50.0), _spec(10.0 if e1_seconds else None),
            _engine(0, 100.0), _spec(10.0), _engine(1, 0.0),
            _engine(0, 0.0),
            _engine(1, 80.0), _spec(e1_seconds),
        ]
    ) + "\n"  # fmt: skip


def test_vllm_spec_seconds_count_the_rounds_the_order_hides() -> None:
    wm = parse_window("vllm", _split_log(30.0))
    # Rounds 0-3: 150, 100, 0, 80 tok/s (not three rounds of 150, 100, 80).
    assert wm.details["log_rounds"] == 4
    assert wm.gen_throughput == pytest.approx((150 + 100 + 0 + 80) / 4, rel=1e-3)


def test_vllm_rounds_the_log_cannot_count_give_no_throughput() -> None:
    wm = parse_window("vllm", _split_log(None))
    assert wm.gen_throughput is None
    assert wm.integrity.names() == ["missing_intervals"]
    assert "gen_throughput" not in wm.exactness
    assert wm.accept_len == pytest.approx(4.0)  # the spec counts are whole: accept length stays


def test_vllm_time_stamps_tell_rounds_apart() -> None:
    # Engine 1's line 10 s after engine 0's is the next round, though its index rises.
    lines = [_engine(0, 100.0, stamp=f"05-30 00:00:{s:02d}") for s in (0, 10, 20)]
    lines.insert(2, _engine(1, 60.0, stamp="05-30 00:00:10"))  # round 1: both engines
    lines.append(_engine(1, 30.0, stamp="05-30 00:00:30"))  # round 3: engine 1 only
    wm = parse_window("vllm", "\n".join(lines) + "\n")
    assert wm.details["log_rounds"] == 4
    assert wm.gen_throughput == pytest.approx((100 + 160 + 100 + 30) / 4)


def test_vllm_idle_rounds_between_are_counted_from_time_stamps() -> None:
    # Every engine idle in round 1 (printed 0.0): rounds 2-3 are logged at DEBUG only; the stamps, 10 s
    # apart, say two rounds are missing before round 4.
    stamps = ["05-30 00:00:00", "05-30 00:00:10", "05-30 00:00:40"]
    text = "\n".join(_engine(0, g, stamp=s) for g, s in zip((90.0, 0.0, 60.0), stamps, strict=True)) + "\n"
    wm = parse_window("vllm", text)
    assert wm.details["hidden_rounds"] == 2
    assert wm.gen_throughput == pytest.approx((90 + 0 + 0 + 0 + 60) / 5)
    no_stamps = parse_window("vllm", "\n".join(_engine(0, g).split("INFO ", 1)[1][15:] for g in (90.0, 0.0, 60.0)))
    assert no_stamps.gen_throughput is None
    assert no_stamps.integrity.names() == ["missing_intervals"]


def test_vllm_counts_printed_as_integers_are_exact() -> None:
    wm = parse_window("vllm", _spec(10.0) + "\n" + _spec(10.0) + "\n")
    assert wm.exactness["accept_len"]["kind"] == "exact"
    assert wm.exactness["acceptance_rate"]["kind"] == "exact"
    # 100 drafts: each 3-decimal rate is one integer count.
    assert wm.exactness["per_position"]["kind"] == "exact"
    assert wm.details["per_position_acceptance"] == pytest.approx([0.9, 0.8, 0.7, 0.6])


def test_vllm_drafts_the_line_does_not_settle_bound_the_accept_length() -> None:
    # 1000 accepted at a mean of 2.47: 678 .. 682 drafts fit (the 0.9 form, no per-position list here).
    line = (
        "SpecDecoding metrics: Draft acceptance rate: 49.0%, Mean acceptance length: 2.47, Accepted: 1000 "
        "tokens, Drafted: 2041 tokens"
    )
    wm = parse_window("vllm", line + "\n")
    entry = wm.exactness["accept_len"]
    assert entry["kind"] == "bounded"
    assert entry["bounds"] == pytest.approx([1 + 1000 / 682, 1 + 1000 / 678])
    assert entry["bounds"][0] <= wm.accept_len <= entry["bounds"][1]
    assert wm.exactness["acceptance_rate"]["kind"] == "exact"


# -------------------------------------------------------------------------------------------- comparing


def test_a_bounded_figure_is_never_the_reference() -> None:
    journal = {"accept_len": 3.5, "exactness": {"accept_len": {"kind": "bounded", "bounds": [3.0, 4.0]}}}
    prometheus = {"accept_len": 3.2, "exactness": {"accept_len": {"kind": "exact"}}}
    report = compare_sources({"journal": journal, "prometheus": prometheus})
    entry = report["figures"]["accept_len"]
    assert entry["reference"] == "prometheus"
    assert entry["exactness"] == {"journal": "bounded", "prometheus": "exact"}
    assert entry["rel_diff"]["journal"] == pytest.approx(0.3 / 3.2)  # beyond 5%, but within its bounds
    assert entry["agree"] is True and report["disagreements"] == []
    far = compare_sources({"journal": journal, "prometheus": {**prometheus, "accept_len": 4.5}})
    assert far["figures"]["accept_len"]["agree"] is False and far["disagreements"] == ["accept_len"]


def test_the_window_says_how_exact_it_is_to_the_comparison() -> None:
    text, _ = _decode_lines([[(8, 3)] * 4, [(8, 3)] * 4, [(6, 2), (4, 2), (2, 2), (1, 2)]], 0.01)
    wm = parse_window("sglang", text, cut=True)
    report = compare_sources({"journal": wm, "prometheus": {"accept_len": 2.82}})
    entry = report["figures"]["accept_len"]
    assert entry["exactness"]["journal"] == "bounded"
    assert entry["reference"] == "prometheus"  # says nothing of its exactness, but is not bounded
    assert entry["bounds"]["journal"] == pytest.approx([1.995, 3.005])
