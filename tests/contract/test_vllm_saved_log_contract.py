"""``specsweep parse`` of a saved vLLM log whose last interval was never logged does not call its figures whole.

vLLM's own metrics code (``vllm_oracle.py``, 0.33.0: ``SpecDecodingLogging``, ``SpecDecodingProm``) logs two
intervals; then a request's last steps run and the server stops before its next tick (``LoggingStatLogger.log``,
vllm/v1/metrics/loggers.py, prints them only then). Its counters hold every step; its log does not. The last tick
printed says a request was running (``Running: %d reqs``), so the log itself shows it is short by an interval.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.metrics import parse_window, scrape_delta
from orchestrator.metrics.saved import open_end_of_saved_log
from tests.contract.test_vllm_contract import CURRENT, run, vllm_sources
from tests.reliability.harness import cli_env, run_cli

K = 3
LOGGED = [[(K, 3)], [(K, 3)], [(K, 3)], [(K, 3)]]  # every draft accepted: 4.000 per step in the log
TAIL = [[(K, 0)], [(K, 1)], [(K, 0)]]  # the request's last steps, after the last tick


def test_a_saved_log_short_by_its_last_interval_is_not_called_whole(tmp_path: Path) -> None:
    events = [{"op": "scrape", "name": "before"}]
    events += [{"op": "step", "engine": 0, "drafts": step} for step in LOGGED[:2]]
    events += [{"op": "advance", "s": 10.0}, {"op": "log"}]
    events += [{"op": "step", "engine": 0, "drafts": step} for step in LOGGED[2:]]
    events += [{"op": "advance", "s": 10.0}, {"op": "log"}]
    events += [{"op": "step", "engine": 0, "drafts": step} for step in TAIL]
    events += [{"op": "advance", "s": 3.0}, {"op": "scrape", "name": "after"}]  # then the server stops
    result = run("vllm_oracle.py", vllm_sources(CURRENT), {"k": K, "engines": [0], "model": "m", "events": events})
    text = result["log_text"]
    counters = scrape_delta(result["scrapes"]["before"], result["scrapes"]["after"], "vllm", elapsed_s=23.0)
    every = LOGGED + TAIL
    truth = 1 + sum(a for step in every for _, a in step) / len(every)
    assert counters.accept_len == pytest.approx(truth)  # the engine's counters hold the unlogged steps
    logged = parse_window("vllm", text)
    assert logged.accept_len == pytest.approx(4.0) and logged.accept_len != pytest.approx(truth)
    assert open_end_of_saved_log("vllm", text) is not None

    path = tmp_path / "vllm.log"
    path.write_text(text)
    proc = run_cli("parse", str(path), "--engine", "vllm", "--json", env=cli_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["accept_len"] is None  # not 4.000 called whole and exact
    assert out["integrity"]["whole"] is False
    assert [r["reason"] for r in out["integrity"]["reasons"]] == ["open_interval"]
    assert out["details"]["open_end_figures"]["accept_len"] == pytest.approx(4.0)
    assert "accept_len" not in out["exactness"]
    assert "open_interval" in proc.stderr and "running" in proc.stderr


def test_a_last_tick_without_requests_leaves_the_log_whole() -> None:
    """The same tick with nothing running or waiting (what vLLM prints once the load has drained)."""
    line = (
        "INFO 12-06 03:00:00 [loggers.py:257] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation "
        "throughput: 12.3 tokens/s, Running: 0 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.0%, Prefix cache hit "
        "rate: 0.0%\n"
    )
    assert open_end_of_saved_log("vllm", line) is None
    assert open_end_of_saved_log("vllm", line.replace("Running: 0", "Running: 2")) is not None
