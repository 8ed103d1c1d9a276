"""The SSH tunnel of ``server.via: ssh`` (orchestrator/hosts/tunnel.py) over a fake forwarder whose channels
are plain sockets to a local HTTP server: requests and streams go through, a refused forward is a refused
connection, closing the tunnel ends every connection."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from orchestrator.errors import HostConnectionError
from orchestrator.hosts.tunnel import Tunnel, via_url
from tests.timing import scaled
from tests.unit.slurm_fakes import HealthServer


class _Channel:
    """A socket with paramiko Channel's ``shutdown_write``."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock

    def fileno(self) -> int:
        return self.sock.fileno()

    def recv(self, n: int) -> bytes:
        return self.sock.recv(n)

    def sendall(self, data: bytes) -> None:
        self.sock.sendall(data)

    def shutdown_write(self) -> None:
        self.sock.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        self.sock.close()


class Forwarder:
    name = "login"

    def __init__(self, refuse: bool = False) -> None:
        self.refuse = refuse
        self.opened: list[tuple[str, int]] = []

    def open_forward(self, host: str, port: int) -> Any:
        self.opened.append((host, port))
        if self.refuse:
            raise HostConnectionError("forwarding to x: Connection refused", host=self.name)
        return _Channel(socket.create_connection((host, port), timeout=5))


@pytest.fixture
def health() -> Iterator[HealthServer]:
    server = HealthServer()
    try:
        yield server
    finally:
        server.close()


def test_requests_go_through_the_tunnel_to_the_far_side(health: HealthServer) -> None:
    forwarder = Forwarder()
    with Tunnel(forwarder, f"http://127.0.0.2:{health.port}/v1") as tunnel:
        assert tunnel.url == f"http://127.0.0.1:{tunnel.port}/v1"
        with httpx.Client(trust_env=False) as client:
            for _ in range(3):
                assert client.get(tunnel.url + "/health").status_code == 200
        with httpx.Client(trust_env=False) as other:  # a second client: its own connection
            assert other.get(tunnel.url + "/models").status_code == 200
    assert set(forwarder.opened) == {("127.0.0.2", health.port)} and tunnel.connections >= 2


def test_a_refused_forward_is_a_refused_connection(health: HealthServer) -> None:
    tunnel = Tunnel(Forwarder(refuse=True), f"http://node1:{health.port}")
    tunnel.start()
    try:
        with pytest.raises(httpx.HTTPError):
            httpx.get(tunnel.url + "/health", timeout=5, trust_env=False)
        assert tunnel.refused == 1
    finally:
        tunnel.close()


def test_closing_the_tunnel_ends_its_connections(health: HealthServer) -> None:
    tunnel = Tunnel(Forwarder(), f"http://127.0.0.1:{health.port}")
    tunnel.start()
    client = socket.create_connection(("127.0.0.1", tunnel.port), timeout=5)
    deadline = time.monotonic() + scaled(5)
    while not tunnel.connections and time.monotonic() < deadline:
        time.sleep(0.01)
    tunnel.close()
    client.settimeout(5)
    assert client.recv(10) == b""  # closed by the tunnel
    client.close()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", tunnel.port), timeout=1).close()
    assert threading.active_count() < 50


def test_via_url_keeps_scheme_and_path() -> None:
    assert via_url("https://node3:8443/api/", 5000) == "https://127.0.0.1:5000/api"
    assert via_url("http://[::1]:80", 7) == "http://127.0.0.1:7"
