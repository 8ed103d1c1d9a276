"""One load point from several worker processes: one clock, one result.

A single process ingests a few hundred thousand tokens a second at most (bench/RESULTS-load.md), and a client
that saturates its core starts to distort what it measures. With ``LoadSettings.workers = W > 1`` the point's
load is shared by W processes, each running the ordinary client (:mod:`orchestrator.load.client`) on its own
event loop, and the parent merges what they measured into one :class:`~orchestrator.load.run.LoadResult`:

- The work is split, not copied. Request ``i`` (measured or warm-up) belongs to worker ``i mod W``, so every
  index is sent once and gets the prompt a single process would have given it; worker ``w`` runs
  ``C // W`` streams (one more when ``w < C mod W``) of a closed loop, or ``1 / W`` of an open loop's rate
  (and of its in-flight cap), with arrivals seeded by the point's seed and ``w``; the superposition of the W
  Poisson processes is a Poisson process of the whole rate. The first C indices are then exactly the workers'
  first waves, so the steady window (:func:`~orchestrator.load.stats.steady_window`) means what it means for
  one process.
- One clock. Every time in a record is ``time.perf_counter()`` taken in the worker that sent the request (its
  TTFT and ITL come from its own stamps, never from a message between processes); that clock is the system's
  monotonic clock, the same in every process (checked: :func:`shared_clock`). The measured phase starts in
  every worker at one instant the parent picks on that clock, after all of them finished their warm-up.
- One result. The parent collects every worker's records and runs :func:`~orchestrator.load.stats.summarize`
  over their union (an index seen twice is an error), exactly as over one process's records. Progress
  reports sum the workers' counts.

The model name is resolved once, by the parent. A worker is a fresh interpreter (``python -m
orchestrator.load.workers FD``, not ``multiprocessing``, so the caller's script is never imported again and
needs no ``__main__`` guard) that talks to the parent over a socket pair; it runs until the point ends: a
stop request reaches it, the parent's end closes its socket (it stops), and a worker that dies fails the point
with a ``LoadError``. POSIX only (the socket is handed over as an inherited descriptor).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import socket
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from orchestrator.errors import LoadError
from orchestrator.load.records import RequestRecord
from orchestrator.load.settings import LoadSettings

__all__ = ["run_load_workers", "shared_clock", "split"]

_TICK_S = 0.25
# The measured phase starts this long after the parent says go: time for the message to cross a local socket
# pair (well under a millisecond); a worker that reads it later starts at once. Every worker that finished its
# warm-up idles until then (and the server sees its streams open but silent), so it is kept short.
_START_AHEAD_S = 0.005
_JOIN_S = 10.0

# time.perf_counter's implementations that read a clock shared by every process of the machine.
_SHARED_CLOCKS = ("clock_gettime(CLOCK_MONOTONIC)", "mach_absolute_time()", "QueryPerformanceCounter()")


def shared_clock() -> bool:
    """True when ``time.perf_counter()`` reads the machine's monotonic clock (the same in every process)."""
    return time.get_clock_info("perf_counter").implementation in _SHARED_CLOCKS


@dataclasses.dataclass(frozen=True, slots=True)
class Share:
    """Worker ``number`` of ``workers``: its part of the point."""

    number: int
    workers: int
    concurrency: int | None
    rate: float | None
    max_in_flight: int | None
    budget: int | None  # measured requests (None: until the duration ends)
    warmup: int

    def index(self, local: int) -> int:
        """The point's index of this worker's ``local``-th request."""
        return self.number + self.workers * local


def split(settings: LoadSettings) -> list[Share]:
    """The workers' shares of ``settings`` (fewer than ``settings.workers`` when there is not enough to share)."""
    budget = settings.request_budget
    workers = settings.workers
    if not settings.open_loop:
        assert settings.concurrency is not None
        workers = min(workers, settings.concurrency)
    if budget is not None:
        workers = min(workers, budget)
    workers = max(1, workers)

    def part(total: int, w: int) -> int:
        """How many of ``total`` indices (0 .. total-1) are worker ``w``'s (those equal to w modulo W)."""
        return total // workers + (1 if w < total % workers else 0)

    shares = []
    for w in range(workers):
        cap = settings.in_flight_cap if settings.open_loop else None
        shares.append(
            Share(
                number=w,
                workers=workers,
                concurrency=part(settings.concurrency, w) if settings.concurrency is not None else None,
                rate=settings.rate / workers if settings.rate is not None else None,
                max_in_flight=max(1, part(cap, w)) if cap is not None else None,
                budget=part(budget, w) if budget is not None else None,
                warmup=part(settings.warmup, w),
            )
        )
    return shares


def _settings_dict(settings: LoadSettings) -> dict[str, Any]:
    """``settings`` as plain values a pipe can carry (``extra_body`` is a read-only mapping)."""
    values = {f.name: getattr(settings, f.name) for f in dataclasses.fields(settings)}
    values["extra_body"] = dict(settings.extra_body)
    return values


# -- the parent ------------------------------------------------------------------------------------------------


async def run_load_workers(
    settings: LoadSettings,
    progress: Callable[[Any], None] | None = None,
    stop: asyncio.Event | None = None,
) -> Any:
    """:func:`orchestrator.load.run.run_load` for ``settings.workers > 1``; see the module docstring."""
    from orchestrator.load.client import discover_model
    from orchestrator.load.result import LoadProgress, LoadResult
    from orchestrator.load.stats import summarize
    from orchestrator.load.workloads import load_workload

    if os.name != "posix":
        raise LoadError("load: workers above 1 need a POSIX system (Linux, macOS)")
    if settings.until_rel_ci is not None:
        raise LoadError("load: adaptive stopping (until) needs one process; set workers to 1")
    if not shared_clock():
        raise LoadError(
            "load: workers need a clock shared by every process; time.perf_counter here is "
            f"{time.get_clock_info('perf_counter').implementation}"
        )
    load_workload(settings.prompts, settings.seed)  # a bad prompts file fails here, before any process starts
    model = settings.model
    if model is None and settings.api in ("chat", "completions"):
        model = await discover_model(settings)
    shares = split(settings)
    wall0, perf0 = time.time(), time.perf_counter()
    loop = asyncio.get_running_loop()
    inbox: asyncio.Queue[tuple[int, str, Any]] = asyncio.Queue()
    processes: list[subprocess.Popen[bytes]] = []
    pipes: list[Connection] = []
    sockets: list[socket.socket] = []
    threads: list[threading.Thread] = []

    def reader(w: int, conn: Connection) -> None:
        """A thread per worker reads its messages (blocking reads: an event loop that watched the socket would
        make it non-blocking, and a message does not arrive in one read), and queues them for the loop."""
        while True:
            try:
                kind, body = conn.recv()
            except (EOFError, OSError):
                loop.call_soon_threadsafe(inbox.put_nowait, (w, "died", None))
                return
            loop.call_soon_threadsafe(inbox.put_nowait, (w, kind, body))
            if kind in ("done", "failed"):
                return

    def tell(message: tuple[str, Any]) -> None:
        for conn in pipes:
            with contextlib.suppress(OSError):
                conn.send(message)

    base = _settings_dict(settings)
    try:
        for share in shares:
            ours, theirs = socket.socketpair()
            with theirs:
                process = subprocess.Popen(
                    [sys.executable, "-m", "orchestrator.load.workers", str(theirs.fileno())],
                    pass_fds=(theirs.fileno(),),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                )
            mine = Connection(os.dup(ours.fileno()))
            processes.append(process)
            pipes.append(mine)
            sockets.append(ours)
            mine.send(("start", {"settings": base, "model": model, "share": dataclasses.asdict(share)}))
            thread = threading.Thread(target=reader, args=(share.number, mine), daemon=True)
            thread.start()
            threads.append(thread)

        counts = {s.number: {"phase": "warmup", "done": 0, "errors": 0, "tokens": 0} for s in shares}
        ready: dict[int, dict[str, Any]] = {}
        done: dict[int, dict[str, Any]] = {}
        stopped = False
        measured_start: float | None = None
        samples: list[tuple[float, int]] = []
        last_tick = 0.0
        stop_wait = asyncio.create_task(stop.wait()) if stop is not None else None
        try:
            while len(done) < len(shares):
                get = asyncio.create_task(inbox.get())
                waiting: set[asyncio.Future[Any]] = {get}
                if stop_wait is not None and not stopped:
                    waiting.add(stop_wait)
                finished, _ = await asyncio.wait(waiting, timeout=_TICK_S, return_when=asyncio.FIRST_COMPLETED)
                if stop_wait is not None and stop_wait in finished and not stopped:
                    stopped = True
                    tell(("stop", None))
                if get in finished:
                    w, kind, body = get.result()
                    if kind == "progress":
                        counts[w] = body
                    elif kind == "ready":
                        ready[w] = body
                        if len(ready) == len(shares) and not stopped:
                            measured_start = time.perf_counter() + _START_AHEAD_S
                            tell(("go", measured_start))
                    elif kind == "done":
                        done[w] = body
                    elif kind == "failed":
                        raise LoadError(f"load: worker {w} failed: {body}")
                    elif kind == "died" and w not in done:
                        raise LoadError(f"load: worker {w} exited before it reported ({_exit(processes[w])})")
                else:
                    get.cancel()
                now = time.perf_counter()
                if progress is not None and now - last_tick >= _TICK_S:
                    last_tick = now
                    progress(_progress(LoadProgress, counts, settings, measured_start, now, samples))
        finally:
            if stop_wait is not None:
                stop_wait.cancel()
    finally:
        tell(("stop", None))
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)  # a worker still running reads the end and stops; so do readers
        for process in processes:
            try:
                await asyncio.to_thread(process.wait, _JOIN_S)
            except subprocess.TimeoutExpired:
                process.kill()
                await asyncio.to_thread(process.wait, _JOIN_S)
        for thread in threads:
            await asyncio.to_thread(thread.join, _JOIN_S)
        for conn in pipes:
            conn.close()
        for sock in sockets:
            sock.close()

    records: list[RequestRecord] = sorted((r for body in done.values() for r in body["records"]), key=lambda r: r.index)
    seen = [r.index for r in records]
    if len(set(seen)) != len(seen):
        raise LoadError("load: two workers measured the same request index (a bug: the split overlaps)")
    starts = [b["started"] for b in done.values() if b["started"] is not None]
    ends = [b["ended"] for b in done.values() if b["ended"] is not None]
    started = min(starts) if starts else time.perf_counter()
    ended = max(ends) if ends else started
    figures = summarize(
        records,
        open_loop=settings.open_loop,
        concurrency=settings.concurrency,
        started=min(starts) if starts else None,
        ended=max(ends) if ends else None,
    )
    budget = settings.request_budget
    spent = budget is not None and sum(b["dispatched"] for b in done.values()) >= budget
    partial = any(b["partial"] for b in done.values()) or stopped
    # As run_load says it (orchestrator/load/run.py _stopped_by), for a point without adaptive stopping.
    figures["stopped_by"] = (
        "stopped" if partial else ("requests" if spent or settings.duration_s is None else "duration")
    )
    figures["worker_figures"] = [
        {
            "worker": w,
            "requests": len(done[w]["records"]),
            "output_tokens": sum(r.output_tokens for r in done[w]["records"] if r.ok),
            "cpu_s": round(done[w]["cpu_s"], 3),
        }
        for w in sorted(done)
    ]
    result = LoadResult(
        settings=settings,
        model=model,
        figures=figures,
        records=records,
        warmup_requests=sum(b["warmup_requests"] for b in done.values()),
        warmup_errors=sum(b["warmup_errors"] for b in done.values()),
        cancelled=sum(b["cancelled"] for b in done.values()),
        partial=partial,
        started_at=wall0 + (started - perf0),
        ended_at=wall0 + (ended - perf0),
        event_loop=next(iter(done.values()))["event_loop"] if done else "asyncio",
    )
    if progress is not None:
        progress(
            LoadProgress(
                phase="done",
                done=len(records),
                total=settings.request_budget,
                errors=figures["errors"],
                elapsed_s=ended - started,
                duration_s=settings.duration_s,
                live_tok_s=0.0,
            )
        )
    return result


def _exit(process: subprocess.Popen[bytes]) -> str:
    code = process.poll()
    return "its socket closed" if code is None else f"exit code {code}"


def _progress(
    progress_type: Any,
    counts: dict[int, dict[str, Any]],
    settings: LoadSettings,
    measured_start: float | None,
    now: float,
    samples: list[tuple[float, int]],
) -> Any:
    """One progress report over all workers, with tokens per second over about the last two seconds."""
    tokens = sum(c["tokens"] for c in counts.values())
    samples.append((now, tokens))
    while len(samples) > 1 and now - samples[0][0] > 2.0:
        samples.pop(0)
    t0, n0 = samples[0]
    live = (tokens - n0) / (now - t0) if now > t0 else 0.0
    done = sum(c["done"] for c in counts.values())
    errors = sum(c["errors"] for c in counts.values())
    if measured_start is None or now < measured_start:
        return progress_type("warmup", done, settings.warmup, errors, 0.0, settings.duration_s, live)
    return progress_type("load", done, settings.request_budget, errors, now - measured_start, settings.duration_s, live)


# -- a worker --------------------------------------------------------------------------------------------------


def _worker_main(fd: int) -> None:
    """A worker process: its share of the point on its own event loop; everything it measured goes back."""
    from orchestrator.load import eventloop

    conn = Connection(fd)
    try:
        kind, start = conn.recv()
        if kind != "start":
            return
        share = Share(**start["share"])
        eventloop.run(_worker(conn, start["settings"], start["model"], share))
    except BaseException as exc:  # tell the parent why, whatever it was; it fails the point
        with contextlib.suppress(OSError):
            conn.send(("failed", f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=8)}"))
    finally:
        conn.close()


async def _worker(conn: Connection, settings_values: dict[str, Any], model: str | None, share: Share) -> None:
    from orchestrator.load.client import LoadClient
    from orchestrator.load.eventloop import loop_name
    from orchestrator.load.loops import LoopState, closed_loop, open_loop, run_batch
    from orchestrator.load.workloads import load_workload

    settings = LoadSettings(**{**settings_values, "workers": 1})
    workload = load_workload(settings.prompts, settings.seed)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    go: asyncio.Future[float | None] = loop.create_future()

    def control() -> None:
        """A thread reads the parent's messages (see ``reader`` in the parent: the same reason)."""
        while True:
            try:
                kind, body = conn.recv()
            except (EOFError, OSError):
                kind, body = "stop", None  # the parent is gone: stop
            loop.call_soon_threadsafe(handle, kind, body)
            if kind == "stop":
                return

    def handle(kind: str, body: Any) -> None:
        if kind == "go" and not go.done():
            go.set_result(body)
        elif kind == "stop":
            stop.set()
            if not go.done():
                go.set_result(None)

    threading.Thread(target=control, daemon=True).start()
    warm = LoopState()
    measured = LoopState()
    async with LoadClient(settings, model) as client:

        async def report() -> None:
            while True:
                phase = "warmup" if measured.started is None else "load"
                state = warm if measured.started is None else measured
                body = {"phase": phase, "done": len(state.records), "errors": state.errors}
                body["tokens"] = client.tokens_seen
                conn.send(("progress", body))
                await asyncio.sleep(_TICK_S)

        reporter = asyncio.create_task(report())
        try:
            if share.warmup:

                async def send_warmup(local: int) -> RequestRecord:
                    i = share.index(local)
                    return await client.send(i, workload.warmup_prompt(i), warmup=True)

                cap = share.max_in_flight if settings.open_loop else share.concurrency
                await run_batch(send_warmup, share.warmup, cap or 1, stop, warm)
            conn.send(("ready", {"warmup_requests": len(warm.records)}))
            start_at = await go
            cpu0 = time.process_time()
            if start_at is not None and not stop.is_set() and not warm.partial:
                delay = start_at - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)

                prompt = workload.warmup_prompt if settings.warmup_prompts else workload.prompt

                async def send(local: int) -> RequestRecord:
                    i = share.index(local)
                    return await client.send(i, prompt(i))

                if settings.open_loop:
                    assert share.rate is not None
                    seed = settings.seed * 1_000_003 + share.number + 1  # each worker its own arrivals
                    await open_loop(
                        send, share.rate, share.max_in_flight, share.budget, settings.duration_s, seed, stop, measured
                    )
                else:
                    assert share.concurrency is not None
                    await closed_loop(send, share.concurrency, share.budget, settings.duration_s, stop, measured)
            cpu = time.process_time() - cpu0
        finally:
            reporter.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reporter
    conn.send(
        (
            "done",
            {
                "records": measured.records,
                "started": measured.started,
                "ended": measured.ended,
                "dispatched": measured.dispatched,
                "cancelled": measured.cancelled + warm.cancelled,
                "partial": measured.partial or warm.partial,
                "warmup_requests": len(warm.records),
                "warmup_errors": warm.errors,
                "cpu_s": cpu,
                "event_loop": loop_name(loop),
            },
        )
    )


if __name__ == "__main__":
    _worker_main(int(sys.argv[1]))
