"""Issue 61: a ``sweep --report`` makes the run's Answer once, and every output of its ending renders that one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from orchestrator.analysis import answer as answer_module
from tests.reliability.harness import free_port, local_experiment, write_experiment

pytestmark = pytest.mark.timeout(300)


def test_a_sweep_with_its_report_makes_and_writes_its_answer_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from orchestrator.cli.app import app

    made: list[int] = []
    real_answer_of = answer_module.answer_of

    def counting(analysis: object) -> object:
        made.append(1)
        return real_answer_of(analysis)  # type: ignore[arg-type]

    writes: list[str] = []
    real_write = answer_module.write_atomic

    def counting_write(path: Path, data: object) -> None:
        writes.append(Path(path).name)
        real_write(path, data)  # type: ignore[arg-type]

    monkeypatch.setattr(answer_module, "answer_of", counting)
    monkeypatch.setattr(answer_module, "write_atomic", counting_write)
    monkeypatch.setenv("HOME", str(tmp_path))  # the process service's state: this test's own
    port = free_port()
    doc = local_experiment("once", port, {"autoregressive": "--algorithm ar", "linear": "--algorithm linear"})
    path = write_experiment(tmp_path / "once.yaml", doc)
    result = CliRunner().invoke(app, ["sweep", str(path), "--report", "--json", "--results", str(tmp_path / "results")])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout[result.stdout.index("{") :])
    run_dir = Path(summary["run_dir"])
    assert (run_dir / "report.html").is_file() and (run_dir / "answer.json").is_file()
    assert len(made) == 1  # the ending, the report and --json render one Answer
    assert writes.count("answer.json") == 1
    saved = json.loads((run_dir / "answer.json").read_text())
    assert saved["counts"] == {"planned": 4, "ok": 4, "degraded": 0, "failed": 0, "skipped": 0}
