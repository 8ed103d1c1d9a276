"""The lossless check, the cache flush and provenance over SSH on the real systemd test host (issue 17).

The simulator runs as a systemd unit changed through drop-ins; one configuration accepts wrong drafts
(``--fault wrong-token``). The check must name it (prompt, character, token) and pass the clean ones; every
point's prefix cache is flushed first; ``provenance.json`` holds the command systemd runs, read back with
``systemctl show -p ExecStart`` and ``ps``; the test host has no ``nvidia-smi``, which is a note.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from orchestrator.analysis import analyse
from orchestrator.experiment.hosts import SSHHostSpec
from orchestrator.hosts.ssh import SSHHost
from orchestrator.hosts.telemetry import GpuTelemetry, gpu_facts
from tests.reliability.harness import (
    cli_env,
    only_run_dir,
    records,
    run_cli,
    ssh_experiment,
    ssh_host_spec,
    wait_until,
    write_experiment,
)
from tests.system.conftest import SimUnit
from tests.system.support import TestHost

pytestmark = pytest.mark.timeout(300)


def test_lossless_over_ssh_names_the_configuration_that_changes_tokens(
    running_sim_unit: SimUnit, tmp_path: Path
) -> None:
    sim = running_sim_unit
    doc = ssh_experiment(
        "trust-ssh",
        [sim.host],
        sim.unit,
        sim.port,
        {
            "autoregressive": "--algorithm ar",
            "linear": "--algorithm linear --draft-tokens 7",
            "broken": "--algorithm linear --draft-tokens 7 --fault wrong-token",
        },
        baselines=["autoregressive", "linear"],
        load={
            "concurrency": [1, 2],
            "warmup": 1,
            "requests": 4,
            "max_tokens": 48,
            "temperature": 0,
            "flush_cache": True,
        },
    )
    doc["lossless"] = {"prompts": 3}
    path = write_experiment(tmp_path / "trust-ssh.yaml", doc)
    results = tmp_path / "results"
    proc = run_cli("sweep", str(path), "--results", str(results), "--json", env=cli_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    run_dir = only_run_dir(results, "trust-ssh")
    errors = [f for f in analyse(run_dir).findings if f.check == "lossless" and f.severity == "error"]
    assert [f.config for f in errors] == ["broken"]
    assert "prompt" in errors[0].message and "character" in errors[0].message and "token" in errors[0].message
    assert all(r["cache_flush"]["ok"] for r in records(run_dir))
    provenance = json.loads((run_dir / "provenance.json").read_text())
    host = next(iter(provenance["hosts"].values()))
    assert host["gpu"] is None and "no nvidia-smi" in host["note"]
    for deployment in provenance["deployments"].values():
        running = deployment["running"]
        assert "orchestrator.sim" in running["command"] and "orchestrator.sim" in running["exec_start"]


def test_gpu_telemetry_is_one_ssh_channel(testhost: TestHost) -> None:
    """An nvidia-smi-shaped stub on the host's PATH: the facts once, then one long-running -lms command read line
    by line over one channel of the host's own connection; closing the channel ends it on the host."""
    stub = (Path(__file__).resolve().parents[1] / "data" / "fake-nvidia-smi" / "nvidia-smi").read_text()
    testhost.admin(f"cat > /usr/local/bin/nvidia-smi <<'STUB'\n{stub}STUB\nchmod 755 /usr/local/bin/nvidia-smi")
    host = SSHHost.from_spec(SSHHostSpec(**ssh_host_spec(testhost)))
    try:
        facts = gpu_facts(host)
        assert facts["gpu"] is not None and facts["gpu"]["count"] == 2, facts
        connections = host.connections
        sampler = GpuTelemetry.start(host, interval_ms=100)
        time.sleep(1.0)
        summary = sampler.finish()
        assert summary["gpus"] == 2 and summary["samples"] >= 10 and summary["power_w_mean"] == 600.0, summary
        assert host.connections == connections  # a channel of the same connection, not a new login
        wait_until(
            lambda: "nvidia-smi" not in host.run("ps -eo args | grep -v grep | grep -- -lms || true").stdout, timeout=10
        )
    finally:
        testhost.admin("rm -f /usr/local/bin/nvidia-smi", check=False)
        host.close()
