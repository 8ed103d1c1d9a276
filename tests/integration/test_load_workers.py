"""A load point shared by worker processes, against the real simulator over loopback: every request measured
once, one clock, one result; a stop reaches every worker, and a worker that dies fails the point."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.errors import LoadError
from orchestrator.load import LoadProgress, LoadSettings, run_load
from orchestrator.load.settings import engine_request_extras
from orchestrator.load.stats import summarize
from tests.integration.test_load_sim import specsweep, start_sim, stop_sim


@pytest.fixture(scope="module")
def sim() -> Iterator[str]:
    process, url = start_sim("--profile", "tiny", "--algorithm", "linear", "--draft-tokens", "4")
    try:
        yield url
    finally:
        stop_sim(process)


def worker_pids() -> list[int]:
    """This process's worker children (Linux /proc)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if int(stat[1]) == os.getpid() and b"orchestrator.load.workers" in cmdline:
            pids.append(int(entry.name))
    return pids


async def test_two_workers_measure_every_request_once_on_one_clock(sim: str) -> None:
    settings = LoadSettings(
        url=sim,
        model="sim",
        concurrency=4,
        requests=24,
        warmup=4,
        max_tokens=32,
        workers=2,
        extra_body=engine_request_extras("sim", "chat"),  # crosses to the workers with the settings
    )
    result = await run_load(settings)
    data = result.to_dict()
    assert data["workers"] == 2
    assert data["errors"] == 0
    assert data["requests"] == 24
    assert data["stopped_by"] == "requests"
    assert sorted(r.index for r in result.records) == list(range(24))
    assert data["output_tokens"] == 24 * 32
    assert data["warmup_requests"] == 4
    shares = data["worker_figures"]
    assert [w["requests"] for w in shares] == [12, 12]
    assert sum(w["output_tokens"] for w in shares) == data["output_tokens"]
    assert data["spec"]["accept_len"] > 1.0  # per-response figures come through the merge
    # The figures are those of the merged records, exactly.
    again = summarize(result.records, open_loop=False, concurrency=4, started=None, ended=None)
    for key, value in again.items():
        if key not in ("duration_s", "output_tok_s", "requests_per_s"):  # these use the loops' own start/end
            assert data[key] == value, key
    # One clock: both workers' requests lie in one stretch of time, one another's neighbours.
    by_worker = [[r for r in result.records if r.index % 2 == w] for w in (0, 1)]
    for mine, theirs in (by_worker, by_worker[::-1]):
        assert min(r.sent for r in mine) < max(r.end or 0.0 for r in theirs)
    for r in result.records:
        assert r.dispatched <= r.sent <= (r.first_token or r.sent) <= (r.end or r.sent)
        assert r.chunk_times == sorted(r.chunk_times)
    assert worker_pids() == []


async def test_an_open_loop_with_workers(sim: str) -> None:
    settings = LoadSettings(url=sim, model="sim", rate=200.0, requests=20, warmup=0, max_tokens=8, workers=2)
    data = (await run_load(settings)).to_dict()
    assert data["loop"] == "open"
    assert data["requests"] == 20
    assert data["errors"] == 0


def test_cli_workers(sim: str) -> None:
    done = specsweep("load", "--url", sim, "-c", "4", "-n", "8", "--max-tokens", "16", "--workers", "2", "--json")
    assert done.returncode == 0, done.stderr
    level = json.loads(done.stdout.splitlines()[-1])
    assert level["workers"] == 2
    assert level["requests"] == 8
    assert level["output_tokens"] == 8 * 16


async def test_a_stop_reaches_every_worker(sim: str) -> None:
    stop = asyncio.Event()

    def on_progress(report: LoadProgress) -> None:
        if report.phase == "load" and report.done >= 2:
            stop.set()

    settings = LoadSettings(url=sim, model="sim", concurrency=4, requests=4000, warmup=0, max_tokens=64, workers=2)
    result = await run_load(settings, progress=on_progress, stop=stop)
    assert result.partial
    assert result.figures["stopped_by"] == "stopped"
    assert result.requests < 4000
    assert worker_pids() == []


async def test_a_worker_that_dies_fails_the_point(sim: str) -> None:
    settings = LoadSettings(url=sim, model="sim", concurrency=4, requests=4000, warmup=0, max_tokens=64, workers=2)
    killed: list[int] = []

    def on_progress(report: LoadProgress) -> None:
        if report.phase == "load" and not killed:
            pids = worker_pids()
            if pids:
                os.kill(pids[0], signal.SIGKILL)
                killed.append(pids[0])

    with pytest.raises(LoadError, match="worker"):
        await run_load(settings, progress=on_progress)
    assert killed
    assert worker_pids() == []


async def test_adaptive_stopping_is_refused_with_workers(sim: str) -> None:
    settings = LoadSettings(url=sim, model="sim", concurrency=2, requests=8, workers=2, until_rel_ci=0.1)
    with pytest.raises(LoadError, match="one process"):
        await run_load(settings)
