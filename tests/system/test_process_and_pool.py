"""ProcessService on a remote host over SSH, and two test hosts side by side (a pool)."""

from __future__ import annotations

import pytest

from orchestrator.errors import StartFailed
from orchestrator.launchers.health import wait_until_healthy
from orchestrator.services import ProcessService, SystemdService
from tests.system.support import TestHost, deployment, sim_command
from tests.timing import scaled

pytestmark = pytest.mark.timeout(120)


def test_process_service_over_ssh_applies_waits_windows_and_restores(testhost: TestHost) -> None:
    state_dir = "/tmp/specsweep-proc-test"
    service = ProcessService(testhost.ssh(), "sim", state_dir=state_dir)
    url = f"http://{testhost.guest_ip}:30900"
    try:
        service.lock("process-test")
        service.apply(deployment(sim_command(30900, "--decode-log-interval", "1")))
        report = wait_until_healthy(service, url, ["/health", "/v1/models"], timeout=scaled(60))
        pid = report.state.main_pid
        assert pid and testhost.admin(f"kill -0 {pid}; echo $?").stdout.strip() == "0"
        assert "fired up and ready to roll" in service.journal_since(service.start_cursor or "0")

        # A new deployment replaces the process (the old group is stopped first).
        service.apply(deployment(sim_command(30900, "--fault", "fail-start", load_seconds=1), id="d-two"))
        assert testhost.admin(f"kill -0 {pid} 2>/dev/null; echo $?").stdout.strip() == "1"
        with pytest.raises(StartFailed) as caught:
            wait_until_healthy(service, url, ["/health"], timeout=scaled(60))
        assert caught.value.reason == "failed"
        assert any("Traceback" in line for line in caught.value.evidence)
    finally:
        service.restore()
        service.unlock()
    assert testhost.admin(f"ls {state_dir}").stdout.split() == ["sim.log"]  # only the log stays, for post-mortems
    assert testhost.admin("pgrep -f '[o]rchestrator.sim --host 0.0.0.0 --port 30900'; true").stdout == ""
    testhost.admin(f"rm -rf {state_dir}")


def test_two_hosts_side_by_side(testhost_pair: tuple[TestHost, TestHost]) -> None:
    first, second = testhost_pair
    assert first.guest_ip != second.guest_ip
    names = set()
    for th in (first, second):
        host = th.ssh()
        try:
            names.add(host.run("hostname").stdout.strip())
            assert SystemdService(host, "systemd-journald.service").state().active_state == "active"
        finally:
            host.close()
    assert len(names) == 2
