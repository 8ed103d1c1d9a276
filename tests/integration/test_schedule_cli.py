"""``specsweep recommend RUN --schedule`` through the real CLI on a simulator sweep (vLLM dialect) of draft
length k in {1, 2, 4} and autoregressive at C in {1, 4}: the flag text is vLLM's ``--speculative-config`` with
``num_speculative_tokens_per_batch_size``, ``--json`` says the same as the schedule made from the run's answer,
each range names its measured loads, and an SGLang-dialect run says the recommendation stays per load."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.analysis.answer import answer
from orchestrator.analysis.schedule import schedule
from orchestrator.sim.config import parse_args
from tests.reliability.harness import (
    cli_env,
    free_port,
    local_experiment,
    local_leftovers_restored,
    run_cli,
    run_dirs,
    write_experiment,
)

pytestmark = [pytest.mark.timeout(900), pytest.mark.xdist_group("schedule_cli")]

LOAD = {"concurrency": [1, 4], "warmup": 1, "requests": 6, "max_tokens": 16}


def _variants(engine: str) -> dict[str, str]:
    return {
        "autoregressive": f"--engine {engine} --algorithm ar",
        "ngram": f"--engine {engine} --algorithm linear --draft-tokens {{k}}",
    }


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict[str, str], dict[str, Path]]]:
    base = tmp_path_factory.mktemp("schedule_cli")
    home = base / "home"
    home.mkdir()
    results = base / "results"
    env = cli_env(home)
    files = {}
    for engine in ("vllm", "sglang"):
        name, port = f"sched-{engine}", free_port()
        doc = local_experiment(name, port, _variants(engine), baselines=["autoregressive"], load=LOAD)
        doc["variants"]["ngram"]["matrix"] = {"k": [1, 2, 4]}
        doc["lossless"] = {"enabled": False}
        files[engine] = write_experiment(base / f"{engine}.yaml", doc)
    made: dict[str, Path] = {}
    with local_leftovers_restored(home, *files.values()):
        for engine, path in files.items():
            proc = run_cli("sweep", str(path), "--results", str(results), env=env, timeout=600)
            assert proc.returncode in (0, 3), proc.stderr
            (made[engine],) = run_dirs(results, f"sched-{engine}")
        yield env, made


def test_recommend_schedule_prints_vllms_flag_and_json_says_the_same(
    runs: tuple[dict[str, str], dict[str, Path]],
) -> None:
    env, made = runs
    run_dir = made["vllm"]
    expected = schedule(answer(run_dir), max_batch_size=64)
    text = run_cli("recommend", str(run_dir), "--schedule", "--max-batch-size", "64", env=env)
    assert text.returncode == 0, text.stderr
    as_json = run_cli("recommend", str(run_dir), "--schedule", "--max-batch-size", "64", "--json", env=env)
    assert as_json.returncode == 0, as_json.stderr
    doc = json.loads(as_json.stdout)
    assert doc["engine"] == "vllm" and doc["engine_takes_schedule"] is True
    entries = doc["num_speculative_tokens_per_batch_size"]
    assert entries[0][0] == 1 and entries[-1][1] == 64
    assert entries == expected.entries  # the k the answer gives, load by load
    assert all(a[1] + 1 == b[0] for a, b in itertools.pairwise(entries))  # contiguous
    measured = [load for r in doc["ranges"] for load in r["measured_loads"]]
    assert measured == [1, 4]
    for r in doc["ranges"]:
        for ev in r["evidence"]:
            assert ev["k"] in (0, 1, 2, 4) and ev["why"]
    if any(e[2] > 0 for e in entries):
        config = doc["speculative_config"]
        assert config["num_speculative_tokens_per_batch_size"] == entries
        assert config["num_speculative_tokens"] == max(e[2] for e in entries)
        assert doc["flag"] == "--speculative-config '" + json.dumps(config, separators=(", ", ": ")) + "'"
        assert doc["flag"] in text.stdout
        # the simulator's vLLM dialect takes what recommend wrote, as vLLM would
        sim = parse_args(["--engine", "vllm", "--algorithm", "linear", "--speculative-config", json.dumps(config)])
        assert [list(e) for e in sim.spec_schedule] == entries
    else:
        assert doc["speculative_config"] is None and "run autoregressive" in text.stdout
    for r in doc["ranges"]:
        assert f"batch sizes {r['start']}..{r['end']}: k = {r['k']}" in text.stdout
    assert "measured at C=1" in text.stdout and "measured at C=4" in text.stdout
    (stop,) = doc["break_even"]  # one speculative variant: ngram
    assert stop["variant"] == "ngram" and set(stop["judged"]) | set(stop["not_judged"]) == {1, 4}
    assert stop["load"] in (None, 1, 4) and f"# break-even: {stop['text']}" in text.stdout


def test_recommend_schedule_on_sglang_says_it_stays_per_load(runs: tuple[dict[str, str], dict[str, Path]]) -> None:
    env, made = runs
    proc = run_cli("recommend", str(made["sglang"]), "--schedule", "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["engine"] == "sglang" and doc["engine_takes_schedule"] is False
    assert doc["flag"] is None and doc["speculative_config"] is None
    assert "--speculative-adaptive" in doc["why_per_load"]
    text = run_cli("recommend", str(made["sglang"]), "--schedule", env=env)
    assert "the recommendation stays per load on sglang" in text.stdout


def test_recommend_schedule_with_an_unknown_variant_is_one_clear_line(
    runs: tuple[dict[str, str], dict[str, Path]],
) -> None:
    env, made = runs
    proc = run_cli("recommend", str(made["vllm"]), "--schedule", "--variant", "eagle", env=env)
    assert proc.returncode != 0
    assert "variant 'eagle' has no speculative configuration" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_verify_schedule_of_an_engine_without_schedules_is_one_clear_line(
    runs: tuple[dict[str, str], dict[str, Path]],
) -> None:
    env, made = runs
    proc = run_cli("verify-schedule", str(made["sglang"]), "--dry-run", env=env)
    assert proc.returncode != 0
    assert "sglang takes no batch-size schedule" in proc.stderr and "--speculative-adaptive" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (made["sglang"] / "verify-schedule.yaml").exists()
