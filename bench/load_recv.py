"""Why the load generator caps socket reads at 64 KiB: the cost of one small ``recv`` by buffer size.

asyncio reads with ``sock.recv(256 KiB)``; CPython allocates the full size for each call before trimming the
result, and above glibc's mmap threshold that allocation is an mmap and a munmap. Sends a 250-byte message
over a socketpair and receives it with each buffer size; prints CPU microseconds per send + recv.

    .venv/bin/python bench/load_recv.py
"""

from __future__ import annotations

import socket
import time

MESSAGE = b"x" * 250
ROUNDS = 50_000


def main() -> None:
    left, right = socket.socketpair()
    with left, right:
        for size in (256 * 1024, 128 * 1024, 64 * 1024, 16 * 1024):
            started = time.process_time()
            for _ in range(ROUNDS):
                left.send(MESSAGE)
                right.recv(size)
            cost = (time.process_time() - started) / ROUNDS * 1e6
            print(f"recv({size // 1024:>3d} KiB): {cost:5.1f} µs per 250-byte send + recv")


if __name__ == "__main__":
    main()
