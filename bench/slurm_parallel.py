"""Two Slurm jobs at a time against one (issue 18): the wall time of ``specsweep sweep`` over the system tests'
Slurm cluster (a login node and two compute nodes, tests/system/slurm_cluster.py) for the same
six-deployment sweep with ``max_jobs: 1`` and ``max_jobs: 2``.

The sweep is the shipped demo's shape (autoregressive and linear baselines, a DDTree 2x2 matrix: six
deployments, two load points each) on the simulator, each deployment one job with ``--gres=gpu:8`` (so one
job per node), its server reached through the login node's SSH connection (``server.via: ssh``). The
simulator's ``--load-seconds`` stands for the model load every job pays. Runs alternate (1, 2, 1, 2, ...),
each through the CLI as a user runs it; after each, every record must be there once and ok, and squeue must
list no job.

    sudo .venv/bin/python bench/slurm_parallel.py                  # boots and stops its own cluster
    sudo .venv/bin/python bench/slurm_parallel.py --repeats 3 --load-seconds 5 --json out.json

Needs root (the containers), systemd-nspawn, sshd, slurm-wlm and munge (scripts/bootstrap.sh --system).
Only loopback and the cluster's own namespaces are involved.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.system.slurm_cluster import (  # noqa: E402
    SHARED,
    SlurmCluster,
    boot_cluster,
    cannot_run_reason,
    shut_down_cluster,
)

SITE = f"{ROOT}/.venv/lib/python{sys.version_info.major}.{sys.version_info.minor}/site-packages"
ACTIVE = "PENDING,RUNNING,SUSPENDED,COMPLETING,CONFIGURING,REQUEUED,RESIZING,SIGNALING,STAGE_OUT"


def experiment(cluster: SlurmCluster, directory: Path, max_jobs: int, load_seconds: float) -> Path:
    data = {
        "name": f"slurm-bench-{max_jobs}",
        "launcher": {
            "kind": "slurm",
            "login": cluster.login_spec(),
            "partition": "gpu",
            "gres": "gpu:8",
            "time": "30",
            "max_jobs": max_jobs,
            "shared_dir": SHARED,
            "poll_interval": "0.5s",
        },
        "service": {
            "kind": "process",
            "command": (
                "/usr/bin/python3 -m orchestrator.sim --host 0.0.0.0 --port 18181 --profile tiny --seed 7 "
                f"--load-seconds {load_seconds:g} --decode-log-interval 10 {{spec_args}}"
            ),
            "environment": {"PYTHONPATH": f"{ROOT}:{SITE}"},
        },
        "server": {"url": "http://{node}:18181", "via": "ssh", "model": "sim", "ready_timeout": "120s"},
        "engine": "sim",
        "variants": {
            "autoregressive": {"spec_args": "--algorithm ar"},
            "linear": {"spec_args": "--algorithm linear --draft-tokens 7"},
            "ddtree": {
                "spec_args": "--algorithm ddtree --budget {budget} --topk {topk}",
                "matrix": {"budget": [7, 16], "topk": [1, 4]},
            },
        },
        "baselines": ["autoregressive", "linear"],
        "load": {"concurrency": [1, 4], "warmup": 1, "requests": 16, "max_tokens": 48},
    }
    path = directory / f"slurm-bench-{max_jobs}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def one_sweep(cluster: SlurmCluster, path: Path, results: Path) -> dict[str, Any]:
    cluster.wait_nodes_idle()
    command = [sys.executable, "-m", "orchestrator", "sweep", str(path), "--results", str(results)]
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    wall = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"sweep failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    run = sorted((results / path.stem).glob("2*"))[-1]
    records = [json.loads(line) for line in (run / "records.jsonl").read_text().splitlines() if line.strip()]
    counts = collections.Counter(r["point_id"] for r in records)
    left = [x for x in cluster.run(f"squeue -h -a -t {ACTIVE} -o '%i|%j|%T'").splitlines() if x.strip()]
    healthy = [e for e in map(json.loads, (run / "events.jsonl").read_text().splitlines()) if e["kind"] == "healthy"]
    return {
        "wall_s": round(wall, 2),
        "records": len(records),
        "points_once": all(n == 1 for n in counts.values()) and len(counts) == 12,
        "all_ok": all(r["status"] == "ok" for r in records),
        "jobs_left": left,
        "nodes": sorted({r["placement"]["node"] for r in records}),
        "mean_load_s": round(statistics.mean(e["seconds"] for e in healthy), 2),
        "run_dir": str(run),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2, help="sweeps per setting (alternating)")
    parser.add_argument("--load-seconds", type=float, default=5.0, help="the simulator's model load per job")
    parser.add_argument("--json", type=Path, help="write the results here too")
    args = parser.parse_args()
    reason = cannot_run_reason()
    if reason:
        print(reason, file=sys.stderr)
        return 2
    cluster = boot_cluster(computes=2)
    runs: dict[int, list[dict[str, Any]]] = {1: [], 2: []}
    try:
        with tempfile.TemporaryDirectory(prefix="specsweep-slurm-bench-") as tmp:
            directory = Path(tmp)
            paths = {n: experiment(cluster, directory, n, args.load_seconds) for n in (1, 2)}
            for i in range(args.repeats):
                for n in (1, 2):
                    result = one_sweep(cluster, paths[n], directory / "results")
                    runs[n].append(result)
                    print(f"max_jobs {n} #{i + 1}: {result['wall_s']} s", file=sys.stderr, flush=True)
    finally:
        shut_down_cluster(cluster)
    one = statistics.median(r["wall_s"] for r in runs[1])
    two = statistics.median(r["wall_s"] for r in runs[2])
    summary = {
        "load_seconds": args.load_seconds,
        "repeats": args.repeats,
        "median_wall_s": {"max_jobs_1": one, "max_jobs_2": two},
        "ratio": round(two / one, 3),
        "runs": runs,
    }
    print("| max_jobs | wall s (each run) | median s | records | every point once, ok | jobs left | nodes used |")
    print("|---|---|---|---|---|---|---|")
    for n in (1, 2):
        rs = runs[n]
        print(
            f"| {n} | {', '.join(str(r['wall_s']) for r in rs)} | {statistics.median(r['wall_s'] for r in rs)} | "
            f"{', '.join(str(r['records']) for r in rs)} | {all(r['points_once'] and r['all_ok'] for r in rs)} | "
            f"{sum(len(r['jobs_left']) for r in rs)} | {', '.join(sorted({x for r in rs for x in r['nodes']}))} |"
        )
    print(f"\nratio (max_jobs 2 / max_jobs 1, medians): {summary['ratio']:.3f}")
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2) + "\n")
    ok = all(r["points_once"] and r["all_ok"] and not r["jobs_left"] for rs in runs.values() for r in rs)
    return 0 if ok and summary["ratio"] < 0.6 else 1


if __name__ == "__main__":
    os.environ.setdefault("COLUMNS", "160")
    raise SystemExit(main())
