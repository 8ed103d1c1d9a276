"""Closed and open loops over a fake ``send`` (the loops know nothing of HTTP)."""

from __future__ import annotations

import asyncio
import random

import pytest

from orchestrator.load.loops import LoopState, closed_loop, open_loop, run_batch
from orchestrator.load.records import RequestRecord


class FakeSender:
    """Each request takes ``delay`` seconds; tracks how many run at once and in what order they came."""

    def __init__(self, delay: float = 0.01, fail_every: int = 0) -> None:
        self.delay = delay
        self.fail_every = fail_every
        self.in_flight = 0
        self.peak = 0
        self.indices: list[int] = []

    async def __call__(self, index: int) -> RequestRecord:
        self.indices.append(index)
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            await asyncio.sleep(self.delay)
        finally:
            self.in_flight -= 1
        record = RequestRecord(index=index, sent=0.0, end=self.delay)
        if self.fail_every and index % self.fail_every == 0:
            record.fail("http_500", "boom")
        return record


async def test_closed_loop_holds_concurrency_and_spends_the_budget() -> None:
    send = FakeSender()
    state = await closed_loop(send, concurrency=4, budget=18, duration_s=None, stop=None, state=LoopState())
    assert send.peak == 4
    assert sorted(send.indices) == list(range(18))
    assert len(state.records) == 18
    assert state.in_flight == 0
    assert not state.partial


async def test_closed_loop_with_fewer_requests_than_workers() -> None:
    send = FakeSender()
    state = await closed_loop(send, concurrency=16, budget=3, duration_s=None, stop=None, state=LoopState())
    assert len(state.records) == 3
    assert send.peak == 3


async def test_closed_loop_counts_errors() -> None:
    state = await closed_loop(FakeSender(fail_every=2), 2, 6, None, None, LoopState())
    assert state.errors == 3


async def test_closed_loop_by_duration_lets_requests_in_flight_finish() -> None:
    send = FakeSender(delay=0.02)
    state = await closed_loop(send, concurrency=2, budget=None, duration_s=0.1, stop=None, state=LoopState())
    assert len(state.records) == len(send.indices) >= 2
    assert state.in_flight == 0


async def test_stop_cancels_promptly_and_marks_partial() -> None:
    stop = asyncio.Event()
    send = FakeSender(delay=30.0)
    loop = asyncio.get_running_loop()
    loop.call_later(0.05, stop.set)
    started = loop.time()
    state = await closed_loop(send, concurrency=3, budget=100, duration_s=None, stop=stop, state=LoopState())
    assert loop.time() - started < 10  # far below the 30 s a request would take
    assert state.partial
    assert state.cancelled == 3
    assert state.records == []


async def test_open_loop_arrivals_are_seeded_and_capped() -> None:
    send = FakeSender(delay=0.05)
    state = await open_loop(send, rate=200.0, cap=2, budget=10, duration_s=None, seed=1, stop=None, state=LoopState())
    assert len(state.records) == 10
    assert send.peak <= 2
    assert sorted(send.indices) == list(range(10))


async def test_open_loop_uncapped_overlaps() -> None:
    send = FakeSender(delay=0.2)
    state = await open_loop(send, rate=500.0, cap=None, budget=8, duration_s=None, seed=0, stop=None, state=LoopState())
    assert len(state.records) == 8
    assert send.peak > 1


async def test_open_loop_stop() -> None:
    stop = asyncio.Event()
    asyncio.get_running_loop().call_later(0.05, stop.set)
    send = FakeSender(delay=30.0)
    state = await open_loop(
        send, rate=100.0, cap=None, budget=None, duration_s=60, seed=0, stop=stop, state=LoopState()
    )
    assert state.partial
    assert state.records == []
    assert state.cancelled >= 1


@pytest.mark.parametrize("seed", [0, 7])
def test_open_loop_schedule_is_exponential_with_the_right_mean(seed: int) -> None:
    # The loop draws gaps with random.Random(seed).expovariate(rate): check that source's mean, not the clock.
    rng = random.Random(seed)
    gaps = [rng.expovariate(4.0) for _ in range(20000)]
    assert sum(gaps) / len(gaps) == pytest.approx(0.25, rel=0.03)


async def test_run_batch_is_the_warmup() -> None:
    send = FakeSender()
    state = await run_batch(send, count=5, concurrency=2, stop=None, state=LoopState())
    assert len(state.records) == 5
    assert send.peak == 2
    assert (await run_batch(send, 0, 2, None, LoopState())).records == []


async def test_a_bug_in_send_is_not_swallowed() -> None:
    async def broken(index: int) -> RequestRecord:
        raise KeyError("bug")

    with pytest.raises(KeyError):
        await closed_loop(broken, 2, 4, None, None, LoopState())


async def test_a_bug_in_send_is_not_swallowed_by_the_open_loop() -> None:
    async def broken(index: int) -> RequestRecord:
        raise KeyError("bug")

    with pytest.raises(KeyError):
        await open_loop(broken, 1000.0, None, 3, None, 0, None, LoopState())
