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

:func:`listening_ports` asks the host itself (``ss -Hltnp``) which TCP ports the server's processes (the
session of its main process: the process service's wrapper, or the unit's main process, which systemd starts
in a session of its own) listen on, for engines whose log says nothing this module recognises.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from orchestrator.hosts.base import Host

__all__ = ["Listening", "listening_lines", "listening_ports", "ready_line", "url_port"]

_ADDRESS = r"(?P<scheme>https?)://(?P<host>\[[^\]\s]*\]|[^\s:/\[\]]+):(?P<port>\d{1,5})\b"

#: (who prints it, pattern): every line the engines print once their HTTP socket listens (module docstring).
_LISTENING: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("uvicorn", re.compile(r"Uvicorn running on " + _ADDRESS)),
    ("vllm", re.compile(r"Starting vLLM (?:API )?server(?: \d+)? on " + _ADDRESS)),
    ("llama.cpp", re.compile(r"(?:^|\s|:)(?:server is )?listening on " + _ADDRESS)),
)

#: Lines that say the server serves, without naming the port (module docstring).
_READY: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("sglang", re.compile(r"The server is fired up and ready to roll!")),
)


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
    for line in lines:
        if "http" not in line:
            continue
        for source, pattern in _LISTENING:
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
    for line in lines:
        for _source, pattern in _READY:
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


_SS_PID = re.compile(r"pid=(\d+)")
# $1: the main pid. Prints the pids of its session, a separator, then the host's listening TCP sockets.
_SOCKETS = """s=$(ps -o sid= -p {pid} 2>/dev/null | tr -d ' ')
[ -n "$s" ] || exit 0
command -v ss >/dev/null 2>&1 || exit 0
ps -e -o pid=,sid= 2>/dev/null | awk -v s="$s" '$2 == s {{print $1}}'
echo ---
ss -Hltnp 2>/dev/null
true
"""


def listening_ports(host: Host, main_pid: int | None) -> list[Listening]:
    """The TCP addresses the processes of ``main_pid``'s session listen on, from the host's ``ss -Hltnp``.

    Best effort: empty when the pid is unknown, ``ps`` or ``ss`` is missing, or the host does not show
    other users' processes. Never raises for what the host answers.
    """
    if not main_pid or main_pid <= 0:
        return []
    try:
        result = host.run(_SOCKETS.format(pid=int(main_pid)), timeout=10)
    except Exception:  # a diagnosis must never turn into the failure it diagnoses
        return []
    head, sep, sockets = result.stdout.partition("---\n")
    if not sep:
        return []
    pids = {int(p) for p in head.split() if p.isdigit()}
    found: list[Listening] = []
    seen: set[tuple[str, int]] = set()
    for line in sockets.splitlines():
        fields = line.split()
        if len(fields) < 5 or not pids.intersection(int(p) for p in _SS_PID.findall(line)):
            continue
        local = fields[3]
        address, _, port_text = local.rpartition(":")
        if not port_text.isdigit():
            continue
        address = address.strip("[]").split("%", 1)[0]
        key = (address, int(port_text))
        if key not in seen:
            seen.add(key)
            found.append(
                Listening(host=address, port=int(port_text), line=line.strip()[:300], source="ss", quote=local)
            )
    return found
