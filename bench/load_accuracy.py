"""Accuracy of the load generator against the simulator's ``metronome`` profile, whose schedule is the truth.

The metronome sends every request's first token exactly ``--ttft-ms`` after the request reaches it and each
further token ``--itl-ms`` after the previous one, one token per chunk. A closed loop at concurrency C runs
four waves' worth of requests (4C, at least 12) of n tokens on average (lengths spread over n/2 .. 3n/2, so
that requests do not all finish, and start again, together), after a warm-up wave that opens every
connection, and:

- p50 TTFT and p50 ITL should match what the server delivered (target: within 1 ms). The server's schedule
  says ``ttft`` and ``itl``, but a Python server on a busy machine is late by a millisecond or two (HTTP
  parsing before its clock starts, timer wake-ups), so the reference is a probe: ``load_probe.py``, a
  blocking-socket client in its own process, runs as one more stream beside the load and times the same
  thing with nothing between it and the socket. At C > 1 the comparison leaves out the first wave: its C
  requests leave at the same instant and wait in the server's admission queue (their TTFT is real, but the
  probe, sent on its own, never waits there); the p50 over all requests is shown too;
- with C streams busy, the server emits C * n / (ttft + (n - 1) * itl) tokens a second (n the mean length;
  the time a request takes is linear in its length): that is the truth for the steady-state output tok/s
  (target: within 0.5%). The plain output tok/s, over the whole run, also holds
  the ramp-up (the server admits a burst of C requests one by one) and the drain, and is shown beside it.

Run from the repository root:

    .venv/bin/python bench/load_accuracy.py [--ttft-ms 20 --itl-ms 20 --tokens 200 --levels 1,32,128] [--busy 1]

``--busy N`` runs N busy loops beside it (another process taking a core; with ``--pin``, the client's core);
``SPECSWEEP_KERNEL_STAMPS=0`` times the client's reads when the transport hands them over instead of by the
kernel's arrival time (orchestrator/load/pipe.py ``_KernelReads``), ``PROBE_KERNEL_STAMPS=0`` the probe's likewise.

The client runs on the loop ``specsweep load`` runs on (uvloop when installed; ``SPECSWEEP_EVENT_LOOP=asyncio``
for asyncio's). ``--workers N`` shares the load between N processes (each request timed by the process that
sent it). With ``--pin`` the simulator runs on core 0 and this client on core 1 (on a machine shared with
other work, pinning can hurt: a process pinned to a core that another job keeps busy gets half of it).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from load_common import simulator

from orchestrator.load import LoadSettings, eventloop, run_load


async def measure(
    url: str, concurrency: int, requests: int, prompts: str, probe_requests: int, tokens: int, workers: int = 1
) -> dict:
    """One level: our client at ``concurrency`` and, beside it, the reference probe as one more stream."""
    settings = LoadSettings(
        workers=workers,
        url=url,
        model="sim",
        concurrency=concurrency,
        requests=requests,
        warmup=concurrency,  # opens every connection before the measured waves
        ignore_eos=True,
        prompts=prompts,
    )
    port = url.rsplit(":", 1)[1]
    probe = await asyncio.create_subprocess_exec(
        sys.executable,
        str(Path(__file__).with_name("load_probe.py")),
        "127.0.0.1",
        port,
        str(probe_requests),
        str(tokens),
        stdout=asyncio.subprocess.PIPE,
    )
    run = await run_load(settings)
    out, _ = await probe.communicate()
    result = run.to_dict()
    result["probe"] = json.loads(out)
    # The first wave is C requests sent at the same instant: the server admits them one by one, so their
    # first tokens wait in its queue. Later requests start as others end, spread out, as in steady state.
    later = [r.ttft * 1000 for r in run.records if r.ok and r.index >= concurrency and r.ttft is not None]
    result["ttft_after_first_wave_p50"] = statistics.median(later) if later else None
    return result


def prompts_file(folder: Path, count: int, tokens: int) -> str:
    """``count`` prompts whose output lengths spread evenly over tokens/2 .. 3*tokens/2 (mean exactly
    ``tokens``), in a seeded order: requests of equal length would finish together and make every wave a
    burst of C simultaneous requests, which measures the simulator's admission queue, not the client."""
    half = tokens // 2
    lengths = [tokens + round(half * (2 * i / max(1, count - 1) - 1)) for i in range(count)]
    lengths[-1] = tokens * count - sum(lengths[:-1])
    random.Random(0).shuffle(lengths)
    path = folder / f"prompts-{count}.jsonl"
    path.write_text("".join(json.dumps({"prompt": f"Count to {n}.", "max_tokens": n}) + "\n" for n in lengths))
    return str(path)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ttft-ms", type=float, default=20.0)
    parser.add_argument("--itl-ms", type=float, default=20.0)
    parser.add_argument("--tokens", type=int, default=200)
    parser.add_argument("--levels", default="1,32,128")
    parser.add_argument("--waves", type=int, default=4)
    parser.add_argument("--pin", action="store_true", help="pin the simulator to core 0 and this client to core 1")
    parser.add_argument("--workers", type=int, default=1, help="processes sharing the load (LoadSettings.workers)")
    parser.add_argument(
        "--busy",
        type=int,
        default=0,
        help="start N busy loops (`while :; do :; done`, killed by PID at the end) beside the run: a machine "
        "where other processes take a core",
    )
    args = parser.parse_args()
    # With --pin the busy loops share the client's core (core 1): another process taking the client's core.
    spin = ["bash", "-c", "while :; do :; done"]
    pin = args.pin and (os.cpu_count() or 1) >= 2
    hogs = [subprocess.Popen(["taskset", "-c", "1", *spin] if pin else spin) for _ in range(args.busy)]
    try:
        return run(args)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


def run(args: argparse.Namespace) -> int:
    if args.pin and (os.cpu_count() or 1) >= 2:
        os.sched_setaffinity(0, {1})
    ttft, itl, n = args.ttft_ms, args.itl_ms, args.tokens
    request_s = (ttft + (n - 1) * itl) / 1000.0
    rows = []
    ok = True
    metronome = ("--profile", "metronome", "--ttft-ms", str(ttft), "--itl-ms", str(itl))
    with tempfile.TemporaryDirectory() as tmp, simulator(*metronome, core=0 if args.pin else None) as sim:
        for c in (int(x) for x in args.levels.split(",")):
            requests = max(args.waves * c, 12)  # at C=1, enough first tokens for a median
            prompts = prompts_file(Path(tmp), requests, n)
            # The probe sends short requests (an eighth of the length), so it gathers eight times as many
            # first tokens over the same time; its gaps between tokens are as many either way.
            waves = requests // c
            d = eventloop.run(measure(sim.url, c, requests, prompts, 8 * waves, max(8, n // 8), args.workers))
            if d["errors"]:
                print(f"C={c}: {d['errors']} errors {d['errors_by_kind']}", file=sys.stderr)
                ok = False
            truth = c * n / request_s
            probe_ttft = statistics.median(d["probe"]["ttft_ms"])
            steady_ttft = d["ttft_after_first_wave_p50"]
            probe_itl = statistics.median(d["probe"]["itl_ms"])
            errors = {
                "ttft": (steady_ttft if c > 1 else d["ttft_ms"]["p50"]) - probe_ttft,
                "itl": d["itl_ms"]["p50"] - probe_itl,
                "steady": d["steady_output_tok_s"] / truth - 1.0,
            }
            good = abs(errors["ttft"]) <= 1.0 and abs(errors["itl"]) <= 1.0 and abs(errors["steady"]) <= 0.005
            ok = ok and good
            rows.append(
                f"| {c} | {d['requests']} | {d['ttft_ms']['p50']:.2f} | {steady_ttft or 0:.2f} | {probe_ttft:.2f} "
                f"| {errors['ttft']:+.2f} "
                f"| {d['itl_ms']['p50']:.2f} | {probe_itl:.2f} | {errors['itl']:+.2f} "
                f"| {truth:,.1f} | {d['steady_output_tok_s']:,.1f} ({errors['steady']:+.2%}) "
                f"| {d['output_tok_s']:,.1f} | {d['ttft_ms']['p99']:.1f} | {d['itl_ms']['p99']:.1f} "
                f"| {d['send_delay_ms']['p99']:.1f} | {'yes' if good else 'NO'} |"
            )
    print(
        f"metronome: ttft {ttft:g} ms, itl {itl:g} ms, {n} tokens per request on average, {args.waves} waves, "
        f"{args.workers} worker(s), {args.busy} busy loop(s), load average {os.getloadavg()[0]:.1f}, kernel "
        f"stamps {'off' if os.environ.get('SPECSWEEP_KERNEL_STAMPS') == '0' else 'on'}"
    )
    print()
    print(
        "| C | requests | p50 TTFT ms | after 1st wave | probe | error | p50 ITL ms | probe | error | true tok/s "
        "| steady tok/s (error) | plain tok/s | p99 TTFT ms | p99 ITL ms | p99 send delay ms | within target |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(row)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
