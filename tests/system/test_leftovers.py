"""A killed run's leftovers are found and undone; two runs never drive one unit; restore and doctor CLIs."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from orchestrator.errors import HostLockedError
from orchestrator.experiment.schema import load_experiment
from orchestrator.launchers.doctor import run_doctor
from orchestrator.launchers.restore import restore_experiment
from orchestrator.services import SystemdService, driving
from tests.system.conftest import SimUnit
from tests.system.support import TestHost, deployment, etc_snapshot, sim_command, unit_snapshot, wait_for
from tests.timing import scaled

pytestmark = pytest.mark.timeout(120)

_KILLED_RUN = """
import os, signal, sys
from orchestrator.hosts import SSHHost
from orchestrator.services import SystemdService
from orchestrator.plan.deployments import Deployment
ip, key, known, unit, command = sys.argv[1:6]
service = SystemdService(SSHHost("root@" + ip, identity_file=key, known_hosts=known), unit)
service.lock("doomed-run")
service.apply(Deployment(id="d-doomed", variant="v", command=command, config_hash="c", load_points=[]))
os.kill(os.getpid(), signal.SIGKILL)  # no restore, no unlock: as if the controller died
"""


def _killed_run(sim: SimUnit, command: str) -> None:
    host = sim.host
    args = [sys.executable, "-c", _KILLED_RUN, host.guest_ip, host.key, host.known_hosts, sim.unit, command]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=scaled(60), cwd=Path(__file__).parents[2])
    assert proc.returncode == -9, proc.stderr


def _experiment_file(tmp_path: Path, testhost: TestHost, sim: SimUnit) -> Path:
    path = tmp_path / "exp.yaml"
    path.write_text(
        textwrap.dedent(
            f"""\
            name: leftovers-test
            host:
              kind: ssh
              ssh: root@{testhost.guest_ip}
              identity_file: {testhost.key}
              known_hosts: {testhost.known_hosts}
            service:
              kind: systemd
              unit: {sim.unit}
              exec_start: "{sim_command(sim.port)} {{args}}"
            server: {{url: "http://{{host}}:{sim.port}", ready_timeout: 30s}}
            engine: sim
            variants:
              ar: {{args: "--algorithm ar"}}
            load: {{concurrency: [1], requests: 2, max_tokens: 8}}
            """
        )
    )
    return path


def test_a_killed_runs_change_is_found_and_undone_by_the_next_run(running_sim_unit: SimUnit) -> None:
    sim = running_sim_unit
    host = sim.host
    etc_before = etc_snapshot(host)
    unit_before = unit_snapshot(host, sim.unit)
    _killed_run(sim, sim_command(sim.port, "--algorithm", "linear"))
    assert "--algorithm linear" in unit_snapshot(host, sim.unit)["ExecStart"]

    service = SystemdService(host.ssh(), sim.unit)
    leftover = service.find_leftovers()
    assert leftover is not None and leftover.marker is not None
    assert leftover.lock is not None and leftover.lock_stale  # same controller, dead pid
    assert leftover.marker["prior"]["running"] is True

    seen = []
    with driving(service, "next-run", on_leftover=seen.append):
        # The leftover was undone before this run's first change: the original configuration is back.
        assert seen and seen[0].marker is not None
        assert unit_snapshot(host, sim.unit)["ExecStart"] == unit_before["ExecStart"]
        service.apply(deployment(sim_command(sim.port, "--algorithm", "ddtree")))
    assert etc_snapshot(host) == etc_before
    status = f"systemctl status {sim.unit}; journalctl -u {sim.unit} -n 30 --no-pager -o short-monotonic"
    assert wait_for(lambda: unit_snapshot(host, sim.unit)["ActiveState"] == "active"), host.admin(status).stdout
    assert unit_snapshot(host, sim.unit)["ExecStart"] == unit_before["ExecStart"]


def test_specsweep_restore_undoes_a_killed_run(sim_unit: SimUnit, tmp_path: Path) -> None:
    host = sim_unit.host
    etc_before = etc_snapshot(host)
    unit_before = unit_snapshot(host, sim_unit.unit)
    _killed_run(sim_unit, sim_command(sim_unit.port, "--algorithm", "linear"))
    file = _experiment_file(tmp_path, host, sim_unit)

    dry = restore_experiment(load_experiment(file), dry_run=True)
    assert len(dry) == 1 and dry[0].leftover is not None and not dry[0].restored

    cli = subprocess.run(
        [sys.executable, "-m", "orchestrator", "restore", str(file)],
        capture_output=True,
        text=True,
        timeout=scaled(90),
        env={**os.environ, "COLUMNS": "200"},
    )
    assert cli.returncode == 0, cli.stdout + cli.stderr
    assert "restored" in cli.stdout
    assert etc_snapshot(host) == etc_before
    assert unit_snapshot(host, sim_unit.unit) == unit_before
    again = restore_experiment(load_experiment(file))
    assert again[0].leftover is None and again[0].error is None


def test_two_runs_never_drive_one_unit(sim_unit: SimUnit) -> None:
    first = SystemdService(sim_unit.host.ssh(), sim_unit.unit)
    second = SystemdService(sim_unit.host.ssh(), sim_unit.unit)
    first.lock("first-run")
    try:
        with pytest.raises(HostLockedError, match="first-run"):
            second.lock("second-run")
        leftover = second.find_leftovers()
        assert leftover is not None and leftover.lock is not None and not leftover.lock_stale
        second.lock("second-run", break_lock=True)  # the user's word: the first run is dead
        second.unlock()
    finally:
        first.unlock()
    lockfile = f"/var/lib/specsweep/{sim_unit.unit}.lock"
    assert sim_unit.host.admin(f"test -e {lockfile}; echo $?").stdout.strip() == "1"


def test_doctor_passes_on_a_ready_host_and_names_what_fails(sim_unit: SimUnit, tmp_path: Path) -> None:
    file = _experiment_file(tmp_path, sim_unit.host, sim_unit)
    ok = subprocess.run(
        [sys.executable, "-m", "orchestrator", "doctor", str(file)],
        capture_output=True,
        text=True,
        timeout=scaled(90),
        env={**os.environ, "COLUMNS": "200"},
    )
    assert ok.returncode == 0, ok.stdout + ok.stderr
    for name in ("ssh", "root", "systemd", "unit", "drop-ins", "journal", "port", "clock"):
        assert f": {name}: " in ok.stdout
    # The simulator's experiment needs no GPU: doctor says why it did not look (issue 59 item 5).
    assert "gpu: not checked" in ok.stdout and "nvidia-smi not found" not in ok.stdout

    file.write_text(file.read_text().replace(f"unit: {sim_unit.unit}", "unit: no-such-unit.service"))
    (report,) = run_doctor(load_experiment(file))
    assert not report.ok
    failed = {c.name: c.detail for c in report.checks if c.status == "fail"}
    assert failed == {"unit": "no-such-unit.service is not-found on the host"}


def test_restore_finds_a_dropin_whose_marker_is_gone(sim_unit: SimUnit, tmp_path: Path) -> None:
    """Issue 49: a controller killed while it wrote the marker (or the marker removed by hand) left specsweep's
    drop-in and a running server; restore said "nothing to restore" and the server kept its port. The drop-in
    names itself (50-specsweep.conf, its first line): restore removes it and stops the unit."""
    host = sim_unit.host
    etc_before = etc_snapshot(host)
    _killed_run(sim_unit, sim_command(sim_unit.port, "--algorithm", "linear"))
    dropin = f"/etc/systemd/system/{sim_unit.unit}.d/50-specsweep.conf"
    host.admin(f"rm -f /var/lib/specsweep/{sim_unit.unit}.marker.json /var/lib/specsweep/{sim_unit.unit}.lock")
    assert wait_for(lambda: host.admin(f"systemctl is-active {sim_unit.unit}", check=False).stdout.strip() == "active")
    file = _experiment_file(tmp_path, host, sim_unit)
    cli = subprocess.run(
        [sys.executable, "-m", "orchestrator", "restore", str(file)],
        capture_output=True,
        text=True,
        timeout=scaled(90),
        env={**os.environ, "COLUMNS": "200"},
    )
    assert cli.returncode == 0, cli.stdout + cli.stderr
    assert "restored" in cli.stdout and "without its marker" in cli.stdout, cli.stdout
    assert host.admin(f"test -e {dropin}", check=False).returncode != 0
    assert host.admin(f"systemctl is-active {sim_unit.unit}", check=False).stdout.strip() != "active"
    assert etc_snapshot(host) == etc_before
    again = restore_experiment(load_experiment(file))
    assert again[0].leftover is None and again[0].error is None
