"""One controller at a time writes a run (issue 28, item 3), through the real CLI and the simulator.

- A second controller that resumes a run another one holds (also with ``--redo-changed`` of an edited
  experiment) is refused before it writes anything: the run's files stay byte for byte as they were.
- While a sweep runs, a second one that resumes it is refused, and a new one is refused by the host's lock
  without leaving a run directory behind; the first run ends ``done`` with a record for every planned point.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.reliability.harness import (
    cli_env,
    free_port,
    local_experiment,
    only_run_dir,
    planned_points,
    records,
    run_cli,
    run_dirs,
    run_state,
    started_cli,
    wait_until,
    write_experiment,
)
from tests.timing import scaled

pytestmark = pytest.mark.timeout(300)

_HOLD = (
    "import sys\n"
    "from orchestrator.runs.runlock import RunLock\n"
    "RunLock.take(sys.argv[1])\n"
    "print('held', flush=True)\n"
    "sys.stdin.read()\n"
)


@contextmanager
def held_by_another_process(run_dir: Path) -> Iterator[int]:
    """The run's lock, held by another process (a controller that is driving the run) until the block ends."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(run_dir)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        yield proc.pid
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def snapshot(run_dir: Path) -> dict[str, bytes]:
    return {str(p.relative_to(run_dir)): p.read_bytes() for p in sorted(run_dir.rglob("*")) if p.is_file()}


def test_a_refused_resume_leaves_the_held_run_byte_for_byte_as_it_was(tmp_path: Path, home: Path) -> None:
    port = free_port()
    doc = local_experiment("locked", port, {"ar": "--algorithm ar", "linear": "--algorithm linear"})
    path = write_experiment(tmp_path / "locked.yaml", doc)
    results = tmp_path / "results"
    env = cli_env(home)
    first = run_cli("sweep", str(path), "--results", str(results), env=env)
    assert first.returncode == 0, first.stderr + first.stdout
    run_dir = only_run_dir(results, "locked")
    # An edited experiment: a resume with --redo-changed would rewrite plan.json and experiment.yaml.
    edited = dict(doc, variants={**doc["variants"], "linear": {"spec_args": "--algorithm linear --draft-tokens 3"}})
    edited_path = write_experiment(tmp_path / "edited.yaml", edited)
    with held_by_another_process(run_dir) as pid:
        before = snapshot(run_dir)
        for args in (
            ("sweep", str(path), "--results", str(results), "--resume", str(run_dir)),
            ("sweep", str(path), "--results", str(results), "--resume", "latest", "--retry-failed"),
            ("sweep", str(edited_path), "--results", str(results), "--resume", str(run_dir), "--redo-changed"),
        ):
            proc = run_cli(*args, env=env)
            said = proc.stdout + proc.stderr
            assert proc.returncode != 0, said
            assert "being written by another specsweep" in said and f"pid {pid}" in said, said
            assert "Traceback" not in said
            assert snapshot(run_dir) == before, args
    # Given back, the same resume goes ahead (nothing is pending: the run is done).
    proc = run_cli("sweep", str(path), "--results", str(results), "--resume", str(run_dir), env=env)
    assert proc.returncode == 0, proc.stderr + proc.stdout


def test_a_second_controller_cannot_resume_a_live_run_nor_leave_an_empty_one(tmp_path: Path, home: Path) -> None:
    port = free_port()
    load = {
        "concurrency": [1, 2],
        "warmup": 1,
        "requests": 30,
        "max_tokens": 48,
        "ignore_eos": True,
        "temperature": 0,
    }
    doc = local_experiment("live", port, {"ar": "--algorithm ar", "linear": "--algorithm linear"}, load=load, itl_ms=10)
    path = write_experiment(tmp_path / "live.yaml", doc)
    results = tmp_path / "results"
    env = cli_env(home)
    with started_cli("sweep", str(path), "--results", str(results), env=env) as first:
        run_dir = wait_until(lambda: (run_dirs(results, "live") or [None])[0], timeout=60)
        wait_until(lambda: records(run_dir), timeout=120)  # it is measuring
        resumed = run_cli("sweep", str(path), "--results", str(results), "--resume", str(run_dir), env=env)
        said = resumed.stdout + resumed.stderr
        assert resumed.returncode != 0 and "being written by another specsweep" in said, said
        new = run_cli("sweep", str(path), "--results", str(results), env=env)
        said = new.stdout + new.stderr
        assert new.returncode != 0 and "Traceback" not in said, said
        assert "lock" in said, said  # refused by the host's lock, which the first run holds
        assert run_dirs(results, "live") == [run_dir], "the refused sweep left a run directory behind"
        assert first.wait(240) == 0
    assert run_state(run_dir) == "done"
    recs = records(run_dir)
    assert {(r["deployment_id"], r["point_id"]) for r in recs if r["status"] == "ok"} == planned_points(run_dir)
    assert not (run_dir / "superseded.jsonl").exists() or not (run_dir / "superseded.jsonl").read_text().strip()


def test_a_lock_file_removed_by_hand_lets_no_second_controller_in(tmp_path: Path, home: Path) -> None:
    """The lock is on the run directory itself: ``rm RUN/.lock`` while a controller holds the run does not let
    a second one resume it (it did: that one rewrote the live run's plan)."""
    port = free_port()
    doc = local_experiment("unlinked", port, {"ar": "--algorithm ar"})
    path = write_experiment(tmp_path / "unlinked.yaml", doc)
    results = tmp_path / "results"
    env = cli_env(home)
    assert run_cli("sweep", str(path), "--results", str(results), env=env).returncode == 0
    run_dir = only_run_dir(results, "unlinked")
    with held_by_another_process(run_dir):
        (run_dir / ".lock").unlink()
        before = snapshot(run_dir)
        proc = run_cli("sweep", str(path), "--results", str(results), "--resume", str(run_dir), env=env)
        said = proc.stdout + proc.stderr
        assert proc.returncode != 0 and "being written by another specsweep" in said, said
        assert snapshot(run_dir) == before


@pytest.mark.parametrize("how", ["moved", "removed"])
def test_a_run_directory_moved_or_removed_mid_run_stops_the_run_saying_where(
    tmp_path: Path, home: Path, how: str
) -> None:
    """Moved (or removed) while the sweep writes it: the run stops, non-zero, saying where the directory is now,
    and nothing is recreated at the old path (it was: a partial copy that said ``done``)."""
    port = free_port()
    load = {"concurrency": [1, 2], "warmup": 0, "requests": 30, "max_tokens": 48, "ignore_eos": True}
    doc = local_experiment(
        "moved", port, {"ar": "--algorithm ar", "linear": "--algorithm linear"}, load=load, itl_ms=10
    )
    path = write_experiment(tmp_path / "moved.yaml", doc)
    results = tmp_path / "results"
    elsewhere = tmp_path / "elsewhere"
    with started_cli("sweep", str(path), "--results", str(results), env=cli_env(home)) as proc:
        run_dir = wait_until(lambda: (run_dirs(results, "moved") or [None])[0], timeout=60)
        wait_until(lambda: records(run_dir), timeout=120)  # it is measuring
        if how == "moved":
            run_dir.rename(elsewhere)
        else:
            subprocess.run(["rm", "-rf", str(run_dir)], check=True)
        out, err = proc.communicate(timeout=scaled(240))
    said = out + err
    assert proc.returncode != 0, said
    assert "Traceback" not in said
    assert not run_dir.exists(), "a partial copy was recreated at the old path"
    if how == "moved":
        assert f"was moved to {elsewhere}" in said, said
        assert run_state(elsewhere) == "running"  # its last word could not be written: a resume continues it
    else:
        assert "was removed" in said, said
