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

Timing: the send time is taken just before the request body is written to the connection, as aiohttp's
``write_bytes`` begins (aiohttp on Python 3.11 writes it from a task of its own, a loop turn or, with hundreds
of requests dispatched at once, many milliseconds after the call); each read of a streamed response by when the
kernel received its last segment (Linux: ``SO_TIMESTAMPNS``, orchestrator/load/pipe.py ``_KernelReads``; else when
the event loop hands it over), before aiohttp's HTTP parser sees it, so that the events one read completes share its
time, and another process holding the client's core does not move it. No coroutine
wakes per read: while a response streams, the connection's protocol is a :class:`_Pipe` that gives each read
to aiohttp's parser and the body it yields to the SSE reader and the decoder, and the reading coroutine only
waits for the body's end.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import time
import weakref
from typing import Any

import aiohttp
from yarl import URL

from orchestrator.errors import LoadError
from orchestrator.load.decoders import DECODERS, Decoder, StreamFault
from orchestrator.load.httptext import _http_error_text, _is_page, _page_text
from orchestrator.load.pipe import _piece_reader, _PieceReader, _pieces_waiting, _Pipe  # noqa: F401  (tests read them here)
from orchestrator.load.records import RequestRecord
from orchestrator.load.settings import LoadSettings
from orchestrator.load.sse import SSEEvent, SSEParser, single_event
from orchestrator.load.workloads import Prompt, sent_max_tokens

__all__ = ["LoadClient", "discover_model"]

_DONE_GRACE_S = 2.0  # after the end marker, how long to wait for the server to close the body cleanly
#: After a finish reason, how long to wait for the end marker (and the usage chunk an engine sends after the
#: finish reason's chunk) before the request is taken as complete without it (:meth:`_Sink.settle`).
_NO_DONE_GRACE_S = 0.5
_STALE_ATTEMPTS = 16  # a request meets at most this many pooled connections the server had closed
_ERROR_BODY_LIMIT = 65536
#: The most of a non-streamed answer read (its deadline is the request's first-token one): far above any
#: completion's JSON, and an endless body from a hostile server stops here, not at the controller's memory.
_BODY_LIMIT = 64 * 1024 * 1024


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
        max_tokens = sent_max_tokens(prompt, s.max_tokens, s.prompt_max_tokens)
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
        s = self.settings
        sent = sent_max_tokens(prompt, s.max_tokens, s.prompt_max_tokens)  # what body() puts in the request
        record, data = RequestRecord(index=index, warmup=warmup, streamed=s.stream, max_tokens=sent), self.body(prompt)
        decoder = self._make_decoder(record)
        loop = asyncio.get_running_loop()
        start = loop.time()
        total_deadline = start + s.total_timeout
        timeout = asyncio.timeout_at(min(start + s.first_token_timeout, total_deadline))
        # The stream's reader exists before the request goes out: a _Pipe can take the body over in the very read
        # that brings the response's headers (see _Request.send).
        sink = _Sink(self, decoder, record, timeout, total_deadline) if s.stream else None
        record.dispatched = record.sent = time.perf_counter()  # _Request moves ``sent`` to the body's write
        try:
            async with timeout, await self._post(session, data, record, sink) as resp:
                record.status = resp.status
                _shrink_reads(resp.connection.transport if resp.connection is not None else None)
                if resp.status != 200:
                    text = await resp.content.read(_ERROR_BODY_LIMIT)
                    record.fail(f"http_{resp.status}", _http_error_text(resp.status, text))
                elif _is_page(resp.headers.get("Content-Type", "")):
                    # A login page or a proxy's error page with status 200: no stream that ended early, not an
                    # answer at all (issue 40: it was reported "truncated").
                    text = await resp.content.read(_ERROR_BODY_LIMIT)
                    record.fail("malformed", _page_text(resp.headers.get("Content-Type", ""), text))
                elif sink is not None and "json" not in resp.headers.get("Content-Type", ""):
                    await self._read_stream(resp, sink)
                else:
                    record.streamed = False
                    body = await _read_capped(resp, _BODY_LIMIT)
                    if body is None:
                        record.fail("too_large", f"the answer is larger than {_BODY_LIMIT} bytes (not read further)")
                    else:
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
            elif sink is not None and sink.finished is not None and timeout.expired():
                record.end = sink.finished  # the finish reason came, the end marker never did
                record.note = (
                    f"no [DONE]: the stream sent its finish reason ({record.finish_reason}) but no end marker and "
                    f"kept the connection open; taken as complete {_NO_DONE_GRACE_S:g} s after its last event"
                )
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
        # The live count is settled to the request's tokens: a speculative stream's chunk carries several tokens
        # that only the final usage counts, and a body read whole was not counted at all.
        self.tokens_seen += (record.output_tokens or 0) - (sink.counted if sink is not None else 0)
        if record.ok and record.output_tokens == 0 and record.finish_reason is None:
            record.fail("truncated", "the response carried no tokens and no finish reason")
        return record

    async def _post(
        self, session: aiohttp.ClientSession, data: bytes, record: RequestRecord, sink: _Sink | None
    ) -> aiohttp.ClientResponse:
        """POST the request and return the response once its headers arrived.

        A pooled connection can be one the server has closed without aiohttp having noticed yet; the request
        then fails before any response with nothing processed, so it goes out again on another connection.
        A fresh connection failing is the server's answer, and raises.
        """
        for _ in range(_STALE_ATTEMPTS - 1):
            attempt = _Attempt(record, sink)
            token = _ATTEMPT.set(attempt)
            try:
                return await session.post(self._url, data=data)
            except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError):
                if not attempt.reused:
                    raise
                record.sent = record.dispatched  # the next write is the send
            finally:
                _ATTEMPT.reset(token)
        token = _ATTEMPT.set(_Attempt(record, sink))
        try:
            return await session.post(self._url, data=data)
        finally:
            _ATTEMPT.reset(token)

    async def _read_stream(self, resp: aiohttp.ClientResponse, sink: _Sink) -> None:
        content = resp.content
        pipe = sink.pipe
        if pipe is None or pipe.reader is not content:
            connection = resp.connection
            handler = connection.protocol if connection is not None else None
            pipe = None
            if (
                type(content) is aiohttp.StreamReader
                and _Pipe.fits(handler)
                and not content.is_eof()
                and handler._payload is content  # type: ignore[union-attr]
            ):
                # No pipe took the body over with its headers (another protocol then): one does from here.
                pipe = _Pipe(handler, content, sink)  # raises what broke the connection, if it did
        if pipe is not None:
            # The body goes from aiohttp's parser straight into the sink, read by read (see _Pipe).
            try:
                if sink.error is None and content.exception() is None and not content.is_eof():
                    await content.wait_eof()
            finally:
                pipe.restore()
            broken = content.exception()
            if sink.error is None and broken is not None:
                raise broken  # the connection broke before this coroutine came to wait for the body
        else:  # another reader or loop than these: read it the ordinary way
            async for chunk in content.iter_any():
                sink.feed(chunk)
                if sink.error is not None:
                    break
        if sink.error is not None:
            raise sink.error
        sink.close()


async def _read_capped(resp: aiohttp.ClientResponse, limit: int) -> bytes | None:
    """The whole body of ``resp``, or None once it is larger than ``limit`` bytes."""
    pieces: list[bytes] = []
    size = 0
    while True:
        piece = await resp.content.read(1 << 20)
        if not piece:
            return b"".join(pieces)
        size += len(piece)
        if size > limit:
            return None
        pieces.append(piece)


class _Sink:
    """Reads one streamed response as its bytes arrive: SSE framing, the decoder, the first-token and
    end-of-stream bookkeeping. Every read is stamped on the ``time.perf_counter()`` clock when it arrives (by the
    kernel's arrival time where the pipe reads it, before aiohttp's parser sees it); the events it completes
    share that time."""

    __slots__ = (
        "client",
        "counted",
        "decoder",
        "error",
        "finished",
        "first",
        "on_event",
        "parser",
        "pipe",
        "record",
        "timeout",
        "total_deadline",
    )

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
        self.counted = 0  # what this stream added to the client's tokens_seen while it came
        self.error: BaseException | None = None  # what ended the stream early (raised by the reading coroutine)
        self.pipe: _Pipe | None = None  # the pipe that took the body over, when one did
        self.finished: float | None = None  # the last event's time once a finish reason came (no end marker yet)

    def feed(self, data: bytes, now: float | None = None) -> None:
        """Take the next piece of the body, read at ``now`` (the general way; :meth:`take` has faster ones)."""
        if self.error is None and data:
            try:
                self.events(self.parser.feed(data), _perf() if now is None else now)
            except Exception as exc:  # a StreamFault, or a bug: either way it ends this request, not the run
                self.error = exc

    def take(self, data: bytes, now: float) -> None:
        """Take the body bytes of one read (its HTTP chunks joined), read at ``now``: what :meth:`feed` does,
        with a fast path for exactly one ``data: ...\n\n`` event (what a real engine writes per read:
        :func:`~orchestrator.load.sse.single_event`), one for several such events (SSEParser.data_only), the
        parser for anything else. Raises what ends the stream (the caller keeps it in ``error``)."""
        parser = self.parser
        payload = single_event(data) if parser.clean else None
        if payload is not None:
            self.settle(self.on_event(payload, now), now)
            return
        payloads = parser.data_only(data)
        if payloads is not None:
            self.data(payloads, now)
        else:
            self.events(parser.feed(data), now)

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
        self.settle(self.decoder.on_events(payloads, now), now)

    def settle(self, tokens: int, now: float) -> None:
        if tokens:
            self.client.tokens_seen += tokens
            self.counted += tokens
            if not self.first:
                self.first_token(now)
        if self.decoder.done:
            if self.record.end is None:
                self.ended(now)
        elif self.record.finish_reason is not None:
            # Every token came and the finish reason with them: the end marker should follow at once. A server
            # that never sends it and keeps the body open would hold the request to its total timeout (vLLM's
            # bench and SGLang's bench_serving read until the body ends; GuideLLM stops at [DONE] only), so the
            # request ends _NO_DONE_GRACE_S after its last event, complete, with a note (issue 40).
            self.finished = now
            grace = asyncio.get_running_loop().time() + _NO_DONE_GRACE_S
            self.timeout.reschedule(min(self.total_deadline, grace))

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
                tokens = self.on_event(data, now)
                self.client.tokens_seen += tokens
                self.counted += tokens
        if not decoder.done:
            self.record.end = now
            if self.record.finish_reason is None:
                raise StreamFault("truncated", "the stream ended without an end marker or a finish reason")


_perf = time.perf_counter


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
    return aiohttp.ClientSession(
        connector=connector,
        timeout=timeout,
        headers=headers,
        read_bufsize=1 << 18,
        request_class=_Request,
    )


class _Attempt:
    """One try at sending a request: its record, its stream's sink (None when not streamed), and whether aiohttp
    gave it a pooled connection."""

    __slots__ = ("record", "reused", "sink")

    def __init__(self, record: RequestRecord, sink: _Sink | None = None) -> None:
        self.record = record
        self.sink = sink
        self.reused = False


# The attempt the current task is sending (set around ``session.post``; the task aiohttp starts to write the
# body copies the context, so it sees it too).
_ATTEMPT: contextvars.ContextVar[_Attempt | None] = contextvars.ContextVar("specsweep_attempt", default=None)


# Every connection (its protocol) that has carried a request, in every session of the process.
_USED: weakref.WeakSet[Any] = weakref.WeakSet()


class _Request(aiohttp.ClientRequest):
    """aiohttp's request, telling the current :class:`_Attempt` what aiohttp's trace hooks would
    (``on_connection_reuseconn``, ``on_request_chunk_sent``), without the trace machinery's cost (its signals
    and parameter objects, about 11 µs a request here, a tenth of a request's CPU): whether the connection has
    carried a request before, and the moment the body's write begins, which is the send time."""

    async def send(self, conn: Any) -> aiohttp.ClientResponse:
        attempt = _ATTEMPT.get()
        protocol = conn.protocol
        if protocol is not None:
            if attempt is not None and protocol in _USED:
                attempt.reused = True
            _USED.add(protocol)
            if attempt is not None and attempt.sink is not None and _Pipe.fits(protocol):
                # Before the request goes out: the response's headers are aiohttp's, its body the pipe's from the
                # read that completes them on (else the reads until this task next runs, a stream's first tens of
                # tokens when the loop is busy, would each go through aiohttp's reader one by one).
                _shrink_reads(protocol.transport)
                _Pipe(protocol, None, attempt.sink)
        return await super().send(conn)

    async def write_bytes(self, writer: Any, conn: Any, content_length: int | None = None) -> None:
        attempt = _ATTEMPT.get()
        if attempt is not None and attempt.record.sent == attempt.record.dispatched:
            attempt.record.sent = time.perf_counter()
        await super().write_bytes(writer, conn, content_length)


_READ_SIZE = 64 * 1024


def _shrink_reads(transport: Any) -> None:
    """Read at most 64 KiB per socket read instead of asyncio's 256 KiB.

    CPython allocates the whole read size for every ``recv`` before trimming it; above glibc's mmap threshold
    that is an mmap and a munmap per read, about 15 µs each time here. Streams that trickle one event per read
    (every real engine at C=512) pay it per token: it was a quarter of the client's CPU.
    """
    if transport is not None and getattr(transport, "max_size", 0) > _READ_SIZE:
        with contextlib.suppress(AttributeError, TypeError):  # another event loop's transport: leave it
            transport.max_size = _READ_SIZE
