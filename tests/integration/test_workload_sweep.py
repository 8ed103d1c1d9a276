"""Workloads as a sweep axis, end to end: the real CLI against the simulator's ``workloads`` profile.

One experiment is swept twice, without workloads and with three (code, translation, chat): the workloads
cost no restart; every point's requests file reproduces its record's figures exactly; the report has the
per-workload tables and the speedup heatmap; and, since the profile's acceptance follows the prompt's text,
code and translation have different winners, which the report says; ``--resume latest`` then finds nothing
left to measure.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from orchestrator.analysis.requests import figures_from_requests
from orchestrator.runs.store import RunStore
from tests.reliability.harness import (
    cli_env,
    events,
    free_port,
    only_run_dir,
    records,
    run_cli,
    write_experiment,
)

pytestmark = pytest.mark.timeout(300)

WORKLOADS = {
    "code": "builtin:code",
    "translation": {"source": "builtin:translation", "max_tokens": 12},
    "chat": "builtin:chat",
}


def experiment(name: str, port: int, workloads: dict[str, Any] | None) -> dict[str, Any]:
    load: dict[str, Any] = {"concurrency": [1, 2], "warmup": 1, "requests": 4, "max_tokens": 16, "temperature": 0}
    if workloads is not None:
        load["workloads"] = workloads
    return {
        "name": name,
        "host": "local",
        "service": {
            "kind": "process",
            "command": (
                f"{{python}} -m orchestrator.sim --host 127.0.0.1 --port {port} --profile workloads "
                "--load-seconds 0.2 --decode-log-interval 1 {spec_args}"
            ),
        },
        "server": {
            "url": f"http://127.0.0.1:{port}",
            "model": "sim",
            "ready_timeout": "30s",
            "expected_load_time": "1s",
        },
        "engine": "sim",
        "variants": {
            "autoregressive": {"spec_args": "--algorithm ar"},
            "linear": {"spec_args": "--algorithm linear --draft-tokens 7"},
            "ddtree": {"spec_args": "--algorithm ddtree --budget 7 --topk 4"},
        },
        "baselines": ["autoregressive", "linear"],
        "load": load,
        "lossless": {"prompts": 2},
    }


def _restarts(run_dir: Path) -> int:
    return sum(1 for e in events(run_dir) if e["kind"] == "deploy")


def test_three_workloads_cost_no_restart_and_the_report_splits_by_workload(tmp_path: Path, home: Path) -> None:
    env = cli_env(home)
    results = tmp_path / "results"
    plain = write_experiment(tmp_path / "plain.yaml", experiment("plain", free_port(), None))
    proc = run_cli("sweep", str(plain), "--results", str(results), env=env)
    assert proc.returncode == 0, proc.stderr
    plain_run = only_run_dir(results, "plain")
    assert all("workload" not in r for r in records(plain_run))  # records without workloads stay as they were

    path = write_experiment(tmp_path / "wl.yaml", experiment("wl", free_port(), WORKLOADS))
    proc = run_cli("sweep", str(path), "--results", str(results), env=env)
    assert proc.returncode == 0, proc.stderr
    run_dir = only_run_dir(results, "wl")

    # The same restarts with three workloads as without: they are load points of the same deployments.
    assert _restarts(run_dir) == _restarts(plain_run) == 3
    recs = records(run_dir)
    assert len(recs) == 3 * len(records(plain_run)) == 3 * 3 * 2
    assert {r["workload"] for r in recs} == set(WORKLOADS)
    assert all(r["client"]["max_tokens"] == (12 if r["workload"] == "translation" else 16) for r in recs)

    # Every point's requests file agrees exactly with its record's aggregates.
    store = RunStore.open(run_dir)
    for record in recs:
        rows = store.read_lines(record["requests_file"])
        assert len(rows) == record["client"]["requests"] == 4
        again = figures_from_requests(rows)
        client = record["client"]
        for key in ("requests", "completed", "errors", "errors_by_kind", "output_tokens", "input_tokens"):
            assert again[key] == client[key], key
        for key in ("ttft_ms", "itl_ms", "e2e_ms", "finish_reasons"):
            assert again[key] == client[key], key
        assert again["spec_accept_len"] == client["spec"]["accept_len"]
        assert again["spec_acceptance_rate"] == client["spec"]["acceptance_rate"]
        for row in rows:
            assert row["sent_s"] >= 0 and len(row["chunk_tokens"]) == row["chunks"]
            assert sum(row["chunk_tokens"]) == row["output_tokens"]

    # The report: per-workload tables, the heatmap, and the winner that differs between code and translation.
    report = (run_dir / "report.md").read_text(encoding="utf-8")
    assert "## Workloads" in report and "Best configuration of each workload at each load" in report
    assert "speedup over AR and the share of responses stopped at the output cap" in report
    assert (run_dir / "figures" / "speedup_by_workload.png").is_file()
    assert (run_dir / "figures" / "latency_cdf-code_C_1.png").is_file()
    assert "The best configuration depends on the workload at C=1" in report
    sentence = next(line for line in report.splitlines() if "depends on the workload at C=1" in line)
    assert "autoregressive wins translation" in sentence
    assert "autoregressive wins code" not in sentence
    assert "code C=2" in report and "translation C=2" in report  # every table keeps the workloads apart

    # Resume: every point is there, so nothing is deployed again.
    proc = run_cli("sweep", str(path), "--results", str(results), "--resume", "latest", env=env)
    assert proc.returncode == 0, proc.stderr
    assert len(records(run_dir)) == len(recs)
    assert _restarts(run_dir) == 3

    # Baseline reuse: a new run takes both baselines, every workload of them, from this one.
    again = tmp_path / "again"
    proc = run_cli("sweep", str(path), "--results", str(again), "--baselines-from", str(run_dir), env=env)
    assert proc.returncode == 0, proc.stderr
    reused_run = only_run_dir(again, "wl")
    assert _restarts(reused_run) == 1
    reused = [r for r in records(reused_run) if r.get("baseline_source")]
    assert len(reused) == 2 * 3 * 2 and {r["workload"] for r in reused} == set(WORKLOADS)
