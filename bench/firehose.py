"""A firehose for measuring load clients: a minimal OpenAI chat server that streams as fast as it can write.

The simulator's ``firehose`` profile (``python -m orchestrator.sim --profile firehose``) is a whole simulated
engine, and its own cost per token (about 4 µs) is as large as a fast client's, so against it a client is
half measured and half waiting. This server does nothing but write: every response is rendered once per shape,
in the simulator's SGLang dialect byte for byte (``chat.completion.chunk`` with ``reasoning_content``,
``logprobs``, ``matched_stop``; a role chunk first, a finish chunk, the usage chunk when
``stream_options.include_usage`` asks for it, usage in every chunk when ``continuous_usage_stats`` asks for
it, as SGLang and vLLM do, unless ``--continuous-usage ignore``, then ``[DONE]``), and one pump writes the
next HTTP chunk of every open stream in turn, then lets the event loop read and accept.

``--events-per-write N`` sets how many SSE events go into one HTTP chunk, written with one ``send``:

- ``1``: every token its own chunk and its own write, as a real engine's HTTP server writes them (at the
  rates real engines stream, a client then reads one token per read; a client that cannot keep up finds
  several chunks waiting, each still framed on its own);
- ``16`` (the default): sixteen tokens per write, like the simulator's firehose (16 decode steps per yield).

``--chunks-per-send K`` puts K such HTTP chunks into one write (one ``send``): with ``--events-per-write 1``,
every token is still its own HTTP chunk, framed as a real engine frames it, but the server's cost per token
(its Python and a system call per write, about 4 µs here) falls K-fold, so that a fast client reading one
token per chunk is not held back by the server (it then finds K chunks or more per read).

``--writes-per-turn W`` gives each open stream W writes per turn of the pump instead of one, each its own
``transport.write`` (so, on asyncio's own loop, its own ``send``: with ``--events-per-write 1`` every token is
its own HTTP chunk in its own TCP segment, W of them per stream before the next stream's). This is the pattern
of the simplest asyncio-protocol server that pre-encodes its chunks and writes a batch of them per loop turn
(bench/load_capacity.py's mode ``outside``). uvloop would not keep it: it gathers a turn's writes to one
socket into one ``writev`` at the end of the loop iteration, which makes W writes the same bytes on the wire as
``--chunks-per-send W``; so run it without ``--uvloop``.

``--dialect vllm`` renders plain OpenAI chunks as vLLM writes them (``delta`` with ``content`` only,
``logprobs`` and ``finish_reason``; about half the bytes of the SGLang dialect) instead of the simulator's
SGLang dialect.

``--itl-ms T`` paces it: every T ms each open stream gets its next chunk (no faster than that, never in a
burst to catch up). With one event per write and a client that keeps up, every read then brings one token,
as from a real engine; what the client costs per token there is what it costs against real engines.

The server counts what it streams: ``GET /stats`` returns ``tokens`` (completion tokens of the responses
written to their end), ``taken_tokens`` (of responses the client has read: see :class:`Stats`), ``requests``,
``writes``, ``written`` (completion tokens in the writes so far) with its ``timeline`` (``[time, written]``
pairs, ``time.perf_counter()`` about every 20 ms while the server writes: the machine's monotonic clock, which
a bench reads too), ``busy_s`` (the time the client had a response to read) and the requests' busy ``spans``;
``POST /reset`` zeroes them. Tokens/s as the server
counts them is ``taken_tokens / busy_s``, so the time a client spends starting up (importing torch) does not
count, and every client is timed by the same clock.
``--reuse-port`` lets several of these processes listen on one port (``SO_REUSEPORT``: the kernel spreads new
connections over them), so that one URL reaches several servers; each also listens on a port of its own
(``--control-port``, printed at start) for its ``/stats``.

    .venv/bin/python bench/firehose.py --port 30100 [--events-per-write 1] [--chunks-per-send 8] [--reuse-port]

Loopback only: it binds 127.0.0.1. Used by bench/load_capacity.py and bench/load_workers.py.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import re
import signal
import socket
import sys
import time
import uuid

_WORDS = [b" make", b" silk", b" sound", b" letter", b" river", b" stone", b" light", b" garden"]
_CONTENT_LENGTH = re.compile(rb"\r\ncontent-length:[ \t]*(\d+)[ \t]*\r\n", re.IGNORECASE)
_HEAD_STREAM = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
    b"Transfer-Encoding: chunked\r\n\r\n"
)


class Stats:
    """What the server streamed since the last ``/reset``.

    A response is *taken* once the client asks for its next request on the same connection (or closes a
    connection that carried only that request): a closed-loop client only does that after reading the whole
    response, so taken tokens are tokens the client has read, whatever the kernel's socket buffers held (the
    server writes faster than any client reads, so "written" runs up to one response per connection ahead of
    the client). A request is busy from its arrival until it is taken; one never taken (the last on each
    kept-alive connection) counts neither its tokens nor its time past the end of its writing. ``busy_s`` is the
    length of the union of those spans: the time in which the client had a request to read, without the gaps
    (a client's start-up, a pause between its test request and its run, its reckoning after it). So
    ``taken_tokens / busy_s`` is the rate at which the client read.
    """

    __slots__ = ("requests", "spans", "taken_tokens", "timeline", "tokens", "writes", "written")

    def __init__(self) -> None:
        self.tokens = 0  # completion tokens of the responses written to their end
        self.taken_tokens = 0
        self.requests = 0
        self.writes = 0
        self.written = 0  # completion tokens in the writes so far (each write's own, as it goes out)
        self.timeline: list[tuple[float, int]] = []  # (perf_counter, written), every TIMELINE_S or so while busy
        self.spans: list[list[float]] = []  # [arrival, end] per request; end is None until written, then grows

    def arrived(self) -> list[float]:
        self.requests += 1
        span = [time.perf_counter(), math.inf]
        self.spans.append(span)
        return span

    def taken(self, span: list[float], tokens: int) -> None:
        self.taken_tokens += tokens
        span[1] = time.perf_counter()

    def to_dict(self) -> dict[str, object]:
        now = time.perf_counter()
        spans = [(a, min(b, now)) for a, b in self.spans]
        return {
            "tokens": self.tokens,
            "taken_tokens": self.taken_tokens,
            "requests": self.requests,
            "writes": self.writes,
            "written": self.written,
            "timeline": [*self.timeline, (now, self.written)],
            "busy_s": union_length(spans),
            "spans": spans,
        }


def union_length(spans: list[tuple[float, float]]) -> float:
    """The length of the union of the intervals ``spans``."""
    total = 0.0
    start = end = -math.inf
    for a, b in sorted(spans):
        if a > end:
            total += end - start if end > start else 0.0
            start, end = a, b
        else:
            end = max(end, b)
    return total + (end - start if end > start else 0.0)


_RENDERED: dict[tuple[int, int, bool, bool, bytes, int, str], tuple[bytes, list[int], list[int]]] = {}
TIMELINE_S = 0.02  # how often, at most, the pump notes (time, tokens written) in Stats.timeline


def render_stream(
    body: dict,
    per_write: int,
    model: bytes,
    continuous_usage: bool = True,
    chunks_per_send: int = 1,
    dialect: str = "sglang",
) -> tuple[bytes, list[int], list[int], int]:
    """The whole chunked response body of one streamed chat request: (bytes, write boundaries, the tokens
    written before each boundary, tokens).

    ``per_write`` events go into each HTTP chunk, ``chunks_per_send`` HTTP chunks into each write (the
    boundaries are those of the writes). Rendered once per shape (tokens, usage options): every response of a
    shape is the same bytes, its id included (no client looks at it; the server's cost per request stays a few
    microseconds)."""
    n = body.get("max_completion_tokens") or body.get("max_tokens") or 16
    n = max(1, min(int(n), 1_000_000))
    options = body.get("stream_options") or {}
    include_usage = bool(options.get("include_usage"))
    continuous = continuous_usage and include_usage and bool(options.get("continuous_usage_stats"))
    key = (n, per_write, include_usage, continuous, model, chunks_per_send, dialect)
    if key not in _RENDERED:
        data, bounds = _render(n, per_write, include_usage, continuous, model, dialect)
        # Write j carries HTTP chunk j (its tokens: per_write, the last one the rest), the headers riding with
        # the first and the tail with the last.
        cum = [min(j * per_write, n) for j in range(len(bounds))]
        if chunks_per_send > 1:
            bounds = [*bounds[:-1:chunks_per_send], bounds[-1]]
            cum = [*cum[:-1:chunks_per_send], cum[-1]]
        _RENDERED[key] = data, bounds, cum
    data, bounds, cum = _RENDERED[key]
    return data, bounds, cum, n


def _render(
    n: int, per_write: int, include_usage: bool, continuous: bool, model: bytes, dialect: str = "sglang"
) -> tuple[bytes, list[int]]:
    prompt_tokens = 7
    rid = uuid.uuid4().hex.encode()
    if dialect == "vllm":
        rid = b"chatcmpl-" + rid
    head = b'data: {"id":"' + rid + b'","object":"chat.completion.chunk","created":%d,"model":"' % int(time.time())
    head += model + b'","choices":['

    def usage(completion: int) -> bytes:
        if dialect == "vllm":
            return b'"usage":{"prompt_tokens":%d,"total_tokens":%d,"completion_tokens":%d}' % (
                prompt_tokens,
                prompt_tokens + completion,
                completion,
            )
        return (
            b'"usage":{"prompt_tokens":%d,"total_tokens":%d,"completion_tokens":%d,"prompt_tokens_details":null,'
            b'"reasoning_tokens":0,"completion_tokens_details":null}'
            % (prompt_tokens, prompt_tokens + completion, completion)
        )

    def event(choice: bytes, completion: int | None) -> bytes:
        tail = b"]" if completion is None else b"]," + usage(completion)
        return head + choice + tail + b"}\n\n"

    if dialect == "vllm":  # vLLM's OpenAI chat chunks: the delta, logprobs and finish_reason, nothing else
        role = b'{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}'
        token_head, token_tail = b'{"index":0,"delta":{"content":"', b'"},"logprobs":null,"finish_reason":null}'
        finish = b'{"index":0,"delta":{"content":""},"logprobs":null,"finish_reason":"length","stop_reason":null}'
    else:
        role = (
            b'{"index":0,"delta":{"reasoning_content":null,"role":"assistant","content":""},'
            b'"logprobs":null,"finish_reason":null,"matched_stop":null}'
        )
        token_head = b'{"index":0,"delta":{"reasoning_content":null,"content":"'
        token_tail = b'"},"logprobs":null,"finish_reason":null,"matched_stop":null}'
        finish = (
            b'{"index":0,"delta":{"reasoning_content":null},"logprobs":null,"finish_reason":"length",'
            b'"matched_stop":null}'
        )
    events = [event(role, 0 if continuous else None)]
    for k in range(n):
        choice = token_head + _WORDS[k % len(_WORDS)] + token_tail
        events.append(event(choice, k + 1 if continuous else None))
    events.append(event(finish, n if continuous else None))
    if include_usage:
        events.append(head + b"]," + usage(n) + b"}\n\n")
    events.append(b"data: [DONE]\n\n")
    # The token events go per_write to a chunk; the role chunk rides with the first, the tail with the last.
    groups: list[bytes] = []
    tokens = events[1 : 1 + n]
    for i in range(0, n, per_write):
        groups.append(b"".join(tokens[i : i + per_write]))
    groups[0] = events[0] + groups[0]
    groups[-1] = groups[-1] + b"".join(events[1 + n :])
    out = bytearray(_HEAD_STREAM)
    bounds = [0]
    for group in groups:
        out += b"%x\r\n" % len(group) + group + b"\r\n"
        bounds.append(len(out))
    out += b"0\r\n\r\n"
    bounds[-1] = len(out)
    return bytes(out), bounds


def render_whole(body: dict, model: bytes) -> tuple[bytes, int]:
    n = max(1, int(body.get("max_completion_tokens") or body.get("max_tokens") or 16))
    text = "".join(_WORDS[k % len(_WORDS)].decode() for k in range(n))
    payload = json.dumps(
        {
            "id": uuid.uuid4().hex,
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model.decode(),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text, "reasoning_content": None},
                    "logprobs": None,
                    "finish_reason": "length",
                    "matched_stop": None,
                }
            ],
            "usage": {"prompt_tokens": 7, "total_tokens": 7 + n, "completion_tokens": n},
        }
    ).encode()
    return _json_response(payload), n


def _json_response(payload: bytes, status: bytes = b"200 OK") -> bytes:
    return (
        b"HTTP/1.1 " + status + b"\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(payload)
        + payload
    )  # fmt: skip


class Stream:
    __slots__ = ("bounds", "conn", "cum", "data", "next", "tokens")

    def __init__(self, conn: Connection, data: bytes, bounds: list[int], cum: list[int], tokens: int) -> None:
        self.conn = conn
        self.data = memoryview(data)
        self.bounds = bounds
        self.cum = cum
        self.next = 0
        self.tokens = tokens


class Server:
    def __init__(
        self,
        per_write: int,
        model: str,
        itl_s: float = 0.0,
        continuous_usage: bool = True,
        chunks_per_send: int = 1,
        writes_per_turn: int = 1,
        dialect: str = "sglang",
    ) -> None:
        self.per_write = per_write
        self.chunks_per_send = chunks_per_send
        self.writes_per_turn = writes_per_turn
        self.dialect = dialect
        self.itl_s = itl_s
        self.continuous_usage = continuous_usage
        self.model = model.encode()
        self.stats = Stats()
        self.streams: list[Stream] = []
        self._wake: asyncio.Future[None] | None = None

    def start_stream(self, stream: Stream) -> None:
        self.streams.append(stream)
        self.wake()

    def wake(self) -> None:
        """Something can be written again (a new stream, a connection whose buffer drained)."""
        if self._wake is not None and not self._wake.done():
            self._wake.set_result(None)

    async def pump(self) -> None:
        """Write the next chunk (``writes_per_turn`` chunks, each its own write) of every open stream, in turn;
        then let the loop read, accept and write. When no
        stream could take a write (none open, or every one's socket buffer full), sleep until one can: a server
        that spun through paused streams would take the CPU its clients share with it."""
        loop = asyncio.get_running_loop()
        tick = loop.time()
        noted = 0.0
        turn = range(self.writes_per_turn)
        while True:
            stats = self.stats  # /reset replaces it
            if not self.streams:
                await self._idle(loop)
                tick = loop.time()
            keep: list[Stream] = []
            wrote = False
            for s in self.streams:
                conn = s.conn
                if conn.closed:
                    continue
                if conn.paused:
                    keep.append(s)
                    continue
                wrote = True
                last = len(s.bounds) - 1
                write = conn.transport.write
                for _ in turn:
                    i = s.next
                    write(s.data[s.bounds[i] : s.bounds[i + 1]])
                    stats.writes += 1
                    stats.written += s.cum[i + 1] - s.cum[i]
                    s.next = i + 1
                    if s.next >= last:
                        break
                if s.next >= last:
                    stats.tokens += s.tokens
                    conn.stream = None
                    conn.untaken = s.tokens
                    if conn.span is not None:
                        conn.span[1] = time.perf_counter()  # written; it grows when it is taken
                    conn.more()
                else:
                    keep.append(s)
            self.streams = keep
            now = time.perf_counter()
            if now - noted >= TIMELINE_S:
                noted = now
                stats.timeline.append((now, stats.written))
            if self.itl_s > 0:
                # Paced: one chunk per stream per tick; a late tick is not made up for with a burst.
                tick = max(tick + self.itl_s, loop.time())
                await asyncio.sleep(tick - loop.time())
            elif wrote or not self.streams:
                await asyncio.sleep(0)
            else:
                await self._idle(loop)  # every open stream is paused: wait for one to drain

    async def _idle(self, loop: asyncio.AbstractEventLoop) -> None:
        self._wake = loop.create_future()
        await self._wake
        self._wake = None


class Connection(asyncio.Protocol):
    def __init__(self, server: Server) -> None:
        self.server = server
        self.buffer = b""
        self.transport: asyncio.Transport
        self.paused = False
        self.closed = False
        self.stream: Stream | None = None
        self.untaken = 0  # tokens of the last response, until the next request shows the client read it
        self.served = 0
        self.span: list[float] | None = None  # the last request's busy span (Stats)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.server.wake()
        if self.untaken and self.served == 1 and self.span is not None:
            # A connection per request: closing it says the client read it.
            self.server.stats.taken(self.span, self.untaken)

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        self.server.wake()

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        self.more()

    def more(self) -> None:
        """Handle the next complete request in the buffer, unless a stream is still being written."""
        while self.stream is None and not self.closed:
            buffer = self.buffer
            end = buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            line_end = buffer.find(b"\r\n")
            method, _, rest = buffer[:line_end].partition(b" ")
            path = rest.partition(b" ")[0].partition(b"?")[0]
            match = _CONTENT_LENGTH.search(buffer, line_end, end + 2)
            length = int(match.group(1)) if match else 0
            if len(buffer) < end + 4 + length:
                return
            raw = buffer[end + 4 : end + 4 + length]
            self.buffer = buffer[end + 4 + length :]
            self.handle(method.decode("latin-1"), path.decode("latin-1"), raw)

    def handle(self, method: str, path: str, raw: bytes) -> None:
        server = self.server
        stats = server.stats
        if path == "/v1/chat/completions" and method == "POST":
            if self.untaken and self.span is not None:
                stats.taken(self.span, self.untaken)
            self.untaken = 0
            self.served += 1
            self.span = stats.arrived()
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                self.transport.write(_json_response(b'{"error":"bad json"}', b"400 Bad Request"))
                return
            if body.get("stream"):
                data, bounds, cum, tokens = render_stream(
                    body,
                    server.per_write,
                    server.model,
                    server.continuous_usage,
                    server.chunks_per_send,
                    server.dialect,
                )
                self.stream = Stream(self, data, bounds, cum, tokens)
                server.start_stream(self.stream)
            else:
                response, tokens = render_whole(body, server.model)
                stats.tokens += tokens
                self.untaken = tokens
                self.span[1] = time.perf_counter()
                self.transport.write(response)
        elif path == "/v1/models":
            models = {
                "object": "list",
                "data": [{"id": server.model.decode(), "object": "model", "owned_by": "sglang"}],
            }
            self.transport.write(_json_response(json.dumps(models).encode()))
        elif path == "/stats":
            self.transport.write(_json_response(json.dumps(stats.to_dict()).encode()))
        elif path == "/reset" and method == "POST":
            server.stats = Stats()
            self.transport.write(_json_response(b"{}"))
        elif path in ("/health", "/health_generate"):
            self.transport.write(_json_response(b"{}"))
        else:
            self.transport.write(_json_response(b'{"error":"not found"}', b"404 Not Found"))


async def serve(args: argparse.Namespace) -> None:
    server = Server(
        args.events_per_write,
        args.model,
        args.itl_ms / 1000,
        args.continuous_usage == "honour",
        args.chunks_per_send,
        args.writes_per_turn,
        args.dialect,
    )
    loop = asyncio.get_running_loop()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if args.reuse_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind(("127.0.0.1", args.port))
    listeners = [await loop.create_server(lambda: Connection(server), sock=sock, backlog=4096)]
    # Its own port as well, for /stats and /reset of this process when several share --port.
    control = await loop.create_server(lambda: Connection(server), "127.0.0.1", args.control_port)
    listeners.append(control)
    port = sock.getsockname()[1]
    control_port = control.sockets[0].getsockname()[1]
    print(f"firehose on http://127.0.0.1:{port} control http://127.0.0.1:{control_port} pid {os.getpid()}", flush=True)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    pump = asyncio.create_task(server.pump())
    await stop.wait()
    pump.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await pump
    for listener in listeners:
        listener.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--events-per-write", type=int, default=16)
    parser.add_argument(
        "--chunks-per-send", type=int, default=1, help="HTTP chunks (each of --events-per-write events) per write"
    )
    parser.add_argument(
        "--writes-per-turn", type=int, default=1, help="writes (each its own transport.write) per stream per turn"
    )
    parser.add_argument("--dialect", choices=("sglang", "vllm"), default="sglang", help="the chunks' JSON")
    parser.add_argument("--model", default="sim")
    parser.add_argument("--itl-ms", type=float, default=0.0, help="pace: one chunk per stream every ITL ms")
    parser.add_argument(
        "--continuous-usage",
        choices=("honour", "ignore"),
        default="honour",
        help="usage in every chunk when stream_options.continuous_usage_stats asks (SGLang, vLLM), or never",
    )
    parser.add_argument("--reuse-port", action="store_true", help="share --port with other processes")
    parser.add_argument("--control-port", type=int, default=0, help="this process's own port (0: any)")
    parser.add_argument("--uvloop", action="store_true", help="run on uvloop (when it is installed)")
    args = parser.parse_args()
    if args.events_per_write < 1 or args.chunks_per_send < 1 or args.writes_per_turn < 1:
        parser.error("--events-per-write, --chunks-per-send and --writes-per-turn must be at least 1")
    if args.uvloop:
        import uvloop

        uvloop.install()
    asyncio.run(serve(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
