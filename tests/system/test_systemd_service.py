"""SystemdService on a real systemd host, reached only over SSH: apply, health, journal windows, restore."""

from __future__ import annotations

import time

import httpx
import pytest

from orchestrator.errors import StartFailed
from orchestrator.launchers.health import wait_until_healthy
from orchestrator.services import SystemdService
from tests.system.conftest import SimUnit, install_sim_unit, remove_sim_unit
from tests.system.support import TestHost, deployment, etc_snapshot, sim_command, unit_snapshot, wait_for
from tests.timing import scaled

pytestmark = pytest.mark.timeout(120)


def test_apply_healthy_window_restore_leaves_a_stopped_unit_as_found(sim_unit: SimUnit) -> None:
    host = sim_unit.host
    etc_before = etc_snapshot(host)
    unit_before = unit_snapshot(host, sim_unit.unit)
    assert unit_before["ActiveState"] == "inactive"

    ssh = host.ssh()
    service = SystemdService(ssh, sim_unit.unit)
    service.lock("system-test")
    try:
        service.apply(
            deployment(
                sim_command(sim_unit.port, "--algorithm", "linear", "--draft-tokens", "4", "--decode-log-interval", "2")
            )
        )
        dropin = host.admin(f"cat /etc/systemd/system/{sim_unit.unit}.d/50-specsweep.conf").stdout
        assert "ExecStart=\n" in dropin and '"--algorithm" "linear"' in dropin

        report = wait_until_healthy(service, sim_unit.url, ["/health", "/v1/models"], timeout=scaled(60))
        assert report.status_code == 200 and report.state.active_state == "active"
        argv = unit_snapshot(host, sim_unit.unit)["ExecStart"]
        assert "--algorithm linear --draft-tokens 4" in argv

        # A journal window brackets exactly what the server logged in between.
        cursor = service.journal_cursor()
        reply = httpx.post(
            sim_unit.url + "/v1/chat/completions",
            json={"model": "sim", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 48},
            timeout=30,
        )
        assert reply.status_code == 200
        window = service.journal_since(cursor)
        assert "Decode batch" in window
        assert "fired up and ready to roll" not in window  # that came before the cursor
        assert service.journal_since(window.cursor) == ""  # nothing new since: no overlap
    finally:
        assert service.restore() is True
        service.unlock()

    assert etc_snapshot(host) == etc_before
    assert unit_snapshot(host, sim_unit.unit) == unit_before


def test_restore_restarts_a_unit_that_was_running_with_its_own_configuration(running_sim_unit: SimUnit) -> None:
    sim = running_sim_unit
    host = sim.host
    etc_before = etc_snapshot(host)
    unit_before = unit_snapshot(host, sim.unit)
    assert unit_before["ActiveState"] in ("active", "activating")

    service = SystemdService(host.ssh(), sim.unit)
    service.apply(deployment(sim_command(sim.port, "--algorithm", "ddtree", "--budget", "7", "--topk", "1")))
    wait_until_healthy(service, sim.url, ["/health"], timeout=scaled(60))
    assert "--budget 7" in unit_snapshot(host, sim.unit)["ExecStart"]
    service.restore()

    assert etc_snapshot(host) == etc_before
    assert wait_for(lambda: unit_snapshot(host, sim.unit)["ActiveState"] == "active")
    after = unit_snapshot(host, sim.unit)
    assert after["ExecStart"] == unit_before["ExecStart"]
    assert after == {**unit_before, "ActiveState": "active", "SubState": "running"}


def test_the_replaced_servers_last_lines_are_not_in_the_new_starts_window(testhost: TestHost) -> None:
    """A server still running when apply restarts the unit says, as it is stopped, that it is ready (as a
    server that finished loading in that moment would). That line is the old invocation's: the new start's
    window leaves it out, so the health wait does not take it for the new server's and give up while the new
    one is still binding its port (a flake of a busy machine: "says it is ready, but ... refuses connections")."""
    ready = "The server is fired up and ready to roll!"
    old = f"/bin/sh -c 'trap \"echo {ready}; exit 0\" TERM; echo old-loading; while :; do sleep 0.1; done'"
    sim = install_sim_unit(testhost, running=True, command=old)
    try:
        assert wait_for(lambda: "old-loading" in testhost.admin(f"journalctl -u {sim.unit} -o cat").stdout)
        service = SystemdService(testhost.ssh(), sim.unit)
        try:
            # The new server binds its port a few seconds after it starts (a slow import on a busy host).
            service.apply(deployment(f"/bin/sh -c 'sleep 3; exec {sim_command(sim.port)}'"))
            report = wait_until_healthy(service, sim.url, ["/health"], timeout=scaled(60))
            assert report.status_code == 200
            window = service.journal_since(service.start_cursor or "")
            assert window.count(ready) == 1  # the new server's, and not the old one's as well
            said = testhost.admin(f"journalctl -u {sim.unit} -o cat --cursor='{service.start_cursor}'").stdout
            assert said.count(ready) == 2  # the old one did say it, after the cursor was taken
        finally:
            service.restore()
    finally:
        remove_sim_unit(sim)


def test_fail_start_is_reported_with_the_traceback(sim_unit: SimUnit) -> None:
    service = SystemdService(sim_unit.host.ssh(), sim_unit.unit)
    try:
        service.apply(deployment(sim_command(sim_unit.port, "--fault", "fail-start", load_seconds=1)))
        with pytest.raises(StartFailed) as caught:
            wait_until_healthy(service, sim_unit.url, ["/health"], timeout=scaled(60))
    finally:
        service.restore()
    error = caught.value
    assert error.reason == "failed"
    assert any("Traceback" in line for line in error.evidence)
    assert "OutOfMemoryError" in str(error)
    assert unit_snapshot(sim_unit.host, sim_unit.unit)["ActiveState"] == "inactive"


def test_a_process_that_exits_cleanly_is_reported_as_exited(sim_unit: SimUnit) -> None:
    service = SystemdService(sim_unit.host.ssh(), sim_unit.unit)
    try:
        service.apply(deployment("/bin/sh -c 'echo bye; exit 0'"))
        with pytest.raises(StartFailed) as caught:
            wait_until_healthy(service, sim_unit.url, ["/health"], timeout=scaled(30))
    finally:
        service.restore()
    assert caught.value.reason == "exited"
    assert "bye" in caught.value.evidence


def test_journal_windows_are_contiguous(sim_unit: SimUnit) -> None:
    """Consecutive windows of a unit that logs a numbered line every few ms: no line lost, none repeated."""
    service = SystemdService(sim_unit.host.ssh(), sim_unit.unit)
    counter = "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); echo line-$i; sleep 0.005; done"
    try:
        service.apply(deployment(f"/bin/sh -c {counter!r}"))
        cursor = service.start_cursor or ""
        seen: list[int] = []
        for _ in range(5):
            time.sleep(0.3)
            chunk = service.journal_since(cursor)
            cursor = chunk.cursor
            seen += [int(line.split("-")[1]) for line in chunk.lines if line.startswith("line-")]
    finally:
        service.restore()
    assert seen[0] == 1
    assert seen == list(range(1, len(seen) + 1))


def test_unit_mode_restores_the_original_unit_file_byte_for_byte(sim_unit: SimUnit) -> None:
    host = sim_unit.host
    original = host.admin(f"sha256sum /etc/systemd/system/{sim_unit.unit}").stdout
    etc_before = etc_snapshot(host)
    template = "[Unit]\nDescription=whole unit {variant}\n\n[Service]\nExecStart={cmd}\n"
    rendered = template.replace("{variant}", "ar").replace("{cmd}", sim_command(sim_unit.port))
    service = SystemdService(host.ssh(), sim_unit.unit, mode="unit", unit_template=template)
    try:
        service.apply(deployment(rendered, environment={"SIM_NOTE": "a b"}))
        wait_until_healthy(service, sim_unit.url, ["/health"], timeout=scaled(60))
        shown = unit_snapshot(host, sim_unit.unit)
        assert "SIM_NOTE=a b" in shown["Environment"] or 'SIM_NOTE="a b"' in shown["Environment"]
        assert "whole unit ar" in host.admin(f"systemctl show {sim_unit.unit} -p Description").stdout
    finally:
        service.restore()
    assert host.admin(f"sha256sum /etc/systemd/system/{sim_unit.unit}").stdout == original
    assert etc_snapshot(host) == etc_before
