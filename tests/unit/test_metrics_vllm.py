"""vLLM ``SpecDecoding metrics``, V0 ``Speculative metrics`` and engine-throughput lines; drafts recovered per line."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.engines.vllm.log import parse_vllm
from orchestrator.engines.vllm.samples import VllmEngineSample, VllmSpecSample
from orchestrator.metrics import parse_window

DATA = Path(__file__).resolve().parent.parent / "data" / "logs"

# Printed by vLLM's own SpecDecodingLogging (vllm/v1/spec_decode/metrics.py) fed known counts (the contract
# tests' oracle): 211 drafts of k=3 tokens, 60 accepting 3, 70 accepting 2, 41 accepting 1, 40 none, over 10 s.
CURRENT = (  # vLLM 0.33.0 (the 0.10.2+ form)
    "SpecDecoding metrics: Mean acceptance length: 2.71, Accepted throughput: 36.10 tokens/s, Drafted "
    "throughput: 63.30 tokens/s, Accepted: 361 tokens, Drafted: 633 tokens, Per-position acceptance rate: "
    "0.810, 0.616, 0.284, Avg Draft acceptance rate: 57.0%"
)
MEAN_FORM = (  # vLLM 0.9.2 (the 0.8.5-0.10.1 form; mean = 1 + accepted / drafts from 0.9.0 on)
    "SpecDecoding metrics: Draft acceptance rate: 57.0%, Mean acceptance length: 2.71, Accepted: 361 tokens, "
    "Drafted: 633 tokens, Per-position acceptance rate: 0.810, 0.616, 0.284"
)
NO_BONUS_FORM = MEAN_FORM.replace("2.71", "1.71")  # vLLM 0.8.5.post1 printed accepted / drafts for the same counts
# Then 50 drafts (10 of 3 tokens accepting 3, 15 of 2 accepting 2, 5 of 3 accepting 1, 20 of 1 accepting none).
SHORT_DRAFTS = (
    "SpecDecoding metrics: Mean acceptance length: 2.30, Accepted throughput: 6.50 tokens/s, Drafted throughput: "
    "9.50 tokens/s, Accepted: 65 tokens, Drafted: 95 tokens, Per-position acceptance rate: 0.600, 0.500, 0.200, "
    "Avg Draft acceptance rate: 68.4%"
)
OLD = "SpecDecoding metrics: Draft acceptance rate: 58.9%, Accepted: 412 tokens, Drafted: 700 tokens"  # 0.8.3, 0.8.4
ENGINE = (
    "Engine 000: Avg prompt throughput: 12.0 tokens/s, Avg generation throughput: 80.5 tokens/s, Running: 1 "
    "reqs, Waiting: 0 reqs, GPU KV cache usage: 1.2%, Prefix cache hit rate: 0.0%"
)
# vLLM V0 (vllm/engine/metrics.py _format_spec_decode_metrics_str, 0.6 .. 0.9.2), printed by vLLM 0.9.2's own
# sampler, collector and formatter (the contract tests' V0 oracle), k=4, counts cumulative since the engine
# started: 100 verify steps accepting [1,1,0,1] (prefix 2: 3 tokens emitted, 3 accepted), then 60 accepting
# [1,0,1,1] (2 emitted, 3 accepted) and 40 accepting all 4 (5 emitted).
V0_LINES = [
    "Speculative metrics: Draft acceptance rate: 0.750, System efficiency: 0.600, Number of speculative tokens: 4, "
    "Number of accepted tokens: 300, Number of draft tokens: 400, Number of emitted tokens: 300.",
    "Speculative metrics: Draft acceptance rate: 0.800, System efficiency: 0.620, Number of speculative tokens: 4, "
    "Number of accepted tokens: 640, Number of draft tokens: 800, Number of emitted tokens: 620.",
]


def test_current_form() -> None:
    result = parse_vllm("(APIServer pid=1) INFO 05-30 00:41:10 [metrics.py:120] " + CURRENT)
    sample = result.samples[0]
    assert isinstance(sample, VllmSpecSample)
    assert (sample.accepted, sample.drafted, sample.mean_acceptance_length) == (361, 633, 2.71)
    assert sample.per_position == [0.81, 0.616, 0.284]
    assert (sample.accepted_throughput, sample.drafted_throughput, sample.draft_acceptance_rate) == (36.1, 63.3, 57.0)
    # 2.71 alone allows 209..212 drafts; the 3-decimal rates (integer counts adding up to 361) leave 211 only.
    assert (sample.drafts, sample.drafts_exact, sample.form, sample.bonus_in_mean) == (211, True, "current", True)
    assert sample.elapsed_s == pytest.approx(10.0, rel=1e-3)


def test_shorter_drafts_recovered_from_the_rates() -> None:
    (sample,) = parse_vllm(SHORT_DRAFTS).samples
    assert isinstance(sample, VllmSpecSample)
    assert (sample.drafts, sample.drafts_exact) == (50, True)  # 95 / 3 is no integer: the rates decide


@pytest.mark.parametrize(("line", "bonus"), [(MEAN_FORM, True), (NO_BONUS_FORM, False)], ids=["0.9", "0.8.5"])
def test_mean_form_tells_its_meaning_by_the_rates(line: str, bonus: bool) -> None:
    (sample,) = parse_vllm(line).samples
    assert isinstance(sample, VllmSpecSample)
    assert (sample.form, sample.bonus_in_mean, sample.drafts, sample.drafts_exact) == ("mean", bonus, 211, True)
    wm = parse_window("vllm", line)
    assert wm.accept_len == pytest.approx(1 + 361 / 211)
    assert wm.details["mean_without_bonus_lines"] == (0 if bonus else 1)


def test_window_keeps_per_position_and_throughputs() -> None:
    wm = parse_window("vllm", f"{CURRENT}\n{SHORT_DRAFTS}\n")
    assert wm.accept_len == pytest.approx(1 + (361 + 65) / (211 + 50))
    assert wm.acceptance_rate == pytest.approx((361 + 65) / (633 + 95))
    d = wm.details
    assert d["acceptance_rate_definition"] == "drafts_only"
    assert d["per_position_acceptance"] == pytest.approx(
        [(171 + 30) / 261, (130 + 25) / 261, (60 + 10) / 261], abs=5e-4
    )
    assert d["accepted_throughput"] == pytest.approx((361 + 65) / 20, rel=1e-3)
    assert d["drafted_throughput"] == pytest.approx((633 + 95) / 20, rel=1e-3)
    assert "per_position_acceptance" in wm.definitions and "accepted_throughput" in wm.definitions


def test_v0_lines_are_cumulative() -> None:
    text = "".join(f"INFO 05-30 00:39:1{i} metrics.py:489] {line}\n" for i, line in enumerate(V0_LINES))
    result = parse_vllm(text)
    assert (result.matched, result.skipped) == (2, 0)
    first, second = result.samples
    assert isinstance(first, VllmSpecSample) and isinstance(second, VllmSpecSample)
    assert (first.form, first.accepted, first.drafted, first.emitted, first.drafts) == ("v0", 300, 400, 300, 100)
    assert (second.accepted, second.drafted, second.emitted, second.drafts) == (340, 400, 320, 100)
    assert second.cumulative == {"accepted": 640, "drafted": 800, "emitted": 620}
    whole = parse_window("vllm", text)  # since the engine started: 620 tokens in 200 verify steps
    # V0's rate counts accepted tokens at any position: another definition, kept under its own name.
    assert whole.accept_len == pytest.approx(3.1)
    assert whole.acceptance_rate is None
    assert whole.details["acceptance_rate_v0_any_position"] == pytest.approx(0.8)
    assert whole.details["acceptance_rate_definition"] == "v0_any_position"
    cut = parse_window("vllm", text, cut=True)  # the window's own interval: the second line minus the first
    assert cut.accept_len == pytest.approx(3.2)
    assert cut.details["acceptance_rate_v0_any_position"] == pytest.approx(0.85)


def test_v0_counts_going_down_mean_a_restart() -> None:
    text = f"{V0_LINES[1]}\n{V0_LINES[0]}\n"
    second = parse_vllm(text).samples[1]
    assert isinstance(second, VllmSpecSample)
    assert (second.accepted, second.drafted, second.emitted) == (300, 400, 300)


def test_v0_and_v1_rates_never_share_the_figure() -> None:
    wm = parse_window("vllm", f"{V0_LINES[0]}\n{CURRENT}\n")
    assert wm.acceptance_rate is None and wm.details["acceptance_rate_definition"] == "mixed"
    assert wm.accept_len == pytest.approx((300 + 361 + 211) / (100 + 211))


def test_spec_lines_belong_to_the_engine_line_before_them() -> None:
    engine1 = ENGINE.replace("Engine 000", "Engine 001")
    text = "\n".join([ENGINE, CURRENT, engine1, SHORT_DRAFTS, ENGINE, CURRENT, engine1, SHORT_DRAFTS]) + "\n"
    spec = [s for s in parse_vllm(text).samples if isinstance(s, VllmSpecSample)]
    assert [s.engine_index for s in spec] == [0, 1, 0, 1]
    cut = parse_window("vllm", text, cut=True)  # each engine's first pair began before the window
    assert cut.accept_len == pytest.approx(1 + (361 + 65) / (211 + 50))
    assert cut.details["edge_lines_dropped"] == 4


def test_cpu_kv_cache_usage() -> None:
    line = ENGINE.replace("GPU KV cache usage: 1.2%", "CPU KV cache usage: 3.5%")
    (sample,) = parse_vllm(line).samples
    assert isinstance(sample, VllmEngineSample)
    assert (sample.kv_cache_usage, sample.prefix_cache_hit_rate) == (3.5, 0.0)


def test_old_form_has_no_drafts() -> None:
    sample = parse_vllm(OLD).samples[0]
    assert isinstance(sample, VllmSpecSample)
    assert (sample.accepted, sample.drafted, sample.draft_acceptance_rate) == (412, 700, 58.9)
    assert (sample.mean_acceptance_length, sample.drafts, sample.form) == (None, None, "old")


@pytest.mark.parametrize(
    ("line", "index", "gen", "running", "waiting"),
    [
        pytest.param(ENGINE, 0, 80.5, 1, 0, id="v1-engine"),
        pytest.param(
            "Engine 001: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 33.3 tokens/s, Running: 2 "
            "reqs, Waiting: 1 reqs, GPU KV cache usage: 5.0%, Prefix cache hit rate: 12.5%",
            1,
            33.3,
            2,
            1,
            id="second-engine",
        ),
        pytest.param(
            "Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: 20.0 tokens/s, Running: 3 reqs, "
            "Swapped: 0 reqs, Pending: 4 reqs, GPU KV cache usage: 1.0%, CPU KV cache usage: 0.0%.",
            None,
            20.0,
            3,
            4,
            id="v0-no-engine-index",
        ),
    ],
)
def test_engine_lines(line: str, index: int | None, gen: float, running: int, waiting: int) -> None:
    sample = parse_vllm("(APIServer pid=1) INFO 05-30 00:41:10 [loggers.py:123] " + line).samples[0]
    assert isinstance(sample, VllmEngineSample)
    assert (sample.engine_index, sample.generation_throughput, sample.running, sample.waiting) == (
        index,
        gen,
        running,
        waiting,
    )


def test_window_accept_len_is_one_plus_accepted_over_drafts() -> None:
    # Hand-checked: drafts 300/3.00 = 100 (400/4 agrees), 50/1.00 = 50 (200/4), 0 accepted -> 80/4 = 20.
    # accept len 1 + 350/170 = 3.0588 (the unweighted mean of the lines would be 2.33); rate 350/680.
    wm = parse_window("vllm", (DATA / "vllm_v1.log").read_text())
    assert (wm.lines_matched, wm.lines_skipped) == (6, 0)
    assert wm.accept_len == pytest.approx(1 + 350 / 170)
    assert wm.acceptance_rate == pytest.approx(350 / 680)
    assert wm.gen_throughput == pytest.approx((80.5 + 60.5 + 10.0) / 3)
    details = wm.details
    assert (details["drafts"], details["drafts_exact"], details["lines_without_drafts"]) == (170, True, 0)
    per_position = details["per_position_acceptance"]
    assert per_position == pytest.approx([(90 + 25) / 170, (80 + 15) / 170, (70 + 7.5) / 170, (60 + 2.5) / 170])


def test_old_lines_count_for_rate_and_withhold_accept_len() -> None:
    # An older-form line drafted 700 tokens in an unknown number of drafts: leaving it out would bias the
    # window, so the window has no accept length, only the partial one over the lines that tell.
    wm = parse_window("vllm", f"{OLD}\n{CURRENT}\n")
    assert wm.accept_len is None
    assert wm.details["accept_len_partial"] == pytest.approx(1 + 361 / 211)
    assert wm.acceptance_rate == pytest.approx((412 + 361) / (700 + 633))
    assert wm.details["lines_without_drafts"] == 1
    only_old = parse_window("vllm", OLD)
    assert (only_old.accept_len, only_old.acceptance_rate) == (None, pytest.approx(412 / 700))


def test_nothing_accepted_without_per_position_list_withholds_accept_len() -> None:
    line = "SpecDecoding metrics: Mean acceptance length: 1.00, Accepted: 0 tokens, Drafted: 80 tokens"
    wm = parse_window("vllm", f"{line}\n{CURRENT}\n")
    assert wm.accept_len is None
    assert wm.details["accept_len_partial"] == pytest.approx(1 + 361 / 211)


def test_engines_throughputs_add_up() -> None:
    text = "\n".join(
        f"Engine 00{e}: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: {g} tokens/s, Running: 1 reqs"
        for e, g in [(0, 100.0), (1, 40.0), (0, 80.0), (1, 60.0)]
    )
    assert parse_window("vllm", text).gen_throughput == pytest.approx(90.0 + 50.0)


def test_unreadable_spec_line_is_skipped() -> None:
    result = parse_vllm("SpecDecoding metrics: disabled\nSpecDecoding metrics: Accepted: many tokens\n")
    assert (result.matched, result.skipped) == (0, 2)


def test_sglang_lines_are_not_vllm_samples() -> None:
    wm = parse_window("vllm", "Decode batch, #running-req: 1, accept len: 3.0, gen throughput (token/s): 1.0")
    assert (wm.lines_matched, wm.accept_len) == (0, None)
