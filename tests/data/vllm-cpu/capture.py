import json, sys, time, urllib.request
port, name = sys.argv[1], sys.argv[2]
base = f"http://127.0.0.1:{port}"
def get(path):
    return urllib.request.urlopen(base + path, timeout=60).read().decode()
def post(path, body):
    req = urllib.request.Request(base + path, json.dumps(body).encode(), {"Content-Type": "application/json"})
    return urllib.request.urlopen(req, timeout=300).read().decode()
open(f"{name}.metrics.before", "w").write(get("/metrics"))
text = "The quick brown fox jumps over the lazy dog. The quick brown fox jumps over the lazy dog again and again."
prompts = [f"Repeat this text three times: {text}", "List the numbers from 1 to 30 separated by commas."]
bodies = []
for p in prompts:
    body = {"model": "smollm2", "messages": [{"role": "user", "content": p}], "max_tokens": 64, "temperature": 0}
    bodies.append(json.loads(post("/v1/chat/completions", body)))
json.dump(bodies, open(f"{name}.responses.json", "w"), indent=1)
# one streamed with usage
body = {"model": "smollm2", "messages": [{"role": "user", "content": prompts[0]}], "max_tokens": 32, "temperature": 0,
        "stream": True, "stream_options": {"include_usage": True}}
req = urllib.request.Request(base + "/v1/chat/completions", json.dumps(body).encode(), {"Content-Type": "application/json"})
open(f"{name}.stream.sse", "w").write(urllib.request.urlopen(req, timeout=300).read().decode())
body = {"model": "smollm2", "prompt": prompts[1], "max_tokens": 32, "temperature": 0}
open(f"{name}.completion.json", "w").write(post("/v1/completions", body))
time.sleep(5)  # two stats ticks at VLLM_LOG_STATS_INTERVAL=2
open(f"{name}.metrics.after", "w").write(get("/metrics"))
print(get("/version"))
