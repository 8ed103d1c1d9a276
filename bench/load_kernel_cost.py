"""The load client's CPU per token with the kernel's receive stamps (orchestrator/load/pipe.py ``_KernelReads``)
and with the transport's own reads, alternating, against the metronome (one token per chunk, 5 ms apart).

The client runs on core 1 and the simulator on core 0; each round is ``2C`` requests of 200 tokens after a warm-up
wave of ``C``, timed with ``time.process_time`` (the whole run's CPU, set-up included). bench/RESULTS-load.md.

    .venv/bin/python bench/load_kernel_cost.py [LEVELS, default 32,128]
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from load_common import simulator

from orchestrator.load import LoadSettings, eventloop, pipe, run_load


def main() -> int:
    levels = [int(x) for x in sys.argv[1].split(",")] if len(sys.argv) > 1 else [32, 128]
    if (os.cpu_count() or 1) >= 2:
        os.sched_setaffinity(0, {1})
    metronome = ("--profile", "metronome", "--ttft-ms", "5", "--itl-ms", "5")
    with simulator(*metronome, core=0) as sim:
        for c in levels:
            rounds: dict[bool, list[float]] = {True: [], False: []}
            for i in range(6):
                kernel = i % 2 == 0
                pipe._KERNEL_STAMPS = kernel
                settings = LoadSettings(
                    url=sim.url, model="sim", concurrency=c, requests=2 * c, warmup=c, ignore_eos=True, max_tokens=200
                )
                cpu0 = time.process_time()
                run = eventloop.run(run_load(settings))
                cpu = time.process_time() - cpu0
                tokens = sum(r.output_tokens for r in run.records if r.ok)
                rounds[kernel].append(cpu / max(tokens, 1) * 1e6)
            said = {k: f"{statistics.median(v):.2f} ({', '.join(f'{x:.2f}' for x in v)})" for k, v in rounds.items()}
            print(
                f"C={c}: CPU µs per token, median of 3: kernel's stamps {said[True]}, transport's reads "
                f"{said[False]}; load average {os.getloadavg()[0]:.1f}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
