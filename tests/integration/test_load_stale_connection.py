"""A server that closes each connection after a streamed response while announcing keep-alive, as llama.cpp's
llama-server does (its chunked content provider ends by returning false, which cpp-httplib takes for an
error): aiohttp may hand the next request that closed pooled connection before it sees the close. The request
then fails before any byte of an answer and must go out again on another connection, not count as a reset.
A fresh connection that fails is still a reset (test_load_client's ``closed-without-answer``)."""

from __future__ import annotations

import asyncio
import json

from orchestrator.load import LoadSettings, run_load

_EVENTS = [
    {"choices": [{"text": " a", "index": 0, "finish_reason": None}]},
    {"choices": [{"text": " b", "index": 0, "finish_reason": None}]},
    {
        "choices": [{"text": "", "index": 0, "finish_reason": "length"}],
        "usage": {"completion_tokens": 2, "prompt_tokens": 3, "total_tokens": 5},
        "timings": {"predicted_n": 2, "draft_n": 2, "draft_n_accepted": 1},
    },
]


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


class ClosingServer:
    """Answers one streamed completion per connection, says ``Keep-Alive``, then closes."""

    def __init__(self) -> None:
        self.connections = 0
        self.requests = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(
                int(line.split(b":", 1)[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            )
            await reader.readexactly(length)
            self.requests += 1
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
                b"Keep-Alive: timeout=5, max=100\r\n\r\n"
            )
            for event in _EVENTS:
                writer.write(_chunk(b"data: " + json.dumps(event).encode() + b"\n\n"))
            writer.write(_chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


async def test_requests_after_a_streamed_response_are_not_resets() -> None:
    fake = ClosingServer()
    server = await asyncio.start_server(fake.handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        for concurrency in (1, 3):
            fake.requests = 0
            settings = LoadSettings(
                url=f"http://127.0.0.1:{port}",
                model="m",
                api="completions",
                concurrency=concurrency,
                requests=9,
                warmup=2,
                connect_timeout=2.0,
                first_token_timeout=5.0,
                total_timeout=10.0,
            )
            result = (await run_load(settings)).to_dict()
            assert result["errors_by_kind"] == {}, (concurrency, result["errors_by_kind"])
            assert (result["completed"], result["output_tokens"]) == (9, 18)
            assert result["spec"]["draft_n_accepted"] == 9
            assert fake.requests == 11  # each request processed once: nothing the server answered went twice
    finally:
        server.close()
        await server.wait_closed()
    assert fake.connections >= 22  # one connection per answered request: the reuse really was refused
