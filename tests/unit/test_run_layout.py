"""layout.json: what a run's slots ran, and its planned points counted from it (issue 49)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from orchestrator.runs.layout import planned_points, read_layout, record_layout
from orchestrator.sweep.pointcount import targets_per_deployment


def _plan() -> dict:
    def dep(id_: str, config: str, loads: list[int]) -> dict:
        points = [{"id": f"{id_}-{c}", "mode": "concurrency", "concurrency": c, "rate": None} for c in loads]
        return {"id": id_, "config_hash": config, "load_points": points}

    return {"deployments": [dep("ar", "h-ar", [1, 4]), dep("eagle", "h-e", [1, 4]), dep("eagle-r2", "h-e", [1, 4])]}


def test_a_resume_with_other_slots_keeps_the_earlier_slots_baselines(tmp_path: Path) -> None:
    # Opened on four slots of one GPU, resumed on two of two GPUs (the slot names changed).
    record_layout(tmp_path, {"ar": ["h/gpu0", "h/gpu1", "h/gpu2", "h/gpu3"]})
    layout = record_layout(tmp_path, {"ar": ["h/gpu0-1", "h/gpu2-3"]})
    assert layout == read_layout(tmp_path) == {"ar": ["h/gpu0", "h/gpu1", "h/gpu2", "h/gpu3", "h/gpu0-1", "h/gpu2-3"]}
    # The baseline's 2 loads on 6 slots, eagle's 2 loads once (its second restart is windows of the same points).
    assert planned_points(_plan(), layout) == 6 * 2 + 2
    assert planned_points(_plan(), {}) == 4


def test_the_targets_a_resumed_run_finished_a_baseline_on_count_even_when_no_layout_was_kept() -> None:
    deployments = [
        SimpleNamespace(id="ar", baseline=True, load_points=[SimpleNamespace(id="p1")]),
        SimpleNamespace(id="eagle", baseline=False, load_points=[SimpleNamespace(id="p2")]),
    ]
    schedule = SimpleNamespace(
        plan=SimpleNamespace(deployments=deployments),
        pooled=True,
        targets=["h/gpu0-1"],
        targets_of=lambda d: ["h/gpu0-1"],
        final={("h/gpu0", "p1"), ("h/gpu1", "p1"), ("h/gpu0", "p2")},
    )
    assert targets_per_deployment(schedule) == {"ar": ["h/gpu0-1", "h/gpu0", "h/gpu1"]}


def test_a_run_without_a_readable_layout_counts_each_point_once(tmp_path: Path) -> None:
    (tmp_path / "layout.json").write_text("{torn")
    assert read_layout(tmp_path) == {}
