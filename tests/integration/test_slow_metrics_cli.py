"""A slow-loris ``/metrics`` (issue 28, item 4), through the real CLI and the simulator's ``dribble-metrics``
fault: after its first whole answer, every ``/metrics`` answer sends its headers and then one byte a second.

- The point ends: its scrapes are given up at the control plane's deadline
  (orchestrator/engines/controlplane.py, DEADLINE_S), the record keeps the client's figures and no ``/metrics``
  figure, and the sweep ends ``done``.
- Ctrl-C while the controller is stuck in such a scrape exits 130 with the host restored: the simulator is
  gone and its port free, the run marked ``interrupted``.
"""

from __future__ import annotations

import signal
import socket
from pathlib import Path

import pytest

from tests.reliability.harness import (
    cli_env,
    free_port,
    local_experiment,
    only_run_dir,
    records,
    run_cli,
    run_state,
    started_cli,
    wait_until,
    write_experiment,
)
from tests.timing import scaled

pytestmark = pytest.mark.timeout(240)

LOAD = {
    "concurrency": [1],
    "warmup": 1,
    "requests": 2,
    "max_tokens": 8,
    "temperature": 0,
    "timeouts": {"connect": "2s", "first_token": "5s", "total": "10s"},
}


def _experiment(tmp_path: Path, port: int) -> Path:
    doc = local_experiment("dribble", port, {"linear": "--algorithm linear --fault dribble-metrics"}, load=LOAD)
    doc["lossless"] = {"enabled": False}
    return write_experiment(tmp_path / "dribble.yaml", doc)


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_a_dribbling_metrics_endpoint_costs_its_point_the_metrics_figures_only(tmp_path: Path, home: Path) -> None:
    port = free_port()
    path = _experiment(tmp_path, port)
    results = tmp_path / "results"
    proc = run_cli("sweep", str(path), "--results", str(results), env=cli_env(home), timeout=200)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    run_dir = only_run_dir(results, "dribble")
    assert run_state(run_dir) == "done"
    (record,) = records(run_dir)
    assert record["status"] == "ok"
    assert record["client"]["output_tokens"] > 0
    prom = (record.get("server") or {}).get("prometheus") or {}
    assert prom.get("accept_len") is None and prom.get("gen_throughput") is None, prom


def _dribbling(home: Path) -> bool:
    for log in home.rglob("*.log"):
        try:
            if "fault dribble-metrics" in log.read_text(errors="replace"):
                return True
        except OSError:
            continue
    return False


def test_ctrl_c_during_a_dribbling_scrape_exits_130_with_the_host_restored(tmp_path: Path, home: Path) -> None:
    port = free_port()
    path = _experiment(tmp_path, port)
    results = tmp_path / "results"
    with started_cli("sweep", str(path), "--results", str(results), env=cli_env(home)) as proc:
        assert wait_until(lambda: _dribbling(home), timeout=120), "the fault never started dribbling"
        assert proc.poll() is None
        proc.send_signal(signal.SIGINT)
        # It ends: the scrape gives up at its deadline (DEADLINE_S), not after the dribble (one byte a second
        # for ever); the test's own timeout is the bound, not a figure asserted on a shared machine.
        out, err = proc.communicate(timeout=scaled(120))
    assert proc.returncode == 130, out + err
    assert "Traceback" not in out + err
    run_dir = only_run_dir(results, "dribble")
    assert run_state(run_dir) == "interrupted"
    assert not _listening(port), "the simulator still listens: the host was not restored"
