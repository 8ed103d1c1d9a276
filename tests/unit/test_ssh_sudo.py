"""``sudo: auto`` decisions of SSHHost, without a network (the system test test_sudo.py runs them for real)."""

from __future__ import annotations

from typing import Any

import pytest

from orchestrator.errors import CommandError
from orchestrator.hosts.base import CommandResult
from orchestrator.hosts.ssh import SSHHost


class _Client:
    """Stands in for a paramiko client: _exec is replaced, so nothing is called on it."""


def _host(monkeypatch: pytest.MonkeyPatch, user: str, probe: str, sudo: str = "auto") -> tuple[SSHHost, list[str]]:
    host = SSHHost(f"{user}@10.1.2.3", known_hosts="/dev/null", sudo=sudo)  # type: ignore[arg-type]
    commands: list[str] = []

    def fake_exec(client: Any, command: str, limit: float, input: str | None, summary: str) -> CommandResult:
        commands.append(command)
        if "id -u" in command and "sudo -n true" in command:
            return CommandResult(0, probe, "")
        return CommandResult(0, "done\n", "")

    monkeypatch.setattr(host, "_exec", fake_exec)
    monkeypatch.setattr(host, "_ensure_patiently", lambda: _client_with_decision(host))
    return host, commands


def _client_with_decision(host: SSHHost) -> Any:
    client = _Client()
    if host._use_sudo is None:
        host._use_sudo = host._decide_sudo(client)  # type: ignore[arg-type]
    return client


def test_a_root_login_never_asks_for_sudo(monkeypatch: pytest.MonkeyPatch) -> None:
    host, commands = _host(monkeypatch, "root", "")
    host.run("true")
    assert commands == ["sh -c true"]


def test_uid_zero_under_another_name_needs_no_sudo(monkeypatch: pytest.MonkeyPatch) -> None:
    host, commands = _host(monkeypatch, "toor", "0\ntoor\nsudo-ok\n")
    host.run("true")
    assert commands[-1] == "sh -c true"


def test_a_sudoer_runs_through_sudo_and_its_login_user_view_does_not(monkeypatch: pytest.MonkeyPatch) -> None:
    host, commands = _host(monkeypatch, "admin", "1000\nadmin\nsudo-ok\n")
    host.run("true")
    host.as_login_user().run("true")
    assert commands[1:] == ["sudo -n -- sh -c true", "sh -c true"]


@pytest.mark.parametrize(
    "answer", ["1000\nuser\nsudo: a password is required\n", "1000\nuser\nsudo is not installed\n"]
)
def test_without_sudo_the_first_privileged_command_fails_before_running(
    monkeypatch: pytest.MonkeyPatch, answer: str
) -> None:
    host, commands = _host(monkeypatch, "user", answer)
    with pytest.raises(CommandError) as caught:
        host.run("mkdir -p /var/lib/specsweep")
    message = str(caught.value)
    assert "user is not root" in message and answer.splitlines()[-1] in message and "nothing was changed" in message
    assert "\n" not in message
    assert all("mkdir" not in c for c in commands)  # never ran
    # A process service needs no root: its commands still run, as the user.
    host.as_login_user().run("true")
    assert commands[-1] == "sh -c true"


def test_sudo_always_is_root_everywhere(monkeypatch: pytest.MonkeyPatch) -> None:
    host, commands = _host(monkeypatch, "admin", "1000\nadmin\nsudo-ok\n", sudo="always")
    assert host.as_login_user() is host
    host.as_login_user().run("true")
    assert commands[-1] == "sudo -n -- sh -c true"
