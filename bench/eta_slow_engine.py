"""A slow engine's first hour in small: the ETA after the warm-up, and the time to the first measured point.

The simulator runs behind a shell (``sh -c 'exec "$0" -m orchestrator.sim "$@"'``), as a real engine's command
would, so the plan cannot read its speed and takes the file's guess (``expected_tokens_per_second``, 95 by
default here, the demo's) while the engine serves ``1000 / --itl-ms`` tokens a second a user (25 at the
default 40 ms): a grid of AR, linear and two DDTree configurations at C=1 and C=4, 8 requests a point, 64 tokens
each, the lossless probe's 4 prompts. The sweep runs in this process (``run_sweep``, the code on ``PYTHONPATH``),
its events timed as they come, and the script prints:

- the ETA the sweep starts with, the ETA once the first deployment's warm-up ended, and the time that was then
  left (to the last event);
- the time from the start to the first measured point (its ``PointFinished``), and to the end.

    PYTHONPATH=. .venv/bin/python bench/eta_slow_engine.py                 # this tree
    PYTHONPATH=OTHER_TREE .venv/bin/python bench/eta_slow_engine.py        # another checkout, for before/after

Results: bench/RESULTS-eta.md ("A slow engine").
"""

from __future__ import annotations

import argparse
import os
import socket
import tempfile
import time
from pathlib import Path

import yaml


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _experiment(folder: Path, itl_ms: float, tok_s: float) -> Path:
    port = _port()
    doc = {
        "name": "slow-engine",
        "host": "local",
        "service": {
            "kind": "process",
            "command": """sh -c 'exec "$0" -m orchestrator.sim "$@"' {python} """
            f"--host 127.0.0.1 --port {port} --profile tiny --load-seconds 1 --decode-log-interval 1 "
            f"--itl-ms {itl_ms:g} {{spec_args}}",
        },
        "server": {
            "url": f"http://127.0.0.1:{port}",
            "model": "sim",
            "ready_timeout": "60s",
            "expected_load_time": "2s",
            "expected_tokens_per_second": tok_s,
        },
        "engine": "sim",
        "variants": {
            "autoregressive": {"spec_args": "--algorithm ar"},
            "linear": {"spec_args": "--algorithm linear --draft-tokens 3"},
            "ddtree": {"spec_args": "--algorithm ddtree --budget {budget} --topk 2", "matrix": {"budget": [4, 8]}},
        },
        "baselines": ["autoregressive", "linear"],
        "load": {"concurrency": [1, 4], "warmup": 2, "requests": 8, "max_tokens": 64, "temperature": 0},
        "lossless": {"prompts": 4},
    }
    path = folder / "slow-engine.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--itl-ms", type=float, default=40.0, help="the engine's step floor (default 40 ms)")
    parser.add_argument("--tok-s", type=float, default=95.0, help="the file's expected_tokens_per_second (95)")
    args = parser.parse_args()

    from orchestrator.experiment.schema import load_experiment
    from orchestrator.sweep.events import PhaseProgress, PointFinished, SweepStarted
    from orchestrator.sweep.runner import SweepOptions, run_sweep

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        os.environ["HOME"] = str(folder)  # the run lock and leftovers of this run only
        path = _experiment(folder, args.itl_ms, args.tok_s)
        events: list[tuple[float, object]] = []
        began = time.monotonic()
        run_sweep(
            load_experiment(path),
            SweepOptions(results_root=folder / "results"),
            observer=lambda event: events.append((time.monotonic() - began, event)),
        )
    end = events[-1][0]
    start = next(e for _, e in events if isinstance(e, SweepStarted))
    warm_at, warm = next(
        (t, e) for t, e in events if isinstance(e, PhaseProgress) and e.phase == "warm-up" and e.done == e.total
    )
    first = next(t for t, e in events if isinstance(e, PointFinished))
    print(f"first ETA {start.eta_seconds:.0f} s; the sweep took {end:.0f} s")
    print(f"after the first warm-up ({warm_at:.0f} s): ETA {warm.eta_seconds:.0f} s, {end - warm_at:.0f} s left")
    print(f"first measured point after {first:.0f} s")


if __name__ == "__main__":
    main()
