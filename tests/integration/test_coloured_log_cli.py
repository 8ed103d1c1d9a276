"""A coloured vLLM log, through the real CLI and the simulator's ``coloured-log`` fault.

``specsweep sweep`` of the simulator's vLLM dialect whose lines carry the escape codes vLLM's ColoredFormatter
writes under a terminal (between the level and the time stamp), with idle data-parallel engines whose intervals
only the time stamps and the spec lines' seconds can count: the record's figures are those of the same window
without the codes, and ``specsweep parse`` of the stored window gives them too.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from orchestrator.engines.vllm.samples import VllmEngineSample
from orchestrator.metrics import parse_window
from orchestrator.metrics.window import mark_open_end
from tests.integration.fault_support import sweep_with_fault
from tests.reliability.harness import cli_env, run_cli

pytestmark = pytest.mark.timeout(240)

ESCAPES = re.compile(r"\x1b\[[0-9;]*m")


def test_a_coloured_vllm_log_gives_the_plain_logs_figures(tmp_path: Path, home: Path) -> None:
    spec = (
        "--engine vllm --algorithm linear --draft-tokens 3 --fault idle-debug-intervals=2 --fault coloured-log "
        "--log-stats-interval 0.15"
    )
    load = {"concurrency": [1], "warmup": 1, "requests": 12, "max_tokens": 48, "temperature": 0}
    swept = sweep_with_fault(tmp_path, home, "colour", spec, load, engine="vllm", itl_ms=12.0)
    run_dir = swept.run_dir
    (record,) = [r for r in swept.records if r["status"] == "ok"]
    window_file = run_dir / record["window_file"]
    text = window_file.read_text()
    assert "\x1b[32mINFO\x1b[0m \x1b[90m" in text  # the codes vLLM's ColoredFormatter puts between them
    # A window opened on the engine's stats tick is read whole (orchestrator/sweep/closing.py): the record says so.
    aligned = bool(record["server"]["details"].get("window_aligned"))
    plain = parse_window("vllm", ESCAPES.sub("", text), cut=True, aligned=aligned)
    engines = [s for s in plain.samples if isinstance(s, VllmEngineSample)]
    assert engines and all(s.timestamp for s in engines)
    server = record["server"]
    if server["window_ticks"]["closed_by_tick"] is False:
        # No tick in time (the engine's stats loop stalled on a loaded machine): the record keeps its log figures
        # aside (orchestrator/sweep/closing.py), and so does the plain reading of the same window.
        (detail,) = [r["detail"] for r in server["integrity"]["reasons"] if r["reason"] == "open_interval"]
        mark_open_end(plain, detail)
    assert (server["details"].get("open_end_figures") or server)["accept_len"] is not None, server
    assert server["accept_len"] == plain.accept_len
    assert server["details"].get("open_end_figures") == plain.details.get("open_end_figures")
    assert server["gen_throughput"] == plain.gen_throughput
    assert server["integrity"] == plain.integrity.to_dict()
    assert server["details"].get("hidden_intervals") == plain.details.get("hidden_intervals")
    parsed = run_cli("parse", "--engine", "vllm", "--window", str(window_file), "--json", env=cli_env(home))
    assert parsed.returncode == 0, parsed.stderr
    data = json.loads(parsed.stdout)
    # parse reads a stored window as cut at both edges (it cannot know where the ticks fell): the same text, cut.
    cut = parse_window("vllm", ESCAPES.sub("", text), cut=True)
    assert (data["accept_len"], data["gen_throughput"]) == (cut.accept_len, cut.gen_throughput)
