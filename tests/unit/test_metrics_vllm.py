"""vLLM ``SpecDecoding metrics`` and engine-throughput lines, and drafts recovered per line."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.metrics import parse_window
from orchestrator.metrics.samples import VllmEngineSample, VllmSpecSample
from orchestrator.metrics.vllm import parse_vllm

DATA = Path(__file__).resolve().parent.parent / "data" / "logs"

# Written from vllm/v1/spec_decode/metrics.py (current and older) and vllm/v1/metrics/loggers.py.
CURRENT = (
    "SpecDecoding metrics: Mean acceptance length: 2.95, Accepted throughput: 41.20 tokens/s, Drafted "
    "throughput: 70.00 tokens/s, Accepted: 412 tokens, Drafted: 700 tokens, Per-position acceptance rate: "
    "0.820, 0.610, 0.430, Avg Draft acceptance rate: 58.9%"
)
OLD = "SpecDecoding metrics: Draft acceptance rate: 58.9%, Accepted: 412 tokens, Drafted: 700 tokens"
ENGINE = (
    "Engine 000: Avg prompt throughput: 12.0 tokens/s, Avg generation throughput: 80.5 tokens/s, Running: 1 "
    "reqs, Waiting: 0 reqs, GPU KV cache usage: 1.2%, Prefix cache hit rate: 0.0%"
)


def test_current_form() -> None:
    result = parse_vllm("INFO 05-30 00:41:10 [metrics.py:96] " + CURRENT)
    sample = result.samples[0]
    assert isinstance(sample, VllmSpecSample)
    assert (sample.accepted, sample.drafted, sample.mean_acceptance_length) == (412, 700, 2.95)
    assert sample.per_position == [0.82, 0.61, 0.43]
    assert (sample.accepted_throughput, sample.drafted_throughput, sample.draft_acceptance_rate) == (41.2, 70.0, 58.9)
    # 412 / 1.95 = 211.3; 2.95 allows 210.7 .. 211.8 -> 211 (700 / 3 is not an integer, so no cross-check).
    assert (sample.drafts, sample.drafts_exact, sample.form) == (211, True, "current")


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
    assert wm.details["accept_len_partial"] == pytest.approx(1 + 412 / 211)
    assert wm.acceptance_rate == pytest.approx(824 / 1400)
    assert wm.details["lines_without_drafts"] == 1
    only_old = parse_window("vllm", OLD)
    assert (only_old.accept_len, only_old.acceptance_rate) == (None, pytest.approx(412 / 700))


def test_nothing_accepted_without_per_position_list_withholds_accept_len() -> None:
    line = "SpecDecoding metrics: Mean acceptance length: 1.00, Accepted: 0 tokens, Drafted: 80 tokens"
    wm = parse_window("vllm", f"{line}\n{CURRENT}\n")
    assert wm.accept_len is None
    assert wm.details["accept_len_partial"] == pytest.approx(1 + 412 / 211)


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
