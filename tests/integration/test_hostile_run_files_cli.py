"""Run files anyone may have put there, through the real CLI (issue 58, S6 and S7):

- ``ls`` blocked forever when a run's ``answer.json`` (or another file it reads) was a FIFO, read without end
  when it linked to ``/dev/zero``, and was not done in 100 s on 400 MB of blanks: every run file it reads is
  checked as a regular file of bounded size before it is opened, and ``ls`` answers (the run's counts from its
  records);
- ``report`` wrote ``summary.csv`` *through* a symbolic link to a file outside the run: every output is a new
  file renamed over its name, so the link is replaced and the file outside stays as it was.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from orchestrator.experiment.schema import load_experiment
from orchestrator.runs.identity import resolved_experiment
from orchestrator.runs.store import RunStore
from tests.reliability.harness import cli_env, local_experiment, run_cli, write_experiment
from tests.unit.synthetic_runs import plan_of

pytestmark = [pytest.mark.timeout(300), pytest.mark.xdist_group("hostile_run_files_cli")]

VARIANTS = {"autoregressive": "--algorithm ar", "chain": "--algorithm linear --draft-tokens {k}"}
CONFIGS = [("autoregressive", {}, True), ("chain", {"k": 2}, False)]


def _record(store: RunStore, i: int, tok_s: float) -> dict[str, Any]:
    variant, params, baseline = CONFIGS[i]
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
        "client": {"requests": 8, "completed": 8, "errors": 0, "output_tok_s": tok_s},
    }


def _run(root: Path) -> Path:
    doc = local_experiment("hostile", 9, dict(VARIANTS), baselines=["autoregressive"], load={"concurrency": [1]})
    doc["variants"]["chain"]["matrix"] = {"k": [2]}
    experiment = load_experiment(write_experiment(root.parent / "hostile.yaml", doc))
    store = RunStore.create(root, "hostile", resolved_experiment(experiment), plan_of(CONFIGS, [1]))
    with (store.path / "records.jsonl").open("a", encoding="utf-8") as out:
        for i, tok_s in enumerate([100.0, 150.0]):
            out.write(json.dumps(_record(store, i, tok_s)) + "\n")
    store.set_state("done")
    store.release()
    return store.path


def _fifo(path: Path) -> None:
    path.unlink(missing_ok=True)
    os.mkfifo(path)


def _zero(path: Path) -> None:
    path.unlink(missing_ok=True)
    path.symlink_to("/dev/zero")


def _blanks(path: Path) -> None:
    with path.open("wb") as out:  # 400 MB of blanks, sparse: a file of that size costs no disk
        out.write(b" " * 4096)
        out.truncate(400 * 1024 * 1024)


@pytest.mark.parametrize(
    ("name", "make"),
    [
        pytest.param("answer.json", _fifo, id="answer-fifo"),
        pytest.param("answer.json", _zero, id="answer-dev-zero"),
        pytest.param("answer.json", _blanks, id="answer-400MB-blanks"),
        pytest.param("events.jsonl", _fifo, id="events-fifo"),
        pytest.param("plan.json", _fifo, id="plan-fifo"),
        pytest.param("experiment.yaml", _fifo, id="experiment-fifo"),
        pytest.param("layout.json", _fifo, id="layout-fifo"),
        pytest.param(".lock", _fifo, id="lock-fifo"),
    ],
)
def test_ls_answers_whatever_a_run_file_is(tmp_path: Path, name: str, make: Any) -> None:
    run = _run(tmp_path / "results")
    make(run / name)
    began = time.monotonic()
    proc = run_cli("ls", "--results", str(tmp_path / "results"), "--json", env=cli_env(), timeout=60)
    took = time.monotonic() - began
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    [summary] = json.loads(proc.stdout)["runs"]
    assert summary["run_id"] == run.name
    assert took < 30, took


def test_report_replaces_a_link_planted_as_an_output_and_never_writes_through_it(tmp_path: Path) -> None:
    run = _run(tmp_path / "results")
    outside = tmp_path / "precious.txt"
    outside.write_text("keep me\n")
    for name in ("summary.csv", "report.md", "records.parquet", "answer.json", "checks.json", "report.html"):
        (run / name).symlink_to(outside)
    proc = run_cli("report", str(run), env=cli_env(), timeout=240)
    assert proc.returncode in (0, 3), proc.stderr
    assert outside.read_text() == "keep me\n"
    for name in ("summary.csv", "report.md", "records.parquet", "answer.json", "checks.json", "report.html"):
        assert not (run / name).is_symlink() and (run / name).stat().st_size > 0, name
    assert "autoregressive" in (run / "summary.csv").read_text()


def test_report_refuses_a_figures_folder_that_links_elsewhere(tmp_path: Path) -> None:
    run = _run(tmp_path / "results")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (run / "figures").symlink_to(elsewhere)
    proc = run_cli("report", str(run), env=cli_env(), timeout=240)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "figures is a symbolic link" in proc.stderr, proc.stderr
    assert list(elsewhere.iterdir()) == []
