"""Issue 59, item 5: `doctor` beside a live sweep of the same experiment said `all 1 host(s) ready` and invited
`specsweep restore` under it; it says the sweep is running (pid, run) and to wait, and the host is not ready.
An experiment whose server runs on the CPU (the simulator here) is not warned that nvidia-smi is missing."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from tests.reliability.harness import (
    cli_env,
    free_port,
    local_experiment,
    local_leftovers_restored,
    records,
    run_cli,
    run_dirs,
    started_cli,
    wait_until,
    write_experiment,
)

pytestmark = pytest.mark.timeout(300)


def test_doctor_beside_a_live_sweep_of_the_experiment_says_wait_and_asks_no_gpu_of_the_simulator(
    tmp_path: Path, home: Path
) -> None:
    load = {"concurrency": [1, 2], "warmup": 1, "requests": 30, "max_tokens": 48, "ignore_eos": True}
    doc = local_experiment("busy", free_port(), {"ar": "--algorithm ar", "linear": "--algorithm linear"}, load=load,
                           itl_ms=10)  # fmt: skip
    path = write_experiment(tmp_path / "busy.yaml", doc)
    results = tmp_path / "results"
    env = cli_env(home)
    with local_leftovers_restored(home, path):
        idle = run_cli("doctor", str(path), env=env)
        assert idle.returncode == 0, idle.stdout + idle.stderr
        assert "nvidia-smi not found" not in idle.stdout
        assert "gpu: not checked: the experiment runs the simulator" in idle.stdout, idle.stdout
        with started_cli("sweep", str(path), "--results", str(results), env=env) as sweep:
            run_dir = wait_until(lambda: (run_dirs(results, "busy") or [None])[0], timeout=60)
            wait_until(lambda: records(run_dir), timeout=120)  # it is measuring
            said = run_cli("doctor", str(path), env=env)
            as_json = json.loads(run_cli("doctor", str(path), "--json", env=env).stdout)
            os.kill(sweep.pid, signal.SIGINT)  # Ctrl-C: the sweep restores the host on its way out
            sweep.communicate(timeout=120)
    out = said.stdout
    assert said.returncode == 1, out
    assert f"a sweep of this experiment is running (pid {sweep.pid} on " in out, out
    assert f"run {run_dir.name}): wait for it" in out, out
    assert "restore" not in out and "all 1 host(s) ready" not in out, out
    assert "host(s) not ready" in out
    (check,) = [c for c in as_json["hosts"][0]["checks"] if c["name"] == "leftovers"]
    assert check["status"] == "fail", check
