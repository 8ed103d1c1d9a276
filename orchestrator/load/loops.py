"""When requests are sent: a closed loop at a fixed concurrency, or an open loop of Poisson arrivals.

Both take ``send(index)``, a coroutine that performs request ``index`` and returns its record without raising
(see :mod:`orchestrator.load.client`); they know nothing of HTTP. Both stop after ``budget`` requests or
``duration_s`` seconds (whichever comes first; requests in flight then are allowed to finish within their own
timeouts), or at once when ``stop`` is set, in which case requests in flight are cancelled, not counted, and
the outcome is marked partial. ``keep_going(state)``, when given, is asked before every dispatch: once it
says False, nothing more is sent and the requests in flight finish (adaptive stopping,
:mod:`orchestrator.load.adaptive`).

- Closed loop: ``concurrency`` workers, each sending its next request the moment its previous one ends.
- Open loop: arrivals at seeded exponential intervals (mean ``1 / rate``), the first at time zero; with a cap,
  an arrival that finds ``cap`` requests in flight waits for one to end (so the offered rate is an upper bound).
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from orchestrator.load.records import RequestRecord

__all__ = ["LoopState", "closed_loop", "open_loop", "run_batch"]

Send = Callable[[int], Awaitable[RequestRecord]]


@dataclass(slots=True)
class LoopState:
    """What a loop has done so far; the progress ticker reads it while the loop runs."""

    records: list[RequestRecord] = field(default_factory=list)
    errors: int = 0
    dispatched: int = 0
    in_flight: int = 0
    started: float | None = None  # perf_counter of the first dispatch
    last_dispatch: float | None = None
    ended: float | None = None
    cancelled: int = 0
    partial: bool = False

    def note(self, record: RequestRecord) -> None:
        self.records.append(record)
        if not record.ok:
            self.errors += 1


async def closed_loop(
    send: Send,
    concurrency: int,
    budget: int | None,
    duration_s: float | None,
    stop: asyncio.Event | None,
    state: LoopState,
    keep_going: Callable[[LoopState], bool] | None = None,
) -> LoopState:
    """Run ``concurrency`` workers until the budget or the duration is spent (or ``stop``, or ``keep_going``
    says no more)."""
    perf = time.perf_counter
    state.started = perf()
    deadline = state.started + duration_s if duration_s is not None else math.inf

    async def worker() -> None:
        while (
            (budget is None or state.dispatched < budget)
            and perf() < deadline
            and (keep_going is None or keep_going(state))
        ):
            index = state.dispatched
            state.dispatched += 1
            state.last_dispatch = perf()
            state.in_flight += 1
            try:
                record = await send(index)
            finally:
                state.in_flight -= 1
            state.note(record)

    workers = concurrency if budget is None else min(concurrency, budget)
    tasks = [asyncio.create_task(worker()) for _ in range(workers)]
    await _until_done_or_stopped(tasks, stop, state)
    return state


async def open_loop(
    send: Send,
    rate: float,
    cap: int | None,
    budget: int | None,
    duration_s: float | None,
    seed: int,
    stop: asyncio.Event | None,
    state: LoopState,
    keep_going: Callable[[LoopState], bool] | None = None,
) -> LoopState:
    """Send requests at Poisson arrival times of mean rate ``rate`` per second, at most ``cap`` in flight
    (until the budget or the duration is spent, ``stop``, or ``keep_going`` says no more)."""
    perf = time.perf_counter
    rng = random.Random(seed)
    slots = asyncio.Semaphore(cap) if cap else None
    tasks: set[asyncio.Task[None]] = set()

    async def one(index: int) -> None:
        try:
            record = await send(index)
        finally:
            state.in_flight -= 1
            if slots is not None:
                slots.release()
        state.note(record)

    async def dispatcher() -> None:
        start = state.started = perf()
        due = 0.0
        index = 0
        while budget is None or index < budget:
            if duration_s is not None and due >= duration_s:
                break
            if keep_going is not None and not keep_going(state):
                break
            delay = start + due - perf()
            if delay > 0:
                await asyncio.sleep(delay)
            if slots is not None:
                await slots.acquire()
            state.dispatched += 1
            state.last_dispatch = perf()
            state.in_flight += 1
            task = asyncio.create_task(one(index))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
            index += 1
            due += rng.expovariate(rate)
        while tasks:
            outcomes = await asyncio.gather(*list(tasks), return_exceptions=True)
            for outcome in outcomes:
                if isinstance(outcome, Exception):
                    raise outcome  # a bug in send(), as in the closed loop

    dispatch = asyncio.create_task(dispatcher())
    await _until_done_or_stopped([dispatch], stop, state, also_cancel=tasks)
    return state


async def run_batch(
    send: Send, count: int, concurrency: int, stop: asyncio.Event | None, state: LoopState
) -> LoopState:
    """Send ``count`` requests, ``concurrency`` at a time (the warm-up)."""
    if count <= 0:
        return state
    return await closed_loop(send, max(1, min(concurrency, count)), count, None, stop, state)


async def _until_done_or_stopped(
    tasks: list[asyncio.Task[None]],
    stop: asyncio.Event | None,
    state: LoopState,
    also_cancel: set[asyncio.Task[None]] | None = None,
) -> None:
    """Wait for ``tasks``; if ``stop`` is set first, cancel them (and ``also_cancel``) and mark partial."""
    stopper = asyncio.create_task(stop.wait()) if stop is not None else None
    try:
        pending: set[asyncio.Future[Any]] = set(tasks)
        while pending:
            waiting = pending | {stopper} if stopper is not None else pending
            done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
            pending -= done
            if stopper is not None and stopper in done:
                state.partial = True
                state.cancelled = state.in_flight
                victims = [*pending, *(also_cancel or ())]
                for task in victims:
                    task.cancel()
                await asyncio.gather(*victims, return_exceptions=True)
                break
        # send() turns every failure of a request into a record, so an exception here is a bug: surface it
        # (and retrieve every task's exception, so none is reported again when the task is collected).
        errors = [t.exception() for t in tasks if t.done() and not t.cancelled()]
        for error in errors:
            if error is not None:
                raise error
    finally:
        if stopper is not None:
            stopper.cancel()
        state.ended = time.perf_counter()
