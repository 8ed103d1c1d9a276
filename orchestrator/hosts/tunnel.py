"""A local port forwarded over an SSH connection (``ssh -L``), for servers only the SSH host can reach.

``server.via: ssh`` in an experiment: the controller talks to the server through the SSH connection it already
has (a Slurm cluster's login node, whose compute nodes nobody else reaches; a GPU box whose firewall lets
only port 22 in). :class:`Tunnel` listens on ``127.0.0.1`` on a free port of this machine; every connection
made to it becomes one direct-tcpip channel (:meth:`~orchestrator.hosts.ssh.SSHHost.open_forward`) to the
server's host and port *as the SSH server resolves and reaches them* (a node's name resolves on the login
node), and bytes are copied both ways until either side closes. :func:`via_url` gives the URL to use
instead of the server's: the same scheme and path, the tunnel's address.

A connection the far side refuses (the server is not listening yet) is closed at once, so the client sees
what it would see directly: the health wait keeps polling. Closing the tunnel closes its listener and every
connection still open. One thread accepts; each connection has one copying thread.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
from typing import Any, Protocol
from urllib.parse import urlsplit

from orchestrator.errors import ConfigError, SpecsweepError

__all__ = ["Forwarder", "Tunnel", "via_url"]

_CHUNK = 65536


class Forwarder(Protocol):
    """What a tunnel needs of an SSH host: a channel to ``host:port`` as the host reaches them."""

    name: str

    def open_forward(self, host: str, port: int) -> Any: ...


def _target(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    if not parts.hostname:
        raise ConfigError(f"cannot tunnel to {url!r}: it names no host", key="server.url")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return parts.hostname, port


def via_url(url: str, local_port: int) -> str:
    """``url`` with its host and port replaced by the tunnel's (``127.0.0.1:local_port``)."""
    parts = urlsplit(url)
    return parts._replace(netloc=f"127.0.0.1:{local_port}").geturl().rstrip("/")


class Tunnel:
    """``127.0.0.1:<port>`` on this machine forwarded to ``url``'s host and port over ``ssh``'s connection."""

    def __init__(self, ssh: Forwarder, url: str) -> None:
        self.ssh = ssh
        self.remote_url = url.rstrip("/")
        self.remote_host, self.remote_port = _target(url)
        self._listener: socket.socket | None = None
        self._port: int | None = None
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._channels: set[Any] = set()
        self.connections = 0  # how many connections were forwarded (for tests and messages)
        self.refused = 0  # how many the far side refused

    def __enter__(self) -> Tunnel:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def port(self) -> int:
        if self._port is None:
            raise SpecsweepError("the tunnel was never opened")
        return self._port

    @property
    def url(self) -> str:
        """The server's URL through the tunnel."""
        return via_url(self.remote_url, self.port)

    def start(self) -> str:
        """Listen, and return the URL to use instead of the server's."""
        if self._listener is None:
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind(("127.0.0.1", 0))
            listener.listen(256)
            self._listener = listener
            self._port = int(listener.getsockname()[1])
            name = f"tunnel-{self.remote_host}:{self.remote_port}"
            threading.Thread(target=self._accept, args=(listener,), name=name, daemon=True).start()
        return self.url

    def _accept(self, listener: socket.socket) -> None:
        while not self._closed.is_set():
            try:
                client, _ = listener.accept()
            except OSError:
                return
            if self._closed.is_set():
                client.close()
                return
            threading.Thread(target=self._serve, args=(client,), name="tunnel-copy", daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        try:
            channel = self.ssh.open_forward(self.remote_host, self.remote_port)
        except (SpecsweepError, OSError):
            self.refused += 1
            with contextlib.suppress(OSError):
                client.close()
            return
        with self._lock:
            if self._closed.is_set():
                channel.close()
                client.close()
                return
            self._open.add(client)
            self._channels.add(channel)
            self.connections += 1
        try:
            self._copy(client, channel)
        finally:
            with self._lock:
                self._open.discard(client)
                self._channels.discard(channel)
            with contextlib.suppress(Exception):
                channel.close()
            with contextlib.suppress(OSError):
                client.close()

    def _copy(self, client: socket.socket, channel: Any) -> None:
        """Both ways until either side has closed and the other has sent what it had."""
        client_open = channel_open = True
        while (client_open or channel_open) and not self._closed.is_set():
            watched = [s for s, is_open in ((client, client_open), (channel, channel_open)) if is_open]
            try:
                ready, _, _ = select.select(watched, [], [], 0.5)
            except (OSError, ValueError):
                return
            for source in ready:
                try:
                    data = source.recv(_CHUNK)
                except OSError:
                    return
                if source is client:
                    if not data:
                        client_open = False
                        with contextlib.suppress(Exception):
                            channel.shutdown_write()
                        continue
                    try:
                        channel.sendall(data)
                    except Exception:  # paramiko's own errors too: the channel is gone
                        return
                else:
                    if not data:
                        channel_open = False
                        with contextlib.suppress(OSError):
                            client.shutdown(socket.SHUT_WR)
                        continue
                    try:
                        client.sendall(data)
                    except OSError:
                        return
            if not channel_open and not client_open:
                return
            if not channel_open:
                return  # the server closed its side: nothing more will come back

    def close(self) -> None:
        """Stop listening and close every forwarded connection."""
        self._closed.set()
        listener, self._listener = self._listener, None
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread (close alone would not)
            with contextlib.suppress(OSError):
                listener.close()
        with self._lock:
            sockets, channels = list(self._open), list(self._channels)
            self._open.clear()
            self._channels.clear()
        for channel in channels:
            with contextlib.suppress(Exception):
                channel.close()
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.close()
