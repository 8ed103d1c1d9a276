"""The lossless probe against hostile answers (issue 58, S8/S14): what one answer costs, and how long Ctrl-C takes.

Two parts, each in fresh processes, against tests/integration/hostile_probe_server.py on loopback:

- ``answer``: one baseline answer (``max_tokens`` 64, five alternatives asked) from a server that sends 10^5
  alternatives a token, or 10^6 one-character events; the seconds, the bytes the answer takes in
  ``lossless/<deployment>.jsonl``, the process's peak RSS, and the answer's error (a stop after 120 s bounds
  a run that would not end);
- ``sigint``: the real CLI's sweep on that server as its service, SIGINT one second after the probe (or the
  warm-up) asked; the seconds to its exit (given up after 60 s).

    python bench/hostile_probe.py [TREE]

``TREE``: the source tree to measure (default: this one); its tests/integration/hostile_probe_server.py is used.
Results: bench/RESULTS-reliability.md, "The lossless probe against hostile answers".
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ANSWER = r"""
import json, resource, sys, threading, time
sys.path.insert(0, sys.argv[1])
from tests.integration.hostile_probe_server import HostileServer
from orchestrator.load.settings import LoadSettings
from orchestrator.sweep.lossless import probe
mode, size = sys.argv[2], int(sys.argv[3])
url = HostileServer(mode, alternatives=size, events=size).start()
settings = LoadSettings(url=url, model="sim", api="chat", concurrency=1, requests=1, max_tokens=64,
                        temperature=0.0, prompts="builtin:chat", stream=True)
stop = threading.Event()
threading.Timer(120.0, stop.set).start()
started = time.monotonic()
(answer,) = probe(settings, 1, logprobs=5, stop=stop)
took = time.monotonic() - started
stored = len(json.dumps(answer.to_dict()))
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
print(f"| {mode} {size:,} | {took:.1f} | {stored:,} | {rss} | {answer.error or ''} |", flush=True)
import os; os._exit(0)
"""

SIGINT = r"""
import signal, sys, tempfile, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from tests.reliability.harness import cli_env, free_port, local_experiment, started_cli, wait_until, write_experiment
mode = sys.argv[2]
tmp = Path(tempfile.mkdtemp())
(tmp / "home").mkdir()
port, mark = free_port(), tmp / "mark"
load = {"concurrency": [1], "warmup": 1, "requests": 2, "max_tokens": 8, "temperature": 0}
doc = local_experiment("hostile", port, {"ar": ""}, load=load)
server = Path(sys.argv[1]) / "tests/integration/hostile_probe_server.py"
doc["service"]["command"] = f"{sys.executable} {server} --port {port} --mode {mode} --mark {mark} {{spec_args}}"
doc["lossless"] = {"prompts": 2}
path = write_experiment(tmp / "hostile.yaml", doc)
with started_cli("sweep", str(path), "--results", str(tmp / "results"), env=cli_env(tmp / "home")) as proc:
    wait_until(mark.exists, timeout=120)
    time.sleep(1.0)
    asked = time.monotonic()
    proc.send_signal(signal.SIGINT)
    try:
        proc.communicate(timeout=60)
        print(f"| {mode} | exit {proc.returncode} after {time.monotonic() - asked:.2f} s |", flush=True)
    except Exception:
        print(f"| {mode} | not done {time.monotonic() - asked:.0f} s after SIGINT (killed) |", flush=True)
"""


def main() -> None:
    tree = str(Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent).resolve())
    env = {"PYTHONPATH": tree, "PATH": "/usr/bin:/bin"}
    print("| hostile answer | seconds | bytes stored | peak RSS MB | error |\n|---|---|---|---|---|", flush=True)
    for mode, size in (("alternatives", 100_000), ("dribble", 1_000_000)):
        subprocess.run([sys.executable, "-c", ANSWER, tree, mode, str(size)], env=env, cwd=tree, check=False)
    print("\n| Ctrl-C in | after SIGINT |\n|---|---|", flush=True)
    for mode in ("endless", "silent", "silent --every-request"):
        subprocess.run([sys.executable, "-c", SIGINT, tree, mode], env=env, cwd=tree, check=False)


if __name__ == "__main__":
    main()
