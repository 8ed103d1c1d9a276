"""The fault matrix: a small real sweep against the systemd + sshd test host, one fault injected per scenario.

Every scenario asserts three things: the run's final state is what it should be; every point that finished
before the fault is in ``records.jsonl`` exactly once (and, once the run is complete or resumed, every point
of the plan is); the host's ``/etc/systemd/system``, the unit's state and its drop-ins are byte for byte what
they were before the run. Each scenario also fills an :class:`~tests.reliability.conftest.Outcome` for the
reliability figures (``bench/reliability_figures.py``).

The sweeps run in this process (``run_sweep``) where the fault comes from the server or the network, and as
the ``specsweep`` CLI in a subprocess where it comes from a signal to the controller.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from orchestrator.errors import HostKeyError, HostLockedError
from orchestrator.sweep.events import HealthProgress, LoadProgress, PointStarted
from tests.reliability.conftest import Outcome
from tests.reliability.harness import (
    SMALL_LOAD,
    Trigger,
    cli_env,
    duplicates,
    events,
    host_state,
    kill_ssh_sessions,
    observers,
    planned_points,
    point_ids,
    records,
    run_dirs,
    run_state,
    server_metric,
    ssh_experiment,
    start_sshd,
    started_cli,
    state_differences,
    stop_sshd,
    sweep_in_process,
    wait_until,
    write_experiment,
)
from tests.system.conftest import SimUnit, install_sim_unit, remove_sim_unit
from tests.system.support import TestHost
from tests.timing import scaled

pytestmark = [pytest.mark.system, pytest.mark.timeout(240)]


def _experiment(tmp_path: Path, sim: SimUnit, name: str, variants: dict[str, str], **kwargs: Any) -> Path:
    doc = ssh_experiment(name, [sim.host], sim.unit, sim.port, variants, **kwargs)
    return write_experiment(tmp_path / f"{name}.yaml", doc)


def _check_host(sim: SimUnit, before: dict[str, Any], outcome: Outcome) -> None:
    differences = state_differences(before, host_state(sim.host, sim.unit))
    outcome.host_checks += 1
    outcome.hosts_modified += 1 if differences else 0
    assert not differences, "\n".join(differences)


def _check_complete(run_dir: Path, outcome: Outcome, kept: set[str] = frozenset()) -> None:  # type: ignore[assignment]
    """Every planned point is recorded exactly once, and every point recorded earlier (``kept``) still is."""
    recs = records(run_dir)
    planned = {p for _, p in planned_points(run_dir)}
    lost = (planned - point_ids(recs)) | (kept - point_ids(recs))
    outcome.points_checked += len(planned)
    outcome.points_lost += len(lost)
    assert not lost, f"points without a record: {sorted(lost)}"
    assert not duplicates(recs), duplicates(recs)


# -- the server misbehaves -------------------------------------------------------------------------------------

#: Each server fault is one deployment of one sweep, after a healthy AR baseline: a deployment is a restart, so
#: they cannot disturb each other, and one sweep of seven deployments costs half of six sweeps of two.
SERVER_FAULTS = {
    "fail-start": ("--fault fail-start", "failed", "start_failed"),
    "slow-start": ("--fault slow-start=60", "failed", "start_timeout"),
    "crash-after": ("--algorithm linear --fault crash-after=2", "failed", "server_died"),
    "http-500": ("--fault http-500-rate=1", "failed", "all_requests_failed"),
    "stall": ("--fault stall", "failed", "all_requests_failed"),
    "bad-metrics": ("--algorithm linear --fault bad-metrics", "ok", None),
    # A slow-loris /metrics: each scrape is given up at its deadline, the point keeps its other figures.
    "dribble-metrics": ("--algorithm linear --fault dribble-metrics", "ok", None),
}


@pytest.fixture(scope="module")
def server_faults_sweep(testhost: TestHost, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One sweep on the test host: the AR baseline, then one deployment per server fault."""
    sim = install_sim_unit(testhost)
    try:
        tmp = tmp_path_factory.mktemp("server-faults")
        before = host_state(testhost, sim.unit)
        variants = {"ar": "--algorithm ar", **{name: args for name, (args, _, _) in SERVER_FAULTS.items()}}
        path = _experiment(tmp, sim, "server-faults", variants, ready_timeout="4s")
        run = sweep_in_process(path, tmp / "results")
        yield {"run": run, "before": before, "after": host_state(testhost, sim.unit)}
    finally:
        remove_sim_unit(sim)


@pytest.mark.parametrize("fault", list(SERVER_FAULTS))
def test_server_fault(server_faults_sweep: dict[str, Any], outcome: Outcome, fault: str) -> None:
    """The deployment fails (or, for bad metric lines, succeeds) with a record that says what happened, and
    the sweep goes on to the next deployment. (The sweep and the host comparison are shared by the six faults:
    ``test_server_faults_sweep`` counts them, once.)"""
    outcome.scenario = f"server: {fault}"
    outcome.faults = 1
    _, status, kind = SERVER_FAULTS[fault]
    run = server_faults_sweep["run"]
    assert run.error is None, run.error
    assert run.state == "done"
    recs = run.records
    assert [r["status"] for r in recs if r["variant"] == "ar"] == ["ok", "ok"]
    faulty = [r for r in recs if r["variant"] == fault]
    assert [r["status"] for r in faulty] == [status, status]
    if kind is not None:
        first = faulty[0]["error"]
        assert first["kind"] == kind, first
        assert first["evidence"], first  # the lines that explain it
    if fault == "fail-start":
        assert any("Traceback" in line for line in faulty[0]["error"]["evidence"])
    if fault == "bad-metrics":
        assert all(r["server"]["lines_skipped"] > 0 and r["server"]["accept_len"] for r in faulty)
    if fault == "dribble-metrics":
        assert all(r["server"]["accept_len"] for r in faulty)  # the journal's figures stand
        assert not any((r["server"].get("prometheus") or {}).get("accept_len") for r in faulty[1:])
    if fault == "crash-after":
        deployment = faulty[0]["deployment_id"]
        attempts = [
            e["attempt"] for e in events(run.run_dir) if e.get("deployment") == deployment and e["kind"] == "deploy"
        ]
        assert attempts == [1, 2]  # the crashed deployment was re-applied once
    ids = [r["point_id"] for r in faulty]
    assert len(ids) == 2 and len(set(ids)) == 2  # (counted with the whole sweep's points, not here again)


def test_server_faults_sweep(server_faults_sweep: dict[str, Any], outcome: Outcome) -> None:
    """The one sweep of the six server faults records every planned point exactly once and leaves the host as
    it found it."""
    outcome.scenario = "server faults: their one sweep, as a whole"
    outcome.sweeps = 1
    run = server_faults_sweep["run"]
    assert run.error is None, run.error
    _check_complete(run.run_dir, outcome)
    differences = state_differences(server_faults_sweep["before"], server_faults_sweep["after"])
    outcome.host_checks = 1
    outcome.hosts_modified = 1 if differences else 0
    assert not differences, "\n".join(differences)


# -- the network misbehaves ------------------------------------------------------------------------------------


def test_ssh_cut_mid_point(sim_unit: SimUnit, tmp_path: Path, outcome: Outcome) -> None:
    """The controller's SSH connection is killed on the host twice: while the server loads, and mid-point."""
    outcome.scenario = "ssh connection cut (while loading, and mid-point)"
    outcome.faults = 2
    outcome.sweeps = 1
    before = host_state(sim_unit.host, sim_unit.unit)
    path = _experiment(tmp_path, sim_unit, "cut", {"ar": "--algorithm ar", "linear": "--algorithm linear"}, itl_ms=40)
    me = os.getpid()
    during_health = Trigger(
        lambda e: isinstance(e, HealthProgress) and e.elapsed > 0.1, lambda: kill_ssh_sessions(sim_unit.host, me)
    )
    mid_point = Trigger(
        lambda e: isinstance(e, LoadProgress) and e.done >= 1 and during_health.done.is_set(),
        lambda: kill_ssh_sessions(sim_unit.host, me),
    )
    run = sweep_in_process(path, tmp_path / "results", observer=observers(during_health, mid_point))
    assert during_health.join() >= 1 and mid_point.join() >= 1  # both cuts happened
    assert run.error is None, run.error
    assert run.state == "done"
    assert {r["status"] for r in run.records} == {"ok"}
    _check_complete(run.run_dir, outcome)
    _check_host(sim_unit, before, outcome)


@pytest.mark.slow
def test_sshd_down_for_ten_seconds(sim_unit: SimUnit, tmp_path: Path, outcome: Outcome) -> None:
    """sshd stops (and the controller's session dies) mid-point; it is back 10 s later: the sweep goes on."""
    outcome.scenario = "sshd down for 10 s"
    outcome.faults = 1
    outcome.sweeps = 1
    host = sim_unit.host
    before = host_state(host, sim_unit.unit)
    path = _experiment(tmp_path, sim_unit, "sshd", {"ar": "--algorithm ar", "linear": "--algorithm linear"}, itl_ms=40)
    back = threading.Event()

    def outage() -> None:
        stop_sshd(host)
        kill_ssh_sessions(host, os.getpid())
        timer = threading.Timer(10.0, lambda: (start_sshd(host), back.set()))
        timer.start()

    trigger = Trigger(lambda e: isinstance(e, LoadProgress) and e.done >= 1, outage)
    try:
        run = sweep_in_process(path, tmp_path / "results", observer=trigger)
        trigger.join()
    finally:
        wait_until(back.is_set, timeout=30)
        start_sshd(host)
    assert back.is_set()
    assert run.error is None, run.error
    assert run.state == "done"
    assert {r["status"] for r in run.records} == {"ok"}
    _check_complete(run.run_dir, outcome)
    _check_host(sim_unit, before, outcome)


# -- two runs, one host --------------------------------------------------------------------------------------


def test_second_run_against_a_held_host_is_refused(sim_unit: SimUnit, tmp_path: Path, outcome: Outcome) -> None:
    """While a first sweep drives the unit, a second is refused with a clear message and touches nothing."""
    outcome.scenario = "second run against a held host"
    outcome.faults = 1
    outcome.sweeps = 2
    before = host_state(sim_unit.host, sim_unit.unit)
    first_path = _experiment(
        tmp_path, sim_unit, "first", {"ar": "--algorithm ar", "linear": "--algorithm linear"}, itl_ms=20
    )
    second_path = _experiment(tmp_path, sim_unit, "second", {"ar": "--algorithm ar"})
    second: dict[str, Any] = {}

    def second_run() -> None:
        second["run"] = sweep_in_process(second_path, tmp_path / "results")
        second["host"] = host_state(sim_unit.host, sim_unit.unit)

    trigger = Trigger(lambda e: isinstance(e, PointStarted), second_run)
    first = sweep_in_process(first_path, tmp_path / "results", observer=trigger)
    trigger.join()
    refused = second["run"].error
    assert isinstance(refused, HostLockedError), refused
    assert "driven by another specsweep run" in str(refused) and "first" in str(refused)
    assert second["run"].records == []
    assert run_dirs(tmp_path / "results", "second") == []  # and no run directory for `--resume latest` to pick
    # The refused run neither restored nor restarted the unit under the first one: all its points are ok.
    assert first.error is None, first.error
    assert first.state == "done"
    assert {r["status"] for r in first.records} == {"ok"}
    assert not [e for e in events(first.run_dir) if e["kind"] == "recovered"]
    _check_complete(first.run_dir, outcome)
    _check_host(sim_unit, before, outcome)


def test_second_controller_resuming_a_live_run_is_refused(sim_unit: SimUnit, tmp_path: Path, outcome: Outcome) -> None:
    """While a first sweep drives a run, ``specsweep sweep --resume`` of that run by a second controller is
    refused by the run's lock before it writes anything: the run's configuration stays byte for byte, and the
    first run ends done with every planned point recorded once and nothing superseded."""
    outcome.scenario = "second controller resumes a live run"
    outcome.faults = 1
    outcome.sweeps = 2
    before = host_state(sim_unit.host, sim_unit.unit)
    path = _experiment(tmp_path, sim_unit, "live", {"ar": "--algorithm ar", "linear": "--algorithm linear"}, itl_ms=20)
    results = tmp_path / "results"
    second: dict[str, Any] = {}

    def second_run() -> None:
        (run_dir,) = run_dirs(results, "live")
        configuration = {name: (run_dir / name).read_bytes() for name in ("plan.json", "experiment.yaml")}
        with started_cli(
            "sweep", str(path), "--results", str(results), "--resume", str(run_dir), env=cli_env()
        ) as proc:
            out, err = proc.communicate(timeout=scaled(120))
        second["said"], second["code"] = out + err, proc.returncode
        second["unchanged"] = configuration == {name: (run_dir / name).read_bytes() for name in configuration}

    trigger = Trigger(lambda e: isinstance(e, PointStarted), second_run)
    first = sweep_in_process(path, results, observer=trigger)
    trigger.join()
    assert second["code"] != 0 and "being written by another specsweep" in second["said"], second["said"]
    assert "Traceback" not in second["said"]
    assert second["unchanged"]
    assert first.error is None, first.error
    assert first.state == "done"
    assert {r["status"] for r in first.records} == {"ok"}
    assert not (first.run_dir / "superseded.jsonl").exists()
    _check_complete(first.run_dir, outcome)
    _check_host(sim_unit, before, outcome)


# -- the controller is stopped -------------------------------------------------------------------------------

#: signal -> the CLI's exit status (a negative status: killed by that signal)
SIGNALS = {
    "SIGINT": (signal.SIGINT, 130),
    "SIGTERM": (signal.SIGTERM, 130),
    # a closed terminal or a dropped SSH session (issue 28, item 7): stopped and restored like Ctrl-C
    "SIGHUP": (signal.SIGHUP, 130),
    "SIGKILL": (signal.SIGKILL, -9),
}
#: The load of the controller-fault scenarios: the second point (C=2) keeps requests in flight for about 1 s.
SIGNAL_LOAD = {**SMALL_LOAD, "requests": 6}
RUNNING = "sglang:num_running_reqs"  # the simulator speaks SGLang's /metrics: requests the server is running


def _wait_mid_point(proc: subprocess.Popen[str], run_dir: Path, url: str) -> tuple[set[str], float]:
    """Wait until the first point is recorded and the server runs requests of the next one; return the
    points recorded by then and the number of requests the server was running (checked, not assumed)."""
    wait_until(lambda: records(run_dir) or proc.poll() is not None, timeout=120)
    assert proc.poll() is None, proc.communicate()
    finished = point_ids(records(run_dir))
    running = wait_until(lambda: (server_metric(url, RUNNING) or 0) > 0 or proc.poll() is not None, timeout=30)
    in_flight = server_metric(url, RUNNING) or 0.0
    assert running and in_flight > 0 and proc.poll() is None, "no point under way after the first one"
    assert point_ids(records(run_dir)) == finished, "the point finished before the fault"
    return finished, in_flight


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SIGNALS))
def test_controller_signal_mid_point_then_resume(
    sim_unit: SimUnit, tmp_path: Path, outcome: Outcome, name: str
) -> None:
    """The CLI gets a signal while the server runs a point's requests; then ``--resume`` completes the run:
    every planned point recorded exactly once, the points finished before the signal kept as they were.

    SIGINT and SIGTERM: the load stops, the host is restored, the run is marked interrupted, exit 130. SIGKILL:
    nothing runs on the way out; the resuming run finds the marker and restores the host before going on.
    "Mid-point" is checked: when the signal is sent the server reports requests running, and the point they
    belong to has no record until the resume measures it."""
    outcome.scenario = f"controller {name} mid-point, then --resume"
    outcome.faults = 1
    sig, expected_code = SIGNALS[name]
    host = sim_unit.host
    before = host_state(host, sim_unit.unit)
    path = _experiment(
        tmp_path,
        sim_unit,
        "signal",
        {"ar": "--algorithm ar", "linear": "--algorithm linear"},
        itl_ms=40,
        load=SIGNAL_LOAD,
    )
    results = tmp_path / "results"
    argv = ("sweep", str(path), "--results", str(results), "--no-report", "-q")
    with started_cli(*argv, env=cli_env(tmp_path)) as proc:
        outcome.sweeps += 1
        run_dir = wait_until(lambda: next(iter(run_dirs(results, "signal")), None) or proc.poll() is not None)
        assert isinstance(run_dir, Path), proc.communicate()
        finished_before, in_flight = _wait_mid_point(proc, run_dir, sim_unit.url)
        kept_records = {r["point_id"]: r for r in records(run_dir)}
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=scaled(120))
    outcome.detail = f"{in_flight:g} requests running on the server when the signal was sent"
    assert proc.returncode == expected_code, (err, run_state(run_dir), events(run_dir), records(run_dir))
    assert "Traceback" not in err
    planned = {p for _, p in planned_points(run_dir)}
    assert finished_before and finished_before < planned
    # The point under way was not recorded: a stopped load is not a measurement.
    assert point_ids(records(run_dir)) == finished_before
    assert not duplicates(records(run_dir))
    if sig == signal.SIGKILL:
        assert run_state(run_dir) == "running"  # nobody could say otherwise
        assert state_differences(before, host_state(host, sim_unit.unit))  # the marker and drop-in are left
    else:
        assert run_state(run_dir) == "interrupted"
        if sig == signal.SIGHUP:  # the terminal is gone: the controller says so, then writes to /dev/null
            assert (
                err.strip()
                .splitlines()[-1]
                .endswith("hangup: the terminal is gone; stopping the load and restoring the host")
            )
        else:
            assert err.strip().splitlines()[-1].startswith("specsweep: error: interrupted; hosts restored")
        _check_host(sim_unit, before, outcome)

    resumed = sweep_in_process(path, results, resume=str(run_dir))
    outcome.sweeps += 1
    assert resumed.error is None, resumed.error
    assert resumed.run_dir == run_dir and resumed.state == "done"
    if sig == signal.SIGKILL:
        assert [e for e in events(run_dir) if e["kind"] == "recovered"]
    _check_complete(run_dir, outcome, kept=finished_before)
    # Nothing measured before the signal was measured again or changed.
    after = {r["point_id"]: r for r in records(run_dir)}
    assert {p: after[p] for p in kept_records} == kept_records
    assert {r["status"] for r in after.values()} == {"ok"}
    _check_host(sim_unit, before, outcome)


# -- the controller's disk is full ---------------------------------------------------------------------------


@contextlib.contextmanager
def _small_tmpfs(where: Path, size: str) -> Iterator[Path]:
    where.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "specsweep-test-full", str(where)], check=True)
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def _fill(directory: Path, run_dir: Path) -> None:
    """Take every free byte of the file system under ``directory``, and the slack of the last pages of the
    run's append-only files too (with empty lines, which readers skip), so that no write can succeed."""
    targets = [directory / "filler", run_dir / "events.jsonl", run_dir / "records.jsonl"]
    for target in targets:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            for size in (1 << 16, 1 << 12, 1):
                with contextlib.suppress(OSError):
                    while os.write(fd, (b"\0" if target.name == "filler" else b"\n") * size):
                        pass
        finally:
            os.close(fd)


def test_results_disk_full(sim_unit: SimUnit, tmp_path: Path, outcome: Outcome) -> None:
    """The run directory's file system fills up mid-point: one clear error line, the host restored, the run
    marked failed, what was recorded before still there; once there is room again, ``--resume`` completes it
    with every point recorded exactly once."""
    outcome.scenario = "run directory disk full, then --resume"
    outcome.faults = 1
    host = sim_unit.host
    before = host_state(host, sim_unit.unit)
    path = _experiment(
        tmp_path,
        sim_unit,
        "full",
        {"ar": "--algorithm ar", "linear": "--algorithm linear"},
        itl_ms=40,
        load=SIGNAL_LOAD,
    )
    with _small_tmpfs(tmp_path / "small", "512k") as results:
        argv = ("sweep", str(path), "--results", str(results), "--no-report", "-q")
        with started_cli(*argv, env=cli_env(tmp_path)) as proc:
            outcome.sweeps += 1
            run_dir = wait_until(lambda: next(iter(run_dirs(results, "full")), None) or proc.poll() is not None)
            assert isinstance(run_dir, Path), proc.communicate()
            finished_before, in_flight = _wait_mid_point(proc, run_dir, sim_unit.url)
            kept_records = {r["point_id"]: r for r in records(run_dir)}
            _fill(results, run_dir)
            _, err = proc.communicate(timeout=scaled(120))
        lines = err.strip().splitlines()
        outcome.detail = f"{in_flight:g} requests running when the disk filled; {err.strip()}"
        assert proc.returncode == 1, err
        assert "Traceback" not in err
        assert len(lines) == 1 and lines[0].startswith("specsweep: error: ") and "disk full" in lines[0], err
        assert "restore failed" not in err and "hosts restored" in err  # the error that ended the run, not a later one
        _check_host(sim_unit, before, outcome)
        # The run's final state is on disk although the disk is full, and nothing recorded before is lost.
        info = json.loads((run_dir / "run.json").read_text())
        assert info["state"] == "failed" and info["ended_at"], info
        assert point_ids(records(run_dir)) == finished_before
        assert not duplicates(records(run_dir))
        # Room again: the run resumes where it stopped.
        (results / "filler").unlink()
        resumed = sweep_in_process(path, results, resume=str(run_dir))
        outcome.sweeps += 1
        assert resumed.error is None, resumed.error
        assert resumed.state == "done"
        _check_complete(run_dir, outcome, kept=finished_before)
        after = {r["point_id"]: r for r in records(run_dir)}
        assert {p: after[p] for p in kept_records} == kept_records
    _check_host(sim_unit, before, outcome)


# -- the host is not who it says -----------------------------------------------------------------------------


def test_unknown_and_changed_host_keys_are_refused(sim_unit: SimUnit, tmp_path: Path, outcome: Outcome) -> None:
    """A sweep to a host whose key is unknown, or differs from known_hosts, stops before touching anything."""
    outcome.scenario = "unknown and changed host keys"
    outcome.kind = "hostkey"
    outcome.faults = 2
    host = sim_unit.host
    before = host_state(host, sim_unit.unit)
    empty = tmp_path / "known_hosts.empty"
    empty.write_text("")
    other = tmp_path / "other_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    changed = tmp_path / "known_hosts.changed"
    changed.write_text(f"{host.guest_ip} {' '.join(Path(str(other) + '.pub').read_text().split()[:2])}\n")
    fingerprint = host.admin("ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub").stdout.split()[1]
    for known, words in ((empty, "unknown host key"), (changed, "has CHANGED")):
        doc = ssh_experiment("keys", [host], sim_unit.unit, sim_unit.port, {"ar": "--algorithm ar"})
        doc["host"]["known_hosts"] = str(known)
        known_text = known.read_text()
        run = sweep_in_process(write_experiment(tmp_path / "keys.yaml", doc), tmp_path / "results")
        outcome.sweeps += 1
        assert isinstance(run.error, HostKeyError), run.error
        assert words in str(run.error) and fingerprint in str(run.error)
        assert run.records == [] and run.state == "failed"
        assert known.read_text() == known_text  # nothing accepted on the way
    _check_host(sim_unit, before, outcome)
