"""The registry of live controllers on this machine (orchestrator/runs/neighbours.py): an entry is seen while its
controller holds it, dropped when the controller is gone, and a process's own entries are not its neighbours."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from orchestrator.runs.neighbours import Registration, live_controllers, registry_dir
from tests.timing import scaled

HOLD = """
import sys, time
from orchestrator.runs.neighbours import Registration
reg = Registration.take(experiment="other", hosts=["gpu-box (root@10.0.0.2)"], run_dir="results/other/r1")
print(reg.path, flush=True)
sys.stdin.read()
"""


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)  # the user's state directory: ~/.local/state


def test_another_process_entry_is_seen_while_it_lives_and_removed_when_it_is_gone(tmp_path: Path) -> None:
    env = {**os.environ, "HOME": str(tmp_path)}  # XDG_STATE_HOME is unset by the fixture
    proc = subprocess.Popen([sys.executable, "-c", HOLD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            env=env, cwd=tmp_path)  # fmt: skip
    try:
        assert proc.stdout is not None
        path = Path(proc.stdout.readline().strip())
        (other,) = live_controllers()
        assert (other.pid, other.experiment, other.hosts, other.run_dir) == (
            proc.pid,
            "other",
            ("gpu-box (root@10.0.0.2)",),
            str(tmp_path / "results/other/r1"),  # absolute: the reader's directory is not the writer's
        )
        assert other.shares_a_host(["local (this machine)", "gpu-box (root@10.0.0.2)"]) == ["gpu-box (root@10.0.0.2)"]
        assert f"other (pid {proc.pid} on " in other.describe()
        proc.kill()  # SIGKILL: the registration is never released by its owner
        proc.wait(timeout=scaled(30))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=scaled(30))
    assert path.exists()
    assert live_controllers() == []
    assert not path.exists()


def test_a_process_does_not_see_its_own_entries_and_release_removes_them() -> None:
    mine = Registration.take(experiment="a", hosts=[], run_dir="r")
    nested = Registration.take(experiment="b", hosts=[], run_dir="r2")  # a playbook's sweep: one controller
    assert mine is not None and nested is not None
    try:
        assert mine.others() == [] and nested.others() == []
        assert sorted(n.experiment for n in live_controllers()) == ["a", "b"]
        assert live_controllers(exclude_pid=os.getpid()) == []
    finally:
        mine.release()
        nested.release()
        mine.release()  # idempotent
    assert list(registry_dir().iterdir()) == []


def test_an_unlocked_entry_and_a_stale_temporary_file_are_cleared_garbage_is_ignored() -> None:
    directory = registry_dir()
    directory.mkdir(parents=True)
    (directory / "1.dead.json").write_text(json.dumps({"pid": 1, "experiment": "x"}))
    stale = directory / ".2.dead.json.tmp"
    stale.write_text("{}")
    old = time.time() - 3600
    os.utime(stale, (old, old))
    fresh = directory / ".3.new.json.tmp"
    fresh.write_text("{}")  # a controller registering right now: left alone
    (directory / "notes.txt").write_text("not an entry")
    assert live_controllers() == []
    assert sorted(p.name for p in directory.iterdir()) == [".3.new.json.tmp", "notes.txt"]


def test_an_unwritable_registry_registers_nothing_and_says_none(tmp_path: Path) -> None:
    (tmp_path / ".local").write_text("a file where the state directory would be")
    assert Registration.take(experiment="a", hosts=[], run_dir="r") is None
    assert live_controllers() == []


def test_xdg_state_home_is_the_state_directory_when_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    assert registry_dir() == tmp_path / "state" / "specsweep" / "controllers"
    monkeypatch.setenv("XDG_STATE_HOME", "relative/state")  # the XDG spec: ignored
    assert registry_dir() == tmp_path / ".local" / "state" / "specsweep" / "controllers"


def test_the_warning_says_what_the_two_runs_share() -> None:
    from orchestrator.runs.neighbours import Neighbour
    from orchestrator.sweep.overlap import overlap_message

    other = Neighbour("t", 42, "laptop", "exp-a", ("gpu-box (root@10.0.0.2)", "local (this machine)"), "/r/a", "T")
    alone = overlap_message(other, ["gpu-2 (root@10.0.0.3)"], started=False)
    assert alone.startswith("another specsweep sweep is running on this machine: exp-a (pid 42 on laptop since T")
    assert "(load generation, client timings): the figures of both runs are contaminated" in alone
    both = overlap_message(other, ["gpu-box (root@10.0.0.2)", "local (this machine)"], started=True)
    assert both.startswith("another specsweep sweep started beside this one on this machine: exp-a")
    assert (
        "client timings), and both run their servers on this machine, and the GPUs of gpu-box (root@10.0.0.2), "
        "which both drive: the figures" in both
    )
