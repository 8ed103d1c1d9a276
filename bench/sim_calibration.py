"""The ``k26`` profile against the field report: expected accept length and tokens/s per configuration and C.

The model figures are analytic (no server): accept length E from the acceptance model (exact sum over the
draft's nodes; under ``commit-bug`` a Monte Carlo mean), and steady-state throughput C * E / step(C) with
every slot busy and prefill ignored. ``--live`` also runs the real simulator for a few seconds per point
(closed loop, streaming, 127.0.0.1 only) and reads tokens/s and accept length from its ``/metrics``.

    .venv/bin/python bench/sim_calibration.py
    .venv/bin/python bench/sim_calibration.py --live --seconds 8 --concurrency 1 8
"""

from __future__ import annotations

import argparse
import asyncio
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

from orchestrator.sim.model import Drafter, Speculator, expected_accept_length
from orchestrator.sim.profiles import PROFILES
from orchestrator.sim.timing import StepTiming

ROOT = Path(__file__).resolve().parent.parent

CONFIGS: list[tuple[str, list[str]]] = [
    ("ar", ["--algorithm", "ar"]),
    ("linear k=16", ["--algorithm", "linear", "--draft-tokens", "16"]),
    ("linear k=7", ["--algorithm", "linear", "--draft-tokens", "7"]),
    ("ddtree b=7 t=1", ["--algorithm", "ddtree", "--budget", "7", "--topk", "1"]),
    ("ddtree b=7 t=1 commit-bug", ["--algorithm", "ddtree", "--budget", "7", "--topk", "1", "--fault", "commit-bug"]),
    ("ddtree b=32 t=8", ["--algorithm", "ddtree", "--budget", "32", "--topk", "8"]),
    ("ddtree b=32 t=8 commit-bug", ["--algorithm", "ddtree", "--budget", "32", "--topk", "8", "--fault", "commit-bug"]),
]


def speculator_for(argv: list[str], drafter: Drafter) -> Speculator:
    opts = dict(zip(argv[::2], argv[1::2], strict=False))
    return Speculator(
        opts["--algorithm"],
        drafter,
        draft_tokens=int(opts.get("--draft-tokens", 16)),
        budget=int(opts.get("--budget", 32)),
        topk=int(opts.get("--topk", 8)),
        commit_bug="commit-bug" in argv,
    )


def accept_length(spec: Speculator, drafter: Drafter) -> float:
    if spec.tree is None:
        return 1.0
    if not spec.commit_bug:
        return expected_accept_length(spec.tree, drafter)
    rng = random.Random(0)
    return statistics.fmean(spec.step(drafter, rng).commit_len for _ in range(20000))


def model_table(concurrency: list[int]) -> None:
    profile = PROFILES["k26"]
    drafter = Drafter(profile.top1_accuracy, profile.depth_decay, profile.rank_share)
    print(f"| config | accept len | step ms at C=1 | {' | '.join(f'tok/s C={c}' for c in concurrency)} |")
    print(f"|---|---|---|{'---|' * len(concurrency)}")
    for name, argv in CONFIGS:
        spec = speculator_for(argv, drafter)
        timing = StepTiming(profile, spec)
        e = accept_length(spec, drafter)
        rates = [c * e / timing.decode_seconds(c) for c in concurrency]
        cells = " | ".join(f"{r:,.0f}" for r in rates)
        print(f"| {name} | {e:.2f} | {timing.decode_seconds(1) * 1000:.1f} | {cells} |")


async def _closed_loop(url: str, concurrency: int, seconds: float) -> None:
    sent = 0

    async def worker(session: aiohttp.ClientSession, stop_at: float) -> None:
        nonlocal sent
        while time.monotonic() < stop_at:
            sent += 1  # distinct prompts: the same prompt would replay the same acceptance draws
            body = {
                "messages": [{"role": "user", "content": f"calibration prompt {sent}"}],
                "max_tokens": 256,
                "temperature": 0,
                "ignore_eos": True,
                "stream": True,
            }
            async with session.post(f"{url}/v1/chat/completions", json=body) as resp:
                while await resp.content.readany():
                    pass

    async with aiohttp.ClientSession() as session:
        stop_at = time.monotonic() + seconds
        await asyncio.gather(*(worker(session, stop_at) for _ in range(concurrency)))


async def _counters(url: str) -> dict[str, float]:
    async with aiohttp.ClientSession() as session, session.get(f"{url}/metrics") as resp:
        text = await resp.text()
    return {m[0]: float(m[1]) for m in re.findall(r"^(sglang:\w+)\{[^}]*\} (\S+)$", text, re.M)}


def live_point(argv: list[str], concurrency: int, seconds: float) -> tuple[float, float]:
    with tempfile.TemporaryFile() as log:
        cmd = [sys.executable, "-m", "orchestrator.sim", "--profile", "k26", "--port", "0", "--load-seconds", "0"]
        proc = subprocess.Popen([*cmd, *argv], stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
        try:
            url = None
            for _ in range(200):
                log.seek(0)
                text = log.read().decode(errors="replace")
                match = re.search(r"Uvicorn running on (http://\S+)", text)
                if match and "ready to roll" in text:
                    url = match.group(1)
                    break
                time.sleep(0.05)
            if url is None:
                raise SystemExit(f"simulator did not start: {text}")
            before = asyncio.run(_counters(url))
            start = time.monotonic()
            asyncio.run(_closed_loop(url, concurrency, seconds))
            elapsed = time.monotonic() - start
            after = asyncio.run(_counters(url))
        finally:
            proc.terminate()
            proc.wait(timeout=5)
    tokens = after["sglang:generation_tokens_total"] - before["sglang:generation_tokens_total"]
    steps = after["sglang:spec_verify_steps_total"] - before["sglang:spec_verify_steps_total"]
    accepted = after["sglang:spec_accepted_tokens_total"] - before["sglang:spec_accepted_tokens_total"]
    return tokens / elapsed, (1 + accepted / steps) if steps else 1.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32, 128])
    parser.add_argument("--live", action="store_true", help="also measure the running simulator")
    parser.add_argument("--seconds", type=float, default=8.0)
    args = parser.parse_args()
    model_table(args.concurrency)
    if args.live:
        print()
        print("| config | C | measured tok/s | measured accept len |")
        print("|---|---|---|---|")
        for name, argv in CONFIGS:
            for c in args.concurrency:
                rate, accept = live_point(argv, c, args.seconds)
                print(f"| {name} | {c} | {rate:,.1f} | {accept:.2f} |", flush=True)


if __name__ == "__main__":
    main()
