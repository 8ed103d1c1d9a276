"""``latest`` never silently means an older run (issue 49, "still open"), through the real CLI:

- ``report latest`` (and ``EXPERIMENT/latest``) when the newest run's run.json cannot be read picked the run
  before it; it refuses, naming the file;
- ``sweep --resume latest`` when the newest run's run.json has the wrong shape (valid JSON, not a run's)
  continued an older, finished run; it refuses, naming the file.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from orchestrator.experiment.schema import load_experiment
from orchestrator.runs.identity import experiment_file, host_identities, resolved_experiment
from orchestrator.runs.store import RunStore
from tests.reliability.harness import cli_env, free_port, local_experiment, run_cli, write_experiment

pytestmark = pytest.mark.timeout(180)


def _runs(tmp_path: Path) -> tuple[Path, Path, Path, Path]:
    """An experiment file and two runs of it: an older finished one and a newer one (both empty)."""
    path = write_experiment(tmp_path / "ul.yaml", local_experiment("ul", free_port(), {"ar": "--algorithm ar"}))
    experiment = load_experiment(path)
    resolved = resolved_experiment(experiment)
    made = []
    start = datetime(2026, 1, 1, tzinfo=UTC)
    for hours in (0, 1):
        store = RunStore.create(
            tmp_path / "results", "ul", resolved, {"deployments": []}, now=start + timedelta(hours=hours),
            experiment_file=experiment_file(experiment), hosts=host_identities(resolved),
        )  # fmt: skip
        store.set_state("done")
        store.release()
        made.append(store.path)
    return path, tmp_path / "results", made[0], made[1]


def _refused(proc, *words: str) -> None:  # type: ignore[no-untyped-def]
    assert proc.returncode != 0, proc.stdout
    assert "Traceback" not in proc.stderr + proc.stdout
    for word in words:
        assert word in proc.stderr, proc.stderr


@pytest.mark.parametrize("broken", ["{", "[1, 2]", ""], ids=["torn", "a-list", "empty"])
def test_report_latest_refuses_when_the_newest_run_json_cannot_be_read(tmp_path: Path, broken: str) -> None:
    _path, results, older, newer = _runs(tmp_path)
    (newer / "run.json").write_text(broken)
    env = cli_env(tmp_path)
    for ref in ("latest", "ul/latest"):
        proc = run_cli("report", ref, "--results", str(results), "--json", env=env)
        _refused(proc, str(newer / "run.json"))
        assert str(older) not in proc.stdout


def test_resume_latest_refuses_when_the_newest_run_json_has_the_wrong_shape(tmp_path: Path) -> None:
    path, results, older, newer = _runs(tmp_path)
    info = json.loads((newer / "run.json").read_text())
    info["state"] = 7  # JSON, an object, a sequence: not a run's state
    (newer / "run.json").write_text(json.dumps(info))
    proc = run_cli(
        "sweep", str(path), "--resume", "latest", "--results", str(results), "--dry-run", env=cli_env(tmp_path)
    )
    _refused(proc, str(newer / "run.json"), "state")
    assert older.name not in proc.stdout
