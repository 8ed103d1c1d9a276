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
dispatched at once, many milliseconds after the call); each chunk's arrival time when its bytes come out of
the connection, so a chunk carrying several events stamps them all with one time.
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
from orchestrator.load.sse import SSEParser
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
        parser = SSEParser()
        feed = parser.feed
        on_event = decoder.on_event
        perf = time.perf_counter
        first = False
        async for chunk in resp.content.iter_any():
            now = perf()
            for event_type, data in feed(chunk):
                if event_type is None or event_type == "message":
                    n = on_event(data, now)
                    if n:
                        self.tokens_seen += n
                        if not first:
                            first = True
                            record.first_token = now  # provisional; finish() settles it
                            timeout.reschedule(total_deadline)
                elif event_type == "error":
                    decoder.on_error_event(data)
                if decoder.done and record.end is None:
                    record.end = now
                    # Wait a moment for the body to end, so the connection stays reusable; never longer.
                    timeout.reschedule(min(total_deadline, asyncio.get_running_loop().time() + _DONE_GRACE_S))
        now = perf()
        for event_type, data in parser.close():
            if event_type == "error":
                decoder.on_error_event(data)
            elif event_type is None or event_type == "message":
                self.tokens_seen += on_event(data, now)
        if not decoder.done:
            record.end = now
            if record.finish_reason is None:
                raise StreamFault("truncated", "the stream ended without an end marker or a finish reason")


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
