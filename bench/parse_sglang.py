"""Lines per second through the SGLang window parser over a large synthetic journal.

The journal looks like `journalctl -o short-iso` of an SGLang service under load: Decode batch lines (with a
copy per TP rank if --tp > 1), Prefill batch lines, uvicorn access-log lines and other noise, in the
proportions given. The figure is total journal lines / wall time of `parse_window("sglang", text)`, best of
--repeat runs, single-threaded (pin it to one core with `taskset -c 0`), in CPU time (what one core spent) and
in wall time.

    .venv/bin/python bench/parse_sglang.py --lines 1000000 --decode-share 0.1
"""

from __future__ import annotations

import argparse
import random
import time

from orchestrator.metrics import parse_window

PREFIX = "2026-05-30T00:{m:02d}:{s:02d}+0000 gpu-box python3[{pid}]: "
DECODE = (
    "[2026-05-30 00:{m:02d}:{s:02d} TP{tp}] Decode batch, #running-req: {r}, #token: {tok}, token usage: 0.{u:02d}, "
    "accept len: {al:.2f}, accept rate: {ar:.2f}, cuda graph: True, gen throughput (token/s): {g:.2f}, "
    "#queue-req: {q}, "
)
PREFILL = (
    "[2026-05-30 00:{m:02d}:{s:02d} TP0] Prefill batch, #new-seq: 1, #new-token: {n}, #cached-token: {c}, "
    "token usage: 0.{u:02d}, #running-req: {r}, #queue-req: {q}, "
)
ACCESS = 'INFO:     127.0.0.1:{port} - "POST /v1/chat/completions HTTP/1.1" 200 OK'
NOISE = "[2026-05-30 00:{m:02d}:{s:02d} TP0] Cache flushed successfully!"


def journal(lines: int, decode_share: float, tp: int, seed: int = 7) -> str:
    """A synthetic journal of about ``lines`` lines, ``decode_share`` of them Decode batch lines (copies included)."""
    rng = random.Random(seed)
    out: list[str] = []
    while len(out) < lines:
        clock = len(out) // 500  # the journal's clock moves on: about 500 lines a second under load
        m, s = clock // 60 % 60, clock % 60
        roll = rng.random()
        if roll < decode_share:
            r = rng.randrange(1, 129)
            body = DECODE.format(
                m=m, s=s, tp="{tp}", r=r, tok=r * 300, u=rng.randrange(100), al=rng.uniform(1, 6),
                ar=rng.random(), g=rng.uniform(50, 5000), q=rng.randrange(8),
            )  # fmt: skip
            for rank in range(tp):
                out.append(PREFIX.format(m=m, s=s, pid=4100 + rank) + body.replace("{tp}", str(rank)))
        elif roll < decode_share + 0.3:
            line = PREFILL.format(
                m=m, s=s, n=rng.randrange(2000), c=rng.randrange(500), u=rng.randrange(100),
                r=rng.randrange(128), q=rng.randrange(8),
            )  # fmt: skip
            out.append(PREFIX.format(m=m, s=s, pid=4100) + line)
        elif roll < decode_share + 0.8:
            out.append(PREFIX.format(m=m, s=s, pid=4099) + ACCESS.format(port=rng.randrange(30000, 60000)))
        else:
            out.append(PREFIX.format(m=m, s=s, pid=4100) + NOISE.format(m=m, s=s))
    return "\n".join(out[:lines]) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--decode-share", type=float, default=0.1, help="share of Decode batch lines (0..1)")
    parser.add_argument("--tp", type=int, default=1, help="TP ranks printing each decode line")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    text = journal(args.lines, args.decode_share, args.tp)
    floor = float("inf")
    for _ in range(args.repeat):  # the machine's speed: the cheapest Python loop that looks at every line
        start_cpu = time.process_time()
        sum(1 for line in text.split("\n") if "Decode batch" in line)
        floor = min(floor, time.process_time() - start_cpu)
    wall = cpu = float("inf")
    wm = None
    for _ in range(args.repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        wm = parse_window("sglang", text)
        wall = min(wall, time.perf_counter() - start)
        cpu = min(cpu, time.process_time() - start_cpu)
    assert wm is not None
    # CPU time is what one core spent; wall time also counts the moments a shared machine ran someone else.
    print(
        f"{wm.lines_total} lines ({len(text) / 1e6:.0f} MB), decode share {args.decode_share:g}, tp {args.tp}: "
        f"{wm.lines_matched} read, {wm.lines_duplicate} rank copies, {wm.lines_skipped} skipped; best of "
        f"{args.repeat}: {cpu:.3f} s CPU = {wm.lines_total / cpu:,.0f} lines/s "
        f"(wall {wall:.3f} s = {wm.lines_total / wall:,.0f} lines/s); calibration: a bare split-and-test loop "
        f"does {wm.lines_total / floor:,.0f} lines/s CPU"
    )


if __name__ == "__main__":
    main()
