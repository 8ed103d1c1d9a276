"""Windows that are not whole, made by the engines' own code: a restart inside a window and a line pair cut apart.

- vLLM 0.33.0: two runs of ``vllm_oracle.py`` are two processes (two pids in vLLM's own log prefix), each
  starting with the banner vLLM's ``log_version_and_model`` prints (entrypoints/common/startup.py), then its
  ``LoggingStatLogger``-ordered Engine and spec lines (``SpecDecodingLogging.log``); a window cursor placed
  between an ``Engine 000:`` line and its spec line, at either edge.
- SGLang 0.5.23: two runs of ``sglang_oracle.py`` (``SchedulerMetricsReporter``: its ``last_decode_stats_tic``
  is set when the reporter is made, so the new process's first ``Decode batch`` line spans its start-up). The
  ``server_args=`` line between them is written as ``Engine._launch_subprocesses`` formats it
  (entrypoints/engine.py): that code needs the whole server, so it does not run here.
- llama.cpp: two real captures of the vendored llama-server (tests/data/llamacpp/), one after the other as a
  journal holds a restarted unit's two processes.

Each checks that the window's figures are the engine's own over the whole part (the new process's intervals
after its first, the whole pairs) and that the window says why (``integrity``).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from orchestrator.engines.sglang.samples import SglangDecodeSample
from orchestrator.metrics import parse_window
from tests.contract.test_sglang_contract import PRINTED, formula, journal, rank, run_oracle, steps
from tests.contract.test_vllm_contract import CURRENT, Interval, Truth, log_text, make_interval, run, vllm_sources

DATA = Path(__file__).resolve().parents[1] / "data" / "llamacpp"


@pytest.fixture(scope="module")
def current() -> Path:
    return vllm_sources(CURRENT)


def rounds(k: int, per_engine: dict[int, list[Interval]], *, start: bool = False, load_s: float = 0.0) -> dict:
    """One process: optionally its start-up banner and ``load_s`` seconds of loading, then per round every
    engine's steps, 10 s, and one log() of all engines."""
    events: list[dict[str, Any]] = [{"op": "start"}] if start else []
    if load_s:
        events.append({"op": "advance", "s": load_s})
    for r in range(max(len(v) for v in per_engine.values())):
        for engine, intervals in per_engine.items():
            for step in intervals[r].steps:
                events.append({"op": "step", "engine": engine, "drafts": step})
        events += [{"op": "advance", "s": 10.0}, {"op": "log"}]
    return {"k": k, "engines": sorted(per_engine), "model": "m", "events": events}


def lines_of(text: str) -> list[str]:
    return text.splitlines()


def joined(lines: list[str]) -> str:
    return "\n".join(lines) + "\n"


def index_of(lines: list[str], marker: str, n: int) -> int:
    """The index of the ``n``-th line (from 0) holding ``marker``."""
    return [i for i, line in enumerate(lines) if marker in line][n]


# -- vLLM: a pair cut by the window's edge -----------------------------------------------------------------------


def test_a_window_opening_between_an_engine_line_and_its_spec_line(current: Path) -> None:
    rng = random.Random(27)
    k = 3
    previous = make_interval(rng, k, 0.35, full=True, steps=60, batch=4)  # the previous point's last interval
    point = [make_interval(rng, k, 0.8, full=True, steps=60, batch=4) for _ in range(3)]
    lines = lines_of(log_text(run("vllm_oracle.py", current, rounds(k, {0: [previous, *point]}))))
    cursor = index_of(lines, "Engine 000:", 0) + 1  # the cursor falls right after the first Engine line
    window = parse_window("vllm", joined(lines[cursor:]), cut=True)
    truth = Truth(point).figures(k)
    assert window.accept_len == pytest.approx(truth["accept_len"], rel=1e-12)
    assert window.acceptance_rate == pytest.approx(truth["acceptance_rate"], rel=1e-12)
    # What the pairing did before: the orphan kept as a group of its own, the first real interval dropped.
    before = Truth([previous, *point[1:]]).figures(k)
    assert before["accept_len"] != pytest.approx(truth["accept_len"], abs=0.01)
    assert window.integrity.names() == ["cut_pair"] and window.integrity.part == "whole_pairs"


def test_data_parallel_window_opening_between_a_pair(current: Path) -> None:
    rng = random.Random(5)
    k = 3
    per_engine = {
        0: [make_interval(rng, k, a, full=True, steps=40, batch=4) for a in (0.3, 0.3, 0.85, 0.85)],
        1: [make_interval(rng, k, a, full=True, steps=40, batch=4) for a in (0.3, 0.3, 0.6, 0.6)],
    }
    lines = lines_of(log_text(run("vllm_oracle.py", current, rounds(k, per_engine))))
    # Round 1 prints E0 S0 E1 S1: the cursor falls between its E0 and S0.
    cursor = index_of(lines, "Engine 000:", 1) + 1
    window = parse_window("vllm", joined(lines[cursor:]), cut=True)
    # Engine 0: its round-1 spec line is its edge (an orphan); engine 1: its round-1 interval began before.
    truth = Truth(per_engine[0][2:] + per_engine[1][2:]).figures(k)
    assert window.accept_len == pytest.approx(truth["accept_len"], rel=1e-12)
    assert window.acceptance_rate == pytest.approx(truth["acceptance_rate"], rel=1e-12)
    assert window.integrity.names() == ["cut_pair"]


def test_a_window_closing_between_an_engine_line_and_its_spec_line(current: Path) -> None:
    rng = random.Random(11)
    k = 4
    intervals = [make_interval(rng, k, a, full=False, steps=50, batch=2) for a in (0.5, 0.7, 0.75, 0.2)]
    lines = lines_of(log_text(run("vllm_oracle.py", current, rounds(k, {0: intervals}))))
    end = index_of(lines, "Engine 000:", 3) + 1  # the window ends after the last Engine line
    window = parse_window("vllm", joined(lines[:end]), cut=True)
    truth = Truth(intervals[1:3]).figures(k)  # the first is the window's edge, the last lost its spec line
    assert window.accept_len == pytest.approx(truth["accept_len"], rel=1e-12)
    assert window.integrity.names() == ["cut_pair"]
    assert "after the window ended" in window.integrity.reasons[0]["detail"]


# -- a restart inside a window -----------------------------------------------------------------------------------


def test_vllm_restart_inside_a_window_gives_the_new_process_after_its_first_interval(current: Path) -> None:
    rng = random.Random(9)
    first = [make_interval(rng, 4, 0.85, full=True, steps=80, batch=8) for _ in range(3)]
    second = [make_interval(rng, 2, 0.5, full=True, steps=80, batch=8) for _ in range(4)]  # other draft settings
    a = lines_of(log_text(run("vllm_oracle.py", current, rounds(4, {0: first}, start=True))))
    b = log_text(run("vllm_oracle.py", current, rounds(2, {0: second}, start=True, load_s=480.0)))
    assert "█ ▀▄▀ █  version 0.33.0" in b  # vLLM's own banner, the logo form its formatter prints
    window_text = joined(a[index_of(a, "Engine 000:", 0) :]) + b  # opened on the running first process
    window = parse_window("vllm", window_text, cut=True)
    assert window.integrity.names() == ["restart"] and window.integrity.part == "since_restart"
    truth = Truth(second[1:]).figures(2)
    assert window.accept_len == pytest.approx(truth["accept_len"], rel=1e-12)
    assert window.acceptance_rate == pytest.approx(truth["acceptance_rate"], rel=1e-12)
    mixed = Truth(first[1:] + second).figures(2)["accept_len"]
    assert window.accept_len != pytest.approx(mixed, abs=0.01)
    # The new process's first interval spans its 480 s of loading; the figure leaves it out.
    printed = [
        float(line.split("Avg generation throughput: ")[1].split(" ")[0])
        for line in lines_of(b)
        if "Engine 000:" in line
    ]
    assert printed[0] < printed[1] / 10
    assert window.gen_throughput == pytest.approx(sum(printed[1:]) / len(printed[1:]), rel=1e-9)
    # Without its banner the pids of vLLM's prefix still tell the two processes apart.
    no_banner = "".join(line + "\n" for line in lines_of(window_text) if "startup.py" not in line)
    assert parse_window("vllm", no_banner, cut=True).integrity.names() == ["restart"]


def test_sglang_restart_inside_a_window_gives_the_new_process_after_its_start_up_line(tmp_path: Path) -> None:
    old_plan = steps(4, [11, 11, 12, 11] * 3, 0.01)
    new_plan = steps(4, [4, 5, 4, 5] * 3, 0.01)
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    old = run_oracle("0.5.23", {"decode_log_interval": 4, "ranks": [rank({}, old_plan)]}, tmp_path / "a")
    new = run_oracle(
        "0.5.23",
        {"decode_log_interval": 4, "num_draft_tokens": 3, "ranks": [rank({}, new_plan, idle_before=300.0)]},
        tmp_path / "b",
    )
    # entrypoints/engine.py Engine._launch_subprocesses: logger.info(f"server_args={...}") behind configure_logger's
    # "[%Y-%m-%d %H:%M:%S] " (utils/common.py), once per process start.
    start = "[2026-05-30 00:45:00] server_args={'model_path': 'm', 'speculative_num_draft_tokens': 3}\n"
    window = parse_window("sglang", journal(old) + start + journal(new), cut=True)
    assert window.integrity.names() == ["restart"]
    lines = formula(new_plan, 4)
    # SGLang's own first line of the new process divides its tokens by the time since scheduler init.
    printed = [
        s.gen_throughput for s in parse_window("sglang", journal(new)).samples if isinstance(s, SglangDecodeSample)
    ]
    assert printed[0] is not None and printed[0] < lines[0]["tokens"] / lines[0]["seconds"] / 100
    tokens = sum(w["tokens"] for w in lines[1:])
    forward = 4 * 4 * len(lines[1:])
    seconds = sum(w["seconds"] for w in lines[1:])
    assert window.accept_len == pytest.approx(tokens / forward, abs=PRINTED)
    assert window.gen_throughput == pytest.approx(tokens / seconds, rel=1e-3)
    mixed = parse_window("sglang", journal(old) + journal(new), cut=True)
    assert mixed.gen_throughput is not None and window.gen_throughput is not None
    assert mixed.gen_throughput < window.gen_throughput / 2


def test_llamacpp_restart_between_two_real_captures() -> None:
    first = (DATA / "ngram-simple-n3-m16.log").read_text()
    second = (DATA / "draft-simple-k8.log").read_text()
    window = parse_window("llamacpp", first + second)
    alone = parse_window("llamacpp", second)
    assert alone.integrity.whole and window.integrity.names() == ["restart"]
    assert window.accept_len == alone.accept_len and window.acceptance_rate == alone.acceptance_rate
    assert window.accept_len is not None
    both = parse_window("llamacpp", first)
    assert both.accept_len != window.accept_len  # the first capture's figures are another configuration's
