"""Paired throughput of no speculation against ngram-simple on one shared machine (not a test).

Both servers are up at once and idle between requests; requests alternate between them, one at a
time, so both see the same background load. Prints one JSON line: tok/s per server (completion
tokens over client wall time), the servers' own `predicted_per_second` per request, the mean
accept length from /metrics, and the load average seen.

Usage: eval "$(scripts/get-llama-server.sh --print)" && export LLAMA_SERVER LLAMA_MODEL &&
       .venv/bin/python bench/llamacpp_paired_throughput.py [THREADS]
"""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
import time
from typing import Any

import httpx
from capture import PROMPTS, free_port

CONFIGS = {
    "ar": [],
    "ngram-simple-n3-m16": [
        *("--spec-type", "ngram-simple", "--spec-ngram-simple-size-n", "3", "--spec-ngram-simple-size-m", "16")
    ],
}
ROUNDS = 2
MAX_TOKENS = 128


def main() -> None:
    threads = sys.argv[1] if len(sys.argv) > 1 else "1"
    binary, model = os.environ["LLAMA_SERVER"], pathlib.Path(os.environ["LLAMA_MODEL"])
    procs: dict[str, subprocess.Popen[bytes]] = {}
    urls: dict[str, str] = {}
    try:
        for name, extra in CONFIGS.items():
            port = free_port()
            urls[name] = f"http://127.0.0.1:{port}"
            cmd = [binary, "-m", model.name, "--host", "127.0.0.1", "--port", str(port), "--metrics"]
            cmd += ["-np", "4", "-t", threads, "-c", "8192", *extra]
            procs[name] = subprocess.Popen(cmd, cwd=model.parent, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for url in urls.values():
            while True:
                try:
                    if httpx.get(f"{url}/health").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                time.sleep(0.1)
        results: dict[str, dict[str, Any]] = {n: {"tokens": 0, "s": 0.0, "server_tok_s": []} for n in CONFIGS}
        loads = []
        for _ in range(ROUNDS):
            for prompt in PROMPTS[:3]:
                for name, url in urls.items():
                    loads.append(os.getloadavg()[0])
                    body = {"prompt": prompt, "max_tokens": MAX_TOKENS, "temperature": 0}
                    start = time.perf_counter()
                    resp = httpx.post(f"{url}/v1/completions", json=body, timeout=600).json()
                    results[name]["s"] += time.perf_counter() - start
                    results[name]["tokens"] += resp["usage"]["completion_tokens"]
                    results[name]["server_tok_s"].append(round(resp["timings"]["predicted_per_second"], 1))
        for name, url in urls.items():
            samples = {
                line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
                for line in httpx.get(f"{url}/metrics").text.splitlines()
                if line.startswith("llamacpp:spec_decode_num_")
            }
            steps = samples.get("llamacpp:spec_decode_num_drafts_total", 0)
            accepted = samples.get("llamacpp:spec_decode_num_accepted_tokens_total", 0)
            results[name]["mean_len"] = round(1 + accepted / steps, 2) if steps else None
            results[name]["tok_s"] = round(results[name]["tokens"] / results[name]["s"], 1)
        summary = {"threads": threads, "loadavg_1m_min": min(loads), "loadavg_1m_max": max(loads), **results}
        print(json.dumps(summary))
    finally:
        for proc in procs.values():
            proc.send_signal(signal.SIGTERM)
            proc.wait()


if __name__ == "__main__":
    main()
