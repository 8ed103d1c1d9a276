"""GPU slots with the process service on this machine, through the CLI: two slots of eight fake GPUs, a process
each, the records naming their slot and GPUs, the report's summary.csv too, and nothing left running."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.reliability.harness import cli_env, records, run_cli
from tests.timing import scaled

pytestmark = pytest.mark.timeout(240)

STUB_DIR = Path(__file__).resolve().parents[1] / "data" / "fake-nvidia-smi"

EXPERIMENT = """\
name: local-slots
host: {{kind: local, gpus: 8}}
service:
  kind: process
  command: >-
    {{python}} -m orchestrator.sim --host 127.0.0.1 --port {{slot_port}} --profile tiny --load-seconds 0.2
    {{spec_args}}
server: {{url: "http://127.0.0.1:{port}", ready_timeout: 30s, expected_load_time: 1s}}
engine: sglang
variants:
  autoregressive: {{spec_args: "--algorithm ar"}}
  linear: {{spec_args: "--algorithm linear --draft-tokens {{k}}", matrix: {{k: [2, 4]}}}}
baselines: [autoregressive]
load: {{concurrency: [1], requests: 2, max_tokens: 8, warmup: 0}}
lossless: {{enabled: false}}
"""


def test_two_slots_of_process_servers_through_the_cli(tmp_path: Path, unused_tcp_port: int) -> None:
    path = tmp_path / "slots.yaml"
    path.write_text(EXPERIMENT.format(port=unused_tcp_port))
    state = tmp_path / "gpus.json"
    env = cli_env(
        tmp_path,
        FAKE_GPU_STATE=str(state),
        FAKE_GPUS="8",
        PATH=f"{STUB_DIR}{os.pathsep}{os.environ['PATH']}",
    )
    results = tmp_path / "results"
    proc = run_cli("sweep", str(path), "--results", str(results), "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["state"] == "done"
    run_dir = next((results / "local-slots").iterdir())
    recs = records(run_dir)
    assert {r["host"] for r in recs} == {"local/gpu0", "local/gpu1"}
    for r in recs:
        placement = r["placement"]
        assert r["host"] == placement["slot"] and placement["cuda_visible_devices"] == str(placement["gpus"][0])
        assert placement["instance"] == f"local-slots-gpu{placement['gpus'][0]}"
        assert placement["port"] == unused_tcp_port + placement["gpus"][0]
        assert placement["gpu_check"]["clean"] is True
        telemetry = r["telemetry"]  # the slot's own GPU: its power, not the host's eight
        assert telemetry["gpus"] == 1 and telemetry["command"].endswith(f" -i {placement['gpus'][0]}"), telemetry
    with (run_dir / "summary.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert rows and all(row["slot"] == row["host"] and row["gpus"] in ("0", "1") for row in rows)
    # Every simulator stopped with its deployment: no fake GPU is held any more.
    assert json.loads(state.read_text())["holders"] == []


def test_a_second_simulator_on_a_taken_gpu_fails_its_start_with_cudas_out_of_memory_error(
    tmp_path: Path, unused_tcp_port_factory: Any
) -> None:
    import subprocess
    import sys

    from tests.reliability.harness import wait_until

    state = tmp_path / "gpus.json"
    env = {**os.environ, "FAKE_GPU_STATE": str(state), "FAKE_GPUS": "8", "CUDA_VISIBLE_DEVICES": "3"}
    command = [sys.executable, "-m", "orchestrator.sim", "--profile", "tiny", "--load-seconds", "0"]
    first = subprocess.Popen([*command, "--port", str(unused_tcp_port_factory())], env=env, stdout=subprocess.DEVNULL)
    try:
        assert wait_until(lambda: state.exists() and json.loads(state.read_text())["holders"], timeout=30)
        second = subprocess.run(
            [*command, "--port", str(unused_tcp_port_factory())],
            env={**env, "CUDA_VISIBLE_DEVICES": "2,3"},
            capture_output=True,
            text=True,
            timeout=scaled(60),
        )
        assert second.returncode == 1
        assert "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 58.59 GiB. GPU 1 has" in second.stdout
        assert f"Process {first.pid} has 58.59 GiB memory in use." in second.stdout
        holders = json.loads(state.read_text())["holders"]
        assert [(h["pid"], h["gpu"]) for h in holders] == [(first.pid, 3)]
    finally:
        first.terminate()
        first.wait(timeout=scaled(30))
    assert json.loads(state.read_text())["holders"] == []  # its GPU freed when it stopped


def test_per_slot_baselines_are_planned_once_per_slot_and_every_output_counts_alike(
    tmp_path: Path, unused_tcp_port: int
) -> None:
    """Issue 49: the baseline measured on each of two slots is a point per slot; the answer took "planned" from
    plan.json (each point once: "4 points ok (of 3 planned)"). The run records its layout and every output
    counts from it."""
    path = tmp_path / "slots.yaml"
    path.write_text(EXPERIMENT.format(port=unused_tcp_port))
    env = cli_env(
        tmp_path,
        FAKE_GPU_STATE=str(tmp_path / "gpus.json"),
        FAKE_GPUS="8",
        PATH=f"{STUB_DIR}{os.pathsep}{os.environ['PATH']}",
    )
    results = tmp_path / "results"
    proc = run_cli("sweep", str(path), "--results", str(results), "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    run_dir = next((results / "local-slots").iterdir())
    layout = json.loads((run_dir / "layout.json").read_text())["per_target"]
    assert list(layout.values()) == [["local/gpu0", "local/gpu1"]]  # the baseline, on both slots
    answer = json.loads((run_dir / "answer.json").read_text())["counts"]
    run = json.loads((run_dir / "run.json").read_text())["points"]
    # autoregressive on gpu0 and on gpu1, linear(k=2) and linear(k=4) once each.
    assert answer["planned"] == answer["ok"] == 4, answer
    assert run == {"planned": 4, "ok": 4, "failed": 0}
    shown = run_cli("report", str(run_dir), "--json", env=env)
    assert shown.returncode == 0, shown.stderr
    assert "4 points planned." in (run_dir / "report.md").read_text()


def test_a_resume_with_fewer_gpus_counts_the_earlier_slots_baselines_in_every_output(
    tmp_path: Path, unused_tcp_port: int
) -> None:
    """Issue 49: opened on four GPUs (``gpus: auto``), interrupted once the four slots' baselines are in, resumed on
    two: the answer took "planned" from plan.json (7: the baseline once) and run.json from the resumed layout
    (8: the baseline on two slots) while 10 points were ok (the baseline on four slots, six configurations)."""
    import signal

    from tests.reliability.harness import started_cli, wait_until

    text = EXPERIMENT.format(port=unused_tcp_port).replace("gpus: 8", "gpus: auto")
    path = tmp_path / "slots.yaml"
    path.write_text(text.replace("k: [2, 4]", "k: [2, 3, 4, 5, 6, 7]").replace("requests: 2", "requests: 6"))
    env = cli_env(
        tmp_path, FAKE_GPU_STATE=str(tmp_path / "gpus.json"), PATH=f"{STUB_DIR}{os.pathsep}{os.environ['PATH']}"
    )
    results = tmp_path / "results"
    with started_cli("sweep", str(path), "--results", str(results), env={**env, "FAKE_GPUS": "4"}) as proc:

        def baselines_in() -> bool:
            found = list(results.glob("local-slots/*/records.jsonl"))
            return bool(found) and len(found[0].read_text().splitlines()) >= 4

        assert wait_until(baselines_in, timeout=120)
        os.killpg(proc.pid, signal.SIGINT)
        proc.communicate(timeout=scaled(120))
    run_dir = next((results / "local-slots").iterdir())
    before = {r["host"] for r in records(run_dir) if r["variant"] == "autoregressive"}
    assert before == {f"local/gpu{i}" for i in range(4)}
    proc2 = run_cli("sweep", str(path), "--results", str(results), "--resume", "latest", env={**env, "FAKE_GPUS": "2"})
    assert proc2.returncode == 0, proc2.stderr
    ok = len({(r["host"] if r["baseline"] else "", r["point_id"]) for r in records(run_dir) if r["status"] == "ok"})
    answer = json.loads((run_dir / "answer.json").read_text())["counts"]
    run = json.loads((run_dir / "run.json").read_text())["points"]
    assert ok == 10
    assert answer["planned"] == answer["ok"] == 10, answer
    assert run == {"planned": 10, "ok": 10, "failed": 0}
