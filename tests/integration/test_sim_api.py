"""The simulator's HTTP API through a real aiohttp client over loopback (server in this process, port 0)."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiohttp
import pytest

from orchestrator.sim.config import parse_args
from orchestrator.sim.server import SimServer

pytestmark = pytest.mark.timeout(60)

StartSim = Callable[..., Awaitable[SimServer]]


@pytest.fixture
async def start_sim() -> AsyncIterator[StartSim]:
    """Start simulators on 127.0.0.1:0 with the tiny profile; each one's log lines land in ``server.lines``."""
    servers: list[SimServer] = []

    async def start(*argv: str, wait_ready: bool = True) -> SimServer:
        config = parse_args(["--profile", "tiny", "--host", "127.0.0.1", "--port", "0", *argv])
        lines: list[str] = []
        server = SimServer(config, lines.append)
        server.lines = lines  # type: ignore[attr-defined]
        servers.append(server)
        await server.start()
        if wait_ready:
            await asyncio.wait_for(server.ready.wait(), 10)
        return server

    try:
        yield start
    finally:
        for server in servers:
            await server.stop()


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=20)) as client:
        yield client


def chat_body(content: str = "hello", max_tokens: int = 64, **extra: Any) -> dict[str, Any]:
    return {"model": "sim", "messages": [{"role": "user", "content": content}], "max_tokens": max_tokens, **extra}


async def read_sse(resp: aiohttp.ClientResponse) -> list[Any]:
    """Every event of an SSE stream: parsed JSON, or the string ``[DONE]``."""
    events: list[Any] = []
    buffer = b""
    async for data in resp.content.iter_any():
        buffer += data
        *complete, buffer = buffer.split(b"\n\n")
        for event in complete:
            assert event.startswith(b"data: "), event
            payload = event[len(b"data: ") :]
            events.append("[DONE]" if payload == b"[DONE]" else json.loads(payload))
    assert buffer == b""
    return events


def metric(text: str, name: str) -> float:
    match = re.search(rf"^{re.escape(name)}\{{[^}}]*\}} (\S+)$", text, re.M)
    assert match, f"{name} missing from /metrics"
    return float(match.group(1))


async def test_health_models_and_server_info(start_sim: StartSim, session: aiohttp.ClientSession) -> None:
    # avg_spec_accept_length accumulates at Decode lines only (internal_state.py / metrics_reporter.py).
    server = await start_sim("--algorithm", "linear", "--model", "my-model", "--decode-log-interval", "2")
    for path in ("/health", "/health_generate"):
        async with session.get(server.url + path) as resp:
            assert resp.status == 200
    async with session.get(server.url + "/v1/models") as resp:
        models = await resp.json()
    assert [m["id"] for m in models["data"]] == ["my-model"]
    async with session.post(server.url + "/v1/chat/completions", json=chat_body(temperature=0)) as resp:
        assert resp.status == 200
    async with session.get(server.url + "/get_server_info") as resp:
        info = await resp.json()
    assert info["speculative_algorithm"] == "DFLASH"
    assert info["internal_states"][0]["avg_spec_accept_length"] > 1.0


async def test_streaming_chat_chunks_carry_whole_verify_steps(
    start_sim: StartSim, session: aiohttp.ClientSession
) -> None:
    server = await start_sim("--algorithm", "linear", "--draft-tokens", "8")
    body = chat_body(
        max_tokens=64,
        stream=True,
        stream_options={"include_usage": True},
        temperature=0,
        return_spec_tokens_details=True,
    )
    async with session.post(server.url + "/v1/chat/completions", json=body) as resp:
        assert resp.status == 200
        assert resp.headers["Content-Type"].startswith("text/event-stream")
        events = await read_sse(resp)
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    contents = [
        c["choices"][0]["delta"]["content"] for c in chunks if c["choices"] and "content" in c["choices"][0]["delta"]
    ]
    contents = [c for c in contents if c]
    tokens_per_chunk = [len(c.split()) for c in contents]
    assert sum(tokens_per_chunk) == 64
    assert max(tokens_per_chunk) > 1  # several accepted tokens arrive in one chunk
    finish = [c for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]]
    assert [c["choices"][0]["finish_reason"] for c in finish] == ["length"]
    usage_chunk = chunks[-1]
    assert usage_chunk["choices"] == []
    assert usage_chunk["usage"]["completion_tokens"] == 64
    # SGLang sends sglext in its own chunk (no choices) before the usage chunk; no meta_info anywhere.
    (ext,) = [c["sglext"] for c in chunks if "sglext" in c]
    details = ext["spec_tokens_details"]
    assert not any("meta_info" in c for c in chunks)
    # One chunk per verify step, plus the first token, which prefill produces.
    assert details["spec_verify_ct"] == len(contents) - 1
    assert details["spec_accept_length"] == pytest.approx(64 / details["spec_verify_ct"])

    # The same request without streaming gives the same text and the same acceptance (seeded).
    whole_body = chat_body(max_tokens=64, temperature=0, return_spec_tokens_details=True)
    async with session.post(server.url + "/v1/chat/completions", json=whole_body) as resp:
        whole = await resp.json()
    assert whole["choices"][0]["message"]["content"] == "".join(contents)
    assert whole["choices"][0]["finish_reason"] == "length"
    assert whole["usage"]["completion_tokens"] == 64
    assert "meta_info" not in whole
    assert whole["sglext"]["spec_tokens_details"]["spec_verify_ct"] == details["spec_verify_ct"]
    # Without return_spec_tokens_details there is no sglext (protocol.py drops a None sglext).
    async with session.post(server.url + "/v1/chat/completions", json=chat_body(max_tokens=8)) as resp:
        assert "sglext" not in await resp.json()


async def test_text_is_the_same_for_every_algorithm_and_seeded(
    start_sim: StartSim, session: aiohttp.ClientSession
) -> None:
    texts = []
    for argv in (["--algorithm", "ar"], ["--algorithm", "ddtree", "--budget", "16", "--topk", "4"]):
        server = await start_sim(*argv)
        async with session.post(server.url + "/v1/chat/completions", json=chat_body(temperature=0)) as resp:
            texts.append((await resp.json())["choices"][0]["message"]["content"])
    other_seed = await start_sim("--seed", "7")
    async with session.post(other_seed.url + "/v1/chat/completions", json=chat_body(temperature=0)) as resp:
        reseeded = (await resp.json())["choices"][0]["message"]["content"]
    assert texts[0] == texts[1]  # speculation is lossless
    assert reseeded != texts[0]


async def test_completions_and_native_generate(start_sim: StartSim, session: aiohttp.ClientSession) -> None:
    server = await start_sim("--algorithm", "linear")
    body = {"model": "sim", "prompt": "Once upon a time", "max_tokens": 32, "temperature": 0}
    async with session.post(server.url + "/v1/completions", json=body) as resp:
        done = await resp.json()
    assert done["object"] == "text_completion"
    assert len(done["choices"][0]["text"].split()) == 32
    async with session.post(server.url + "/v1/completions", json={**body, "stream": True}) as resp:
        events = await read_sse(resp)
    streamed = "".join(e["choices"][0]["text"] for e in events[:-1] if e["choices"])
    assert streamed == done["choices"][0]["text"]

    native = {"text": "Once upon a time", "sampling_params": {"max_new_tokens": 40, "temperature": 0}}
    async with session.post(server.url + "/generate", json=native) as resp:
        out = await resp.json()
    meta = out["meta_info"]
    assert meta["completion_tokens"] == 40 == len(out["text"].split())
    assert meta["finish_reason"] == {"type": "length", "length": 40}
    assert 1 <= meta["spec_verify_ct"] < 40
    async with session.post(server.url + "/generate", json={**native, "stream": True}) as resp:
        events = await read_sse(resp)
    assert events[-1] == "[DONE]"
    assert events[-2]["text"] == out["text"]  # native streams carry the cumulative text
    assert events[-2]["meta_info"]["finish_reason"]["type"] == "length"


async def test_stop_strings_finish_with_stop(start_sim: StartSim, session: aiohttp.ClientSession) -> None:
    server = await start_sim()
    async with session.post(server.url + "/v1/chat/completions", json=chat_body(temperature=0)) as resp:
        text = (await resp.json())["choices"][0]["message"]["content"]
    word = text.split()[10]
    body = chat_body(temperature=0, stop=[" " + word])
    async with session.post(server.url + "/v1/chat/completions", json=body) as resp:
        stopped = (await resp.json())["choices"][0]
    assert stopped["finish_reason"] == "stop"
    assert text.startswith(stopped["message"]["content"])
    assert (" " + word) not in stopped["message"]["content"]


@pytest.mark.parametrize(
    ("path", "payload", "param"),
    [
        pytest.param("/v1/chat/completions", b"{not json", None, id="bad-json"),
        pytest.param("/v1/chat/completions", b"[1, 2]", None, id="not-an-object"),
        pytest.param("/v1/chat/completions", b'{"model": "sim"}', "messages", id="missing-messages"),
        pytest.param(
            "/v1/chat/completions",
            b'{"messages": [{"role": "user", "content": "x"}], "max_tokens": 0}',
            "max_tokens",
            id="zero-max-tokens",
        ),
        pytest.param(
            "/v1/chat/completions", b'{"messages": [{"role": "user", "content": "x"}], "n": 2}', "n", id="n-2"
        ),
        pytest.param(
            "/v1/chat/completions",
            b'{"messages": [{"role": "user", "content": "x"}], "max_tokens": 999999999}',
            "max_tokens",
            id="over-context",
        ),
        pytest.param("/v1/completions", b'{"model": "sim"}', "prompt", id="missing-prompt"),
        pytest.param("/generate", b'{"sampling_params": {}}', None, id="missing-text"),
    ],
)
async def test_bad_requests_get_400_with_an_openai_error(
    start_sim: StartSim, session: aiohttp.ClientSession, path: str, payload: bytes, param: str | None
) -> None:
    server = await start_sim()
    async with session.post(server.url + path, data=payload, headers={"Content-Type": "application/json"}) as resp:
        assert resp.status == 400
        body = await resp.json()
    # SGLang's ErrorResponse (entrypoints/openai/protocol.py): object "error" and the fields at the top level.
    assert body["object"] == "error" and body["code"] == 400
    assert body["message"]
    assert body["param"] == param


def total(text: str, name: str) -> float:
    """A counter summed over all its label sets (absent: 0, as before its first increment)."""
    return sum(float(v) for v in re.findall(rf"^{re.escape(name)}(?:\{{[^}}]*\}})? (\S+)$", text, re.M))


async def test_metrics_counters_agree_with_responses(start_sim: StartSim, session: aiohttp.ClientSession) -> None:
    server = await start_sim("--algorithm", "ddtree", "--budget", "16", "--topk", "4", "--decode-log-interval", "5")
    async with session.get(server.url + "/metrics") as resp:
        before = await resp.text()
    verify = completion = correct = proposed = 0
    for i in range(4):
        body = {"text": f"prompt {i}", "sampling_params": {"max_new_tokens": 48, "temperature": 0}}
        async with session.post(server.url + "/generate", json=body) as resp:
            meta = (await resp.json())["meta_info"]
        verify += meta["spec_verify_ct"]
        completion += meta["completion_tokens"]
        correct += meta["spec_num_correct_drafts"]
        proposed += meta["spec_num_proposed_drafts"]
        assert meta["spec_accept_length"] == pytest.approx(meta["completion_tokens"] / meta["spec_verify_ct"])
    async with session.get(server.url + "/metrics") as resp:
        assert resp.headers["Content-Type"].startswith("text/plain")
        text = await resp.text()
    # SGLang's counters (observe_one_finished_request): no accepted or drafted counters exist.
    assert "spec_verify_steps_total" not in text and "spec_accepted_tokens_total" not in text
    assert total(text, "sglang:spec_verify_calls_total") - total(before, "sglang:spec_verify_calls_total") == verify
    gen = total(text, "sglang:generation_tokens_total") - total(before, "sglang:generation_tokens_total")
    assert gen == completion
    assert total(text, "sglang:num_requests_total") - total(before, "sglang:num_requests_total") == 4
    assert proposed == 16 * verify  # speculative_num_draft_tokens - 1 = the tree's 16 nodes
    assert correct + verify == completion - 4  # each request's prefill token is not a verify step's
    assert metric(text, "sglang:num_running_reqs") == 0
    for name in ("sglang:spec_accept_length", "sglang:spec_accept_rate", "sglang:gen_throughput"):
        metric(text, name)
    decode = [line for line in server.lines if "Decode batch" in line]  # type: ignore[attr-defined]
    ddtree = [line for line in server.lines if line.startswith("DDTREE metrics:")]  # type: ignore[attr-defined]
    assert decode and ddtree
    assert re.search(r"accept len: \d+\.\d\d, accept rate: \d\.\d\d, cuda graph: True", decode[0])
    assert re.fullmatch(
        r"DDTREE metrics: bs=\d+ budget=16 avg_actual_nodes=17\.00 avg_accepted_drafts=\d+\.\d\d "
        r"avg_commit_len=\d+\.\d\d avg_accepted_depth=\d+\.\d\d",
        ddtree[0],
    )


async def test_ar_decode_lines_have_no_accept_fields(start_sim: StartSim, session: aiohttp.ClientSession) -> None:
    server = await start_sim("--decode-log-interval", "4")
    async with session.post(server.url + "/v1/chat/completions", json=chat_body(max_tokens=16)) as resp:
        assert resp.status == 200
    decode = [line for line in server.lines if "Decode batch" in line]  # type: ignore[attr-defined]
    assert decode
    assert re.fullmatch(
        r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] Decode batch, #running-req: \d+, #token: \d+, token usage: "
        r"\d\.\d\d, cuda graph: True, gen throughput \(token/s\): \d+\.\d\d, #queue-req: \d+",
        decode[0],
    )
    async with session.get(server.url + "/get_server_info") as resp:
        assert "avg_spec_accept_length" not in (await resp.json())["internal_states"][0]


async def test_concurrent_requests_share_decode_steps(start_sim: StartSim, session: aiohttp.ClientSession) -> None:
    server = await start_sim("--algorithm", "linear", "--decode-log-interval", "1")

    async def one(i: int) -> int:
        body = chat_body(f"request {i}", max_tokens=128, temperature=0)
        async with session.post(server.url + "/v1/chat/completions", json=body) as resp:
            return (await resp.json())["usage"]["completion_tokens"]

    assert await asyncio.gather(*(one(i) for i in range(16))) == [128] * 16
    running = [int(m) for m in re.findall(r"#running-req: (\d+)", "\n".join(server.lines))]  # type: ignore[attr-defined]
    assert max(running) > 1  # one step served several requests


async def test_metronome_sends_one_token_per_chunk(start_sim: StartSim, session: aiohttp.ClientSession) -> None:
    server = await start_sim("--profile", "metronome", "--ttft-ms", "5", "--itl-ms", "1", "--algorithm", "linear")
    body = chat_body(max_tokens=20, stream=True)
    async with session.post(server.url + "/v1/chat/completions", json=body) as resp:
        events = await read_sse(resp)
    contents = [e["choices"][0]["delta"].get("content") for e in events[:-1] if e["choices"]]
    contents = [c for c in contents if c]
    assert len(contents) == 20
    assert all(len(c.split()) == 1 for c in contents)


async def test_loading_answers_503_then_becomes_ready(start_sim: StartSim, session: aiohttp.ClientSession) -> None:
    server = await start_sim("--load-seconds", "0.6", wait_ready=False)
    for path in ("/health", "/v1/models", "/health_generate", "/metrics"):
        async with session.get(server.url + path) as resp:
            assert resp.status == 503
            assert await resp.read() == b""  # SGLang: Response(status_code=503) while ServerStatus.Starting
    await asyncio.wait_for(server.ready.wait(), 10)
    async with session.get(server.url + "/health") as resp:
        assert resp.status == 200
    lines: list[str] = server.lines  # type: ignore[attr-defined]
    assert any("Loading safetensors checkpoint shards" in line for line in lines)
    assert lines[-1].endswith("The server is fired up and ready to roll!")


async def test_fault_slow_start(start_sim: StartSim, session: aiohttp.ClientSession) -> None:
    server = await start_sim("--load-seconds", "0", "--fault", "slow-start=0.5", wait_ready=False)
    async with session.get(server.url + "/health") as resp:
        assert resp.status == 503
    await asyncio.wait_for(server.ready.wait(), 10)
    progress = [line for line in server.lines if "Loading safetensors" in line]  # type: ignore[attr-defined]
    assert len(progress) >= 1


async def test_fault_http_500_rate(start_sim: StartSim, session: aiohttp.ClientSession) -> None:
    server = await start_sim("--fault", "http-500-rate=0.5", "--seed", "3")
    statuses = []
    for i in range(40):
        async with session.post(server.url + "/v1/chat/completions", json=chat_body(f"r{i}", max_tokens=4)) as resp:
            statuses.append(resp.status)
            if resp.status == 500:
                assert (await resp.json())["code"] == 500
    assert set(statuses) == {200, 500}
    async with session.get(server.url + "/health") as resp:
        assert resp.status == 200  # health is not affected


async def test_fault_stall_stops_a_stream_mid_response(start_sim: StartSim, session: aiohttp.ClientSession) -> None:
    server = await start_sim("--fault", "stall")
    body = chat_body(max_tokens=40, stream=True)
    received = ""
    async with session.post(server.url + "/v1/chat/completions", json=body) as resp:
        with pytest.raises(asyncio.TimeoutError):
            while True:
                data = await asyncio.wait_for(resp.content.readany(), 0.5)
                assert data, "the stalled stream ended"
                received += data.decode()
    assert '"content":" ' in received
    assert "[DONE]" not in received and 'finish_reason":"' not in received
    tokens = sum(
        len(json.loads(e[6:])["choices"][0]["delta"].get("content", "").split()) for e in received.strip().split("\n\n")
    )
    assert tokens == 20  # half of max_tokens, then nothing
    assert server.stats.running == 0  # the scheduler dropped it; the stream stays open
    # Stopping the server ends the stalled stream too.
    await asyncio.wait_for(server.stop(), 5)


async def test_fault_bad_metrics(start_sim: StartSim, session: aiohttp.ClientSession) -> None:
    server = await start_sim("--algorithm", "ddtree", "--fault", "bad-metrics", "--decode-log-interval", "2")
    for i in range(3):
        async with session.post(server.url + "/v1/chat/completions", json=chat_body(f"x{i}", 48)) as resp:
            assert resp.status == 200
    async with session.get(server.url + "/metrics") as resp:
        text = await resp.text()
    good = [line for line in text.splitlines() if re.fullmatch(r'sglang:\w+\{[^}]*model_name="sim"[^}]*\} \S+', line)]
    bad = [line for line in text.splitlines() if not line.startswith("#") and line not in good]
    assert len(good) >= 10 and bad
    lines: list[str] = server.lines  # type: ignore[attr-defined]
    good_line = re.compile(
        r".*Decode batch, #running-req: \d+, #token: \d+, token usage: \d\.\d\d, accept len: \d+\.\d\d, "
        r"accept rate: \d\.\d\d, cuda graph: True, gen throughput \(token/s\): \d+\.\d\d, #queue-req: \d+"
        r"|DDTREE metrics: bs=\d+ budget=32 avg_actual_nodes=33\.00 avg_accepted_drafts=\d+\.\d\d "
        r"avg_commit_len=\d+\.\d\d avg_accepted_depth=\d+\.\d\d"
    )
    metric_lines = [line for line in lines if "Decode batch" in line or "DDTREE" in line]
    well_formed = [line for line in metric_lines if good_line.fullmatch(line)]
    assert well_formed and len(well_formed) < len(metric_lines)


async def test_fault_commit_bug_reports_depth_above_commit(start_sim: StartSim, session: aiohttp.ClientSession) -> None:
    server = await start_sim(
        "--algorithm", "ddtree", "--budget", "7", "--topk", "1", "--fault", "commit-bug", "--decode-log-interval", "8"
    )
    for i in range(4):
        async with session.post(server.url + "/v1/chat/completions", json=chat_body(f"q{i}", 64)) as resp:
            assert resp.status == 200
    rows = [
        dict(re.findall(r"(\w+)=([\d.]+)", line))
        for line in server.lines  # type: ignore[attr-defined]
        if line.startswith("DDTREE metrics:")
    ]
    assert rows
    assert all(float(r["avg_commit_len"]) <= 2.0 for r in rows)
    assert all(r["budget"] == "7" and r["avg_actual_nodes"] == "8.00" for r in rows)
    assert any(float(r["avg_accepted_depth"]) > float(r["avg_commit_len"]) for r in rows)


async def test_client_leaving_mid_stream_frees_its_slot(start_sim: StartSim, session: aiohttp.ClientSession) -> None:
    server = await start_sim("--profile", "metronome", "--ttft-ms", "1", "--itl-ms", "20")
    async with session.post(server.url + "/v1/chat/completions", json=chat_body(max_tokens=500, stream=True)) as resp:
        await resp.content.readany()
        resp.close()
    for _ in range(100):
        if server.stats.running == 0:
            break
        await asyncio.sleep(0.05)
    assert server.stats.running == 0
