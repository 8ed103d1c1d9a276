"""llama-server per-request lines: assembled into requests, aggregated per window."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from orchestrator.engines.llamacpp.log import parse_llamacpp
from orchestrator.engines.llamacpp.samples import LlamaRequestSample, LlamaSpecStatsSample
from orchestrator.metrics import parse_window, response_figures, scrape_delta

DATA = Path(__file__).resolve().parent.parent / "data"
CAPTURES = sorted((DATA / "llamacpp").glob("*.log"))


def _requests(text: str) -> list[LlamaRequestSample]:
    return [s for s in parse_llamacpp(text).samples if isinstance(s, LlamaRequestSample)]


def test_lead_measured_line() -> None:
    line = (
        "slot print_timing: id  3 | task 1 | draft acceptance = 0.64706 (   66 accepted /   102 generated), "
        "mean len =  3.54"
    )
    (req,) = _requests(line)
    assert (req.slot, req.task, req.accepted, req.generated, req.draft_acceptance) == (3, 1, 66, 102, 0.64706)
    assert (req.mean_len, req.verify_steps) == (3.54, 26)  # 66 / 2.54 = 25.98; 3.54 allows 25.93 .. 26.04


@pytest.mark.parametrize(
    ("text", "accepted", "generated", "mean_len", "per_pos"),
    [
        pytest.param(
            "0.16.519.195 I slot print_timing: id  0 | task 42 | draft acceptance = 0.66237 (  257 accepted /   "
            "388 generated), mean len =  3.65",
            257,
            388,
            3.65,
            [],
            id="verbose-stamp",
        ),
        pytest.param(
            "slot print_timing: id  0 | task 42 | draft acceptance rate = 0.71901 (  174 accepted /   242 generated)",
            174,
            242,
            None,
            [],
            id="older-rate-no-mean-len",
        ),
        pytest.param(
            "slot print_timing: id  0 | task 42 | draft acceptance = 0.90000 (   90 accepted /   100 generated), "
            "mean acceptance length =  4.50, acceptance rate per position = (1.000, 0.900)",
            90,
            100,
            4.5,
            [1.0, 0.9],
            id="long-names-inline-per-pos",
        ),
        pytest.param(
            "slot print_timing: id  0 | task 42 | draft acceptance = 0.66237 (  257 accepted /   388 generated), "
            "mean len =  3.65\nslot print_timing: id  0 | task 42 |      acc per pos = (0.804, 0.701, 0.629, 0.515)",
            257,
            388,
            3.65,
            [0.804, 0.701, 0.629, 0.515],
            id="trace-per-pos-line",
        ),
    ],
)
def test_draft_acceptance_variants(
    text: str, accepted: int, generated: int, mean_len: float | None, per_pos: list[float]
) -> None:
    (req,) = _requests(text)
    assert (req.accepted, req.generated, req.mean_len, req.acc_per_pos) == (accepted, generated, mean_len, per_pos)


def test_old_layout_prefix_alone_on_its_line() -> None:
    text = (
        "slot print_timing: id  1 | task 7 | \n"
        "prompt eval time =     100.00 ms /    10 tokens (   10.00 ms per token,   100.00 tokens per second)\n"
        "       eval time =    1000.00 ms /    50 tokens (   20.00 ms per token,    50.00 tokens per second)\n"
        "      total time =    1100.00 ms /    60 tokens\n"
        "slot print_timing: id  1 | task 7 | \n"
        "draft acceptance rate = 0.25000 (   10 accepted /    40 generated)\n"
    )
    (req,) = _requests(text)
    assert (req.slot, req.task, req.prompt_tokens, req.eval_tokens, req.eval_tps, req.total_tokens) == (
        1,
        7,
        10,
        50,
        50.0,
        60,
    )
    assert (req.accepted, req.generated) == (10, 40)


def test_lines_without_any_slot_prefix_split_on_repeated_fields() -> None:
    line = "draft acceptance = 0.50000 (   10 accepted /    20 generated), mean len =  2.00\n"
    reqs = _requests(line * 3)
    assert [(r.slot, r.accepted) for r in reqs] == [(None, 10)] * 3


def test_statistics_line_is_a_sample_but_not_aggregated() -> None:
    text = (
        "0.34.089.513 I spec common_specu: statistics        draft-mtp: #calls(b,g,a) =    1    200    200, "
        "#gen drafts =    200, #acc drafts =   170, #gen tokens =    399, #acc tokens =   311, #mean acc len = "
        "2.55, #acc rate/pos = (0.850, 0.705), dur(b,g,a) = 0.004, 1011.730, 0.465 ms"
    )
    wm = parse_window("llamacpp", text)
    (stats,) = wm.samples
    assert isinstance(stats, LlamaSpecStatsSample)
    assert (stats.impl, stats.gen_drafts, stats.acc_tokens, stats.acc_rate_per_pos) == (
        "draft-mtp",
        200,
        311,
        [0.85, 0.705],
    )
    assert wm.accept_len is None


def test_other_llama_lines_are_neither_read_nor_skipped() -> None:
    text = (
        "slot update_slots: id  3 | task 1 | new prompt, n_ctx_slot = 4096, n_keep = 0, task.n_tokens = 25\n"
        "llama_perf_context_print:        eval time =     123.00 ms /    12 runs   (   10.25 ms per token)\n"
        "srv  update_slots: all slots are idle\n"
    )
    result = parse_llamacpp(text)
    assert (result.matched, result.skipped, result.samples) == (0, 0, [])


def test_unreadable_acceptance_line_is_skipped() -> None:
    result = parse_llamacpp("slot print_timing: id  3 | task 1 | draft acceptance = broken\n")
    assert (result.matched, result.skipped) == (0, 1)


def test_window_sums_over_real_requests() -> None:
    # The -lv 4 capture (tests/data/llamacpp/README.md): two requests, each "46 accepted / 123 generated, mean
    # len = 6.11" (steps 46 / 5.11 = 9.00) and "acc per pos = (0.444, 0.333 x 12, 0.222 x 3)" = (4, 3, 2) / 9.
    wm = parse_window("llamacpp", (DATA / "llamacpp" / "ngram-simple-n3-m16-lv4.log").read_text())
    assert wm.lines_skipped == 0
    assert wm.acceptance_rate == pytest.approx(92 / 246)
    assert wm.accept_len == pytest.approx(1 + 92 / 18)
    assert wm.gen_throughput is None
    details = wm.details
    assert (details["requests"], details["verify_steps"], details["verify_steps_exact"]) == (2, 18, True)
    assert details["accepted_per_position"] == [8] + [6] * 12 + [4] * 3
    assert details["per_position_acceptance"] == pytest.approx([8 / 18] + [6 / 18] * 12 + [4 / 18] * 3)
    assert details["requests_with_per_position"] == 2
    # eval time = 6412.62 ms and 8867.29 ms for 128 tokens each.
    assert details["decode_tps_per_request"] == pytest.approx(256 / 15.27991)
    assert details["predicted_per_second"] == pytest.approx(254 / 15.27991)
    assert "per_position_acceptance" in wm.definitions and "drafts only" in wm.definitions["acceptance_rate"]


def _block(slot: int, task: int, accepted: int, generated: int, mean_len: float, per_pos: str | None) -> str:
    """One request's lines as print_timings (tools/server/server-context.cpp) writes them, timing lines left out."""
    prefix = f"slot print_timing: id {slot:2d} | task {task} | "
    text = f"{prefix}draft acceptance = {accepted / generated:0.5f} "
    text += f"({accepted:5d} accepted / {generated:5d} generated), mean len = {mean_len:5.2f}\n"
    if per_pos is not None:
        text += f"{prefix}     acc per pos = ({per_pos})\n"
    return text


def test_per_position_is_weighted_by_steps_and_padded() -> None:
    # Request A: 10 steps, 12 accepted (mean 2.20), per position (6, 4, 2) / 10.
    # Request B: 4 steps, 2 accepted (mean 1.50), a shorter list (2) / 4: no acceptance at positions 1 and 2.
    text = _block(0, 1, 12, 30, 2.2, "0.600, 0.400, 0.200") + _block(1, 2, 2, 4, 1.5, "0.500")
    wm = parse_window("llamacpp", text)
    assert wm.accept_len == pytest.approx(1 + 14 / 14)
    assert wm.details["accepted_per_position"] == [8, 4, 2]
    assert wm.details["per_position_acceptance"] == pytest.approx([8 / 14, 4 / 14, 2 / 14])
    # The unweighted mean of the two lists would say 0.55 at position 0: not what llama.cpp's counters say.
    assert wm.details["per_position_acceptance"][0] != pytest.approx(0.55)


def test_per_position_withheld_when_a_drafted_request_lacks_it() -> None:
    text = _block(0, 1, 12, 30, 2.2, "0.600, 0.400, 0.200") + _block(1, 2, 2, 4, 1.5, None)
    details = parse_window("llamacpp", text).details
    assert details["per_position_acceptance"] is None
    assert details["per_position_acceptance_partial"] == pytest.approx([0.6, 0.4, 0.2])
    assert details["requests_with_per_position"] == 1
    # Without -lv 4 no request prints the line: nothing to report, and nothing skipped.
    plain = parse_window("llamacpp", _block(0, 1, 12, 30, 2.2, None))
    assert (plain.details["per_position_acceptance"], plain.details["accepted_per_position"]) == (None, None)
    assert plain.lines_skipped == 0


def test_jsonl_log_format() -> None:
    # --log-jsonl (common/log.cpp): each message becomes {"type", "time", "level", "msg"}, msg ending in "\n".
    lines = _block(3, 1, 46, 123, 6.11, "0.444, 0.333").splitlines(keepends=True)
    text = "".join(json.dumps({"type": "log", "time": 10703174, "level": "info", "msg": m}) + "\n" for m in lines)
    (req,) = _requests(text)
    assert (req.slot, req.task, req.accepted, req.generated, req.mean_len, req.verify_steps) == (3, 1, 46, 123, 6.11, 9)
    assert req.acc_per_pos == [0.444, 0.333]


def test_request_without_recoverable_steps_withholds_accept_len() -> None:
    text = (
        "slot print_timing: id  0 | task 1 | draft acceptance = 0.50000 (   10 accepted /    20 generated), "
        "mean len =  2.00\n"
        "slot print_timing: id  1 | task 2 | draft acceptance = 0.00000 (    0 accepted /   358 generated), "
        "mean len =  1.00\n"
    )
    wm = parse_window("llamacpp", text)
    assert wm.accept_len is None  # the 0-accepted request drafted in an unknown number of steps
    assert wm.details["accept_len_partial"] == pytest.approx(2.0)
    assert wm.acceptance_rate == pytest.approx(10 / 378)
    assert wm.details["requests_without_steps"] == 1
    older = parse_window("llamacpp", "draft acceptance rate = 0.25000 (   10 accepted /    40 generated)\n")
    assert (older.accept_len, older.acceptance_rate) == (None, 0.25)


def test_autoregressive_requests_have_timings_only() -> None:
    text = (
        "slot print_timing: id  0 | task 1 |        eval time =     500.00 ms /    50 tokens (   10.00 ms per "
        "token,   100.00 tokens per second)\n"
    )
    wm = parse_window("llamacpp", text)
    assert (wm.accept_len, wm.acceptance_rate) == (None, None)
    assert wm.details["decode_tps_per_request"] == pytest.approx(100.0)


@pytest.mark.skipif(not CAPTURES, reason="no real llama-server capture in tests/data/llamacpp yet")
@pytest.mark.parametrize("log", CAPTURES, ids=[p.stem for p in CAPTURES])
def test_real_llama_server_capture(log: Path) -> None:
    text = log.read_text(errors="replace")
    wm = parse_window("llamacpp", text)
    assert wm.lines_skipped == 0, wm.skipped_examples
    requests = [s for s in wm.samples if isinstance(s, LlamaRequestSample)]
    if "draft acceptance" in text:
        drafted = [r for r in requests if r.generated]
        assert drafted
        for r in drafted:
            assert r.accepted is not None and r.generated is not None and r.accepted <= r.generated
            if r.mean_len is not None and r.accepted:
                assert r.verify_steps is not None
                assert round(1 + r.accepted / r.verify_steps, 2) == pytest.approx(r.mean_len, abs=0.011)
    before, after = log.with_suffix(".metrics.before"), log.with_suffix(".metrics.after")
    if before.exists() and after.exists():
        # The captures are complete logs between the two scrapes: the log and the counters must agree exactly.
        prom = scrape_delta(before.read_text(), after.read_text(), "llamacpp")
        assert wm.details["accepted"] == (prom.details["accepted"] or 0)
        assert wm.details["generated"] == (prom.details["draft_tokens"] or 0)
        assert wm.acceptance_rate == prom.acceptance_rate
        if wm.accept_len is not None:
            assert wm.accept_len == pytest.approx(prom.accept_len)
        elif prom.accept_len is not None:
            assert wm.details["requests_without_steps"] > 0
        if wm.details["per_position_acceptance"] is not None:  # the -lv 4 capture
            assert wm.details["per_position_acceptance"] == pytest.approx(prom.per_position)
        # The before scrape reset llama.cpp's rate bucket, so the after gauge covers exactly the log's requests.
        gauge = re.search(r"^llamacpp:predicted_tokens_seconds (\S+)$", after.read_text(), re.M)
        assert gauge is not None
        if wm.details["predicted_per_second"] is not None:
            assert wm.details["predicted_per_second"] == pytest.approx(float(gauge.group(1)), rel=1e-5)


RESPONSE = DATA / "llamacpp" / "ngram-simple-n3-m16.response.json"


@pytest.mark.skipif(not RESPONSE.exists(), reason="no real llama-server response captured")
def test_real_response_timings_are_a_source() -> None:
    response = json.loads(RESPONSE.read_text())
    figures = response_figures([response])
    timings = response["timings"]
    assert figures["acceptance_rate"] == pytest.approx(timings["draft_n_accepted"] / timings["draft_n"])
    assert figures["accept_len"] is None  # llama.cpp's timings carry no step count


def test_a_request_that_began_before_the_window_is_left_out() -> None:
    # A real window (tests/data/llamacpp/README.md): its first six lines are the warm-up's last request, task 387,
    # whose lines reached the journal after the window opened; the point's four requests drafted 357 tokens and
    # had 331 accepted in 90 verify steps by the counters (331 of 357 by the responses too).
    text = (DATA / "llamacpp" / "window-late-tail.log").read_text()
    requests = _requests(text)
    assert [(r.task, r.launched_in_window) for r in requests] == [
        (387, False),
        (419, True),
        (461, True),
        (512, True),
        (589, True),
    ]
    wm = parse_window("llamacpp", text, cut=True)
    assert (wm.details["accepted"], wm.details["generated"]) == (331, 357)
    assert (wm.details["requests"], wm.details["requests_started_before"]) == (4, 1)
    assert wm.acceptance_rate == 331 / 357
    assert wm.details["verify_steps"] == 90 and wm.accept_len == 1 + 331 / 90
    # the same window without the tail gives the same figures
    tail = 6
    assert "task 387" in text.splitlines()[tail - 1] and "task 387" not in text.splitlines()[tail]
    clean = parse_window("llamacpp", "".join(text.splitlines(keepends=True)[tail:]), cut=True)
    assert (clean.accept_len, clean.acceptance_rate) == (wm.accept_len, wm.acceptance_rate)
    assert clean.details["requests_started_before"] == 0
    # a build that prints no launch line: every request counts, none can be told apart
    quiet = "".join(line for line in text.splitlines(keepends=True) if "launch_slot_" not in line)
    unlaunched = parse_window("llamacpp", quiet, cut=True)
    assert {r.launched_in_window for r in _requests(quiet)} == {None}
    assert (unlaunched.details["accepted"], unlaunched.details["requests_started_before"]) == (430, 0)
