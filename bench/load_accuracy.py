"""Accuracy of the load generator against the simulator's ``metronome`` profile, whose schedule is the truth.

The metronome sends every request's first token exactly ``--ttft-ms`` after the request reaches it and each
further token ``--itl-ms`` after the previous one, one token per chunk. So, at concurrency C with one wave of
C requests of n tokens each:

- p50 TTFT should be ``ttft`` and p50 ITL ``itl`` (target: within 1 ms);
- total output tok/s should be C * n / (ttft + (n - 1) * itl), and the steady-state tok/s C / itl (target:
  within 1%). At C=1 several requests run back to back and the truth is n / (ttft + (n - 1) * itl) per
  request (the turnaround between requests, about a millisecond, is left in: it is 0.03% of a request).

Run from the repository root:

    .venv/bin/python bench/load_accuracy.py [--ttft-ms 50 --itl-ms 10 --tokens 400]

The simulator runs pinned to core 0 and this client to core 1 where the machine has two cores.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from load_common import simulator

from orchestrator.load import LoadSettings, run_load


async def measure(url: str, concurrency: int, requests: int, tokens: int) -> dict:
    settings = LoadSettings(
        url=url,
        model="sim",
        concurrency=concurrency,
        requests=requests,
        warmup=concurrency,  # opens every connection before the measured wave
        max_tokens=tokens,
        prompts=f"synthetic:in=32,out={tokens}",
    )
    return (await run_load(settings)).to_dict()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ttft-ms", type=float, default=50.0)
    parser.add_argument("--itl-ms", type=float, default=10.0)
    parser.add_argument("--tokens", type=int, default=400)
    parser.add_argument("--levels", default="1,32,128")
    args = parser.parse_args()
    if (os.cpu_count() or 1) >= 2:
        os.sched_setaffinity(0, {1})
    ttft, itl, n = args.ttft_ms, args.itl_ms, args.tokens
    request_s = (ttft + (n - 1) * itl) / 1000.0
    rows = []
    ok = True
    with simulator("--profile", "metronome", "--ttft-ms", str(ttft), "--itl-ms", str(itl)) as sim:
        for c in (int(x) for x in args.levels.split(",")):
            requests = 3 if c == 1 else c
            d = asyncio.run(measure(sim.url, c, requests, n))
            if d["errors"]:
                print(f"C={c}: {d['errors']} errors {d['errors_by_kind']}", file=sys.stderr)
                ok = False
            true_total = c * n / request_s
            true_steady = c * 1000.0 / itl if c > 1 else None
            checks = {
                "ttft": d["ttft_ms"]["p50"] - ttft,
                "itl": d["itl_ms"]["p50"] - itl,
                "total": d["output_tok_s"] / true_total - 1.0,
                "steady": (d["steady_output_tok_s"] / true_steady - 1.0) if true_steady else None,
            }
            good = (
                abs(checks["ttft"]) <= 1.0
                and abs(checks["itl"]) <= 1.0
                and abs(checks["total"]) <= 0.01
                and (checks["steady"] is None or abs(checks["steady"]) <= 0.01)
            )
            ok = ok and good
            steady = (
                f"{d['steady_output_tok_s']:,.1f} vs {true_steady:,.1f} ({checks['steady']:+.2%})"
                if true_steady
                else "-"
            )
            rows.append(
                f"| {c} | {d['requests']} | {d['ttft_ms']['p50']:.2f} ({checks['ttft']:+.2f}) "
                f"| {d['itl_ms']['p50']:.2f} ({checks['itl']:+.2f}) "
                f"| {d['output_tok_s']:,.1f} vs {true_total:,.1f} ({checks['total']:+.2%}) | {steady} "
                f"| {d['ttft_ms']['p99']:.2f} | {d['itl_ms']['p99']:.2f} | {'yes' if good else 'NO'} |"
            )
    print(f"metronome: ttft {ttft} ms, itl {itl} ms, {n} tokens per request, one wave of C requests (C=1: 3)")
    print()
    print(
        "| C | requests | p50 TTFT ms (error) | p50 ITL ms (error) | output tok/s vs truth | "
        "steady tok/s vs truth | p99 TTFT ms | p99 ITL ms | within target |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(row)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
