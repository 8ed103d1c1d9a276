"""SSHHost: a remote host reached with paramiko, the way a careful person would use ssh.

- The destination is resolved through ``~/.ssh/config`` (:mod:`orchestrator.hosts.ssh_config`); keys come
  from the spec's ``identity_file``, the config's ``IdentityFile``, the agent and the default key files.
- Host keys are checked against known_hosts. An unknown key is refused unless the experiment says
  ``host_key_policy: accept-new`` (then it is appended to known_hosts, like ``StrictHostKeyChecking=accept-new``);
  a changed key is always refused. Both errors name the host and the SHA256 fingerprint.
- Every command runs as ``sh -c 'SCRIPT'`` (whatever the login shell is), through ``sudo -n`` when the login
  user is not root (``sudo: auto``), so file writes under /etc work for a sudoer too. Whether ``sudo -n``
  works is asked once, at login: when it does not (no sudo, a password required), the first command that
  needs it fails with one error that says so, before anything on the host was changed.
  :meth:`SSHHost.as_login_user` gives the same host with commands run as the login user, never through
  sudo: a process service starts its server that way, so a server runs as root only when asked (a root
  login, ``sudo: always``, or a systemd unit's own ``User=``).
- Keep-alives detect a dead link; a dropped connection is reopened on the next command (retried for up to
  ``reconnect_timeout``, 60 s, while the host refuses or ignores connections), and a command that is safe to
  repeat (``idempotent=True``, the default) is retried on the new connection.
- paramiko, socket and EOF errors are translated here, once, into
  :class:`~orchestrator.errors.HostConnectionError`, :class:`~orchestrator.errors.HostKeyError` and
  :class:`~orchestrator.errors.CommandError`, each naming the host. paramiko's own logger gets a handler that
  drops its records: its transport thread logs every failed handshake with a traceback (``Exception
  (client): Error reading SSH protocol banner``), which Python's last-resort handler would print to stderr
  before our one-line error. An application that configures logging still receives them (propagation is
  kept).
"""

from __future__ import annotations

import base64
import hashlib
import logging
import os
import select
import socket
import threading
import time
from collections.abc import Sequence
from typing import Any, Literal

import paramiko

from orchestrator.errors import CommandError, ConfigError, HostConnectionError, HostKeyError
from orchestrator.hosts.base import CommandResult, ShellFileOps, as_script, summarize_command
from orchestrator.hosts.ssh_config import SSHTarget, resolve_target
from orchestrator.quoting import shell_quote

__all__ = ["SSHHost", "fingerprint"]

HostKeyPolicy = Literal["strict", "accept-new"]
SudoPolicy = Literal["auto", "always", "never"]
_SYSTEM_KNOWN_HOSTS = "/etc/ssh/ssh_known_hosts"
_NETWORK_ERRORS = (paramiko.SSHException, EOFError, OSError)

# Keeps paramiko's tracebacks off stderr when nobody configured logging (see the module docstring).
logging.getLogger("paramiko").addHandler(logging.NullHandler())


def fingerprint(key: paramiko.PKey) -> str:
    """``SHA256:...`` as ``ssh-keygen -l`` prints it."""
    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


class _Dropped(Exception):
    """Internal: the connection went away under a command."""


class _KeyPolicy(paramiko.MissingHostKeyPolicy):
    """Refuse unknown host keys, or (accept-new) file them in known_hosts and go on."""

    def __init__(self, host: SSHHost, target: SSHTarget, accept_new: bool) -> None:
        self.host = host
        self.target = target
        self.accept_new = accept_new

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        files = ", ".join(self.target.known_hosts_files) or "known_hosts"
        if not self.accept_new:
            raise HostKeyError(
                f"unknown host key {key.get_name()} {fingerprint(key)} for {hostname} (not in {files}); "
                f"verify it, then add it (ssh-keyscan -p {self.target.port} {self.target.hostname} >> "
                f"{self.target.known_hosts_files[0] if self.target.known_hosts_files else 'known_hosts'}) "
                "or set host_key_policy: accept-new",
                host=self.host.name,
            )
        path = self.target.known_hosts_files[0] if self.target.known_hosts_files else None
        if path:
            try:
                os.makedirs(os.path.dirname(path) or ".", mode=0o700, exist_ok=True)
                fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
                with os.fdopen(fd, "a") as fh:
                    fh.write(f"{hostname} {key.get_name()} {key.get_base64()}\n")
            except OSError as exc:
                raise HostKeyError(f"cannot record the new host key in {path}: {exc}", host=self.host.name) from exc
        client.get_host_keys().add(hostname, key.get_name(), key)
        self.host.accepted_keys.append(f"{hostname} {key.get_name()} {fingerprint(key)}")


#: At login, for ``sudo: auto``/``always``: who we are, and whether ``sudo -n`` works (never a prompt: stdin is
#: empty and -n refuses to ask).
_SUDO_PROBE = (
    "id -u; id -un; if command -v sudo >/dev/null 2>&1; then sudo -n true 2>&1 </dev/null && echo sudo-ok; "
    "else echo 'sudo is not installed'; fi"
)


class SSHHost(ShellFileOps):
    """Run commands on a remote host over SSH (paramiko)."""

    def __init__(
        self,
        destination: str,
        *,
        name: str | None = None,
        identity_file: str | None = None,
        known_hosts: str | None = None,
        host_key_policy: HostKeyPolicy = "strict",
        ssh_config: str | None = None,
        connect_timeout: float = 10.0,
        command_timeout: float = 60.0,
        keepalive: float = 15.0,
        sudo: SudoPolicy = "auto",
        retries: int = 2,
        reconnect_timeout: float = 60.0,
    ) -> None:
        if host_key_policy not in ("strict", "accept-new"):
            raise ConfigError(f"unknown host_key_policy {host_key_policy!r}", key="host.host_key_policy")
        if identity_file is not None and not os.path.isfile(os.path.expanduser(identity_file)):
            raise ConfigError(f"identity file {identity_file} does not exist", key="host.identity_file")
        self.destination = destination
        self.target = resolve_target(
            destination, ssh_config=ssh_config, identity_file=identity_file, known_hosts=known_hosts
        )
        self.name = name or destination
        self.address = self.target.hostname
        self.connect_timeout = connect_timeout
        self.command_timeout = command_timeout
        self.keepalive = keepalive
        self.retries = retries
        self.reconnect_timeout = reconnect_timeout
        self.accepted_keys: list[str] = []
        self.connections = 0  # how many times a connection was opened (1 + reconnects)
        self._explicit_known_hosts = known_hosts is not None
        self._ssh_config = ssh_config
        self._identity_file = identity_file
        self._policy = host_key_policy
        self._sudo_policy = sudo
        self._use_sudo: bool | None = None
        self._sudo_problem: str | None = None  # why sudo -n does not work, when it is needed and does not
        self._login_user = self.target.user
        self._client: paramiko.SSHClient | None = None
        self._jumps: list[paramiko.SSHClient] = []
        self._lock = threading.Lock()

    @classmethod
    def from_spec(cls, spec: Any) -> SSHHost:
        """Build from an experiment's SSHHostSpec (duck-typed: the fields of that model)."""
        return cls(
            spec.ssh,
            name=getattr(spec, "name", None),
            identity_file=getattr(spec, "identity_file", None),
            known_hosts=getattr(spec, "known_hosts", None),
            host_key_policy=getattr(spec, "host_key_policy", "strict"),
            ssh_config=getattr(spec, "ssh_config", None),
            connect_timeout=float(getattr(spec, "connect_timeout", 10.0)),
            command_timeout=float(getattr(spec, "command_timeout", 60.0)),
            keepalive=float(getattr(spec, "keepalive", 15.0)),
            sudo=getattr(spec, "sudo", "auto"),
        )

    def __repr__(self) -> str:
        return f"SSHHost({self.name!r}, {self.target.display!r})"

    # -- connections ---------------------------------------------------------------------------------------

    def connect(self) -> None:
        """Open the connection now (it is otherwise opened by the first command)."""
        self._ensure()

    @property
    def uses_sudo(self) -> bool:
        """Whether commands go through ``sudo -n`` (known after the first connection)."""
        self._ensure()
        return bool(self._use_sudo)

    def _ensure(self) -> paramiko.SSHClient:
        with self._lock:
            client = self._client
            if client is not None:
                transport = client.get_transport()
                if transport is not None and transport.is_active():
                    return client
                self._close_locked()
            client = self._open()
            self._client = client
            self.connections += 1
        if self._use_sudo is None:
            self._use_sudo = self._decide_sudo(client)
        return client

    def _open(self) -> paramiko.SSHClient:
        sock: Any = None
        jumps: list[paramiko.SSHClient] = []
        try:
            if self.target.proxy_command:
                sock = paramiko.ProxyCommand(self.target.proxy_command)
            elif self.target.proxy_jump:
                hops = [
                    resolve_target(
                        hop.strip(),
                        ssh_config=self._ssh_config,
                        identity_file=self._identity_file,
                        known_hosts=self.target.known_hosts_files[0] if self._explicit_known_hosts else None,
                    )
                    for hop in self.target.proxy_jump.split(",")
                ]
                for i, hop in enumerate(hops):
                    jump = self._connect(hop, sock)
                    jumps.append(jump)
                    nxt = hops[i + 1] if i + 1 < len(hops) else self.target
                    transport = jump.get_transport()
                    assert transport is not None
                    sock = self._translate(
                        lambda t=transport, n=nxt: t.open_channel(
                            "direct-tcpip", (n.hostname, n.port), ("127.0.0.1", 0), timeout=self.connect_timeout
                        ),
                        f"opening a tunnel through {hop.display}",
                    )
            client = self._connect(self.target, sock)
        except BaseException:
            for jump in jumps:
                jump.close()
            raise
        self._jumps = jumps
        return client

    def _connect(self, target: SSHTarget, sock: Any) -> paramiko.SSHClient:
        client = paramiko.SSHClient()
        try:
            self._load_known_hosts(client, target)
            client.set_missing_host_key_policy(_KeyPolicy(self, target, self._policy == "accept-new"))
            identities = [p for p in target.identity_files if os.path.isfile(p)]
            timeout = self.connect_timeout
            key_files: Any = identities or None  # paramiko takes a list too; its stubs say str only
            client.connect(
                hostname=target.hostname,
                port=target.port,
                username=target.user,
                key_filename=key_files,
                look_for_keys=not identities,
                allow_agent=True,
                timeout=timeout,
                banner_timeout=timeout,
                auth_timeout=timeout,
                channel_timeout=timeout,
                sock=sock,
            )
            transport = client.get_transport()
            if transport is not None and self.keepalive > 0:
                transport.set_keepalive(max(1, int(self.keepalive)))
            return client
        except HostKeyError:
            client.close()
            raise
        except paramiko.BadHostKeyException as exc:
            client.close()
            got, expected = exc.key, exc.expected_key
            files = ", ".join(target.known_hosts_files)
            raise HostKeyError(
                f"the host key of {target.known_hosts_name} has CHANGED: it offers {got.get_name()} "
                f"{fingerprint(got)}, known_hosts ({files}) has {fingerprint(expected)}; if the host was "
                f"reinstalled, remove the old entry (ssh-keygen -R '{target.known_hosts_name}') and verify the "
                "new key",
                host=self.name,
            ) from None
        except paramiko.AuthenticationException as exc:
            client.close()
            keys = ", ".join(target.identity_files) or "the agent and default keys"
            raise HostConnectionError(
                f"authentication as {target.user}@{target.hostname}:{target.port} failed ({exc}); tried {keys}",
                host=self.name,
            ) from None
        except socket.gaierror as exc:
            client.close()
            raise HostConnectionError(f"cannot resolve {target.hostname!r}: {exc.strerror}", host=self.name) from None
        except TimeoutError:
            client.close()
            raise HostConnectionError(
                f"no answer from {target.hostname}:{target.port} within {self.connect_timeout:g} s", host=self.name
            ) from None
        except paramiko.ssh_exception.NoValidConnectionsError as exc:
            client.close()
            reasons = "; ".join(sorted({getattr(e, "strerror", None) or str(e) for e in exc.errors.values()}))
            raise HostConnectionError(
                f"cannot connect to {target.hostname}:{target.port}: {reasons}", host=self.name
            ) from None
        except _NETWORK_ERRORS as exc:
            client.close()
            reason = str(exc) or type(exc).__name__
            if "protocol banner" in reason:
                reason += " (something answers there, but not an SSH server: is that the SSH port?)"
            raise HostConnectionError(
                f"cannot connect to {target.hostname}:{target.port}: {reason}", host=self.name
            ) from None

    def _load_known_hosts(self, client: paramiko.SSHClient, target: SSHTarget) -> None:
        files = list(target.known_hosts_files)
        if not self._explicit_known_hosts and os.path.isfile(_SYSTEM_KNOWN_HOSTS):
            files.append(_SYSTEM_KNOWN_HOSTS)
        for path in files:
            if not os.path.isfile(path):
                continue
            try:
                client.load_system_host_keys(path)
            except (OSError, paramiko.SSHException, ValueError) as exc:
                raise ConfigError(f"cannot read known_hosts file {path}: {exc}", key="host.known_hosts") from exc

    def _translate(self, call: Any, what: str) -> Any:
        try:
            return call()
        except _NETWORK_ERRORS as exc:
            raise HostConnectionError(f"{what}: {exc or type(exc).__name__}", host=self.name) from None

    def _decide_sudo(self, client: paramiko.SSHClient) -> bool:
        if self._sudo_policy == "never":
            return False
        if self._sudo_policy == "auto" and self.target.user == "root":
            return False
        try:
            result = self._exec(client, _SUDO_PROBE, self.command_timeout, None, "id -u")
        except _Dropped as exc:
            raise HostConnectionError("the connection dropped right after login", host=self.name) from exc
        lines = [line.strip() for line in result.stdout.splitlines() if line.strip()]
        uid = lines[0] if lines else ""
        if len(lines) > 1:
            self._login_user = lines[1]
        if self._sudo_policy == "auto" and uid == "0":
            return False
        if not lines or lines[-1] != "sudo-ok":
            detail = "; ".join(lines[2:]) or result.stderr.strip() or f"exit {result.exit_code}"
            self._sudo_problem = detail[:300]
        return True

    def _sudo_refused(self) -> CommandError:
        user = self._login_user
        return CommandError(
            f"{user} is not root, and `sudo -n` does not work there ({self._sudo_problem}): specsweep changes "
            f"systemd units and files under /etc and /var/lib as root. Log in as root, give {user} passwordless "
            "sudo, or, for a process service (which needs no root), set the host's sudo: never; nothing was "
            "changed on the host",
            host=self.name,
        )

    def as_login_user(self) -> ShellFileOps:
        """This host with every command run as the login user, never through sudo (``sudo: always`` asks for
        root everywhere: then it is this host itself). Shares the connection."""
        if self._sudo_policy == "always":
            return self
        return _LoginUserHost(self)

    def open_forward(self, host: str, port: int) -> paramiko.Channel:
        """A channel to ``host:port`` as the SSH server reaches them (``ssh -L``'s direct-tcpip), on this
        host's connection (reopened when it dropped). HostConnectionError when the server refuses it (nothing
        listens there, or forwarding is disabled)."""
        client = self._ensure_patiently()
        transport = client.get_transport()
        if transport is None:
            raise HostConnectionError("the SSH connection is closed", host=self.name)
        channel: paramiko.Channel = self._translate(
            lambda: transport.open_channel(
                "direct-tcpip", (host, int(port)), ("127.0.0.1", 0), timeout=self.connect_timeout
            ),
            f"forwarding to {host}:{port}",
        )
        return channel

    def close(self) -> None:
        with self._lock:
            self._close_locked()

    def _close_locked(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
        for jump in self._jumps:
            jump.close()
        self._jumps = []

    def _drop(self, client: paramiko.SSHClient) -> None:
        with self._lock:
            if self._client is client:
                self._close_locked()

    # -- commands ------------------------------------------------------------------------------------------

    def _wrap(self, script: str, *, sudo: bool = True) -> str:
        command = "sh -c " + shell_quote(script)
        return "sudo -n -- " + command if sudo and self._use_sudo else command

    def run(
        self,
        cmd: str | Sequence[str],
        timeout: float | None = None,
        *,
        input: str | None = None,
        idempotent: bool = True,
    ) -> CommandResult:
        return self._run(cmd, timeout, input=input, idempotent=idempotent, sudo=True)

    def _run(
        self,
        cmd: str | Sequence[str],
        timeout: float | None,
        *,
        input: str | None,
        idempotent: bool,
        sudo: bool,
    ) -> CommandResult:
        limit = self.command_timeout if timeout is None else timeout
        summary = summarize_command(cmd)
        attempt = 0
        while True:
            client = self._ensure_patiently()
            if sudo and self._use_sudo and self._sudo_problem is not None:
                raise self._sudo_refused()
            try:
                return self._exec(client, self._wrap(as_script(cmd), sudo=sudo), limit, input, summary)
            except _Dropped as exc:
                self._drop(client)
                if not idempotent:
                    raise HostConnectionError(
                        f"the connection dropped while running `{summary}` (not retried: it must not run twice)",
                        host=self.name,
                    ) from exc
                if attempt >= self.retries:
                    raise HostConnectionError(
                        f"the connection dropped while running `{summary}` ({attempt + 1} attempts): {exc}",
                        host=self.name,
                    ) from exc
                attempt += 1
                time.sleep(min(0.2 * 2**attempt, 2.0))

    def _ensure_patiently(self) -> paramiko.SSHClient:
        """``_ensure``, but once the host has been reached, a failed reconnection is tried again for up to
        ``reconnect_timeout`` seconds: an sshd restarting or a link flapping must not end a sweep, nor keep
        the host from being restored. A first connection that fails still fails at once."""
        deadline: float | None = None
        delay = 0.25
        while True:
            try:
                return self._ensure()
            except HostConnectionError as exc:
                if self.connections == 0 or self.reconnect_timeout <= 0:
                    raise
                now = time.monotonic()
                deadline = now + self.reconnect_timeout if deadline is None else deadline
                if now >= deadline:
                    raise HostConnectionError(
                        f"{exc} (lost the connection; still unreachable after {self.reconnect_timeout:g} s)"
                    ) from exc
                time.sleep(min(delay, deadline - now))
                delay = min(delay * 2, 2.0)

    def _exec(
        self, client: paramiko.SSHClient, command: str, limit: float, input: str | None, summary: str
    ) -> CommandResult:
        transport = client.get_transport()
        if transport is None or not transport.is_active():
            raise _Dropped("the transport is closed")
        try:
            chan = transport.open_session(timeout=self.connect_timeout)
        except _NETWORK_ERRORS as exc:
            raise _Dropped(str(exc) or type(exc).__name__) from exc
        out, err = bytearray(), bytearray()
        try:
            chan.exec_command(command)
            if input is not None:
                chan.sendall(input.encode())
            chan.shutdown_write()
            deadline = time.monotonic() + limit
            while True:
                while chan.recv_ready():
                    out += chan.recv(65536)
                while chan.recv_stderr_ready():
                    err += chan.recv_stderr(65536)
                if chan.closed or (chan.exit_status_ready() and chan.eof_received):
                    if not chan.recv_ready() and not chan.recv_stderr_ready():
                        break
                    continue
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    if not transport.is_active():
                        raise _Dropped("the transport died during the command")
                    raise CommandError(f"`{summary}` did not finish within {limit:g} s", host=self.name)
                # The channel's fileno wakes on stdout, stderr and close; the cap notices the exit status.
                select.select([chan], [], [], min(remaining, 0.05))
        except _NETWORK_ERRORS as exc:
            raise _Dropped(str(exc) or type(exc).__name__) from exc
        finally:
            chan.close()
        status = chan.exit_status if chan.exit_status_ready() else -1
        if status == -1:
            # No exit status: the connection died, or the command was killed by a signal (OpenSSH then sends
            # exit-signal, which paramiko does not record). The transport tells which.
            for _ in range(30):
                if not transport.is_active():
                    raise _Dropped("the connection closed before the command's exit status arrived")
                time.sleep(0.01)
        return CommandResult(
            exit_code=status,
            stdout=out.decode("utf-8", "replace"),
            stderr=err.decode("utf-8", "replace"),
            stdout_bytes=bytes(out),
        )


class _LoginUserHost(ShellFileOps):
    """An :class:`SSHHost` whose commands run as the login user, never through sudo (see
    :meth:`SSHHost.as_login_user`): the same connection, the same name and timeouts."""

    def __init__(self, host: SSHHost) -> None:
        self._host = host
        self.name = host.name
        self.address = host.address

    def __repr__(self) -> str:
        return f"{self._host!r}.as_login_user()"

    @property
    def command_timeout(self) -> float:
        return self._host.command_timeout

    def run(
        self,
        cmd: str | Sequence[str],
        timeout: float | None = None,
        *,
        input: str | None = None,
        idempotent: bool = True,
    ) -> CommandResult:
        return self._host._run(cmd, timeout, input=input, idempotent=idempotent, sudo=False)

    def close(self) -> None:
        self._host.close()
