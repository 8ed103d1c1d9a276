"""Every source of an accept length agrees with the simulator's configured truth, on the shipped experiments.

sweeps/demo.yaml (SGLang's dialect) and sweeps/vllm-sim.yaml (vLLM's) run through the real CLI, as shipped
but for what a test needs: the simulator's ``tiny`` profile (k26's acceptance, about 50x faster; vLLM's
stats interval shortened to match), a free port, and enough tokens per point that sampling noise is well
under the 2% asked for (96 requests of 256 tokens: about 7,000 verify steps a point, a standard error near
0.6%; the shipped 16 x 64 gives ~300 steps and a standard error of about 2.5% on its own). The truth is
``SimConfig.expected_accept_length(max_tokens=...)``: tokens committed per verify step, bonus included, the
prefill's first token left out, each request's last step cut at max_tokens as engines cut it
(docs/engines.md, "One meaning per name").
"""

from __future__ import annotations

import json
import shlex
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator.sim.config import parse_args
from tests.timing import scaled

ROOT = Path(__file__).resolve().parents[2]
MAX_TOKENS = 256
REQUESTS = 96


@pytest.fixture(autouse=True)
def _a_home_of_its_own(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI's host lock lives under $HOME (~/.local/state/specsweep/NAME.lock): tests of one experiment name
    in two pytest-xdist workers would refuse each other ("driven by another specsweep run")."""
    monkeypatch.setenv("HOME", str(home))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _test_copy(name: str, tmp_path: Path) -> Path:
    doc = yaml.safe_load((ROOT / "sweeps" / name).read_text())
    port = _free_port()
    old_port = doc["server"]["url"].rsplit(":", 1)[1]
    command = doc["service"]["command"].replace("--profile k26", "--profile tiny")
    # tiny runs a point in a fraction of a second: vLLM's stats lines every 0.5 s, so each window has one or more
    # (the measurer opens and closes windows on them, orchestrator/sweep/closing.py). Not shorter: after the load
    # vLLM logs two ticks at INFO (the last busy interval and the idle one after it, v1/metrics/loggers.py
    # engine_is_idle), and at 50 ms both could fall before the window was read, leaving no tick to close it.
    command = command.replace("--log-stats-interval 1 ", "--log-stats-interval 0.5 ")
    doc["service"]["command"] = command.replace(f"--port {old_port}", f"--port {port}")
    doc["server"]["url"] = f"http://127.0.0.1:{port}"
    doc["load"].update({"concurrency": [1, 8], "requests": REQUESTS, "max_tokens": MAX_TOKENS, "warmup": 1})
    doc["load"].pop("rates", None)
    doc.setdefault("checks", {})["min_requests"] = REQUESTS
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _sweep(path: Path, tmp_path: Path) -> Path:
    results = tmp_path / "results"
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator", "sweep", str(path), "--results", str(results), "--no-report"],
        capture_output=True, text=True, timeout=scaled(600), check=False, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (run,) = [p for p in (results / path.stem).iterdir() if p.is_dir()]
    return run


def _truths(run: Path) -> dict[str, float]:
    plan = json.loads((run / "plan.json").read_text())
    out = {}
    for deployment in plan["deployments"]:
        words = shlex.split(deployment["command"])
        config = parse_args(words[words.index("orchestrator.sim") + 1 :])
        out[deployment["id"]] = config.expected_accept_length(max_tokens=MAX_TOKENS)
    return out


def _sources(record: dict[str, Any]) -> dict[str, float | None]:
    server = record["server"]
    return {
        "journal": server.get("accept_len"),
        "prometheus": (server.get("prometheus") or {}).get("accept_len"),
        "responses": (record["client"].get("spec") or {}).get("accept_len"),
    }


@pytest.mark.parametrize("name", ["demo.yaml", "vllm-sim.yaml"])
def test_every_source_agrees_with_the_configured_truth(name: str, tmp_path: Path) -> None:
    run = _sweep(_test_copy(name, tmp_path), tmp_path)
    truths = _truths(run)
    records = [json.loads(line) for line in (run / "records.jsonl").read_text().splitlines()]
    assert records and all(r["status"] == "ok" for r in records)
    checked = 0
    for record in records:
        truth = truths[record["deployment_id"]]
        if truth == 1.0:  # autoregressive: no speculative figures to compare
            continue
        for source, value in _sources(record).items():
            assert value is not None, f"{record['variant']} {record['params']} C={record['concurrency']}: no {source}"
            assert value == pytest.approx(truth, rel=0.02), (
                f"{record['variant']} {record['params']} C={record['concurrency']}: {source} {value:.3f} "
                f"against the configured truth {truth:.3f}"
            )
            checked += 1
    assert checked >= 3 * 2 * 3  # every speculative deployment, both loads, three sources
