"""The controller at scale: ``report``, ``recommend`` and ``ls`` of synthesised run directories of 100 to
5,000 points (and more with ``--sizes``), each command's wall time and peak memory (its process's maximum
resident set, from ``wait4``).

A run directory is written with the store's own API (``RunStore.create``/``append``): the autoregressive
baseline and ``ddtree`` configurations (budget x topk) at eight concurrencies with three repeats, one host,
each record with client figures and their standard errors (so the significance rules and the Pareto front
with intervals do their real work) and a server accept length. ``ls`` lists a results root holding the
run of that size ten times.

    python bench/scale.py                          # 100, 500, 1000, 2000, 5000 points
    python bench/scale.py --sizes 100,20000        # other sizes
    python bench/scale.py --profile 2000           # cProfile of report at 2,000 points: the top costs

Results and the exact command lines: bench/RESULTS-scale.md.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from orchestrator.runs.store import Record, RunStore  # noqa: E402

LOADS = [1, 2, 4, 8, 16, 32, 64, 128]
REPEATS = 3


def synthesise(root: Path, points: int, seed: int = 0) -> Path:
    """A run directory of about ``points`` points under ``root`` (see the module docstring)."""
    rng = random.Random(seed)
    per_config = len(LOADS) * REPEATS
    configs = max(1, points // per_config - 1)
    budgets = list(range(4, 4 + configs))
    experiment = {
        "name": "scale",
        "host": {"ssh": "root@gpu-box"},
        "service": {
            "kind": "systemd",
            "unit": "sglang.service",
            "exec_start": "python -m sglang.launch_server --port 30001 {spec_args}",
        },
        "server": {"url": "http://gpu-box:30001"},
        "engine": "sglang",
        "variants": {
            "autoregressive": {"spec_args": ""},
            "ddtree": {
                "spec_args": "--budget {budget} --topk {topk}",
                "matrix": {"budget": budgets, "topk": [1, 2, 3, 4]},
            },
        },
        "baselines": ["autoregressive"],
        "load": {"concurrency": LOADS, "requests": 64, "repeats": REPEATS},
    }
    store = RunStore.create(root, "scale", experiment, {"deployments": []})
    variants: list[tuple[str, dict[str, Any]]] = [("autoregressive", {})]
    variants += [("ddtree", {"budget": b, "topk": 1 + b % 4}) for b in budgets]
    written = 0
    for index, (variant, params) in enumerate(variants):
        for load in LOADS:
            for repeat in range(1, REPEATS + 1):
                if written >= points:
                    break
                base = 100.0 * load**0.7 * (1.0 if variant == "autoregressive" else rng.uniform(0.8, 2.2))
                tok_s = base * rng.uniform(0.97, 1.03)
                store.append(
                    Record(
                        run_id=store.run_id,
                        experiment="scale",
                        deployment_id=f"d-{index}",
                        point_id=f"p-{index}-{load}-{repeat}",
                        config_hash=f"c-{index}",
                        host="gpu-box",
                        variant=variant,
                        params=params,
                        mode="concurrency",
                        concurrency=load,
                        repeat=repeat,
                        status="ok",
                        started_at="2026-01-01T00:00:00Z",
                        finished_at="2026-01-01T00:00:10Z",
                        baseline=variant == "autoregressive",
                        client={
                            "requests": 64,
                            "output_tok_s": tok_s,
                            "output_tok_s_se": tok_s * 0.01,
                            "per_user_tok_s": tok_s / load,
                            "per_user_tok_s_se": tok_s / load * 0.01,
                            "ttft_ms_p50": 20.0 * load**0.5,
                            "tpot_ms_p50": 1000.0 / max(tok_s / load, 1e-9),
                        },
                        server={"engine": "sglang", "accept_len": rng.uniform(1.5, 4.5)} if params else None,
                    )
                )
                written += 1
    store.set_state("done")
    store.release()
    return store.path


def _measure(args: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """(seconds, peak resident MiB, exit code) of one CLI command."""
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "orchestrator", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _pid, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - started
    return seconds, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status)


def profile_report(run_dir: Path, top: int = 15) -> str:
    """The top cumulative costs of building the report of ``run_dir`` (in this process)."""
    from orchestrator.analysis import analyse
    from orchestrator.report.build import report_blocks
    from orchestrator.report.render import to_markdown

    profiler = cProfile.Profile()
    profiler.enable()
    to_markdown(report_blocks(analyse(run_dir), {}, run_dir))
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(top)
    return out.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="100,500,1000,2000,5000")
    parser.add_argument("--profile", type=int, default=0, help="profile report at this many points instead")
    parser.add_argument("--timeout", type=float, default=900.0)
    options = parser.parse_args()
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "160"}
    with tempfile.TemporaryDirectory(prefix="specsweep-scale-") as tmp:
        if options.profile:
            run_dir = synthesise(Path(tmp) / "results", options.profile)
            print(profile_report(run_dir))
            return
        print("| points | report s | report MiB | recommend s | recommend MiB | ls (10 runs) s | ls MiB |")
        print("|---:|---:|---:|---:|---:|---:|---:|")
        for size in (int(s) for s in options.sizes.split(",")):
            root = Path(tmp) / f"results-{size}"
            run_dir = synthesise(root, size)
            for copy in range(9):
                shutil.copytree(run_dir, run_dir.with_name(f"{run_dir.name}-copy{copy}"))
            report = _measure(["report", str(run_dir), "--out", str(Path(tmp) / f"report-{size}")], env)
            recommend = _measure(["recommend", str(run_dir)], env)
            listing = _measure(["ls", "--results", str(root), "-n", "0"], env)
            cells = [str(size)]
            for seconds, mib, code in (report, recommend, listing):
                cells += [f"{seconds:.1f}" + ("" if code == 0 else f" (exit {code})"), f"{mib:.0f}"]
            print("| " + " | ".join(cells) + " |", flush=True)
            shutil.rmtree(root)


if __name__ == "__main__":
    main()
