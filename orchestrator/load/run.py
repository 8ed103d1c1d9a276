"""One load run end to end: resolve the workload and model, warm up, run the loop, summarise.

``run_load`` is what the sweep runner and ``specsweep load`` call. It raises ``LoadError`` only when the run
cannot start (bad prompts file, no model name to be had); a server that refuses or fails requests yields a
result whose ``errors`` say so. With ``stop`` set mid-run it returns promptly with what finished, marked
``partial``. Progress goes to the optional callback a few times a second, never to a terminal.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque

from orchestrator.load.adaptive import AdaptiveStop
from orchestrator.load.client import LoadClient, discover_model
from orchestrator.load.eventloop import loop_name
from orchestrator.load.loops import LoopState, closed_loop, open_loop, run_batch
from orchestrator.load.records import RequestRecord
from orchestrator.load.result import LoadProgress, LoadResult, ProgressCallback
from orchestrator.load.settings import LoadSettings
from orchestrator.load.stats import summarize
from orchestrator.load.workloads import load_workload

__all__ = ["LoadProgress", "LoadResult", "run_load"]

_TICK_S = 0.25
_LIVE_WINDOW_S = 2.0


async def run_load(
    settings: LoadSettings,
    progress: ProgressCallback | None = None,
    stop: asyncio.Event | None = None,
) -> LoadResult:
    """Warm up, then run one load point; see the module docstring."""
    if settings.workers > 1:
        from orchestrator.load.workers import run_load_workers  # several processes, one merged result

        result: LoadResult = await run_load_workers(settings, progress, stop)
        return result
    workload = load_workload(settings.prompts, settings.seed)
    model = settings.model
    if model is None and settings.api in ("chat", "completions"):
        model = await discover_model(settings)
    wall0, perf0 = time.time(), time.perf_counter()

    adaptive = (
        AdaptiveStop(
            settings.until_rel_ci,
            settings.until_figure,
            settings.until_min_requests,
            open_loop=settings.open_loop,
            level=settings.until_level,
        )
        if settings.until_rel_ci is not None
        else None
    )
    keep_going = adaptive.keep_going if adaptive is not None else None

    async with LoadClient(settings, model) as client:
        warm = LoopState()
        measured = LoopState()
        ticker = (
            asyncio.create_task(_tick(progress, client, settings, warm, measured)) if progress is not None else None
        )
        try:
            if settings.warmup:

                async def send_warmup(i: int) -> RequestRecord:
                    return await client.send(i, workload.warmup_prompt(i), warmup=True)

                await run_batch(send_warmup, settings.warmup, settings.in_flight_cap or 1, stop, warm)

            prompt = workload.warmup_prompt if settings.warmup_prompts else workload.prompt

            async def send(i: int) -> RequestRecord:
                return await client.send(i, prompt(i))

            if not warm.partial:
                if settings.open_loop:
                    assert settings.rate is not None
                    await open_loop(
                        send,
                        settings.rate,
                        settings.in_flight_cap,
                        settings.request_budget,
                        settings.duration_s,
                        settings.seed,
                        stop,
                        measured,
                        keep_going,
                    )
                else:
                    assert settings.concurrency is not None
                    await closed_loop(
                        send,
                        settings.concurrency,
                        settings.request_budget,
                        settings.duration_s,
                        stop,
                        measured,
                        keep_going,
                    )
        finally:
            if ticker is not None:
                ticker.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await ticker

    records = sorted(measured.records, key=lambda r: r.index)
    figures = summarize(
        records,
        open_loop=settings.open_loop,
        concurrency=settings.concurrency,
        started=measured.started,
        ended=measured.ended,
    )
    started = measured.started if measured.started is not None else time.perf_counter()
    ended = measured.ended if measured.ended is not None else started
    figures["stopped_by"] = _stopped_by(settings, measured, adaptive if not warm.partial else None, warm.partial)
    if adaptive is not None:
        figures["until"] = {
            "figure": adaptive.figure,
            "rel_ci": adaptive.rel_ci,
            "min_requests": adaptive.min_requests,
            "reached_rel_ci": round(adaptive.reached_rel, 5) if adaptive.reached_rel is not None else None,
            "reached_at_requests": adaptive.reached_at,
            "last_rel_ci": round(adaptive.last_rel, 5) if adaptive.last_rel is not None else None,
            "checks": adaptive.checks,
        }
    result = LoadResult(
        settings=settings,
        model=model,
        figures=figures,
        records=records,
        warmup_requests=len(warm.records),
        warmup_errors=warm.errors,
        cancelled=measured.cancelled + warm.cancelled,
        partial=warm.partial or measured.partial,
        started_at=wall0 + (started - perf0),
        ended_at=wall0 + (ended - perf0),
        event_loop=loop_name(asyncio.get_running_loop()),
    )
    if progress is not None:
        progress(
            LoadProgress(
                phase="done",
                done=len(records),
                total=settings.request_budget,
                errors=measured.errors,
                elapsed_s=ended - started,
                duration_s=settings.duration_s,
                live_tok_s=0.0,
            )
        )
    return result


def _stopped_by(settings: LoadSettings, state: LoopState, adaptive: AdaptiveStop | None, partial: bool) -> str:
    """Why the load ended: ``stopped`` (a stop request), ``target`` (adaptive stopping reached its interval),
    ``max_requests`` / ``max_duration`` (an adaptive point's caps), ``requests`` / ``duration`` (a fixed one)."""
    if partial or state.partial:
        return "stopped"
    budget = settings.request_budget
    spent = budget is not None and state.dispatched >= budget
    if adaptive is not None:
        if adaptive.reached:
            return "target"
        return "max_requests" if spent else "max_duration"
    return "requests" if spent or settings.duration_s is None else "duration"


async def _tick(
    progress: ProgressCallback,
    client: LoadClient,
    settings: LoadSettings,
    warm: LoopState,
    measured: LoopState,
) -> None:
    """Report progress every ``_TICK_S`` seconds, with tokens per second over the last ``_LIVE_WINDOW_S``."""
    samples: deque[tuple[float, int]] = deque()
    perf = time.perf_counter
    while True:
        now = perf()
        samples.append((now, client.tokens_seen))
        while samples and now - samples[0][0] > _LIVE_WINDOW_S:
            samples.popleft()
        t0, n0 = samples[0]
        live = (client.tokens_seen - n0) / (now - t0) if now > t0 else 0.0
        if measured.started is None:
            report = LoadProgress(
                "warmup", len(warm.records), settings.warmup, warm.errors, 0.0, settings.duration_s, live
            )
        else:
            report = LoadProgress(
                "load",
                len(measured.records),
                settings.request_budget,
                measured.errors,
                now - measured.started,
                settings.duration_s,
                live,
            )
        progress(report)
        await asyncio.sleep(_TICK_S)
