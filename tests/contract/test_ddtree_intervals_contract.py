"""A DDTree window where only some intervals report an accepted depth above their commit length is flagged, in
the window the sweep reads and in the analysis, though its mean depth and commit length look plausible.

DDTree's ``DDTREE metrics:`` lines come from research builds, not from a released wheel (docs/engines.md,
"DDTree"): the lines here are the simulator's, as the real runner stored them in tests/data/runs/ (its
``commit-bug`` fault is the field report's bug, orchestrator/sim/model.py: the commit path commits at most two
tokens while the walk reports its true depth). A clean window of the sim-demo run gets three of the sim-commit-bug
run's lines of the same configuration (budget 7, topk 1, C=1) spliced in: a window where the bug bit in some
intervals only, as in a build whose commit path fails on some batches.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from orchestrator.analysis import analyse
from orchestrator.engines.ddtree.log import depth_exceeds_commit, parse_ddtree
from orchestrator.metrics import parse_window
from tests.reliability.harness import cli_env, run_cli

RUNS = Path(__file__).resolve().parents[1] / "data" / "runs"
CLEAN_POINT = "p-e524804775"  # sim-demo: ddtree(budget=7, topk=1) at C=1
BUGGY_WINDOW = RUNS / "sim-commit-bug" / "windows" / "p-3c7898f190.log"  # the same configuration, commit-bug


def buggy_lines(count: int) -> list[str]:
    out = []
    for line in BUGGY_WINDOW.read_text().splitlines():
        samples = parse_ddtree(line).samples
        values = getattr(samples[0], "values", {}) if samples else {}
        if depth_exceeds_commit(values.get("avg_accepted_depth"), values.get("avg_commit_len")):
            out.append(line)
    assert len(out) >= count
    return out[:count]


def spliced_window() -> str:
    """The clean window with three buggy DDTree lines after its third DDTree line (never its edge line)."""
    lines = (RUNS / "sim-demo" / "windows" / f"{CLEAN_POINT}.log").read_text().splitlines()
    at = [i for i, line in enumerate(lines) if "DDTREE metrics:" in line][2] + 1
    return "\n".join(lines[:at] + buggy_lines(3) + lines[at:]) + "\n"


def test_the_window_the_sweep_reads_counts_each_impossible_interval() -> None:
    text = spliced_window()
    window = parse_window("sim", text, cut=True, version="0.5.23")  # as orchestrator/sweep/measure.py reads it
    depth, commit = window.ddtree["avg_accepted_depth"], window.ddtree["avg_commit_len"]
    assert depth is not None and commit is not None
    assert not depth_exceeds_commit(depth, commit)  # the mean looks plausible
    assert window.details["ddtree_impossible_intervals"] == 3
    assert window.details["ddtree_intervals_checked"] == window.ddtree_lines
    assert len(window.details["ddtree_impossible_examples"]) == 3
    assert "ddtree_impossible_intervals" in window.definitions
    clean = parse_window("sim", (RUNS / "sim-demo" / "windows" / f"{CLEAN_POINT}.log").read_text(), cut=True)
    assert clean.details["ddtree_impossible_intervals"] == 0


def test_the_analysis_flags_the_window_whose_mean_hides_it(tmp_path: Path) -> None:
    run = shutil.copytree(RUNS / "sim-demo", tmp_path / "sim-demo")
    text = spliced_window()
    (run / "windows" / f"{CLEAN_POINT}.log").write_text(text)
    window = parse_window("sim", text, cut=True, version="0.5.23").to_dict()
    records = [json.loads(line) for line in (run / "records.jsonl").read_text().splitlines() if line.strip()]
    for record in records:
        if record.get("point_id") == CLEAN_POINT:
            record["server"].update({k: v for k, v in window.items() if k.startswith("avg_")})
            record["server"]["details"] = window["details"]
    (run / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    found = [f for f in analyse(run).findings if f.check == "depth_vs_commit"]
    assert [(f.point, f.severity) for f in found] == [(CLEAN_POINT, "error")]
    assert "3 of 30 DDTree intervals" in found[0].message and "hides it" in found[0].message
    assert len(found[0].evidence) == 3 and all("DDTREE metrics" in line for line in found[0].evidence)
    # specsweep parse of the window names each line, as before.
    path = tmp_path / "window.log"
    path.write_text(text)
    proc = run_cli("parse", str(path), "--engine", "sim", "--json", env=cli_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("depth_vs_commit: line") == 3
    assert json.loads(proc.stdout)["details"]["ddtree_impossible_intervals"] == 3
