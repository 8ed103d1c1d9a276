"""A ``/metrics`` window with no verify step, through the real CLI and the simulator's ``idle-window`` fault.

``specsweep sweep`` of a small simulator experiment (SGLang's dialect) whose requests, after the warm-up, are
answered from their prefill alone (one token each, no decode step): the finished-request counters grow, the
verify counter does not, and the scheduler's spec gauges still hold the warm-up's last decode-log interval
(SGLang sets them only with a ``Decode batch`` line). The stored record holds no ``/metrics`` accept length or
acceptance rate, and says why (no verify steps in the window), where the old derivation read the gauges.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.fault_support import fault_load, sweep_with_fault

pytestmark = pytest.mark.timeout(240)


def test_a_point_without_verify_steps_gives_no_accept_length(tmp_path: Path, home: Path) -> None:
    # Six warm-up requests decode (the gauges then hold their last interval); every later one is prefill only.
    load = fault_load(concurrency=[1], warmup=6, requests=4, max_tokens=32)
    swept = sweep_with_fault(tmp_path, home, "idle", "--algorithm linear --draft-tokens 5 --fault idle-window=6", load)
    (record,) = swept.records
    prom = record["server"]["prometheus"]
    assert prom["integrity"]["whole"] is True
    assert prom["details"]["verify_calls"] == 0 and prom["details"]["finished_requests"] == 4
    assert prom["details"]["gauge_accept_len"] is not None  # the gauge holds the warm-up's interval
    assert (prom["accept_len"], prom["acceptance_rate"]) == (None, None)
    for figure in ("accept_len", "acceptance_rate"):
        assert prom["details"]["no_figure"][figure].startswith("no verify steps in the window")
        assert figure not in prom["exactness"]
    assert prom["gen_throughput"] is not None and prom["exactness"]["gen_throughput"]["kind"] == "exact"
    # No source of the point has an accept length (no decode line in the log, no verify step in a response).
    assert record["server"]["accept_len"] is None
