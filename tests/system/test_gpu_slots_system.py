"""GPU slots on the systemd test host with eight fake GPUs.

The host gets the nvidia-smi stub (tests/data/fake-nvidia-smi) on its PATH, reading the fake GPUs' state file
the simulators write (orchestrator/sim/gpus.py), and a template unit ``specsweep-gpu@.service`` whose
instances run the simulator (``KillMode=process``, as a server whose workers may outlive it). A sweep of TP=1
and TP=2 configurations runs them in parallel slots, one template instance each, every one on its own GPUs
(two servers on one GPU would fail with CUDA's out-of-memory error), and leaves the host byte for byte as it
found it. A server that leaves a worker holding its GPU makes the next deployment on that slot fail naming
the worker (PID, command, memory), while the other slot goes on.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.reliability.harness import (
    cli_env,
    events,
    records,
    run_cli,
    ssh_host_spec,
    started_cli,
    wait_until,
    write_experiment,
)
from tests.system.support import PYTHON, TestHost, changed_files

pytestmark = pytest.mark.timeout(300)

STUB = Path(__file__).resolve().parents[1] / "data" / "fake-nvidia-smi" / "nvidia-smi"
UNIT = "specsweep-gpu@.service"
STATE = "/run/specsweep-fake-gpus.json"
PORT = 31100


def _instances(host: TestHost) -> str:
    """The template's instances systemd knows of (none loaded before and after a run)."""
    return host.admin("systemctl list-units 'specsweep-gpu@*' --all --no-legend --plain; true").stdout


@pytest.fixture
def gpu_host(testhost: TestHost) -> Iterator[TestHost]:
    """The test host with eight fake GPUs and the template unit; everything removed afterwards."""
    host = testhost
    stub = STUB.read_text()
    unit = (
        "[Unit]\nDescription=specsweep GPU slot test %i\n\n[Service]\n"
        f"Environment=FAKE_GPU_STATE={STATE} FAKE_GPUS=8\n"
        f"ExecStart={PYTHON} -m orchestrator.sim --host 0.0.0.0 --port {PORT} --profile tiny\n"
        "KillMode=process\n"
    )
    host.admin(
        f"cat > /usr/local/lib/specsweep-fake-nvidia-smi <<'STUB'\n{stub}STUB\n"
        "chmod 755 /usr/local/lib/specsweep-fake-nvidia-smi\n"
        "cat > /usr/local/bin/nvidia-smi <<'EOF'\n#!/bin/sh\n"
        f'FAKE_GPUS=8 FAKE_GPU_STATE={STATE} exec /usr/local/lib/specsweep-fake-nvidia-smi "$@"\nEOF\n'
        "chmod 755 /usr/local/bin/nvidia-smi\n"
        f"cat > /etc/systemd/system/{UNIT} <<'EOF'\n{unit}EOF\nsystemctl daemon-reload"
    )
    try:
        yield host
    finally:
        host.admin(
            "systemctl stop 'specsweep-gpu@*' 2>/dev/null; "
            f'for p in $(python3 -c \'import json; print(" ".join(str(h["pid"]) for h in '
            f'json.load(open("{STATE}"))["holders"]))\' 2>/dev/null); do kill -9 $p; done; '
            f"rm -f /etc/systemd/system/{UNIT} {STATE} {STATE}.lock /usr/local/bin/nvidia-smi "
            "/usr/local/lib/specsweep-fake-nvidia-smi; rm -rf /etc/systemd/system/specsweep-gpu@*.service.d "
            "/var/lib/specsweep/specsweep-gpu@*; rmdir /var/lib/specsweep 2>/dev/null; "
            "systemctl daemon-reload; systemctl reset-failed 'specsweep-gpu@*' 2>/dev/null; true",
            check=False,
        )


def _experiment(
    host: TestHost, name: str, variants: dict[str, Any], *, gpus: int | str, **extra: Any
) -> dict[str, Any]:
    return {
        "name": name,
        "host": ssh_host_spec(host, gpus=gpus),
        "service": {
            "kind": "systemd",
            "unit": UNIT,
            "exec_start": "{python} -m orchestrator.sim --host 0.0.0.0 --port {slot_port} --profile tiny "
            "--load-seconds 0.3 --decode-log-interval 1 {spec_args}",
        },
        "server": {
            "url": f"http://{{host}}:{PORT}",
            "model": "sim",
            "ready_timeout": "30s",
            "expected_load_time": "1s",
        },
        "engine": "sim",
        "variants": variants,
        "baselines": ["autoregressive"],
        "load": {"concurrency": [1], "requests": 2, "max_tokens": 8, "warmup": 0},
        "lossless": {"enabled": False},
        **extra,
    }


def _holders(host: TestHost) -> list[dict[str, Any]]:
    text = host.admin(f"cat {STATE} 2>/dev/null || echo '{{}}'").stdout
    return list(json.loads(text).get("holders", []))


def _overlapping(recs: list[dict[str, Any]]) -> int:
    """The most slots measuring at one moment (from the records' own start and end times)."""
    spans: dict[str, list[tuple[str, str]]] = {}
    for r in recs:
        spans.setdefault(r["placement"]["slot"], []).append((r["started_at"], r["finished_at"]))
    bounds = {slot: (min(s for s, _ in v), max(e for _, e in v)) for slot, v in spans.items()}
    return max(sum(1 for s, e in bounds.values() if s <= start <= e) for start, _ in bounds.values())


def test_tp1_and_tp2_configurations_run_in_parallel_slots_and_leave_the_host_as_found(
    gpu_host: TestHost, tmp_path: Path
) -> None:
    host = gpu_host
    before_files, before_units = changed_files(host), _instances(host)
    variants = {
        "autoregressive": {"spec_args": "--algorithm ar"},
        "linear": {"spec_args": "--algorithm linear --draft-tokens {k}", "matrix": {"k": [2, 4, 6]}},
        "ddtree": {
            "spec_args": "--algorithm ddtree --budget {b} --topk 2 --tp-size 2",
            "matrix": {"b": [4, 8]},
            "gpus_per_deployment": 2,
        },
    }
    path = write_experiment(tmp_path / "slots.yaml", _experiment(host, "slots", variants, gpus=8))
    plan = run_cli("plan", str(path), "--json", env=cli_env(tmp_path))
    assert plan.returncode == 0, plan.stderr
    phases = json.loads(plan.stdout)["slots"]["phases"]
    assert [(p["gpus_per_deployment"], len(p["slots"])) for p in phases] == [(1, 3), (2, 2)]
    results = tmp_path / "results"
    proc = run_cli("sweep", str(path), "--results", str(results), "--json", "--no-report", env=cli_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["state"] == "done" and summary["failed"] == 0, summary
    run_dir = next((results / "slots").iterdir())
    recs = records(run_dir)
    # Every record names its slot and GPUs; two servers never shared a GPU (the second would have failed with
    # CUDA's out-of-memory error: 2 x 60000 MiB > 81559), and slots measured side by side.
    assert all(r["status"] == "ok" for r in recs)
    placements = {(r["variant"], r["placement"]["slot"], tuple(r["placement"]["gpus"])) for r in recs}
    tp2 = {gpus for variant, _, gpus in placements if variant == "ddtree"}
    assert tp2 == {(0, 1), (2, 3)}
    assert {len(gpus) for variant, _, gpus in placements if variant == "linear"} == {1}
    assert {r["host"] for r in recs if r["variant"] == "autoregressive"} == {
        f"testhost{host.index}/gpu{g}" for g in ("0", "1", "2", "0-1", "2-3")
    }  # the baseline measured on every slot it is compared on
    instances = {r["placement"]["instance"] for r in recs}
    assert {"specsweep-gpu@0.service", "specsweep-gpu@0-1.service"} <= instances
    assert all(r["placement"]["gpu_check"]["clean"] is True for r in recs)
    assert _overlapping(recs) >= 2
    # The host as found: no drop-in, marker or lock left, no instance loaded, no GPU held.
    assert changed_files(host) == before_files
    assert _instances(host) == before_units
    assert _holders(host) == []


def test_a_worker_left_on_a_gpu_fails_the_next_deployment_of_its_slot_naming_it(
    gpu_host: TestHost, tmp_path: Path
) -> None:
    host = gpu_host
    before_files = changed_files(host)
    variants = {
        "autoregressive": {"spec_args": "--algorithm ar"},
        # Dealt over two slots: gpu0 runs leaky, then linear(k=4) and linear(k=8); gpu1 linear(k=2) and (k=6).
        "leaky": {"spec_args": "--algorithm linear --draft-tokens 3 --fault orphan-worker=4096"},
        "linear": {"spec_args": "--algorithm linear --draft-tokens {k}", "matrix": {"k": [2, 4, 6, 8]}},
    }
    doc = _experiment(host, "leak", variants, gpus=2, slots={"clean_timeout": "2s"})
    path = write_experiment(tmp_path / "leak.yaml", doc)
    results = tmp_path / "results"
    proc = run_cli("sweep", str(path), "--results", str(results), "--json", "--no-report", env=cli_env(tmp_path))
    run_dir = next((results / "leak").iterdir())
    recs = records(run_dir)
    by_label = {(r["variant"], json.dumps(r.get("params") or {})): r for r in recs}
    left = _holders(host)
    assert len(left) == 1 and left[0]["gpu"] == 0 and left[0]["mib"] == 4096, left
    pid = left[0]["pid"]
    failed = by_label[("linear", json.dumps({"k": 4}))]
    assert failed["status"] == "failed" and failed["host"] == f"testhost{host.index}/gpu0"
    error = failed["error"]
    assert error["kind"] == "start_gpu_busy", error
    assert f"PID {pid} on GPU 0 (4096 MiB)" in error["message"] and "orchestrator.sim.gpus hold" in error["message"]
    assert any(f"PID {pid}" in line for line in error["evidence"])
    check = failed["placement"]["gpu_check"]  # the evidence in the record: its slot and the failed GPU check
    assert failed["placement"]["gpus"] == [0] and check["clean"] is False
    assert any(f"PID {pid}" in line for line in check["evidence"])
    # The slot retired (its GPU is held); the other slot went on and took what was left of its hand.
    other = [r for r in recs if r["host"] == f"testhost{host.index}/gpu1"]
    assert other and all(r["status"] == "ok" for r in other)
    assert by_label[("linear", json.dumps({"k": 8}))]["status"] == "ok"
    assert [r["status"] for r in recs if r["host"] == f"testhost{host.index}/gpu0"] == ["ok", "ok", "failed"]
    retired = [e for e in events(run_dir) if e["kind"] == "slot_retired"]
    assert len(retired) == 1 and f"PID {pid}" in retired[0]["message"]
    assert by_label[("leaky", "{}")]["status"] == "ok"
    assert proc.returncode != 0 or json.loads(proc.stdout)["failed"] >= 1
    # Specsweep's own changes are undone; only the worker it could not own is left (the fixture kills it).
    assert changed_files(host) == before_files


@pytest.mark.parametrize("edited", [False, True], ids=["as-run", "edited-and-driver-failing"])
def test_restore_undoes_every_instance_a_killed_run_left(gpu_host: TestHost, tmp_path: Path, edited: bool) -> None:
    """kill -9 mid-run: the instances' drop-ins, markers and the run's lock stay; ``specsweep restore FILE``
    undoes them all, and the host is as found. Also after the file was edited to drop the configurations
    those instances ran, with ``gpus: auto`` and nvidia-smi failing (a driver fault): restore reads what the
    host holds and asks no GPU query."""
    host = gpu_host
    before_files, before_units = changed_files(host), _instances(host)
    variants = {
        "autoregressive": {"spec_args": "--algorithm ar --itl-ms 50"},
        "linear": {"spec_args": "--algorithm linear --itl-ms 50 --draft-tokens {k}", "matrix": {"k": [2, 4]}},
    }
    doc = _experiment(host, "killed", variants, gpus=8)
    doc["load"] = {"concurrency": [1], "requests": 50, "max_tokens": 64, "warmup": 0}
    path = write_experiment(tmp_path / "killed.yaml", doc)
    env = cli_env(tmp_path)
    with started_cli("sweep", str(path), "--results", str(tmp_path / "results"), "--no-report", env=env) as proc:
        dropins = "ls -d /etc/systemd/system/specsweep-gpu@*.service.d 2>/dev/null | wc -l"
        assert wait_until(lambda: int(host.admin(dropins).stdout.strip() or 0) >= 2, timeout=60)
        proc.kill()
        proc.wait()
    assert changed_files(host) != before_files  # the killed run's drop-ins, markers and lock
    if edited:
        doc = _experiment(host, "killed", {"autoregressive": variants["autoregressive"]}, gpus="auto")
        write_experiment(path, doc)
        host.admin(
            "printf '#!/bin/sh\\necho NVIDIA-SMI has failed >&2\\nexit 9\\n' > /usr/local/bin/nvidia-smi; "
            "cat /usr/local/bin/nvidia-smi"
        )
    restored = run_cli("restore", str(path), env=env)
    assert restored.returncode == 0, restored.stderr + restored.stdout
    running = "systemctl list-units 'specsweep-gpu@*' --state=active,activating,deactivating --no-legend; true"
    wait_until(lambda: not host.admin(running).stdout.strip(), timeout=30)
    assert changed_files(host) == before_files
    assert _instances(host) == before_units


def test_a_stranger_on_a_slots_port_fails_its_deployments_naming_it_never_measured_as_ours(
    gpu_host: TestHost, tmp_path: Path
) -> None:
    """Another server already answers the slot's port: our instance would fail to bind while the stranger
    answers every health check and its figures would be recorded as our configurations. Every deployment of
    the slot fails instead (``start_port_taken``), naming the process that holds the port."""
    host = gpu_host
    stranger = "specsweep-stranger.service"
    host.admin(
        f"systemd-run --unit={stranger} {PYTHON} -m orchestrator.sim --host 0.0.0.0 --port {PORT} --profile tiny"
    )
    try:
        assert wait_until(
            lambda: host.admin(f"ss -Hltn 'sport = :{PORT}'", check=False).stdout.strip() != "", timeout=30
        )
        pid = host.admin(f"systemctl show -p MainPID --value {stranger}").stdout.strip()
        variants = {
            "autoregressive": {"spec_args": "--algorithm ar"},
            "linear": {"spec_args": "--algorithm linear --draft-tokens 3"},
        }
        path = write_experiment(tmp_path / "taken.yaml", _experiment(host, "taken", variants, gpus=1))
        results = tmp_path / "results"
        proc = run_cli("sweep", str(path), "--results", str(results), "--json", "--no-report", env=cli_env(tmp_path))
        assert proc.returncode != 0
        recs = records(next((results / "taken").iterdir()))
        assert recs and all(r["status"] == "failed" for r in recs), [(r["status"], r.get("error")) for r in recs]
        assert {r["error"]["kind"] for r in recs} == {"start_port_taken"}
        assert all(f"pid {pid}" in r["error"]["message"] for r in recs), recs[0]["error"]["message"]
        # The stranger is left as it was: serving.
        assert host.admin(f"systemctl is-active {stranger}", check=False).stdout.strip() == "active"
    finally:
        host.admin(f"systemctl stop {stranger}; systemctl reset-failed {stranger} 2>/dev/null; true", check=False)
