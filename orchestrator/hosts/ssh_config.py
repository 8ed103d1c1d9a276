"""Where an SSH host spec points: ``user@host[:port]`` or a ``~/.ssh/config`` alias, resolved the way ssh does.

The experiment's ``ssh:`` value is parsed (``user@host:port``, ``user@[v6addr]:port``, ``ssh://user@host:port``
or a bare alias), then looked up in the OpenSSH client config through paramiko's ``SSHConfig`` (Host
patterns, Match, HostName, User, Port, IdentityFile, ProxyJump, ProxyCommand, UserKnownHostsFile). What the
spec says explicitly wins over the config, as on the ssh command line.
"""

from __future__ import annotations

import getpass
import os
import re
from dataclasses import dataclass, field

import paramiko

from orchestrator.errors import ConfigError

__all__ = ["SSHTarget", "parse_destination", "resolve_target"]

# Host names, IPv4 and config aliases: no spaces, quotes, shell or option syntax (a leading "-").
_HOST = re.compile(r"[A-Za-z0-9_.%~+-]+")
_USER = re.compile(r"[A-Za-z0-9_.][A-Za-z0-9_.@-]*")


@dataclass(frozen=True)
class SSHTarget:
    """One resolved SSH destination."""

    alias: str
    hostname: str
    port: int
    user: str
    identity_files: list[str] = field(default_factory=list)
    proxy_jump: str | None = None
    proxy_command: str | None = None
    known_hosts_files: list[str] = field(default_factory=list)

    @property
    def display(self) -> str:
        """``user@host:port`` as a person would type it (the alias when one was used)."""
        port = "" if self.port == 22 else f":{self.port}"
        return f"{self.user}@{self.alias}{port}"

    @property
    def known_hosts_name(self) -> str:
        """The name this host's key is filed under in known_hosts (``[host]:port`` off port 22)."""
        return self.hostname if self.port == 22 else f"[{self.hostname}]:{self.port}"


def parse_destination(destination: str) -> tuple[str | None, str, int | None]:
    """Split ``[ssh://][user@]host[:port]`` (host may be ``[v6addr]``) into (user, host, port)."""
    dest = destination.strip()
    if dest.startswith("ssh://"):
        dest = dest[len("ssh://") :].rstrip("/")
    if not dest:
        raise ConfigError("the ssh destination is empty", key="host.ssh")
    user: str | None = None
    if "@" in dest:
        user, dest = dest.rsplit("@", 1)
        if not _USER.fullmatch(user):
            raise ConfigError(f"{user!r} is not a valid user name in {destination!r}", key="host.ssh")
    port: int | None = None
    if dest.startswith("["):
        host, sep, rest = dest[1:].partition("]")
        if not sep or not re.fullmatch(r"[0-9A-Fa-f:.%A-Za-z]+", host or "-"):
            raise ConfigError(f"bad IPv6 address in {destination!r}", key="host.ssh")
        if rest:
            if not rest.startswith(":"):
                raise ConfigError(f"unexpected {rest!r} after the address in {destination!r}", key="host.ssh")
            port = _port(rest[1:], destination)
        return user, host, port
    if dest.count(":") == 1:
        dest, port_text = dest.split(":")
        port = _port(port_text, destination)
    elif dest.count(":") > 1:
        raise ConfigError(f"write an IPv6 address in brackets: user@[{dest}]:22", key="host.ssh")
    if not _HOST.fullmatch(dest) or dest.startswith("-"):
        raise ConfigError(f"{dest!r} is not a valid host name or ssh alias", key="host.ssh")
    return user, dest, port


def _port(text: str, destination: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise ConfigError(f"bad port {text!r} in {destination!r}", key="host.ssh")
    return int(text)


def _load_config(path: str | None) -> paramiko.SSHConfig:
    if path is not None:
        expanded = os.path.expanduser(path)
        if not os.path.isfile(expanded):
            raise ConfigError(f"ssh config file {path} does not exist", key="host.ssh_config")
    else:
        expanded = os.path.expanduser("~/.ssh/config")
        if not os.path.isfile(expanded):
            return paramiko.SSHConfig()
    try:
        return paramiko.SSHConfig.from_path(expanded)
    except (OSError, paramiko.ConfigParseError, ValueError) as exc:
        raise ConfigError(f"cannot read ssh config {expanded}: {exc}", key="host.ssh_config") from exc


def resolve_target(
    destination: str,
    *,
    ssh_config: str | None = None,
    identity_file: str | None = None,
    known_hosts: str | None = None,
) -> SSHTarget:
    """Resolve an experiment's ``ssh:`` value against the ssh client config."""
    user, host, port = parse_destination(destination)
    config = _load_config(ssh_config)
    try:
        options = config.lookup(host)
    except (paramiko.ConfigParseError, paramiko.SSHException, ValueError, KeyError) as exc:
        raise ConfigError(f"cannot resolve {host!r} in the ssh config: {exc}", key="host.ssh") from exc
    hostname = str(options.get("hostname", host))
    if port is None:
        port = _port(str(options.get("port", "22")), f"the ssh config entry for {host}")
    if user is None:
        user = str(options.get("user") or getpass.getuser())
    identities = [os.path.expanduser(identity_file)] if identity_file else []
    identities += [os.path.expanduser(p) for p in options.get("identityfile", [])]
    proxy_jump = options.get("proxyjump")
    proxy_command = options.get("proxycommand")
    if known_hosts is not None:
        known_files = [os.path.expanduser(known_hosts)]
    elif "userknownhostsfile" in options:
        known_files = [os.path.expanduser(p) for p in str(options["userknownhostsfile"]).split()]
    else:
        known_files = [os.path.expanduser("~/.ssh/known_hosts")]
    return SSHTarget(
        alias=host,
        hostname=hostname,
        port=port,
        user=user,
        identity_files=identities,
        proxy_jump=None if proxy_jump in (None, "none") else str(proxy_jump),
        proxy_command=None if proxy_command in (None, "none") else str(proxy_command),
        known_hosts_files=known_files,
    )
