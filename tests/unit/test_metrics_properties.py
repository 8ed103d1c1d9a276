"""Property tests: no parser raises on arbitrary text, counts stay consistent, printed values round-trip."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.engines.samples import recover_steps
from orchestrator.engines.sglang.log import parse_sglang
from orchestrator.engines.vllm.log import parse_vllm
from orchestrator.metrics import parse_window, scrape_delta

ENGINES = ("sglang", "sim", "vllm", "llamacpp")

# Fragments of real lines, so that random text often gets past the markers into the field readers.
FRAGMENTS = [
    "Decode batch",
    "Decode batch. ",
    " [12], ",
    "#running-req: ",
    "accept len: ",
    "accept rate: ",
    "gen throughput (token/s): ",
    "cuda graph: True",
    "#queue-req: ",
    "accept-len ",
    "DDTREE metrics: ",
    "bs=",
    "=",
    "avg_commit_len=",
    "SpecDecoding metrics: ",
    "Mean acceptance length: ",
    "Accepted: ",
    "Drafted: ",
    " tokens",
    "Per-position acceptance rate: ",
    ", Avg Draft acceptance rate: ",
    "%",
    "Engine 000: ",
    "Avg prompt throughput: ",
    "Avg generation throughput: ",
    " tokens/s",
    "draft acceptance = ",
    "draft acceptance rate = ",
    " accepted / ",
    " generated)",
    ", mean len = ",
    "acc per pos = (",
    ")",
    "slot print_timing: id  3 | task 1 | ",
    "| task ",
    "eval time = ",
    "prompt eval time = ",
    " ms / ",
    "total time = ",
    "#gen drafts = ",
    "statistics draft: ",
    "[2026-05-30 00:39:10 TP0] ",
    "[",
    "]",
    ", ",
    "\n",
    "\r\n",
    "nan",
    "inf",
    "-1",
    "0",
    "1.5",
    "1e309",
    "3.52",
    '"',
    "{",
    "}",
    "\x00",
    "é",
]
texty = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=8)), max_size=40).map("".join)
numbers = st.floats(min_value=0, max_value=1e6, allow_nan=False, allow_infinity=False)


@settings(max_examples=150, deadline=None)
@given(text=st.one_of(st.text(), texty), engine=st.sampled_from(ENGINES))
def test_no_parser_raises_and_counts_are_consistent(text: str, engine: str) -> None:
    wm = parse_window(engine, text, [("u", r"(?P<n>\d+)")])
    assert wm.lines_matched + wm.lines_skipped + wm.lines_duplicate <= wm.lines_total
    json.dumps(wm.to_dict(), allow_nan=False)


@settings(max_examples=100, deadline=None)
@given(before=st.one_of(st.text(), texty), after=st.one_of(st.text(), texty), engine=st.sampled_from(ENGINES))
def test_prometheus_never_raises(before: str, after: str, engine: str) -> None:
    data = scrape_delta(before, after, engine, during=[after], elapsed_s=1.0).to_dict()
    json.dumps(data, allow_nan=False)


@settings(max_examples=100, deadline=None)
@given(
    running=st.integers(0, 4096),
    accept_len=st.floats(1, 64, allow_nan=False),
    accept_rate=st.floats(0, 1, allow_nan=False),
    throughput=numbers,
    queue=st.integers(0, 10_000),
    head=st.sampled_from(["Decode batch, ", "Decode batch. ", "Decode batch [7], "]),
    graph=st.sampled_from(["cuda", "cpu", "npu"]),
    tail=st.sampled_from([", ", ""]),
)
def test_sglang_printed_values_round_trip(
    running: int, accept_len: float, accept_rate: float, throughput: float, queue: int, head: str, graph: str, tail: str
) -> None:
    line = (
        f"{head}#running-req: {running}, #token: 5, token usage: 0.01, accept len: {accept_len:.2f}, "
        f"accept rate: {accept_rate:.2f}, {graph} graph: True, gen throughput (token/s): {throughput:.2f}, "
        f"#queue-req: {queue}{tail}"
    )
    (sample,) = parse_sglang(line).samples
    assert sample.running_req == running  # type: ignore[attr-defined]
    assert sample.accept_len == float(f"{accept_len:.2f}")  # type: ignore[attr-defined]
    assert sample.accept_rate == float(f"{accept_rate:.2f}")  # type: ignore[attr-defined]
    assert sample.gen_throughput == float(f"{throughput:.2f}")  # type: ignore[attr-defined]
    assert sample.queue_req == queue  # type: ignore[attr-defined]
    assert sample.graph == graph  # type: ignore[attr-defined]


@settings(max_examples=200, deadline=None)
@given(drafts=st.integers(1, 100_000), k=st.integers(1, 8), data=st.data())
def test_vllm_drafts_recovered_from_the_printed_line(drafts: int, k: int, data: st.DataObject) -> None:
    accepted = data.draw(st.integers(0, drafts * k))
    mean_len = 1 + accepted / drafts
    # vLLM's rates are integer counts over the drafts (position i: drafts that accepted i+1 tokens or more) that
    # add up to the accepted tokens: fill the positions in turn, a realisable split.
    counts = [min(drafts, max(0, accepted - i * drafts)) for i in range(k)]
    rates = ", ".join(f"{c / drafts:.3f}" for c in counts)
    line = (
        f"SpecDecoding metrics: Mean acceptance length: {mean_len:.2f}, Accepted throughput: 1.00 tokens/s, "
        f"Drafted throughput: 2.00 tokens/s, Accepted: {accepted} tokens, Drafted: {drafts * k} tokens, "
        f"Per-position acceptance rate: {rates}, Avg Draft acceptance rate: 50.0%"
    )
    (sample,) = parse_vllm(line).samples
    # Every draft had k tokens, so drafted / k is exact and always fits the rounding bounds.
    assert sample.drafts == drafts  # type: ignore[attr-defined]


@settings(max_examples=200, deadline=None)
@given(steps=st.integers(1, 100_000), data=st.data())
def test_recovered_steps_reproduce_the_printed_mean(steps: int, data: st.DataObject) -> None:
    accepted = data.draw(st.integers(1, steps * 16))
    printed = round(1 + accepted / steps, 2)
    recovered, exact = recover_steps(accepted, printed)
    if recovered is None:
        assert printed == 1.0  # only a lower bound is known then
        return
    assert round(1 + accepted / recovered, 2) == printed
    if exact:
        assert recovered == steps
