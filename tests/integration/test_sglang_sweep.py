"""sweeps/sglang-cpu.yaml, run by the `specsweep sweep` CLI on this machine with a real SGLang 0.5.23 on the CPU doing
real NGRAM speculation, through the process service.

The shipped file, trimmed (AR and NGRAM with 4 draft tokens, C = 1 and 2, three requests of 32 tokens, two lossless
prompts, a free port): two server starts (30 s quiet, up to three minutes on two busy cores, 3-5 GiB each). Checks
against SGLang's own counters (the ``/metrics`` deltas around each window, tests/integration/sglang_support.py):
the responses' accept length and verify steps equal them; /metrics gives accept length and acceptance rate from
them; the log's figures, less the drafts past the requests' ends that the responses name, hold them within their
bounds; the NGRAM corpus was emptied before each point and its prompts were new to it; the lossless check compared
NGRAM's temperature-0 answers with AR's and found none lossy (a near tie the verify step flipped is told from a
bug by the baseline's log-probabilities, which SGLang's stream carries and whose tokens spell the text); no server
is left running.
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
from tests.integration.sglang_support import GROUP, REPO, check_speculative_point, paths
from tests.integration.shipped_sweeps import small_copy
from tests.timing import scaled

pytestmark = [
    pytest.mark.sglang,
    pytest.mark.xdist_group(GROUP),
    pytest.mark.timeout(1500),
]

SWEEP = REPO / "sweeps" / "sglang-cpu.yaml"


def test_the_shipped_file_finds_the_scripts_engine() -> None:
    doc = yaml.safe_load(SWEEP.read_text())
    python, model = paths()
    for var, path in (("sglang_python", python), ("sglang_model", model)):
        expanded = subprocess.run(
            ["sh", "-c", f'printf %s "{doc["vars"][var]}"'],
            env={"PATH": os.environ.get("PATH", ""), "SGLANG_PYTHON": python, "SGLANG_MODEL": model},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert expanded == path


def check_run(run_dir: Path, *, flushed: bool = True) -> dict[str, Any]:
    """Every point ok; AR without speculative figures; each NGRAM point equal to SGLang's counters
    (check_speculative_point); the lossless check's differences each say where. Returns what was seen."""
    records = RunStore.open(run_dir).records()
    assert sorted((r.variant, r.concurrency, r.status) for r in records) == [
        ("autoregressive", 1, "ok"),
        ("autoregressive", 2, "ok"),
        ("ngram", 1, "ok"),
        ("ngram", 2, "ok"),
    ]
    seen: dict[str, Any] = {}
    for record in records:
        server = record.server or {}
        if record.variant == "autoregressive":
            # Without speculation SGLang prints no accept len and adds no verify call (metrics_reporter.py
            # report_decode_stats, metrics_collector.py observe_one_finished_request).
            assert server.get("accept_len") is None and not server["prometheus"]["details"].get("verify_calls")
            assert "accept len" not in (run_dir / str(record.window_file)).read_text()
            continue
        assert (record.engine_info or {}).get("version") == "0.5.23", record.engine_info
        seen[f"C={record.concurrency}"] = check_speculative_point(record, flushed=flushed)

    analysis = analyse(run_dir)
    corpus = [f for f in analysis.findings if f.check == "drafter_corpus"]
    assert bool(corpus) is not flushed, [f.message for f in corpus]
    lossless = [f for f in analysis.findings if f.check == "lossless"]
    assert len({p.stem for p in (run_dir / "lossless").glob("*.jsonl")}) == 2  # AR (twice each prompt) and NGRAM
    assert not any("not deterministic" in f.message for f in lossless)
    differs = [f.message for f in lossless if f.severity == "error"]
    # NGRAM at temperature 0 is lossless in exact arithmetic; on this CPU a verify step's batched attention (the
    # torch_native TARGET_VERIFY patch) may round differently from AR's one-token steps and flip a near tie. The
    # baseline's answers carry SGLang's own log-probabilities, so such a flip is told from a bug: no lossy verdict.
    assert differs == []
    seen["logprob_shift"] = check_baseline_logprobs(run_dir)
    seen["lossless"] = [f.message for f in lossless if "near tie" in f.message] or "no near tie flipped"
    return seen


def test_local_sweep_with_a_real_sglang(tmp_path: Path, record_property: Any) -> None:
    path, port = small_copy(SWEEP, tmp_path, k=4, max_tokens=32)
    home = tmp_path / "home"
    home.mkdir()
    # NGRAM's corpus is C++ that SGLang compiles at its first start (kernels/jit, under ~/.cache/sglang/jit): the
    # user's cache, not the test's empty home, so that only the first run on a machine compiles it.
    jit = os.environ.get("SGLANG_JIT_CACHE_DIR") or str(Path.home() / ".cache" / "sglang" / "jit")
    env = {**os.environ, "HOME": str(home), "COLUMNS": "200", "SGLANG_JIT_CACHE_DIR": jit}
    results = tmp_path / "results"
    state = home / ".local" / "state" / "specsweep"
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "orchestrator", "sweep", str(path), "--results", str(results), "--json"],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=scaled(1400),
        )
    finally:
        left_behind = sorted(p.name for p in state.glob("*") if p.name.endswith((".pid", ".marker.json")))
        # A CLI killed by the timeout cannot restore: `specsweep restore` stops what it left (normally nothing).
        restore(path, env, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout)
    assert summary["state"] == "done" and summary["failed"] == 0
    seen = check_run(Path(summary["run_dir"]))
    record_property("sglang", json.dumps(seen, default=str))

    assert left_behind == []
    with socket.socket() as sock:
        assert sock.connect_ex(("127.0.0.1", port)) != 0
