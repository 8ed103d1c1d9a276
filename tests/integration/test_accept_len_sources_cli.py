"""Where the figures came from (issue 48): the report shows each point's accept length by source.

A sweep of the simulator speaking vLLM's dialect (its log's ``SpecDecoding metrics`` lines, its ``/metrics``
counters and each response's ``metrics.speculative_decoding``: three sources), through the CLI as a user runs
it; then ``report --json`` carries the table in the one answer, and report.md and report.html show it with
the same figures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.reliability.harness import cli_env, free_port, only_run_dir, run_cli, write_experiment

pytestmark = [pytest.mark.timeout(300)]


def test_report_shows_accept_length_by_source(tmp_path: Path) -> None:
    port = free_port()
    command = (
        f"{{python}} -m orchestrator.sim --engine vllm --host 127.0.0.1 --port {port} --profile tiny "
        "--load-seconds 0.3 --seed 7 --log-stats-interval 1 --per-request-spec-decode-metrics summary "
        "--model sim {spec_args}"
    )
    doc = {
        "name": "sources",
        "host": "local",
        "service": {"kind": "process", "command": command},
        "server": {"url": f"http://127.0.0.1:{port}", "model": "sim", "ready_timeout": "30s"},
        "engine": "vllm",
        "variants": {
            "autoregressive": {"spec_args": "--algorithm ar"},
            "eagle3": {"spec_args": "--algorithm linear --draft-tokens 3"},
        },
        "baselines": ["autoregressive"],
        "load": {"concurrency": [2], "warmup": 1, "requests": 6, "max_tokens": 32, "temperature": 0},
        "lossless": {"enabled": False},
        "checks": {"min_requests": 6},
        "results_dir": "results",
    }
    experiment = write_experiment(tmp_path / "sources.yaml", doc)
    env = cli_env(tmp_path)
    sweep = run_cli("sweep", str(experiment), env=env, timeout=240)
    assert sweep.returncode in (0, 3), sweep.stdout + sweep.stderr
    run_dir = only_run_dir(tmp_path / "results", "sources")

    done = run_cli("report", str(run_dir), "--json", env=env)
    assert done.returncode == 0, done.stderr
    table = json.loads(done.stdout)["answer"]["accept_len_sources"]
    assert [(r["label"], r["load_label"]) for r in table] == [("eagle3", "C=2")]  # AR has no accept length
    row = table[0]
    assert set(row["values"]) == {"journal", "prometheus", "responses"}
    assert row["used"] in row["values"]
    values = row["values"]
    assert row["spread"] == pytest.approx((max(values.values()) - min(values.values())) / max(values.values()))

    markdown = (run_dir / "report.md").read_text(encoding="utf-8")
    html = (run_dir / "report.html").read_text(encoding="utf-8")
    assert "Accept length by source" in markdown and "Accept length by source" in html
    for source, name in (("journal", "log"), ("prometheus", "/metrics"), ("responses", "responses")):
        cell = f"{values[source]:.3f}" + ("*" if source == row["used"] else "")
        section = markdown.split("Accept length by source", 1)[1]
        line = next(line for line in section.splitlines() if line.startswith("| eagle3") and "C=2" in line)
        assert cell in line, (name, cell, line)
        assert cell in html
