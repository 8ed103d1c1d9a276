"""Issue 59, item 7: ``ls``'s ``seconds`` of a resumed run is the time its controllers ran, not the pause between a
stop and the resume (a run stopped for a night read as a run of 12 hours)."""

from __future__ import annotations

import json
from pathlib import Path

from orchestrator.cli.commands.ls import run_summary
from orchestrator.runs.identity import running_seconds


def _run(tmp_path: Path, events: list[dict[str, object]]) -> Path:
    run_dir = tmp_path / "exp" / "20260101T000000Z-000001"
    run_dir.mkdir(parents=True)
    info = {
        "run_id": run_dir.name,
        "experiment": "exp",
        "state": "done",
        "started_at": "2026-01-01T00:00:00Z",
        "ended_at": "2026-01-01T10:00:30Z",
    }
    (run_dir / "run.json").write_text(json.dumps(info), encoding="utf-8")
    (run_dir / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    return run_dir


def test_a_resumed_runs_seconds_leave_out_the_pause(tmp_path: Path) -> None:
    run_dir = _run(
        tmp_path,
        [
            {"time": "2026-01-01T00:00:00Z", "kind": "start"},
            {"time": "2026-01-01T00:00:12Z", "kind": "deploy"},
            {"time": "2026-01-01T00:00:20Z", "kind": "end", "state": "stopped"},  # Ctrl-C: 20 s
            {"time": "2026-01-01T10:00:00Z", "kind": "start", "resumed": True},  # ten hours later
            {"time": "2026-01-01T10:00:30Z", "kind": "end", "state": "done"},  # 30 s more
        ],
    )
    assert running_seconds(run_dir) == 50.0
    summary = run_summary(run_dir)
    assert summary["resumed_at"] == ["2026-01-01T10:00:00Z"]
    assert summary["seconds"] == 50.0


def test_a_killed_opening_counts_to_its_last_event_and_a_run_never_resumed_is_unchanged(tmp_path: Path) -> None:
    killed = _run(
        tmp_path,
        [
            {"time": "2026-01-01T00:00:00Z", "kind": "start"},
            {"time": "2026-01-01T00:00:07Z", "kind": "healthy"},  # then kill -9: no end event
            {"time": "2026-01-01T10:00:00Z", "kind": "start", "resumed": True},
            {"time": "2026-01-01T10:00:30Z", "kind": "end", "state": "done"},
        ],
    )
    assert running_seconds(killed) == 37.0
    once = _run(tmp_path / "other", [{"time": "2026-01-01T00:00:00Z", "kind": "start"}])
    assert run_summary(once)["seconds"] == 10 * 3600 + 30.0  # run.json's start to end, as before
