"""Hosts: LocalHost end to end (real subprocesses), SSH destination and config resolution, error translation."""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path
from types import SimpleNamespace

import paramiko
import pytest

from orchestrator import hosts
from orchestrator.errors import CommandError, ConfigError, HostConnectionError
from orchestrator.hosts import LocalHost, SSHHost, connect_host, fingerprint
from orchestrator.hosts.base import CommandResult, Host
from orchestrator.hosts.ssh_config import parse_destination, resolve_target


def test_public_api() -> None:
    assert sorted(hosts.__all__) == [
        "CommandResult",
        "Host",
        "LocalHost",
        "SSHHost",
        "connect_host",
        "fingerprint",
    ]


def test_local_host_answers_with_exit_codes_not_exceptions() -> None:
    host = LocalHost()
    assert isinstance(host, Host)
    result = host.run("echo out; echo err >&2; exit 3")
    assert result == CommandResult(3, "out\n", "err\n")
    assert not result.ok
    with pytest.raises(CommandError, match=r"exit 3\): err"):
        result.check("the thing")


def test_local_host_quotes_argv_and_feeds_stdin() -> None:
    host = LocalHost()
    assert host.run(["printf", "%s|", "a b", "$(id)", "'"]).stdout == "a b|$(id)|'|"
    assert host.run("cat", input="héllo").stdout == "héllo"


def test_local_host_timeout_kills_the_whole_group(tmp_path: Path) -> None:
    host = LocalHost()
    marker = tmp_path / "survived"
    with pytest.raises(CommandError, match="did not finish within"):
        host.run(f"(sleep 1; touch {marker}) & sleep 5", timeout=0.3)
    host.run("sleep 1.2")
    assert not marker.exists()


def test_local_host_file_operations(tmp_path: Path) -> None:
    host = LocalHost()
    target = tmp_path / "sub" / "dir" / "f.conf"
    host.write_text(str(target), "one\n", 0o600)
    assert target.read_text() == "one\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    host.write_text(str(target), "two\n")
    assert host.read_text(str(target)) == "two\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert host.exists(str(target)) and not host.exists(str(tmp_path / "missing"))
    assert sorted(p.name for p in target.parent.iterdir()) == ["f.conf"]  # no temporary file left
    with pytest.raises(CommandError, match="reading"):
        host.read_text(str(tmp_path / "missing"))


def test_local_host_write_is_atomic_for_readers(tmp_path: Path) -> None:
    """A reader sees the old content or the new, never a truncated file (the rename replaces the inode)."""
    host = LocalHost()
    target = tmp_path / "f"
    host.write_text(str(target), "old\n")
    inode = target.stat().st_ino
    with open(target) as reader:
        host.write_text(str(target), "new\n")
        assert reader.read() == "old\n"
    assert target.stat().st_ino != inode and target.read_text() == "new\n"


@pytest.mark.parametrize(
    ("dest", "expected"),
    [
        ("gpu-box", (None, "gpu-box", None)),
        ("root@gpu-box", ("root", "gpu-box", None)),
        ("root@gpu-box:2222", ("root", "gpu-box", 2222)),
        ("ssh://me@10.0.0.5:22", ("me", "10.0.0.5", 22)),
        ("me@[::1]:2200", ("me", "::1", 2200)),
        ("[fe80::1%eth0]", (None, "fe80::1%eth0", None)),
        ("a.b@host.example", ("a.b", "host.example", None)),
    ],
)
def test_parse_destination(dest: str, expected: tuple[str | None, str, int | None]) -> None:
    assert parse_destination(dest) == expected


@pytest.mark.parametrize(
    "dest", ["", "root@", "-oProxyCommand=x", "a b", "root@host:99999", "root@host:x", "::1", "r;m@host", "h$(id)"]
)
def test_parse_destination_refuses(dest: str) -> None:
    with pytest.raises(ConfigError):
        parse_destination(dest)


def test_resolve_target_reads_the_ssh_config(tmp_path: Path) -> None:
    config = tmp_path / "config"
    key = tmp_path / "id_test"
    key.write_text("not really a key")
    config.write_text(
        f"Host gpu\n  HostName 10.9.8.7\n  User admin\n  Port 2022\n  IdentityFile {key}\n  ProxyJump bastion\n"
        f"  UserKnownHostsFile {tmp_path}/kh\n"
        "Host *\n  User fallback\n"
    )
    target = resolve_target("gpu", ssh_config=str(config))
    assert (target.hostname, target.port, target.user) == ("10.9.8.7", 2022, "admin")
    assert target.identity_files == [str(key)]
    assert target.proxy_jump == "bastion"
    assert target.known_hosts_files == [f"{tmp_path}/kh"]
    assert target.known_hosts_name == "[10.9.8.7]:2022"
    assert target.display == "admin@gpu:2022"
    explicit = resolve_target("root@gpu:22", ssh_config=str(config), known_hosts="~/kh2")
    assert (explicit.user, explicit.port) == ("root", 22)
    assert explicit.known_hosts_files == [os.path.expanduser("~/kh2")]
    other = resolve_target("elsewhere", ssh_config=str(config))
    assert (other.hostname, other.user, other.proxy_jump) == ("elsewhere", "fallback", None)


def test_missing_config_or_identity_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        resolve_target("h", ssh_config=str(tmp_path / "nope"))
    with pytest.raises(ConfigError, match="identity file"):
        SSHHost("root@h", identity_file=str(tmp_path / "nope"))
    with pytest.raises(ConfigError, match="host_key_policy"):
        SSHHost("root@h", host_key_policy="yolo")  # type: ignore[arg-type]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_refused_connection_is_a_host_connection_error(tmp_path: Path) -> None:
    port = _free_port()
    host = SSHHost(f"root@127.0.0.1:{port}", known_hosts=str(tmp_path / "kh"), connect_timeout=2, name="lab")
    with pytest.raises(HostConnectionError, match=rf"lab: cannot connect to 127.0.0.1:{port}"):
        host.run("true")


def test_a_silent_server_is_a_timeout_not_a_hang(tmp_path: Path) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port = listener.getsockname()[1]
        host = SSHHost(f"root@127.0.0.1:{port}", known_hosts=str(tmp_path / "kh"), connect_timeout=0.5)
        with pytest.raises(HostConnectionError):
            host.run("true")


def test_fingerprint_matches_ssh_keygen_format() -> None:
    key = paramiko.Ed25519Key.from_private_key_file(_make_key())
    fp = fingerprint(key)
    assert fp.startswith("SHA256:") and len(fp) == len("SHA256:") + 43 and not fp.endswith("=")


def _make_key() -> str:
    import subprocess
    import tempfile

    path = os.path.join(tempfile.mkdtemp(), "k")
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", path], check=True)
    return path


def test_connect_host_builds_from_specs() -> None:
    local = connect_host(SimpleNamespace(kind="local", name="here"))
    assert isinstance(local, LocalHost) and local.name == "here"
    ssh = connect_host(
        SimpleNamespace(
            kind="ssh",
            ssh="root@10.1.2.3:2200",
            name=None,
            identity_file=None,
            known_hosts="/dev/null",
            host_key_policy="strict",
            ssh_config=None,
            connect_timeout=3,
            command_timeout=9,
            keepalive=5,
            sudo="never",
        )
    )
    assert isinstance(ssh, SSHHost)
    assert (ssh.name, ssh.address, ssh.target.port, ssh.command_timeout) == ("root@10.1.2.3:2200", "10.1.2.3", 2200, 9)
    with pytest.raises(ConfigError):
        connect_host(SimpleNamespace(kind="telnet"))


def test_remote_commands_run_under_sh_and_sudo_when_needed() -> None:
    host = SSHHost("admin@10.1.2.3", known_hosts="/dev/null", sudo="always")  # never connects in this test
    host._use_sudo = False
    assert host._wrap("echo 'x' | cat") == "sh -c 'echo '\"'\"'x'\"'\"' | cat'"
    host._use_sudo = True
    assert host._wrap("id -u") == "sudo -n -- sh -c 'id -u'"
