"""A controller killed with SIGKILL mid-sweep, over SSH on the real systemd test host (issue 49, "wrong or lost
data"): kill -9 during a serving point left a torn (empty) state file renamed into place, and resume and
``restore`` then refused it.

``specsweep sweep`` runs as a subprocess against a systemd unit (drop-ins, a secret in ``/run/specsweep``); once
the server runs a point's requests (the server's own /metrics says so), the controller is killed by its pid after
a delay, at a different moment each time. Then every state file specsweep keeps on the host is absent or
complete (the lock and the marker under ``/var/lib/specsweep``, the backup, the drop-in, the secret environment
file; no temporary file of a write left), ``specsweep restore FILE`` exits 0 and puts the host back as it found
it (the unit running its own configuration again, or stopped and its port free), a second restore has nothing to
do, and ``--resume`` completes the run and restores the host again.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from orchestrator.services.secrets import env_file_text
from orchestrator.services.systemd import secret_environment_file
from tests.reliability.harness import (
    SMALL_LOAD,
    cli_env,
    events,
    host_state,
    records,
    run_cli,
    run_dirs,
    run_state,
    server_metric,
    ssh_experiment,
    started_cli,
    state_differences,
    wait_until,
    write_experiment,
)
from tests.system.conftest import SimUnit, install_sim_unit, remove_sim_unit
from tests.system.support import TestHost, unit_snapshot
from tests.timing import scaled

pytestmark = pytest.mark.timeout(180)

STATE_DIR = "/var/lib/specsweep"
SECRET_DIR = "/run/specsweep"
HEADER = "# Written by specsweep for deployment "
RUNNING = "sglang:num_running_reqs"  # the simulator speaks SGLang's /metrics: requests the server is running
#: Three deployments (each a drop-in and a secret file written, then a restart), two points each; at 40 ms per
#: token a request lasts about 0.3 s, so a point serves for a second or so.
VARIANTS = {"ar": "--algorithm ar", "linear": "--algorithm linear --draft-tokens 4", "ddtree": "--algorithm ddtree"}
LOAD: dict[str, Any] = {
    **SMALL_LOAD,
    "warmup": 0,
    "requests": 4,
    "timeouts": {"connect": "2s", "first_token": "2s", "total": "5s"},
}


def _state_files(host: TestHost, unit: str) -> dict[str, bytes]:
    """Every file specsweep keeps on the host for ``unit``, by path, with its bytes (read through the admin
    channel, not specsweep's SSH layer)."""
    script = (
        f"for f in $(find {STATE_DIR} /etc/systemd/system/{unit}.d {SECRET_DIR} -type f 2>/dev/null | sort); do "
        'printf "%s %s\\n" "$f" "$(base64 -w0 < "$f")"; done'
    )
    out = host.admin(script).stdout
    files: dict[str, bytes] = {}
    for line in out.splitlines():
        path, _, encoded = line.partition(" ")
        files[path] = base64.b64decode(encoded)
    return files


def _torn(files: dict[str, bytes], unit: str, *, pid: int, port: int, secret: str, unit_file: bytes) -> list[str]:
    """What is wrong with each state file: empty, cut short, not JSON, or a write's temporary file left."""
    marker, lock = f"{STATE_DIR}/{unit}.marker.json", f"{STATE_DIR}/{unit}.lock"
    backup = f"{STATE_DIR}/{unit}.backup/unit"  # the unit file as it was, copied before the first change
    dropin, env_file = f"/etc/systemd/system/{unit}.d/50-specsweep.conf", secret_environment_file(unit)
    problems: list[str] = []
    for path, data in files.items():
        text = data.decode("utf-8", "replace")
        if ".specsweep-" in os.path.basename(path):
            problems.append(f"{path}: a write's temporary file left ({len(data)} bytes)")
        elif path in (marker, lock):
            try:
                value = json.loads(text)
            except json.JSONDecodeError as exc:
                problems.append(f"{path}: not JSON ({exc}): {text!r}")
                continue
            if not isinstance(value, dict):
                problems.append(f"{path}: not a JSON object: {text!r}")
            elif value.get("pid") != pid:
                problems.append(f"{path}: names pid {value.get('pid')!r}, the killed controller was {pid}")
            elif path == marker and (value.get("kind"), value.get("unit")) != ("systemd", unit):
                problems.append(f"{path}: not this unit's systemd marker: {text!r}")
            elif path == marker and not isinstance(value.get("prior"), dict):
                problems.append(f"{path}: no prior state: {text!r}")
        elif path == dropin:
            lines = text.splitlines()
            complete = (
                text.endswith("\n")
                and len(lines) == 5
                and lines[0].startswith(HEADER)
                and lines[1:3] == ["[Service]", "ExecStart="]
                and lines[3].startswith("ExecStart=")
                and f'"--port" "{port}"' in lines[3]
                and lines[4] == f"EnvironmentFile={env_file}"
            )
            if not complete:
                problems.append(f"{path}: not a whole drop-in: {text!r}")
        elif path == backup:
            if data != unit_file:
                problems.append(f"{path}: not the whole unit file ({len(data)} of {len(unit_file)} bytes)")
        elif path == env_file:
            if text != env_file_text({"API_KEY": secret}):
                problems.append(f"{path}: not the whole secret file ({len(data)} bytes)")
        else:
            problems.append(f"{path}: a file this test does not know ({len(data)} bytes): {text[:200]!r}")
    return problems


def _listening(host: TestHost, port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1.0)
        return sock.connect_ex((host.guest_ip, port)) == 0


def _settled(host: TestHost, unit: str) -> dict[str, Any]:
    """The host's state once the unit is not between states (restore restarts a running unit without
    waiting)."""
    wait_until(lambda: unit_snapshot(host, unit)["ActiveState"] in ("active", "inactive", "failed"), timeout=30)
    return host_state(host, unit)


def _experiment(tmp_path: Path, sim: SimUnit, secret: str) -> Path:
    doc = ssh_experiment("torn", [sim.host], sim.unit, sim.port, VARIANTS, load=LOAD, itl_ms=40)
    key_file = tmp_path / "api.key"
    key_file.write_text(secret + "\n")
    key_file.chmod(0o600)
    doc["service"]["environment"] = {"API_KEY": {"secret_file": str(key_file)}}
    return write_experiment(tmp_path / "torn.yaml", doc)


#: When the controller is killed, counted from the moment the server first runs a point's requests: a delay, or
#: ``"next-deploy"``: as soon as the run logs its next deployment, whose drop-in and secret file it then writes.
MOMENTS: list[tuple[float | str, str]] = [(0.0, "stopped"), (1.0, "running"), ("next-deploy", "stopped")]


@pytest.mark.parametrize(
    ("moment", "prior"), MOMENTS, ids=["at-once-stopped-unit", "after-1s-running-unit", "next-deploy-stopped-unit"]
)
def test_sigkill_while_serving_leaves_whole_state_files_and_restore_undoes_it(
    testhost: TestHost, tmp_path: Path, moment: float | str, prior: str
) -> None:
    sim = install_sim_unit(testhost, running=prior == "running")
    try:
        _killed_then_restored(sim, tmp_path, moment, prior)
    finally:
        remove_sim_unit(sim)  # the unit, its drop-ins, marker, lock and backup
        env_file = secret_environment_file(sim.unit)
        testhost.admin(f"rm -f {env_file}; rmdir {SECRET_DIR} 2>/dev/null; true", check=False)


def _deploys(results: Path) -> list[str]:
    """The deployments the run has begun to apply, in order (its ``deploy`` events)."""
    dirs = run_dirs(results, "torn")
    return [str(e.get("deployment")) for e in events(dirs[0]) if e.get("kind") == "deploy"] if dirs else []


def _killed_then_restored(sim: SimUnit, tmp_path: Path, moment: float | str, prior: str) -> None:
    host, unit = sim.host, sim.unit
    before = _settled(host, unit)
    assert before["unit"]["ActiveState"] == ("active" if prior == "running" else "inactive"), before["unit"]
    unit_file = host.admin(f"cat /etc/systemd/system/{unit}").stdout.encode()
    secret = "sk-torn-" + os.urandom(8).hex()
    path = _experiment(tmp_path, sim, secret)
    results = tmp_path / "results"
    env = cli_env(tmp_path)
    with started_cli("sweep", str(path), "--results", str(results), "--no-report", "-q", env=env) as proc:
        serving = wait_until(lambda: (server_metric(sim.url, RUNNING) or 0) > 0 or proc.poll() is not None, 90)
        assert serving and proc.poll() is None, f"no point ever served: {proc.communicate(timeout=scaled(30))}"
        if isinstance(moment, float):
            time.sleep(moment)
        else:
            first = len(_deploys(results))
            wait_until(lambda: len(_deploys(results)) > first or proc.poll() is not None, 60, interval=0.002)
        assert proc.poll() is None, f"the sweep ended before the kill: {proc.communicate(timeout=scaled(30))}"
        os.kill(proc.pid, signal.SIGKILL)  # the controller alone (its own session); it holds no child
        proc.communicate(timeout=scaled(30))
    assert proc.returncode == -signal.SIGKILL
    (run_dir,) = run_dirs(results, "torn")
    last = [e.get("kind") for e in events(run_dir)][-3:]
    files = _state_files(host, unit)
    dropin = files.get(f"/etc/systemd/system/{unit}.d/50-specsweep.conf", b"").split(b";", 1)[0].decode()
    where = (
        f"killed at {moment!r} after serving began; last events {last}; {len(records(run_dir))} points recorded; "
        f"deployments begun {_deploys(results)}, the drop-in names {dropin.rsplit(' ', 1)[-1]!r}"
    )
    print(where)  # where the kill landed (shown with -rP)
    assert f"{STATE_DIR}/{unit}.marker.json" in files, f"{where}: no marker: {sorted(files)}"
    torn = _torn(files, unit, pid=proc.pid, port=sim.port, secret=secret, unit_file=unit_file)
    assert not torn, f"{where}: {torn}"

    restored = run_cli("restore", str(path), env=env, timeout=120)
    said = restored.stdout + restored.stderr
    assert restored.returncode == 0, f"{where}: restore refused: {said}"
    assert "restored" in restored.stdout and "Traceback" not in said, f"{where}: {said}"
    after = _settled(host, unit)
    assert state_differences(before, after) == [], where
    if prior == "running":
        assert after["unit"]["ActiveState"] == "active"
        assert wait_until(lambda: _listening(host, sim.port), timeout=30), f"{where}: the unit's own server is down"
    else:
        assert after["unit"]["ActiveState"] == "inactive"
        assert wait_until(lambda: not _listening(host, sim.port), timeout=30), f"{where}: the server kept its port"

    again = run_cli("restore", str(path), env=env, timeout=120)
    assert again.returncode == 0, f"{where}: a second restore refused: {again.stdout + again.stderr}"
    assert "nothing to restore" in again.stdout, f"{where}: {again.stdout}"

    argv = ("sweep", str(path), "--results", str(results), "--resume", str(run_dir), "--no-report", "-q")
    resumed = run_cli(*argv, env=env, timeout=150)
    assert resumed.returncode == 0, f"{where}: --resume refused: {resumed.stdout + resumed.stderr}"
    assert run_state(run_dir) == "done", where
    assert {r["status"] for r in records(run_dir)} == {"ok"}, where
    assert state_differences(before, _settled(host, unit)) == [], where
