"""A minimal reference client: blocking sockets, no asyncio, no aiohttp, no JSON parsing.

It sends streaming chat requests one after another and times, for each, the first token (from the moment
``sendall`` returns to the ``recv`` that brings the first non-empty ``content``) and the gaps between token
chunks. ``load_accuracy.py`` runs it as one extra stream beside the load generator, in its own process: what
it sees is what the server delivered at that load, so the difference from the load generator's figures is
the load generator's own error. It prints one JSON object: ``{"ttft_ms": [...], "itl_ms": [...]}``.

    python bench/load_probe.py HOST PORT REQUESTS MAX_TOKENS
"""

from __future__ import annotations

import itertools
import json
import socket
import sys
import time


def one(host: str, port: int, max_tokens: int) -> tuple[float, list[float]]:
    body = json.dumps(
        {
            "model": "sim",
            "messages": [{"role": "user", "content": "Count."}],
            "max_tokens": max_tokens,
            "ignore_eos": True,
            "stream": True,
        }
    ).encode()
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode()
    with socket.create_connection((host, port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.sendall(head + body)
        sent = time.perf_counter()
        arrivals: list[float] = []
        while True:
            data = sock.recv(65536)
            now = time.perf_counter()
            if not data:
                break
            tokens = data.count(b'"content":"') - data.count(b'"content":""')
            arrivals.extend([now] * tokens)
    gaps = [(b - a) * 1000 for a, b in itertools.pairwise(arrivals)]
    return (arrivals[0] - sent) * 1000, gaps


def main() -> int:
    host, port, requests, max_tokens = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    ttft: list[float] = []
    itl: list[float] = []
    for _ in range(requests):
        first, gaps = one(host, port, max_tokens)
        ttft.append(first)
        itl.extend(gaps)
    print(json.dumps({"ttft_ms": ttft, "itl_ms": itl}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
