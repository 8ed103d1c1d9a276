"""Issue 41: two sweeps of different experiments on one machine, through the real CLI on the simulator. The
second warns naming the first (its experiment, pid, host, run) and why it matters; both runs' records and
reports carry the overlap as a finding. A controller killed with SIGKILL leaves an entry that never warns.
Each test has its own HOME (the registry lives under ~/.local/state/specsweep)."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from tests.reliability.harness import (
    cli_env,
    free_port,
    local_experiment,
    local_leftovers_restored,
    records,
    run_cli,
    run_dirs,
    started_cli,
    wait_until,
    write_experiment,
)
from tests.timing import scaled

pytestmark = pytest.mark.timeout(300)

# A sweep that outlives the test: each is stopped with Ctrl-C once what the test waits for is there.
LONG_LOAD = {"concurrency": [1, 2], "repeats": 500, "warmup": 1, "requests": 8, "max_tokens": 16, "ignore_eos": True}
SHORT_LOAD = {"concurrency": [1], "warmup": 1, "requests": 4, "max_tokens": 8}


def _env(home: Path) -> dict[str, str]:
    """The CLI's environment with ``home`` as HOME and the user's state directory under it (the suite gives
    each worker its own XDG_STATE_HOME; these tests look at the default place)."""
    env = cli_env(home)
    env.pop("XDG_STATE_HOME", None)
    return env


def _experiment(tmp_path: Path, name: str, load: dict[str, Any]) -> Path:
    doc = local_experiment(name, free_port(), {"ar": "--algorithm ar", "linear": "--algorithm linear"}, load=load,
                           itl_ms=5)  # fmt: skip
    return write_experiment(tmp_path / f"{name}.yaml", doc)


def _overlapped(run_dir: Path) -> list[dict[str, Any]]:
    return [r for r in records(run_dir) if r.get("overlapped")]


def _report_findings(run_dir: Path, env: dict[str, str]) -> list[dict[str, Any]]:
    proc = run_cli("report", str(run_dir), "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    answer = json.loads(proc.stdout)
    findings = answer.get("findings")
    assert isinstance(findings, list), sorted(answer)
    return findings


def test_a_second_sweep_of_another_experiment_warns_and_both_runs_carry_the_overlap(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = _env(home)
    first, second = _experiment(tmp_path, "first", LONG_LOAD), _experiment(tmp_path, "second", LONG_LOAD)
    results = tmp_path / "results"
    with (
        local_leftovers_restored(home, first, second),
        started_cli("sweep", str(first), "--results", str(results), env=env) as a,
    ):
        run_a = wait_until(lambda: (run_dirs(results, "first") or [None])[0], timeout=60)
        wait_until(lambda: records(run_a), timeout=120)  # the first sweep is measuring
        with started_cli("sweep", str(second), "--results", str(results), env=env) as b:
            run_b = wait_until(lambda: (run_dirs(results, "second") or [None])[0], timeout=60)
            # Each sweep marks a point measured beside the other (both are long enough to still run).
            both = wait_until(lambda: _overlapped(run_b) and _overlapped(run_a), timeout=240)
            os.kill(b.pid, signal.SIGINT)
            _out_b, err_b = b.communicate(timeout=scaled(120))
        os.kill(a.pid, signal.SIGINT)
        _out_a, err_a = a.communicate(timeout=scaled(120))
    assert both, (records(run_a)[-1:], records(run_b)[-1:], err_b)

    said_b = " ".join(err_b.split())
    assert (
        f"another specsweep sweep is running on this machine: first (pid {a.pid} on {os.uname().nodename} since "
        in said_b
    ), err_b
    assert f"driving local (this machine); run {run_a})" in said_b, err_b
    assert (
        "The two share this machine's CPU and network (load generation, client timings), and both run their" in said_b
    )
    assert "servers on this machine: the figures of both runs are contaminated" in said_b, err_b
    # The first sweep is told too, when the second one starts.
    said_a = " ".join(err_a.split())
    assert f"another specsweep sweep started beside this one on this machine: second (pid {b.pid} " in said_a, err_a

    for run, other, pid in ((run_b, run_a, a.pid), (run_a, run_b, b.pid)):
        marks = {json.dumps(e, sort_keys=True) for r in _overlapped(run) for e in r["overlapped"]}
        assert len(marks) == 1, (run, marks)
        (entry,) = marks
        mark = json.loads(entry)
        assert (mark["pid"], mark["run_dir"]) == (pid, str(other)), mark
        overlap_events = [e for e in _lines(run / "events.jsonl") if e.get("kind") == "overlap"]
        assert [e.get("pid") for e in overlap_events] == [pid], overlap_events
        findings = [f for f in _report_findings(run, env) if f.get("check") == "overlapping_runs"]
        assert len(findings) == 1 and findings[0]["severity"] == "warning", findings
        assert f"(pid {pid} on " in findings[0]["message"] and str(other) in findings[0]["message"], findings
        assert "another specsweep sweep ran on this machine" in findings[0]["message"], findings
    # Once both have ended, the registry is empty.
    assert list((home / ".local/state/specsweep/controllers").iterdir()) == []


def test_a_killed_controllers_entry_neither_warns_nor_marks_the_next_sweep(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = _env(home)
    first, second = _experiment(tmp_path, "first", LONG_LOAD), _experiment(tmp_path, "second", SHORT_LOAD)
    results = tmp_path / "results"
    registry = home / ".local/state/specsweep/controllers"
    with local_leftovers_restored(home, first, second):
        with started_cli("sweep", str(first), "--results", str(results), env=env) as a:
            run_a = wait_until(lambda: (run_dirs(results, "first") or [None])[0], timeout=60)
            wait_until(lambda: records(run_a), timeout=120)
            (entry,) = registry.iterdir()
            assert json.loads(entry.read_text())["pid"] == a.pid
            os.kill(a.pid, signal.SIGKILL)
            a.communicate(timeout=scaled(60))
        assert entry.exists()  # nothing removed it: the killed controller could not
        swept = run_cli("sweep", str(second), "--results", str(results), env=env)
    assert swept.returncode == 0, swept.stderr
    assert "another specsweep sweep" not in swept.stderr, swept.stderr
    (run_b,) = run_dirs(results, "second")
    assert records(run_b) and not _overlapped(run_b), records(run_b)
    assert not entry.exists() and list(registry.iterdir()) == []


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
