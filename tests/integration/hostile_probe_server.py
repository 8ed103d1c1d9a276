"""A hostile OpenAI-compatible server for the lossless probe's bounds (issue 58, S8/S14), on real loopback HTTP.

It answers ``/health``, ``/v1/models`` and ``/metrics`` as a server does, and a chat request that asks for no
log-probabilities (the warm-up's, the load's) with a short honest stream. A chat request that asks for
``top_logprobs`` (the autoregressive baseline's lossless probe) gets the ``--mode``:

- ``alternatives``: every token carries ``--alternatives`` alternatives (the 5 asked, or 10^5), then ``[DONE]``;
- ``dribble``: ``--events`` one-character events, however many tokens were asked, then ``[DONE]``;
- ``endless``: one token every ``--every`` seconds, for ever (a stream that never ends);
- ``silent``: the headers, then nothing (the connection stays open).

``--mark FILE`` writes FILE when the probe's first request comes; ``--every-request`` makes every chat request
hostile, the warm-up's too (its first then writes FILE). In a test's process: :class:`HostileServer`
(its own thread and event loop; ``on_event`` is called after each event it sent). As a process (a sweep's
service command): ``python hostile_probe_server.py --port N --mode M``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aiohttp import web

__all__ = ["HostileServer", "main"]


def _chunk(piece: str, alternatives: int = 0, finish: str | None = None) -> bytes:
    choice: dict[str, Any] = {"index": 0, "delta": {"content": piece}, "finish_reason": finish}
    if alternatives:
        top = [{"token": f"t{i}", "logprob": -0.01 * (i + 1)} for i in range(alternatives)]
        choice["logprobs"] = {"content": [{"token": piece, "logprob": -0.001, "top_logprobs": top}]}
    return b"data: " + json.dumps({"choices": [choice]}).encode() + b"\n\n"


class HostileServer:
    """The server (see the module docstring); ``start()`` returns its URL."""

    def __init__(
        self,
        mode: str,
        *,
        alternatives: int = 5,
        events: int = 1_000_000,
        every: float = 0.02,
        on_event: Callable[[int], None] | None = None,
        mark: str | None = None,
        every_request: bool = False,
    ) -> None:
        self.mode = mode
        self.mark = mark  # a file written when the probe's first request comes (a test waits for it)
        self.every_request = every_request  # hostile to every chat request (the warm-up's too), not the probe's only
        self.alternatives = alternatives
        self.events = events
        self.every = every
        self.on_event = on_event
        self.sent = 0  # bytes of hostile answers written
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/health", _health)
        app.router.add_get("/v1/models", _models)
        app.router.add_get("/metrics", _metrics)
        app.router.add_post("/v1/chat/completions", self._chat)
        return app

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        if not body.get("top_logprobs") and not self.every_request:  # not the probe's: a short honest answer
            for piece in [" a"] * min(4, int(body.get("max_tokens") or 4)):
                await response.write(_chunk(piece))
            await response.write(_chunk("", finish="length") + b"data: [DONE]\n\n")
            return response
        count = 0
        if self.mark is not None:
            Path(self.mark).write_text("probe\n")
        if self.mode == "silent":
            await asyncio.sleep(3600)
        while self.mode == "endless" or count < (self.events if self.mode == "dribble" else 16):
            data = _chunk("x", self.alternatives if self.mode == "alternatives" else 0)
            await response.write(data)
            self.sent += len(data)
            count += 1
            if self.on_event is not None:
                self.on_event(count)
            if self.mode == "endless":
                await asyncio.sleep(self.every)
        await response.write(_chunk("", finish="length") + b"data: [DONE]\n\n")
        return response

    def start(self, port: int = 0) -> str:
        """Serve on 127.0.0.1 from a thread of its own; the URL."""
        ready = threading.Event()
        bound: list[int] = []

        def serve() -> None:
            loop = self._loop = asyncio.new_event_loop()
            runner = self._runner = web.AppRunner(self.app(), handler_cancellation=True, shutdown_timeout=0.1)
            loop.run_until_complete(runner.setup())
            site = web.TCPSite(runner, "127.0.0.1", port)
            loop.run_until_complete(site.start())
            bound.append(site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]
            ready.set()
            loop.run_forever()
            loop.run_until_complete(runner.cleanup())
            loop.close()

        threading.Thread(target=serve, name="hostile-server", daemon=True).start()
        ready.wait(30)
        return f"http://127.0.0.1:{bound[0]}"

    def close(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)


async def _health(_request: web.Request) -> web.StreamResponse:
    return web.Response(text="ok")


async def _models(_request: web.Request) -> web.StreamResponse:
    return web.json_response({"object": "list", "data": [{"id": "sim", "object": "model"}]})


async def _metrics(_request: web.Request) -> web.StreamResponse:
    return web.Response(text="")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--mode", choices=("alternatives", "dribble", "endless", "silent"), required=True)
    parser.add_argument("--alternatives", type=int, default=5)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--every", type=float, default=0.02)
    parser.add_argument("--mark", default=None, help="a file to write when the probe's first request comes")
    parser.add_argument("--every-request", action="store_true", help="hostile to the warm-up's requests too")
    args, _rest = parser.parse_known_args()  # a sweep's {spec_args} may follow
    server = HostileServer(
        args.mode,
        alternatives=args.alternatives,
        events=args.events,
        every=args.every,
        mark=args.mark,
        every_request=args.every_request,
    )
    print(f"listening on http://127.0.0.1:{args.port}", flush=True)
    web.run_app(server.app(), host="127.0.0.1", port=args.port, print=None, handler_cancellation=True)


if __name__ == "__main__":
    main()
