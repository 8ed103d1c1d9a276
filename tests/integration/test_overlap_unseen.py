"""Issue 59, item 3: contamination a sweep was not told about. Each test runs a sweep in this process on the
simulator (real HTTP over sockets) with a neighbouring controller in another process:

- a controller of the same experiment (another folder, another port) is named in the records it overlapped;
- a controller that registers and ends inside one point's window (between the point's two looks) still marks it;
- every point keeps how busy the controller's machine was (load average, CPUs, busy share).

Each test has its own HOME and state directory (the registry of controllers lives there)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from orchestrator.experiment.schema import load_experiment
from orchestrator.sweep.events import LoadProgress, SweepEvent
from orchestrator.sweep.runner import SweepOptions, run_sweep
from tests.reliability.harness import free_port, local_experiment, local_leftovers_restored, write_experiment

pytestmark = pytest.mark.timeout(300)

HOLD = """
import sys
from orchestrator.runs.neighbours import Registration
reg = Registration.take(experiment=sys.argv[1], hosts=["local (this machine)"], run_dir=sys.argv[2])
print(reg.path, flush=True)
sys.stdin.read()
reg.release()
"""

LOAD = {"concurrency": [1], "warmup": 1, "requests": 4, "max_tokens": 8, "ignore_eos": True}


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_STATE_HOME", str(home / "state"))
    return home


def _neighbour(experiment: str, run_dir: Path) -> subprocess.Popen[str]:
    """Another controller (another process) registered until its stdin closes; its entry is there on return."""
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    proc = subprocess.Popen([sys.executable, "-c", HOLD, experiment, str(run_dir)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=env, cwd=root)  # fmt: skip
    assert proc.stdout is not None and proc.stdout.readline().strip()
    return proc


def _end(proc: subprocess.Popen[str]) -> None:
    proc.communicate(input="", timeout=60)


def _sweep(tmp_path: Path, home: Path, observer: Any = None) -> list[Any]:
    doc = local_experiment("same", free_port(), {"ar": "--algorithm ar"}, load=LOAD, itl_ms=5)
    doc["lossless"] = {"enabled": False}
    path = write_experiment(tmp_path / "same.yaml", doc)
    with local_leftovers_restored(home, path):
        result = run_sweep(load_experiment(path), SweepOptions(results_root=tmp_path / "results"), observer=observer)
    return result.records


def test_a_controller_of_the_same_experiment_is_named_in_the_records(tmp_path: Path, home: Path) -> None:
    other = _neighbour("same", tmp_path / "elsewhere" / "results" / "same" / "r1")
    try:
        records = _sweep(tmp_path, home)
    finally:
        _end(other)
    assert records
    for record in records:
        assert [(e["pid"], e["experiment"]) for e in record.overlapped or []] == [(other.pid, "same")], record
        machine = record.machine or {}
        assert machine.get("cpus", 0) >= 1 and machine.get("loadavg_1m") is not None, machine
        assert machine.get("load_per_cpu") is not None and machine.get("busy_share") is not None, machine


def test_a_controller_that_starts_and_ends_inside_a_point_marks_it(tmp_path: Path, home: Path) -> None:
    seen: list[int] = []

    def observer(event: SweepEvent) -> None:
        # Inside the point's window (its load runs): a whole other controller's life, begun and ended.
        if isinstance(event, LoadProgress) and not seen:
            proc = _neighbour("brief", tmp_path / "brief-run")
            _end(proc)
            seen.append(proc.pid)

    records = _sweep(tmp_path, home, observer)
    assert seen
    (record,) = [r for r in records if r.overlapped]
    assert [(e["pid"], e["experiment"]) for e in record.overlapped or []] == [(seen[0], "brief")]
    assert record.overlapped and record.overlapped[0].get("ended"), record.overlapped
