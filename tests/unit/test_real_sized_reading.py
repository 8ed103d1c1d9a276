"""The report and the analysis on real-sized records (issue 58, N16; bench/RESULTS-scale.md): what they drop
or group to stay linear must give the same frame and the same samples."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from orchestrator.analysis.frame import _drop_unread, open_run, tidy_frame
from orchestrator.analysis.requests import samples_by_load, samples_frame
from orchestrator.runs.store import RunStore

SIM_DEMO = Path(__file__).resolve().parents[1] / "data" / "runs" / "sim-demo"


def test_records_read_for_the_frame_drop_the_samples_and_keep_every_column(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(SIM_DEMO, run)
    whole = RunStore.open(run).records()
    trimmed = RunStore.open(run).records(trim=_drop_unread)
    assert any(isinstance(v, list) for r in whole for v in (r.server or {}).values())  # samples, examples
    assert any("definitions" in (r.server or {}) for r in whole)
    assert any("counters" in ((r.server or {}).get("prometheus") or {}) for r in whole)
    for record in trimmed:
        server = record.server or {}
        assert not any(isinstance(v, list) for v in server.values())
        assert "definitions" not in server and "samples" not in server
        assert not {"counters", "gauges", "definitions"} & set(server.get("prometheus") or {})
    full_frame, full_params = tidy_frame(whole)
    trimmed_frame, trimmed_params = tidy_frame(trimmed)
    assert full_params == trimmed_params
    pd.testing.assert_frame_equal(full_frame, trimmed_frame)
    windows = open_run(run).windows  # open_run reads its records trimmed: the same columns and values
    assert windows is not None
    pd.testing.assert_frame_equal(windows.drop(columns="command"), full_frame.drop(columns="command"))


def _request(ttft_s: float, gaps: list[float], tokens: list[int]) -> dict[str, object]:
    return {"ok": True, "streamed": True, "ttft_s": ttft_s, "chunk_gaps_s": gaps, "chunk_tokens": tokens}


def test_samples_frame_holds_every_request_sample_of_each_ok_point_in_order(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(SIM_DEMO, run)
    store = RunStore.open(run)
    first = store.write_lines("requests", "p-1", [_request(0.02, [0.01], [1, 2]), _request(0.03, [], [4])])
    second = store.write_lines("requests", "p-2", [_request(0.05, [0.004, 0.006], [1, 1, 3])])
    frame = pd.DataFrame(
        {
            "status": ["ok", "failed", "ok"],
            "alias_of": [None, None, None],
            "label": ["A", "B", "C"],
            "workload": ["", "", "chat"],
            "load_label": ["C=1", "C=1", "chat C=4"],
            "requests_file": [first, second, second],
        }
    )
    samples = samples_frame(run, frame)
    assert list(samples.columns) == ["label", "workload", "load_label", "figure", "value"]
    assert samples["value"].dtype == np.float64
    rows = [tuple(r) for r in samples.itertuples(index=False)]
    # Point A: two TTFTs, then the inter-token gaps (0.01 s over the next chunk's 2 tokens: 5 ms twice);
    # B failed: none; C: one TTFT, then 4 ms and 6 ms / 3 tokens three times.
    expected = [
        ("A", "", "C=1", "ttft_ms", 20.0),
        ("A", "", "C=1", "ttft_ms", 30.0),
        ("A", "", "C=1", "itl_ms", 5.0),
        ("A", "", "C=1", "itl_ms", 5.0),
        ("C", "chat", "chat C=4", "ttft_ms", 50.0),
        ("C", "chat", "chat C=4", "itl_ms", 4.0),
        ("C", "chat", "chat C=4", "itl_ms", 2.0),
        ("C", "chat", "chat C=4", "itl_ms", 2.0),
        ("C", "chat", "chat C=4", "itl_ms", 2.0),
    ]
    assert [r[:4] for r in rows] == [e[:4] for e in expected]
    assert np.allclose([r[4] for r in rows], [e[4] for e in expected])
    assert samples_frame(run, frame[frame["status"] == "failed"]).empty
    by_load = samples_by_load(run, frame)
    assert list(by_load) == ["C=1", "chat C=4"]
    assert {key: np.concatenate(v).tolist() for key, v in by_load["C=1"].items()} == pytest.approx(
        {("ttft_ms", "A"): [20.0, 30.0], ("itl_ms", "A"): [5.0, 5.0]}
    )
    assert list(by_load["chat C=4"]) == [("ttft_ms", "C"), ("itl_ms", "C")]
