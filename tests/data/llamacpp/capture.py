"""Regenerate the llama-server captures in this directory (not a test; run it by hand).

Starts the llama-server built by scripts/get-llama-server.sh on a free loopback port once per mode,
scrapes /metrics before and after a few /v1/completions requests (C=1, then C=4), and writes:

    <mode>.log              the server's stdout+stderr, verbatim (trimmed by hand afterwards)
    <mode>.metrics.before   /metrics right after /health answered
    <mode>.metrics.after    /metrics after the requests
    <mode>.summary.json     what the client saw: start-up time, per-request timings, tok/s
    <mode>.response.json    one non-stream response (ngram mode; see --responses)
    <mode>.stream.sse       the last chunks of one streamed response, raw SSE

Usage: eval "$(scripts/get-llama-server.sh --print)" &&
       .venv/bin/python tests/data/llamacpp/capture.py [--out DIR] [MODE ...]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import time
from typing import Any

import httpx

HERE = pathlib.Path(__file__).resolve().parent
PROMPTS = [
    "Write a Python quicksort with comments.\n\n```python\n",
    "Write a Python function that merges two sorted lists, with comments.\n\n```python\n",
    "Write a Python binary search with comments.\n\n```python\n",
    "Write a Python class for a stack with push, pop and peek, with comments.\n\n```python\n",
]
MAX_TOKENS = 128


# Modes that show a trap or a log format only need one request; the others get the full set.
LIGHT = {"ngram-simple-n3-m8", "ngram-simple-n3-m4", "ngram-simple-n3-m2", "md-only", "ngram-simple-n3-m16-lv4"}


def modes(model: str) -> dict[str, list[str]]:
    """Server arguments per capture mode, on top of the common ones."""
    ngram = ["--spec-type", "ngram-simple", "--spec-ngram-simple-size-n", "3"]
    draft = ["--spec-type", "draft-simple", "-md", model, "--spec-draft-n-max", "8"]
    return {
        "ar": [],
        "ngram-simple-n3-m16": [*ngram, "--spec-ngram-simple-size-m", "16"],
        "ngram-simple-n3-m8": [*ngram, "--spec-ngram-simple-size-m", "8"],
        "ngram-simple-n3-m4": [*ngram, "--spec-ngram-simple-size-m", "4"],
        # trap: m below n is accepted silently and never drafts
        "ngram-simple-n3-m2": [*ngram, "--spec-ngram-simple-size-m", "2"],
        # trap: a draft model without --spec-type does not speculate
        "md-only": ["-md", model],
        "draft-simple-k8": draft,
        "synth-len-2": [*draft, "--spec-synth-len", "2"],
        "synth-len-4": [*draft, "--spec-synth-len", "4"],
        # the trace level adds the `acc per pos` line to each request's print_timing
        "ngram-simple-n3-m16-lv4": [*ngram, "--spec-ngram-simple-size-m", "16", "-lv", "4"],
    }


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def complete(base: str, prompt: str, stream: bool) -> tuple[dict[str, Any], bytes, float]:
    body = {"prompt": prompt, "max_tokens": MAX_TOKENS, "temperature": 0, "stream": stream}
    start = time.perf_counter()
    with httpx.Client(timeout=300) as client:
        if not stream:
            resp = client.post(f"{base}/v1/completions", json=body)
            resp.raise_for_status()
            return resp.json(), resp.content, time.perf_counter() - start
        raw = b""
        with client.stream("POST", f"{base}/v1/completions", json=body) as resp:
            resp.raise_for_status()
            for chunk in resp.iter_bytes():
                raw += chunk
        elapsed = time.perf_counter() - start
    last: dict[str, Any] = {}
    for line in raw.decode().splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            event = json.loads(line[len("data: ") :])
            if "timings" in event:
                last = event
    return last, raw, elapsed


def run_mode(
    binary: str,
    model: str,
    name: str,
    extra: list[str],
    out: pathlib.Path,
    save: bool,
    threads: int | None,
    cwd: pathlib.Path,
) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    cmd = [binary, "-m", model, "--host", "127.0.0.1", "--port", str(port), "--metrics", "-np", "4", *extra]
    if threads:
        cmd += ["-t", str(threads)]
    log_path = out / f"{name}.log"
    summary: dict[str, Any] = {
        "mode": name,
        "args": extra,
        "threads": threads or "default",
        "max_tokens": MAX_TOKENS,
        "loadavg_1m_before": os.getloadavg()[0],
    }
    with open(log_path, "wb") as log:
        started = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=cwd)
        try:
            while True:
                if proc.poll() is not None:
                    raise SystemExit(f"{name}: llama-server exited with {proc.returncode}")
                try:
                    if httpx.get(f"{base}/health", timeout=2).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                time.sleep(0.05)
            summary["startup_s"] = round(time.perf_counter() - started, 3)
            (out / f"{name}.metrics.before").write_text(httpx.get(f"{base}/metrics").text)

            requests: list[dict[str, Any]] = []

            def record(kind: str, concurrency: int, result: dict[str, Any], elapsed: float) -> None:
                timings = result.get("timings", {})
                requests.append(
                    {
                        "kind": kind,
                        "concurrency": concurrency,
                        "completion_tokens": result.get("usage", {}).get("completion_tokens"),
                        "client_s": round(elapsed, 3),
                        "timings": timings,
                    }
                )

            # C=1: a non-stream and a stream request on one prompt, a third on another; then C=4.
            # Light modes stop after the first two.
            result, raw, elapsed = complete(base, PROMPTS[0], stream=False)
            record("nonstream", 1, result, elapsed)
            if save:
                (out / f"{name}.response.json").write_text(json.dumps(result, indent=2) + "\n")
            result, raw, elapsed = complete(base, PROMPTS[0], stream=True)
            record("stream", 1, result, elapsed)
            if save:
                events = [e for e in raw.decode().split("\n\n") if e.strip()]
                (out / f"{name}.stream.sse").write_text("\n\n".join(events[-4:]) + "\n\n")
            if name not in LIGHT:
                result, raw, elapsed = complete(base, PROMPTS[1], stream=False)
                record("nonstream", 1, result, elapsed)
                started_c4 = time.perf_counter()
                with concurrent.futures.ThreadPoolExecutor(4) as pool:
                    futures = [pool.submit(complete, base, p, False) for p in PROMPTS]
                    for future in futures:
                        result, _, elapsed = future.result()
                        record("nonstream", 4, result, elapsed)
                wall_c4 = time.perf_counter() - started_c4
                c4 = [r for r in requests if r["concurrency"] == 4]
                summary["c4_client_total_tok_s"] = round(sum(r["completion_tokens"] for r in c4) / wall_c4, 1)
            (out / f"{name}.metrics.after").write_text(httpx.get(f"{base}/metrics").text)

            c1 = [r for r in requests if r["concurrency"] == 1]
            summary["requests"] = requests
            summary["c1_client_tok_s"] = round(
                sum(r["completion_tokens"] for r in c1) / sum(r["client_s"] for r in c1), 1
            )
            summary["c1_server_predicted_per_second"] = round(
                sum(r["timings"]["predicted_per_second"] for r in c1) / len(c1), 1
            )
            summary["loadavg_1m_after"] = os.getloadavg()[0]
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    (out / f"{name}.summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(
        f"{name}: startup {summary['startup_s']} s, C=1 {summary['c1_client_tok_s']} tok/s,"
        f" C=4 {summary.get('c4_client_total_tok_s')} tok/s, load {summary['loadavg_1m_before']}",
        file=sys.stderr,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("modes", nargs="*")
    parser.add_argument("--out", type=pathlib.Path, default=HERE)
    parser.add_argument("--responses", default="ngram-simple-n3-m16", help="mode whose responses are kept")
    parser.add_argument("--threads", type=int, default=None, help="llama-server -t (default: its own)")
    args = parser.parse_args()
    binary, model_path = os.environ["LLAMA_SERVER"], pathlib.Path(os.environ["LLAMA_MODEL"])
    # The server runs in the model's directory and gets the bare file name, so the captured logs
    # and responses name no path of the capturing machine.
    model = model_path.name
    table = modes(model)
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.modes or list(table):
        run_mode(binary, model, name, table[name], args.out, name == args.responses, args.threads, model_path.parent)


if __name__ == "__main__":
    main()
