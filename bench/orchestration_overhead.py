"""What specsweep itself costs in a sweep, and how soon it notices a server that became ready (issue 7).

Runs a whole sweep in this process against the simulator (the local process service, as the demo does) and
splits its wall time into:

    server load   from each apply's return (the new server process is running) to the first 2xx answer of
                  /health, seen by a prober polling every 10 ms while a server loads (and only then)
    measurement   the load generator's own duration of every load point (``client.duration_s``)
    warm-up       the warm-up requests of each deployment (events ``healthy`` -> ``warmup``)
    overhead      all the rest: connecting, locking, writing the configuration, stopping the previous server
                  and starting the next, noticing readiness, journal cursors and windows, parsing, storing,
                  restoring

and prints the overhead as a share of the wall time (with the warm-up counted as overhead, and without), and
the time from ready to noticed: the prober's first 2xx to the runner's ``DeploymentReady``.

    .venv/bin/python bench/orchestration_overhead.py demo        # sweeps/demo.yaml as shipped (about 3 min)
    .venv/bin/python bench/orchestration_overhead.py sweep30     # 30 deployments on the simulator (about 5 min)

Only 127.0.0.1 is involved. The results directory and $HOME (where the process service keeps its state and
log) are temporary ones, removed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from orchestrator.experiment.schema import load_experiment  # noqa: E402
from orchestrator.launchers import hosts as host_launchers  # noqa: E402
from orchestrator.runs.store import RunStore  # noqa: E402
from orchestrator.sweep.events import DeploymentReady, DeploymentStarted, SweepEvent  # noqa: E402
from orchestrator.sweep.runner import SweepOptions, run_sweep  # noqa: E402


def sweep30(port: int) -> dict[str, Any]:
    """30 deployments: the AR and linear baselines and 28 DDTree configurations (budget x topk), k26 profile
    with a short simulated model load, two concurrency levels."""
    return {
        "name": "sweep30",
        "host": "local",
        "service": {
            "kind": "process",
            "command": (
                f"{{python}} -m orchestrator.sim --host 127.0.0.1 --port {port} --profile k26 --load-seconds 3 "
                "--seed 7 --decode-log-interval 10 {spec_args}"
            ),
        },
        "server": {"url": f"http://127.0.0.1:{port}", "model": "sim", "ready_timeout": "60s"},
        "engine": "sim",
        "variants": {
            "autoregressive": {"spec_args": "--algorithm ar"},
            "linear": {"spec_args": "--algorithm linear --draft-tokens 7"},
            "ddtree": {
                "spec_args": "--algorithm ddtree --budget {budget} --topk {topk}",
                "matrix": {"budget": [4, 7, 12, 16, 24, 32, 48], "topk": [1, 2, 4, 8]},
            },
        },
        "baselines": ["autoregressive", "linear"],
        "load": {"concurrency": [1, 8], "warmup": 2, "requests": 4, "max_tokens": 64, "temperature": 0},
    }


class ReadyProber:
    """Polls ``url`` every 10 ms while armed; records when it first answered 2xx after each arming."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.armed = threading.Event()
        self.stopped = threading.Event()
        self.ready_at: list[float] = []
        self.armed_at: list[float] = []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def arm(self) -> None:
        self.armed_at.append(time.monotonic())
        self.armed.set()

    def _run(self) -> None:
        with httpx.Client(timeout=1.0, trust_env=False) as client:
            while not self.stopped.is_set():
                if not self.armed.wait(0.1):
                    continue
                try:
                    ok = client.get(self.url).status_code // 100 == 2
                except httpx.HTTPError:
                    ok = False
                if ok and self.armed.is_set():
                    self.ready_at.append(time.monotonic())
                    self.armed.clear()
                    continue
                time.sleep(0.01)

    def close(self) -> None:
        self.stopped.set()
        self.thread.join(2)


def measure(experiment_path: Path) -> dict[str, Any]:
    experiment = load_experiment(experiment_path)
    url = experiment.server_url(experiment.host_specs()[0]) + experiment.health_paths[0]
    prober = ReadyProber(url)
    noticed: list[float] = []
    real_make_service = host_launchers.make_service

    def timed_service(*args: Any, **kwargs: Any) -> Any:
        service = real_make_service(*args, **kwargs)
        apply = service.apply

        def timed_apply(deployment: Any) -> None:
            apply(deployment)
            prober.arm()
            timeline.append((time.monotonic(), "Applied"))

        service.apply = timed_apply
        return service

    timeline: list[tuple[float, str]] = []

    def observe(event: SweepEvent) -> None:
        timeline.append((time.monotonic(), type(event).__name__))
        if isinstance(event, DeploymentReady):
            noticed.append(time.monotonic())
        elif isinstance(event, DeploymentStarted):
            prober.armed.clear()

    host_launchers.make_service = timed_service  # type: ignore[assignment]
    with tempfile.TemporaryDirectory() as tmp:
        started = time.monotonic()
        try:
            result = run_sweep(experiment, SweepOptions(results_root=Path(tmp)), observer=observe)
        finally:
            wall = time.monotonic() - started
            host_launchers.make_service = real_make_service
            prober.close()
        store = RunStore.open(result.run_dir)
        records = store.records()
        events = store.events()
    measurement = sum(float((r.client or {}).get("duration_s") or 0.0) for r in records)
    server_load = sum(r - a for a, r in zip(prober.armed_at, prober.ready_at, strict=False))
    warmup = 0.0
    healthy_at: str | None = None
    for event in events:
        if event["kind"] == "healthy":
            healthy_at = event["time"]
        elif event["kind"] == "warmup" and healthy_at is not None:
            warmup += _seconds(event["time"]) - _seconds(healthy_at)
            healthy_at = None
    overhead = wall - server_load - measurement - warmup
    latencies = [n - r for r, n in zip(prober.ready_at, noticed, strict=False)]
    phases = _phases(timeline, started, started + wall)
    phases["points_minus_load"] = round(phases.pop("points") - measurement, 2)
    return {
        "experiment": experiment.name,
        "deployments": len({r.deployment_id for r in records}),
        "points": len(records),
        "failed": sum(1 for r in records if r.status != "ok"),
        "wall_s": round(wall, 2),
        "server_load_s": round(server_load, 2),
        "measurement_s": round(measurement, 2),
        "warmup_s": round(warmup, 2),
        "overhead_s": round(overhead, 2),
        "overhead_share": round(overhead / wall, 4),
        "overhead_share_with_warmup": round((overhead + warmup) / wall, 4),
        "overhead_per_deployment_s": round(overhead / max(1, len(prober.ready_at)), 3),
        "where_the_time_went_s": phases,
        "ready_to_noticed_s": {
            "mean": round(statistics.fmean(latencies), 3) if latencies else None,
            "median": round(statistics.median(latencies), 3) if latencies else None,
            "max": round(max(latencies), 3) if latencies else None,
            "n": len(latencies),
        },
    }


def _phases(timeline: list[tuple[float, str]], start: float, end: float) -> dict[str, float]:
    """Wall time by phase, from the observer's timeline: before the first deployment (connect, lock, recover),
    applying (DeploymentStarted -> the new server runs), loading and noticing (-> DeploymentReady), warm-up
    (-> the first PointStarted), points (PointStarted -> PointFinished), between points and deployments, and
    after the last point (restore)."""
    names = {
        "SweepStarted": "start",
        "DeploymentStarted": "apply",
        "Applied": "load_and_notice",
        "DeploymentReady": "warmup",
        "PointStarted": "points",
        "PointFinished": "between",
        "HostRestored": "end",
    }
    totals: dict[str, float] = dict.fromkeys(
        ["start", "apply", "load_and_notice", "warmup", "points", "between", "end"], 0.0
    )
    current, since = "start", start
    for stamp, name in timeline:
        if name not in names:
            continue
        # The stretch that ends with HostRestored is the restore, wherever it began.
        totals["end" if name == "HostRestored" else current] += stamp - since
        current, since = names[name], stamp
    totals[current] += end - since
    return {k: round(v, 2) for k, v in totals.items()}


def _seconds(iso: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("which", choices=["demo", "sweep30"])
    parser.add_argument("--port", type=int, default=18187, help="sweep30's simulator port (default 18187)")
    args = parser.parse_args()
    home = tempfile.TemporaryDirectory()
    os.environ["HOME"] = home.name  # the process service's state and log go under ~/.local/state
    if args.which == "demo":
        path = ROOT / "sweeps" / "demo.yaml"
        figures = measure(path)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "sweep30.yaml"
            path.write_text(yaml.safe_dump(sweep30(args.port), sort_keys=False))
            figures = measure(path)
    home.cleanup()
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
