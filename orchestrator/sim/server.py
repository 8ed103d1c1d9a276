"""The simulator's HTTP side (aiohttp) and its life cycle: bind, load, serve, stop.

The port is bound at once; while the model "loads" (``--load-seconds``, plus ``slow-start``) every endpoint
answers 503 with an error body, and progress lines are logged. Then the scheduler starts and the log says
``The server is fired up and ready to roll!``. ``stop`` ends every open request first (so stalled streams
close too), then the listener, within a fraction of a second.

Endpoints: ``GET /health``, ``/health_generate``, ``/v1/models``, ``/get_model_info``, ``/get_server_info``,
``/metrics``; ``POST /v1/chat/completions``, ``/v1/completions``, ``/generate``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import socket
import time
from collections.abc import Callable
from typing import Any

from aiohttp import web

from orchestrator.errors import SpecsweepError
from orchestrator.sim import api, logs
from orchestrator.sim.config import SimConfig
from orchestrator.sim.engine import Engine
from orchestrator.sim.request import SimRequest, seed_for
from orchestrator.sim.stats import ServerStats, render_prometheus

__all__ = ["SimServer"]

_SHUTDOWN_TIMEOUT = 0.3  # seconds aiohttp waits for handlers before cancelling them
_LOAD_SHARDS = 64
_SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}


def _json_response(body: Any, status: int = 200) -> web.Response:
    return web.Response(status=status, text=json.dumps(body), content_type="application/json")


def _error(status: int, message: str, kind: str, param: str | None = None) -> web.Response:
    return _json_response(api.error_body(message, kind=kind, code=status, param=param), status)


class SimServer:
    """One simulated server. ``await start()`` binds and begins loading; ``ready`` is set once it serves;
    ``finished`` resolves to an exit code if the server ends on its own (``fail-start``); ``await stop()``."""

    def __init__(
        self,
        config: SimConfig,
        log: logs.LogFn | None = None,
        *,
        exit_process: Callable[[int], object] = os._exit,
    ) -> None:
        self.config = config
        self._log: logs.LogFn = log or (lambda line: None)
        self._exit_process = exit_process
        self.stats = ServerStats(model=config.model, speculative=config.algorithm != "ar")
        self.engine = Engine(config, self.stats, self._log)
        self.ready = asyncio.Event()
        self.finished: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.port = 0
        self._closing = False
        self._fault_rng = random.Random(seed_for("faults", config.seed))
        self._completed = 0
        self._dying = False
        self._counter = 0
        self._started = time.time()
        self._runner: web.AppRunner | None = None
        self._loading: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        host = self.config.host
        return f"http://[{host}]:{self.port}" if ":" in host else f"http://{host}:{self.port}"

    # Life cycle.

    async def start(self) -> None:
        """Bind the port (``SpecsweepError`` if that fails), log the start-up lines, begin loading."""
        cfg = self.config
        self._log(logs.server(f"server_args={self._server_args()}"))
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.add_routes(
            [
                web.get("/health", self._health),
                web.get("/health_generate", self._health_generate),
                web.get("/v1/models", self._models),
                web.get("/get_model_info", self._model_info),
                web.get("/get_server_info", self._server_info),
                web.get("/metrics", self._metrics),
                web.post("/v1/chat/completions", self._chat),
                web.post("/v1/completions", self._completions),
                web.post("/generate", self._generate),
            ]
        )
        sock = self._bind(cfg.host, cfg.port)
        self.port = sock.getsockname()[1]
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=_SHUTDOWN_TIMEOUT)
        await self._runner.setup()
        await web.SockSite(self._runner, sock, backlog=1024).start()
        self._log(logs.server(f"INFO:     Uvicorn running on {self.url} (Press CTRL+C to quit)"))
        self._loading = asyncio.get_running_loop().create_task(self._load(), name="sim-loading")

    @staticmethod
    def _bind(host: str, port: int) -> socket.socket:
        try:
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            sock = socket.socket(family, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port))
        except OSError as exc:
            raise SpecsweepError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
        return sock

    def _server_args(self) -> str:
        cfg = self.config
        algo = {"ar": "None", "linear": "'DFLASH'", "ddtree": "'DDTREE'"}[cfg.algorithm]
        return (
            f"ServerArgs(model_path={cfg.model!r}, served_model_name={cfg.model!r}, host={cfg.host!r}, "
            f"port={cfg.port}, speculative_algorithm={algo}, speculative_num_draft_tokens={cfg.draft_tokens}, "
            f"speculative_ddtree_budget={cfg.budget}, speculative_ddtree_topk={cfg.topk}, "
            f"random_seed={cfg.seed}, decode_log_interval={cfg.decode_log_interval}, enable_metrics=True, "
            f"sim_profile={cfg.profile.name!r}, sim_faults={list(cfg.faults.specs)!r})"
        )

    async def _load(self) -> None:
        cfg = self.config
        total = cfg.load_seconds + cfg.faults.slow_start_seconds
        loop = asyncio.get_running_loop()
        begin = loop.time()
        self._log(logs.tp0("Load weight begin. avail mem=139.00 GB, mem usage=0.00 GB."))
        updates = max(1, min(_LOAD_SHARDS, int(total / 0.5)))
        fail_at = updates // 2 if cfg.faults.fail_start else None
        for i in range(1, updates + 1):
            await asyncio.sleep(max(0.0, begin + total * i / updates - loop.time()))
            if fail_at is not None and i > fail_at:
                break
            done = _LOAD_SHARDS * i // updates
            elapsed = loop.time() - begin
            self._log(logs.load_progress(done, _LOAD_SHARDS, elapsed, max(0.0, total - elapsed)))
        if cfg.faults.fail_start:
            for line in logs.fail_start_lines():
                self._log(line)
            if not self.finished.done():
                self.finished.set_result(1)
            return
        self._log(logs.tp0("Load weight end. type=SimModel, dtype=torch.bfloat16, avail mem=60.00 GB."))
        self._log(logs.tp0(f"Speculative decoding: {cfg.spec_args}; profile {cfg.profile.name}."))
        self._log(logs.tp0("Capture cuda graph end. Time elapsed: 0.00 s. mem usage=1.00 GB."))
        self.engine.start()
        self.ready.set()
        self._log(logs.server("The server is fired up and ready to roll!"))

    async def stop(self) -> None:
        """End open requests, stop loading and the scheduler, close the listener."""
        self._closing = True
        if self._loading is not None:
            self._loading.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loading
        await self.engine.close()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if not self.finished.done():
            self.finished.set_result(0)

    # Shared pieces of the handlers.

    def _unavailable(self) -> web.Response | None:
        if self._closing:
            return _error(503, "The server is shutting down.", "ServiceUnavailableError")
        if not self.ready.is_set():
            return _error(503, "The server is loading the model; try again later.", "ServiceUnavailableError")
        return None

    def _new_request(self, params: api.GenerationParams, *, faults: bool = True) -> SimRequest:
        self._counter += 1
        profile = self.config.profile
        stall = faults and self.config.faults.stall_rate > 0
        if stall:
            stall = self._fault_rng.random() < self.config.faults.stall_rate
        return SimRequest(
            rid=f"{self._counter:024x}",
            prompt_key=params.prompt_key,
            prompt_tokens=params.prompt_tokens,
            max_tokens=params.max_tokens,
            temperature=params.temperature,
            server_seed=self.config.seed,
            request_seed=params.seed,
            drafter=self.engine.drafter,
            temperature_penalty=profile.temperature_penalty,
            eos_mean_tokens=profile.eos_mean_tokens,
            ignore_eos=params.ignore_eos,
            stop=params.stop,
            stall=stall,
        )

    async def _parse(
        self, request: web.Request, parse: Callable[[Any, int], api.GenerationParams]
    ) -> api.GenerationParams:
        raw = await request.read()
        try:
            body = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            raise api.BadRequest(f"the request body is not valid JSON: {exc}") from None
        return parse(body, self.config.profile.context_length)

    def _injected_500(self) -> web.Response | None:
        rate = self.config.faults.http_500_rate
        if rate > 0 and self._fault_rng.random() < rate:
            return _error(500, "Internal server error (simulated by --fault http-500-rate).", "InternalServerError")
        return None

    def _meta_info(self, req: SimRequest) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "id": req.rid,
            "prompt_tokens": req.prompt_tokens,
            "completion_tokens": req.completion_tokens,
        }
        if self.engine.speculator.speculative:
            meta["spec_verify_ct"] = req.spec_verify_ct
        return meta

    def _request_completed(self) -> None:
        self._completed += 1
        limit = self.config.faults.crash_after
        if limit is not None and self._completed >= limit and not self._dying:
            # The Nth response is written; the process goes at the loop's next turn, taking every request in
            # flight with it (as a real crash does), and no new request is answered meanwhile, so the crash
            # comes after exactly N requests however fast they are.
            self._dying = True
            asyncio.get_running_loop().call_soon(self._crash)

    def _crash(self) -> None:
        for line in logs.crash_lines(self._completed):
            self._log(line)
        self._exit_process(1)

    async def _run_generation(
        self,
        request: web.Request,
        parse: Callable[[Any, int], api.GenerationParams],
        respond: Callable[[web.Request, SimRequest, api.GenerationParams], Any],
    ) -> web.StreamResponse:
        if self._dying:
            await asyncio.Event().wait()  # the process exits within 50 ms: this request dies with it
        unavailable = self._unavailable()
        if unavailable is not None:
            return unavailable
        try:
            params = await self._parse(request, parse)
        except api.BadRequest as exc:
            return _error(400, exc.message, "BadRequestError", exc.param)
        failure = self._injected_500()
        if failure is not None:
            return failure
        req = self._new_request(params)
        self.engine.submit(req)
        try:
            response: web.StreamResponse = await respond(request, req, params)
        except ConnectionError:  # the client went away mid-stream
            return web.Response(status=499)
        finally:
            req.abort()  # no-op when it finished; frees the batch slot when the client left early
        if req.finish_reason != "abort":
            self._request_completed()
        return response

    # Generation endpoints.

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        return await self._run_generation(request, api.parse_chat, self._respond_openai_chat)

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        return await self._run_generation(request, api.parse_completion, self._respond_openai_text)

    async def _generate(self, request: web.Request) -> web.StreamResponse:
        return await self._run_generation(request, api.parse_generate, self._respond_native)

    async def _respond_openai_chat(
        self, request: web.Request, req: SimRequest, params: api.GenerationParams
    ) -> web.StreamResponse:
        return await self._respond_openai(request, req, params, chat=True)

    async def _respond_openai_text(
        self, request: web.Request, req: SimRequest, params: api.GenerationParams
    ) -> web.StreamResponse:
        return await self._respond_openai(request, req, params, chat=False)

    async def _respond_openai(
        self, request: web.Request, req: SimRequest, params: api.GenerationParams, *, chat: bool
    ) -> web.StreamResponse:
        rid = ("chatcmpl-" if chat else "cmpl-") + req.rid
        created = int(time.time())
        model = params.model or self.config.model
        if not params.stream:
            while not req.finished:
                await req.deltas()
            if req.finish_reason == "abort":
                return _error(503, "The request was aborted: the server is shutting down.", "ServiceUnavailableError")
            usage = {
                "prompt_tokens": req.prompt_tokens,
                "completion_tokens": req.completion_tokens,
                "total_tokens": req.prompt_tokens + req.completion_tokens,
            }
            text = req.full_text
            choice: dict[str, Any] = (
                {"index": 0, "message": {"role": "assistant", "content": text}} if chat else {"index": 0, "text": text}
            )
            choice.update(logprobs=None, finish_reason=req.finish_reason)
            body = {
                "id": rid,
                "object": "chat.completion" if chat else "text_completion",
                "created": created,
                "model": model,
                "choices": [choice],
                "usage": usage,
                "meta_info": self._meta_info(req),
            }
            return await self._send_json(request, body)
        stream = api.OpenAIStream(rid=rid, created=created, model=model, chat=chat)
        resp = web.StreamResponse(headers=_SSE_HEADERS)
        await resp.prepare(request)
        first = chat
        while True:
            deltas = await req.deltas()
            parts: list[str] = []
            if deltas and first:
                parts.append(stream.role())
                first = False
            parts.extend(stream.content(d) for d in deltas if d)
            if req.finished and not req.pending:
                if req.finish_reason == "abort":
                    break
                reason = req.finish_reason or "stop"
                meta = self._meta_info(req)
                parts.append(stream.finish(reason, meta))
                if params.include_usage:
                    parts.append(stream.usage(req.prompt_tokens, req.completion_tokens, meta))
                parts.append(api.DONE)
                await resp.write("".join(parts).encode())
                break
            if parts:
                await resp.write("".join(parts).encode())
        await resp.write_eof()
        return resp

    async def _respond_native(
        self, request: web.Request, req: SimRequest, params: api.GenerationParams
    ) -> web.StreamResponse:
        start = time.monotonic()

        def meta(final: bool) -> dict[str, Any]:
            info = self._meta_info(req)
            info["cached_tokens"] = 0
            reason: dict[str, Any] | None = None
            if final and req.finish_reason == "length":
                reason = {"type": "length", "length": req.completion_tokens}
            elif final:
                reason = {"type": req.finish_reason or "stop", "matched": None}
            info["finish_reason"] = reason
            info["e2e_latency"] = round(time.monotonic() - start, 6)
            return info

        if not params.stream:
            while not req.finished:
                await req.deltas()
            if req.finish_reason == "abort":
                return _error(503, "The request was aborted: the server is shutting down.", "ServiceUnavailableError")
            return await self._send_json(request, {"text": req.full_text, "meta_info": meta(True)})
        resp = web.StreamResponse(headers=_SSE_HEADERS)
        await resp.prepare(request)
        sent: list[str] = []
        while True:
            deltas = await req.deltas()
            parts: list[str] = []
            for i, delta in enumerate(deltas):
                sent.append(delta)
                last = req.finished and not req.pending and i == len(deltas) - 1
                body = {"text": "".join(sent), "meta_info": meta(last), "index": 0}
                parts.append(f"data: {json.dumps(body, separators=(',', ':'))}\n\n")
            if req.finished and not req.pending:
                if req.finish_reason != "abort":
                    parts.append(api.DONE)
                    await resp.write("".join(parts).encode())
                break
            await resp.write("".join(parts).encode())
        await resp.write_eof()
        return resp

    @staticmethod
    async def _send_json(request: web.Request, body: dict[str, Any]) -> web.Response:
        # Written here rather than returned, so the request counts as completed only once it is sent.
        resp = _json_response(body)
        await resp.prepare(request)
        await resp.write_eof()
        return resp

    # Health and information endpoints.

    async def _health(self, request: web.Request) -> web.StreamResponse:
        return self._unavailable() or web.Response(status=200)

    async def _health_generate(self, request: web.Request) -> web.StreamResponse:
        unavailable = self._unavailable()
        if unavailable is not None:
            return unavailable
        params = api.GenerationParams(
            prompt_key="health",
            prompt_tokens=1,
            max_tokens=1,
            temperature=0.0,
            ignore_eos=True,
            stream=False,
            include_usage=False,
            stop=(),
            seed=None,
            model=None,
        )
        req = self._new_request(params, faults=False)
        self.engine.submit(req)
        try:
            while not req.finished:
                await req.deltas()
        finally:
            req.abort()
        if req.finish_reason == "abort":
            return _error(503, "The server is shutting down.", "ServiceUnavailableError")
        return web.Response(status=200)

    async def _models(self, request: web.Request) -> web.StreamResponse:
        unavailable = self._unavailable()
        if unavailable is not None:
            return unavailable
        model = {
            "id": self.config.model,
            "object": "model",
            "created": int(self._started),
            "owned_by": "sglang",
            "root": self.config.model,
            "max_model_len": self.config.profile.context_length,
        }
        return _json_response({"object": "list", "data": [model]})

    async def _model_info(self, request: web.Request) -> web.StreamResponse:
        unavailable = self._unavailable()
        if unavailable is not None:
            return unavailable
        return _json_response({"model_path": self.config.model, "is_generation": True, "tokenizer_path": None})

    async def _server_info(self, request: web.Request) -> web.StreamResponse:
        unavailable = self._unavailable()
        if unavailable is not None:
            return unavailable
        cfg, stats = self.config, self.stats
        state: dict[str, Any] = {"last_gen_throughput": stats.last_throughput}
        avg = stats.avg_spec_accept_length
        if avg is not None:  # like SGLang: only once a speculative server has verified something
            state["avg_spec_accept_length"] = avg
        algo = {"ar": None, "linear": "DFLASH", "ddtree": "DDTREE"}[cfg.algorithm]
        return _json_response(
            {
                "model_path": cfg.model,
                "served_model_name": cfg.model,
                "host": cfg.host,
                "port": self.port,
                "speculative_algorithm": algo,
                "speculative_num_draft_tokens": cfg.draft_tokens if algo else None,
                "speculative_ddtree_budget": cfg.budget if cfg.algorithm == "ddtree" else None,
                "speculative_ddtree_topk": cfg.topk if cfg.algorithm == "ddtree" else None,
                "random_seed": cfg.seed,
                "decode_log_interval": cfg.decode_log_interval,
                "sim_profile": cfg.profile.name,
                "sim_faults": list(cfg.faults.specs),
                "internal_states": [state],
                "version": "sim",
            }
        )

    async def _metrics(self, request: web.Request) -> web.StreamResponse:
        unavailable = self._unavailable()
        if unavailable is not None:
            return unavailable
        text = render_prometheus(self.stats, bad_line=self.config.faults.bad_metrics)
        return web.Response(text=text, content_type="text/plain", charset="utf-8")
