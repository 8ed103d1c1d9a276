"""The simulator's faults for issue 27's weights: ``drain-tail`` (answers of unequal length, so a point ends
on a draining batch that SGLang's #running-req does not describe) and ``idle-debug-intervals`` (vLLM's
data-parallel engines of unequal load, whose idle intervals vLLM logs at DEBUG). Each imitates the engine's
own code (the dialect modules and faults.py cite it); the ``--truth-log`` holds what the engine counted and did
not print, for the tests that check a figure against it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.errors import ConfigError
from orchestrator.metrics import parse_window
from orchestrator.sim.config import parse_args
from orchestrator.sim.dialects import make_dialect
from orchestrator.sim.faults import Faults, parse_faults
from orchestrator.sim.stats import Counts, ServerStats


def test_the_faults_parse() -> None:
    faults = parse_faults(["drain-tail", "idle-debug-intervals=3"])
    assert (faults.drain_tail, faults.idle_debug_engines) == (True, 3)
    assert parse_faults(["idle-debug-intervals"]).idle_debug_engines == 2
    assert parse_faults([]) == Faults()
    with pytest.raises(ConfigError, match="between 2 and 64"):
        parse_faults(["idle-debug-intervals=1"])


def test_idle_debug_intervals_runs_vllm_engines_only() -> None:
    assert parse_args(["--engine", "vllm", "--fault", "idle-debug-intervals=3"]).schedulers == 3
    assert parse_args(["--dp-size", "2", "--tp-size", "2"]).schedulers == 2
    with pytest.raises(ConfigError, match="vllm dialect"):  # refused where the dialect is made
        make_dialect(parse_args(["--fault", "idle-debug-intervals"]), lambda line: None)


def test_drain_tail_lengths_are_uniform_and_the_truth_knows_them() -> None:
    config = parse_args(["--profile", "tiny", "--algorithm", "linear", "--draft-tokens", "4", "--fault", "drain-tail"])
    plain = parse_args(["--profile", "tiny", "--algorithm", "linear", "--draft-tokens", "4"])
    # Shorter answers: each one's last verify step is cut, so the tokens per step of the load differ.
    assert config.expected_accept_length(max_tokens=32) != plain.expected_accept_length(max_tokens=32)
    assert config.expected_accept_length(max_tokens=32, ignore_eos=True) == plain.expected_accept_length(
        max_tokens=32, ignore_eos=True
    )


def _vllm(tmp_path: Path, engines: int) -> tuple[object, list[str], Path]:
    lines: list[str] = []
    truth = tmp_path / "truth.jsonl"
    argv = ["--profile", "tiny", "--engine", "vllm", "--algorithm", "linear", "--draft-tokens", "3"]
    argv += ["--fault", f"idle-debug-intervals={engines}", "--truth-log", str(truth)]
    d = make_dialect(parse_args(argv), lines.append)
    d.groups = [ServerStats(model="sim", speculative=True) for _ in range(d.config.schedulers)]
    d.drafted = d.draft_depth = 3
    d.setup_groups()
    return d, lines, truth


def _step(requests: int) -> Counts:
    c = Counts(steps=1, request_steps=requests, tokens=3 * requests)
    c.drafts, c.draft_tokens, c.accepted = requests, 3 * requests, 2 * requests
    for _ in range(requests):
        c.count(2)
    return c


def test_vllm_routes_to_the_engine_with_fewest_in_flight(tmp_path: Path) -> None:
    # DPLBAsyncMPClient.get_core_engine_for_request: the least loaded engine, the scan start turning each time.
    d, _, _ = _vllm(tmp_path, 3)
    assert [d.route([0, 0, 0], i) for i in range(4)] == [0, 1, 2, 0]  # ties: the turning start decides
    assert d.route([2, 0, 1], 0) == 1
    assert d.route([1, 1, 0], 0) == 2


def test_vllm_engines_log_in_order_and_idle_ones_at_debug(tmp_path: Path) -> None:
    d, lines, truth = _vllm(tmp_path, 2)
    start = d._engines[0].last_log  # type: ignore[attr-defined]
    for r in range(1, 5):
        d.decode_step(0, _step(2), start + r - 0.5)  # type: ignore[attr-defined]
        if r == 1:
            d.decode_step(1, _step(1), start + 0.5)  # type: ignore[attr-defined]
        d.tick(start + r)  # type: ignore[attr-defined]
    engine_lines = [line for line in lines if "Avg generation throughput" in line]
    # Round 1: both; round 2: engine 1's 0.0 (its previous interval worked); rounds 3, 4: engine 0 only.
    assert [line.split("Engine ")[1][:3] for line in engine_lines] == ["000", "001", "000", "001", "000", "000"]
    records = [json.loads(line) for line in truth.read_text().splitlines()]
    assert [(r["round"], r["engine_index"], r["printed"]) for r in records] == [
        (1, 0, True), (1, 1, True), (2, 0, True), (2, 1, True), (3, 0, True), (3, 1, False), (4, 0, True), (4, 1, False)
    ]  # fmt: skip
    wm = parse_window("vllm", "\n".join(lines) + "\n")
    generated = sum(r["generated"] for r in records)
    seconds = sum(r["seconds"] for r in records if r["engine_index"] == 0)
    assert wm.gen_throughput == pytest.approx(generated / seconds, abs=0.1)
    assert wm.details["hidden_intervals"] == 2
    text = d.metrics_text()  # type: ignore[attr-defined]
    assert 'vllm:generation_tokens_total{engine="1",model_name="sim"} 3.0' in text


def test_sglang_truth_log_holds_the_sums_the_line_does_not_print(tmp_path: Path) -> None:
    truth = tmp_path / "truth.jsonl"
    lines: list[str] = []
    argv = ["--profile", "tiny", "--algorithm", "linear", "--draft-tokens", "3", "--decode-log-interval", "2"]
    d = make_dialect(parse_args([*argv, "--truth-log", str(truth)]), lines.append)
    d.groups = [ServerStats(model="sim", speculative=True)]
    d.drafted = d.draft_depth = 3
    d.setup_groups()
    d.groups[0].running = 1  # the batch that prints the line: one request
    d.decode_step(0, _step(4), 1.0)
    d.decode_step(0, _step(1), 1.1)
    (record,) = [json.loads(line) for line in truth.read_text().splitlines()]
    assert (record["tokens"], record["forward"], record["running"]) == (15, 5, 1)
    assert record["message"] in lines[0]
