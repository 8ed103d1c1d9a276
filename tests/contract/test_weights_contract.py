"""Weights and denominators the log does not print, on the engines' own output (issue 27).

- SGLang: ``SchedulerMetricsReporter.report_decode_stats`` (metrics_reporter.py, 0.5.23) prints each interval's
  accept len = spec_num_accept_tokens / spec_num_forward_ct, where forward_ct sums the batch sizes of the
  interval's decode batches (``update_spec_metrics``), and ``#running-req: len(batch.reqs)`` of the last batch
  only. A point's draining tail makes the two differ; specsweep must give the window's figures as bounded, with
  bounds that hold the formula's value over the same counts, never the #running-req-weighted mean as exact.
- vLLM: ``LoggingStatLogger.log`` (loggers.py, 0.33.0; the oracle prints its line from its format parts and
  applies its idle rule) logs an interval at DEBUG when it and the previous one were idle, and
  ``SpecDecodingLogging.log`` (spec_decode/metrics.py, run as it is) logs with the same level. With two DP
  engines of unequal load the INFO log lacks intervals of the idle one; the window's throughput must be the
  engines' tokens over the window's seconds.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from orchestrator.metrics import parse_window
from tests.contract.test_sglang_contract import CURRENT as SGLANG
from tests.contract.test_sglang_contract import formula, journal, rank, run_oracle
from tests.contract.test_vllm_contract import CURRENT as VLLM
from tests.contract.test_vllm_contract import make_interval, run, vllm_sources


def _steps(sizes: list[int], commit: int, dt: float) -> list[dict[str, Any]]:
    """Decode batches of the given sizes, each request committing ``commit`` tokens (``commit - 1`` drafts)."""
    return [{"bs": bs, "correct_drafts": bs * (commit - 1), "dt": dt} for bs in sizes]


def test_sglang_draining_tail_gives_bounded_figures_that_hold_the_engines(tmp_path: Path) -> None:
    plan = _steps([8] * 12, 3, 0.01) + _steps([6, 5, 3, 1], 2, 0.012)
    result = run_oracle(SGLANG, {"decode_log_interval": 4, "ranks": [rank({}, plan)]}, tmp_path)
    text = journal(result)
    # SGLang prints the last batch's size: the drain's line says 1 request where its interval averaged 3.75.
    assert text.splitlines()[-1].split("] ", 1)[1].startswith("Decode batch, #running-req: 1, ")
    kept = formula(plan, 4)[1:]  # the runner's window drops the line that began before it
    forward = sum(w["tokens"] / w["accept_len"] for w in kept)  # spec_num_forward_ct: the batch sizes summed
    truth = {
        "accept_len": sum(w["tokens"] for w in kept) / forward,
        "acceptance_rate": sum(w["accept_rate"] * w["tokens"] / w["accept_len"] for w in kept) / forward,
        "gen_throughput": sum(w["tokens"] for w in kept) / sum(w["seconds"] for w in kept),
    }
    wm = parse_window("sglang", text, cut=True, version=SGLANG)
    # What #running-req weighting said, as if exact: 8, 8 and 1 "verify steps" per line.
    by_running = (8 * kept[0]["accept_len"] + 8 * kept[1]["accept_len"] + 1 * kept[2]["accept_len"]) / 17
    assert by_running > truth["accept_len"] * 1.03
    for figure, value in truth.items():
        entry = wm.exactness[figure]
        assert entry["kind"] == "bounded", figure
        low, high = entry["bounds"]
        assert low <= value <= high, (figure, value, entry["bounds"])
        assert low <= getattr(wm, figure) <= high
    assert "sglang:spec_verify_calls_total" in wm.exactness["accept_len"]["note"]


def _rounds_scenario(k: int, active: dict[int, list[bool]], rng: random.Random) -> tuple[dict[str, Any], list[int]]:
    """Events for rounds of 10 s in which each engine works (a few steps) or idles; the tokens vLLM's
    generation counter adds per round (accepted + 1 per draft, as the oracle counts them)."""
    events: list[dict[str, Any]] = []
    generated: list[int] = []
    rounds = len(next(iter(active.values())))
    for r in range(rounds):
        total = 0
        for engine, works in active.items():
            if works[r]:
                interval = make_interval(rng, k, 0.7, full=True, steps=30, batch=2)
                for step in interval.steps:
                    events.append({"op": "step", "engine": engine, "drafts": step})
                total += interval.accepted + interval.drafts
        events += [{"op": "advance", "s": 10.0}, {"op": "log"}]
        generated.append(total)
    return {"k": k, "engines": sorted(active), "model": "m", "events": events}, generated


def test_vllm_idle_engine_intervals_at_debug_count_in_the_window() -> None:
    root = vllm_sources(VLLM)
    rng = random.Random(27)
    # Engine 1 works in rounds 0-1, idles in 2-4 (round 2 printed as 0.0, 3 and 4 at DEBUG), works in 5.
    active = {0: [True] * 6, 1: [True, True, False, False, False, True]}
    scenario, generated = _rounds_scenario(3, active, rng)
    result = run("vllm_oracle.py", root, scenario)
    text = result["log_text"]
    assert text.count("Engine 001:") == 4  # rounds 3 and 4 are not in the INFO log
    wm = parse_window("vllm", text, cut=True)
    truth = sum(generated[1:]) / (10.0 * 5)  # rounds 1-5: the window cut the first
    entry = wm.exactness["gen_throughput"]
    assert entry["kind"] == "rounded"
    assert entry["bounds"][0] <= truth <= entry["bounds"][1]
    assert wm.gen_throughput == pytest.approx(truth, abs=0.1)
    # Averaging each engine's printed lines overstates it: engine 1's idle rounds are missing from its mean.
    assert wm.details["gen_throughput_lines_mean"] > truth * 1.05
    assert wm.details["hidden_intervals"] == 2
    # The spec lines' counts are integers: the accept length stays exact.
    assert wm.exactness["accept_len"]["kind"] == "exact"
    assert wm.exactness["acceptance_rate"]["kind"] == "exact"
