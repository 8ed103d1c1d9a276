"""The schedule's verdict against the best static configuration (orchestrator/analysis/verification.py), read off
hand-made winners as the analysis gives them: the schedule wins and beats the best static one beyond noise
(beats), one is tied with the other's win (ties), a static one wins and beats it (loses); the ramp's open-loop
load is judged the same way, and each concurrency carries the k the engine ran."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pandas as pd
import pytest

from orchestrator.analysis.verification import verdict_text, verdicts

SCHED = (
    "vllm serve m --speculative-config "
    '\'{"method":"ngram","num_speculative_tokens":4,"num_speculative_tokens_per_batch_size":[[1,1,4],[2,8,1]]}\''
)
STATIC = 'vllm serve m --speculative-config \'{"method":"ngram","num_speculative_tokens":4}\''
LABELS = {"schedule": SCHED, "ngram(k=4)": STATIC, "autoregressive": "vllm serve m"}


def _level(mode: str, load: float, winner: str, tied: list[str], beats: list[str]) -> Any:
    label = f"C={load:g}" if mode == "concurrency" else f"rate={load:g}/s"
    runner = (tied or beats or [None])[0]
    return SimpleNamespace(
        host="h", workload="", mode=mode, load=load, load_label=label, winner=winner, tied=tied, beats=beats,
        runner_up=runner, margin=0.1, margin_lo=0.05, margin_hi=0.15,
    )  # fmt: skip


def _run(levels: list[Any], drafts: dict[str, tuple[float, float]]) -> list[Any]:
    points, rows = [], []
    for lv in levels:
        for label, command in LABELS.items():
            points.append(SimpleNamespace(host="h", workload="", label=label, load_label=lv.load_label, mode=lv.mode))
            d, t = drafts.get(lv.load_label, (0.0, 0.0)) if label == "schedule" else (0.0, 0.0)
            rows.append(
                {
                    "label": label, "command": command, "host": "h", "workload": "", "status": "ok",
                    "load_label": lv.load_label, "mode": lv.mode, "prom_details_drafts": d,
                    "prom_details_draft_tokens": t, "prom_details_accepted": 0.0, "prom_details_generated": 100.0,
                }
            )  # fmt: skip
    return verdicts(points, levels, pd.DataFrame(rows))


@pytest.mark.parametrize(
    ("winner", "tied", "beats", "outcome", "best"),
    [
        pytest.param("schedule", [], ["ngram(k=4)", "autoregressive"], "beats", "ngram(k=4)", id="beats"),
        pytest.param("schedule", ["ngram(k=4)"], ["autoregressive"], "ties", "ngram(k=4)", id="wins-but-tied"),
        pytest.param("ngram(k=4)", ["schedule"], ["autoregressive"], "ties", "ngram(k=4)", id="tied-with-winner"),
        pytest.param("autoregressive", [], ["schedule", "ngram(k=4)"], "loses", "autoregressive", id="loses"),
    ],
)
def test_the_outcome_is_the_answers_winner_tied_and_beaten(
    winner: str, tied: list[str], beats: list[str], outcome: str, best: str
) -> None:
    (verdict,) = _run([_level("concurrency", 1, winner, tied, beats)], {"C=1": (10, 40)})
    (item,) = verdict.loads
    assert (item.outcome, item.best_static) == (outcome, best)


def test_the_ramp_is_judged_apart_and_each_concurrency_says_the_k_the_engine_ran() -> None:
    levels = [
        _level("concurrency", 1, "schedule", [], ["ngram(k=4)", "autoregressive"]),
        _level("concurrency", 4, "ngram(k=4)", [], ["schedule", "autoregressive"]),
        _level("rate", 2.0, "schedule", ["ngram(k=4)"], ["autoregressive"]),
    ]
    (verdict,) = _run(levels, {"C=1": (10, 40), "C=4": (50, 200)})  # 4 per draft at C=1 and, ignored, at C=4
    assert [v.outcome for v in verdict.loads] == ["beats", "loses"]
    assert [(v.mode, v.outcome) for v in verdict.ramp] == [("rate", "ties")]
    assert verdict.ramp[0].k is None
    k1, k4 = (v.k for v in verdict.loads)
    assert (k1.scheduled_k, k1.ran, k4.scheduled_k, k4.ran) == (4, True, 1, False)
    assert verdict.ignored_at == [4]
    text = verdict_text([verdict])
    assert "# verdict: schedule: beats at C=1; loses at C=4; ties over the ramp rate=2/s" in text
    assert "the engine did not run the schedule at C=4" in text
    assert verdict.to_dict()["num_speculative_tokens_per_batch_size"] == [[1, 1, 4], [2, 8, 1]]


def test_a_run_without_a_scheduled_configuration_has_no_verdict() -> None:
    frame = pd.DataFrame([{"label": "ngram(k=4)", "command": STATIC, "host": "h", "workload": ""}])
    assert verdicts([], [], frame) == []
