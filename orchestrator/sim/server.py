"""The simulator's HTTP side (aiohttp) and its life cycle: bind, load, serve, stop, in the engine's dialect.

The port is bound at once. While the model "loads" (``--load-seconds``, plus ``slow-start``) SGLang and
llama.cpp answer every endpoint with their 503, while vLLM's HTTP server is not up yet (connections are
refused: the socket is bound but not listening). SGLang then runs its warm-up request before it says
``The server is fired up and ready to roll!``. ``stop`` ends every open request first (so stalled streams close
too), then the listener, within a fraction of a second.

Endpoints are the dialect's (``orchestrator.sim.dialects``): health, models, information, ``/metrics``, and the
generation endpoints (``/v1/chat/completions``, ``/v1/completions``; SGLang's ``/generate``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from aiohttp import web

from orchestrator.errors import SpecsweepError
from orchestrator.sim import api, logs
from orchestrator.sim.config import SimConfig
from orchestrator.sim.dialects import EndpointInfo, dialect_class, make_dialect
from orchestrator.sim.engine import Engine
from orchestrator.sim.model import Drafter
from orchestrator.sim.request import SimRequest, seed_for
from orchestrator.sim.stats import ServerStats

__all__ = ["SimServer"]

_SHUTDOWN_TIMEOUT = 0.3  # seconds aiohttp waits for handlers before cancelling them
_LOAD_SHARDS = 64
_SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}


def _json_response(body: Any, status: int = 200) -> web.Response:
    # Compact, as Starlette's JSONResponse (SGLang, vLLM) and nlohmann::json::dump (llama.cpp) write it.
    return web.Response(
        status=status, text=json.dumps(body, separators=(",", ":"), ensure_ascii=False), content_type="application/json"
    )


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
        if config.faults.coloured_log:
            self._log = dialect_class(config.engine).coloured(self._log)
        if config.faults.journal_suppress_after is not None:
            self._log = logs.Suppressor(
                self._log,
                lambda: getattr(self, "_completed", 0),
                config.faults.journal_suppress_after,
                config.faults.journal_suppress_lines,
                logs.unit_name(),
            )
        self._exit_process = exit_process
        self._new_process(config)
        self._next_group = 0
        self._site: web.SockSite | None = None
        self._ticker: asyncio.Task[None] | None = None
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
        self._http_serving = False
        self._restarting: asyncio.Task[None] | None = None
        self._counters_reset = False  # the counter-reset fault has happened
        self._metrics_answers = 0  # /metrics answers so far (the dribble-metrics fault counts them)

    def _new_process(self, config: SimConfig) -> None:
        """The state of one engine process: its dialect (log, counters, start time), schedulers and stats."""
        self.config = config
        self.dialect = make_dialect(config, self._log)
        speculative = config.algorithm != "ar"
        groups = [ServerStats(model=config.model, speculative=speculative) for _ in range(config.schedulers)]
        self.engines = [Engine(config, stats, self._log, self.dialect, i) for i, stats in enumerate(groups)]
        self.engine = self.engines[0]
        self.stats = groups[0]
        self.dialect.groups = groups
        self.dialect.drafted = self.engine.speculator.drafted
        self.dialect.draft_depth = self.engine.speculator.draft_depth
        self.dialect.setup_groups()

    @property
    def url(self) -> str:
        host = self.config.host
        return f"http://[{host}]:{self.port}" if ":" in host else f"http://{host}:{self.port}"

    # Life cycle.

    async def start(self) -> None:
        """Bind the port (``SpecsweepError`` if that fails), log the start-up lines, begin loading."""
        cfg = self.config
        app = web.Application(client_max_size=64 * 1024 * 1024)
        routes = [web.get(e.path, self._endpoint_handler(e)) for e in self.dialect.endpoints()]
        for path, kind in self.dialect.generation_paths().items():
            routes.append(web.post(path, self._generation_handler(kind)))
        for method, path in self.dialect.control_routes():
            routes.append(web.route(method, path, self._control_handler(path)))
        app.add_routes(routes)
        sock = self._bind(cfg.host, cfg.port)
        self.port = sock.getsockname()[1]
        for line in self.dialect.startup_lines(self.url):
            self._log(line)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=_SHUTDOWN_TIMEOUT)
        await self._runner.setup()
        self._site = web.SockSite(self._runner, sock, backlog=1024)
        if not self.dialect.http_after_load:  # vLLM starts its HTTP server only once the engine is up
            await self._site.start()
            self._http_serving = True
            for line in self.dialect.uvicorn_lines(self.url):
                self._log(line)
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

    async def _load(self) -> None:
        cfg = self.config
        dialect = self.dialect
        total = cfg.load_seconds + cfg.faults.slow_start_seconds
        loop = asyncio.get_running_loop()
        begin = loop.time()
        for line in dialect.load_begin_lines():
            self._log(line)
        updates = max(1, min(_LOAD_SHARDS, int(total / 0.5)))
        fail_at = updates // 2 if cfg.faults.fail_start else None
        for i in range(1, updates + 1):
            await asyncio.sleep(max(0.0, begin + total * i / updates - loop.time()))
            if fail_at is not None and i > fail_at:
                break
            elapsed = loop.time() - begin
            progress = dialect.loading_line(
                _LOAD_SHARDS * i // updates, _LOAD_SHARDS, elapsed, max(0.0, total - elapsed)
            )
            if progress is not None:
                self._log(progress)
        if cfg.faults.fail_start:
            for line in dialect.fail_start_lines():
                self._log(line)
            if not self.finished.done():
                self.finished.set_result(1)
            return
        for line in dialect.loaded_lines():
            self._log(line)
        for engine in self.engines:
            engine.start()
        warmup = dialect.warmup_request()
        if warmup is not None:
            await self._warmup(warmup)
        if dialect.http_after_load and self._site is not None and not self._http_serving:
            await self._site.start()
            self._http_serving = True
        if dialect.tick_seconds:
            self._ticker = loop.create_task(self._tick(dialect.tick_seconds), name="sim-stats-logger")
        self.ready.set()
        for line in dialect.ready_lines(self.url):
            self._log(line)

    async def _warmup(self, body: dict[str, Any]) -> None:
        """The engine's warm-up (the dialect's ``warmup_request``): one ``/generate`` of ``body`` per scheduler,
        counted in the metrics like any request, before the server is ready."""
        params = api.parse_generate(body, self.config.profile.context_length)
        for engine in self.engines:
            req = self._new_request(params, faults=False)
            engine.submit(req)
            while not req.finished:
                await req.deltas()

    async def _tick(self, seconds: float) -> None:
        """vLLM's ``_force_log`` loop: sleep the interval after each log, then log."""
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(seconds)
            self.dialect.tick(loop.time())

    async def _restart(self) -> None:
        """The restart-mid-point fault (orchestrator/sim/faults.py): the process goes and a new one starts, as
        systemd restarts a crashed server; the same port, so the clients' requests in flight fail and the next
        ones wait for the new process to load."""
        old_engines, old_dialect = self.engines, self.dialect
        self.ready.clear()
        if self._ticker is not None:
            self._ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._ticker
            self._ticker = None
        faults = replace(self.config.faults, restart_after=None, restart_draft_tokens=None)
        changes: dict[str, Any] = {"faults": faults}
        if self.config.faults.restart_draft_tokens is not None:
            changes["draft_tokens"] = self.config.faults.restart_draft_tokens
        self._new_process(replace(self.config, **changes))
        if hasattr(old_dialect, "pid") and hasattr(self.dialect, "pid"):
            self.dialect.pid = old_dialect.pid + 1  # a new process, a new pid
        self._completed = 0
        self._started = time.time()
        for engine in old_engines:
            await engine.close()  # every request in flight ends, as its process went
        for line in self.dialect.startup_lines(self.url):
            self._log(line)
        if not self.dialect.http_after_load:
            for line in self.dialect.uvicorn_lines(self.url):
                self._log(line)
        await self._load()

    async def stop(self) -> None:
        """End open requests, stop loading and the scheduler, close the listener."""
        self._closing = True
        if self._restarting is not None:
            self._restarting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._restarting
        if self._ticker is not None:
            self._ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._ticker
        if self._loading is not None:
            self._loading.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loading
        for engine in self.engines:
            await engine.close()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if not self.finished.done():
            self.finished.set_result(0)

    # Shared pieces of the handlers.

    def _error(self, status: int, message: str, kind: str, param: str | None = None) -> web.Response:
        return _json_response(self.dialect.error_body(message, kind=kind, code=status, param=param), status)

    def _unavailable(self) -> web.Response | None:
        if self._closing:
            return self._error(503, "The server is shutting down.", "ServiceUnavailableError")
        if not self.ready.is_set():
            status, body = self.dialect.loading_response()
            if body is None:
                return web.Response(status=status)
            return web.Response(status=status, text=body, content_type="application/json")
        return None

    def _new_request(
        self, params: api.GenerationParams, *, faults: bool = True, log_metrics: bool = True
    ) -> SimRequest:
        self._counter += 1
        profile = self.config.profile
        stall = faults and self.config.faults.stall_rate > 0
        if stall:
            stall = self._fault_rng.random() < self.config.faults.stall_rate
        drafter = self.engine.drafter
        rule = profile.rule_for(params.prompt_key) if profile.content_rules else None
        if rule is not None:  # the text decides how well the drafter guesses (profiles.py ContentRule)
            drafter = Drafter(rule.top1_accuracy, rule.depth_decay, profile.rank_share)
        idle = self.config.faults.idle_window_after
        if faults and idle is not None and self._completed >= idle:
            params = replace(params, max_tokens=1)  # faults.py idle-window: the prefill's token only
        return SimRequest(
            rid=uuid.uuid4().hex,  # SGLang's rid (io_struct.py: uuid.uuid4().hex)
            prompt_key=params.prompt_key,
            prompt_tokens=params.prompt_tokens,
            max_tokens=params.max_tokens,
            temperature=params.temperature,
            server_seed=self.config.seed,
            request_seed=params.seed,
            drafter=drafter,
            temperature_penalty=profile.temperature_penalty,
            eos_mean_tokens=profile.eos_mean_tokens,
            ignore_eos=params.ignore_eos,
            uniform_eos=self.config.faults.drain_tail,
            stop=params.stop,
            stall=stall,
            log_metrics=log_metrics,
            streaming=params.stream,
            wrong_token_rate=self.config.faults.wrong_token_rate if faults else 0.0,
            batch_rounding_rate=self.config.faults.batch_rounding_rate if faults else 0.0,
        )

    def _submit(self, req: SimRequest) -> None:
        """Dispatch to a scheduler: the one the dialect's engine would choose (round robin over SGLang's DP
        groups, the least loaded of vLLM's DP engines)."""
        index = self.dialect.route([engine.in_flight for engine in self.engines], self._next_group)
        self._next_group += 1
        self.engines[index].submit(req)

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
            return self._error(
                500, "Internal server error (simulated by --fault http-500-rate).", "InternalServerError"
            )
        return None

    def _request_completed(self) -> None:
        self._completed += 1
        reset = self.config.faults.counter_reset_after
        if reset is not None and self._completed >= reset and not self._counters_reset:
            # Every count so far goes, the Nth response's included (it is counted by the time it is answered).
            self._counters_reset = True
            self.dialect.reset_counters()
        restart = self.config.faults.restart_after
        if restart is not None and self._completed >= restart and self._restarting is None:
            self._restarting = asyncio.get_running_loop().create_task(self._restart(), name="sim-restart")
            return
        limit = self.config.faults.crash_after
        if limit is not None and self._completed >= limit and not self._dying:
            # The Nth response is written; the process goes at the loop's next turn, taking every request in
            # flight with it (as a real crash does), and no new request is answered meanwhile, so the crash
            # comes after exactly N requests however fast they are.
            self._dying = True
            asyncio.get_running_loop().call_soon(self._crash)

    def _crash(self) -> None:
        for line in self.dialect.crash_lines(self._completed):
            self._log(line)
        self._exit_process(1)

    def _generation_handler(self, kind: str) -> Callable[[web.Request], Any]:
        parse = {"chat": api.parse_chat, "completions": api.parse_completion, "generate": api.parse_generate}[kind]

        async def handler(request: web.Request) -> web.StreamResponse:
            if kind == "generate":
                return await self._run_generation(request, parse, self._respond_native)
            chat = kind == "chat"

            async def respond(req_: web.Request, req: SimRequest, params: api.GenerationParams) -> Any:
                return await self._respond_openai(req_, req, params, chat=chat)

            return await self._run_generation(request, parse, respond)

        return handler

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
            return self._error(400, exc.message, "BadRequestError", exc.param)
        failure = self._injected_500()
        if failure is not None:
            return failure
        if self.config.faults.login_page:  # faults.py login-page: what a login form in front of the server answers
            return web.Response(status=200, text=_LOGIN_PAGE, content_type="text/html", charset="utf-8")
        req = self._new_request(params)
        self._submit(req)
        try:
            response: web.StreamResponse = await respond(request, req, params)
        except ConnectionError:  # the client went away mid-stream
            return web.Response(status=499)
        finally:
            req.abort()  # no-op when it finished; frees the batch slot when the client left early
        if req.finish_reason != "abort":
            self._request_completed()
        return response

    # Generation responses, in the dialect's shapes.

    @staticmethod
    def _options(params: api.GenerationParams) -> dict[str, Any]:
        return {"include_usage": params.include_usage, "return_spec_tokens_details": params.return_spec_tokens_details}

    async def _respond_openai(
        self, request: web.Request, req: SimRequest, params: api.GenerationParams, *, chat: bool
    ) -> web.StreamResponse:
        created = int(time.time())
        model = params.model or self.config.model
        dialect = self.dialect
        options = self._options(params)
        if not params.stream:
            while not req.finished:
                await req.deltas()
            if req.finish_reason == "abort":
                return self._error(
                    503, "The request was aborted: the server is shutting down.", "ServiceUnavailableError"
                )
            body = dialect.openai_response(req, chat=chat, model=model, created=created, options=options)
            return await self._send_json(request, body)
        fmt = dialect.stream_format(req, chat=chat, model=model, created=created)
        resp = web.StreamResponse(headers=_SSE_HEADERS)
        await resp.prepare(request)
        first = fmt.first is not None
        while True:
            deltas = await req.deltas()
            parts: list[str] = []
            if deltas and first:
                parts.append(fmt.first or "")
                first = False
            parts.extend(fmt.content(d) for d in deltas if d)
            if req.finished and not req.pending:
                if req.finish_reason == "abort":
                    break
                reason = req.finish_reason or "stop"
                parts.extend(dialect.stream_tail(req, fmt, reason=reason, options=options))
                if self.config.faults.no_done:  # faults.py no-done: no end marker, and the body never ends
                    await resp.write("".join(parts).encode())
                    await self._hold_open(request)
                    return resp
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
        """SGLang's ``/generate``: ``text`` (cumulative when streamed) and ``meta_info``."""
        start = time.monotonic()
        dialect = self.dialect

        def meta(final: bool) -> dict[str, Any]:
            return dialect.native_meta_info(req, final=final, e2e_latency=time.monotonic() - start)

        if not params.stream:
            while not req.finished:
                await req.deltas()
            if req.finish_reason == "abort":
                return self._error(
                    503, "The request was aborted: the server is shutting down.", "ServiceUnavailableError"
                )
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

    async def _hold_open(self, request: web.Request) -> None:
        """Keep a response's body open until the client closes the connection or the server stops (no-done)."""
        while not self._closing and request.transport is not None and not request.transport.is_closing():
            await asyncio.sleep(0.05)

    @staticmethod
    async def _send_json(request: web.Request, body: dict[str, Any]) -> web.Response:
        # Written here rather than returned, so the request counts as completed only once it is sent.
        resp = _json_response(body)
        await resp.prepare(request)
        await resp.write_eof()
        return resp

    # Health and information endpoints.

    def _endpoint_handler(self, endpoint: EndpointInfo) -> Callable[[web.Request], Any]:
        kind = endpoint.kind

        async def handler(request: web.Request) -> web.StreamResponse:
            unavailable = self._unavailable()
            if unavailable is not None:
                return unavailable
            if kind == "health":
                if endpoint.body is None:
                    return web.Response(status=200)
                return web.Response(status=200, text=endpoint.body, content_type="application/json")
            if kind == "health_generate":
                return await self._health_generate()
            if kind == "models":
                return _json_response(self.dialect.models())
            if kind == "metrics":
                text = _counter_faults(self.dialect.metrics_text(bad_line=self.config.faults.bad_metrics), self.config)
                self._metrics_answers += 1
                after = self.config.faults.dribble_metrics_after
                if after is not None and self._metrics_answers > after:
                    self._log(f"fault dribble-metrics: /metrics answer {self._metrics_answers} sent one byte a second")
                    return await _dribble(request, text)
                return web.Response(text=text, content_type="text/plain", charset="utf-8")
            if kind == "model_info":
                self.dialect.info_requested(endpoint.path)
                return _json_response(self.dialect.model_info())
            if kind == "info":
                self.dialect.info_requested(endpoint.path)
            return _json_response(self.dialect.info(self.port))

        return handler

    def _control_handler(self, path: str) -> Callable[[web.Request], Any]:
        """The engine's control endpoints (its prefix-cache flush), answered by the dialect."""

        async def handler(request: web.Request) -> web.StreamResponse:
            unavailable = self._unavailable()
            if unavailable is not None:
                return unavailable
            busy = any(e.busy for e in self.engines)
            params = {**dict(request.query), **dict(request.match_info)}
            status, body = self.dialect.control(request.method, path, params, busy)
            if isinstance(body, (dict, list)):
                return _json_response(body, status)
            if isinstance(body, str):
                return web.Response(status=status, text=body, content_type="text/plain")
            return web.Response(status=status)

        return handler

    async def _health_generate(self) -> web.StreamResponse:
        """SGLang's health probe: one token through the scheduler, not counted in the metrics."""
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
        req = self._new_request(params, faults=False, log_metrics=False)
        self._submit(req)
        try:
            while not req.finished:
                await req.deltas()
        finally:
            req.abort()
        if req.finish_reason == "abort":
            return web.Response(status=503)
        return web.Response(status=200)


_LOGIN_PAGE = (
    '<!DOCTYPE html>\n<html><head><title>Sign in</title></head>\n<body><form method="post" action="/login">'
    '<input name="user"><input name="password" type="password"><button>Sign in</button></form></body></html>\n'
)


def _counter_faults(text: str, config: SimConfig) -> str:
    """The duplicate-series and nan-counters faults (orchestrator/sim/faults.py) applied to one /metrics answer:
    each counter sample (a name ending ``_total``) followed by itself again with the value 0, or given NaN."""
    faults = config.faults
    if not (faults.duplicate_series or faults.nan_counters):
        return text
    out: list[str] = []
    for line in text.splitlines():
        head, _, _value = line.rpartition(" ")
        counter = bool(head) and not line.startswith("#") and head.split("{", 1)[0].endswith("_total")
        if counter and faults.nan_counters:
            line = head + " NaN"
        out.append(line)
        if counter and faults.duplicate_series:
            out.append(head + " 0.0")
    return "\n".join(out) + "\n"


async def _dribble(request: web.Request, text: str) -> web.StreamResponse:
    """The ``dribble-metrics`` fault: the headers, then the body one byte a second until the client leaves."""
    response = web.StreamResponse(headers={"Content-Type": "text/plain; charset=utf-8"})
    await response.prepare(request)
    for byte in text.encode("utf-8"):
        await response.write(bytes([byte]))
        await asyncio.sleep(1.0)
    return response
