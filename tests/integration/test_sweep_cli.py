"""`specsweep sweep` end to end on this machine: the simulator as a local process, the CLI as a subprocess.

Small on purpose (the tiny profile, a few requests per point): the whole loop, the run directory it leaves,
failures as records inside one sweep, and Ctrl-C then ``--resume latest``.
"""

from __future__ import annotations

import json
import signal
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from tests.reliability.harness import (
    SMALL_LOAD,
    cli_env,
    duplicates,
    events,
    free_port,
    local_experiment,
    only_run_dir,
    planned_points,
    point_ids,
    records,
    run_cli,
    run_dirs,
    run_state,
    started_cli,
    wait_until,
    write_experiment,
)
from tests.timing import scaled

pytestmark = pytest.mark.timeout(240)


def _port_closed(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) != 0


def _state_files(home: Path) -> list[str]:
    """What the process service left in its state directory (only logs may stay)."""
    state = home / ".local" / "state" / "specsweep"
    return sorted(p.name for p in state.iterdir() if not p.name.endswith(".log")) if state.is_dir() else []


def test_a_sweep_runs_end_to_end_and_leaves_a_complete_run_directory(tmp_path: Path, home: Path) -> None:
    port = free_port()
    doc = local_experiment(
        "e2e",
        port,
        {
            "autoregressive": "--algorithm ar",
            "linear": "--algorithm linear --draft-tokens 7",
            "ddtree": "--algorithm ddtree --budget 7 --topk {topk}",
        },
        baselines=["autoregressive", "linear"],
        load={**SMALL_LOAD, "requests": 3, "max_tokens": 16},
    )
    doc["variants"]["ddtree"]["matrix"] = {"topk": [1, 4]}
    path = write_experiment(tmp_path / "e2e.yaml", doc)
    results = tmp_path / "results"
    proc = run_cli("sweep", str(path), "--results", str(results), env=cli_env(home))
    assert proc.returncode == 0, proc.stderr
    run_dir = only_run_dir(results, "e2e")
    # What the user sees: the summary with every configuration, the run directory and the report.
    for label in ("autoregressive", "linear", "topk=1", "topk=4"):
        assert label in proc.stdout, proc.stdout
    assert f"run directory: {run_dir}" in proc.stdout
    assert (run_dir / "report.html").is_file()
    # The run directory: state, plan, resolved experiment, one record per point, windows, events.
    info = json.loads((run_dir / "run.json").read_text())
    assert info["state"] == "done" and info["schema_version"] == 1 and info["ended_at"]
    plan = json.loads((run_dir / "plan.json").read_text())
    assert len(plan["deployments"]) == 4
    assert "ddtree" in (run_dir / "experiment.yaml").read_text()
    recs = records(run_dir)
    assert len(recs) == 8 and not duplicates(recs)
    assert point_ids(recs) == {p for _, p in planned_points(run_dir)}
    assert {r["status"] for r in recs} == {"ok"}
    assert [r["variant"] for r in recs[:4]] == ["autoregressive"] * 2 + ["linear"] * 2  # baselines first
    for record in recs:
        assert record["client"]["requests"] == 3 and record["client"]["errors"] == 0
        assert record["client"]["output_tok_s"] > 0
        assert (run_dir / record["window_file"]).is_file()
        if record["variant"] != "autoregressive":
            assert record["server"]["accept_len"] > 1  # read from the window's own log lines
    kinds = [e["kind"] for e in events(run_dir)]
    assert kinds.count("deploy") == 4 and kinds.count("healthy") == 4
    assert kinds[0] == "start" and kinds[-2:] == ["restore", "end"]
    # The host is as it was: no server left, no marker, no lock.
    assert wait_until(lambda: _port_closed(port), timeout=30)
    assert _state_files(home) == []


def test_failures_are_records_and_the_sweep_goes_on(tmp_path: Path, home: Path) -> None:
    """One sweep: a deployment that fails to start, one that crashes mid-point, one whose streams stall."""
    port = free_port()
    doc = local_experiment(
        "faults",
        port,
        {
            "ar": "--algorithm ar",
            "failstart": "--fault fail-start",
            "crash": "--algorithm linear --fault crash-after=2",
            "stall": "--fault stall",
        },
        ready_timeout="10s",
    )
    path = write_experiment(tmp_path / "faults.yaml", doc)
    results = tmp_path / "results"
    proc = run_cli("sweep", str(path), "--results", str(results), "--json", "--no-report", env=cli_env(home))
    assert proc.returncode == 3, proc.stderr  # the plan ran to its end, with failed points
    summary = json.loads(proc.stdout)
    assert summary["state"] == "done" and summary["points"] == 8 and summary["failed"] == 6
    run_dir = only_run_dir(results, "faults")
    recs = records(run_dir)
    assert not duplicates(recs) and len(recs) == 8
    by_variant: dict[str, list[dict[str, Any]]] = {}
    for record in recs:
        by_variant.setdefault(record["variant"], []).append(record)
    assert [r["status"] for r in by_variant["ar"]] == ["ok", "ok"]
    # fail-start: both points failed with the reason and the traceback that explains it
    for record in by_variant["failstart"]:
        assert record["status"] == "failed" and record["error"]["kind"] == "start_failed"
        assert "failed to start" in record["error"]["message"]
        assert any("Traceback" in line for line in record["error"]["evidence"])
    # crash-after: the point the server died in failed with its last lines; re-applied once, then died again
    crash = by_variant["crash"]
    assert [r["error"]["kind"] for r in crash] == ["server_died", "server_died"]
    assert any("crash" in line.lower() or "exit" in line.lower() for line in crash[0]["error"]["evidence"])
    deploys = [
        e["attempt"] for e in events(run_dir) if e["kind"] == "deploy" and e["deployment"] == crash[0]["deployment_id"]
    ]
    assert deploys == [1, 2]
    # stall: every stream stopped mid-response; the client's timeout ended each request, the point failed
    for record in by_variant["stall"]:
        assert record["error"]["kind"] == "all_requests_failed"
        assert record["client"]["errors_by_kind"] == {"total_timeout": record["client"]["requests"]}
    assert run_state(run_dir) == "done"
    assert wait_until(lambda: _port_closed(port), timeout=30)
    assert _state_files(home) == []


def test_ctrl_c_restores_exits_130_and_resume_latest_completes(tmp_path: Path, home: Path) -> None:
    port = free_port()
    load = {**SMALL_LOAD, "requests": 4}
    doc = local_experiment(
        "ctrlc", port, {"ar": "--algorithm ar", "linear": "--algorithm linear"}, load=load, itl_ms=40
    )
    path = write_experiment(tmp_path / "ctrlc.yaml", doc)
    results = tmp_path / "results"
    argv = ("sweep", str(path), "--results", str(results), "--no-report", "-q")
    with started_cli(*argv, env=cli_env(home)) as proc:
        run_dir = wait_until(lambda: next(iter(run_dirs(results, "ctrlc")), None) or proc.poll() is not None)
        assert isinstance(run_dir, Path), proc.communicate()
        wait_until(lambda: records(run_dir) or proc.poll() is not None, timeout=120)
        time.sleep(0.3)  # into the second point (about 0.6 s of load)
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=scaled(120))
    assert proc.returncode == 130, err
    assert "interrupt: stopping the load and restoring the host" in err
    assert (
        err.strip().splitlines()[-1]
        == f"specsweep: error: interrupted; hosts restored; resume with specsweep sweep {path} --resume {run_dir}"
    )
    assert run_state(run_dir) == "interrupted"
    finished = point_ids(records(run_dir))
    planned = {p for _, p in planned_points(run_dir)}
    assert finished and finished < planned and not duplicates(records(run_dir))
    assert _port_closed(port) and _state_files(home) == []

    resumed = run_cli(
        "sweep", str(path), "--results", str(results), "--resume", "latest", "-q", "--no-report", env=cli_env(home)
    )
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.strip() == str(run_dir)
    recs = records(run_dir)
    assert point_ids(recs) == planned and not duplicates(recs)
    assert finished <= point_ids(recs)
    assert run_state(run_dir) == "done"
    assert json.loads((run_dir / "run.json").read_text())["resumed_at"]
    assert wait_until(lambda: _port_closed(port), timeout=30)
    assert _state_files(home) == []
