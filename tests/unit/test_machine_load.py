"""Issue 59, item 3: the controller's machine load, kept per point (orchestrator/sweep/machineload.py) and made a
warning finding (``machine_load``) where it passes ``checks.machine_load``."""

from __future__ import annotations

from orchestrator.sweep.machineload import MachineSample, high_load, machine_load, sample
from tests.unit.test_analysis_checks import baselines, checks_of, findings, point, record


def test_a_window_keeps_the_higher_load_average_and_the_busy_and_own_cpu_shares() -> None:
    start = MachineSample(wall=100.0, loadavg_1m=3.0, busy=1_000, total=2_000, own_cpu=10.0)
    end = MachineSample(wall=110.0, loadavg_1m=9.0, busy=2_800, total=4_000, own_cpu=14.0)
    assert machine_load(start, end, cpu_count=2) == {
        "loadavg_1m": 9.0,
        "cpus": 2,
        "load_per_cpu": 4.5,
        "busy_share": 0.9,  # 1,800 of 2,000 jiffies busy
        "own_cpu_share": 0.2,  # 4 s of CPU in 10 s on 2 CPUs
    }
    assert "load average 9.0 on 2 CPU(s)" in (high_load(machine_load(start, end, cpu_count=2), 2.0) or "")
    assert high_load(machine_load(start, end, cpu_count=2), 0) is None  # 0 turns it off
    assert high_load(machine_load(start, end, cpu_count=8), 2.0) is None  # 1.1 a CPU


def test_this_machine_is_sampled() -> None:
    now = sample()
    assert now.loadavg_1m is not None and now.loadavg_1m >= 0
    assert now.total is not None and now.busy is not None and 0 <= now.busy <= now.total


def test_points_measured_on_a_busy_machine_are_one_warning_finding() -> None:
    busy = {"machine": {"loadavg_1m": 9.0, "cpus": 2, "load_per_cpu": 4.5}}
    quiet = {"machine": {"loadavg_1m": 1.0, "cpus": 2, "load_per_cpu": 0.5}}
    records = [
        *baselines(),
        record("ddtree", params={"budget": 7}, **point(300.0, 4.0), **busy),
        record("ddtree", params={"budget": 16}, **point(310.0, 4.1), **quiet),
    ]
    found = [f for f in findings(records) if f.check == "machine_load"]
    assert len(found) == 1 and found[0].severity == "warning"
    assert found[0].message.startswith("1 of 4 points were measured while this machine was busy (up to 4.5")
    assert [line.split(":")[0] for line in found[0].evidence] == ["ddtree(budget=7) @ C=1 on h"]
    assert "machine_load" not in checks_of(findings(records, machine_load=5.0))
    assert "machine_load" not in checks_of(findings(records[:2]))  # records without it: no finding
