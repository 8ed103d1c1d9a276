"""Aggregate ingest of ``specsweep load --workers W`` against several firehose servers on one port.

Two (``--servers``) bench/firehose.py processes listen on one port (``SO_REUSEPORT``: the kernel spreads the
connections over them), so one URL reaches both; nothing is pinned: the servers and the client's workers share
the machine's cores as a controller's would. For W = 1 and W = 2 (``--workers``) the same point runs
(``--concurrency`` streams in all, ``--per-stream`` requests each, ``--tokens`` tokens a request, as many
warm-up requests as streams), and:

- server tok/s: the tokens both servers counted as read by the client (bench/firehose.py ``Stats``), over the
  union of the time either had a response for the client to read, on the machine's one clock;
- the client's own output tok/s, and its CPU (the command and its workers) per token.

The servers write ``--events-per-write`` tokens per ``send`` (256 by default: a whole 256-token response in one
write, so that they cost as small a part of what the client does as they can: here they share the two cores
with it, and every tenth of a core they take is one the workers do not get; with 64, one write per 64 tokens,
they took about 0.17 of a core during a two-worker run, with 256 about 0.1). Run from the repository root:

    .venv/bin/python bench/load_workers.py [--workers 1,2] [--concurrency 256] [--repeat 3]

Everything talks to 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from firehose import union_length
from load_common import ROOT, Mode, firehose, free_port, http_json, mode_firehose, parse_mode, process_cpu_seconds


def run(url: str, controls: list[str], pids: list[int], args: argparse.Namespace, workers: int) -> dict:
    for control in controls:
        http_json(control + "/reset", "POST")
    c = args.concurrency
    n = c * args.per_stream
    command = [
        sys.executable, "-m", "orchestrator", "load", "--url", url, "--model", "sim", "-c", str(c), "-n", str(n),
        "--max-tokens", str(args.tokens), "--prompts", f"synthetic:in={args.input_tokens},out={args.tokens}",
        "--warmup", str(c),
        "--workers", str(workers), "--json",
    ]  # fmt: skip
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    servers_before = sum(process_cpu_seconds(p) for p in pids)
    started = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=1800, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"specsweep load failed: {done.stderr[-800:]}")
    data = json.loads(done.stdout.strip().splitlines()[-1])
    stats = [http_json(control + "/stats") for control in controls]
    busy = union_length([tuple(span) for s in stats for span in s["spans"]])  # one clock for all servers
    written = sum(s["tokens"] for s in stats)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {
        "workers": workers,
        "server_tok_s": sum(s["taken_tokens"] for s in stats) / busy,
        "own_tok_s": data["output_tok_s"],
        "errors": data["errors"],
        "cpu_s": cpu,
        "cpu_us_per_token": cpu / written * 1e6,
        "servers_cpu_s": sum(process_cpu_seconds(p) for p in pids) - servers_before,
        "wall_s": wall,
        "per_server_tokens": [s["tokens"] for s in stats],
        "worker_cpu_s": [w["cpu_s"] for w in data.get("worker_figures") or []],
        "load_average": os.getloadavg()[0],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--servers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("--per-stream", type=int, default=32, help="measured requests per stream")
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--events-per-write", type=int, default=256)
    parser.add_argument(
        "--mode",
        help="write as bench/load_capacity.py's mode (e.g. outside: one token per HTTP chunk and per send, 16 "
        "sends per stream per turn) instead of --events-per-write",
    )
    parser.add_argument("--input-tokens", type=int, default=32, help="synthetic prompt tokens per request")
    parser.add_argument(
        "--continuous-usage", choices=("honour", "ignore"), default="honour", help="the servers' (bench/firehose.py)"
    )
    parser.add_argument("--repeat", type=int, default=3, help="rounds (the order of W alternates)")
    parser.add_argument("--json", type=Path, help="also write every run here")
    args = parser.parse_args()
    levels = [int(w) for w in args.workers.split(",")]
    port = free_port()
    runs: list[dict] = []
    spec = parse_mode(args.mode) if args.mode else None
    with contextlib.ExitStack() as stack:
        servers = [
            stack.enter_context(
                mode_firehose(spec, core=None, port=port, reuse_port=True)
                if isinstance(spec, Mode)
                else firehose(
                    args.events_per_write,
                    core=None,
                    port=port,
                    reuse_port=True,
                    continuous_usage=args.continuous_usage == "honour",
                )
            )
            for _ in range(args.servers)
        ]
        url = servers[0].url
        controls = [s.control for s in servers]
        pids = [s.pid for s in servers]
        for round_ in range(args.repeat):
            order = levels if round_ % 2 == 0 else levels[::-1]
            for workers in order:
                result = run(url, controls, pids, args, workers)
                result["round"] = round_
                runs.append(result)
                print(
                    f"W={workers} server tok/s {result['server_tok_s']:9.0f} own tok/s {result['own_tok_s']:9.0f} "
                    f"cpu {result['cpu_s']:6.2f} s ({result['cpu_us_per_token']:.2f} µs/token) servers cpu "
                    f"{result['servers_cpu_s']:5.2f} s wall {result['wall_s']:5.1f} s per server "
                    f"{result['per_server_tokens']} workers cpu {result['worker_cpu_s']} "
                    f"load {result['load_average']:.1f}",
                    file=sys.stderr,
                    flush=True,
                )
    if args.json:
        args.json.write_text(json.dumps(runs, indent=1))
    base = statistics.median(r["server_tok_s"] for r in runs if r["workers"] == levels[0])
    print(f"| workers | server tok/s (median) | own tok/s (median) | CPU µs per token | ratio to W={levels[0]} |")
    print("|---|---|---|---|---|")
    for workers in levels:
        mine = [r for r in runs if r["workers"] == workers]
        server = statistics.median(r["server_tok_s"] for r in mine)
        own = statistics.median(r["own_tok_s"] for r in mine)
        us = statistics.median(r["cpu_us_per_token"] for r in mine)
        print(f"| {workers} | {server:,.0f} | {own:,.0f} | {us:.2f} | {server / base:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
