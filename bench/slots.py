"""GPU slots on the simulator: an eight-configuration TP=1 sweep on eight slots against the same on one slot.

Both sweeps run the same experiment on this machine (the process service, one simulator per slot, each with
its own CUDA_VISIBLE_DEVICES and port) against eight fake GPUs (orchestrator/sim/gpus.py: the simulators
claim their GPU in a shared state file; tests/data/fake-nvidia-smi answers the clean-GPU checks from it), the
host declaring ``gpus: 8`` for the packed run and ``gpus: 1`` for the serial one. The configurations are the
autoregressive baseline and seven speculative ones (linear chains of 2..8 drafts), measured at one
concurrency, ``slots.baselines: shared`` (one baseline for the host; ``--baselines per-slot`` measures it on
every slot instead).

Reported, from the two runs' own records:
  wall-clock     each sweep's time from start to end (run_sweep, one call each), and the ratio
  winners        the best configuration by output tokens/s in each run, and whether each run's winner lies
                 within the other's interval of the same configuration (the same winner within noise)
  interference   each configuration's throughput with every other slot busy (the packed run) over its
                 throughput alone (the serial run): what the neighbours cost it on this machine's shared CPU

    python bench/slots.py                       # both sweeps, the default sizes
    python bench/slots.py --requests 96 --load-seconds 10
    python bench/slots.py --duration 20 --load-seconds 10   # every point as long (the slowest no longer bounds)

Results and the exact command lines: bench/RESULTS-slots.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from orchestrator.experiment.schema import load_experiment  # noqa: E402
from orchestrator.sweep.runner import SweepOptions, run_sweep  # noqa: E402

STUB_DIR = ROOT / "tests" / "data" / "fake-nvidia-smi"

EXPERIMENT = """\
name: {name}
host: {{kind: local, gpus: {gpus}}}
service:
  kind: process
  command: >-
    {{python}} -m orchestrator.sim --host 127.0.0.1 --port {{slot_port}} --profile k26
    --load-seconds {load_seconds} --seed 7 {{spec_args}}
server: {{url: "http://127.0.0.1:{port}", ready_timeout: 60s, expected_load_time: {load_seconds}s,
         expected_tokens_per_second: 95}}
engine: sglang
gpus_per_deployment: 1
slots: {{baselines: {baselines}, clean_timeout: 30s}}
variants:
  autoregressive: {{spec_args: "--algorithm ar"}}
  linear: {{spec_args: "--algorithm linear --draft-tokens {{k}}", matrix: {{k: [2, 3, 4, 5, 6, 7, 8]}}}}
baselines: [autoregressive]
load: {{concurrency: [{concurrency}], {amount}, max_tokens: {max_tokens}, warmup: 2}}
lossless: {{enabled: false}}
"""


def run_one(work: Path, gpus: int, args: argparse.Namespace) -> dict[str, Any]:
    name = f"slots{gpus}"
    path = work / f"{name}.yaml"
    path.write_text(
        EXPERIMENT.format(
            name=name,
            gpus=gpus,
            load_seconds=args.load_seconds,
            port=args.port,
            baselines=args.baselines,
            concurrency=args.concurrency,
            amount=f"duration: {args.duration:g}s" if args.duration else f"requests: {args.requests}",
            max_tokens=args.max_tokens,
        )
    )
    experiment = load_experiment(path)
    started = time.monotonic()
    result = run_sweep(experiment, SweepOptions(results_root=work / "results"))
    wall = time.monotonic() - started
    records = [json.loads(line) for line in (result.run_dir / "records.jsonl").read_text().splitlines()]
    return {"gpus": gpus, "state": result.state, "wall_s": wall, "records": records, "run_dir": str(result.run_dir)}


def figures(run: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """label -> output tok/s, its interval and the slot, of each configuration's ok record."""
    out: dict[str, dict[str, Any]] = {}
    for r in run["records"]:
        if r["status"] != "ok":
            continue
        label = r["variant"] + (f"(k={r['params']['k']})" if r.get("params") else "")
        value = (r.get("client") or {}).get("output_tok_s")
        interval = ((r.get("intervals") or {}).get("figures") or {}).get("output_tok_s") or {}
        out[label] = {
            "value": value,
            "lo": interval.get("lo"),
            "hi": interval.get("hi"),
            "slot": (r.get("placement") or {}).get("slot"),
        }
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=24)
    parser.add_argument("--duration", type=float, default=None, help="each point this many seconds (not --requests)")
    parser.add_argument("--max-tokens", type=int, default=96)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--load-seconds", type=float, default=2.0)
    parser.add_argument("--port", type=int, default=18700)
    parser.add_argument("--baselines", choices=("shared", "per-slot"), default="shared")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures to this file")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="specsweep-slots-") as tmp:
        work = Path(tmp)
        os.environ["FAKE_GPU_STATE"] = str(work / "gpus.json")
        os.environ["FAKE_GPUS"] = "8"
        os.environ["PATH"] = f"{STUB_DIR}{os.pathsep}{os.environ['PATH']}"
        serial = run_one(work, 1, args)
        packed = run_one(work, 8, args)
    one, eight = figures(serial), figures(packed)
    print(f"one slot:    {serial['wall_s']:.1f} s ({serial['state']}, {len(serial['records'])} records)")
    print(f"eight slots: {packed['wall_s']:.1f} s ({packed['state']}, {len(packed['records'])} records)")
    print(f"speed-up:    {serial['wall_s'] / packed['wall_s']:.2f}x")
    best_one = max(one, key=lambda k: one[k]["value"] or 0)
    best_eight = max(eight, key=lambda k: eight[k]["value"] or 0)

    def within(label: str, run: dict[str, dict[str, Any]], value: float) -> bool:
        lo, hi = run[label]["lo"], run[label]["hi"]
        return lo is not None and hi is not None and lo <= value <= hi

    print(f"winner, one slot: {best_one}; eight slots: {best_eight}")
    for a, b, ra, rb in ((best_one, best_eight, one, eight), (best_eight, best_one, eight, one)):
        if a != b:
            print(f"  {b} is {'within' if within(b, ra, rb[b]['value']) else 'outside'} the other run's interval")
    print("configuration        alone tok/s   with 7 busy   ratio   slot")
    ratios = []
    for label in one:
        if label not in eight:
            continue
        alone, busy = one[label]["value"], eight[label]["value"]
        ratio = busy / alone if alone else float("nan")
        ratios.append(ratio)
        print(f"{label:20s} {alone:12.1f} {busy:13.1f} {ratio:7.3f}   {eight[label]['slot']}")
    if ratios:
        print(f"interference: mean ratio {sum(ratios) / len(ratios):.3f}, min {min(ratios):.3f}")
    if args.json is not None:
        args.json.write_text(
            json.dumps(
                {
                    "serial_s": serial["wall_s"],
                    "packed_s": packed["wall_s"],
                    "one": one,
                    "eight": eight,
                    "winners": [best_one, best_eight],
                },
                indent=2,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
