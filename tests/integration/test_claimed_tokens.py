"""What a server may claim of one response (issue 49): ``completion_tokens: 10^15`` ended a sweep with
MemoryError (the per-token arrays of the statistics); a negative count gave negative tok/s. Either fails the
request as ``implausible_count`` and the load's figures stand, through the load client against a scripted
server on loopback."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from orchestrator.load import run_load
from orchestrator.load.decoders import MAX_CLAIMED_TOKENS
from tests.integration.test_load_client import (
    FakeServer,
    chat_events,
    json_script,
    send_one,
    settings_for,
    sse_script,
)

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
async def server() -> AsyncIterator[FakeServer]:
    fake = FakeServer()
    await fake.start()
    try:
        yield fake
    finally:
        await fake.stop()


def _claiming(total: int) -> list[bytes]:
    events = chat_events(["a", "b", "c"])
    events[-2] = b'data: {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": %d}}\n\n' % total
    return events


@pytest.mark.parametrize("total", [10**15, MAX_CLAIMED_TOKENS + 1, -3], ids=["1e15", "just-over", "negative"])
async def test_a_streamed_claim_no_response_can_make_fails_the_request(server: FakeServer, total: int) -> None:
    server.scripts.append(sse_script(_claiming(total)))
    record = await send_one(settings_for(server.url))
    assert record.error_kind == "implausible_count", record.error
    assert str(total) in (record.error or "")
    assert record.output_tokens == 0 and record.chunk_tokens == []


async def test_a_body_claiming_1e15_tokens_fails_and_a_plausible_one_does_not(server: FakeServer) -> None:
    body = {
        "choices": [{"message": {"content": "abc"}, "finish_reason": "length"}],
        "usage": {"completion_tokens": 10**15},
    }
    server.scripts.append(json_script(body))
    record = await send_one(settings_for(server.url, stream=False))
    assert record.error_kind == "implausible_count"
    server.scripts.append(json_script({**body, "usage": {"completion_tokens": 3}}))
    record = await send_one(settings_for(server.url, stream=False))
    assert record.ok and record.output_tokens == 3


async def test_a_load_whose_server_claims_1e15_tokens_ends_with_its_figures(server: FakeServer) -> None:
    for _ in range(4):
        server.scripts.append(sse_script(_claiming(10**15)))
    for _ in range(4):
        server.scripts.append(sse_script(_claiming(3)))
    result = await run_load(settings_for(server.url, requests=8))
    figures = result.to_dict()
    assert figures["errors_by_kind"] == {"implausible_count": 4}
    assert figures["output_tokens"] == 12
    assert 0 <= figures["output_tok_s"] < 1e9
