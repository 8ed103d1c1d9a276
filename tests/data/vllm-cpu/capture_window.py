"""Capture a window read right after its load and after the next tick: ``python capture_window.py PORT NAME LOG``."""

import json
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

port, name, log = sys.argv[1], sys.argv[2], Path(sys.argv[3])
base = f"http://127.0.0.1:{port}"


def get(path: str) -> str:
    return urllib.request.urlopen(base + path, timeout=60).read().decode()


def chat(p: str) -> dict:
    body = {"model": "smollm2", "messages": [{"role": "user", "content": p}], "max_tokens": 96, "temperature": 0}
    req = urllib.request.Request(
        base + "/v1/chat/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    return json.loads(urllib.request.urlopen(req, timeout=300).read())


time.sleep(3)
start = log.stat().st_size
before = get("/metrics")
text = "Alice was beginning to get very tired of sitting by her sister on the bank, and of having nothing to do."
prompts = [
    f"Repeat this sentence twice: {text}",
    "Count from 1 to 40, separated by commas.",
    f"Copy this text exactly: {text}",
    "Write the alphabet in capital letters, separated by spaces.",
]
with ThreadPoolExecutor(2) as pool:
    answers = list(pool.map(chat, prompts))
after = get("/metrics")
early = log.read_bytes()[start:].decode()
time.sleep(4.5)  # the next tick at VLLM_LOG_STATS_INTERVAL=2
closed = log.read_bytes()[start:].decode()
for suffix, content in (
    ("metrics.before", before),
    ("metrics.after", after),
    ("early.log", early),
    ("closed.log", closed),
    ("responses.json", json.dumps(answers, indent=1)),
):
    Path(f"{name}.{suffix}").write_text(content)
