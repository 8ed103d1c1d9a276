"""Two unclear answers of the schedule commands (issue 49, "unclear"), through the real CLI on runs of known
figures (k = 4 wins at C=1, k = 1 at C=4):

- ``recommend --schedule`` of a k sweep whose k is written as a double-quoted JSON value
  (``"num_speculative_tokens": "{k}"``) said "found none"; the draft length is read from it as from a number;
- ``verify-schedule`` of a run still running (its controller holds the run's lock) is refused first, saying so,
  before a schedule is derived from points that are not all there.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from orchestrator.experiment.schema import load_experiment
from orchestrator.runs.identity import experiment_file, resolved_experiment
from orchestrator.runs.store import RunStore
from tests.reliability.harness import cli_env, local_experiment, run_cli, write_experiment
from tests.unit.synthetic_runs import append_point, plan_of

pytestmark = pytest.mark.timeout(300)

CONFIGS: list[tuple[str, dict[str, Any], bool]] = [("autoregressive", {}, True)]
CONFIGS += [("ngram", {"k": k}, False) for k in (1, 2, 4)]
TOK_S = {1: [100.0, 150.0, 170.0, 200.0], 4: [400.0, 520.0, 480.0, 430.0]}


def _command(params: dict[str, Any]) -> str:
    if "k" not in params:
        return "python -m orchestrator.sim --engine vllm --algorithm ar"
    return f"""vllm serve m --speculative-config '{{"method": "ngram", "num_speculative_tokens": "{params["k"]}"}}'"""


def _run(base: Path, *, finished: bool) -> RunStore:
    spec = """--speculative-config '{{"method": "ngram", "num_speculative_tokens": "{k}"}}'"""
    doc = local_experiment("sq", 9, {"autoregressive": "--algorithm ar", "ngram": spec}, baselines=["autoregressive"])
    doc["engine"] = "vllm"
    doc["variants"]["ngram"]["matrix"] = {"k": [1, 2, 4]}
    experiment = load_experiment(write_experiment(base / "sq.yaml", doc))
    plan = plan_of(CONFIGS, [1, 4], _command)
    store = RunStore.create(
        base / "results", "sq", resolved_experiment(experiment), plan, experiment_file=experiment_file(experiment)
    )
    for i, (variant, params, baseline) in enumerate(CONFIGS):
        for c in (1, 4):
            append_point(
                store, "sq", index=i, variant=variant, params=params, load=c, repeat=1, tok_s=TOK_S[c][i],
                baseline=baseline,
            )  # fmt: skip
    if finished:
        store.set_state("done")
        store.release()
    return store


def test_a_k_written_as_a_quoted_json_value_makes_a_schedule(tmp_path: Path) -> None:
    store = _run(tmp_path, finished=True)
    proc = run_cli("recommend", str(store.path), "--schedule", "--json", env=cli_env(tmp_path))
    assert proc.returncode == 0, proc.stderr  # was: "a schedule is made over one variant ...; found none"
    made = json.loads(proc.stdout)
    assert made["variant"] == "ngram"
    assert sorted({r["k"] for r in made["ranges"]}) == [1, 4]


def test_verify_schedule_of_a_run_still_running_is_refused_first(tmp_path: Path) -> None:
    store = _run(tmp_path, finished=False)  # this process holds the run's lock, as its sweep would
    try:
        proc = run_cli("verify-schedule", str(store.path), "--dry-run", "--rate", "5", env=cli_env(tmp_path))
    finally:
        store.release()
    assert proc.returncode != 0, proc.stdout
    assert "Traceback" not in proc.stderr
    assert "still running" in proc.stderr
    assert not (store.path / "verify-schedule.yaml").exists()
