"""A real SGLang end to end over SSH: SGLang 0.5.23 on the CPU as a systemd unit on the test host, swept with NGRAM.

The container sees this machine's files read-only through its overlay, so the venv and the model
scripts/get-sglang-cpu.sh cached are at the same paths inside. specsweep reaches the host only over SSH: a drop-in
per configuration, the unit's journal by cursor, /metrics and the load over the host's address.

One configuration (NGRAM, 4 draft tokens, a chain) at C = 1 and 2, three requests of 32 tokens, and the cache not
flushed between points (``load.flush_cache`` off), so the NGRAM corpus carries what earlier requests taught it:
each point's record says so (``server.drafter_corpus``) and the analysis warns of it (``drafter_corpus``), while
every figure still equals SGLang's counters over its window (tests/integration/sglang_support.py). One server start
(30 s quiet, up to three minutes on two busy cores); the host is as it was afterwards.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator.analysis import analyse
from orchestrator.runs.store import RunStore
from tests.integration.sglang_support import GROUP, REPO, check_speculative_point, paths
from tests.system.support import TestHost, etc_snapshot, unit_snapshot
from tests.timing import scaled

pytestmark = [
    pytest.mark.sglang,
    pytest.mark.xdist_group(GROUP),
    pytest.mark.timeout(1500),
]

UNIT = "specsweep-sglang.service"
PORT = 18493
ENVIRONMENT = {"SGLANG_USE_CPU_ENGINE": "1", "HF_HUB_OFFLINE": "1"}
BASE_ARGS = (
    f"--served-model-name smollm2 --device cpu --host 0.0.0.0 --port {PORT} --log-level info --enable-metrics "
    "--decode-log-interval 1 --disable-overlap-schedule --context-length 2048 --max-total-tokens 16384 "
    "--max-running-requests 8 --dtype float32"  # as sweeps/sglang-cpu.yaml
)
NGRAM = "--speculative-algorithm NGRAM --speculative-num-draft-tokens {k} --speculative-ngram-max-bfs-breadth 1"


@pytest.fixture(scope="module")
def sglang_unit(testhost: TestHost) -> Iterator[TestHost]:
    """SGLang installed (stopped) as a unit on the test host; removed afterwards whatever happened."""
    python, model = paths()
    check = testhost.admin(f"'{python}' -c 'import sglang' 2>&1", check=False)
    assert check.returncode == 0, f"sglang does not import on the test host:\n{check.stdout}"
    env = "".join(f"Environment={k}={v}\n" for k, v in ENVIRONMENT.items())
    text = (
        "[Unit]\nDescription=SGLang for specsweep system tests\n\n"
        f"[Service]\n{env}ExecStart={python} -m sglang.launch_server --model-path {model} {BASE_ARGS}\n"
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
        "name": "sglang-cpu-systemd",
        "host": {"ssh": f"root@{host.guest_ip}", "identity_file": host.key, "known_hosts": host.known_hosts},
        "service": {
            "kind": "systemd",
            "unit": UNIT,
            "exec_start": f"{python} -m sglang.launch_server --model-path {model} {BASE_ARGS} {{spec_args}}",
            "environment": ENVIRONMENT,
        },
        "server": {
            "url": f"http://{{host}}:{PORT}",
            "model": "smollm2",
            "ready_timeout": "900s",
            "expected_load_time": "120s",
        },
        "engine": "sglang",
        "variants": {"ngram": {"spec_args": NGRAM, "matrix": {"k": [4]}}},
        "load": {
            "concurrency": [1, 2],
            "warmup": 1,
            "requests": 3,
            "max_tokens": 32,
            "temperature": 0,
            "prompts": "builtin:summarization",
            "flush_cache": False,
        },
        "checks": {"min_requests": 3},
    }
    path = tmp_path / "sglang-cpu-systemd.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def test_a_systemd_sglang_over_ssh_equals_its_counters_and_says_its_corpus_was_not_emptied(
    sglang_unit: TestHost, tmp_path: Path, record_property: Any
) -> None:
    host = sglang_unit
    etc_before, unit_before = etc_snapshot(host), unit_snapshot(host, UNIT)
    path = experiment_file(tmp_path, host)
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator", "sweep", str(path), "--results", str(tmp_path / "results"), "--json"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=scaled(1400),
        env={**os.environ, "COLUMNS": "200"},
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)
    assert summary["state"] == "done" and summary["failed"] == 0
    run_dir = Path(summary["run_dir"])
    records = RunStore.open(run_dir).records()
    assert sorted((r.variant, r.concurrency, r.status) for r in records) == [("ngram", 1, "ok"), ("ngram", 2, "ok")]
    seen = {}
    for record in records:
        window = (run_dir / str(record.window_file)).read_text()
        assert "Decode batch" in window  # the unit's own journal, read by cursor over SSH
        assert (record.engine_info or {}).get("version") == "0.5.23", record.engine_info
        seen[f"C={record.concurrency}"] = check_speculative_point(record, flushed=False)
    corpus = [f for f in analyse(run_dir).findings if f.check == "drafter_corpus"]
    assert sorted(f.load for f in corpus) == ["C=1", "C=2"], [f.message for f in corpus]
    assert all(f.severity == "warning" and "not emptied" in f.message for f in corpus)
    record_property("sglang_ssh", json.dumps(seen, default=str))

    assert etc_snapshot(host) == etc_before
    assert unit_snapshot(host, UNIT) == unit_before
