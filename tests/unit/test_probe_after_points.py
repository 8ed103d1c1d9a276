"""Issue 59: the lossless probe follows a deployment's points, so a run stopped in the probe has measured every point
of the deployment; its resume deploys it again for the probe alone, and only then (SweepState.probe_missing)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from orchestrator.analysis.lossless import LOSSLESS_DIR
from orchestrator.sweep.state import SweepState


def _state(tmp_path: Path, role: str | None, records: list[SimpleNamespace]) -> SimpleNamespace:
    return SimpleNamespace(
        lossless_role=lambda deployment: role,
        store=SimpleNamespace(path=tmp_path),
        resume=SimpleNamespace(latest={(r.host, f"p{i}"): r for i, r in enumerate(records)}),
    )


def _record(deployment: str, *, host: str = "local", source: str | None = None, status: str = "ok") -> SimpleNamespace:
    return SimpleNamespace(deployment_id=deployment, host=host, baseline_source=source, status=status)


def test_a_deployment_measured_here_without_its_answers_asks_for_its_probe(tmp_path: Path) -> None:
    deployment = SimpleNamespace(id="d-1")
    state = _state(tmp_path, "other", [_record("d-1")])
    assert SweepState.probe_missing(state, "local", deployment)  # type: ignore[arg-type]
    (tmp_path / LOSSLESS_DIR).mkdir()
    (tmp_path / LOSSLESS_DIR / "d-1.jsonl").write_text("{}\n", encoding="utf-8")
    assert not SweepState.probe_missing(state, "local", deployment)  # type: ignore[arg-type]


def test_no_probe_for_a_reused_baseline_another_host_the_probe_off_or_nothing_measured(tmp_path: Path) -> None:
    deployment = SimpleNamespace(id="d-1")
    reused = _state(tmp_path, "ar", [_record("d-1", source="results/x/run")])
    assert not SweepState.probe_missing(reused, "local", deployment)  # type: ignore[arg-type]
    elsewhere = _state(tmp_path, "other", [_record("d-1", host="box")])
    assert not SweepState.probe_missing(elsewhere, "local", deployment)  # type: ignore[arg-type]
    off = _state(tmp_path, None, [_record("d-1")])
    assert not SweepState.probe_missing(off, "local", deployment)  # type: ignore[arg-type]
    nothing = _state(tmp_path, "other", [_record("d-2"), _record("d-1", status="skipped")])
    assert not SweepState.probe_missing(nothing, "local", deployment)  # type: ignore[arg-type]
