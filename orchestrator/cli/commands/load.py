"""`specsweep load --url URL --concurrency 1,8,64 [...]`: fire load at a server and print what it measured.

One run per level (each concurrency, then each rate), a progress bar on stderr while it runs (outside a
terminal: a line when a level starts, every ten seconds, and when it ends), then a table fitted to the width;
with ``--json``, one JSON object per level on stdout instead. Ctrl-C stops the level in flight, prints what
finished (marked partial) and exits 130. A server whose ``/health`` answers 503 is still loading: the command
says what to wait for and sends nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import signal
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from orchestrator.cli.console import console, err_console
from orchestrator.cli.textfit import Column, fit_table
from orchestrator.engines.registry import engine_names
from orchestrator.errors import Interrupted, LoadError
from orchestrator.experiment.durations import parse_duration
from orchestrator.load import API_PATHS, LoadSettings
from orchestrator.load.datasets import FORMATS, WorkloadSource
from orchestrator.load.settings import engine_request_extras

if TYPE_CHECKING:
    from orchestrator.load import LoadProgress, LoadResult


def _numbers(text: str | None, kind: type, option: str) -> list[Any]:
    if not text:
        return []
    values = []
    for part in text.split(","):
        try:
            value = kind(part.strip())
        except ValueError:
            raise typer.BadParameter(f"{part.strip()!r} is not a number", param_hint=option) from None
        if value <= 0:
            raise typer.BadParameter(f"{part.strip()} must be above zero", param_hint=option)
        values.append(value)
    return values


def _seconds(text: str | None, option: str) -> float | None:
    if text is None:
        return None
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint=option) from None


def _ms(dist: dict[str, Any], key: str) -> str:
    value = dist.get(key)
    return "-" if value is None else f"{value:.1f}"


def _label(settings: LoadSettings) -> str:
    return f"rate={settings.rate:g}/s" if settings.rate is not None else f"C={settings.concurrency}"


def render_results(results: list[LoadResult], width: int = 80) -> Table:
    """The figures of each level, fitted to ``width`` (:func:`orchestrator.cli.textfit.fit_table`): the level,
    its requests, errors and throughput always; the latencies and the rest as the width allows."""
    columns = [
        Column("level", "left", required=True),
        Column("req", required=True),
        Column("err", required=True),
        Column("tok/s", required=True),
        Column("steady", priority=40),
        Column("user", priority=50),
        Column("TTFT ms", priority=70),
        Column("ITL ms", priority=60),
        Column("TPOT", priority=45),
        Column("accept", priority=80),
    ]
    rows: list[list[Any]] = []
    notes: list[str] = []
    for result in results:
        d = result.to_dict()
        level = f"C={d['concurrency']}" if d["loop"] == "closed" else f"{d['rate']:g}/s"
        if d["partial"]:
            level += "*"
            notes.append(f"{level}: partial (interrupted)")
        if d["errors_by_kind"]:
            kinds = ", ".join(f"{k} x{v}" for k, v in d["errors_by_kind"].items())
            notes.append(f"{level}: errors: {kinds}")
        per_user = d["per_user_tok_s"]
        accept = d["spec"]["accept_len"]
        rows.append(
            [
                Text(level),
                str(d["requests"]),
                str(d["errors"]),
                f"{d['output_tok_s']:,.0f}",
                f"{d['steady_output_tok_s']:,.0f}",
                "-" if per_user is None else f"{per_user:,.0f}",
                f"{_ms(d['ttft_ms'], 'p50')}/{_ms(d['ttft_ms'], 'p99')}",
                f"{_ms(d['itl_ms'], 'p50')}/{_ms(d['itl_ms'], 'p99')}",
                _ms(d["tpot_ms"], "p50"),
                "-" if accept is None else f"{accept:.2f}",
            ]
        )
    caption = "\n".join(
        [
            "tok/s: output tokens per second (steady: without ramp-up and drain); user: decode tok/s per request;",
            "TTFT and ITL: p50/p99 in ms; TPOT: p50 in ms; accept: accept length from response metadata",
            *notes,
        ]
    )
    return fit_table(columns, rows, width, title="load", caption=caption)


async def _run_levels(
    levels: list[LoadSettings],
    on_progress: Callable[[int, LoadProgress], None],
    on_start: Callable[[int], None] | None = None,
) -> tuple[list[LoadResult], bool]:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    with contextlib.suppress(NotImplementedError, RuntimeError):  # not the main thread, or no signals here
        loop.add_signal_handler(signal.SIGINT, stop.set)
    results: list[LoadResult] = []
    try:
        for number, settings in enumerate(levels):
            from orchestrator.load import run_load

            if on_start is not None:
                on_start(number)
            result = await run_load(settings, progress=functools.partial(on_progress, number), stop=stop)
            results.append(result)
            if stop.is_set():
                break
    finally:
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.remove_signal_handler(signal.SIGINT)
    return results, stop.is_set()


def load(
    url: str = typer.Option(..., "--url", help="Server base URL, e.g. http://127.0.0.1:30000", show_default=False),
    model: str | None = typer.Option(None, "--model", help="Model name (default: the first of GET /v1/models)."),
    api: str = typer.Option("chat", "--api", help=f"API to call: {', '.join(API_PATHS)}."),
    concurrency: str | None = typer.Option(None, "--concurrency", "-c", help="Closed-loop levels, e.g. 1,8,64."),
    rate: str | None = typer.Option(None, "--rate", help="Open-loop levels in requests/s (Poisson), e.g. 2,4.5."),
    max_in_flight: int | None = typer.Option(None, "--max-in-flight", min=1, help="Open loop: in-flight cap."),
    requests: int | None = typer.Option(None, "--requests", "-n", min=1, help="Measured requests per level."),
    duration: str | None = typer.Option(None, "--duration", help="Time per level instead, e.g. 30s, 2m."),
    warmup: int = typer.Option(3, "--warmup", min=0, help="Warm-up requests per level (not measured)."),
    max_tokens: int = typer.Option(256, "--max-tokens", min=1, help="Output tokens asked for per request."),
    temperature: float = typer.Option(0.0, "--temperature", min=0.0, help="Sampling temperature."),
    prompts: str = typer.Option(
        "builtin:chat", "--prompts", help="builtin:chat, a .jsonl/.json file, or synthetic:in=128,out=256."
    ),
    prompts_format: str = typer.Option(
        "auto", "--format", help="How to read the prompts file: auto, jsonl, sharegpt, specbench, speedbench."
    ),
    category: str | None = typer.Option(
        None, "--category", help="Keep only the rows of this category (SpecBench, SPEED-Bench).", show_default=False
    ),
    ignore_eos: bool = typer.Option(False, "--ignore-eos", help="Ask the server to ignore end-of-sequence."),
    seed: int = typer.Option(0, "--seed", help="Seed of the prompt order and of open-loop arrivals."),
    no_stream: bool = typer.Option(False, "--no-stream", help="Ask for whole responses (no TTFT or ITL)."),
    connect_timeout: str = typer.Option("10s", "--connect-timeout", help="Connection timeout."),
    first_token_timeout: str = typer.Option("300s", "--first-token-timeout", help="Time-to-first-token limit."),
    total_timeout: str = typer.Option("900s", "--total-timeout", help="Whole-request limit."),
    api_key: str | None = typer.Option(
        None, "--api-key", envvar="SPECSWEEP_API_KEY", help="Bearer token (or $SPECSWEEP_API_KEY).", show_default=False
    ),
    workers: int = typer.Option(
        1,
        "--workers",
        min=1,
        help="Processes that share each level's load (one clock, one merged result); for more than a core's "
        "worth of tokens per second.",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object per level instead of a table."),
    engine: str | None = typer.Option(
        None,
        "--engine",
        help="sglang, vllm, llamacpp or sim: ask that engine for its per-response speculative figures "
        "(SGLang's return_spec_tokens_details on chat and completions; see docs/engines.md).",
    ),
) -> None:
    """Fire load at a server (closed loop per concurrency, open loop per rate) and show what it measured.

    A server still loading (HTTP 503 on /health) is not loaded: the command says to wait until it is ready."""
    if engine is not None and engine not in engine_names():
        raise typer.BadParameter(f"choose one of {', '.join(engine_names())}", param_hint="--engine")
    if api not in API_PATHS:
        raise typer.BadParameter(f"choose one of {', '.join(API_PATHS)}", param_hint="--api")
    if prompts_format not in FORMATS:
        raise typer.BadParameter(f"choose one of {', '.join(FORMATS)}", param_hint="--format")
    source: str | WorkloadSource = prompts
    if prompts_format != "auto" or category is not None:
        source = WorkloadSource(prompts, format=prompts_format, category=category)
    levels_c = _numbers(concurrency, int, "--concurrency")
    levels_r = _numbers(rate, float, "--rate")
    if not levels_c and not levels_r:
        levels_c = [1]
    common: dict[str, Any] = {
        "url": url,
        "model": model,
        "api": api,
        "requests": requests,
        "duration_s": _seconds(duration, "--duration"),
        "warmup": warmup,
        "max_tokens": max_tokens,
        "temperature": temperature,
        "prompts": source,
        "ignore_eos": ignore_eos,
        "seed": seed,
        "stream": not no_stream,
        "connect_timeout": _seconds(connect_timeout, "--connect-timeout"),
        "first_token_timeout": _seconds(first_token_timeout, "--first-token-timeout"),
        "total_timeout": _seconds(total_timeout, "--total-timeout"),
        "api_key": api_key,
        "extra_body": engine_request_extras(engine, api),
        "workers": workers,
    }
    levels = [LoadSettings(concurrency=c, **common) for c in levels_c]
    levels += [LoadSettings(rate=r, max_in_flight=max_in_flight, **common) for r in levels_r]

    _refuse_loading_server(url, api_key)
    show_bar = not as_json and err_console.is_terminal
    lines = _LevelLines(levels) if not as_json and not show_bar else None
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed:.0f}/{task.fields[of]}"),
        TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(),
        console=err_console,
        transient=True,
        disable=not show_bar,
    ) as bar:
        tasks: dict[int, TaskID] = {}

        def on_start(number: int) -> None:
            if lines is not None:
                lines.start(number)
            elif show_bar and number not in tasks:  # at once: the model lookup and warm-up come first
                tasks[number] = bar.add_task(f"{_label(levels[number])} starting", total=None, of="?", rate="")

        def on_progress(number: int, report: LoadProgress) -> None:
            if lines is not None:
                lines.progress(number, report)
                return
            label = _label(levels[number])
            if number not in tasks:
                tasks[number] = bar.add_task(label, total=None, of="?", rate="")
            if report.total is not None:
                total: float | None = float(report.total)
                completed = float(report.done)
                of = str(report.total)
            elif report.duration_s is not None:
                total, completed, of = report.duration_s, min(report.elapsed_s, report.duration_s), "time"
            else:
                total, completed, of = None, float(report.done), "?"
            phase = "warm-up " if report.phase == "warmup" else ""
            bar.update(
                tasks[number],
                description=f"{phase}{label}",
                total=total,
                completed=completed,
                of=of,
                rate=f"{report.live_tok_s:,.0f} tok/s, {report.errors} errors",
            )

        from orchestrator.load import eventloop

        results, interrupted = eventloop.run(_run_levels(levels, on_progress, on_start))

    if as_json:
        for result in results:
            typer.echo(json.dumps(result.to_dict()))
    else:
        console.print(render_results(results, console.width))
    sys.stdout.flush()
    if any("http_503" in r.figures.get("errors_by_kind", {}) for r in results):
        err_console.print(f"[yellow]hint:[/yellow] {escape(_LOADING_HINT.format(url=url.rstrip('/')))}", soft_wrap=True)
    if interrupted:
        raise Interrupted("load: interrupted; the results above are partial")
    dead = [r for r in results if r.requests and not r.figures["completed"]]
    if dead:
        kinds = ", ".join(sorted({k for r in dead for k in r.figures["errors_by_kind"]}))
        raise LoadError(f"load: no request succeeded at {', '.join(_label(r.settings) for r in dead)} ({kinds})")


_LOADING_HINT = (
    "the server answered HTTP 503: it is still loading the model; wait until GET {url}/health answers 200 "
    "(the engine logs that it is ready), then run specsweep load again (a sweep waits for this itself)"
)


def _refuse_loading_server(url: str, api_key: str | None) -> None:
    """Before any load: a server whose health endpoint answers 503 is still loading, and every request would
    fail at once; say so, with what to wait for, instead. Nothing listening at the URL (connection refused, an
    unknown host) is said with the URL. Any other answer (or a slow one) lets the load run."""
    import httpx

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        status = httpx.get(url.rstrip("/") + "/health", timeout=5.0, headers=headers).status_code
    except httpx.ConnectError as exc:  # refused, or no such host: every request would fail the same way
        raise LoadError(
            f"load: cannot connect to {url} ({exc or 'no answer'}): check the URL's host and port (is the server "
            "running and listening there?); nothing was sent"
        ) from None
    except httpx.HTTPError:
        return  # slow, or another failure: the load itself says what happened
    if status == 503:
        raise LoadError(f"load: {_LOADING_HINT.format(url=url.rstrip('/'))}; nothing was sent")


class _LevelLines:
    """Progress outside a terminal (a pipe, a CI log): a line when a level starts, one every ``EVERY``
    seconds while it runs, and one when it ends, each naming its level."""

    EVERY = 10.0

    def __init__(self, levels: list[LoadSettings]) -> None:
        self.levels = levels
        self._said = 0.0

    def _say(self, text: str) -> None:
        err_console.print(escape(text), soft_wrap=True, highlight=False)

    def start(self, number: int) -> None:
        settings = self.levels[number]
        budget = settings.request_budget
        if budget is not None and settings.duration_s is not None:
            size = f"up to {budget} requests or {settings.duration_s:g} s"
        elif budget is not None:
            size = f"{budget} requests"
        else:
            size = f"{settings.duration_s:g} s"
        warm = f" after {settings.warmup} warm-up requests" if settings.warmup else ""
        self._say(f"{_label(settings)}: {size}{warm} ({number + 1}/{len(self.levels)})")
        self._said = time.monotonic()

    def progress(self, number: int, report: LoadProgress) -> None:
        label = _label(self.levels[number])
        if report.phase == "done":
            self._say(f"{label}: done, {report.done} requests, {report.errors} errors in {report.elapsed_s:.1f} s")
            return
        now = time.monotonic()
        if now - self._said < self.EVERY:
            return
        self._said = now
        of = f"/{report.total}" if report.total is not None else ""
        phase = "warm-up " if report.phase == "warmup" else ""
        self._say(f"{label}: {phase}{report.done}{of} requests, {report.errors} errors, {report.live_tok_s:,.0f} tok/s")


def register(app: typer.Typer) -> None:
    app.command("load")(load)
