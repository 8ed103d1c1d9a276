"""A minimal reference client: blocking sockets, no asyncio, no aiohttp, no JSON parsing.

It sends streaming chat requests one after another and times, for each, the first token (from the moment
``sendall`` returns to the ``recv`` that brings the first non-empty ``content``) and the gaps between token
chunks, each read's time the kernel's arrival time of its data (Linux). ``load_accuracy.py`` runs it as one
extra stream beside the load generator, in its own process: what it sees is what the server delivered at that
load, so the difference from the load generator's figures is the load generator's own error. It prints one
JSON object: ``{"ttft_ms": [...], "itl_ms": [...]}``.

    python bench/load_probe.py HOST PORT REQUESTS MAX_TOKENS
"""

from __future__ import annotations

import itertools
import json
import os
import socket
import struct
import sys
import time

#: Linux's SO_TIMESTAMPNS: each read carries the kernel's arrival time of its last segment, so a probe that
#: another process keeps off its core still times what the server delivered, not when it got to run
#: (``PROBE_KERNEL_STAMPS=0``: the time of the ``recv``, as before).
SO_TIMESTAMPNS = 35
STAMP_SPACE = socket.CMSG_SPACE(16) if sys.platform == "linux" and os.environ.get("PROBE_KERNEL_STAMPS") != "0" else 0


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
        if STAMP_SPACE:
            sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        sock.sendall(head + body)
        sent = time.perf_counter()
        arrivals: list[float] = []
        while True:
            data, ancillary, _flags, _address = sock.recvmsg(65536, STAMP_SPACE)
            now = time.perf_counter()
            if not data:
                break
            if ancillary:  # the kernel's arrival time of the read's last segment (SO_TIMESTAMPNS)
                seconds, nanoseconds = struct.unpack_from("qq", ancillary[0][2])
                age = time.time() - (seconds + nanoseconds * 1e-9)
                if 0.0 < age < 1.0:
                    now -= age
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
