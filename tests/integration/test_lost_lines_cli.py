"""A log window that lost lines, through the real CLI and the simulator's ``journal-suppress`` fault.

``specsweep sweep`` of a small simulator experiment whose log drops lines mid-point with journald's notice in
their place (``Suppressed K messages from UNIT``, as journald's rate limit writes it under the unit's match):
the stored record's log window is not whole (``lost_lines``) and gives no figure, the record's accept length
comes from a whole source (``/metrics``, the responses); ``specsweep parse`` of the stored window says it is not
whole and why.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.analysis import analyse
from orchestrator.metrics import parse_window
from tests.integration.fault_support import fault_load, sweep_with_fault
from tests.reliability.harness import cli_env, run_cli

pytestmark = pytest.mark.timeout(240)


def test_a_window_whose_log_lost_lines_gives_no_log_figure_and_says_why(tmp_path: Path, home: Path) -> None:
    load = fault_load(concurrency=[2], warmup=2, requests=12, max_tokens=48)
    # Requests 1-2 warm up; once the point's fourth is done (the 6th), the next 3 log lines are dropped.
    spec = "--algorithm linear --draft-tokens 5 --decode-log-interval 2 --fault journal-suppress=6:3"
    swept = sweep_with_fault(tmp_path, home, "lost", spec, load)
    run_dir = swept.run_dir
    (record,) = swept.records
    server = record["server"]
    window_text = (run_dir / record["window_file"]).read_text()
    assert "Suppressed 3 messages from " in window_text
    integrity = server["integrity"]
    assert integrity["whole"] is False and integrity["part"] is None
    assert [r["reason"] for r in integrity["reasons"]] == ["lost_lines"]
    assert integrity["reasons"][0]["detail"].startswith("3 message(s) lost (line ")
    assert (server["accept_len"], server["acceptance_rate"], server["gen_throughput"]) == (None, None, None)
    assert server["details"]["lost_lines"]["messages"] == 3
    # What is left of the log would have given figures: they are withheld, not missing.
    unbroken = parse_window("sim", "\n".join(x for x in window_text.splitlines() if "Suppressed" not in x), cut=True)
    assert unbroken.accept_len is not None
    # The /metrics window is whole and exact: the record's accept length comes from it (or the responses).
    prom = server["prometheus"]
    assert prom["integrity"]["whole"] and prom["accept_len"] is not None
    assert prom["exactness"]["accept_len"]["kind"] == "exact"
    found = [f for f in analyse(run_dir).findings if f.check == "window_integrity"]
    assert len(found) == 1 and "lost_lines" in found[0].message
    frame_row = analyse(run_dir).frame.iloc[0]
    assert frame_row["accept_len"] is not None and frame_row["accept_len_source"] in ("prometheus", "client")
    # specsweep parse of the stored window: exit 0, no figure, one warning naming why.
    parsed = run_cli("parse", "--engine", "sim", str(run_dir / record["window_file"]), "--json", env=cli_env(home))
    assert parsed.returncode == 0, parsed.stderr
    warnings = [line for line in parsed.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and warnings[0].startswith("warning: window not whole: lost_lines: 3 message(s) lost")
    assert "journald's rate limit suppressed 3 message(s)" in warnings[0] and warnings[0].endswith("(no figures)")
    data = json.loads(parsed.stdout)
    assert data["accept_len"] is None and data["integrity"]["reasons"][0]["reason"] == "lost_lines"
