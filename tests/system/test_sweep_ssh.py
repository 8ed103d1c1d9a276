"""`specsweep sweep` over SSH on the real systemd + journald + sshd test hosts.

The simulator is installed as a systemd unit; the experiment changes it through drop-ins (``exec_start`` with
``{spec_args}``), reaches the host only over SSH (key, known_hosts), reads metrics from the journal windows,
and leaves every host byte for byte as it found it: one host through the CLI, and two hosts as a pool.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.reliability.harness import (
    SMALL_LOAD,
    cli_env,
    duplicates,
    host_state,
    only_run_dir,
    planned_points,
    point_ids,
    records,
    run_cli,
    ssh_experiment,
    state_differences,
    sweep_in_process,
    wait_until,
    write_experiment,
)
from tests.system.conftest import SimUnit
from tests.system.support import TestHost, sim_command, unit_snapshot

pytestmark = pytest.mark.timeout(240)

VARIANTS = {
    "autoregressive": "--algorithm ar",
    "linear": "--algorithm linear --draft-tokens 7",
    "ddtree": "--algorithm ddtree --budget 7 --topk {topk}",
}


def _settled(host: TestHost, unit: str) -> dict[str, Any]:
    """The host's state once the unit is not between states (restore restarts a running unit without
    waiting)."""
    wait_until(lambda: unit_snapshot(host, unit)["ActiveState"] in ("active", "inactive", "failed"), timeout=30)
    return host_state(host, unit)


def test_a_sweep_over_ssh_measures_every_point_and_restores_the_running_unit(
    running_sim_unit: SimUnit, tmp_path: Path
) -> None:
    sim = running_sim_unit
    host = sim.host
    before = _settled(host, sim.unit)
    assert before["unit"]["ActiveState"] == "active"
    doc = ssh_experiment(
        "ssh-e2e", [host], sim.unit, sim.port, VARIANTS, baselines=["autoregressive", "linear"], load=SMALL_LOAD
    )
    doc["variants"]["ddtree"]["matrix"] = {"topk": [1, 4]}
    path = write_experiment(tmp_path / "ssh-e2e.yaml", doc)
    results = tmp_path / "results"
    proc = run_cli("sweep", str(path), "--results", str(results), "--json", "--no-report", env=cli_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["state"] == "done" and summary["failed"] == 0
    run_dir = only_run_dir(results, "ssh-e2e")
    recs = records(run_dir)
    assert point_ids(recs) == {p for _, p in planned_points(run_dir)} and not duplicates(recs)
    assert {r["host"] for r in recs} == {f"testhost{host.index}"}
    for record in recs:
        assert record["status"] == "ok" and record["client"]["errors"] == 0
        window = (run_dir / record["window_file"]).read_text()
        assert "Decode batch" in window  # the exact journal window of this point, read over SSH
        if record["variant"] != "autoregressive":
            # Read from that window (2 requests of 8 tokens: a figure, not a measurement; a last step cut at
            # max_tokens may commit 1 token, so the window's accept length can be exactly 1).
            assert record["server"]["accept_len"] >= 1
    # The unit runs its own configuration again, and nothing specsweep wrote is left.
    after = _settled(host, sim.unit)
    assert after["unit"]["ActiveState"] == "active"
    assert state_differences(before, after) == []


def _install(host: TestHost, unit: str, port: int) -> None:
    text = f"[Unit]\nDescription=specsweep pool test\n\n[Service]\nExecStart={sim_command(port)}\n"
    host.admin(f"cat > /etc/systemd/system/{unit} <<'EOF'\n{text}EOF\nsystemctl daemon-reload")


def _remove(host: TestHost, unit: str) -> None:
    host.admin(
        f"systemctl stop {unit}; rm -rf /etc/systemd/system/{unit} /etc/systemd/system/{unit}.d "
        f"/var/lib/specsweep/{unit}.*; rmdir /var/lib/specsweep 2>/dev/null; systemctl daemon-reload; "
        f"systemctl reset-failed {unit} 2>/dev/null; true",
        check=False,
    )


@pytest.fixture
def pool(testhost_pair: tuple[TestHost, TestHost]) -> Iterator[tuple[list[TestHost], str, int]]:
    """The same simulator unit on both test hosts (a pool shares one experiment, hence one unit name)."""
    unit, port = "specsweep-pool.service", 30500
    hosts = list(testhost_pair)
    try:
        for host in hosts:
            _install(host, unit, port)
        yield hosts, unit, port
    finally:
        for host in hosts:
            _remove(host, unit)


def test_two_hosts_as_a_pool(pool: tuple[list[TestHost], str, int], tmp_path: Path) -> None:
    """Baselines are measured on each host; the other deployments are shared out, each measured once; each
    host is restored on its own."""
    hosts, unit, port = pool
    before = {h.index: host_state(h, unit) for h in hosts}
    doc = ssh_experiment("pool", hosts, unit, port, VARIANTS, baselines=["autoregressive", "linear"], load=SMALL_LOAD)
    doc["variants"]["ddtree"]["matrix"] = {"topk": [1, 2, 4, 8]}
    run = sweep_in_process(write_experiment(tmp_path / "pool.yaml", doc), tmp_path / "results")
    assert run.error is None, run.error
    assert run.state == "done"
    recs = run.records
    names = {f"testhost{h.index}" for h in hosts}
    assert {r["status"] for r in recs} == {"ok"} and not duplicates(recs)
    baseline = [r for r in recs if r["baseline"]]
    shared = [r for r in recs if not r["baseline"]]
    # Every baseline point on every host, so comparisons never cross machines.
    assert {(r["host"], r["variant"], r["concurrency"]) for r in baseline} == {
        (h, v, c) for h in names for v in ("autoregressive", "linear") for c in (1, 2)
    }
    # Every shared point once, on whichever host took its deployment; a deployment never spans hosts.
    shared_ids = [r["point_id"] for r in shared]
    assert len(shared_ids) == len(set(shared_ids)) == 4 * 2
    hosts_of = {}
    for record in shared:
        hosts_of.setdefault(record["deployment_id"], set()).add(record["host"])
    assert all(len(h) == 1 for h in hosts_of.values())
    for record in recs:
        assert record["window_file"].startswith(f"windows/{record['host']}/")
    for host in hosts:
        assert state_differences(before[host.index], _settled(host, unit)) == []
