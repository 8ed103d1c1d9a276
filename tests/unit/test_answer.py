"""The answer's rules on hand-made frames: a point that lost requests beyond ``checks.degraded_requests`` is
degraded (kept, not ranked unless asked), the winner's ties and beaten ones come from one rule, the threshold
is validated where the experiment is read, and ``ls`` reads a killed run as interrupted."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import pandas as pd
import pytest

from orchestrator.analysis.compare import best_per_load, significance
from orchestrator.analysis.result import mark_degraded
from orchestrator.errors import ConfigError
from orchestrator.experiment.schema import load_experiment
from orchestrator.runs.liveness import effective_state
from tests.unit.test_experiment import GOOD


def _frame(rows: list[dict[str, object]]) -> pd.DataFrame:
    base = {
        "host": "h",
        "workload": "",
        "mode": "concurrency",
        "load": 4.0,
        "load_label": "C=4",
        "alias_of": None,
        "cancelled": 0,
        "errors_by_kind": None,
        "error_kind": None,
        "error_message": None,
    }
    return pd.DataFrame([{**base, **r} for r in rows])


def test_a_point_that_lost_more_than_the_threshold_is_degraded_and_says_why() -> None:
    frame = _frame(
        [
            {"label": "a", "status": "ok", "requests": 20, "errors": 2},  # 10%: not more than the threshold
            {"label": "b", "status": "ok", "requests": 20, "errors": 2, "cancelled": 1},  # 3 of 21
            {"label": "c", "status": "failed", "requests": 20, "errors": 20},
            {"label": "d", "status": "ok", "requests": 20, "errors": 10, "errors_by_kind": '{"http_500": 10}'},
        ]
    )
    marked = mark_degraded(frame, 0.10)
    assert list(marked["status"]) == ["ok", "degraded", "failed", "degraded"]
    assert list(marked["lost_requests"].fillna(-1)) == [2, 3, -1, 10]
    assert marked.loc[3, "error_message"].startswith("10 of 20 requests lost (http_500: 10)")
    assert mark_degraded(frame, 0.5)["status"].tolist() == ["ok", "ok", "failed", "ok"]


def test_a_degraded_point_is_not_ranked_unless_asked_and_beats_is_what_is_not_tied() -> None:
    frame = _frame(
        [
            {"label": "fast", "status": "degraded", "output_tok_s": 300.0, "output_tok_s_se": 1.0},
            {"label": "b", "status": "ok", "output_tok_s": 200.0, "output_tok_s_se": 1.0},
            {"label": "c", "status": "ok", "output_tok_s": 199.0, "output_tok_s_se": 1.0},
            {"label": "d", "status": "ok", "output_tok_s": 100.0, "output_tok_s_se": 1.0},
        ]
    )
    (best,) = best_per_load(frame, rule=significance(0.95)).to_dict("records")
    assert (best["label"], best["tied"], best["beats"]) == ("b", ["c"], ["d"])
    (ranked,) = best_per_load(frame, rule=significance(0.95), statuses=("ok", "degraded")).to_dict("records")
    assert (ranked["label"], ranked["tied"], ranked["beats"]) == ("fast", [], ["b", "c", "d"])


@pytest.mark.parametrize("value", ["1.5", "-0.1", "lots"])
def test_the_degraded_threshold_is_validated_with_its_key(tmp_path: Path, value: str) -> None:
    path = tmp_path / "exp.yaml"
    path.write_text(GOOD + f"checks: {{degraded_requests: {value}}}\n")
    with pytest.raises(ConfigError) as info:
        load_experiment(path)
    assert "checks.degraded_requests" in str(info.value) and str(path) in str(info.value)


def test_a_run_that_says_running_with_no_controller_holding_its_lock_is_interrupted(tmp_path: Path) -> None:
    assert effective_state(tmp_path, "running") == "interrupted"  # never locked (or its lock file is gone)
    lock = tmp_path / ".lock"
    lock.write_text("")
    assert effective_state(tmp_path, "running") == "interrupted"  # a lock file nobody holds: killed
    fd = os.open(lock, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # a live controller holds it (this descriptor stands for it)
        assert effective_state(tmp_path, "running") == "running"
    finally:
        os.close(fd)
    assert effective_state(tmp_path, "done") == "done"
