"""A fake ``kubectl``, for the Kubernetes launcher's tests: :func:`install` writes it on a ``PATH`` of its own.

It records each call (its argv after ``kubectl``, and its standard input) in ``calls.jsonl`` and keeps the
cluster in ``state.json``: the objects applied (Jobs, Services, ConfigMaps), answered as the API server would
for the commands the launcher uses (``apply -f -``, ``get pods|jobs|configmap|nodes -o json``, ``create
configmap``, ``delete``, ``logs``, ``port-forward``, ``version``, ``auth can-i``). ``mode`` in the state says how a
Job's pod goes: ``ok`` (running and ready on ``gpu-node-1``), ``pull_error`` (waiting on ErrImagePull) or
``run`` (the container's command runs here, as a process of its own: the simulator, so a whole sweep runs;
its output is the pod's log, its exit the pod's end, ``port-forward`` forwards the container's own port);
``forward_port`` is the local port ``port-forward`` says it forwards (a test server's); ``answers`` maps a
command's first two words (``get pods``) to what it prints instead, ``failures`` to what it says on standard
error before it exits 1.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

SCRIPT = r"""
import json, os, signal, subprocess, sys, time
import yaml

here = os.environ["FAKE_KUBE_DIR"]
state_path = os.path.join(here, "state.json")
state = json.load(open(state_path)) if os.path.exists(state_path) else {}
state.setdefault("objects", {})
state.setdefault("mode", "ok")
args = sys.argv[1:]
stdin = sys.stdin.read() if "-f" in args and "-" in args else None
with open(os.path.join(here, "calls.jsonl"), "a") as log:
    log.write(json.dumps({"argv": args, "stdin": stdin}) + "\n")
rest, i = [], 0
while i < len(args):  # the global flags: --kubeconfig, --context, --namespace
    if args[i] in ("--kubeconfig", "--context", "--namespace"):
        state.setdefault("flags", {})[args[i]] = args[i + 1]
        i += 2
        continue
    rest.append(args[i])
    i += 1
objects = state["objects"]


def save():
    json.dump(state, open(state_path, "w"))


def selector(args):
    if "-l" not in args:
        return {}
    return dict(part.split("=", 1) for part in args[args.index("-l") + 1].split(","))


def matching(kinds, labels):
    out = []
    for key, obj in objects.items():
        have = obj.get("metadata", {}).get("labels", {})
        if obj["kind"] in kinds and all(have.get(k) == v for k, v in labels.items()):
            out.append(key)
    return out


verb = rest[0] if rest else ""
said = " ".join(rest[:2])
if said in state.get("answers", {}):  # a canned answer: what a broken or hostile API server says
    sys.stdout.write(state["answers"][said])
    sys.exit(0)
if said in state.get("failures", {}):  # a canned refusal, on standard error
    sys.stderr.write(state["failures"][said])
    sys.exit(1)
if verb == "apply":
    for doc in yaml.safe_load_all(stdin):
        key = doc["kind"] + "/" + doc["metadata"]["name"]
        objects[key] = doc
        print(doc["kind"].lower() + "/" + doc["metadata"]["name"] + " created")
        if doc["kind"] == "Job" and state["mode"] == "run":
            container = doc["spec"]["template"]["spec"]["containers"][0]
            env = dict(os.environ)
            env.update({e["name"]: e.get("value", "") for e in container.get("env", [])})
            log_path = os.path.join(here, doc["metadata"]["name"] + ".log")
            with open(log_path, "ab") as out:
                proc = subprocess.Popen(container["command"], stdout=out, stderr=subprocess.STDOUT, env=env,
                                        start_new_session=True, stdin=subprocess.DEVNULL)
            doc["fake"] = {"pid": proc.pid, "log": log_path}
    save()
elif verb == "get" and rest[1] == "pods":
    job = selector(rest).get("specsweep.io/job")
    items = []
    if "Job/" + str(job) in objects:
        fake = objects["Job/" + job].get("fake")
        alive = fake is not None and os.path.exists("/proc/" + str(fake["pid"]))
        if alive:
            with open("/proc/" + str(fake["pid"]) + "/stat") as stat_file:
                alive = stat_file.read().split(")")[-1].split()[0] != "Z"
        if fake is not None and not alive:
            status = {"phase": "Failed", "containerStatuses": [{"state": {"terminated": {"exitCode": 1}}}]}
        elif state["mode"] == "pull_error":
            waiting = {"reason": "ErrImagePull", "message": "pull access denied"}
            status = {"phase": "Pending", "containerStatuses": [{"state": {"waiting": waiting}}]}
        else:
            ready = [{"type": "Ready", "status": "True"}]
            status = {"phase": "Running", "conditions": ready, "containerStatuses": [{"state": {"running": {}}}]}
        pod = {"metadata": {"name": job + "-x7k2p"}, "spec": {"nodeName": "gpu-node-1"}, "status": status}
        items.append(pod)
    print(json.dumps({"items": items}))
elif verb == "get" and set(rest[1].split(",")) <= {"jobs", "services"}:
    kinds = {{"jobs": "Job", "services": "Service"}[k] for k in rest[1].split(",")}
    print(json.dumps({"kind": "List", "items": [objects[k] for k in matching(kinds, selector(rest))]}))
elif verb == "get" and rest[1] == "configmap":
    obj = objects.get("ConfigMap/" + rest[2])
    if obj is not None:
        print(json.dumps(obj))
elif verb == "get" and rest[1] == "nodes":
    node = {"metadata": {"name": "gpu-node-1"}, "status": {"allocatable": {"nvidia.com/gpu": "8"}}}
    print(json.dumps({"items": [node]}))
elif verb == "create" and rest[1] == "configmap":
    name = rest[2]
    if "ConfigMap/" + name in objects:
        sys.stderr.write('Error from server (AlreadyExists): configmaps "' + name + '" already exists\n')
        sys.exit(1)
    data = dict(a.split("=", 1)[1].split("=", 1) for a in rest[3:] if a.startswith("--from-literal="))
    objects["ConfigMap/" + name] = {"kind": "ConfigMap", "metadata": {"name": name}, "data": data}
    save()
    print("configmap/" + name + " created")
elif verb == "delete":
    what = rest[1]
    if "-l" in rest:
        kinds = {"jobs": "Job", "services": "Service"}
        gone = matching({kinds[k] for k in what.split(",")}, selector(rest))
    elif what == "configmap":
        gone = ["ConfigMap/" + rest[2]]
    else:
        kinds = {"job": "Job", "service": "Service"}
        gone = [kinds[w.split("/")[0]] + "/" + w.split("/")[1] for w in rest[1:] if "/" in w]
    for key in gone:
        fake = objects.get(key, {}).get("fake")
        if fake is not None:
            try:
                os.killpg(fake["pid"], signal.SIGTERM)
            except ProcessLookupError:
                pass
        if objects.pop(key, None) is not None:
            print(key.lower() + " deleted")
    save()
elif verb == "logs":
    fake = objects.get("Job/" + rest[1].split("/", 1)[1], {}).get("fake")
    if fake is not None:
        sys.stdout.write(open(fake["log"], errors="replace").read())
    else:
        sys.stdout.write(state.get("log", "server starting\nready\n"))
elif verb == "port-forward":
    port = state.get("forward_port") or rest[2].lstrip(":")
    print("Forwarding from 127.0.0.1:" + str(port) + " -> " + rest[2].lstrip(":"), flush=True)
    time.sleep(600)
elif verb == "version":
    print(json.dumps({"clientVersion": {"gitVersion": "v1.31.0"}}))
elif verb == "auth":
    print("yes")
else:
    sys.stderr.write("fake kubectl: unknown command " + " ".join(rest) + "\n")
    sys.exit(2)
"""


def install(directory: Path, monkeypatch: Any, **state: Any) -> Path:
    """Write the fake as ``kubectl`` in ``directory``/bin, put it first on ``PATH``; ``state`` seeds the cluster."""
    bin_dir = directory / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    program = bin_dir / "kubectl"
    program.write_text(f"#!{sys.executable}\n{SCRIPT}")
    program.chmod(program.stat().st_mode | stat.S_IXUSR)
    (directory / "state.json").write_text(json.dumps({"objects": {}, "mode": "ok", **state}))
    monkeypatch.setenv("FAKE_KUBE_DIR", str(directory))
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    return directory


def calls(directory: Path) -> list[dict[str, Any]]:
    """Every call so far: ``{"argv": [...], "stdin": text or None}``."""
    path = directory / "calls.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def state(directory: Path) -> dict[str, Any]:
    return json.loads((directory / "state.json").read_text())


def without_flags(argv: list[str]) -> list[str]:
    """``argv`` without the global flags (``--namespace X``, ``--context X``, ``--kubeconfig X``)."""
    out, i = [], 0
    while i < len(argv):
        if argv[i] in ("--kubeconfig", "--context", "--namespace"):
            i += 2
            continue
        out.append(argv[i])
        i += 1
    return out
