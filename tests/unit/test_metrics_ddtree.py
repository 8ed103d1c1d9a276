"""``DDTREE metrics:`` lines: every key=value typed, averaged per window."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.engines.ddtreelog import aggregate_ddtree, parse_ddtree
from orchestrator.engines.samples import DDTreeSample
from orchestrator.metrics import parse_window

DATA = Path(__file__).resolve().parent.parent / "data" / "logs"
FIELD_REPORT = (
    "DDTREE metrics: bs=1 budget=7 avg_actual_nodes=8.00 avg_accepted_drafts=2.00 avg_commit_len=2.00 "
    "avg_accepted_depth=5.00"
)


def test_field_report_line_typed() -> None:
    (sample,) = parse_ddtree("[2026-05-30 00:40:06 TP0] " + FIELD_REPORT).samples
    assert isinstance(sample, DDTreeSample)
    assert sample.values == {
        "bs": 1,
        "budget": 7,
        "avg_actual_nodes": 8.0,
        "avg_accepted_drafts": 2.0,
        "avg_commit_len": 2.0,
        "avg_accepted_depth": 5.0,
    }
    assert isinstance(sample.values["bs"], int)
    assert isinstance(sample.values["avg_commit_len"], float)
    assert sample.ranks == "TP0"


def test_unknown_keys_and_non_numbers_are_kept() -> None:
    (sample,) = parse_ddtree("DDTREE metrics: bs=4, mode=greedy, ratio=nan, ok=True, x.y=1e-3").samples
    assert sample.values == {"bs": 4, "mode": "greedy", "ratio": None, "ok": True, "x.y": 0.001}  # type: ignore[attr-defined]


def test_line_without_pairs_is_skipped() -> None:
    result = parse_ddtree("DDTREE metrics: (disabled)\n")
    assert (result.matched, result.skipped) == (0, 1)


def test_window_averages_every_key() -> None:
    wm = parse_window("sim", (DATA / "sim_ddtree_cat.log").read_text())
    assert wm.ddtree_lines == 2
    # Weighted by bs (1 and 2): commit (2 + 2*4) / 3, depth (5 + 2*3) / 3; bs and budget plain means.
    assert wm.ddtree == pytest.approx(
        {
            "avg_actual_nodes": 8.0,
            "avg_accepted_drafts": 8 / 3,
            "avg_commit_len": 10 / 3,
            "avg_accepted_depth": 11 / 3,
            "avg_bs": 1.5,
            "avg_budget": 7.0,
        }
    )
    data = wm.to_dict()
    assert (data["avg_commit_len"], data["avg_bs"]) == (pytest.approx(10 / 3), 1.5)
    # The same window's Decode batch lines still give the SGLang figures.
    assert (wm.accept_len, wm.gen_throughput) == (pytest.approx(2.0), pytest.approx(109.7))


def test_standard_keys_present_without_ddtree_lines() -> None:
    data = parse_window("sglang", "nothing here").to_dict()
    for key in ("avg_actual_nodes", "avg_accepted_drafts", "avg_commit_len", "avg_accepted_depth"):
        assert data[key] is None
    assert data["ddtree_lines"] == 0


def test_key_and_its_avg_twin_stay_apart() -> None:
    samples = parse_ddtree("DDTREE metrics: commit_len=3 avg_commit_len=2.5").samples
    out = aggregate_ddtree(samples)  # type: ignore[arg-type]
    assert (out["avg_commit_len"], out["mean_commit_len"]) == (2.5, 3.0)


def test_tp_copies_of_ddtree_lines_count_once() -> None:
    text = "\n".join(f"[2026-05-30 00:40:06 TP{tp}] {FIELD_REPORT}" for tp in range(4))
    wm = parse_window("sglang", text)
    assert (wm.ddtree_lines, wm.lines_duplicate) == (1, 3)


@pytest.mark.parametrize(
    "line",
    [
        pytest.param(
            "DDTREE metrics: bs=1 budget=7 avg_actual_nodes=8.00 avg_accepted_drafts=?? avg_commit_len=", id="sim-bad"
        ),
        pytest.param("DDTREE metrics: bs=1 avg_commit_len=2.0 =3", id="no-key"),
        pytest.param("DDTREE metrics: bs=1 avg_commit_len==2", id="double-equals"),
    ],
)
def test_broken_pairs_skip_the_line(line: str) -> None:
    result = parse_ddtree(line)
    assert (result.matched, result.skipped, result.samples) == (0, 1, [])


def test_prose_around_pairs_is_ignored() -> None:
    (sample,) = parse_ddtree("DDTREE metrics: step 12: bs=2, avg_commit_len=3.50 (ok)").samples
    assert sample.values == {"bs": 2, "avg_commit_len": 3.5}  # type: ignore[attr-defined]


def test_window_weights_lines_by_batch_size() -> None:
    # One line over 1 request, one over 3: the per-request averages weigh 1 : 3 (bs and budget stay plain).
    text = (
        "DDTREE metrics: bs=1 budget=7 avg_actual_nodes=8.00 avg_accepted_drafts=2.00 avg_commit_len=2.00 "
        "avg_accepted_depth=2.00\n"
        "DDTREE metrics: bs=3 budget=7 avg_actual_nodes=8.00 avg_accepted_drafts=4.00 avg_commit_len=4.00 "
        "avg_accepted_depth=4.00\n"
    )
    figures = aggregate_ddtree([s for s in parse_ddtree(text).samples if isinstance(s, DDTreeSample)])
    assert figures["avg_commit_len"] == pytest.approx((1 * 2.0 + 3 * 4.0) / 4)
    assert figures["avg_bs"] == pytest.approx(2.0)
    assert figures["avg_budget"] == pytest.approx(7.0)
