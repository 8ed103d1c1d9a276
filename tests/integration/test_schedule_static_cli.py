"""A sweep whose best configuration is one static k at every load (issue 48), through the real CLI on the
simulator's vLLM dialect: ``recommend --schedule`` recommends that static configuration and says why (the
schedule fitted to the figures runs it everywhere), and ``verify-schedule`` ends with that verdict, exit 0,
deploying nothing (it said "nothing to verify" and exited 1 when the old rule gave k = 0 everywhere)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.reliability.harness import (
    cli_env,
    free_port,
    local_experiment,
    local_leftovers_restored,
    run_cli,
    run_dirs,
    write_experiment,
)

pytestmark = pytest.mark.timeout(600)


def test_one_k_best_everywhere_is_recommended_static_and_verify_schedule_ends_with_that_verdict(
    tmp_path: Path,
) -> None:
    engine = "--engine vllm --log-stats-interval 0.5"
    # 20 ms a step: the simulated time sets each point's figures; a chain of 2 commits 2.4 tokens a step, one of 1
    # 1.8, for the same step time, at every load.
    doc = local_experiment(
        "static-best",
        free_port(),
        {"autoregressive": f"{engine} --algorithm ar", "ngram": f"{engine} --algorithm linear --draft-tokens {{k}}"},
        baselines=["autoregressive"],
        load={"concurrency": [1, 4], "warmup": 1, "requests": 8, "max_tokens": 24, "ignore_eos": True},
        itl_ms=20.0,
    )
    doc["engine"] = "vllm"
    doc["variants"]["ngram"]["matrix"] = {"k": [1, 2]}
    doc["lossless"] = {"enabled": False}
    home = tmp_path / "home"
    home.mkdir()
    results = tmp_path / "results"
    env = cli_env(home)
    file = write_experiment(tmp_path / "static-best.yaml", doc)
    with local_leftovers_restored(home, file):
        proc = run_cli("sweep", str(file), "--results", str(results), "--no-report", env=env, timeout=500)
        assert proc.returncode in (0, 3), proc.stderr
        (run,) = run_dirs(results, "static-best")
        rec = run_cli("recommend", str(run), "--schedule", "--json", env=env)
        assert rec.returncode == 0, rec.stderr
        doc = json.loads(rec.stdout)
        assert doc["num_speculative_tokens_per_batch_size"] == [[1, 128, 2]], doc["ranges"]
        recommendation = doc["recommendation"]
        assert (recommendation["kind"], recommendation["configuration"]) == ("static", "ngram(k=2)"), recommendation
        assert recommendation["why"].startswith("the fitted schedule runs ngram(k=2) at every measured load; ")
        assert recommendation["best_static_over_reference"]["significant"] is True  # told apart from AR
        text = run_cli("recommend", str(run), "--schedule", env=env).stdout
        assert "# recommended: run ngram(k=2) at every batch size (a static configuration), not a schedule" in text
        verify = run_cli("verify-schedule", str(run), env=env, timeout=120)
    assert verify.returncode == 0, verify.stderr
    assert verify.stdout.startswith("# verdict: no schedule to verify: run ngram(k=2) at every batch size")
    assert not (run / "verify-schedule.yaml").exists()
    assert run_dirs(results, "static-best-verify") == []
