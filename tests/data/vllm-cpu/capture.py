"""Capture a real vLLM's three sources: ``python capture.py PORT NAME`` (README.md)."""

import json
import sys
import time
import urllib.request
from pathlib import Path

port, name = sys.argv[1], sys.argv[2]
base = f"http://127.0.0.1:{port}"
JSON = {"Content-Type": "application/json"}


def get(path: str) -> str:
    return urllib.request.urlopen(base + path, timeout=60).read().decode()


def post(path: str, body: dict) -> str:
    req = urllib.request.Request(base + path, json.dumps(body).encode(), JSON)
    return urllib.request.urlopen(req, timeout=300).read().decode()


Path(f"{name}.metrics.before").write_text(get("/metrics"))
text = "The quick brown fox jumps over the lazy dog. The quick brown fox jumps over the lazy dog again and again."
prompts = [f"Repeat this text three times: {text}", "List the numbers from 1 to 30 separated by commas."]
bodies = []
for p in prompts:
    body = {"model": "smollm2", "messages": [{"role": "user", "content": p}], "max_tokens": 64, "temperature": 0}
    bodies.append(json.loads(post("/v1/chat/completions", body)))
Path(f"{name}.responses.json").write_text(json.dumps(bodies, indent=1))
stream = {"model": "smollm2", "messages": [{"role": "user", "content": prompts[0]}], "max_tokens": 32}
stream.update({"temperature": 0, "stream": True, "stream_options": {"include_usage": True}})
Path(f"{name}.stream.sse").write_text(post("/v1/chat/completions", stream))
completion = {"model": "smollm2", "prompt": prompts[1], "max_tokens": 32, "temperature": 0}
Path(f"{name}.completion.json").write_text(post("/v1/completions", completion))
time.sleep(5)  # two stats ticks at VLLM_LOG_STATS_INTERVAL=2
Path(f"{name}.metrics.after").write_text(get("/metrics"))
print(get("/version"))
