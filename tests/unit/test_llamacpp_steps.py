"""llama.cpp's log: each request's verify steps from its 2-decimal mean, its drafted tokens and its 3-decimal
per-position rates, and how exact the window's figures are (tools/server/server-context.cpp print_timings:
``mean len = %5.2f``, ``acc per pos`` entries ``%.3f``). The lines here are written with those format strings;
tests/contract/test_llamacpp_contract.py has llama.cpp's own code write them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from orchestrator.engines.llamacpp.log import aggregate_llamacpp, parse_llamacpp, recover_request_steps
from orchestrator.engines.llamacpp.samples import LlamaRequestSample
from orchestrator.engines.samples import recover_steps
from orchestrator.metrics import parse_window


def line(accepted: int, generated: int, steps: int, counts: list[int] | None, task: int = 1) -> str:
    prefix = f"slot print_timing: id  0 | task {task} | "
    mean = 1.0 + accepted / steps
    text = f"{prefix}draft acceptance = {accepted / generated:0.5f} ({accepted:5d} accepted / {generated:5d} generated)"
    text += f", mean len = {mean:5.2f}\n"
    if counts is not None:
        text += f"{prefix}     acc per pos = ({', '.join(f'{c / steps:.3f}' for c in counts)})\n"
    return text


def requests(text: str) -> list[LlamaRequestSample]:
    return [s for s in parse_llamacpp(text).samples if isinstance(s, LlamaRequestSample)]


def test_the_mean_alone_gives_a_range_and_the_old_reading_missed() -> None:
    # 700 steps, 1403 accepted: 1 + 1403 / 700 = 3.004, printed 3.00, which 700 to 703 steps all give.
    assert recover_request_steps(1403, 3.00, 2800) == (702, 700, 703)
    assert recover_steps(1403, 3.00) == (702, False)  # the nearest count, 2 too many


def test_the_rates_settle_the_count() -> None:
    # 697 steps accepted 2 drafts, 3 accepted 3: counts per position 700, 700, 3, 0 (sum 1403).
    assert recover_request_steps(1403, 3.00, 2800, [1.0, 1.0, 0.004, 0.0]) == (700, 700, 700)


def test_rates_that_fit_no_count_fall_back_to_the_mean() -> None:
    # Two positions cannot hold 46 accepted tokens in 9 steps: not a line llama.cpp printed.
    assert recover_request_steps(46, 6.11, 123, [0.444, 0.333]) == (9, 9, 9)


def test_the_drafted_tokens_cap_the_count() -> None:
    # 1 accepted, mean printed 1.00: the mean says at least 200 steps; 150 drafted tokens say at most 150.
    assert recover_request_steps(1, 1.00, 150) == (None, None, None)
    steps, low, high = recover_request_steps(1, 1.00, 400)
    assert (low, high) == (200, 400)
    assert steps is not None and 200 <= steps <= 400


def test_nothing_accepted() -> None:
    assert recover_request_steps(0, 1.00, 21) == (None, 1, 21)
    assert recover_request_steps(0, 1.00, 1) == (1, 1, 1)  # one drafted token: one step


def test_window_exactness_bounded_then_exact() -> None:
    # A long request without the per-position line (default log level) and a short one.
    text = line(1403, 2800, 700, None) + line(6, 12, 4, None, task=2)
    wm = parse_window("llamacpp", text)
    exact = wm.exactness["accept_len"]
    assert exact["kind"] == "bounded"
    assert exact["bounds"] == pytest.approx([1 + 1409 / 707, 1 + 1409 / 704])
    assert exact["bounds"][0] <= 1 + 1409 / 704 <= exact["bounds"][1]  # the truth
    assert wm.details["verify_steps_bounds"] == [704, 707]
    assert wm.exactness["acceptance_rate"]["kind"] == "exact"
    # At -lv 4 the rates settle both.
    text = line(1403, 2800, 700, [700, 700, 3, 0]) + line(6, 12, 4, [3, 2, 1], task=2)
    wm = parse_window("llamacpp", text)
    assert wm.accept_len == pytest.approx(1 + 1409 / 704)
    assert wm.exactness["accept_len"]["kind"] == "exact"
    assert wm.exactness["per_position_acceptance"]["kind"] == "exact"
    assert wm.details["accepted_per_position"] == [703, 702, 4, 0]


def test_per_position_rounded_when_a_rate_allows_two_counts() -> None:
    # 2000 steps: a 3-decimal rate spans two integer counts, so the counts are not settled.
    counts = [1999, 1001]
    text = line(sum(counts), 4000, 2000, counts)
    (req,) = requests(text)
    figures = aggregate_llamacpp([req])
    assert figures["exactness"]["per_position_acceptance"]["kind"] == "rounded"
    assert figures["exactness"]["per_position_acceptance"]["resolution"] == pytest.approx(0.001)


def test_eval_time_figures_are_rounded_with_bounds() -> None:
    text = (
        "slot print_timing: id  0 | task 1 |        eval time =     100.00 ms /    11 tokens (    9.09 ms per token, "
        "  110.00 tokens per second)\n"
    )
    figures = aggregate_llamacpp(requests(text))
    exact = figures["exactness"]["predicted_per_second"]
    assert exact["kind"] == "rounded" and exact["resolution"] == 0.01
    assert exact["bounds"] == pytest.approx([10_000 / 100.005, 10_000 / 99.995])
    assert figures["details"]["predicted_per_second"] == pytest.approx(100.0)


DATA = Path(__file__).resolve().parent.parent / "data" / "llamacpp"


@pytest.mark.parametrize(
    "capture",
    [p for p in sorted(DATA.glob("*.log")) if "accepted" in p.read_text() and p.with_suffix(".metrics.after").exists()],
    ids=lambda p: p.stem,
)
def test_real_captures_steps_are_settled_and_match_the_counter(capture: Path) -> None:
    """The real llama-server's lines (tests/data/llamacpp/): where every request accepted something, each
    request's steps are settled and their sum is the verify-step counter llama.cpp exported."""
    reqs = [r for r in requests(capture.read_text()) if r.accepted is not None]
    figures = aggregate_llamacpp(reqs)
    counter = re.compile(r"^llamacpp:spec_decode_num_drafts_total (\S+)$", re.MULTILINE)
    after = counter.search(capture.with_suffix(".metrics.after").read_text())
    before = counter.search(capture.with_suffix(".metrics.before").read_text())
    assert after is not None and before is not None
    drafts = float(after.group(1)) - float(before.group(1))
    if all(r.accepted for r in reqs):
        assert figures["exactness"]["accept_len"]["kind"] == "exact"
        assert figures["details"]["verify_steps"] == drafts
    else:  # a request that accepted nothing: only bounds, and they hold the counter's count
        assert figures["accept_len"] is None
        low, high = figures["details"]["verify_steps_bounds"]
        assert low <= drafts <= high
