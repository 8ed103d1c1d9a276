"""The load client against scripted servers on loopback: every API's wire format, and every way a server
misbehaves (statuses, refused connections, resets, malformed events, stalls) becoming a counted error kind."""

from __future__ import annotations

import asyncio
import json
import socket
import struct
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.client_proto import ResponseHandler

from orchestrator.engines.llamacpp.responses import LLAMACPP_TIMINGS
from orchestrator.engines.responses import SpecFigures
from orchestrator.engines.sglang.responses import SGLANG_META_INFO
from orchestrator.engines.vllm.responses import VLLM_METRICS
from orchestrator.errors import LoadError
from orchestrator.load import LoadProgress, LoadSettings, run_load
from orchestrator.load import client as client_module
from orchestrator.load.client import LoadClient, discover_model
from orchestrator.load.settings import engine_request_extras
from orchestrator.load.workloads import Prompt
from tests.engine_bodies import (
    SGLANG_CHAT_BODY,
    SGLANG_CHAT_STREAM,
    SGLANG_COMPLETIONS_STREAM,
    SGLANG_DETAILS,
    SGLANG_GENERATE_STREAM,
    SGLANG_N3_COMPLETIONS_STREAM,
    VLLM_CHAT_TAIL,
    llamacpp_stream,
)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class FakeServer:
    """An aiohttp server on 127.0.0.1 whose responses follow scripts, one per request, in order."""

    def __init__(self) -> None:
        self.scripts: deque[Handler] = deque()
        self.default: Handler = sse_script(chat_events(["a", "b"]))
        self.bodies: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.paths: list[str] = []
        self.arrivals: list[float] = []  # time.perf_counter() once each request's body was read
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/v1/models", self._models)
        app.router.add_post("/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=0.1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "fake-model", "object": "model"}]})

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.paths.append(request.path)
        self.headers.append(dict(request.headers))
        self.bodies.append(await request.json())
        self.arrivals.append(time.perf_counter())
        script = self.scripts.popleft() if self.scripts else self.default
        return await script(request)


def chat_events(tokens: list[str], finish: str = "length", usage: bool = True) -> list[bytes]:
    events: list[dict[str, Any]] = [
        {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]}
    ]
    events += [{"choices": [{"index": 0, "delta": {"content": t}, "finish_reason": None}]} for t in tokens]
    events.append({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    if usage:
        events.append({"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": len(tokens)}})
    return [b"data: " + json.dumps(e).encode() + b"\n\n" for e in events] + [b"data: [DONE]\n\n"]


def sse_script(
    parts: Sequence[bytes | float | str], status: int = 200, content_type: str = "text/event-stream"
) -> Handler:
    """Write each bytes part as its own HTTP chunk; a float sleeps; 'reset' aborts the connection with RST;
    'close' ends the body cleanly where it is; 'hang' sleeps until the client goes away."""

    async def handler(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(status=status, headers={"Content-Type": content_type})
        await response.prepare(request)
        for part in parts:
            if isinstance(part, bytes):
                await response.write(part)
            elif isinstance(part, float):
                await asyncio.sleep(part)
            elif part == "reset":
                transport = request.transport
                assert transport is not None
                sock = transport.get_extra_info("socket")
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                transport.abort()
                return response
            elif part == "close":
                break
            elif part == "hang":
                await asyncio.sleep(3600)
        await response.write_eof()
        return response

    return handler


def json_script(body: object, status: int = 200) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        return web.json_response(body, status=status)

    return handler


def text_script(text: str, status: int) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        return web.Response(text=text, status=status)

    return handler


@pytest.fixture
async def server() -> AsyncIterator[FakeServer]:
    fake = FakeServer()
    await fake.start()
    try:
        yield fake
    finally:
        await fake.stop()


def settings_for(url: str, **overrides: Any) -> LoadSettings:
    base: dict[str, Any] = {
        "url": url,
        "model": "m",
        "concurrency": 1,
        "requests": 1,
        "warmup": 0,
        "connect_timeout": 2.0,
        "first_token_timeout": 5.0,
        "total_timeout": 10.0,
    }
    base.update(overrides)
    return LoadSettings(**base)


async def send_one(settings: LoadSettings, prompt: str = "hello") -> Any:
    async with LoadClient(settings, settings.model) as client:
        return await client.send(0, Prompt(text=prompt))


# -- what goes on the wire, per API -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("api", "path", "expected"),
    [
        pytest.param(
            "chat",
            "/v1/chat/completions",
            {
                "model": "m",
                "messages": [{"role": "user", "content": "hello"}],
                "max_tokens": 7,
                "temperature": 0.0,
                "stream": True,
                "stream_options": {"include_usage": True, "continuous_usage_stats": True},
                "ignore_eos": True,
            },
            id="chat",
        ),
        pytest.param(
            "completions",
            "/v1/completions",
            {
                "model": "m",
                "prompt": "hello",
                "max_tokens": 7,
                "temperature": 0.0,
                "stream": True,
                "stream_options": {"include_usage": True, "continuous_usage_stats": True},
                "ignore_eos": True,
            },
            id="completions",
        ),
        pytest.param(
            "generate",
            "/generate",
            {
                "text": "hello",
                "sampling_params": {"max_new_tokens": 7, "temperature": 0.0, "ignore_eos": True},
                "stream": True,
            },
            id="generate",
        ),
        pytest.param(
            "llamacpp",
            "/completion",
            {"prompt": "hello", "n_predict": 7, "temperature": 0.0, "stream": True, "ignore_eos": True},
            id="llamacpp",
        ),
    ],
)
async def test_request_bodies(server: FakeServer, api: str, path: str, expected: dict[str, Any]) -> None:
    await send_one(settings_for(server.url, api=api, max_tokens=7, ignore_eos=True, api_key="k3y"))
    assert server.paths == [path]
    assert server.bodies == [expected]
    assert server.headers[0]["Authorization"] == "Bearer k3y"


async def test_ignore_eos_is_only_sent_when_asked(server: FakeServer) -> None:
    await send_one(settings_for(server.url))
    assert "ignore_eos" not in server.bodies[0]


async def test_the_send_time_is_the_body_write_not_the_call(server: FakeServer) -> None:
    """aiohttp writes each request's body from a task of its own, a loop turn or more after the call (with many
    requests dispatched at once, many): a record's send time is that write, after the call and before the
    server has the body (the 49th goes out on a pooled connection)."""
    async with LoadClient(settings_for(server.url), "m") as client:
        records = await asyncio.gather(*(client.send(i, Prompt(text=f"p{i}")) for i in range(48)))
        again = await client.send(48, Prompt(text="p48"))
    arrival = {b["messages"][0]["content"]: t for b, t in zip(server.bodies, server.arrivals, strict=True)}
    for record in [*records, again]:
        assert record.ok, record.error
        assert record.dispatched < record.sent <= arrival[f"p{record.index}"]


# -- streams that arrive in awkward pieces ---------------------------------------------------------------


async def test_stream_split_anywhere_with_comments_and_keepalives(server: FakeServer) -> None:
    whole = b"".join(chat_events(["one", " two three", " four"], usage=False))
    whole = whole.replace(b"\n\n", b"\r\n\r\n", 2)  # mixed line endings
    pieces: list[bytes | float | str] = [b": keep-alive\n\n", 0.01]
    for i in range(0, len(whole), 7):  # 7-byte HTTP chunks, each its own write
        pieces += [whole[i : i + 7], 0.001]
    server.scripts.append(sse_script(pieces))
    record = await send_one(settings_for(server.url))
    assert record.ok, record.error
    assert record.output_tokens == 3  # no usage: one per text chunk
    assert record.finish_reason == "length"
    assert record.ttft is not None and record.ttft >= 0.01  # the server waited 10 ms before any token
    assert record.end >= record.first_token > record.sent


async def test_usage_spreads_tokens_over_chunks(server: FakeServer) -> None:
    events = chat_events(["a", "bbb", "c"])
    events[-2] = b'data: {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 5}}\n\n'
    server.scripts.append(sse_script([*events]))
    record = await send_one(settings_for(server.url))
    assert record.output_tokens == 5
    assert record.chunk_tokens == [1, 3, 1]
    assert record.input_tokens == 5


async def test_the_live_count_is_of_tokens_not_chunks(server: FakeServer) -> None:
    """A speculative stream's chunk carries several tokens that only the final usage counts: the count the live
    progress line reads (``tokens_seen``) settles to the request's tokens when it ends (it counted chunks: 3)."""
    events = chat_events(["a", "bbb", "c"])
    events[-2] = b'data: {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 5}}\n\n'
    server.scripts.append(sse_script([*events]))
    async with LoadClient(settings_for(server.url), "m") as client:
        record = await client.send(0, Prompt(text="p"))
        assert record.output_tokens == 5
        assert client.tokens_seen == 5


async def test_generate_and_llamacpp_streams(server: FakeServer) -> None:
    llamacpp = [
        b'data: {"content": " a", "stop": false}\n\n',
        b'data: {"content": " b", "stop": false}\n\n',
        b'data: {"content": "", "stop": true, "tokens_predicted": 2, "stop_type": "limit", '
        b'"timings": {"draft_n": 3, "draft_n_accepted": 1}}\n\n',
    ]
    server.scripts.extend([sse_script(list(SGLANG_GENERATE_STREAM)), sse_script(llamacpp)])
    first = await send_one(settings_for(server.url, api="generate"))
    second = await send_one(settings_for(server.url, api="llamacpp"))
    assert (first.ok, first.output_tokens, first.chunk_tokens) == (True, 13, [1, 4, 3, 2, 3])
    assert first.spec == SpecFigures(
        SGLANG_META_INFO, 4, 8, 12, 3.25, completion_tokens=13, accepted_histogram=(0, 1, 2, 1)
    )
    assert "return_spec_tokens_details" not in server.bodies[0]  # /generate's meta_info needs no flag
    assert (second.ok, second.output_tokens) == (True, 2)
    assert second.spec == SpecFigures(LLAMACPP_TIMINGS, accepted_drafts=1, proposed_drafts=3)
    assert second.finish_reason == "length"


# -- per-response speculative figures, as each engine writes them (tests/engine_bodies.py) ---------------


@pytest.mark.parametrize(
    ("api", "events"),
    [
        pytest.param("chat", SGLANG_CHAT_STREAM, id="chat"),
        pytest.param("completions", SGLANG_COMPLETIONS_STREAM, id="completions"),
    ],
)
async def test_sglang_openai_stream_asked_for_its_spec_tokens_details(
    server: FakeServer, api: str, events: list[bytes]
) -> None:
    # SGLang writes the sglext chunk in the same write as the finish chunk or apart: both ways.
    together = [*events[:-3], events[-3] + events[-2], events[-1]]
    server.scripts.extend([sse_script(list(events)), sse_script(together)])
    settings = settings_for(server.url, api=api, extra_body=engine_request_extras("sglang", api), requests=2)
    result = await run_load(settings)
    assert all(body["return_spec_tokens_details"] is True for body in server.bodies)  # top level of the body
    assert result.errors == 0
    assert all(r.spec == SGLANG_DETAILS for r in result.records)
    spec = result.to_dict()["spec"]
    assert spec["accept_len"] == pytest.approx(12 / 4)  # Σ(completion - 1) / Σ verify_ct
    assert spec["accept_len_engine"] == pytest.approx(13 / 4)  # SGLang's spec_accept_length
    assert spec["accept_len_request_weighted"] == pytest.approx(3.0)
    assert spec["acceptance_rate"] == pytest.approx(8 / 12)
    assert spec["sources"] == {"sglang:sglext": 2}
    assert "protocol.py" in spec["definitions"]["source"]


async def test_sglang_n3_stream_pools_every_choice(server: FakeServer) -> None:
    """SGLang with n = 3 (bytes made by SGLang's own code: tests/engine_bodies.py): the sglext chunk holds one
    spec_tokens_details per choice that verified and the usage chunk sums every choice's tokens."""
    server.scripts.append(sse_script(list(SGLANG_N3_COMPLETIONS_STREAM)))
    extra = {**engine_request_extras("sglang", "completions"), "n": 3}
    result = await run_load(settings_for(server.url, api="completions", extra_body=extra))
    assert server.bodies[0]["n"] == 3 and result.errors == 0
    (record,) = result.records
    assert record.output_tokens == 23 and record.spec is not None and len(record.spec.choices) == 2
    spec = result.to_dict()["spec"]
    assert spec["accept_len"] == pytest.approx(20 / 9)  # ((13 - 1) + (9 - 1)) / (4 + 5), not (23 - 1) / 4
    assert spec["accept_len_request_weighted"] == pytest.approx((12 / 4 + 8 / 5) / 2)
    # The committed rate, ((13 - 1 - 4) + (9 - 1 - 5)) / 27; SGLang's own counts a draft past a choice's end.
    assert spec["acceptance_rate"] == pytest.approx(11 / 27)
    assert spec["acceptance_rate_engine"] == pytest.approx(12 / 27)
    assert spec["per_position_acceptance"] == pytest.approx([6 / 9, 4 / 9, 2 / 9])
    assert spec["exactness"]["accept_len"]["kind"] == "exact"


async def test_sglang_chat_body_and_vllm_stream(server: FakeServer) -> None:
    server.scripts.append(
        sse_script([SGLANG_CHAT_BODY], content_type="application/json")  # a whole body to a streamed request
    )
    server.scripts.append(sse_script(list(VLLM_CHAT_TAIL)))
    sglang = await send_one(settings_for(server.url, extra_body=engine_request_extras("sglang", "chat")))
    vllm = await send_one(settings_for(server.url, extra_body=engine_request_extras("vllm", "chat")))
    assert sglang.spec == SGLANG_DETAILS and not sglang.streamed
    assert vllm.spec == SpecFigures(VLLM_METRICS, 4, 6, 12, 2.5, accepted_histogram=(1, 1, 1, 1))
    assert vllm.spec_accept_len == pytest.approx(2.5)
    assert "return_spec_tokens_details" not in server.bodies[1]  # vLLM: a server flag, nothing per request
    assert server.bodies[1]["stream_options"]["include_usage"] is True  # its metrics ride on the usage chunk


async def test_real_llamacpp_stream_over_a_socket(server: FakeServer) -> None:
    parts: list[bytes | float | str] = []
    for event in llamacpp_stream():
        parts += [event, 0.001]
    server.scripts.append(sse_script(parts))
    record = await send_one(settings_for(server.url, api="completions"))
    assert record.ok and record.output_tokens == 128
    assert record.spec == SpecFigures(LLAMACPP_TIMINGS, accepted_drafts=46, proposed_drafts=123)


@pytest.mark.parametrize(
    ("api", "body", "tokens"),
    [
        (
            "chat",
            {"choices": [{"message": {"content": "x y"}, "finish_reason": "stop"}], "usage": {"completion_tokens": 2}},
            2,
        ),
        ("completions", {"choices": [{"text": "x", "finish_reason": "length"}], "usage": {"completion_tokens": 1}}, 1),
        ("generate", {"text": "x", "meta_info": {"completion_tokens": 4, "finish_reason": {"type": "length"}}}, 4),
        ("llamacpp", {"content": "x", "tokens_predicted": 3, "stop_type": "limit"}, 3),
    ],
)
async def test_not_streamed(server: FakeServer, api: str, body: dict[str, Any], tokens: int) -> None:
    server.scripts.append(json_script(body))
    record = await send_one(settings_for(server.url, api=api, stream=False))
    assert record.ok, record.error
    assert record.output_tokens == tokens
    assert not record.streamed
    assert server.bodies[0]["stream"] is False


async def test_json_answer_to_a_stream_request(server: FakeServer) -> None:
    body = {"choices": [{"message": {"content": "x"}, "finish_reason": "stop"}], "usage": {"completion_tokens": 1}}
    server.scripts.append(json_script(body))
    record = await send_one(settings_for(server.url))
    assert record.ok
    assert record.output_tokens == 1


async def test_done_without_the_body_ending_counts_as_complete(
    server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(client_module, "_DONE_GRACE_S", 0.05)
    server.scripts.append(sse_script([*chat_events(["a"]), "hang"]))
    record = await send_one(settings_for(server.url))
    assert record.ok, record.error
    assert record.output_tokens == 1


async def test_a_finish_reason_without_done_is_enough(server: FakeServer) -> None:
    server.scripts.append(sse_script(chat_events(["a"], usage=False)[:-1]))
    record = await send_one(settings_for(server.url))
    assert record.ok, record.error


async def test_streams_go_through_the_pipe_and_leave_the_connection_as_aiohttp_had_it(
    server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Three streams, one after the other, on the one pooled connection: each read by a _Pipe in aiohttp's
    # place (a paused write between events makes each its own read), which hands the protocol back at the end.
    pipes: list[Any] = []
    made = client_module._Pipe.__init__

    def counting(self: Any, *args: Any) -> None:
        pipes.append(self)
        made(self, *args)

    monkeypatch.setattr(client_module._Pipe, "__init__", counting)
    events = chat_events(["a", "b", "c"])
    for _ in range(3):
        server.scripts.append(sse_script([events[0], 0.01, *events[1:3], 0.01, *events[3:]]))
    settings = settings_for(server.url)
    async with LoadClient(settings, settings.model) as client:
        records = [await client.send(i, Prompt(text="hi")) for i in range(3)]
        assert client._session is not None
        connector = client._session.connector
        assert connector is not None
        pooled = [proto for conns in connector._conns.values() for proto, _ in conns]  # type: ignore[attr-defined]
        assert len(pooled) == 1
        assert pooled[0].transport.get_protocol() is pooled[0]  # aiohttp's handler, ready for the next request
    assert [r.ok for r in records] == [True, True, True], [r.error for r in records]
    assert [r.output_tokens for r in records] == [3, 3, 3]
    assert len(pipes) == 3
    assert all(pipe.transport.get_protocol() is not pipe for pipe in pipes)
    assert client_module._pieces_waiting() == 0


def _count_aiohttp_body_feeds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many pieces of a body went into aiohttp's own StreamReader (a pipe's reader feeds its queue)."""
    fed = [0]
    feed = aiohttp.StreamReader.feed_data

    def counting(self: Any, data: bytes, size: int = 0) -> bool:
        if isinstance(self._protocol, ResponseHandler):  # a response's body (not a fake server's request's)
            fed[0] += 1
        return feed(self, data, size)

    monkeypatch.setattr(aiohttp.StreamReader, "feed_data", counting)
    return fed


async def test_a_whole_response_in_the_read_of_its_headers_goes_through_the_pipe(
    server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The fake server shares the client's loop and writes every event before the client reads: the headers
    # and the whole body come in one read. The body goes the pipe's way, not into aiohttp's reader chunk by chunk.
    fed = _count_aiohttp_body_feeds(monkeypatch)
    tokens = [f" t{i}" for i in range(40)]
    server.scripts.append(sse_script(chat_events(tokens)))
    record = await send_one(settings_for(server.url))
    assert record.ok, record.error
    assert record.output_tokens == 40
    assert fed[0] == 0
    assert client_module._pieces_waiting() == 0


@pytest.mark.parametrize("cut", [1, 2, 3, 4, 5])
async def test_headers_split_across_reads_anywhere_in_their_end_still_hand_the_body_to_the_pipe(
    cut: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A raw server: the headers' last bytes ("\r\n\r\n") cut ``cut`` bytes from the end of the first write,
    # the rest (with two events) after a pause, then the remaining events, then the end of the body.
    fed = _count_aiohttp_body_feeds(monkeypatch)
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    events = chat_events(["a", "b", "c"])
    body = [b"%x\r\n" % len(e) + e + b"\r\n" for e in events]

    async def respond(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(head[:-cut])
        await writer.drain()
        await asyncio.sleep(0.05)
        writer.write(head[-cut:] + b"".join(body[:2]))
        await asyncio.sleep(0.05)
        writer.write(b"".join(body[2:]) + b"0\r\n\r\n")
        await writer.drain()
        await reader.read()  # until the client closes
        writer.close()

    raw = await asyncio.start_server(respond, "127.0.0.1", 0)
    try:
        port = raw.sockets[0].getsockname()[1]
        record = await send_one(settings_for(f"http://127.0.0.1:{port}"))
    finally:
        raw.close()
    assert record.ok, record.error
    assert record.output_tokens == 3
    assert fed[0] == 0
    assert len(record.chunk_times) == 3 and record.chunk_times[0] < record.chunk_times[-1]


# -- servers that misbehave ------------------------------------------------------------------------------

_OPENAI_500 = {"object": "error", "message": "CUDA out of memory", "type": "InternalServerError", "code": 500}


@pytest.mark.parametrize(
    ("script", "overrides", "kind", "message"),
    [
        pytest.param(json_script(_OPENAI_500, 500), {}, "http_500", "CUDA out of memory", id="500-json"),
        pytest.param(
            json_script({"error": {"message": "max_tokens too large", "code": 400}}, 400),
            {},
            "http_400",
            "max_tokens too large",
            id="400-openai",
        ),
        pytest.param(text_script("slow down", 429), {}, "http_429", "slow down", id="429-text"),
        pytest.param(sse_script([*chat_events(["a", "b"])[:2], 0.01, "reset"]), {}, "reset", "", id="reset-mid-stream"),
        pytest.param(sse_script([*chat_events(["a"])[:2], "close"]), {}, "truncated", "end marker", id="truncated"),
        pytest.param(sse_script([b"data: {not json\n\n"]), {}, "malformed", "not JSON", id="malformed-json"),
        pytest.param(sse_script([b"data: [1]\n\n"]), {}, "malformed", "object", id="not-an-object"),
        pytest.param(
            sse_script([chat_events(["a"])[1], b'data: {"error": {"message": "engine died"}}\n\n']),
            {},
            "stream_error",
            "engine died",
            id="error-in-data",
        ),
        pytest.param(
            sse_script([b'event: error\ndata: {"message": "overloaded"}\n\n']),
            {},
            "stream_error",
            "overloaded",
            id="error-event",
        ),
        pytest.param(
            sse_script([chat_events([])[0], "hang"]),
            {"first_token_timeout": 0.2},
            "first_token_timeout",
            "no token",
            id="stall-before-first-token",
        ),
        pytest.param(
            sse_script([*chat_events(["a", "b"])[:2], "hang"]),
            {"idle_timeout": 0.2},
            "stall",
            "",
            id="stall-mid-stream",
        ),
        pytest.param(
            sse_script([*chat_events(["a"])[:2]] + [0.05, chat_events(["a"])[1]] * 400),
            {"total_timeout": 0.4},
            "total_timeout",
            "not finished",
            id="too-slow",
        ),
        pytest.param(sse_script([], status=200), {}, "truncated", "", id="empty-stream"),
    ],
)
async def test_misbehaving_server(
    server: FakeServer, script: Handler, overrides: dict[str, Any], kind: str, message: str
) -> None:
    server.scripts.append(script)
    record = await send_one(settings_for(server.url, **overrides))
    assert record.error_kind == kind, record.error
    assert message in (record.error or "")
    assert record.end is not None and record.end >= record.sent


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_refused_connection() -> None:
    record = await send_one(settings_for(f"http://127.0.0.1:{_free_port()}"))
    assert record.error_kind == "connect"


async def _raw_server(reply: bytes) -> tuple[asyncio.Server, int]:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(reply)
        await writer.drain()
        writer.close()

    raw = await asyncio.start_server(handle, "127.0.0.1", 0)
    return raw, raw.sockets[0].getsockname()[1]


@pytest.mark.parametrize(
    ("reply", "kinds"),
    [
        pytest.param(b"NOT HTTP AT ALL\r\n\r\n", {"protocol"}, id="garbage-status-line"),
        pytest.param(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\nZZ\r\n",
            {"protocol"},
            id="bad-chunk-size",
        ),
        pytest.param(b"", {"reset"}, id="closed-without-answer"),
    ],
)
async def test_broken_http(reply: bytes, kinds: set[str]) -> None:
    raw, port = await _raw_server(reply)
    try:
        record = await send_one(settings_for(f"http://127.0.0.1:{port}"))
    finally:
        raw.close()
        await raw.wait_closed()
    assert record.error_kind in kinds, (record.error_kind, record.error)


# -- whole runs ------------------------------------------------------------------------------------------


async def test_run_load_excludes_warmup_and_reports_progress(server: FakeServer) -> None:
    reports: list[LoadProgress] = []
    settings = settings_for(server.url, model=None, concurrency=3, requests=9, warmup=2)
    result = await run_load(settings, progress=reports.append)
    assert len(server.bodies) == 11  # 2 warm-up + 9 measured
    assert result.model == "fake-model"
    data = result.to_dict()
    json.dumps(data)  # JSON-able
    assert data["requests"] == 9
    assert data["warmup_requests"] == 2
    assert data["errors"] == 0
    assert data["output_tokens"] == 18
    assert data["concurrency"] == 3
    assert data["partial"] is False
    assert data["ended_at"] >= data["started_at"] > 1e9
    for key in ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms"):
        assert set(data[key]) == {"mean", "p50", "p90", "p99"}
    assert reports[-1].phase == "done"
    assert reports[-1].done == 9


async def test_run_load_counts_failures_instead_of_raising(server: FakeServer) -> None:
    server.default = json_script(_OPENAI_500, 500)
    result = await run_load(settings_for(server.url, concurrency=2, requests=4, warmup=1))
    assert result.errors == 4
    assert result.to_dict()["errors_by_kind"] == {"http_500": 4}
    assert result.warmup_errors == 1


async def test_run_load_against_nothing_is_errors_not_a_crash() -> None:
    result = await run_load(settings_for(f"http://127.0.0.1:{_free_port()}", requests=3))
    assert result.to_dict()["errors_by_kind"] == {"connect": 3}


async def test_stop_returns_promptly_with_what_finished(server: FakeServer) -> None:
    server.default = sse_script([*chat_events(["a"])[:2], "hang"])
    stop = asyncio.Event()
    asyncio.get_running_loop().call_later(0.3, stop.set)
    result = await run_load(settings_for(server.url, concurrency=4, requests=100, warmup=0), stop=stop)
    assert result.partial
    assert result.requests == 0
    assert result.cancelled == 4


async def test_open_loop_run(server: FakeServer) -> None:
    result = await run_load(settings_for(server.url, concurrency=None, rate=50.0, requests=6, warmup=0))
    data = result.to_dict()
    assert data["loop"] == "open"
    assert data["requests"] == 6
    assert data["errors"] == 0


async def test_model_discovery_failure_is_a_load_error() -> None:
    with pytest.raises(LoadError, match="model"):
        await discover_model(settings_for(f"http://127.0.0.1:{_free_port()}", model=None))


async def test_bad_prompts_file_is_a_load_error(server: FakeServer) -> None:
    with pytest.raises(LoadError, match="does not exist"):
        await run_load(settings_for(server.url, prompts="missing.jsonl"))


async def test_an_endless_non_streamed_answer_is_cut_at_the_size_cap(
    server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hostile server's non-streamed answer that never ends (issue 28, item 4): the request fails at the cap,
    the controller keeps at most the cap of it, and the load goes on."""
    monkeypatch.setattr(client_module, "_BODY_LIMIT", 1 << 20)
    sent = {"bytes": 0}

    async def endless(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        piece = b" " * 65536
        while sent["bytes"] < 64 << 20:  # far past the cap; the client must leave first
            await response.write(piece)
            sent["bytes"] += len(piece)
        await response.write_eof()
        return response

    server.scripts.append(endless)
    record = await send_one(settings_for(server.url, stream=False))
    assert record.error_kind == "too_large", record.error
    assert "larger than 1048576 bytes" in (record.error or "")
    assert sent["bytes"] < 64 << 20  # the client went away: the server did not write it all
