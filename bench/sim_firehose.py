"""How many tokens per second one ``firehose`` simulator streams at concurrency C, on one core.

The simulator runs as its own process pinned to one core (``taskset``, when available); a tiny standalone
aiohttp client, pinned to another core, keeps C streaming chat requests open back to back. The server's own
counters (``sglang:generation_tokens_total`` from ``/metrics``, read before and after) give tokens/s, so the
figure does not depend on the client counting anything. ``--client drain`` only reads bytes (the server is
the bottleneck); ``--client parse`` also splits SSE events and ``json.loads`` each one, the way a real load
generator must (then the client is the bottleneck, which is the point of the firehose).

    .venv/bin/python bench/sim_firehose.py --concurrency 128 --seconds 10 --algorithm ar --client drain

Everything talks to 127.0.0.1 only. Results are recorded in bench/RESULTS-sim.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parent.parent


def start_sim(args: argparse.Namespace, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    cmd = [sys.executable, "-m", "orchestrator.sim", "--profile", "firehose", "--port", "0"]
    cmd += ["--algorithm", args.algorithm, "--draft-tokens", str(args.draft_tokens), "--load-seconds", "0"]
    if shutil.which("taskset"):
        cmd = ["taskset", "-c", str(args.server_cpu), *cmd]
    out = log.open("wb")
    proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace")
        if "ready to roll" in text:
            match = re.search(r"Uvicorn running on (http://\S+)", text)
            if match:
                return proc, match.group(1)
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.terminate()
    raise SystemExit(f"the simulator did not start:\n{log.read_text(errors='replace')}")


async def generation_tokens(session: aiohttp.ClientSession, url: str) -> float:
    async with session.get(f"{url}/metrics") as resp:
        text = await resp.text()
    match = re.search(r"^sglang:generation_tokens_total\{[^}]*\} (\S+)$", text, re.M)
    if not match:
        raise SystemExit("no sglang:generation_tokens_total in /metrics")
    return float(match.group(1))


async def worker(
    session: aiohttp.ClientSession, url: str, args: argparse.Namespace, stop_at: float, counts: list[int]
) -> None:
    body = {
        "model": "sim",
        "messages": [{"role": "user", "content": "Tell me a long story."}],
        "max_tokens": args.max_tokens,
        "stream": True,
        "ignore_eos": True,
    }
    parse = args.client == "parse"
    while time.monotonic() < stop_at:
        async with session.post(f"{url}/v1/chat/completions", json=body) as resp:
            buffer = b""
            while True:
                data = await resp.content.readany()
                if not data:
                    break
                counts[1] += data.count(b"data: ")
                if parse:
                    buffer += data
                    *events, buffer = buffer.split(b"\n\n")
                    for event in events:
                        payload = event[6:]
                        if payload and payload != b"[DONE]":
                            chunk = json.loads(payload)
                            for choice in chunk.get("choices", ()):
                                counts[2] += len(choice.get("delta", {}).get("content", "") or "")
        counts[0] += 1


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` (Linux /proc), so the figure survives a busy machine."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def measure(url: str, args: argparse.Namespace, pid: int) -> dict[str, float]:
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=None)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        # Warm up: one round of requests so that connections exist.
        warm_counts = [0, 0, 0]
        await asyncio.gather(
            *(worker(session, url, args, time.monotonic() + 0.5, warm_counts) for _ in range(args.concurrency))
        )
        counts = [0, 0, 0]
        before = await generation_tokens(session, url)
        cpu_before = cpu_seconds(pid)
        start = time.monotonic()
        await asyncio.gather(
            *(worker(session, url, args, start + args.seconds, counts) for _ in range(args.concurrency))
        )
        elapsed = time.monotonic() - start
        cpu = cpu_seconds(pid) - cpu_before
        after = await generation_tokens(session, url)
    return {
        "seconds": elapsed,
        "requests": counts[0],
        "tokens_per_s": (after - before) / elapsed,
        "server_cpu": cpu / elapsed,
        "tokens_per_cpu_s": (after - before) / cpu if cpu > 0 else float("nan"),
        "events_per_cpu_s": counts[1] / cpu if cpu > 0 else float("nan"),
        "chunks_per_s": counts[1] / elapsed,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--concurrency", type=int, default=128)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--algorithm", choices=("ar", "linear", "ddtree"), default="ar")
    parser.add_argument("--draft-tokens", type=int, default=16)
    parser.add_argument("--client", choices=("drain", "parse"), default="drain")
    parser.add_argument("--server-cpu", type=int, default=0)
    parser.add_argument("--client-cpu", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        proc, url = start_sim(args, Path(tmp) / "sim.log")
        try:
            if hasattr(os, "sched_setaffinity"):
                with contextlib.suppress(OSError):
                    os.sched_setaffinity(0, {args.client_cpu})
            result = asyncio.run(measure(url, args, proc.pid))
        finally:
            proc.terminate()
            proc.wait(timeout=5)
    print(
        f"firehose algorithm={args.algorithm} C={args.concurrency} client={args.client} max_tokens={args.max_tokens}: "
        f"{result['tokens_per_s']:,.0f} tokens/s, {result['chunks_per_s']:,.0f} SSE events/s, "
        f"{result['requests'] / result['seconds']:,.1f} requests/s over {result['seconds']:.1f} s; "
        f"server used {result['server_cpu']:.0%} of a core: {result['tokens_per_cpu_s']:,.0f} tokens and "
        f"{result['events_per_cpu_s']:,.0f} SSE events per server CPU-second"
    )


if __name__ == "__main__":
    main()
