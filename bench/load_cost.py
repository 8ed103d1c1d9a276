"""What the load generator costs per token, in one process, against the ``firehose`` simulator.

Runs ``run_load`` at each concurrency (4C requests of ``--tokens`` tokens, no warm-up) and prints the CPU
time of this process per output token (``time.process_time()`` around the call: parsing, aiohttp, the event
loop and the statistics), the tokens per second, and how many SSE events arrived per socket read.
Run from the repository root:

    .venv/bin/python bench/load_cost.py [--levels 128,512] [--tokens 256] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from load_common import simulator

from orchestrator.load import LoadSettings, run_load, sse

_reads = 0
_feed = sse.SSEParser.feed


def _counting_feed(self: sse.SSEParser, chunk: bytes) -> list[sse.SSEEvent]:
    global _reads
    _reads += 1
    return _feed(self, chunk)


async def one(url: str, concurrency: int, tokens: int) -> tuple[float, float, float]:
    global _reads
    settings = LoadSettings(
        url=url,
        model="sim",
        concurrency=concurrency,
        requests=4 * concurrency,
        warmup=0,
        max_tokens=tokens,
        prompts=f"synthetic:in=32,out={tokens}",
    )
    _reads = 0
    started = time.process_time()
    data = (await run_load(settings)).to_dict()
    cpu = time.process_time() - started
    if data["errors"]:
        raise RuntimeError(f"errors: {data['errors_by_kind']}")
    return cpu / data["output_tokens"] * 1e6, data["output_tok_s"], data["output_tokens"] / max(1, _reads)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--levels", default="128,512")
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    sse.SSEParser.feed = _counting_feed  # type: ignore[method-assign]
    print("| C | run | CPU µs per token | output tok/s | SSE events per read |")
    print("|---|---|---|---|---|")
    with simulator("--profile", "firehose", "--algorithm", "ar", core=None) as sim:
        for c in (int(x) for x in args.levels.split(",")):
            for run in range(args.repeat):
                us, tok_s, per_read = asyncio.run(one(sim.url, c, args.tokens))
                print(f"| {c} | {run + 1} | {us:.1f} | {tok_s:,.0f} | {per_read:.0f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
