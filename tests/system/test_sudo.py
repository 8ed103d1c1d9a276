"""``sudo: auto`` end to end on the test host, with testhost.sh's two unprivileged logins.

- ``specsweep-sudo`` (passwordless sudo) sweeps a systemd unit: every change under /etc goes through
  ``sudo -n``, the sweep completes and the host is left as found; the unit's server runs as the unit says
  (here ``User=specsweep-sudo``), not as root because specsweep used sudo.
- The same login sweeping a process service: the server runs as ``specsweep-sudo``, never through sudo;
  only ``sudo: always`` makes it root (asked for).
- ``specsweep-nosudo`` (no sudo rights) sweeping a systemd unit: one clear error line, exit 1, before
  anything on the host is changed.

The non-root server runs the simulator with the guest's own ``/usr/bin/python3`` and the checkout on its
PYTHONPATH: the checkout's virtualenv interpreter lives under /root, which other users cannot enter.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator.experiment.schema import load_experiment
from orchestrator.runs.store import RunStore
from orchestrator.sweep.events import DeploymentReady
from orchestrator.sweep.runner import SweepOptions, run_sweep
from tests.system.conftest import SimUnit, install_sim_unit, remove_sim_unit
from tests.system.support import TestHost, etc_snapshot, unit_snapshot
from tests.timing import scaled

pytestmark = pytest.mark.timeout(240)

ROOT = Path(__file__).resolve().parents[2]
SUDOER, NO_SUDO = "specsweep-sudo", "specsweep-nosudo"
LOAD = {"concurrency": [1], "warmup": 0, "requests": 2, "max_tokens": 8}
#: The simulator as any user can run it: the guest's Python, the checkout and its packages on the path.
SITE = f"{ROOT}/.venv/lib/python{sys.version_info.major}.{sys.version_info.minor}/site-packages"


def _host(host: TestHost, user: str, **extra: Any) -> dict[str, Any]:
    return {
        "ssh": f"{user}@{host.guest_ip}",
        "name": f"testhost{host.index}",
        "identity_file": host.key,
        "known_hosts": host.known_hosts,
        "connect_timeout": "5s",
        "command_timeout": "30s",
        **extra,
    }


def _write(tmp_path: Path, doc: dict[str, Any]) -> Path:
    path = tmp_path / f"{doc['name']}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _owner(host: TestHost, pid: str) -> str:
    return host.admin(f"stat -c %U /proc/{int(pid)}").stdout.strip()


def _listener_pid(host: TestHost, port: int) -> str:
    out = host.admin(f"ss -Hltnp 'sport = :{port}'").stdout
    return out.split("pid=", 1)[1].split(",", 1)[0]


@pytest.fixture
def user_unit(testhost: TestHost) -> Iterator[SimUnit]:
    """A simulator unit whose server runs as specsweep-sudo (User=), with the interpreter that user can run."""
    sim = install_sim_unit(testhost)
    command = f"/usr/bin/python3 -m orchestrator.sim --host 0.0.0.0 --port {sim.port} --profile tiny --load-seconds 0.3"
    text = (
        f"[Unit]\nDescription=specsweep sudo test\n\n[Service]\nUser={SUDOER}\n"
        f"Environment=PYTHONPATH={ROOT}:{SITE}\nExecStart={command}\n"
    )
    testhost.admin(f"cat > /etc/systemd/system/{sim.unit} <<'EOF'\n{text}EOF\nsystemctl daemon-reload")
    try:
        yield SimUnit(host=testhost, unit=sim.unit, port=sim.port, command=command)
    finally:
        remove_sim_unit(sim)


def test_a_sudoer_sweeps_a_systemd_unit_through_sudo(user_unit: SimUnit, tmp_path: Path) -> None:
    host = user_unit.host
    ssh = host.ssh(SUDOER)
    try:
        assert ssh.uses_sudo
        assert ssh.run("id -un").stdout.strip() == "root"  # what the service runs: through sudo -n
        assert ssh.as_login_user().run("id -un").stdout.strip() == SUDOER
    finally:
        ssh.close()
    etc_before, unit_before = etc_snapshot(host), unit_snapshot(host, user_unit.unit)
    doc = {
        "name": "sudo-systemd",
        "host": _host(host, SUDOER),
        "service": {"kind": "systemd", "unit": user_unit.unit, "exec_start": user_unit.command + " {spec_args}"},
        "server": {"url": f"http://{host.guest_ip}:{user_unit.port}", "model": "sim", "ready_timeout": "30s"},
        "engine": "sim",
        "variants": {"ar": {"spec_args": "--algorithm ar"}, "linear": {"spec_args": "--algorithm linear"}},
        "baselines": ["ar"],
        "load": LOAD,
    }
    owners: list[str] = []
    dropins: list[str] = []

    def observe(event: Any) -> None:
        if isinstance(event, DeploymentReady):
            pid = host.admin(f"systemctl show -p MainPID --value {user_unit.unit}").stdout.strip()
            owners.append(_owner(host, pid))
            dropins.append(host.admin(f"stat -c '%U %a' /etc/systemd/system/{user_unit.unit}.d/*").stdout.strip())

    result = run_sweep(load_experiment(_write(tmp_path, doc)), SweepOptions(results_root=tmp_path), observer=observe)
    assert result.state == "done"
    assert [r.status for r in RunStore.open(result.run_dir).records()] == ["ok", "ok"]
    assert dropins == ["root 644", "root 644"]  # written as root, through sudo
    assert owners == [SUDOER, SUDOER]  # the unit's User=, not root because specsweep used sudo
    assert etc_snapshot(host) == etc_before
    assert unit_snapshot(host, user_unit.unit) == unit_before


@pytest.mark.parametrize(("sudo", "runs_as"), [("auto", SUDOER), ("always", "root")])
def test_a_process_server_runs_as_the_login_user_unless_asked(
    testhost: TestHost, tmp_path: Path, sudo: str, runs_as: str
) -> None:
    host = testhost
    port = 30990
    command = f"/usr/bin/python3 -m orchestrator.sim --host 0.0.0.0 --port {port} --profile tiny --load-seconds 0.3"
    name = f"sudo-process-{sudo}"
    doc = {
        "name": name,
        "host": _host(host, SUDOER, sudo=sudo),
        "service": {"kind": "process", "command": command, "environment": {"PYTHONPATH": f"{ROOT}:{SITE}"}},
        "server": {"url": f"http://{host.guest_ip}:{port}", "model": "sim", "ready_timeout": "30s"},
        "engine": "sim",
        "variants": {"ar": {}},
        "load": LOAD,
    }
    owners: list[str] = []

    def observe(event: Any) -> None:
        if isinstance(event, DeploymentReady):
            owners.append(_owner(host, _listener_pid(host, port)))

    state_dir = f"~{runs_as}/.local/state/specsweep"
    try:
        result = run_sweep(
            load_experiment(_write(tmp_path, doc)), SweepOptions(results_root=tmp_path), observer=observe
        )
        assert result.state == "done"
        assert owners == [runs_as]
        # Its files are that user's too, in that user's home, and gone but the log once restored.
        # Named after the server's port (orchestrator/services/__init__.py).
        files = f"server-{port}"
        left = [f for f in host.admin(f"ls -A {state_dir} 2>/dev/null; true").stdout.split() if f.startswith(files)]
        assert left in ([], [f"{files}.log"]), left
        if left:
            assert host.admin(f"stat -c %U {state_dir}/{files}.log").stdout.strip() == runs_as
    finally:
        host.admin(f"rm -rf {state_dir}/server-{port}.*", check=False)


def test_without_sudo_one_clear_error_before_anything_changes(sim_unit: SimUnit, tmp_path: Path) -> None:
    host = sim_unit.host
    etc_before, unit_before = etc_snapshot(host), unit_snapshot(host, sim_unit.unit)
    doc = {
        "name": "no-sudo",
        "host": _host(host, NO_SUDO),
        "service": {"kind": "systemd", "unit": sim_unit.unit, "exec_start": sim_unit.command},
        "server": {"url": f"http://{host.guest_ip}:{sim_unit.port}", "model": "sim", "ready_timeout": "20s"},
        "engine": "sim",
        "variants": {"ar": {}},
        "load": LOAD,
    }
    path = _write(tmp_path, doc)
    proc = subprocess.run(
        [sys.executable, "-m", "orchestrator", "sweep", str(path), "--results", str(tmp_path / "results"), "-q"],
        capture_output=True,
        text=True,
        timeout=scaled(120),
        cwd=ROOT,
        env={"COLUMNS": "400", "NO_COLOR": "1", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("specsweep: error: ") and f"{NO_SUDO} is not root" in lines[0], lines[0]
    assert "sudo -n" in lines[0] and "nothing was changed" in lines[0]
    assert etc_snapshot(host) == etc_before
    assert unit_snapshot(host, sim_unit.unit) == unit_before
    assert not host.admin("ls -A /var/lib/specsweep 2>/dev/null; true").stdout.strip()
