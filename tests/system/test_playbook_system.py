"""Playbooks on the real systemd + sshd test host, reached only over SSH: both outcomes of the single-chain
check on the simulator installed as a unit (drop-ins applied, journal windows read, unit restored exactly),
and the host check against a running unit, which must change nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.playbooks import PlaybookOptions, prepare, run_playbook
from orchestrator.runs.store import RunStore
from tests.system.conftest import SimUnit
from tests.system.support import PYTHON, etc_snapshot, unit_snapshot

pytestmark = pytest.mark.timeout(180)

ROOT = Path(__file__).resolve().parents[2]


def write_experiment(tmp_path: Path, sim: SimUnit) -> Path:
    host = sim.host
    text = f"""\
name: sim-chain-systemd
host: {{ssh: "root@{host.guest_ip}", identity_file: "{host.key}", known_hosts: "{host.known_hosts}"}}
service:
  kind: systemd
  unit: {sim.unit}
  exec_start: >-
    {PYTHON} -m orchestrator.sim --host 0.0.0.0 --port {sim.port} --profile tiny --load-seconds 0.5 --seed 7
    --decode-log-interval 5 {{spec_args}} {{faults}}
server: {{url: "http://{{host}}:{sim.port}", model: sim, ready_timeout: 60s, expected_load_time: 1s}}
engine: sim
vars: {{faults: ""}}
variants:
  autoregressive: {{spec_args: "--algorithm ar"}}
  linear: {{spec_args: "--algorithm linear --draft-tokens 7"}}
  ddtree:
    spec_args: "--algorithm ddtree --budget {{budget}} --topk {{topk}}"
    matrix: {{budget: [7], topk: [1]}}
baselines: [autoregressive, linear]
load: {{concurrency: [1], warmup: 1, requests: 12, max_tokens: 48}}
"""
    path = tmp_path / "sim-chain-systemd.yaml"
    path.write_text(text)
    return path


def run_check(tmp_path: Path, sim: SimUnit, faults: str) -> tuple[dict[str, object], Path]:
    program = prepare(
        ROOT / "playbooks" / "single-chain-check.yaml",
        experiment_file=write_experiment(tmp_path, sim),
        variables={"faults": faults},
    )
    # The playbook's own load settings (C=1, 16 requests) apply; the rest comes from this experiment.
    result = run_playbook(program, PlaybookOptions(results_root=tmp_path / "results"))
    data = json.loads((result.run_dir / "expectations.json").read_text())
    return data, result.run_dir


def test_single_chain_check_passes_over_ssh_and_leaves_the_unit_as_found(tmp_path: Path, sim_unit: SimUnit) -> None:
    host = sim_unit.host
    etc_before, unit_before = etc_snapshot(host), unit_snapshot(host, sim_unit.unit)
    data, run_dir = run_check(tmp_path, sim_unit, "")
    assert data["passed"] is True, data
    assert [o["status"] for o in data["outcomes"]] == ["pass", "pass"]  # type: ignore[union-attr]
    records = RunStore.open(run_dir).records()
    assert [(r.variant, r.status) for r in records] == [("linear", "ok"), ("ddtree", "ok")]
    assert all(r.host == f"root@{host.guest_ip}" for r in records)
    window = (run_dir / str(records[1].window_file)).read_text()
    assert "DDTREE metrics:" in window  # read from the unit's journal, by cursor
    assert etc_snapshot(host) == etc_before
    assert unit_snapshot(host, sim_unit.unit) == unit_before


def test_single_chain_check_fails_on_the_commit_bug_over_ssh(tmp_path: Path, sim_unit: SimUnit) -> None:
    host = sim_unit.host
    etc_before, unit_before = etc_snapshot(host), unit_snapshot(host, sim_unit.unit)
    data, _run_dir = run_check(tmp_path, sim_unit, "--fault commit-bug")
    assert data["passed"] is False
    accept, depth = data["outcomes"]  # type: ignore[misc]
    assert accept["status"] == "fail" and "below; allowed ±10%" in accept["detail"]
    assert depth["status"] == "fail" and "exceeds commit length" in depth["detail"]
    assert any("DDTREE metrics:" in line for line in depth["evidence"])
    assert etc_snapshot(host) == etc_before
    assert unit_snapshot(host, sim_unit.unit) == unit_before


def test_host_check_on_a_running_unit_changes_nothing(tmp_path: Path, running_sim_unit: SimUnit) -> None:
    sim = running_sim_unit
    host = sim.host
    etc_before, unit_before = etc_snapshot(host), unit_snapshot(host, sim.unit)
    program = prepare(ROOT / "playbooks" / "host-check.yaml", experiment_file=write_experiment(tmp_path, sim))
    result = run_playbook(program, PlaybookOptions(results_root=tmp_path / "results"))
    statuses = {o.title: o.status for o in result.outcomes}
    for name in ("ssh", "root", "systemd", "unit", "drop-ins", "journal"):
        assert statuses[f"doctor: {name}"] == "pass", result.outcomes
    assert statuses["smoke: 1 request to the server as it runs now"] == "pass", result.outcomes
    assert statuses.get("doctor: gpu") == "skip"  # the simulator needs no GPU: not checked (issue 59 item 5)
    assert result.passed
    assert etc_snapshot(host) == etc_before
    assert unit_snapshot(host, sim.unit) == unit_before
