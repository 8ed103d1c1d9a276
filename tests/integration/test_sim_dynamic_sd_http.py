"""The simulator's vLLM dialect under ``num_speculative_tokens_per_batch_size`` over real sockets: the
counters /metrics prints show the k vLLM's scheduler would pick (vllm/v1/core/sched/scheduler.py lines
1709-1714): drafted tokens per draft are the schedule's k at C=1, and fall when four requests share the steps."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest

from orchestrator.sim.server import SimServer
from tests.integration.test_sim_dialects_http import run, total

pytestmark = pytest.mark.timeout(60)

SPEC = {"method": "ngram", "num_speculative_tokens": 4, "num_speculative_tokens_per_batch_size": [[1, 1, 4], [2, 8, 1]]}


@pytest.fixture
async def servers() -> AsyncIterator[list[SimServer]]:
    started: list[SimServer] = []
    yield started
    for server in started:
        await server.stop()


async def _drafted_per_draft(servers: list[SimServer], requests: int) -> float:
    server, _lines, before, after, bodies = await run(
        "--engine", "vllm", "--algorithm", "linear", "--speculative-config", json.dumps(SPEC), requests=requests
    )
    servers.append(server)
    drafts = total(after, "vllm:spec_decode_num_drafts_total") - total(before, "vllm:spec_decode_num_drafts_total")
    drafted = total(after, "vllm:spec_decode_num_draft_tokens_total") - total(
        before, "vllm:spec_decode_num_draft_tokens_total"
    )
    assert drafts > 0 and len(bodies) == requests
    return drafted / drafts


async def test_drafted_tokens_per_draft_follow_the_schedule_over_http(servers: list[SimServer]) -> None:
    assert await _drafted_per_draft(servers, 1) == 4.0  # one request: every step drafts k = 4
    at_four = await _drafted_per_draft(servers, 4)
    assert 1.0 <= at_four < 4.0  # steps of 2..8 requests draft k = 1 (only a lone tail drafts 4)
