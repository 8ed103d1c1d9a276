"""Goodput as a figure of the answer (orchestrator/analysis/goodput.py): vLLM's and AIPerf's definition, one
window's figure from its request rows, added to the window frame so repeats combine like every other figure."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from orchestrator.analysis.goodput import goodput_limits, window_goodput, with_goodput
from orchestrator.runs.store import RunStore


def _row(ttft: float, e2e: float, tokens: int, ok: bool = True) -> dict[str, object]:
    return {"ok": ok, "ttft_ms": ttft, "e2e_ms": e2e, "output_tokens": tokens}


def test_a_request_is_good_when_every_limit_holds_and_failed_ones_count_in_n() -> None:
    rows = [
        _row(100, 1100, 11),  # tpot (1100 - 100) / 10 = 100 ms: good
        _row(100, 2100, 11),  # tpot 200 ms: over the tpot limit
        _row(900, 1900, 11),  # ttft over its limit
        _row(100, 1100, 11, ok=False),  # failed: never good, still one of n
    ]
    value, se = window_goodput(rows, {"ttft_ms": 500, "tpot_ms": 150}, 2.0) or (0.0, 0.0)
    assert value == pytest.approx(1 / 2.0)
    share = 1 / 4
    assert se == pytest.approx(math.sqrt(max(share * (1 - share), 1 / 4) / 4) * 4 / 2.0)
    assert window_goodput([], {"ttft_ms": 1}, 2.0) is None and window_goodput(rows, {"ttft_ms": 1}, None) is None


def test_the_window_frame_gets_goodput_with_an_interval_only_with_limits(tmp_path: Path) -> None:
    store = RunStore.create(tmp_path, "demo", {"name": "demo"}, {"deployments": []})
    run = store.path
    (run / "requests").mkdir()
    lines = [_row(100, 1100, 11), _row(100, 5100, 11)]
    (run / "requests" / "p.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    windows = pd.DataFrame(
        [
            {"status": "ok", "requests_file": "requests/p.jsonl", "duration_s": 4.0},
            {"status": "failed", "requests_file": "requests/p.jsonl", "duration_s": 4.0},
        ]
    )
    assert goodput_limits({"objective": {"maximize": "output_tok_s"}}) is None
    assert with_goodput(windows, run, None, z=1.96) is windows
    limits = goodput_limits({"objective": {"goodput": {"tpot_ms": 200}}})
    assert limits == {"tpot_ms": 200.0}
    out = with_goodput(windows, run, limits, z=1.96)
    assert out["goodput"][0] == pytest.approx(1 / 4.0)
    assert out["goodput_lo"][0] < out["goodput"][0] < out["goodput_hi"][0]
    assert math.isnan(out["goodput"][1])  # a failed window has no figure
