"""SSHHost against a real sshd: host-key policy, a connection cut mid-command, error translation."""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path

import pytest

from orchestrator.errors import HostConnectionError, HostKeyError
from orchestrator.hosts import SSHHost
from orchestrator.launchers.health import wait_until_healthy
from orchestrator.services import SystemdService
from tests.system.conftest import SimUnit
from tests.system.support import TestHost, deployment, sim_command
from tests.timing import scaled

pytestmark = pytest.mark.timeout(90)


def test_commands_answer_with_exit_codes_and_output(testhost: TestHost) -> None:
    host = testhost.ssh()
    try:
        result = host.run("echo out; echo err >&2; exit 3")
        assert (result.exit_code, result.stdout, result.stderr) == (3, "out\n", "err\n")
        assert host.run(["printf", "%s|", "a b", "$(echo no)", "'"]).stdout == "a b|$(echo no)|'|"
        host.write_text("/tmp/specsweep-ssh-test/f.txt", "héllo\n", 0o600)
        assert host.read_text("/tmp/specsweep-ssh-test/f.txt") == "héllo\n"
        assert testhost.admin("stat -c %a /tmp/specsweep-ssh-test/f.txt").stdout.strip() == "600"
        assert host.exists("/tmp/specsweep-ssh-test/f.txt") and not host.exists("/tmp/specsweep-ssh-test/nope")
    finally:
        testhost.admin("rm -rf /tmp/specsweep-ssh-test")
        host.close()


def test_an_unknown_host_key_is_refused_naming_the_fingerprint(testhost: TestHost, tmp_path: Path) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    fingerprint = testhost.admin("ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub").stdout.split()[1]
    with pytest.raises(HostKeyError) as caught:
        testhost.ssh(known_hosts=str(empty)).run("true")
    assert fingerprint in str(caught.value) and testhost.guest_ip in str(caught.value)
    assert empty.read_text() == ""  # nothing was accepted on the way


def test_accept_new_records_the_key_once(testhost: TestHost, tmp_path: Path) -> None:
    known = tmp_path / "known_hosts"
    host = testhost.ssh(known_hosts=str(known), host_key_policy="accept-new")
    assert host.run("echo hi").stdout == "hi\n"
    host.close()
    recorded = known.read_text()
    assert recorded.startswith(f"{testhost.guest_ip} ssh-ed25519 ")
    again = testhost.ssh(known_hosts=str(known), host_key_policy="strict")
    assert again.run("true").exit_code == 0
    again.close()


def test_a_changed_host_key_is_refused_even_with_accept_new(testhost: TestHost, tmp_path: Path) -> None:
    other = tmp_path / "other"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    known = tmp_path / "known_hosts"
    known.write_text(f"{testhost.guest_ip} {' '.join(Path(str(other) + '.pub').read_text().split()[:2])}\n")
    with pytest.raises(HostKeyError, match="CHANGED"):
        testhost.ssh(known_hosts=str(known), host_key_policy="accept-new").run("true")


def test_a_wrong_key_is_an_authentication_error(testhost: TestHost, tmp_path: Path) -> None:
    key = tmp_path / "id_wrong"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    with pytest.raises(HostConnectionError, match="authentication as root"):
        testhost.ssh(identity_file=str(key)).run("true")


def test_a_connection_cut_mid_command_is_retried_on_a_new_connection(testhost: TestHost) -> None:
    host = testhost.ssh()
    try:
        marker = "/tmp/specsweep-cut-once"
        testhost.admin(f"rm -f {marker}")
        # The first attempt kills its own sshd session process: the connection drops mid-command.
        result = host.run(f"if [ ! -e {marker} ]; then touch {marker}; kill -9 $PPID; sleep 5; fi; echo done")
        assert result.stdout == "done\n"
        assert host.connections == 2
        # A command that must not run twice is not retried: the error says so.
        testhost.admin(f"rm -f {marker}")
        with pytest.raises(HostConnectionError, match="not retried"):
            host.run(f"if [ ! -e {marker} ]; then touch {marker}; kill -9 $PPID; sleep 5; fi", idempotent=False)
    finally:
        testhost.admin("rm -f /tmp/specsweep-cut-once")
        host.close()


def test_health_waiting_survives_a_cut_connection(sim_unit: SimUnit) -> None:
    """The sshd session is killed while the server loads; polling reconnects and sees it become healthy."""
    host = sim_unit.host.ssh()
    service = SystemdService(host, sim_unit.unit)
    try:
        service.apply(deployment(sim_command(sim_unit.port, load_seconds=2)))
        session_pid = host.run("echo $PPID").stdout.strip()
        cut = threading.Timer(0.5, lambda: sim_unit.host.admin(f"kill -9 {session_pid}", check=False))
        cut.start()
        report = wait_until_healthy(service, sim_unit.url, ["/health"], timeout=scaled(60))
        cut.join()
        assert report.status_code == 200
        assert host.connections >= 2
    finally:
        service.restore()
        host.close()


def test_an_ssh_config_alias_with_proxyjump(testhost: TestHost, tmp_path: Path) -> None:
    """~/.ssh/config style: an alias, its HostName/User/IdentityFile, and a ProxyJump through a second alias."""
    config = tmp_path / "config"
    config.write_text(
        f"Host th-jump\n  HostName {testhost.guest_ip}\n  User root\n  IdentityFile {testhost.key}\n"
        f"Host th-gpu\n  HostName {testhost.guest_ip}\n  User root\n  IdentityFile {testhost.key}\n"
        "  ProxyJump th-jump\n"
    )
    host = SSHHost("th-gpu", ssh_config=str(config), known_hosts=testhost.known_hosts, connect_timeout=5)
    try:
        # Through the jump, the final connection comes from the host itself, not from the controller's veth.
        client = host.run("echo $SSH_CLIENT").stdout.split()[0]
        assert client == testhost.guest_ip
        assert host.run("hostname").stdout.strip() == testhost.info["name"]
    finally:
        host.close()
