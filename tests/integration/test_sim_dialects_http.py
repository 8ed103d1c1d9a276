"""Each dialect over real sockets (server in this process, port 0): what /metrics, the log lines and the
responses say agrees with itself and with the simulator's configured truth (SimConfig.expected_accept_length)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator

import aiohttp
import pytest

from orchestrator.sim.config import parse_args
from orchestrator.sim.server import SimServer

pytestmark = pytest.mark.timeout(60)


def total(text: str, name: str) -> float:
    return sum(float(v) for v in re.findall(rf"^{re.escape(name)}(?:\{{[^}}]*\}})? (\S+)$", text, re.M))


async def run(*argv: str, requests: int = 24) -> tuple[SimServer, list[str], str, str, list[dict]]:
    cfg = parse_args(["--profile", "tiny", "--host", "127.0.0.1", "--port", "0", "--load-seconds", "0", *argv])
    lines: list[str] = []
    server = SimServer(cfg, lines.append)
    await server.start()
    await asyncio.wait_for(server.ready.wait(), 10)
    async with aiohttp.ClientSession() as session:
        before = await (await session.get(server.url + "/metrics")).text()

        async def one(i: int) -> dict:
            body = {"prompt": f"prompt {i}", "max_tokens": 200, "temperature": 0}
            async with session.post(server.url + "/v1/completions", json=body) as resp:
                assert resp.status == 200
                return await resp.json()

        bodies = list(await asyncio.gather(*(one(i) for i in range(requests))))
        after = await (await session.get(server.url + "/metrics")).text()
    return server, lines, before, after, bodies


@pytest.fixture
async def servers() -> AsyncIterator[list[SimServer]]:
    started: list[SimServer] = []
    yield started
    for server in started:
        await server.stop()


async def test_vllm_counters_lines_and_truth(servers: list[SimServer]) -> None:
    server, lines, before, after, bodies = await run(
        "--engine",
        "vllm",
        "--algorithm",
        "linear",
        "--draft-tokens",
        "4",
        "--log-stats-interval",
        "0.05",
        "--per-request-spec-decode-metrics",
        "summary",
    )
    servers.append(server)
    await asyncio.sleep(0.2)  # one more stats interval prints what the last steps drafted
    truth = server.config.expected_accept_length()
    drafts = total(after, "vllm:spec_decode_num_drafts_total") - total(before, "vllm:spec_decode_num_drafts_total")
    accepted = total(after, "vllm:spec_decode_num_accepted_tokens_total")
    prom = 1 + accepted / drafts
    assert prom == pytest.approx(truth, rel=0.04)
    per_request = [b["metrics"]["speculative_decoding"] for b in bodies]
    assert sum(m["num_spec_steps"] for m in per_request) == drafts
    assert sum(m["num_accepted_draft_tokens"] for m in per_request) == accepted
    spec = [x for x in lines if "SpecDecoding metrics:" in x]
    log_accepted = sum(int(m) for m in re.findall(r"Accepted: (\d+) tokens", "\n".join(spec)))
    assert log_accepted == accepted  # every drafted step is in exactly one printed line
    assert all(b["id"].startswith("cmpl-") and "meta_info" not in b for b in bodies)


async def test_llamacpp_lines_timings_and_metrics_agree(servers: list[SimServer]) -> None:
    server, lines, _before, after, bodies = await run(
        "--engine", "llamacpp", "--algorithm", "linear", "--draft-tokens", "8", requests=8
    )
    servers.append(server)
    drafted = sum(b["timings"]["draft_n"] for b in bodies)
    accepted = sum(b["timings"]["draft_n_accepted"] for b in bodies)
    assert total(after, "llamacpp:spec_decode_num_draft_tokens_total") == drafted
    assert total(after, "llamacpp:spec_decode_num_accepted_tokens_total") == accepted
    per_pos = total(after, "llamacpp:spec_decode_num_accepted_tokens_per_pos_total")
    assert per_pos == accepted  # the per-position counters sum to the accepted counter, as in the captures
    found = re.findall(r"draft acceptance = [\d.]+ \( *(\d+) accepted / *(\d+) generated\)", "\n".join(lines))
    assert [sum(int(a) for a, _ in found), sum(int(g) for _, g in found)] == [accepted, drafted]
    steps = total(after, "llamacpp:spec_decode_num_drafts_total")
    assert 1 + accepted / steps == pytest.approx(server.config.expected_accept_length(), rel=0.06)


async def test_sglang_responses_and_counters_agree(servers: list[SimServer]) -> None:
    server, _lines, before, after, bodies = await run("--algorithm", "linear", "--draft-tokens", "4")
    servers.append(server)
    gen = total(after, "sglang:generation_tokens_total") - total(before, "sglang:generation_tokens_total")
    verify = total(after, "sglang:spec_verify_calls_total") - total(before, "sglang:spec_verify_calls_total")
    finished = total(after, "sglang:num_requests_total") - total(before, "sglang:num_requests_total")
    assert gen == sum(b["usage"]["completion_tokens"] for b in bodies) and finished == len(bodies)
    # SGLang's own formula counts the prefill token; without it, the decode-step accept length (the truth).
    assert (gen - finished) / verify == pytest.approx(server.config.expected_accept_length(), rel=0.04)
    assert all("meta_info" not in b and "sglext" not in b for b in bodies)
