"""Issue 59, item 4: notes that do not cry wolf. After the demo, ``report`` printed 17 ``source_agreement``
notes saying the sources "disagree" and then "within their bounds" (the counts agreed; only the windows'
lengths differed) and one lossless note per configuration that passed, before the answer. A demo-sized run
(``tests/data/runs/sim-demo``: the demo's grid on the simulator) now prints at most 5 notes, and the rates that
differ by window only are one line."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from tests.integration.test_first_hour_cli import narrow
from tests.reliability.harness import run_cli

pytestmark = pytest.mark.timeout(300)

RUNS = Path(__file__).resolve().parents[1] / "data" / "runs"


def test_the_demos_report_prints_at_most_five_notes_and_one_line_for_rates_apart_by_window(tmp_path: Path) -> None:
    run = shutil.copytree(RUNS / "sim-demo", tmp_path / "sim-demo")
    home = tmp_path / "home"
    home.mkdir()
    proc = run_cli("report", str(run), env=narrow(home))
    assert proc.returncode == 0, proc.stderr
    said = proc.stdout + proc.stderr
    found = re.search(r"findings: (\d+) errors?, (\d+) warnings?, (\d+) notes?", said)
    assert found is not None, said
    assert int(found.group(3)) <= 5, said
    assert "disagree" not in said, said  # the counts agree: no finding says the sources disagree
    assert said.count("source_agreement") == 1, said  # one line for the rates apart by window only
