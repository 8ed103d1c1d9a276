"""The data-plane HTTP client: sends one request, reads its stream, and returns what it measured.

One :class:`LoadClient` per load run owns one aiohttp session (unlimited pooled keep-alive connections).
:meth:`LoadClient.send` never raises for a failed request: every failure becomes a :class:`RequestRecord`
with an ``error_kind``, so a misbehaving server is counted, not fatal. Only cancellation (the run was
stopped) propagates. aiohttp and socket errors are translated here, at the boundary, into these kinds:

    connect            the connection was refused or could not be made (DNS, unreachable)
    connect_timeout    no connection within ``connect_timeout``
    http_<status>      the server answered with a status other than 200 (the body's message is kept)
    reset              the connection closed or broke before the response was complete (a pooled keep-alive
                       connection the server had already closed is not a reset: the request goes out again on
                       another connection; llama-server closes every connection after a streamed response
                       while announcing keep-alive, and aiohttp may reuse it before it sees the close)
    stall              no byte for ``idle_timeout`` seconds mid-stream
    first_token_timeout, total_timeout
    malformed          an event or body that is not the JSON the API promises
    stream_error       the server reported an error inside the stream
    truncated          the stream ended cleanly but without its end marker or a finish reason
    protocol           not valid HTTP
    client_error, internal   anything else (a bug here or in aiohttp; the message says what)

Timing: the send time is taken by an aiohttp trace hook just before the request body is written to the
connection (aiohttp on Python 3.11 writes it from a task of its own, a loop turn or, with hundreds of requests
dispatched at once, many milliseconds after the call); each piece of the body's arrival time when aiohttp's
parser hands it over, within the read that brought it (an HTTP chunk, or what one read held of it), so the
events of one piece share one time. No coroutine wakes per read: the parser feeds the SSE reader and the
decoder directly (:class:`_SinkReader`), and the reading coroutine only waits for the body's end.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from types import SimpleNamespace
from typing import Any

import aiohttp
from yarl import URL

from orchestrator.errors import LoadError
from orchestrator.load.decoders import DECODERS, Decoder, StreamFault
from orchestrator.load.records import RequestRecord
from orchestrator.load.settings import LoadSettings
from orchestrator.load.sse import SSEEvent, SSEParser
from orchestrator.load.workloads import Prompt

__all__ = ["LoadClient", "discover_model"]

_DONE_GRACE_S = 2.0  # after the end marker, how long to wait for the server to close the body cleanly
_STALE_ATTEMPTS = 16  # a request meets at most this many pooled connections the server had closed
_ERROR_BODY_LIMIT = 65536


class LoadClient:
    """Sends the requests of one load run. Use as ``async with LoadClient(settings, model) as client``."""

    def __init__(self, settings: LoadSettings, model: str | None) -> None:
        self.settings = settings
        self.model = model
        self.tokens_seen = 0  # tokens streamed so far, measured or not (live progress reads it)
        self._url = URL(settings.endpoint)  # parsed once, not per request
        self._make_decoder = DECODERS[settings.api]
        self._session: aiohttp.ClientSession | None = None
        headers = {"Content-Type": "application/json"}
        headers["Accept"] = "text/event-stream" if settings.stream else "application/json"
        if settings.api_key:
            headers["Authorization"] = f"Bearer {settings.api_key}"
        self._headers = headers

    async def __aenter__(self) -> LoadClient:
        self._session = _session(self.settings, self._headers)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def body(self, prompt: Prompt) -> bytes:
        """The request body for one prompt, in the configured API's shape, plus ``settings.extra_body`` (the
        engine-specific fields, e.g. SGLang's ``return_spec_tokens_details``) at its top level."""
        s = self.settings
        max_tokens = prompt.max_tokens or s.max_tokens
        ignore_eos = prompt.ignore_eos if prompt.ignore_eos is not None else s.ignore_eos
        body: dict[str, Any]
        if s.api in ("chat", "completions"):
            body = {"model": self.model or "", "max_tokens": max_tokens, "temperature": s.temperature}
            if s.api == "chat":
                body["messages"] = prompt.as_messages()
            else:
                body["prompt"] = prompt.as_text()
            body["stream"] = s.stream
            if s.stream:
                body["stream_options"] = {"include_usage": True, "continuous_usage_stats": s.continuous_usage}
            if ignore_eos:
                body["ignore_eos"] = True  # a vLLM/SGLang/llama.cpp extension: only sent when asked for
        elif s.api == "generate":
            params: dict[str, Any] = {"max_new_tokens": max_tokens, "temperature": s.temperature}
            if ignore_eos:
                params["ignore_eos"] = True
            body = {"text": prompt.as_text(), "sampling_params": params, "stream": s.stream}
        else:  # llamacpp
            body = {"prompt": prompt.as_text(), "n_predict": max_tokens, "temperature": s.temperature}
            body["stream"] = s.stream
            if ignore_eos:
                body["ignore_eos"] = True
        if s.extra_body:
            body.update(s.extra_body)  # engine-specific fields; the settings keep them off the client's own
        return json.dumps(body, ensure_ascii=False).encode("utf-8")

    async def send(self, index: int, prompt: Prompt, *, warmup: bool = False) -> RequestRecord:
        """Send one request and measure it; failures come back as records with an ``error_kind``."""
        session = self._session
        if session is None:
            raise LoadError("load: the client is not open (use it as an async context manager)")
        record = RequestRecord(index=index, warmup=warmup, streamed=self.settings.stream)
        decoder = self._make_decoder(record)
        data = self.body(prompt)
        s = self.settings
        loop = asyncio.get_running_loop()
        start = loop.time()
        total_deadline = start + s.total_timeout
        timeout = asyncio.timeout_at(min(start + s.first_token_timeout, total_deadline))
        record.dispatched = record.sent = time.perf_counter()  # the trace hook moves ``sent`` to the write
        try:
            async with timeout, await self._post(session, data, record) as resp:
                record.status = resp.status
                _shrink_reads(resp)
                if resp.status != 200:
                    text = await resp.content.read(_ERROR_BODY_LIMIT)
                    record.fail(f"http_{resp.status}", _http_error_text(resp.status, text))
                elif s.stream and "json" not in resp.headers.get("Content-Type", ""):
                    await self._read_stream(resp, decoder, record, timeout, total_deadline)
                else:
                    record.streamed = False
                    body = await resp.read()
                    decoder.on_body(body, time.perf_counter())
                    record.end = time.perf_counter()
        except StreamFault as fault:
            record.fail(fault.kind, str(fault))
        except aiohttp.ConnectionTimeoutError as exc:
            record.fail("connect_timeout", f"no connection within {s.connect_timeout:g} s ({exc})")
        except aiohttp.ServerTimeoutError as exc:
            record.fail("stall", f"no data for {s.idle_timeout} s mid-stream ({exc})")
        except TimeoutError:
            if decoder.done and timeout.expired():
                pass  # the end marker came but the server kept the body open: the request itself is complete
            elif timeout.expired():
                if record.first_token is None and not decoder.done:
                    record.fail("first_token_timeout", f"no token within {s.first_token_timeout:g} s")
                else:
                    record.fail("total_timeout", f"not finished within {s.total_timeout:g} s")
            else:
                record.fail("internal", "timed out (source unknown)")
        except aiohttp.ClientConnectorError as exc:
            record.fail("connect", str(exc))
        except (aiohttp.ServerDisconnectedError, aiohttp.ClientPayloadError, aiohttp.ClientOSError) as exc:
            record.fail("reset", str(exc) or type(exc).__name__)
        except aiohttp.ClientResponseError as exc:
            record.fail("protocol", str(exc))
        except aiohttp.ClientError as exc:
            record.fail("client_error", f"{type(exc).__name__}: {exc}")
        except OSError as exc:
            record.fail("connect", f"{type(exc).__name__}: {exc}")
        except Exception as exc:  # never let one request end the run; the kind makes the bug visible
            record.fail("internal", f"{type(exc).__name__}: {exc}")
        if record.end is None:
            record.end = time.perf_counter()
        decoder.finish()
        if record.ok and record.output_tokens == 0 and record.finish_reason is None:
            record.fail("truncated", "the response carried no tokens and no finish reason")
        return record

    async def _post(self, session: aiohttp.ClientSession, data: bytes, record: RequestRecord) -> aiohttp.ClientResponse:
        """POST the request and return the response once its headers arrived.

        A pooled connection can be one the server has closed without aiohttp having noticed yet; the request
        then fails before any response with nothing processed, so it goes out again on another connection.
        A fresh connection failing is the server's answer, and raises.
        """
        for _ in range(_STALE_ATTEMPTS - 1):
            attempt = _Attempt(record)
            try:
                return await session.post(self._url, data=data, trace_request_ctx=attempt)
            except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError):
                if not attempt.reused:
                    raise
                record.sent = record.dispatched  # the next write is the send
        return await session.post(self._url, data=data, trace_request_ctx=_Attempt(record))

    async def _read_stream(
        self,
        resp: aiohttp.ClientResponse,
        decoder: Decoder,
        record: RequestRecord,
        timeout: asyncio.Timeout,
        total_deadline: float,
    ) -> None:
        sink = _Sink(self, decoder, record, timeout, total_deadline)
        content = resp.content
        if type(content) is aiohttp.StreamReader and _SinkReader.fits:
            # The body goes straight from aiohttp's parser into the sink, as it arrives (see _SinkReader).
            pending = content.read_nowait()  # what came with the headers (raises if the connection broke)
            _SINKS[content] = sink
            content.__class__ = _SinkReader
            try:
                if pending:
                    content.feed_data(pending)
                if sink.error is None and not content.is_eof():
                    await content.wait_eof()
            finally:
                content.__class__ = aiohttp.StreamReader
                _SINKS.pop(content, None)
        else:  # another StreamReader than the one this aiohttp makes: read it the ordinary way
            async for chunk in content.iter_any():
                sink.feed(chunk)
                if sink.error is not None:
                    break
        if sink.error is not None:
            raise sink.error
        sink.close()


class _Sink:
    """Reads one streamed response as its bytes arrive: SSE framing, the decoder, the first-token and
    end-of-stream bookkeeping. Every piece of the body is stamped with ``time.perf_counter()`` when it comes out
    of the HTTP parser (an HTTP chunk, or what one read brought of it); its events share that time."""

    __slots__ = ("client", "decoder", "error", "first", "on_event", "parser", "record", "timeout", "total_deadline")

    def __init__(
        self,
        client: LoadClient,
        decoder: Decoder,
        record: RequestRecord,
        timeout: asyncio.Timeout,
        total_deadline: float,
    ) -> None:
        self.client = client
        self.decoder = decoder
        self.on_event = decoder.on_event
        self.record = record
        self.timeout = timeout
        self.total_deadline = total_deadline
        self.parser = SSEParser()
        self.first = False
        self.error: BaseException | None = None  # what ended the stream early (raised by the reading coroutine)

    def feed(self, data: bytes) -> None:
        """Take the next piece of the body (the general way; :meth:`_SinkReader.feed_data` has a faster one)."""
        if self.error is None and data:
            try:
                self.events(self.parser.feed(data), _perf())
            except Exception as exc:  # a StreamFault, or a bug: either way it ends this request, not the run
                self.error = exc

    def events(self, events: list[SSEEvent], now: float) -> None:
        # The events of one piece share its time: first token, progress and end marker are settled once.
        decoder = self.decoder
        on_event = self.on_event
        tokens = 0
        for event_type, payload in events:
            if event_type is None or event_type == "message":
                tokens += on_event(payload, now)
            elif event_type == "error":
                decoder.on_error_event(payload)
        self.settle(tokens, now)

    def data(self, payloads: list[bytes], now: float) -> None:
        """:meth:`events` for a piece of plain ``data:`` events (:meth:`SSEParser.data_only`)."""
        on_event = self.on_event
        tokens = 0
        for payload in payloads:
            tokens += on_event(payload, now)
        self.settle(tokens, now)

    def settle(self, tokens: int, now: float) -> None:
        if tokens:
            self.client.tokens_seen += tokens
            if not self.first:
                self.first_token(now)
        if self.decoder.done and self.record.end is None:
            self.ended(now)

    def first_token(self, now: float) -> None:
        self.first = True
        self.record.first_token = now  # provisional; finish() settles it
        self.timeout.reschedule(self.total_deadline)

    def ended(self, now: float) -> None:
        """The end marker came: wait a moment for the body to end, so the connection stays reusable."""
        self.record.end = now
        grace = asyncio.get_running_loop().time() + _DONE_GRACE_S
        self.timeout.reschedule(min(self.total_deadline, grace))

    def close(self) -> None:
        """The body ended: the events left without a closing blank line, then the end-of-stream checks."""
        now = _perf()
        decoder = self.decoder
        for event_type, data in self.parser.close():
            if event_type == "error":
                decoder.on_error_event(data)
            elif event_type is None or event_type == "message":
                self.client.tokens_seen += self.on_event(data, now)
        if not decoder.done:
            self.record.end = now
            if self.record.finish_reason is None:
                raise StreamFault("truncated", "the stream ended without an end marker or a finish reason")


_perf = time.perf_counter
_SINKS: dict[aiohttp.StreamReader, _Sink] = {}


class _SinkReader(aiohttp.StreamReader):
    """aiohttp's body reader, turned into a pipe to a :class:`_Sink` for the length of one response.

    aiohttp's HTTP parser hands every piece of a body to its ``StreamReader`` (``feed_data``, between
    ``begin_http_chunk_receiving`` and ``end_http_chunk_receiving`` for each HTTP chunk), which buffers it and
    wakes the coroutine reading it; the coroutine then takes it out again. For a token stream that is a
    buffer, a future and a task switch per read, more than the parsing itself. While a response streams, its
    reader's class is this one (the same object layout, so ``__class__`` can be switched and switched back):
    pieces go to the sink as the parser produces them, and the coroutine sleeps in ``wait_eof()`` until the
    body ends (``feed_eof``, which also hands the connection back to the pool), the connection fails
    (``set_exception``) or the sink fails (it sets the exception itself). Everything else is aiohttp's own.
    """

    __slots__ = ()
    fits = all(hasattr(aiohttp.StreamReader, name) for name in ("feed_data", "wait_eof", "read_nowait", "is_eof"))

    def feed_data(self, data: bytes, size: int = 0) -> bool:
        # Once per HTTP chunk, i.e. once per token from a real engine: _Sink.feed, with a fast path for a chunk
        # that is exactly one "data: ...\n\n" event (what the SSE parser would make of it: sse.single_event)
        # and one for a chunk of several such events (SSEParser.data_only).
        sink = _SINKS.get(self)
        if sink is None or sink.error is not None or not data:
            return False
        now = _perf()
        try:
            if (
                sink.parser.clean
                and data.endswith(b"\n\n")
                and data.startswith(b"data: ")
                and data.find(b"\n") == len(data) - 2
                and data.find(b"\r") < 0
            ):
                n = sink.on_event(data[6:-2], now)
                if n:
                    sink.client.tokens_seen += n
                    if not sink.first:
                        sink.first_token(now)
                if sink.decoder.done and sink.record.end is None:
                    sink.ended(now)
            else:
                payloads = sink.parser.data_only(data)
                if payloads is not None:
                    sink.data(payloads, now)
                else:
                    sink.events(sink.parser.feed(data), now)
        except Exception as exc:  # a StreamFault, or a bug: either way it ends this request, not the run
            sink.error = exc
            if self.exception() is None:
                self.set_exception(exc)  # wakes wait_eof() with it
        return False

    # HTTP chunk boundaries are for readchunk(), which nobody calls here. The parser calls these two around
    # every HTTP chunk: a C builtin that takes no argument, stored as a static method, does nothing without a
    # Python frame.
    begin_http_chunk_receiving = end_http_chunk_receiving = staticmethod(bool)  # type: ignore[assignment]


async def discover_model(settings: LoadSettings) -> str:
    """The first model id the server lists at ``GET /v1/models``; raises ``LoadError`` if there is none."""
    url = settings.base_url + "/v1/models"
    headers = {"Authorization": f"Bearer {settings.api_key}"} if settings.api_key else {}
    timeout = aiohttp.ClientTimeout(total=settings.connect_timeout + 30, sock_connect=settings.connect_timeout)
    try:
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.get(url, headers=headers) as resp,
        ):
            text = await resp.text()
            if resp.status != 200:
                raise LoadError(f"load: GET {url} answered {resp.status}: {text[:200]}")
            payload = json.loads(text)
            return str(payload["data"][0]["id"])
    except LoadError:
        raise
    except (aiohttp.ClientError, OSError, TimeoutError) as exc:
        raise LoadError(f"load: cannot ask {url} for the model name: {exc or type(exc).__name__}") from exc
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise LoadError(f"load: {url} did not list a model; pass the model name explicitly") from exc


def _session(settings: LoadSettings, headers: dict[str, str]) -> aiohttp.ClientSession:
    connector = aiohttp.TCPConnector(limit=0, ttl_dns_cache=300, keepalive_timeout=60)
    timeout = aiohttp.ClientTimeout(
        total=None,
        sock_connect=settings.connect_timeout,
        sock_read=settings.idle_timeout,
    )
    tracing = aiohttp.TraceConfig()
    tracing.on_request_chunk_sent.append(_stamp_sent)
    tracing.on_connection_reuseconn.append(_mark_reused)
    return aiohttp.ClientSession(
        connector=connector,
        timeout=timeout,
        headers=headers,
        read_bufsize=1 << 18,
        trace_configs=[tracing],
    )


class _Attempt:
    """One try at sending a request (the trace hooks' context): its record, and whether aiohttp gave it a pooled
    connection."""

    __slots__ = ("record", "reused")

    def __init__(self, record: RequestRecord) -> None:
        self.record = record
        self.reused = False


async def _stamp_sent(
    session: aiohttp.ClientSession, context: SimpleNamespace, params: aiohttp.TraceRequestChunkSentParams
) -> None:
    """Called by aiohttp just before it writes the request body: that is when the request is sent."""
    attempt = context.trace_request_ctx
    if isinstance(attempt, _Attempt) and attempt.record.sent == attempt.record.dispatched:
        attempt.record.sent = time.perf_counter()


async def _mark_reused(
    session: aiohttp.ClientSession, context: SimpleNamespace, params: aiohttp.TraceConnectionReuseconnParams
) -> None:
    attempt = context.trace_request_ctx
    if isinstance(attempt, _Attempt):
        attempt.reused = True


_READ_SIZE = 64 * 1024


def _shrink_reads(resp: aiohttp.ClientResponse) -> None:
    """Read at most 64 KiB per socket read instead of asyncio's 256 KiB.

    CPython allocates the whole read size for every ``recv`` before trimming it; above glibc's mmap threshold
    that is an mmap and a munmap per read, about 15 µs each time here. Streams that trickle one event per read
    (every real engine at C=512) pay it per token: it was a quarter of the client's CPU.
    """
    connection = resp.connection
    transport = connection.transport if connection is not None else None
    if transport is not None and getattr(transport, "max_size", 0) > _READ_SIZE:
        with contextlib.suppress(AttributeError, TypeError):  # another event loop's transport: leave it
            transport.max_size = _READ_SIZE  # type: ignore[attr-defined]


def _http_error_text(status: int, body: bytes) -> str:
    text = body.decode("utf-8", "replace").strip()
    try:
        payload = json.loads(text)
    except ValueError:
        return f"HTTP {status}: {text[:200]}" if text else f"HTTP {status}"
    if isinstance(payload, dict):
        error = payload.get("error", payload)
        if isinstance(error, dict):
            error = error.get("message") or error.get("detail") or text[:200]
        return f"HTTP {status}: {error}"
    return f"HTTP {status}: {text[:200]}"
