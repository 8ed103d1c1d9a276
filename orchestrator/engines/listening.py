"""Where a starting server says it listens, and whether it says it is ready: read from its own log lines.

The health wait (:mod:`orchestrator.launchers.health`) uses this to fail fast, in one line, when the server serves on a
port other than the experiment's URL, instead of polling that URL until ``ready_timeout``. Each line matched
here is printed by the engine once its HTTP socket is bound and listening:

``Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)``
    uvicorn, ``uvicorn/server.py`` ``Server._log_started_message``: ``"Uvicorn running on %s://%s:%d (Press
    CTRL+C to quit)"`` (``%s://[%s]:%d`` for an IPv6 host), logged in ``startup()`` right after
    ``asyncio.start_server`` bound the port. SGLang serves through it: ``launch_server`` in
    ``python/sglang/srt/entrypoints/http_server.py`` ends in ``uvicorn.run(app, host=server_args.host,
    port=server_args.port, ...)`` once the model is loaded. So does the built-in simulator.
``Starting vLLM API server 0 on http://0.0.0.0:8000``
    vLLM, ``vllm/entrypoints/openai/api_server.py``: ``"Starting vLLM API server %d on %s"``
    (``run_server_worker``), ``"Starting vLLM server on %s"`` in newer trees (``build_and_serve``), and
    ``"Starting vLLM API server on %s"`` in older ones, where ``listen_address`` is
    ``f"http{'s' if is_ssl else ''}://{host_part}:{port}"`` built by ``setup_server``, which binds the socket
    before the engine loads; ``serve_http`` starts listening on it right after the line. (vLLM hands uvicorn
    that socket, so uvicorn prints no ``Uvicorn running on`` line of its own.)
``srv  llama_server: listening on http://127.0.0.1:8080`` / ``main: server is listening on http://...``
    llama.cpp ``llama-server``, ``tools/server/server.cpp``: ``SRV_INF("listening on %s\\n", address)`` for
    each of ``ctx_http.listening_addresses`` (the tree vendored by llama-cpp-python 0.3.36), and
    ``SRV_INF("server is listening on %s\\n", ctx_http.listening_address)`` (ggml-org/llama.cpp, and
    ``- starting the main loop`` after it in older trees), printed after the model loaded; the HTTP socket
    was bound before loading (``ctx_http.start()``, which answers 503 while the model loads).

And one line that says the server is ready without naming its port:

``The server is fired up and ready to roll!``
    SGLang, ``python/sglang/srt/entrypoints/http_server.py`` ``_wait_and_warmup``, after its own warm-up
    request to itself succeeded.

SGLang also logs the port it will bind before it loads the model (``server_args=ServerArgs(... port=30000
...)``, ``_launch_subprocesses`` in ``python/sglang/srt/entrypoints/engine.py``), but nothing listens there
until loading ends, so that line is not read as listening.

Every function here reads text it is given (log lines, a URL); asking the host which ports the server's
processes listen on (``ss -Hltnp``), for engines whose log says nothing this module recognises, is the
health wait's (:mod:`orchestrator.launchers.health`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["Listening", "listening_lines", "ready_line", "url_port"]


def _patterns(kind: str) -> list[tuple[str, re.Pattern[str]]]:
    """Every known engine's (who prints it, pattern) of ``kind`` (``listening_patterns``, ``ready_patterns``):
    all engines', not only the configured one's, since a wrong ``engine:`` is one of the things this finds."""
    from orchestrator.engines.registry import engine_names, get_engine
    from orchestrator.errors import ConfigError

    out: list[tuple[str, re.Pattern[str]]] = []
    for name in engine_names():
        try:
            engine = get_engine(name)
        except ConfigError:  # a user's engine that does not load is reported where it is used, not here
            continue
        for entry in getattr(engine, kind, ()):
            if entry not in out:
                out.append(entry)
    return out


@dataclass(frozen=True)
class Listening:
    """One address a server said (or the host's sockets say) it listens on."""

    host: str
    port: int
    line: str
    source: str
    #: The words that say it (the matched part of ``line``, without the log's prefix).
    quote: str = ""

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


def listening_lines(lines: Iterable[str]) -> list[Listening]:
    """Every address the log lines say the server listens on, in order (repeats of one address dropped)."""
    found: list[Listening] = []
    seen: set[tuple[str, int]] = set()
    listening = _patterns("listening_patterns")
    for line in lines:
        if "http" not in line:
            continue
        for source, pattern in listening:
            match = pattern.search(line)
            if match is None:
                continue
            port = int(match.group("port"))
            host = match.group("host").strip("[]")
            if 0 < port < 65536 and (host, port) not in seen:
                seen.add((host, port))
                found.append(
                    Listening(host=host, port=port, line=line.strip()[:300], source=source, quote=match.group(0))
                )
            break
    return found


def ready_line(lines: Iterable[str]) -> str | None:
    """The first line that says the server is ready to serve (it names no port), or None."""
    ready = _patterns("ready_patterns")
    for line in lines:
        for _source, pattern in ready:
            if pattern.search(line):
                return line.strip()[:300]
    return None


def url_port(url: str) -> int | None:
    """The TCP port a base URL connects to (its explicit port, else 80/443)."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    if port is not None:
        return port
    return {"http": 80, "https": 443}.get(parts.scheme)
