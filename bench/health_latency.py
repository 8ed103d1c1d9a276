"""How quickly wait_until_healthy notices a ready server and a failed start.

A stand-in server (this file, ``serve`` mode) listens at once, answers 503 on /health, and after a random
delay either turns ready (200, logging ``READY_AT <unix time>``) or prints a traceback and exits 1 (logging
``EXIT_AT <unix time>`` just before). The bench applies it through a Service, waits with
``wait_until_healthy``, and measures from the logged instant to the moment the wait returned or raised. The
server and the bench share one kernel clock (same machine, or a container on it), so the difference is exact.

Targets:
  local    ProcessService on this machine (LocalHost), the local demo's path
  testhost SystemdService on a booted test host over SSH (tests/system/testhost.sh; root + systemd-nspawn)

    python bench/health_latency.py --target local --trials 10
    python bench/health_latency.py --target testhost --trials 10

Results and the exact command lines: bench/RESULTS-health.md.
"""

from __future__ import annotations

import argparse
import os
import random
import socket
import statistics
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from orchestrator.errors import StartFailed  # noqa: E402
from orchestrator.hosts import LocalHost  # noqa: E402
from orchestrator.launchers.health import wait_until_healthy  # noqa: E402
from orchestrator.plan.deployments import Deployment  # noqa: E402
from orchestrator.services import ProcessService, Service, SystemdService  # noqa: E402


def serve(port: int, delay: float, mode: str) -> None:
    """The stand-in server: 503 until ready; or a traceback and exit 1."""
    ready = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200 if ready.is_set() else 503)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("0.0.0.0", port), Handler)
    threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True).start()
    print("loading", flush=True)
    time.sleep(delay)
    if mode == "fail":
        print("Traceback (most recent call last):", flush=True)
        print("RuntimeError: simulated start failure", flush=True)
        print(f"EXIT_AT {time.time():.6f}", flush=True)
        os._exit(1)
    ready.set()
    print(f"READY_AT {time.time():.6f}", flush=True)
    while True:
        time.sleep(3600)


def _instant(text: str, tag: str) -> float:
    for line in text.splitlines():
        if line.startswith(tag + " "):
            return float(line.split()[1])
    raise RuntimeError(f"{tag} not found in the log:\n{text}")


def _trial(service: Service, python: str, url: str, port: int, mode: str, delay: float) -> tuple[float, int]:
    command = f"{python} {Path(__file__).resolve()} serve --port {port} --delay {delay:.3f} --mode {mode}"
    service.apply(Deployment(id=f"d-{mode}", variant=mode, command=command, config_hash="c", load_points=[]))
    polls = 0
    try:
        report = wait_until_healthy(service, url, ["/health"], 60)
        returned = time.time()
        polls = report.polls
        tag = "READY_AT"
        assert mode == "ready", "a failing server was reported healthy"
    except StartFailed as exc:
        returned = time.time()
        tag = "EXIT_AT"
        assert mode == "fail", f"a ready server failed: {exc}"
    for _ in range(50):  # the log line may trail the event by a few ms
        text = service.journal_since(service.start_cursor or "")
        if tag in text:
            break
        time.sleep(0.02)
    return returned - _instant(text, tag), polls


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _summary(name: str, values: list[float]) -> str:
    values = sorted(values)
    p90 = values[max(0, round(0.9 * len(values)) - 1)]
    return (
        f"| {name} | {len(values)} | {statistics.median(values):.3f} | {p90:.3f} | {max(values):.3f} | "
        f"{min(values):.3f} |"
    )


def run(target: str, trials: int, seed: int) -> None:
    rng = random.Random(seed)
    cleanup = None
    if target == "local":
        state = tempfile.mkdtemp(prefix="specsweep-bench-")
        service: Service = ProcessService(LocalHost(), "bench", state_dir=state)
        port = _free_port()
        url = f"http://127.0.0.1:{port}"
    else:
        from tests.system.support import boot, cannot_boot_reason, claim_index, shut_down

        reason = cannot_boot_reason()
        if reason:
            raise SystemExit(f"cannot boot a test host: {reason}")
        index, lock_file = claim_index()
        testhost = boot(index, lock_file)
        cleanup = lambda: shut_down(testhost)  # noqa: E731
        testhost.admin("printf '[Service]\\nExecStart=/bin/true\\n' > /etc/systemd/system/bench.service")
        testhost.admin("systemctl daemon-reload")
        service = SystemdService(testhost.ssh(), "bench.service")
        port = 30777
        url = f"http://{testhost.guest_ip}:{port}"
    results: dict[str, list[float]] = {"ready": [], "fail": []}
    polls: list[int] = []
    try:
        for i in range(trials):
            for mode in ("ready", "fail"):
                latency, n = _trial(service, sys.executable, url, port, mode, rng.uniform(0.5, 3.0))
                results[mode].append(latency)
                if n:
                    polls.append(n)
                print(f"trial {i + 1} {mode}: {latency:.3f} s", file=sys.stderr)
    finally:
        service.restore()
        if cleanup is not None:
            cleanup()
    print(f"\ntarget: {target}, {trials} trials per case, delays uniform in [0.5, 3.0] s, seed {seed}\n")
    print("| case | n | median s | p90 s | max s | min s |")
    print("|---|---|---|---|---|---|")
    print(_summary("ready server noticed after", results["ready"]))
    print(_summary("failed start noticed after", results["fail"]))
    print(f"\npolls per healthy wait: median {statistics.median(polls):g}, max {max(polls)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd")
    s = sub.add_parser("serve")
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--delay", type=float, required=True)
    s.add_argument("--mode", choices=["ready", "fail"], required=True)
    parser.add_argument("--target", choices=["local", "testhost"], default="local")
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if args.cmd == "serve":
        serve(args.port, args.delay, args.mode)
    else:
        run(args.target, args.trials, args.seed)


if __name__ == "__main__":
    main()
