"""Each DDTree interval checked against what length-capped last steps can explain (issue 49): in the window the
sweep stores (``server_metrics``) and in the analysis (``depth_vs_commit``).

DDTree's ``DDTREE metrics:`` lines come from research builds, not from a released wheel (docs/engines.md,
"DDTree"): the windows here are the simulator's, as the real runner stored them in tests/data/runs/ (its
``commit-bug`` fault is the field report's bug, orchestrator/sim/model.py). Point ``p-a8ee175715`` of sim-demo is
ddtree(budget=7, topk=1) at C=16 with 16 requests and ``--decode-log-interval 10``: three DDTree lines, the first
the window's edge. A request's last step may commit less than its walk's depth (its length cap cuts it:
orchestrator/sim/request.py ``generate``), so an interval above its commit length is impossible only when more
requests would have to end in it than the load sent.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from orchestrator.analysis import analyse
from orchestrator.engines.ddtreeintervals import check_intervals, flag_window
from orchestrator.engines.ddtreelog import parse_ddtree
from orchestrator.metrics import parse_window
from orchestrator.sweep.measure import server_metrics
from tests.unit.launch_fakes import make_experiment

RUNS = Path(__file__).resolve().parents[1] / "data" / "runs"
POINT = "p-a8ee175715"  # sim-demo: ddtree(budget=7, topk=1) at C=16, 16 requests
CLIENT = {"requests": 16, "warmup_requests": 0}
SETTINGS = {"decode_log_interval": 10}  # what the simulator's /server_info reports (engine_info.settings)
#: The field report's line (depth 5, commit 2) at this point's last batch size and a depth the window's mean
#: hides: its 10 steps x 4.5 requests x 2.89 excess / 6 need 22 requests to end in it, the load sent 16.
CRAFTED = (
    "DDTREE metrics: bs=5 budget=7 avg_actual_nodes=8.00 avg_accepted_drafts=2.00 avg_commit_len=2.00 "
    "avg_accepted_depth=4.90"
)
#: A healthy interval of the single-chain playbook (docs/engines.md): one request's last step cut by its cap.
CAPPED = (
    "DDTREE metrics: bs=1 budget=7 avg_actual_nodes=8.00 avg_accepted_drafts=4.20 avg_commit_len=4.00 "
    "avg_accepted_depth=4.20"
)


def _window(point: str = POINT, run: str = "sim-demo") -> list[str]:
    return (RUNS / run / "windows" / f"{point}.log").read_text().splitlines()


def _replace(lines: list[str], index: int, line: str) -> str:
    """The window with its ``index``-th DDTree line replaced by ``line``."""
    at = [i for i, text in enumerate(lines) if "DDTREE metrics:" in text][index]
    return "\n".join([*lines[:at], line, *lines[at + 1 :]]) + "\n"


def _details(text: str, settings: dict[str, int] | None = SETTINGS) -> dict[str, object]:
    window = parse_window("sim", text, cut=True, version="0.5.23")  # as orchestrator/sweep/measure.py reads it
    flag_window(window, CLIENT, settings)
    return window.details


def test_the_sweep_flags_one_interval_of_the_commit_bug_in_a_clean_window(tmp_path: Path) -> None:
    """The commit-bug run's interval of the same configuration and load, in place of the clean window's second
    interval (15 requests): 10 steps x 14.5 requests x 0.69 excess / 6 need 17 requests to end in it."""
    buggy = [line for line in _window("p-ccc767b31c", "sim-commit-bug") if "DDTREE metrics:" in line][1]
    text = _replace(_window(), 1, buggy)
    exp = make_experiment(tmp_path)  # engine: sim
    server = server_metrics(
        exp, text, CLIENT, before=None, after=None, during=[], elapsed_s=1.0, version="0.5.23", settings=SETTINGS
    )
    details = server["details"]
    assert details["ddtree_intervals_checked"] == 2 and details["ddtree_intervals_above"] == 1
    assert details["ddtree_steps_per_line"] == 10
    assert details["ddtree_ends_needed"] == 17 and details["ddtree_ends_possible"] == 16
    assert details["ddtree_impossible_intervals"] == 1
    assert details["ddtree_impossible_examples"] == "bs=15 budget=7 avg_accepted_depth=2.50 avg_commit_len=1.79"
    assert "ddtree_impossible_intervals" in server["definitions"]
    clean = server_metrics(
        exp, "\n".join(_window()) + "\n", CLIENT, before=None, after=None, during=[], elapsed_s=1.0, version=None
    )
    assert clean["details"]["ddtree_impossible_intervals"] == 0 and clean["details"]["ddtree_intervals_above"] == 0


def test_one_impossible_interval_is_flagged_though_the_mean_looks_plausible() -> None:
    text = _replace(_window(), 2, CRAFTED)
    window = parse_window("sim", text, cut=True, version="0.5.23")
    depth, commit = window.ddtree["avg_accepted_depth"], window.ddtree["avg_commit_len"]
    assert depth is not None and commit is not None and depth <= commit  # the mean hides it
    details = _details(text)
    assert (details["ddtree_impossible_intervals"], details["ddtree_ends_needed"]) == (1, 22)
    # Without the server's step count each line counts one step: the bound is weaker and does not flag it.
    weak = _details(text, settings=None)
    assert (weak["ddtree_steps_per_line"], weak["ddtree_impossible_intervals"]) == (1, 0)


def test_a_healthy_length_capped_last_step_is_not_flagged() -> None:
    """The single-chain playbook's healthy interval (depth 4.20 above commit 4.00: a request's last step cut by
    its length cap) in a clean C=1 window: one request ending in it explains it."""
    text = _replace(_window("p-e524804775"), 5, CAPPED)
    details = _details(text)
    assert details["ddtree_intervals_above"] == 1 and details["ddtree_ends_needed"] == 1
    assert details["ddtree_impossible_intervals"] == 0
    # The same excess in every one of the 27 intervals would need 27 requests to end: more than the 16 sent.
    lines = [(parse_ddtree(CAPPED).samples[0].values, None)] * 28  # type: ignore[attr-defined]
    assert check_intervals(lines, requests=16, steps=10)["ddtree_impossible_intervals"] == 27


def test_an_interval_deeper_than_any_last_step_is_flagged_whatever_the_load() -> None:
    """A last step commits one token at least and walks at most budget levels: budget=3 allows 2 per request."""
    edge = ({"bs": 1, "budget": 3, "avg_accepted_depth": 1.0, "avg_commit_len": 2.0}, None)
    deep = ({"bs": 1, "budget": 3, "avg_accepted_depth": 3.5, "avg_commit_len": 1.0}, None)
    verdict = check_intervals([edge, deep], requests=10_000, steps=1)
    assert verdict["ddtree_impossible_intervals"] == 1 and verdict["ddtree_ends_needed"] == 0


def _run_with(tmp_path: Path, text: str, *, with_details: bool, point: str = POINT) -> Path:
    """sim-demo with POINT's window replaced by ``text`` and its record's window figures as the sweep stores
    them (``with_details``: with the per-interval verdict, else as a record stored before it)."""
    run = shutil.copytree(RUNS / "sim-demo", tmp_path / "sim-demo")
    (run / "windows" / f"{point}.log").write_text(text)
    window = parse_window("sim", text, cut=True, version="0.5.23")
    if with_details:
        flag_window(window, CLIENT, SETTINGS)
    stored = window.to_dict()
    records = [json.loads(line) for line in (run / "records.jsonl").read_text().splitlines() if line.strip()]
    for record in records:
        if record.get("point_id") == point:
            record["server"].update({k: v for k, v in stored.items() if k.startswith("avg_")})
            record["server"]["details"] = stored["details"]
    (run / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return run


def test_the_analysis_flags_the_window_the_sweep_flagged(tmp_path: Path) -> None:
    run = _run_with(tmp_path, _replace(_window(), 2, CRAFTED), with_details=True)
    found = [f for f in analyse(run).findings if f.check == "depth_vs_commit"]
    assert [(f.point, f.severity) for f in found] == [(POINT, "error")]
    assert "1 of 2 DDTree intervals" in found[0].message
    assert "(10 decode step(s) each) would need 22 requests to end in them, the load sent 16" in found[0].message
    assert found[0].evidence == [f"windows/{POINT}.log: bs=5 budget=7 avg_accepted_depth=4.90 avg_commit_len=2.00"]


def test_the_analysis_passes_a_healthy_capped_window_and_an_older_record(tmp_path: Path) -> None:
    healthy = _run_with(tmp_path / "a", _replace(_window(), 2, CAPPED.replace("bs=1", "bs=5")), with_details=True)
    assert not [f for f in analyse(healthy).findings if f.check == "depth_vs_commit"]
    # A record stored before the sweep checked each interval carries no verdict: its mean only is checked.
    older = _run_with(tmp_path / "b", _replace(_window(), 2, CRAFTED), with_details=False)
    assert not [f for f in analyse(older).findings if f.check == "depth_vs_commit"]
