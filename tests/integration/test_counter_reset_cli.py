"""A ``/metrics`` window a counter reset broke, through the real CLI and the simulator's ``counter-reset`` fault.

``specsweep sweep`` of a small simulator experiment whose counters go back to zero mid-point (the process goes on:
the same log, no start-up lines), as a restarted engine's counters do: the stored record holds no ``/metrics``
figure and says why (``server.prometheus.integrity``), the log window's figures stand, and the analysis and
the report warn (``window_integrity``); and each dialect's counters go back to zero under the fault while its
process goes on.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import aiohttp
import pytest

from orchestrator.analysis import analyse
from orchestrator.metrics import scrape_delta
from orchestrator.sim.config import parse_args
from orchestrator.sim.server import SimServer
from tests.integration.fault_support import fault_load, sweep_with_fault

pytestmark = pytest.mark.timeout(240)


def test_a_counter_reset_mid_point_leaves_no_metrics_figure_and_a_warning(tmp_path: Path, home: Path) -> None:
    # Six warm-up requests fill the counters before the point; the reset comes after the point's fifth request
    # (the 11th in all), so the after scrape holds one request's counts, below every value of the before scrape.
    load = fault_load(concurrency=[1], warmup=6, requests=6, max_tokens=16)
    swept = sweep_with_fault(
        tmp_path, home, "reset", "--algorithm linear --draft-tokens 5 --fault counter-reset=11", load
    )
    run_dir = swept.run_dir
    (record,) = swept.records
    assert record["status"] == "ok"
    prom = record["server"]["prometheus"]
    assert (prom["accept_len"], prom["acceptance_rate"], prom["gen_throughput"]) == (None, None, None)
    assert prom["per_position_acceptance"] is None and prom["exactness"] == {}
    integrity = prom["integrity"]
    assert integrity["whole"] is False and integrity["part"] is None
    assert [r["reason"] for r in integrity["reasons"]] == ["counter_reset"]
    assert "sglang:generation_tokens_total" in integrity["reasons"][0]["detail"]
    assert any(key.startswith("sglang:spec_verify_calls_total") for key in prom["resets"])
    # The log is the process's own and whole: its figures stand, and the sources compared leave /metrics out.
    server = record["server"]
    assert server["integrity"]["whole"] is True and server["accept_len"] is not None
    assert "prometheus" not in server["sources"]["figures"]["accept_len"]["values"]
    # The analysis and the report say so.
    found = [f for f in analyse(run_dir).findings if f.check == "window_integrity"]
    assert len(found) == 1 and found[0].severity == "warning"
    assert found[0].message == "window not whole: /metrics: counter_reset (no figure)"
    assert any("sglang:generation_tokens_total" in line for line in found[0].evidence)
    checks = json.loads((run_dir / "checks.json").read_text())
    assert any(f["check"] == "window_integrity" for f in checks["findings"]), checks
    report = (run_dir / "report.md").read_text()
    assert "window not whole: /metrics: counter_reset" in report


async def _scrapes(engine: str) -> tuple[str, str, list[str]]:
    """/metrics of a simulator whose counters reset once 5 requests completed: after 4 requests and after 6."""
    config = parse_args(
        [
            "--engine", engine, "--profile", "tiny", "--host", "127.0.0.1", "--port", "0", "--load-seconds", "0.1",
            "--algorithm", "linear", "--draft-tokens", "4", "--fault", "counter-reset=5",
        ]
    )  # fmt: skip
    lines: list[str] = []
    server = SimServer(config, lines.append)
    await server.start()
    await asyncio.wait_for(server.ready.wait(), 10)
    body = {"model": "sim", "max_tokens": 24, "temperature": 0, "ignore_eos": True}
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=20)) as session:

        async def ask(i: int) -> None:
            async with session.post(server.url + "/v1/completions", json={**body, "prompt": f"p{i}"}) as answer:
                await answer.read()

        async def scrape() -> str:
            async with session.get(server.url + "/metrics") as answer:
                return await answer.text()

        for i in range(4):
            await ask(i)
        before = await scrape()
        started = len(lines)
        for i in range(4, 6):
            await ask(i)
        after = await scrape()
    await server.stop()
    return before, after, lines[started:]


@pytest.mark.parametrize(("engine", "name"), [("sglang", "sim"), ("vllm", "vllm"), ("llamacpp", "llamacpp")])
def test_the_fault_resets_every_dialects_counters_and_keeps_the_process(engine: str, name: str) -> None:
    before, after, lines = asyncio.run(_scrapes(engine))
    window = scrape_delta(before, after, name, elapsed_s=1.0)
    # Every count went down. A seconds counter (llama.cpp's prompt_seconds_total) may not have: on a busy
    # machine the one request after the reset can take longer than the four before it, and the window is then
    # also called inconsistent (some counters down, others not), which is as true.
    names = window.integrity.names()
    assert "counter_reset" in names and set(names) <= {"counter_reset", "inconsistent"}, window.integrity.reasons
    assert window.accept_len is None and window.gen_throughput is None
    log = "\n".join(lines)
    starts = {"sglang": "server_args=", "vllm": "server version", "llamacpp": "initializing ..."}
    assert starts[engine] not in log  # the process went on: no start-up line
