"""What the load client costs per token and per request in instructions (valgrind's callgrind), a figure that
does not move with what else the machine is doing.

A bench/firehose.py server (pinned to core 0, never under valgrind) streams chat completions; ``run_load`` runs
under ``valgrind --tool=callgrind`` twice in a process of its own (pinned to core 1), once with ``--small``
and once with ``--big`` requests, and the difference in instructions over the difference in tokens is the
client's marginal cost per token (start-up, imports and the summary's fixed part cancel). It counts user-space
instructions only: the kernel's share (the socket reads, which at one token per read is about half of the
client's CPU) is not in it. Per request: the same at two response lengths (``--tokens`` and 16) solved for the
per-request and per-token parts. The client runs some fifty times slower under valgrind, so the server is
paced (``--itl-ms``) slowly enough for it to keep up: one event per write and per read by default, as from a
real engine. Needs valgrind. Run from the repository root:

    .venv/bin/python bench/load_instructions.py [--events-per-write 1] [--itl-ms 5] [--concurrency 8]

Everything talks to 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from load_common import ROOT, firehose, pinned

_CLIENT = """
import sys
from orchestrator.load import LoadSettings, run_load
from orchestrator.load.eventloop import run
url, c, n, tokens = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
settings = LoadSettings(url=url, model="sim", concurrency=c, requests=n, warmup=0, max_tokens=tokens,
                        prompts=f"synthetic:in=32,out={tokens}")
result = run(run_load(settings))
if result.errors:
    raise SystemExit(f"errors: {result.figures['errors_by_kind']}")
print(int(result.figures["output_tokens"]))
"""


def instructions(url: str, concurrency: int, requests: int, tokens: int, workdir: Path) -> tuple[int, int]:
    """(instructions, output tokens) of one run_load under callgrind."""
    out = workdir / f"callgrind-{concurrency}-{requests}-{tokens}.out"
    command = [
        "valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable, "-c", _CLIENT,
        url, str(concurrency), str(requests), str(tokens),
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENBLAS_NUM_THREADS": "1"}
    done = subprocess.run(pinned(command, 1), cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"the client failed under valgrind: {done.stderr[-800:]}")
    match = re.search(r"Collected : ([\d,]+)", done.stderr)
    if match is None:
        raise SystemExit(f"no instruction count in valgrind's output: {done.stderr[-400:]}")
    return int(match.group(1).replace(",", "")), int(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events-per-write", type=int, default=1)
    parser.add_argument("--chunks-per-send", type=int, default=1)
    parser.add_argument("--itl-ms", type=float, default=5.0, help="the server's pace (0: as fast as it can)")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--small", type=int, default=1, help="small run: requests per stream")
    parser.add_argument("--big", type=int, default=5, help="big run: requests per stream")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("needs valgrind")
    c = args.concurrency
    with (
        tempfile.TemporaryDirectory(prefix="specsweep-instructions-") as tmp,
        firehose(args.events_per_write, itl_ms=args.itl_ms, core=0, chunks_per_send=args.chunks_per_send) as server,
    ):
        per_token = {}
        for tokens in (args.tokens, 16):
            small = instructions(server.url, c, c * args.small, tokens, Path(tmp))
            big = instructions(server.url, c, c * args.big, tokens, Path(tmp))
            per_token[tokens] = (big[0] - small[0]) / (big[1] - small[1])
            print(
                f"{tokens} tokens a request: {small[0]:,} and {big[0]:,} instructions for {small[1]:,} and "
                f"{big[1]:,} tokens: {per_token[tokens]:,.0f} a token",
                file=sys.stderr,
            )
    # per_token[n] = request / n + token, for n = tokens and 16
    n = args.tokens
    request = (per_token[16] - per_token[n]) / (1 / 16 - 1 / n)
    token = per_token[n] - request / n
    mode = f"{args.events_per_write}" + (f"x{args.chunks_per_send}" if args.chunks_per_send > 1 else "")
    mode += f"@{args.itl_ms:g}" if args.itl_ms else ""
    print(f"| mode | C | instructions per token ({n}-token responses) | per request | per token, requests apart |")
    print("|---|---|---|---|---|")
    print(f"| {mode} | {c} | {per_token[n]:,.0f} | {request:,.0f} | {token:,.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
