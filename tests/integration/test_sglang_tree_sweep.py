"""sweeps/sglang-tree-cpu.yaml, run by the `specsweep sweep` CLI with a real SGLang 0.5.23 on the CPU drafting real
trees: STANDALONE speculation (a draft model through EAGLE's tree building and tree verification), on the
project's torch_native draft patch (scripts/sglang-cpu/patches/torch-native-tree-draft.patch).

The shipped file, trimmed: autoregressive, the self-drafted chain (depth 3, top-k 1, budget 4: the linear
baseline), a self-drafted tree (depth 3, top-k 2, budget 6) and a chain drafted by the model's first 24 layers,
at C = 1 and 2 of three requests. Checks, each against something the engine or the model computed itself:

- every speculative point's accept length and verify steps from the responses equal SGLang's counters over the
  window (the ``/metrics`` deltas), and the tree the server reports running is the one the command asked for;
- the self-drafted chain takes, request by request, the verify steps and accepted drafts the model itself
  predicts (the golden probe: the engine's own transformers over the point's prompts), and its accept length
  equals the golden one;
- the tree, whose budget holds the chain, accepts no less than the chain over the same requests;
- the 24-layer draft's accept length lies strictly between 1 and depth + 1;
- the lossless check finds no speculative answer that differs from autoregressive's;
- the analysis raises no golden, spec_shape or tree_below_chain finding, and no server is left running.
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
from orchestrator.runs.store import Record, RunStore
from tests.engine_setup import wait_for
from tests.integration.restore_support import restore
from tests.integration.sglang_support import GROUP, REPO, counter_oracle, paths
from tests.reliability.harness import free_port
from tests.timing import scaled

pytestmark = [
    pytest.mark.sglang,
    pytest.mark.xdist_group(GROUP),
    pytest.mark.timeout(1500),  # scaled with the machine's load (tests/conftest.py)
]

SWEEP = REPO / "sweeps" / "sglang-tree-cpu.yaml"
DEPTH = 3


def _small_copy(tmp_path: Path) -> tuple[Path, int]:
    doc: dict[str, Any] = yaml.safe_load(SWEEP.read_text())
    port = free_port()
    doc["server"]["url"] = doc["server"]["url"].replace(str(doc["vars"]["port"]), str(port))
    doc["vars"]["port"] = port
    doc["variants"]["tree"]["matrix"] = {"topk": [2], "budget": [6]}
    doc["load"].update({"concurrency": [1, 2], "requests": 3, "warmup": 1, "max_tokens": 24})
    doc["lossless"] = {"prompts": 2}
    doc["checks"]["min_requests"] = 3
    path = tmp_path / SWEEP.name
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path, port


def _draft_model() -> str:
    settled = wait_for("sglang")
    found = (settled.values.get("SGLANG_DRAFT_MODEL") if settled is not None else None) or os.environ.get(
        "SGLANG_DRAFT_MODEL"
    )
    assert found and (Path(found) / "model.safetensors").is_file(), "scripts/get-sglang-cpu.sh made no draft model"
    return found


def check_tree_point(record: Record) -> dict[str, Any]:
    """One STANDALONE point against SGLang's counters: the responses' verify steps and accept length equal theirs,
    /metrics gives them exactly, and the tree the server runs is the one configured (gauge and settings)."""
    where = record.point_id
    oracle = counter_oracle(record)
    spec = (record.client or {}).get("spec") or {}
    server = record.server or {}
    prom = server.get("prometheus") or {}
    assert spec.get("verify_steps") == oracle["verify_steps"], (where, spec, oracle)
    assert abs(spec["accept_len"] - oracle["accept_len"]) <= 1e-12 * oracle["accept_len"], (where, spec, oracle)
    assert abs(prom["accept_len"] - oracle["accept_len"]) <= 1e-12 * oracle["accept_len"], (where, prom, oracle)
    assert prom["exactness"]["accept_len"]["kind"] == "exact", (where, prom["exactness"])
    shape = server.get("spec_shape") or {}
    assert shape.get("agree") is True, (where, shape)
    assert prom["details"]["speculative_num_draft_tokens"] == shape["served"]["budget"], (where, prom["details"])
    return {"accept_len": oracle["accept_len"], "verify_steps": oracle["verify_steps"], "shape": shape["served_label"]}


def test_real_sglang_trees_chains_and_the_golden_accept_length(tmp_path: Path, record_property: Any) -> None:
    python, model = paths()
    draft = _draft_model()
    path, port = _small_copy(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    jit = os.environ.get("SGLANG_JIT_CACHE_DIR") or str(Path.home() / ".cache" / "sglang" / "jit")
    env = {
        **os.environ,
        "HOME": str(home),
        "COLUMNS": "200",
        "SGLANG_JIT_CACHE_DIR": jit,
        "SGLANG_PYTHON": python,
        "SGLANG_MODEL": model,
        "SGLANG_DRAFT_MODEL": draft,
    }
    results = tmp_path / "results"
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
        restore(path, env, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout)
    assert summary["state"] == "done" and summary["failed"] == 0, summary
    run_dir = Path(summary["run_dir"])
    records = RunStore.open(run_dir).records()
    by = {(r.variant, r.concurrency): r for r in records}
    assert sorted((r.variant, r.concurrency, r.status) for r in records) == [
        (variant, c, "ok") for variant in ("autoregressive", "chain", "draft24", "tree") for c in (1, 2)
    ]
    seen: dict[str, Any] = {}
    for c in (1, 2):
        chain, tree, truncated = by[("chain", c)], by[("tree", c)], by[("draft24", c)]
        figures = {name: check_tree_point(r) for name, r in (("chain", chain), ("tree", tree), ("draft24", truncated))}
        # The self-drafted chain, request by request, is what the model predicts.
        golden = (chain.server or {}).get("golden") or {}
        assert golden.get("kind") == "chain" and golden.get("agree") is True, golden
        assert golden["requests"] == 3 and golden["verify_steps"] == figures["chain"]["verify_steps"], golden
        assert abs(golden["accept_len"] - figures["chain"]["accept_len"]) <= 1e-6, (golden, figures)
        # A tree of the same depth whose budget (5 drafts) holds the chain accepts no less over the same prompts.
        assert figures["tree"]["accept_len"] >= figures["chain"]["accept_len"] - 1e-9, figures
        tree_golden = (tree.server or {}).get("golden") or {}
        assert tree_golden.get("kind") == "tree_chain_reference", tree_golden
        # A real draft that is sometimes right: acceptance strictly between none and all.
        assert 1.0 < figures["draft24"]["accept_len"] < DEPTH + 1, figures
        assert "golden" not in (truncated.server or {}), "a draft other than the target has no golden figure"
        seen[f"C={c}"] = {**figures, "golden": golden["accept_len"]}
    analysis = analyse(run_dir)
    wrong = [f for f in analysis.findings if f.check in ("golden", "spec_shape", "tree_below_chain", "topk1_vs_chain")]
    assert wrong == [], [f.message for f in wrong]
    lossy = [f.message for f in analysis.findings if f.check == "lossless" and f.severity == "error"]
    assert lossy == []
    record_property("sglang_tree", json.dumps(seen, default=str))
    with socket.socket() as sock:
        assert sock.connect_ex(("127.0.0.1", port)) != 0
