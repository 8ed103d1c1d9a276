"""Windows that are not whole, through the real CLI and the simulator's ``restart-mid-point`` fault.

- ``specsweep sweep`` of a small simulator experiment whose server restarts mid-point (the fault prints its
  engine's start-up lines again and starts afresh, as a unit systemd restarted looks in the journal): the point's
  first record says why, it is measured again once, and no record holds a figure of the broken window;
- ``specsweep parse`` of a log with two process starts (made by the simulator, the second process with another
  draft setting) exits 0, prints the figures of the part after the restart and one warning line naming it.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from orchestrator.metrics import parse_window
from orchestrator.sim.config import parse_args
from orchestrator.sim.server import SimServer
from tests.reliability.harness import (
    cli_env,
    events,
    free_port,
    local_experiment,
    only_run_dir,
    records,
    run_cli,
    write_experiment,
)

pytestmark = pytest.mark.timeout(240)


def test_a_point_the_server_restarted_in_is_measured_again_once(tmp_path: Path, home: Path) -> None:
    port = free_port()
    # Requests arrive at 12 per second (open loop), so the ones after the restart's 0.3 s of loading find the new
    # process serving and the window's part after the restart has figures of its own.
    load = {
        "concurrency": [],
        "rates": [12],
        "warmup": 1,
        "requests": 36,
        "max_tokens": 24,
        "temperature": 0,
        "timeouts": {"connect": "2s", "first_token": "2s", "total": "5s"},
    }
    # The warm-up is request 1; the server restarts once 7 of the point's requests are done.
    doc = local_experiment(
        "restart", port, {"linear": "--algorithm linear --draft-tokens 7 --fault restart-mid-point=8"}, load=load
    )
    path = write_experiment(tmp_path / "restart.yaml", doc)
    results = tmp_path / "results"
    proc = run_cli("sweep", str(path), "--results", str(results), "--no-report", env=cli_env(home))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout + proc.stderr
    assert "the server restarted inside the point's window" in out and "measured again once" in out
    run_dir = only_run_dir(results, "restart")
    recs = records(run_dir)
    assert [(r["attempt"], r["status"]) for r in recs] == [(1, "failed"), (2, "ok")]  # measured again once
    first, second = recs
    assert first["point_id"] == second["point_id"]
    assert first["error"]["kind"] == "window_restart"
    assert first["error"]["message"].startswith("window not whole: restart: the server started again inside")
    assert any("server_args=" in line for line in first["error"]["evidence"])
    # No record holds a figure of the broken window: the first one's come from the part after the restart (or
    # there are none), its /metrics difference spans two processes and gives none.
    server = first["server"]
    assert server["integrity"]["whole"] is False and server["integrity"]["reasons"][0]["reason"] == "restart"
    assert server["integrity"]["part"] == "since_restart"
    window_text = (run_dir / first["window_file"]).read_text()
    assert window_text.count("server_args=") == 1
    cut = window_text.index(next(line for line in window_text.splitlines() if "server_args=" in line))
    # The part after the restart alone, its first interval line (it spans the start-up) left out.
    since = parse_window("sim", window_text[cut:].split("\n", 1)[1], cut=True)
    mixed = parse_window("sim", window_text[:cut] + window_text[cut:].split("\n", 1)[1], cut=True)
    assert since.accept_len is not None and server["accept_len"] == pytest.approx(since.accept_len)
    assert server["gen_throughput"] == pytest.approx(since.gen_throughput)
    assert mixed.gen_throughput != pytest.approx(server["gen_throughput"])
    prom = server.get("prometheus")
    if prom is not None:
        assert prom["accept_len"] is None and prom["acceptance_rate"] is None and prom["gen_throughput"] is None
        assert "restart" in [r["reason"] for r in prom["integrity"]["reasons"]]
    # The second measurement is a whole window of one process, with its figures.
    again = second["server"]
    assert again["integrity"]["whole"] is True and again["accept_len"] is not None
    assert (second["window_file"] or "").endswith(".attempt2.log")
    kinds = [e["kind"] for e in events(run_dir)]
    assert kinds.count("remeasure") == 1 and kinds.count("deploy") == 1  # measured again without a restart
    info = json.loads((run_dir / "run.json").read_text())
    assert info["points"] == {"planned": 1, "ok": 1, "failed": 0}


async def _restarted_log(tmp_path: Path) -> tuple[Path, SimServer]:
    """The simulator's log through a restart after 4 requests, the new process drafting 3 tokens instead of 7."""
    lines: list[str] = []
    config = parse_args(
        [
            "--profile", "tiny", "--host", "127.0.0.1", "--port", "0", "--load-seconds", "0.2",
            "--decode-log-interval", "2", "--algorithm", "linear", "--draft-tokens", "7",
            "--fault", "restart-mid-point=4:3",
        ]
    )  # fmt: skip
    server = SimServer(config, lines.append)
    await server.start()
    await asyncio.wait_for(server.ready.wait(), 10)
    body = {"model": "sim", "max_tokens": 64, "temperature": 0}
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=20)) as session:
        for batch in range(6):
            requests = [
                session.post(server.url + "/v1/completions", json={**body, "prompt": f"p{batch}-{i}"}) for i in range(2)
            ]
            for answer in await asyncio.gather(*requests):
                answer.release()
            await asyncio.wait_for(server.ready.wait(), 10)  # the restarted process serves again
    await server.stop()
    path = tmp_path / "restarted.log"
    path.write_text("\n".join(lines) + "\n")
    return path, server


def test_parse_of_a_log_with_two_process_starts_gives_the_part_after_the_restart(tmp_path: Path) -> None:
    path, server = asyncio.run(_restarted_log(tmp_path))
    text = path.read_text()
    assert text.count("server_args=") == 2 and "speculative_num_draft_tokens=4" in text  # 3 drafts + the root
    proc = run_cli("parse", "--engine", "sim", str(path), "--json", env=cli_env())
    assert proc.returncode == 0, proc.stderr
    warnings = [line for line in proc.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and warnings[0].startswith("warning: window not whole: restart: 2 process starts")
    data: dict[str, Any] = json.loads(proc.stdout)
    assert data["integrity"]["part"] == "since_restart" and data["warnings"] == [warnings[0][len("warning: ") :]]
    assert "exactness" in data
    # The figures are the second process's (3 drafts), not a mix with the first's (7 drafts).
    second = text[text.rindex("[", 0, text.rindex("server_args=")) :]
    # The second process alone, its first interval line (the start-up's) left out as a cut window's edge.
    alone = parse_window("sim", second.split("\n", 1)[1], cut=True)
    assert alone.integrity.whole
    assert data["accept_len"] == pytest.approx(alone.accept_len)
    truth = server.config.expected_accept_length(max_tokens=64)
    assert server.config.draft_tokens == 3 and data["accept_len"] == pytest.approx(truth, rel=0.15)
    table = run_cli("parse", "--engine", "sim", str(path), env=cli_env())
    assert table.returncode == 0 and "accept_len" in table.stdout
    assert sum(line.startswith("warning:") for line in table.stderr.splitlines()) == 1


async def _vllm_restart() -> tuple[list[str], str, str]:
    lines: list[str] = []
    config = parse_args(
        [
            "--engine", "vllm", "--profile", "tiny", "--host", "127.0.0.1", "--port", "0", "--load-seconds", "0.2",
            "--algorithm", "linear", "--draft-tokens", "4", "--log-stats-interval", "0.2",
            "--fault", "restart-mid-point=3",
        ]
    )  # fmt: skip
    server = SimServer(config, lines.append)
    await server.start()
    await asyncio.wait_for(server.ready.wait(), 10)
    body = {"model": "sim", "max_tokens": 32, "temperature": 0, "prompt": "p"}
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=20)) as session:
        for _ in range(2):
            async with session.post(server.url + "/v1/completions", json=body) as answer:
                assert answer.status == 200
        async with session.get(server.url + "/metrics") as answer:
            before = await answer.text()
        async with session.post(server.url + "/v1/completions", json=body) as answer:
            assert answer.status == 200  # the third: the server restarts once it is answered
        await asyncio.sleep(0.05)
        await asyncio.wait_for(server.ready.wait(), 10)
        async with session.get(server.url + "/metrics") as answer:
            after = await answer.text()
    await server.stop()
    return lines, before, after


def test_the_restart_fault_prints_the_start_up_lines_again_with_a_new_pid_and_fresh_counters() -> None:
    lines, before, after = asyncio.run(_vllm_restart())
    banners = [line for line in lines if "vLLM server version" in line]
    assert len(banners) == 2
    pids = [line.split("pid=")[1].split(")")[0] for line in banners]
    assert pids[0] != pids[1]

    def generated(exposition: str) -> float:
        return sum(
            float(line.rsplit(" ", 1)[1])
            for line in exposition.splitlines()
            if line.startswith("vllm:generation_tokens_total")
        )

    assert generated(before) > 0 and generated(after) < generated(before)
