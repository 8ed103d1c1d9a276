"""Control-plane requests against hostile servers on real sockets (issue 28, item 4): a server that sends one
byte a second (in its headers, or in its body) and one whose body never ends. Every request ends within its
deadline with a problem named, and reads no more than its size cap."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator

import httpx
import pytest

from orchestrator.engines.controlplane import request
from orchestrator.metrics.scrape import scrape

Behaviour = Callable[[socket.socket, threading.Event], None]


def _slow_headers(conn: socket.socket, stop: threading.Event) -> None:
    for byte in b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello":
        if stop.wait(1.0):
            return
        conn.sendall(bytes([byte]))


def _slow_body(conn: socket.socket, stop: threading.Event) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 1000\r\n\r\n")
    for _ in range(1000):
        if stop.wait(0.5):
            return
        conn.sendall(b"x")


def _endless(conn: socket.socket, stop: threading.Event) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n")
    piece = b"%x\r\n%s\r\n" % (65536, b"y" * 65536)
    sent = 0
    while not stop.is_set() and sent < 2 << 30:  # bounded: 2 GiB at most, the client stops long before
        conn.sendall(piece)
        sent += len(piece)


@pytest.fixture
def hostile() -> Iterator[Callable[[Behaviour], str]]:
    stop = threading.Event()
    sockets: list[socket.socket] = []

    def start(behaviour: Behaviour) -> str:
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)
        sockets.append(listener)

        def serve() -> None:
            while not stop.is_set():
                try:
                    conn, _ = listener.accept()
                except OSError:
                    return
                sockets.append(conn)
                conn.recv(65536)
                with contextlib.suppress(OSError):
                    behaviour(conn, stop)

        threading.Thread(target=serve, daemon=True).start()
        return f"http://127.0.0.1:{listener.getsockname()[1]}"

    yield start
    stop.set()
    for s in sockets:
        s.close()


@pytest.mark.parametrize("behaviour", [_slow_headers, _slow_body], ids=["slow-headers", "slow-body"])
def test_a_server_that_dribbles_is_given_up_at_the_deadline(
    hostile: Callable[[Behaviour], str], behaviour: Behaviour
) -> None:
    url = hostile(behaviour)
    with httpx.Client(timeout=5.0, trust_env=False) as client:
        started = time.monotonic()
        answer = request(client, "GET", url + "/metrics", deadline_s=2.0)
        took = time.monotonic() - started
    assert answer.status is None and answer.text is None
    assert answer.problem == "no whole answer within 2s"
    assert took < 2.0 + 3.0  # bounded by the deadline (with slack for a busy machine), not by the server


def test_an_endless_body_is_cut_at_the_size_cap(hostile: Callable[[Behaviour], str]) -> None:
    url = hostile(_endless)
    with httpx.Client(timeout=5.0, trust_env=False) as client:
        answer = request(client, "GET", url + "/metrics", deadline_s=60.0, limit=4 << 20)
    assert answer.status is None and answer.problem == f"the answer is larger than {4 << 20} bytes"


def test_scrape_of_a_slow_loris_metrics_ends_within_its_deadline(hostile: Callable[[Behaviour], str]) -> None:
    """The sweep's own /metrics scrape: no figure from it, and the point goes on (it hung for ever before)."""
    url = hostile(_slow_headers)
    started = time.monotonic()
    assert scrape(url, "/metrics", None) is None
    assert time.monotonic() - started < 10.0 + 5.0


def test_a_well_behaved_server_is_read_whole(hostile: Callable[[Behaviour], str]) -> None:
    def fine(conn: socket.socket, stop: threading.Event) -> None:
        conn.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 10\r\n\r\nok \xc3\xa9 fine"
        )

    url = hostile(fine)
    with httpx.Client(timeout=5.0, trust_env=False) as client:
        answer = request(client, "GET", url + "/health")
    assert (answer.status, answer.text, answer.problem) == (200, "ok é fine", None)
