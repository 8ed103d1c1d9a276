"""Answers you can trust (issue 17), through the real CLI on the simulator (a plain local process):

- two configurations 10% apart are told apart, two that differ only in their seed are not (timing noise of a
  known level: ``--step-jitter``);
- the lossless check names the configuration, the prompt and the position under the ``wrong-token`` fault and
  passes the clean ones; the prefix cache is flushed before each point; GPU telemetry and provenance come from
  an nvidia-smi-shaped stub on PATH;
- repeats and restarts combine into one interval per point; adaptive stopping ends a point at its target.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from orchestrator.analysis import analyse
from orchestrator.analysis.answer import answer_of
from orchestrator.analysis.compare import best_per_load, significance
from orchestrator.report import tables
from tests.reliability.harness import (
    cli_env,
    free_port,
    local_experiment,
    local_leftovers_restored,
    run_cli,
    write_experiment,
)
from tests.timing import scaled

pytestmark = pytest.mark.timeout(300)

FAKE_SMI = Path(__file__).resolve().parents[1] / "data" / "fake-nvidia-smi"


def _sweep(tmp_path: Path, doc: dict[str, Any], env: dict[str, str] | None = None) -> Path:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    file = write_experiment(tmp_path / f"{doc['name']}.yaml", doc)
    results = tmp_path / "results"
    with local_leftovers_restored(home, file):
        proc = run_cli("sweep", str(file), "--results", str(results), env=cli_env(home, **(env or {})), timeout=280)
    assert proc.returncode in (0, 3), proc.stderr + proc.stdout
    (run,) = sorted((results / doc["name"]).iterdir())
    return run


def test_ten_percent_apart_is_a_winner_and_a_different_seed_is_a_tie(tmp_path: Path) -> None:
    port = free_port()
    noise = "--profile k26 --step-jitter 0.5"
    doc = local_experiment(
        "apart",
        port,
        {
            "fast": f"--algorithm ar --itl-ms 2.0 {noise}",
            "twin": f"--algorithm ar --itl-ms 2.0 {noise} --seed 11",
            "slow": f"--algorithm ar --itl-ms 2.2 {noise}",
        },
        load={"concurrency": [1], "warmup": 1, "requests": 24, "max_tokens": 48, "temperature": 0},
    )
    doc["service"]["command"] = doc["service"]["command"].replace("--profile tiny ", "")
    doc["lossless"] = {"enabled": False}
    run = _sweep(tmp_path, doc)
    analysis = analyse(run)
    best = analysis.best.iloc[0]
    assert best["label"] in ("fast", "twin")
    assert best["decided"] is False and set(best["tied"]) == {"fast", "twin"} - {best["label"]}
    [sentence] = tables.headline(answer_of(analysis))
    assert "are indistinguishable at this load" in sentence and "slow" not in sentence
    pair = analysis.frame[analysis.frame["label"].isin(["fast", "slow"])]
    verdict = best_per_load(pair, rule=significance(0.95)).iloc[0]
    assert verdict["label"] == "fast" and verdict["decided"] is True, verdict
    assert 0.04 < verdict["margin"] < 0.2 and verdict["margin_lo"] > 0
    report = (run / "report.md").read_text()
    assert "indistinguishable" in report and "95% confidence interval" in report


def test_lossless_flush_telemetry_and_provenance(tmp_path: Path) -> None:
    port = free_port()
    doc = local_experiment(
        "lossless",
        port,
        {
            "autoregressive": "--algorithm ar",
            "linear": "--algorithm linear --draft-tokens 7",
            "tree": "--algorithm ddtree --budget 16 --topk 4",
            "broken": "--algorithm linear --draft-tokens 7 --fault wrong-token",
        },
        baselines=["autoregressive", "linear"],
        load={
            "concurrency": [1, 4],
            "warmup": 1,
            "requests": 8,
            "max_tokens": 48,
            "temperature": 0,
            "flush_cache": True,
        },
        itl_ms=3,  # windows of a second or so: the stub (a Python script) takes a moment to start sampling
    )
    doc["lossless"] = {"prompts": 4}
    doc["telemetry"] = {"interval_ms": 100}
    run = _sweep(tmp_path, doc, env={"PATH": f"{FAKE_SMI}{os.pathsep}{os.environ['PATH']}"})
    analysis = analyse(run)
    lossless = [f for f in analysis.findings if f.check == "lossless"]
    errors = [f for f in lossless if f.severity == "error"]
    assert [f.config for f in errors] == ["broken"], lossless
    assert "prompt" in errors[0].message and "character" in errors[0].message and "token" in errors[0].message
    assert errors[0].evidence and errors[0].evidence[0].startswith("baseline:")
    assert len(list((run / "lossless").glob("*.jsonl"))) == 4
    ar = [json.loads(line) for line in next((run / "lossless").glob("*.jsonl")).read_text().splitlines()]
    assert {a["run"] for a in ar if a.get("batch", 1) == 1} <= {1, 2}  # alone; the baseline's again, then batched
    records = [json.loads(line) for line in (run / "records.jsonl").read_text().splitlines()]
    assert all(r["cache_flush"]["ok"] for r in records), [r["cache_flush"] for r in records]
    assert all(r["telemetry"]["gpus"] == 2 and r["telemetry"]["tokens_per_joule"] > 0 for r in records)
    assert all((run / r["requests_file"]).is_file() for r in records)
    assert all(r["intervals"]["method"] == "bootstrap over requests" for r in records)
    provenance = json.loads((run / "provenance.json").read_text())
    assert provenance["run"]["experiment_sha256"].startswith("sha256:")
    assert provenance["hosts"]["local"]["gpu"]["model"] == "NVIDIA H100 80GB HBM3"
    running = [d["running"]["command"] for d in provenance["deployments"].values()]
    assert all("orchestrator.sim" in c and not c.startswith("sh ") for c in running), running
    report = (run / "report.md").read_text()
    assert "2 × NVIDIA H100 80GB HBM3, driver 550.54.15" in report and "Output tokens per joule" in report
    assert "lossless" in report and "broken" in report
    assert analysis.frame["tokens_per_joule"].notna().all()


def test_repeats_and_restarts_make_one_point_and_until_stops_at_its_target(tmp_path: Path) -> None:
    port = free_port()
    doc = local_experiment(
        "repeats",
        port,
        {"autoregressive": "--algorithm ar", "linear": "--algorithm linear --draft-tokens 5"},
        baselines=["autoregressive", "linear"],
        load={
            "concurrency": [2],
            "warmup": 1,
            "max_tokens": 32,
            "repeats": 2,
            "repeats_across_restarts": 2,
            "until": {"rel_ci": 0.2, "figure": "accept_len", "min_requests": 8, "max_requests": 400},
        },
    )
    doc["lossless"] = {"prompts": 2}
    run = _sweep(tmp_path, doc)
    records = [json.loads(line) for line in (run / "records.jsonl").read_text().splitlines()]
    assert len(records) == 8 and {(r["repeat"], r["restart"]) for r in records} == {(1, 1), (2, 1), (1, 2), (2, 2)}
    linear = [r for r in records if r["variant"] == "linear"]
    assert all(r["client"]["stopped_by"] == "target" and r["client"]["requests"] < 400 for r in linear), [
        (r["client"]["stopped_by"], r["client"]["requests"]) for r in linear
    ]
    analysis = analyse(run)
    frame = analysis.frame[analysis.frame["status"] == "ok"]
    assert len(frame) == 2 and (frame["windows"] == 4).all()
    assert set(frame["ci_method"]) == {"bootstrap over 2 restarts (2 repeats each) and their requests"}
    point = frame[frame["label"] == "linear"].iloc[0]
    assert point["accept_len_lo"] < point["accept_len"] < point["accept_len_hi"]
    assert isinstance(analysis.run.windows, pd.DataFrame) and len(analysis.run.windows) == 8


@pytest.mark.parametrize(
    ("engine", "extra", "env", "ok", "note"),
    [
        ("sglang", [], {}, True, None),
        ("vllm", [], {"VLLM_SERVER_DEV_MODE": "1"}, True, None),
        ("vllm", [], {"VLLM_SERVER_DEV_MODE": "0"}, False, "VLLM_SERVER_DEV_MODE=1"),
        ("llamacpp", ["--slot-save-path", "/tmp"], {}, True, None),
        ("llamacpp", [], {}, False, "--slot-save-path"),
    ],
)
def test_the_simulator_answers_each_engines_cache_flush(
    engine: str, extra: list[str], env: dict[str, str], ok: bool, note: str | None
) -> None:
    import subprocess
    import sys

    from orchestrator.engines.cache import flush_prefix_cache
    from tests.reliability.harness import wait_until

    port = free_port()
    command = [sys.executable, "-m", "orchestrator.sim", "--engine", engine, "--port", str(port), "--profile", "tiny"]
    proc = subprocess.Popen(
        [*command, "--load-seconds", "0", *extra],
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        import httpx

        def up() -> bool:
            try:
                return httpx.get(url + "/v1/models", timeout=1).status_code == 200
            except httpx.HTTPError:
                return False

        wait_until(up, timeout=20)
        answer = flush_prefix_cache(url, engine, None)
        assert answer["ok"] is ok, answer
        assert (note is None and answer["note"] is None) or (note is not None and note in answer["note"]), answer
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=scaled(10))
    expected = {"sglang": "Cache flushed successfully!", "vllm": "Resetting prefix cache..."}.get(engine)
    if ok and expected:
        assert expected in out  # the engine's own log line
