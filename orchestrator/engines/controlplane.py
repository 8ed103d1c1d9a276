"""Requests to a server's control plane, each with a total deadline and a size cap.

``/metrics``, ``/health``, ``/server_info`` and the cache flush are read through :func:`request`: httpx's own
timeouts bound each read (a server that sends one byte a second never trips them), so the body is read in
pieces against a deadline for the whole request, and no more than ``limit`` bytes of it are kept (an endless
body would take the controller's memory). The request runs in a thread of its own that the caller waits for
at most the deadline, so a server that dribbles even its headers holds up nothing, and the caller's thread
(the main one: Ctrl-C) is never stuck in a read. What breaks either is an answer of its own, never a hang.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import httpx

__all__ = ["DEADLINE_S", "LIMIT_BYTES", "Answer", "request"]

#: A control-plane request's whole time, connection to last byte (a /metrics of a large server is 1-2 MB).
DEADLINE_S = 10.0
#: The most of a control-plane body specsweep reads: far above any engine's /metrics.
LIMIT_BYTES = 32 * 1024 * 1024


@dataclass(frozen=True)
class Answer:
    """What the server answered: ``status`` and ``text`` (None when it did not), or why not (``problem``)."""

    status: int | None
    text: str | None
    problem: str | None = None
    #: The client's own error, where one ended the request (a refused connection is told apart by it).
    error: Exception | None = None


def request(
    client: httpx.Client,
    method: str,
    url: str,
    *,
    headers: dict[str, str] | None = None,
    deadline_s: float = DEADLINE_S,
    limit: int = LIMIT_BYTES,
) -> Answer:
    """``method url`` through ``client``, the body read within ``deadline_s`` in all and ``limit`` bytes."""
    result: list[Answer] = []
    done = threading.Event()
    stop = threading.Event()

    def work() -> None:
        try:
            result.append(_read(client, method, url, headers, deadline_s, limit, stop))
        finally:
            done.set()

    threading.Thread(target=work, name="control-plane", daemon=True).start()
    if not done.wait(deadline_s + 0.5):
        stop.set()  # the thread ends at the next piece the server sends, or when it closes
        return Answer(None, None, f"no whole answer within {deadline_s:g}s")
    return result[0]


def _read(
    client: httpx.Client,
    method: str,
    url: str,
    headers: dict[str, str] | None,
    deadline_s: float,
    limit: int,
    stop: threading.Event,
) -> Answer:
    end = time.monotonic() + deadline_s
    left = max(0.001, deadline_s)
    timeout = httpx.Timeout(min(left, client.timeout.read or left), connect=min(left, client.timeout.connect or left))
    try:
        with client.stream(method, url, headers=headers, timeout=timeout) as response:
            chunks: list[bytes] = []
            size = 0
            for chunk in response.iter_bytes():
                size += len(chunk)
                if size > limit:
                    return Answer(None, None, f"the answer is larger than {limit} bytes")
                chunks.append(chunk)
                if time.monotonic() > end or stop.is_set():
                    return Answer(None, None, f"no whole answer within {deadline_s:g}s")
            encoding = response.encoding or "utf-8"
            return Answer(response.status_code, b"".join(chunks).decode(encoding, errors="replace"))
    except (httpx.HTTPError, httpx.InvalidURL, LookupError, ValueError) as exc:
        return Answer(None, None, f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__, exc)
