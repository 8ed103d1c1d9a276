"""Figures no measurement gives, through the real CLI (issue 49, "wrong or lost data"):

- a record whose throughput is ``Infinity`` (or NaN) never wins its load: the line is refused where it enters
  (the Record's validation) and the run's finding names the figure; a negative token count is refused the same;
- a figure of ``1e308`` in records.jsonl: report, compare and recommend survive (no OverflowError, no
  traceback.txt), the line left out and named;
- a record of a point the plan does not hold is not counted (never "9 ok of 8 planned"), and the finding says so;
- the sweep refuses what a server claims: a record made with an impossible figure is a failed point naming it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from orchestrator.experiment.schema import load_experiment
from orchestrator.runs.identity import resolved_experiment
from orchestrator.runs.store import Record, RunStore
from tests.reliability.harness import cli_env, local_experiment, run_cli, write_experiment
from tests.unit.synthetic_runs import plan_of

pytestmark = pytest.mark.timeout(300)

VARIANTS = {"autoregressive": "--algorithm ar", "chain": "--algorithm linear --draft-tokens {k}"}
CONFIGS = [("autoregressive", {}, True), ("chain", {"k": 2}, False), ("chain", {"k": 4}, False)]


def _record(store: RunStore, i: int, tok_s: float, **client: Any) -> dict[str, Any]:
    variant, params, baseline = CONFIGS[i] if i < len(CONFIGS) else ("chain", {"k": 8}, False)
    return {
        "run_id": store.run_id,
        "experiment": "hostile",
        "deployment_id": f"d-{i}",
        "point_id": f"p-{i}-1-1",
        "config_hash": f"c-{i}",
        "host": "local",
        "variant": variant,
        "params": params,
        "baseline": baseline,
        "mode": "concurrency",
        "concurrency": 1,
        "status": "ok",
        "started_at": "2026-01-01T00:00:00Z",
        "finished_at": "2026-01-01T00:00:10Z",
        "client": {"requests": 8, "completed": 8, "errors": 0, "output_tok_s": tok_s, **client},
    }


def _run(root: Path, lines: list[dict[str, Any]], name: str = "hostile") -> Path:
    doc = local_experiment(name, 9, dict(VARIANTS), baselines=["autoregressive"], load={"concurrency": [1]})
    doc["variants"]["chain"]["matrix"] = {"k": [2, 4]}
    experiment = load_experiment(write_experiment(root.parent / f"{name}.yaml", doc))
    store = RunStore.create(root, name, resolved_experiment(experiment), plan_of(CONFIGS, [1]))
    with (store.path / "records.jsonl").open("a", encoding="utf-8") as out:
        for line in lines:
            out.write(json.dumps(line) + "\n")  # json writes inf as Infinity, as a hand or a tool could
    store.set_state("done")
    store.release()
    return store.path


def _report(run: Path, env: dict[str, str]) -> dict[str, Any]:
    proc = run_cli("report", str(run), "--json", env=env)
    assert proc.returncode in (0, 3), proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    return json.loads(proc.stdout)["answer"]


def _skipped(doc: dict[str, Any]) -> list[str]:
    found = [f for f in doc["findings"] if f["check"] == "unreadable_records"]
    assert len(found) == 1, doc["findings"]
    return found[0]["evidence"]


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "home").mkdir()
    return cli_env(tmp_path / "home")


def test_an_infinite_throughput_never_wins_and_a_negative_count_is_refused(tmp_path: Path, env: dict) -> None:
    store_root = tmp_path / "results"
    probe = RunStore.create(tmp_path / "probe", "p", {"name": "p"}, {})
    probe.release()
    lines = [
        _record(probe, 0, 100.0),
        _record(probe, 1, math.inf),  # was: ok, its figure lost, still the winner at C=1
        _record(probe, 2, 90.0, output_tokens=-512),  # was: ok with negative tokens
    ]
    run = _run(store_root, lines)
    doc = _report(run, env)
    (level,) = doc["loads"]
    assert level["winner"] == "autoregressive", level
    evidence = " ".join(_skipped(doc))
    assert "client.output_tok_s is inf" in evidence
    assert "client.output_tokens is -512" in evidence
    assert doc["counts"]["ok"] == 1


def test_a_figure_of_1e308_leaves_report_compare_and_recommend_standing(tmp_path: Path, env: dict) -> None:
    probe = RunStore.create(tmp_path / "probe", "p", {"name": "p"}, {})
    probe.release()
    lines = [_record(probe, 0, 100.0), _record(probe, 1, 150.0), _record(probe, 2, 1e308)]
    run = _run(tmp_path / "results", lines)
    doc = _report(run, env)
    assert doc["loads"][0]["winner"] == "chain(k=2)"
    assert "1e+308" in " ".join(_skipped(doc))
    for args in (("compare", str(run), str(run), "--json"), ("recommend", str(run), "--json")):
        proc = run_cli(*args, env=env)
        assert proc.returncode in (0, 3), proc.stderr
        assert "Traceback" not in proc.stderr + proc.stdout
        json.loads(proc.stdout)
    assert not (run / "traceback.txt").exists()


def test_a_record_outside_the_plan_is_not_counted_and_the_run_says_so(tmp_path: Path, env: dict) -> None:
    probe = RunStore.create(tmp_path / "probe", "p", {"name": "p"}, {})
    probe.release()
    lines = [_record(probe, i, 100.0 + i) for i in range(3)] + [_record(probe, 3, 500.0)]  # p-3: in no plan
    run = _run(tmp_path / "results", lines)
    doc = _report(run, env)
    assert doc["counts"]["planned"] == 3
    assert doc["counts"]["ok"] == 3  # was 4 ok of 3 planned, and the stray point won
    assert doc["loads"][0]["winner"] == "chain(k=4)"
    assert "which plan.json does not hold" in " ".join(_skipped(doc))


def test_a_record_at_a_load_its_point_was_not_planned_at_is_no_load_of_its_own(tmp_path: Path, env: dict) -> None:
    """Issue 58, S10: records of planned points claiming C=-4, C=0 (and C=16, planned at C=1) each became a load
    of their own with a winner. A load no client sends is refused by the record's validation; another load than
    the plan's is left out by the plan's rule; both are named, and ls counts what the report counts."""
    probe = RunStore.create(tmp_path / "probe", "p", {"name": "p"}, {})
    probe.release()
    lines = [_record(probe, i, 100.0 + i) for i in range(3)]
    lines += [
        _record(probe, 1, 900.0) | {"concurrency": -4},
        _record(probe, 2, 800.0) | {"concurrency": 0},
        _record(probe, 0, 700.0) | {"concurrency": 16},
    ]
    run = _run(tmp_path / "results", lines)
    doc = _report(run, env)
    assert [level["load"] for level in doc["loads"]] == [1], doc["loads"]
    assert doc["loads"][0]["winner"] == "chain(k=4)"
    assert (doc["counts"]["planned"], doc["counts"]["ok"]) == (3, 3)
    evidence = " ".join(_skipped(doc))
    assert "concurrency is -4" in evidence and "concurrency is 0" in evidence
    assert "at C=16, which plan.json plans at C=1" in evidence
    (run / "answer.json").unlink()  # ls counts the records itself
    listed = run_cli("ls", "--results", str(run.parent.parent), "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    [summary] = json.loads(listed.stdout)["runs"]
    assert (summary["planned"], summary["ok"], summary["failed"]) == (3, 3, 0)


def test_the_sweep_makes_a_point_with_an_impossible_figure_a_failed_one_naming_it() -> None:
    from orchestrator.plan.deployments import Deployment, LoadPoint
    from orchestrator.sweep.measure import new_record

    deployment = Deployment(id="d-0", variant="autoregressive", params={}, command="x", config_hash="c", load_points=[])
    point = LoadPoint(id="p-0", mode="concurrency", concurrency=1)
    made = new_record(
        "r", "e", "local", deployment, point, "ok", "2026-01-01T00:00:00Z",
        client={"output_tok_s": math.inf, "requests": 8},
    )  # fmt: skip
    assert isinstance(made, Record)
    assert made.status == "failed"
    assert made.error is not None and made.error["kind"] == "implausible_figures"
    assert "client.output_tok_s is inf" in made.error["message"]
