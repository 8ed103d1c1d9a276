import json, os, sys, time, urllib.request
from concurrent.futures import ThreadPoolExecutor
port, name, log = sys.argv[1], sys.argv[2], sys.argv[3]
base = f"http://127.0.0.1:{port}"
def get(path):
    return urllib.request.urlopen(base + path, timeout=60).read().decode()
def chat(p):
    body = {"model": "smollm2", "messages": [{"role": "user", "content": p}], "max_tokens": 96, "temperature": 0}
    req = urllib.request.Request(base + "/v1/chat/completions", json.dumps(body).encode(), {"Content-Type": "application/json"})
    return json.loads(urllib.request.urlopen(req, timeout=300).read())
time.sleep(3)
start = os.path.getsize(log)
before = get("/metrics")
text = "Alice was beginning to get very tired of sitting by her sister on the bank, and of having nothing to do."
prompts = [f"Repeat this sentence twice: {text}", "Count from 1 to 40, separated by commas.",
           f"Copy this text exactly: {text}", "Write the alphabet in capital letters, separated by spaces."]
with ThreadPoolExecutor(2) as pool:
    answers = list(pool.map(chat, prompts))
after = get("/metrics")
early = open(log, "rb").read()[start:].decode()
time.sleep(4.5)  # the next tick at VLLM_LOG_STATS_INTERVAL=2
closed = open(log, "rb").read()[start:].decode()
open(f"{name}.metrics.before", "w").write(before)
open(f"{name}.metrics.after", "w").write(after)
open(f"{name}.early.log", "w").write(early)
open(f"{name}.closed.log", "w").write(closed)
json.dump(answers, open(f"{name}.responses.json", "w"), indent=1)
