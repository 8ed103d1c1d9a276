"""Issue 40, smaller items: a ``/metrics`` scrape that holds one series twice, or a counter that is NaN, from the
simulator's ``duplicate-series`` and ``nan-counters`` faults over real HTTP on loopback. A duplicated series gave
an "exact" 0 tok/s in a window marked whole; a NaN counter's figure was dropped without a reason. Now each
window says why it is not whole, and gives no figure."""

from __future__ import annotations

import asyncio
import math

import aiohttp
import pytest

from orchestrator.metrics import scrape_delta
from orchestrator.sim.config import parse_args
from orchestrator.sim.server import SimServer

pytestmark = pytest.mark.timeout(120)


async def _scrapes(engine: str, fault: str) -> tuple[str, str]:
    """/metrics of a simulator with ``fault``: after two requests and after two more."""
    config = parse_args(
        [
            "--engine", engine, "--profile", "tiny", "--host", "127.0.0.1", "--port", "0", "--load-seconds", "0.1",
            "--algorithm", "linear", "--draft-tokens", "4", "--fault", fault,
        ]
    )  # fmt: skip
    server = SimServer(config, lambda _line: None)
    await server.start()
    try:
        await asyncio.wait_for(server.ready.wait(), 10)
        body = {"model": "sim", "max_tokens": 24, "temperature": 0, "ignore_eos": True}
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=20)) as session:

            async def ask(i: int) -> None:
                async with session.post(server.url + "/v1/completions", json={**body, "prompt": f"p{i}"}) as answer:
                    assert answer.status == 200
                    await answer.read()

            async def scrape() -> str:
                async with session.get(server.url + "/metrics") as answer:
                    return await answer.text()

            for i in range(2):
                await ask(i)
            before = await scrape()
            for i in range(2, 4):
                await ask(i)
            after = await scrape()
    finally:
        await server.stop()
    return before, after


@pytest.mark.parametrize(("engine", "name", "counter"), [
    ("sglang", "sim", "sglang:generation_tokens_total"),
    ("vllm", "vllm", "vllm:generation_tokens_total"),
])  # fmt: skip
def test_a_series_twice_in_one_scrape_gives_no_figure_and_says_why(engine: str, name: str, counter: str) -> None:
    before, after = asyncio.run(_scrapes(engine, "duplicate-series"))
    assert after.count(f"\n{counter}") >= 2 or after.startswith(counter)  # the fault is there
    window = scrape_delta(before, after, name, elapsed_s=1.0)
    assert not window.integrity.whole
    assert window.integrity.names() == ["duplicate_series"], window.integrity.reasons
    assert counter in window.integrity.reasons[0]["detail"], window.integrity.reasons
    assert (window.accept_len, window.acceptance_rate, window.gen_throughput) == (None, None, None)
    assert window.exactness == {}  # nothing said to be exact
    assert window.to_dict()["integrity"]["whole"] is False


@pytest.mark.parametrize(("engine", "name"), [("sglang", "sim"), ("vllm", "vllm")])
def test_a_nan_counter_is_named_not_dropped_without_a_word(engine: str, name: str) -> None:
    before, after = asyncio.run(_scrapes(engine, "nan-counters"))
    window = scrape_delta(before, after, name, elapsed_s=1.0)
    assert window.integrity.names() == ["non_finite"], window.integrity.reasons
    detail = window.integrity.reasons[0]["detail"]
    assert "generation_tokens_total" in detail and "nan" in detail, detail
    assert window.gen_throughput is None and window.exactness == {}
    assert all(math.isfinite(v) for v in window.counters.values())  # no NaN difference kept as a count
    assert window.integrity.describe() is not None and "non_finite" in (window.integrity.describe() or "")
