"""The figures of a run, from records with known times."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.engines.llamacpp.responses import LLAMACPP_TIMINGS
from orchestrator.engines.responses import SpecFigures
from orchestrator.engines.sglang.responses import SGLANG_SGLEXT
from orchestrator.load.records import RequestRecord
from orchestrator.load.stats import distribution, spec_summary, steady_window, summarize
from orchestrator.metrics import scrape_delta


def record(
    index: int,
    sent: float,
    ttft: float,
    gaps: list[float],
    tokens: list[int] | None = None,
    **extra: object,
) -> RequestRecord:
    """A finished request: first chunk ``ttft`` after ``sent``, then one chunk per gap."""
    times = [sent + ttft]
    for gap in gaps:
        times.append(times[-1] + gap)
    counts = tokens or [1] * len(times)
    r = RequestRecord(index=index, dispatched=sent, sent=sent, first_token=times[0], end=times[-1], **extra)  # type: ignore[arg-type]
    r.chunk_times = times
    r.chunk_tokens = counts
    r.output_tokens = sum(counts)
    return r


def test_distribution() -> None:
    d = distribution([0.001, 0.002, 0.003, 0.004])
    assert d["mean"] == pytest.approx(2.5)
    assert d["p50"] == pytest.approx(2.5)
    assert d["p90"] == pytest.approx(3.7)
    assert distribution([]) == {"mean": None, "p50": None, "p90": None, "p99": None}


def test_latencies_of_a_metronome_request() -> None:
    r = record(0, sent=10.0, ttft=0.05, gaps=[0.01] * 9)
    fig = summarize([r], open_loop=False, concurrency=1, started=10.0, ended=10.14)
    assert fig["ttft_ms"]["p50"] == pytest.approx(50.0)
    assert fig["itl_ms"]["p50"] == pytest.approx(10.0)
    assert fig["tpot_ms"]["p50"] == pytest.approx(10.0)
    assert fig["e2e_ms"]["p50"] == pytest.approx(140.0)
    assert fig["output_tokens"] == 10
    assert fig["duration_s"] == pytest.approx(0.14)
    assert fig["output_tok_s"] == pytest.approx(10 / 0.14, rel=1e-3)
    assert fig["per_user_tok_s"] == pytest.approx(100.0)


def test_a_chunk_of_several_tokens_spreads_its_gap() -> None:
    # 30 ms after the first chunk, a chunk of 3 tokens: three inter-token samples of 10 ms, not one of 30.
    r = record(0, sent=0.0, ttft=0.02, gaps=[0.03], tokens=[1, 3])
    fig = summarize([r], open_loop=False, concurrency=1, started=0.0, ended=0.05)
    assert fig["itl_ms"]["mean"] == pytest.approx(10.0)
    assert fig["output_tokens"] == 4
    assert fig["tpot_ms"]["mean"] == pytest.approx(10.0)


def test_errors_are_counted_by_kind_and_left_out_of_latencies() -> None:
    good = record(0, sent=0.0, ttft=0.1, gaps=[0.01])
    bad = RequestRecord(index=1, sent=0.0, end=0.5)
    bad.fail("http_500", "HTTP 500: boom")
    refused = RequestRecord(index=2, sent=0.0, end=0.001)
    refused.fail("connect", "refused")
    fig = summarize([good, bad, refused], open_loop=False, concurrency=3, started=0.0, ended=0.5)
    assert fig["requests"] == 3
    assert fig["completed"] == 1
    assert fig["errors"] == 2
    assert fig["errors_by_kind"] == {"connect": 1, "http_500": 1}
    assert fig["ttft_ms"]["p50"] == pytest.approx(100.0)
    assert fig["output_tokens"] == 2


def test_closed_loop_steady_window_excludes_ramp_up_and_drain() -> None:
    # C=2, four requests: 0 and 1 start at 0; 2 starts when 0 ends; 3 when 1 ends (the last dispatch).
    r0 = record(0, sent=0.0, ttft=0.1, gaps=[0.1] * 4)  # ends 0.5
    r1 = record(1, sent=0.0, ttft=0.3, gaps=[0.1] * 4)  # first token 0.3, ends 0.7
    r2 = record(2, sent=0.5, ttft=0.1, gaps=[0.1] * 4)  # ends 1.0
    r3 = record(3, sent=0.7, ttft=0.1, gaps=[0.1] * 4)  # ends 1.2
    window = steady_window([r0, r1, r2, r3], open_loop=False, concurrency=2)
    # From the first wave's last first token (0.3) to the first end after the last dispatch at 0.7 (r1, 0.7).
    assert window == pytest.approx((0.3, 0.7))
    fig = summarize([r0, r1, r2, r3], open_loop=False, concurrency=2, started=0.0, ended=1.2)
    assert fig["steady_window_s"] == pytest.approx(0.4)
    # Tokens inside [0.3, 0.7]: r0 at .3,.4,.5; r1 at .3,.4,.5,.6,.7; r2 at .6,.7 -> 10
    assert fig["steady_output_tok_s"] == pytest.approx(10 / 0.4)


def test_open_loop_steady_window() -> None:
    r0 = record(0, sent=0.0, ttft=0.1, gaps=[0.1])  # ends 0.2
    r1 = record(1, sent=0.5, ttft=0.1, gaps=[0.1])
    r2 = record(2, sent=0.9, ttft=0.1, gaps=[0.1])
    assert steady_window([r0, r1, r2], open_loop=True, concurrency=None) == pytest.approx((0.2, 0.9))


def test_no_steady_window_falls_back_to_the_plain_figure() -> None:
    r0 = record(0, sent=0.0, ttft=0.1, gaps=[])
    fig = summarize([r0], open_loop=True, concurrency=None, started=0.0, ended=0.1)
    assert fig["steady_window_s"] is None
    assert fig["steady_output_tok_s"] == fig["output_tok_s"]


def test_spec_from_sglang_and_llamacpp_metadata() -> None:
    sglang = [
        record(i, 0.0, 0.1, [0.1] * 9, spec=SpecFigures(SGLANG_SGLEXT, 4)) for i in range(2)
    ]  # 10 tokens, 4 steps
    assert spec_summary(sglang)["accept_len"] == pytest.approx(9 / 4)  # the first token came from prefill
    assert spec_summary(sglang)["accept_len_engine"] == pytest.approx(10 / 4)  # SGLang's completion / verify_ct
    assert spec_summary(sglang)["verify_steps"] == 8
    llama_spec = SpecFigures(LLAMACPP_TIMINGS, accepted_drafts=6, proposed_drafts=12)
    llama = [record(0, 0.0, 0.1, [0.1] * 9, spec=llama_spec)]  # 10 tokens, 6 accepted: 4 passes
    summary = spec_summary(llama)
    assert (summary["draft_n"], summary["draft_n_accepted"]) == (12, 6)
    assert summary["acceptance_rate"] == pytest.approx(0.5)
    assert summary["tokens_per_pass"] == pytest.approx(2.5)
    # No step count in llama.cpp's timings: its mean length (tokens per step that verified a draft) is not
    # tokens per pass, so the responses give no accept length to set against the log's or the counters'.
    assert summary["accept_len"] is None and summary["verify_steps"] is None
    assert spec_summary([record(0, 0.0, 0.1, [])])["accept_len"] is None


def test_llamacpp_timings_against_the_same_servers_counters() -> None:
    """On a real capture: the rate from timings is the counters' rate; tokens per pass is well below the mean
    length (the n-gram drafter proposes nothing at many steps), which is why it is not called accept_len."""
    data = Path(__file__).resolve().parents[1] / "data" / "llamacpp"
    capture = json.loads((data / "ngram-simple-n3-m16.summary.json").read_text())
    responses = []
    for i, request in enumerate(capture["requests"]):
        timings = request["timings"]
        spec = SpecFigures(
            LLAMACPP_TIMINGS, accepted_drafts=timings["draft_n_accepted"], proposed_drafts=timings["draft_n"]
        )
        r = RequestRecord(index=i, spec=spec)
        r.output_tokens = request["completion_tokens"]
        responses.append(r)
    summary = spec_summary(responses)
    counters = scrape_delta(
        (data / "ngram-simple-n3-m16.metrics.before").read_text(),
        (data / "ngram-simple-n3-m16.metrics.after").read_text(),
        "llamacpp",
    )
    assert counters.acceptance_rate is not None and counters.accept_len is not None
    assert summary["acceptance_rate"] == pytest.approx(counters.acceptance_rate, rel=1e-5)
    assert summary["accept_len"] is None
    assert 1.0 < summary["tokens_per_pass"] < 0.75 * counters.accept_len


def test_empty_run() -> None:
    fig = summarize([], open_loop=False, concurrency=4, started=None, ended=None)
    assert fig["requests"] == 0
    assert fig["output_tok_s"] == 0.0
    assert fig["ttft_ms"]["p50"] is None
